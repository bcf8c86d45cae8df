"""What a check is and what it runs with: the registry the battery's checks add themselves to, and the
fixed inputs of one trial (standard library only; TensorFlow and NumPy are handed in at run time).
"""

import zlib
from typing import Any, Callable, List, Sequence

SEED = 20210806


class Check(object):
    """One battery entry: ``build(trial)`` makes the inputs and returns a zero-argument function that
    builds the op(s) and returns the tensors (or one tf.data.Dataset) to compare."""

    def __init__(
        self, name: str, op: str, build: Callable[["Trial"], Callable[[], List[Any]]], quick: bool = True
    ) -> None:
        self.name, self.op, self.build, self.quick = name, op, build, quick


CHECKS: "List[Check]" = []
PLANTED: "List[Check]" = []


def check(name: str, op: str, planted: bool = False, quick: bool = True) -> Callable[[Any], Any]:
    """Register a check; quick=False for a variant (another dtype, rank or flavour of an op family that a
    quick check already covers), which only the full battery runs."""

    def register(fn: Any) -> Any:
        (PLANTED if planted else CHECKS).append(Check(name, op, fn, quick))
        return fn

    return register


class Trial(object):
    """Inputs for one trial: fixed by the check's seed (identical in every run and trial); upstream
    gradients fixed within the trial and different between trials."""

    def __init__(self, tf: Any, np: Any, eager: bool, name: str, trial: int, determinism: bool) -> None:
        self.tf, self.np, self.eager, self.determinism = tf, np, eager, determinism
        seed = (SEED + zlib.crc32(name.encode("utf-8"))) % (2**31)
        self.rs = np.random.RandomState(seed)
        self.upstream_seed = (seed + 7919 * (trial + 1)) % (2**31)

    def normal(self, *shape: int) -> Any:
        return self.rs.standard_normal(shape).astype(self.np.float32)

    def upstream(self, shape: Sequence[int], dtype: Any) -> Any:
        vals = self.np.random.RandomState(self.upstream_seed).standard_normal([int(d) for d in shape])
        return self.tf.constant(vals.astype(self.np.float32), dtype=dtype)

    def _loss(self, y: Any) -> Any:
        # Gradient injection: d/dx sum(y * u) sends random upstream values u through the op's backprop, so
        # its reductions see varied data (feeding grad_ys did not expose nondeterminism in NVIDIA's TF1 tests).
        return self.tf.reduce_sum(y * self.upstream(y.shape.as_list(), y.dtype))

    def output_and_grads(self, fn: Callable[..., Any], xs: Sequence[Any]) -> List[Any]:
        tf = self.tf
        if self.eager:
            with tf.GradientTape() as tape:
                for x in xs:
                    tape.watch(x)
                y = fn(*xs)
                loss = self._loss(y)
            grads = tape.gradient(loss, list(xs))
        else:
            y = fn(*xs)
            grads = tf.gradients(self._loss(y), list(xs))
        return [y] + [tf.convert_to_tensor(g) for g in grads]  # IndexedSlices -> dense (a segment sum)

    def grads(self, fn: Callable[..., Any], xs: Sequence[Any]) -> List[Any]:
        return self.output_and_grads(fn, xs)[1:]

    def const(self, array: Any) -> Any:
        return self.tf.constant(array)


def xla_function(c: Trial, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` compiled with XLA (jit_compile=True; experimental_compile before TF 2.5). Raises XlaUnavailable
    in graph mode or where this TensorFlow has no XLA JIT, which the battery reports as skipped."""
    tf = c.tf
    if not c.eager:
        raise XlaUnavailable("XLA checks run eagerly (tf.function(jit_compile=True)); TF1 graph mode has no such API")
    try:
        compiled: Callable[..., Any] = tf.function(fn, jit_compile=True)
    except TypeError:
        compiled = tf.function(fn, experimental_compile=True)
    return compiled


class XlaUnavailable(Exception):
    """XLA cannot run in this TensorFlow or mode."""
