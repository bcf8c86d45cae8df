"""Checks of randomness and of what Keras and XLA add: unseeded random ops, tf.random.Generator, Keras
Dropout with and without a seed, bfloat16 kernels, XLA's MaxPool gradient and Keras 3's jit_compile="auto".

A random op is not an atomics problem: the question is whether its values are fixed by the seeds a script
sets. Each run of a seeded check therefore sets the seeds again the way a training script does at start-up
(so run 2 sees what a fresh process would see) and builds a fresh generator or layer; an unseeded check
clears TensorFlow's global seed, so it shows what a script that forgot the seed gets. Shapes stay tiny:
these checks are about seeds and compilation, not about reductions spread over many thread blocks.
"""

from typing import Any, Callable, List, Optional

from envpin.probe import seeding
from envpin.probe.selftest.trial import Trial, xla_function
from envpin.probe.selftest.trial import check as _check

SEED = 1234


class Unsupported(Exception):
    """The check cannot run in this TensorFlow or on this device (reported as skipped, with the reason)."""


def _set_global_seed(tf: Any, seed: Optional[int]) -> None:
    """TensorFlow's global seed (the TF1 graph-level seed); None clears it."""
    seeding.seed(seed, tf, ("seed_tf",))


def _seed_everything(tf: Any, seed: int) -> None:
    """What a script seeding itself by the recipe does: Python, NumPy, TensorFlow and, from TF 2.7,
    tf.keras.utils.set_random_seed (in Keras 3 also Keras's own seed generator)."""
    seeding.seed(seed, tf, seeding.STEPS)


def _generator(tf: Any) -> Any:
    gen = getattr(tf.random, "Generator", None) or getattr(getattr(tf.random, "experimental", None), "Generator", None)
    if gen is None:
        raise Unsupported("this TensorFlow has no tf.random.Generator (added in 2.0 as tf.random.experimental)")
    return gen


@_check("random-uniform-unseeded", "RandomUniform (tf.random.uniform, no global or op seed)")
def _uniform_unseeded(c: Trial) -> Callable[[], List[Any]]:
    # The Python-level call a script makes when it forgot every seed. With determinism on, TF >= 2.7 refuses
    # it when the op is created (RuntimeError from random_seed.get_seed); otherwise it draws from OS entropy.
    tf = c.tf

    def run() -> List[Any]:
        _set_global_seed(tf, None)
        return [tf.random.uniform([256])]

    return run


@_check(
    "random-generator-from-seed", "tf.random.Generator.from_seed (StatefulUniformFullInt / RngReadAndSkip)", quick=False
)
def _generator_from_seed(c: Trial) -> Callable[[], List[Any]]:
    # A generator made from a fixed seed draws the same stream in every process: the recommended way to get
    # random numbers that determinism allows.
    tf = c.tf
    gen = _generator(tf)

    def run() -> List[Any]:
        g = gen.from_seed(SEED)
        return [g.normal([256]), g.uniform([256])]

    return run


@_check("random-generator-nondeterministic-state", "tf.random.Generator.from_non_deterministic_state")
def _generator_nondeterministic(c: Trial) -> Callable[[], List[Any]]:
    # Seeded from OS entropy by design: refused once determinism is on (TF >= 2.7).
    tf = c.tf
    gen = _generator(tf)
    return lambda: [gen.from_non_deterministic_state().normal([256])]


def _dropout(c: Trial, seed: Any) -> Callable[[], List[Any]]:
    tf = c.tf
    layers = getattr(getattr(tf, "keras", None), "layers", None)
    if layers is None:
        raise Unsupported("this TensorFlow has no tf.keras")
    x = c.np.ones((16, 256), dtype=c.np.float32)

    def run() -> List[Any]:
        if seed is None:
            _set_global_seed(tf, None)
        else:
            _seed_everything(tf, SEED)
        return [layers.Dropout(0.5, seed=seed)(c.const(x), training=True)]

    return run


@_check("keras-dropout-seeded", "Keras Dropout(seed=7) after set_random_seed, training=True", quick=False)
def _dropout_seeded(c: Trial) -> Callable[[], List[Any]]:
    # The recipe's way: seeds set, then a layer with its own seed. The same mask in every process.
    return _dropout(c, 7)


