"""Determinism self-test: per-op verdicts, the golden training hash and seed hygiene.

Standard library only at import time, Python 3.6+ (copied into every image); TensorFlow and NumPy are
imported lazily, and only in fresh child processes:

* the op battery runs in a child started with ``TF_DETERMINISTIC_OPS=1`` (plus ``enable_op_determinism()``
  on TF >= 2.8) so determinism is on before the first op; ``compare=True`` runs it again in a child with
  determinism off, which shows what the recipe buys;
* each check runs an op (or its gradient) on fixed, seeded inputs several times and compares the outputs
  **bitwise** (the raw bytes), following NVIDIA's framework-reproducibility tests: gradients are taken
  through random upstream values ("gradient injection", new values per trial) and sizes are large enough
  that the GPU kernels that use atomicAdd actually spread the reduction over many thread blocks;
* an op that raises under determinism is reported, never allowed to stop the battery.

``python -m envpin.probe.selftest [--compare] [--quick]`` prints the whole result as JSON;
``--child`` is the battery child itself.
"""

import argparse
import json
import os
import re
import struct
import sys
import time
import zlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from envpin.probe import _d9m

SCHEMA = "envpin.selftest/1"
VERDICTS = ("deterministic", "NONDETERMINISTIC", "raises-under-determinism", "skipped")

# A trial = fresh upstream gradients; within a trial the op runs at least `runs` times on identical inputs
# and every run is compared with the trial's first (NVIDIA's tests: 5 trials x 2 runs). Cheap checks then
# keep running until the check has used `budget` seconds (at most `max_runs` per trial): some kernels
# differ only now and then (measured here: weighted Bincount on CPU in 2 to 35 of 50 runs), and a few
# dozen runs catch those where 2 would not. Full: 3 x >= 2 runs; --quick: 1 x >= 2 runs, short budget.
FULL = {"trials": 3, "runs": 2, "budget": 0.25, "max_runs": 40}
QUICK = {"trials": 1, "runs": 2, "budget": 0.05, "max_runs": 10}
SEED = 20210806

# ------------------------------------------------------------------------- comparison machinery (pure)

# NumPy dtype name -> (struct format of one component, components per element).
_FORMATS = {
    "float16": ("e", 1), "float32": ("f", 1), "float64": ("d", 1),
    "complex64": ("f", 2), "complex128": ("d", 2),
    "int8": ("b", 1), "uint8": ("B", 1), "int16": ("h", 1), "uint16": ("H", 1),
    "int32": ("i", 1), "uint32": ("I", 1), "int64": ("q", 1), "uint64": ("Q", 1), "bool": ("?", 1),
}
_SIZES = {"bfloat16": 2}


def pack(array: Any) -> Dict[str, Any]:
    """One output as {dtype, shape, data}: the raw bytes are what gets compared."""
    dtype = array.dtype
    if dtype.kind in "OSU":  # strings: object arrays' bytes would be pointers
        data = json.dumps(array.tolist(), sort_keys=True, default=repr).encode("utf-8")
        return {"dtype": "object", "shape": list(array.shape), "data": data}
    return {"dtype": dtype.name, "shape": [int(d) for d in array.shape], "data": array.tobytes()}