@_check("keras-dropout-unseeded", "Keras Dropout() without any seed, training=True")
def _dropout_unseeded(c: Trial) -> Callable[[], List[Any]]:
    # Keras 2 (tf.keras before 2.16) draws the mask with a legacy stateful op, which determinism refuses without
    # a seed (TF >= 2.7); Keras 3 draws it with stateless ops seeded from Python's `random` module, which op
    # determinism does not see: a new mask for every layer, in every process unless `random` is seeded.
    return _dropout(c, None)


def _bf16(c: Trial, what: str, compute: Callable[[], Any]) -> None:
    """Run the bfloat16 kernel once; where this TensorFlow has none on this device, the check is skipped. A
    kernel that is there but refuses to run under determinism raises as it is (raises-under-determinism)."""
    try:
        compute()
    except Exception as exc:  # NotFoundError / InvalidArgumentError: no kernel registered for bfloat16
        if "determinis" in str(exc).lower():
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise Unsupported("bfloat16 %s does not run here: %s: %s" % (what, type(exc).__name__, first)) from exc


@_check("matmul-bf16", "MatMul (bfloat16) and its gradients", quick=False)
def _matmul_bf16(c: Trial) -> Callable[[], List[Any]]:
    # bfloat16 takes other kernels than float32 (oneDNN's AVX512_BF16/AMX paths on CPUs that have them, cuBLAS
    # bf16 GEMMs on Ampere and later); 128-term dot products.
    tf = c.tf
    a, b = c.normal(64, 128), c.normal(128, 64)

    def run() -> List[Any]:
        ta, tb = tf.cast(c.const(a), tf.bfloat16), tf.cast(c.const(b), tf.bfloat16)
        return c.output_and_grads(tf.matmul, [ta, tb])

    _bf16(c, "MatMul", run)
    return run


@_check("conv2d-bf16-backprop", "Conv2D (bfloat16) and its gradients", quick=False)
def _conv2d_bf16(c: Trial) -> Callable[[], List[Any]]:
    tf = c.tf
    x, f = c.normal(2, 16, 16, 8), c.normal(3, 3, 8, 8)

    def run() -> List[Any]:
        tx, tk = tf.cast(c.const(x), tf.bfloat16), tf.cast(c.const(f), tf.bfloat16)
        return c.output_and_grads(lambda xt, ft: tf.nn.conv2d(xt, ft, [1, 1, 1, 1], "SAME"), [tx, tk])

    _bf16(c, "Conv2D", run)
    return run


@_check("xla-max-pool-backprop", "XLA MaxPool gradient (jit_compile=True)")
def _xla_max_pool(c: Trial) -> Callable[[], List[Any]]:
    # tf2xla's MaxPoolGrad refuses to compile under determinism (its SelectAndScatter has no deterministic
    # implementation), whatever the device, although its message says "GPU". One small compile.
    tf = c.tf
    x = c.normal(2, 8, 8, 4)

    def grad(xt: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = tf.nn.max_pool2d(xt, 3, 2, "SAME")
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, xt)

    f = xla_function(c, grad)
    return lambda: [f(c.const(x))]


@_check("keras-auto-jit-max-pool", "Keras model with MaxPooling2D, compile() defaults, one train step", quick=False)
def _keras_auto_jit(c: Trial) -> Callable[[], List[Any]]:
    # Keras 3 (TF >= 2.16) compiles with jit_compile="auto": XLA on a GPU, where the MaxPool gradient then
    # raises under determinism; Keras 3.7+ keeps "auto" off while op determinism is on, and Keras 3 never uses
    # XLA on a machine without GPUs. Keras 2 compiles without XLA. A fresh 2-layer model per run.
    tf = c.tf
    keras = getattr(tf, "keras", None)
    if keras is None or not c.eager:
        raise Unsupported("needs tf.keras in eager mode")
    x = c.normal(4, 8, 8, 2)
    y = c.np.zeros((4, 1), dtype=c.np.float32)

    def run() -> List[Any]:
        _seed_everything(tf, SEED)
        model = keras.Sequential(
            [
                keras.layers.Conv2D(2, 3, padding="same", input_shape=(8, 8, 2)),
                keras.layers.MaxPooling2D(2),
                keras.layers.Flatten(),
                keras.layers.Dense(1),
            ]
        )
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        model.train_on_batch(x, y)
        return [tf.concat([tf.reshape(w, [-1]) for w in model.trainable_weights], 0)]

    return run