def _count(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _itemsize(out: Dict[str, Any]) -> int:
    fmt = _FORMATS.get(out["dtype"])
    if fmt is not None:
        return struct.calcsize("=" + fmt[0]) * fmt[1]
    if out["dtype"] in _SIZES:
        return _SIZES[out["dtype"]]
    n = _count(out["shape"])
    return len(out["data"]) // n if n else 1


def _values(dtype: str, data: bytes, n: int) -> Optional[List[Any]]:
    """Decode n elements to Python numbers (complex for complex dtypes); None when not numeric."""
    if dtype == "bfloat16":  # the top 16 bits of a float32
        halves = struct.unpack("=%dH" % n, data)
        return list(struct.unpack("=%df" % n, struct.pack("=%dI" % n, *[h << 16 for h in halves])))
    fmt = _FORMATS.get(dtype)
    if fmt is None:
        return None
    flat = struct.unpack("=%d%s" % (n * fmt[1], fmt[0]), data)
    if fmt[1] == 2:
        return [complex(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
    return list(flat)


def _finite(v: Any) -> bool:
    if isinstance(v, complex):
        return _finite(v.real) and _finite(v.imag)
    return isinstance(v, (int, bool)) or (v == v and v not in (float("inf"), float("-inf")))


def compare_outputs(ref: Sequence[Dict[str, Any]], other: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Bitwise comparison of two runs' outputs.

    Returns {"elements", "differing_elements", "max_abs_diff", "notes"}. An element differs when its bytes
    differ (so -0.0 vs 0.0 and two different NaN payloads count; two identical NaNs do not).
    ``max_abs_diff`` covers differing elements that are finite in both runs; None if there were none.
    """
    elements = differing = 0
    max_abs = None  # type: Optional[float]
    notes = []  # type: List[str]
    if len(ref) != len(other):
        notes.append("runs returned %d and %d outputs" % (len(ref), len(other)))
    for idx, (a, b) in enumerate(zip(ref, other)):  # noqa: B905 - strict= needs Python 3.10; lengths noted above
        n = _count(a["shape"])
        elements += n
        if a["data"] == b["data"] and a["dtype"] == b["dtype"] and a["shape"] == b["shape"]:
            continue  # the common case, one C-level bytes comparison
        if a["dtype"] != b["dtype"] or a["shape"] != b["shape"]:
            differing += max(n, _count(b["shape"]))
            notes.append("output %d changed from %s%s to %s%s"
                         % (idx, a["dtype"], a["shape"], b["dtype"], b["shape"]))
            continue
        size = _itemsize(a)
        code = {1: "B", 2: "H", 4: "I", 8: "Q"}.get(size)
        if code is not None:
            wa, wb = memoryview(a["data"]).cast(code), memoryview(b["data"]).cast(code)
            diff_idx = [i for i in range(len(wa)) if wa[i] != wb[i]]
        else:
            diff_idx = [i for i in range(n) if a["data"][i * size:(i + 1) * size] != b["data"][i * size:(i + 1) * size]]
        differing += len(diff_idx)
        va, vb = _values(a["dtype"], a["data"], n), _values(b["dtype"], b["data"], n)
        if va is None or vb is None:
            continue
        skipped = 0
        for i in diff_idx:
            x, y = va[i], vb[i]
            if _finite(x) and _finite(y):
                d = float(abs(x - y))
                max_abs = d if max_abs is None or d > max_abs else max_abs
            else:
                skipped += 1
        if skipped:
            notes.append("output %d: %d differing elements are NaN or infinite" % (idx, skipped))
    return {"elements": elements, "differing_elements": differing, "max_abs_diff": max_abs, "notes": notes}


_PREFIX = re.compile(r"^\s*\{\{function_node [^}]*\}\}\s*")


def clean_tf_message(message: str, limit: int = 400) -> str:
    """The informative first line of a TensorFlow error (without the {{function_node ...}} prefix)."""
    text = _PREFIX.sub("", str(message or "")).strip()
    first = text.splitlines()[0].strip() if text else ""
    return first[:limit]


def classify_exception(type_name: str, message: str, determinism: bool) -> Tuple[str, str]:
    """Verdict and message for a check that raised.

    Under determinism, TensorFlow signals "no deterministic implementation" with UnimplementedError or
    InvalidArgumentError (and RuntimeError/ValueError for unseeded random ops): that is
    raises-under-determinism. Anything else, or any exception with determinism off, means the check itself
    could not run here: skipped, with the reason.
    """
    text = clean_tf_message(message)
    mentions = "determinis" in text.lower()
    if determinism and (type_name in ("UnimplementedError", "InvalidArgumentError")
                        or (type_name in ("RuntimeError", "ValueError") and mentions)):
        return "raises-under-determinism", "%s: %s" % (type_name, text)
    return "skipped", "could not run here: %s: %s" % (type_name, text)


def _fmt_diff(value: Optional[float]) -> str:
    return "n/a" if value is None else "%.6g" % value


def finish_check(name: str, op: str, comparisons: Sequence[Dict[str, Any]], seconds: float,
                 exc: Optional[Tuple[str, str]] = None, determinism: bool = True, runs: int = 0) -> Dict[str, Any]:
    """Fold a check's comparisons (or the exception it raised) into one verdict record."""
    result = {"name": name, "op": op, "seconds": round(seconds, 3), "runs": runs,
              "differing_elements": None, "max_abs_diff": None}  # type: Dict[str, Any]
    if exc is not None:
        result["verdict"], result["message"] = classify_exception(exc[0], exc[1], determinism)
        if result["verdict"] == "raises-under-determinism":
            result["message"] = ("no deterministic implementation in this TensorFlow: a model using %s "
                                 "fails once determinism is on. TensorFlow said: %s" % (op, result["message"]))
        return result
    differing = sum(c["differing_elements"] for c in comparisons)
    elements = max([c["elements"] for c in comparisons] or [0])
    diffs = [c["max_abs_diff"] for c in comparisons if c["max_abs_diff"] is not None]
    notes = sorted(set(n for c in comparisons for n in c["notes"]))
    result["differing_elements"] = differing
    result["max_abs_diff"] = max(diffs) if diffs else (None if differing else 0.0)
    if differing:
        bad = sum(1 for c in comparisons if c["differing_elements"])
        result["verdict"] = "NONDETERMINISTIC"
        result["message"] = ("%d of %d comparisons differ: %d differing elements in total (of %d per run), "
                             "max abs diff %s" % (bad, len(comparisons), differing, elements,
                                                   _fmt_diff(result["max_abs_diff"])))
    else:
        result["verdict"] = "deterministic"
        result["message"] = "%d runs bitwise identical (%d elements per run)" % (runs, elements)
    if notes:
        result["message"] += "; " + "; ".join(notes)
    return result


def summarize(checks: Sequence[Dict[str, Any]]) -> str:
    """'17/19 deterministic, 1 raises under determinism (bincount), 1 skipped'."""
    total = len(checks)
    by = {}  # type: Dict[str, List[str]]
    for c in checks:
        by.setdefault(c["verdict"], []).append(c["name"])
    parts = ["%d/%d deterministic" % (len(by.get("deterministic", [])), total)]
    if by.get("NONDETERMINISTIC"):
        parts.append("%d NONDETERMINISTIC (%s)" % (len(by["NONDETERMINISTIC"]), ", ".join(by["NONDETERMINISTIC"])))
    if by.get("raises-under-determinism"):
        names = by["raises-under-determinism"]
        parts.append("%d raises under determinism (%s)" % (len(names), ", ".join(names)))
    if by.get("skipped"):
        parts.append("%d skipped" % len(by["skipped"]))
    return ", ".join(parts)


# ------------------------------------------------------------------------- the battery (runs in the child)


class Check(object):
    """One battery entry: ``build(trial)`` makes the inputs and returns a zero-argument function that
    builds the op(s) and returns the tensors (or one tf.data.Dataset) to compare."""

    def __init__(self, name: str, op: str, build: Callable[["Trial"], Callable[[], List[Any]]]) -> None:
        self.name, self.op, self.build = name, op, build


CHECKS = []  # type: List[Check]
PLANTED = []  # type: List[Check]


def _check(name: str, op: str, planted: bool = False) -> Callable[[Any], Any]:
    def register(fn: Any) -> Any:
        (PLANTED if planted else CHECKS).append(Check(name, op, fn))
        return fn

    return register


class Trial(object):
    """Inputs for one trial: fixed by the check's seed (identical in every run and trial); upstream
    gradients fixed within the trial and different between trials."""

    def __init__(self, tf: Any, np: Any, eager: bool, name: str, trial: int, determinism: bool) -> None:
        self.tf, self.np, self.eager, self.determinism = tf, np, eager, determinism
        seed = (SEED + zlib.crc32(name.encode("utf-8"))) % (2 ** 31)
        self.rs = np.random.RandomState(seed)
        self.upstream_seed = (seed + 7919 * (trial + 1)) % (2 ** 31)

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


S1 = [1, 1, 1, 1]
S2 = [1, 2, 2, 1]
K3 = [1, 3, 3, 1]


@_check("conv2d-forward", "Conv2D")
def _conv2d_forward(c: Trial) -> Callable[[], List[Any]]:
    # cuDNN chooses (autotunes) a forward algorithm per shape; some split each output's 3*3*16 = 144-term
    # reduction across thread blocks. 8x32x32x16 gives 8192 output pixels: enough blocks to race.
    x, f = c.normal(8, 32, 32, 16), c.normal(3, 3, 16, 16)
    tf = c.tf
    return lambda: [tf.nn.conv2d(c.const(x), c.const(f), S1, "SAME")]


@_check("conv2d-backprop-filter", "Conv2DBackpropFilter")
def _conv2d_filter(c: Trial) -> Callable[[], List[Any]]:
    # NVIDIA/TF's own test shape: each filter-gradient element sums 8*64*64 = 32768 products, which cuDNN's
    # backprop-filter algorithms 0 and 3 accumulate with atomicAdd across blocks.
    x, f = c.normal(8, 64, 64, 8), c.normal(3, 3, 8, 8)
    tf = c.tf
    return lambda: c.grads(lambda ft: tf.nn.conv2d(c.const(x), ft, S1, "SAME"), [c.const(f)])


@_check("conv2d-backprop-input", "Conv2DBackpropInput")
def _conv2d_input(c: Trial) -> Callable[[], List[Any]]:
    # A 7x7 filter makes 49 overlapping windows contribute to every input pixel (x 8 output channels).
    x, f = c.normal(4, 32, 32, 4), c.normal(7, 7, 4, 8)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.conv2d(xt, c.const(f), S1, "SAME"), [c.const(x)])


@_check("bias-add-backprop", "BiasAddGrad")
def _bias_add(c: Trial) -> Callable[[], List[Any]]:
    # BiasAddGrad sums 16*32*32 = 16384 values per channel; the GPU kernel used atomicAdd for large N*H*W
    # (nondeterministic before TF 2.1 / the fwr13y patch).
    x, b = c.normal(16, 32, 32, 16), c.normal(16)
    tf = c.tf
    return lambda: c.grads(lambda bt: tf.nn.bias_add(c.const(x), bt), [c.const(b)])


@_check("max-pool-backprop", "MaxPoolGrad")
def _max_pool(c: Trial) -> Callable[[], List[Any]]:
    # 3x3 windows at stride 2 overlap: an input position collects gradient from up to 4 windows
    # (a scatter-add on GPU). Normal inputs have no ties, so the argmax itself is unambiguous.
    x = c.normal(8, 64, 64, 8)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.max_pool(xt, K3, S2, "SAME"), [c.const(x)])


@_check("avg-pool-backprop", "AvgPoolGrad")
def _avg_pool(c: Trial) -> Callable[[], List[Any]]:
    # Same overlapping 3x3/stride-2 windows: every input sums up to 4 window gradients.
    x = c.normal(8, 64, 64, 8)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.avg_pool(xt, K3, S2, "SAME"), [c.const(x)])


@_check("resize-bilinear-backprop", "ResizeBilinearGrad")
def _resize_bilinear(c: Trial) -> Callable[[], List[Any]]:
    # 32 -> 61 (a non-integer scale, as tf.image.resize uses: half-pixel centers): each input pixel collects
    # weighted gradient from ~4x4 output pixels, accumulated with atomicAdd on GPU before TF 2.4.
    x = c.normal(8, 32, 32, 8)
    v1 = c.tf.compat.v1.image
    return lambda: c.grads(lambda xt: v1.resize_bilinear(xt, [61, 61], half_pixel_centers=True), [c.const(x)])


@_check("resize-nearest-backprop", "ResizeNearestNeighborGrad")
def _resize_nearest(c: Trial) -> Callable[[], List[Any]]:
    # Nearest-neighbour upsampling 32 -> 61: 3-4 output pixels feed each input pixel's gradient (atomicAdd
    # on GPU; TF >= 2.7 raises there under determinism because no deterministic GPU kernel exists).
    x = c.normal(8, 32, 32, 8)
    v1 = c.tf.compat.v1.image
    return lambda: c.grads(
        lambda xt: v1.resize_nearest_neighbor(xt, [61, 61], half_pixel_centers=True), [c.const(x)])


@_check("matmul", "MatMul")
def _matmul(c: Trial) -> Callable[[], List[Any]]:
    # K = 1024-term dot products: large enough for cuBLAS to consider split-K algorithms; forward and both
    # gradients (each another 256- or 1024-term GEMM).
    a, b = c.normal(256, 1024), c.normal(1024, 256)
    tf = c.tf
    return lambda: c.output_and_grads(tf.matmul, [c.const(a), c.const(b)])


@_check("reduce-sum-large", "Sum")
def _reduce_sum(c: Trial) -> Callable[[], List[Any]]:
    # 4M elements (16 MB): reduced in many blocks / passes on GPU, and split over threads by Eigen on CPU.
    x = c.normal(1024, 4096)
    tf = c.tf

    def run() -> List[Any]:
        t = c.const(x)
        return [tf.reduce_sum(t), tf.reduce_sum(t, axis=0), tf.reduce_sum(t, axis=1)]

    return run


@_check("reduce-mean-large", "Mean")
def _reduce_mean(c: Trial) -> Callable[[], List[Any]]:
    # Same 4M-element input as reduce-sum-large.
    x = c.normal(1024, 4096)
    tf = c.tf

    def run() -> List[Any]:
        t = c.const(x)
        return [tf.reduce_mean(t), tf.reduce_mean(t, axis=0), tf.reduce_mean(t, axis=1)]

    return run


@_check("segment-sum", "SegmentSum")
def _segment_sum(c: Trial) -> Callable[[], List[Any]]:
    # 4096 rows into 128 sorted segments (~32 rows each, 64 columns): the GPU kernel added rows with
    # atomicAdd before TF 2.7 (and raised under determinism in 2.5-2.6).
    data = c.normal(4096, 64)
    ids = c.np.sort(c.rs.randint(0, 128, size=4096)).astype(c.np.int32)
    tf = c.tf
    return lambda: [tf.math.segment_sum(c.const(data), c.const(ids))]


@_check("unsorted-segment-sum", "UnsortedSegmentSum")
def _unsorted_segment_sum(c: Trial) -> Callable[[], List[Any]]:
    # The same volume with unsorted ids: the classic atomicAdd scatter.
    data = c.normal(4096, 64)
    ids = c.rs.randint(0, 128, size=4096).astype(c.np.int32)
    tf = c.tf
    return lambda: [tf.math.unsorted_segment_sum(c.const(data), c.const(ids), 128)]


@_check("gather-gradient", "GatherV2 gradient (UnsortedSegmentSum)")
def _gather_grad(c: Trial) -> Callable[[], List[Any]]:
    # An embedding lookup: 16384 indices into 1000 rows (~16 hits per row). Its gradient is IndexedSlices;
    # densifying it (as optimizers and tf.convert_to_tensor do) is an unsorted segment sum.
    params = c.normal(1000, 64)
    idx = c.rs.randint(0, 1000, size=16384).astype(c.np.int32)
    tf = c.tf
    return lambda: c.grads(lambda p: tf.gather(p, c.const(idx)), [c.const(params)])


@_check("softmax-xent", "SoftmaxCrossEntropyWithLogits")
def _softmax_xent(c: Trial) -> Callable[[], List[Any]]:
    # 256 x 1000 logits: the fused GPU kernel reduced each row nondeterministically before TF 2.6. The
    # official docstring's smoke test uses a (1, 10000) tensor; 256 rows give many more blocks.
    logits = c.normal(256, 1000)
    e = c.np.exp(c.normal(256, 1000))
    labels = (e / e.sum(axis=1, keepdims=True)).astype(c.np.float32)
    tf = c.tf
    return lambda: c.output_and_grads(
        lambda lg: tf.nn.softmax_cross_entropy_with_logits(labels=c.const(labels), logits=lg), [c.const(logits)])


@_check("sparse-softmax-xent", "SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent(c: Trial) -> Callable[[], List[Any]]:
    # Same shape with integer labels (raised under determinism in TF 2.6, deterministic from 2.7).
    logits = c.normal(256, 1000)
    labels = c.rs.randint(0, 1000, size=256).astype(c.np.int32)
    tf = c.tf
    return lambda: c.output_and_grads(
        lambda lg: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=c.const(labels), logits=lg),
        [c.const(logits)])


@_check("scatter-nd-add", "TensorScatterAdd")
def _scatter_nd_add(c: Trial) -> Callable[[], List[Any]]:
    # 16384 updates onto 1024 rows (~16 duplicates per row): duplicates accumulate with atomicAdd on GPU
    # (TF 2.7 made it deterministic by running it on the CPU when determinism is on).
    idx = c.rs.randint(0, 1024, size=(16384, 1)).astype(c.np.int32)
    upd = c.normal(16384, 64)
    tf = c.tf
    add = getattr(tf, "tensor_scatter_nd_add", None) or tf.tensor_scatter_add
    return lambda: [add(tf.zeros([1024, 64], tf.float32), c.const(idx), c.const(upd))]


@_check("depthwise-conv2d-backprop", "DepthwiseConv2dNativeBackpropFilter/Input")
def _depthwise(c: Trial) -> Callable[[], List[Any]]:
    # Each depthwise filter tap sums 8*32*32 = 8192 products (backprop-filter: raised under determinism on
    # GPU in TF 2.7-2.9, deterministic with cuDNN from 2.10); backprop-input gathers 9 taps per pixel.
    x, f = c.normal(8, 32, 32, 16), c.normal(3, 3, 16, 1)
    tf = c.tf
    return lambda: c.grads(lambda xt, ft: tf.nn.depthwise_conv2d(xt, ft, S1, "SAME"), [c.const(x), c.const(f)])


def _fused_bn(c: Trial, training: bool) -> Callable[[], List[Any]]:
    x, scale, offset = c.normal(16, 32, 32, 16), c.normal(16), c.normal(16)
    mean, var = c.normal(16), (c.np.abs(c.normal(16)) + 0.5).astype(c.np.float32)
    tf = c.tf
    fbn = tf.compat.v1.nn.fused_batch_norm

    def fn(xt: Any, st: Any, ot: Any) -> Any:
        if training:
            return fbn(xt, st, ot, is_training=True)[0]
        return fbn(xt, st, ot, mean=c.const(mean), variance=c.const(var), is_training=False)[0]

    return lambda: c.grads(fn, [c.const(x), c.const(scale), c.const(offset)])


@_check("fused-batch-norm-backprop", "FusedBatchNormGradV3")
def _fused_bn_training(c: Trial) -> Callable[[], List[Any]]:
    # Scale and offset gradients reduce 16*32*32 = 16384 values per channel.
    return _fused_bn(c, True)


@_check("fused-batch-norm-backprop-inference", "FusedBatchNormGradV3 (is_training=False)")
def _fused_bn_inference(c: Trial) -> Callable[[], List[Any]]:
    # Backprop with training disabled (fine-tuning a frozen BatchNormalization): the GPU path has no
    # deterministic implementation and raises under determinism from TF 2.7.
    return _fused_bn(c, False)


@_check("ctc-loss", "CTCLoss")
def _ctc_loss(c: Trial) -> Callable[[], List[Any]]:
    # 16 sequences x 64 time steps x 32 classes, labels of length 20, given as a SparseTensor so that TF runs
    # the CTCLoss kernel (cuDNN's CTCLossV2 on GPU) rather than the dense-label scan implementation. Each
    # step's logits gradient sums alpha-beta products over all label positions.
    np = c.np
    logits = c.normal(64, 16, 32)
    labels = c.rs.randint(0, 31, size=(16, 20))
    indices = np.array([[b, t] for b in range(16) for t in range(20)], dtype=np.int64)
    values = labels.reshape(-1).astype(np.int32)
    tf = c.tf
    ctc = getattr(tf.compat, "v2", tf).nn.ctc_loss

    def fn(lg: Any) -> Any:
        sparse = tf.SparseTensor(c.const(indices), c.const(values), [16, 20])
        return ctc(labels=sparse, logits=lg, label_length=None, logit_length=tf.fill([16], 64),
                   logits_time_major=True, blank_index=-1)

    return lambda: c.output_and_grads(fn, [c.const(logits)])


@_check("bincount", "Bincount/DenseBincount")
def _bincount(c: Trial) -> Callable[[], List[Any]]:
    # 65536 weighted values into 1024 bins (64 per bin): the GPU kernel adds weights with atomicAdd and
    # raises under determinism from TF 2.7.
    values = c.rs.randint(0, 1024, size=65536).astype(c.np.int32)
    weights = c.normal(65536)
    tf = c.tf
    return lambda: [tf.math.bincount(c.const(values), weights=c.const(weights), minlength=1024)]


@_check("sparse-dense-matmul", "SparseTensorDenseMatMul")
def _sparse_dense_matmul(c: Trial) -> Callable[[], List[Any]]:
    # A 1024x1024 sparse matrix with 32768 non-zeros (~32 per row) times 1024x64: the GPU kernel sums
    # products with atomicAdd (raises under determinism from TF 2.6); gradient to the dense side too.
    np = c.np
    flat = np.sort(c.rs.choice(1024 * 1024, size=32768, replace=False))
    indices = np.stack([flat // 1024, flat % 1024], axis=1).astype(np.int64)
    values, dense = c.normal(32768), c.normal(1024, 64)
    tf = c.tf

    def fn(d: Any) -> Any:
        sp = tf.SparseTensor(c.const(indices), c.const(values), [1024, 1024])
        return tf.sparse.sparse_dense_matmul(sp, d)

    return lambda: c.output_and_grads(fn, [c.const(dense)])


def _slow_identity(tf: Any, value: Any) -> Any:
    """Element i takes ((7*i) mod 5) / 2 ms: with deterministic=False a parallel stage emits elements in
    completion order, which then depends on thread scheduling."""

    def work(v: Any) -> Any:
        i = int(_d9m.to_numpy(v))
        time.sleep(((7 * i) % 5) / 2000.0)
        return v

    out = tf.py_function(work, [value], tf.int64)
    out.set_shape([])
    return out


def _nondeterministic_options(tf: Any, ds: Any) -> Any:
    opts = tf.data.Options()
    if hasattr(opts, "deterministic"):
        opts.deterministic = False
    else:
        opts.experimental_deterministic = False
    return ds.with_options(opts)


@_check("tf-data-parallel-map-order", "ParallelMapDataset")
def _data_map(c: Trial) -> Callable[[], List[Any]]:
    # A pipeline that opts out of ordering (deterministic=False, as tuning guides suggest): TF >= 2.7 with
    # determinism on rewrites it to keep order; otherwise 4 parallel calls emit in completion order.
    tf = c.tf

    def run() -> List[Any]:
        ds = tf.data.Dataset.range(32).map(lambda i: _slow_identity(tf, i), num_parallel_calls=4)
        return [_nondeterministic_options(tf, ds)]

    return run


@_check("tf-data-interleave-order", "ParallelInterleaveDataset")
def _data_interleave(c: Trial) -> Callable[[], List[Any]]:
    # Parallel interleave of 8 sources x 4 elements with cycle_length 4 and deterministic=False.
    tf = c.tf

    def source(i: Any) -> Any:
        return tf.data.Dataset.range(i * 100, i * 100 + 4).map(lambda v: _slow_identity(tf, v))

    def run() -> List[Any]:
        ds = tf.data.Dataset.range(8).interleave(source, cycle_length=4, block_length=1, num_parallel_calls=4)
        return [_nondeterministic_options(tf, ds)]

    return run


@_check("random-op-without-seed", "RandomStandardNormal (seed=0, seed2=0)")
def _unseeded_random(c: Trial) -> Callable[[], List[Any]]:
    # Not an atomics problem: a random kernel with no seed draws from OS entropy. With determinism on,
    # TF >= 2.7 refuses to run it, so a model that forgot a seed fails instead of silently diverging.
    tf = c.tf
    raw = getattr(tf, "raw_ops", None)

    def run() -> List[Any]:
        if raw is not None:
            return [raw.RandomStandardNormal(shape=[4096], dtype=tf.float32, seed=0, seed2=0)]
        from tensorflow.python.ops import gen_random_ops

        return [gen_random_ops.random_standard_normal([4096], tf.float32, seed=0, seed2=0)]

    return run


# ---- planted checks: never in the battery; the tests use them to prove the machinery catches problems.


@_check("planted-urandom-sum", "EagerPyFunc (summation order from os.urandom)", planted=True)
def _planted_urandom(c: Trial) -> Callable[[], List[Any]]:
    # 256 chunks of 256 values spanning 6 orders of magnitude; each chunk is summed sequentially in float32
    # in an order drawn from os.urandom. Mathematically every sum is the same; only the rounding differs,
    # exactly like a GPU reduction whose partial sums arrive in a different order.
    np = c.np
    x = (c.rs.standard_normal(65536) * 10.0 ** c.rs.uniform(-3, 3, size=65536)).astype(np.float32)
    tf = c.tf

    def shuffled_sums(t: Any) -> Any:
        a = _d9m.to_numpy(t).reshape(256, 256)
        keys = np.frombuffer(os.urandom(4 * a.size), dtype=np.uint32).reshape(a.shape)
        shuffled = np.take_along_axis(a, np.argsort(keys, axis=1, kind="stable"), axis=1)
        return np.cumsum(shuffled, axis=1, dtype=np.float32)[:, -1]

    def run() -> List[Any]:
        return [tf.py_function(shuffled_sums, [c.const(x)], tf.float32)]

    return run


@_check("planted-raises-under-determinism", "EagerPyFunc (no deterministic implementation)", planted=True)
def _planted_raises(c: Trial) -> Callable[[], List[Any]]:
    # Behaves like a TF kernel without a deterministic implementation: raises only when determinism is on.
    tf = c.tf
    on = c.determinism

    def kernel(t: Any) -> Any:
        if on:
            raise NotImplementedError("A deterministic implementation of PlantedOp is not currently available.")
        return t

    return lambda: [tf.py_function(kernel, [tf.constant([1.0, 2.0])], tf.float32)]


def all_checks() -> List[Check]:
    return list(CHECKS) + list(PLANTED)


def select(names: Optional[Sequence[str]]) -> List[Check]:
    """The default battery, or the named checks (planted ones only by name)."""
    if not names:
        return list(CHECKS)
    known = dict((c.name, c) for c in all_checks())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError("unknown check(s): %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(known))))
    return [known[n] for n in names]


class Evaluator(object):
    """Runs a check's tensors to NumPy: directly in eager mode (TF2); in a fresh graph and Session per run
    in graph mode (TF1 1.15: written against the TF1 API, untested here)."""

    def __init__(self, tf: Any, np: Any, eager: bool) -> None:
        self.tf, self.np, self.eager = tf, np, eager

    def _is_dataset(self, obj: Any) -> bool:
        return isinstance(obj, self.tf.data.Dataset)

    def __call__(self, compute: Callable[[], List[Any]]) -> List[Dict[str, Any]]:
        np = self.np
        if self.eager:
            outs = []
            for o in compute():
                if self._is_dataset(o):
                    outs.append(np.asarray([_d9m.to_numpy(e) for e in o]))
                else:
                    outs.append(_d9m.to_numpy(o))
            return [pack(np.asarray(o)) for o in outs]
        tf = self.tf
        v1 = tf.compat.v1
        graph = tf.Graph()
        with graph.as_default():
            built = compute()
            with v1.Session(graph=graph) as sess:
                outs = []
                for o in built:
                    if self._is_dataset(o):
                        nxt = v1.data.make_one_shot_iterator(o).get_next()
                        items = []
                        while True:
                            try:
                                items.append(sess.run(nxt))
                            except tf.errors.OutOfRangeError:
                                break
                        outs.append(np.asarray(items))
                    else:
                        outs.append(np.asarray(sess.run(o)))
        return [pack(o) for o in outs]


def run_check(check: Check, tf: Any, np: Any, evaluate: Evaluator, determinism: bool, trials: int,
              runs: int, budget: float = 0.0, max_runs: int = 0) -> Dict[str, Any]:
    """Run one check in `trials` trials of at least `runs` runs (more while within `budget` seconds, up to
    `max_runs` per trial) and compare every run with its trial's first run, bitwise."""
    started = time.time()
    comparisons = []  # type: List[Dict[str, Any]]
    done = 0
    try:
        for trial in range(trials):
            compute = check.build(Trial(tf, np, evaluate.eager, check.name, trial, determinism))
            first = evaluate(compute)
            done += 1
            n = 1
            deadline = started + budget * (trial + 1) / trials
            while n < runs or (n < max_runs and time.time() < deadline):
                comparisons.append(compare_outputs(first, evaluate(compute)))
                done += 1
                n += 1
    except Exception as exc:  # an op without a deterministic kernel must not stop the battery
        return finish_check(check.name, check.op, comparisons, time.time() - started,
                            exc=(type(exc).__name__, str(exc)), determinism=determinism, runs=done)
    return finish_check(check.name, check.op, comparisons, time.time() - started, determinism=determinism, runs=done)


def battery(determinism: bool = True, quick: bool = False, names: Optional[Sequence[str]] = None,
            rounds: int = 1) -> Dict[str, Any]:
    """The battery in this process (which must be fresh, with the environment prepared by the parent)."""
    try:
        tf, info = _d9m.import_tensorflow(determinism)
    except Exception as exc:
        return {"skipped": "TensorFlow cannot be imported: %s: %s" % (type(exc).__name__, exc)}
    import numpy as np

    plan = QUICK if quick else FULL
    eager = _d9m.is_eager(tf)
    evaluate = Evaluator(tf, np, eager)
    checks = []
    for _ in range(rounds):
        for check in select(names):
            checks.append(run_check(check, tf, np, evaluate, determinism, plan["trials"], plan["runs"],
                                    plan["budget"], plan["max_runs"]))
    return {
        "tf_version": getattr(tf, "__version__", "unknown"),
        "numpy_version": np.__version__,
        "python": _d9m.python_info(),
        "eager": eager,
        "determinism": info,
        "trials": plan["trials"],
        "runs_per_trial": plan["runs"],
        "checks": checks,
    }


# ------------------------------------------------------------------------- the parent


def run_battery(determinism: bool = True, quick: bool = False, names: Optional[Sequence[str]] = None,
                rounds: int = 1, environ: Optional[Dict[str, str]] = None, timeout: float = 600,
                python: Optional[str] = None) -> Dict[str, Any]:
    """Run the battery in a fresh child with determinism switched on (or off) in its environment."""
    args = ["--child", "--determinism", "on" if determinism else "off", "--rounds", str(rounds)]
    if quick:
        args.append("--quick")
    if names:
        args += ["--checks", ",".join(names)]
    env = _d9m.child_env(environ, determinism=determinism)
    payload, error, _seconds = _d9m.run_child("envpin.probe.selftest", args, env, timeout, python)
    if payload is None:
        return {"error": error}
    return payload


def _verdicts(checks: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [dict(c) for c in checks]


def run_selftest(compare: bool = False, quick: bool = False, environ: Optional[Dict[str, str]] = None,
                 hygiene_script: Optional[str] = None, hygiene_args: Sequence[str] = (),
                 timeout: float = 600, python: Optional[str] = None) -> Dict[str, Any]:
    """The whole self-test as one JSON-able dict (``{"skipped": reason}`` when TensorFlow cannot be imported).

    Children run concurrently (up to :func:`envpin.probe._d9m.max_jobs` TensorFlow processes at a time):
    the battery with determinism on, with ``compare`` a second battery with it off, the two golden
    training runs, and the seed-hygiene processes.
    """
    from concurrent.futures import ThreadPoolExecutor

    from envpin.probe import golden, hygiene

    started = time.time()
    with ThreadPoolExecutor(max_workers=4) as pool:
        f_on = pool.submit(run_battery, True, quick, None, 1, environ, timeout, python)
        f_off = pool.submit(run_battery, False, quick, None, 1, environ, timeout, python) if compare else None
        f_golden = pool.submit(golden.run_golden, golden.STEPS, None, None, environ, 2, timeout, python)
        f_hygiene = pool.submit(hygiene.run_hygiene, hygiene_script, list(hygiene_args), quick, environ,
                                timeout, python)
        on = f_on.result()
        off = f_off.result() if f_off is not None else None
        gold = f_golden.result()
        hyg = f_hygiene.result()
    if "skipped" in on:
        return {"skipped": on["skipped"]}
    errors = []
    result = {
        "schema": SCHEMA,
        "mode": "quick" if quick else "full",
        "python": _d9m.python_info(),
        "golden": gold,
        "hygiene": hyg,
    }  # type: Dict[str, Any]
    if "error" in on:
        errors.append("battery (determinism on): " + on["error"])
        result.update({"tf_version": None, "determinism": {"requested": "on"}, "checks": [],
                       "summary": "battery failed: " + on["error"]})
    else:
        result.update({
            "python": on["python"],  # the interpreter TensorFlow ran in
            "tf_version": on["tf_version"],
            "numpy_version": on["numpy_version"],
            "eager": on["eager"],
            "determinism": on["determinism"],
            "trials": on["trials"],
            "runs_per_trial": on["runs_per_trial"],
            "checks": _verdicts(on["checks"]),
            "summary": summarize(on["checks"]),
        })
    if off is not None:
        if "error" in off or "skipped" in off:
            errors.append("battery (determinism off): " + off.get("error", off.get("skipped", "")))
            result["without_determinism"] = []
        else:
            result["without_determinism"] = _verdicts(off["checks"])
            result["summary_without_determinism"] = summarize(off["checks"])
    if "error" in gold:
        errors.append("golden training: " + gold["error"])
    if errors:
        result["errors"] = errors
    result["seconds"] = round(time.time() - started, 3)
    return result


def problems(result: Dict[str, Any]) -> List[str]:
    """What makes a self-test fail (exit 1): ops that differ under determinism, unequal golden runs,
    hygiene findings and child failures. Ops that raise under determinism are reported, not failures:
    they say which ops a model must avoid, not that this environment is broken."""
    out = []
    for c in result.get("checks", []):
        if c["verdict"] == "NONDETERMINISTIC":
            out.append("%s (%s) is NONDETERMINISTIC with determinism on: %s" % (c["name"], c["op"], c["message"]))
    gold = result.get("golden") or {}
    if gold.get("runs_equal") is False:
        out.append("golden training differs between two fresh runs: %s" % ", ".join(gold.get("hashes", [])))
    for h in result.get("hygiene", []):
        if h.get("status") == "finding":
            out.append("%s: %s Fix: %s" % (h["check"], h["message"], h["fix"]))
    out.extend(result.get("errors", []))
    return out


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(result: Dict[str, Any]) -> str:
    """The self-test section of the probe's Markdown report."""
    if "skipped" in result:
        return "## Determinism self-test\n\nSkipped: %s\n" % result["skipped"]
    det = result.get("determinism", {})
    lines = [
        "## Determinism self-test",
        "",
        "TensorFlow %s, determinism: %s." % (result.get("tf_version"), det.get("method", det.get("requested"))),
        "",
        "**%s**" % result.get("summary", ""),
        "",
    ]
    off = dict((c["name"], c) for c in result.get("without_determinism", []))
    header = "| check | op | verdict | differing | max abs diff | seconds |"
    rule = "|---|---|---|---:|---:|---:|"
    if off:
        header = header[:-1] + " without determinism |"
        rule += "---|"
    lines += [header, rule]
    for c in result.get("checks", []):
        row = "| %s | %s | %s | %s | %s | %.2f |" % (
            _cell(c["name"]), _cell(c["op"]), c["verdict"],
            "-" if c["differing_elements"] is None else c["differing_elements"],
            _fmt_diff(c["max_abs_diff"]) if c["verdict"] != "deterministic" else "0", c["seconds"])
        if off:
            row += " %s |" % (off[c["name"]]["verdict"] if c["name"] in off else "-")
        lines.append(row)
    notes = [c for c in result.get("checks", []) if c["verdict"] != "deterministic"]
    if notes:
        lines += [""] + ["- **%s**: %s" % (c["name"], _cell(c["message"])) for c in notes]
    gold = result.get("golden") or {}
    lines += ["", "### Golden training hash", ""]
    if "hash" in gold:
        lines += [
            "- hash: `%s`" % gold["hash"],
            "- device class: `%s`" % gold["device_class"],
            "- two fresh runs equal: %s (%d steps)" % ("yes" if gold["runs_equal"] else "**NO**", gold["steps"]),
        ]
    else:
        lines.append("- not available: %s" % (gold.get("skipped") or gold.get("error")))
    lines += ["", "### Seed hygiene", ""]
    for h in result.get("hygiene", []):
        text = "- %s: %s: %s" % (h["check"], h["status"], h["message"])
        if h["status"] == "finding":
            text += " Fix: %s" % h["fix"]
        lines.append(text)
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envpin.probe.selftest", description=__doc__.splitlines()[0])
    parser.add_argument("--compare", action="store_true", help="also run the battery with determinism off")
    parser.add_argument("--quick", action="store_true", help="one trial per check, no TensorFlow hygiene runs")
    parser.add_argument("--markdown", action="store_true", help="print Markdown instead of JSON")
    parser.add_argument("--child", action="store_true", help="run the battery in this process (internal)")
    parser.add_argument("--determinism", choices=("on", "off"), default="on")
    parser.add_argument("--checks", default="", help="comma-separated check names (default: the battery)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the selected checks (child only)")
    opts = parser.parse_args(argv)
    if opts.child:
        names = [n for n in opts.checks.split(",") if n]
        select(names)  # unknown names fail here, before TensorFlow is imported
        with _d9m.StdoutToStderr():
            result = battery(opts.determinism == "on", opts.quick, names, max(1, opts.rounds))
        _d9m.emit(result)
        return 0
    result = run_selftest(compare=opts.compare, quick=opts.quick)
    if opts.markdown:
        sys.stdout.write(render_markdown(result))
    else:
        _d9m.emit(result)
    if "skipped" in result:
        return 2
    return 1 if problems(result) else 0


if __name__ == "__main__":
    sys.exit(main())
