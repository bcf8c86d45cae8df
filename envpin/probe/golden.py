"""Golden training hash: train a small canonical Keras model in two fresh processes and hash the weights.

Standard library only at import time (Python 3.6+); TensorFlow and NumPy are imported in the child.

Equal hashes from two fresh processes mean this machine trains run-to-run bit-identically. The hash is
keyed by its device class (the one rule in :mod:`envpin.portable.device`: GPU model + compute capability, or
CPU ISA level + thread settings + oneDNN setting), so another machine of the same class can say whether it
trains bit-identically to this one. On CPU the class has to include the thread settings and oneDNN: Eigen
and oneDNN split reductions by the number of threads, and oneDNN's kernels sum in a different order than
Eigen's, so either changes the float32 rounding and therefore the final weights.

``python -m envpin.probe.golden``          both runs, prints one JSON object
``python -m envpin.probe.golden --child``  one training run (what the parent starts twice)
"""

import argparse
import hashlib
import os
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from envpin.probe import seeding, tfchild
from envpin.probe.deviceclass import (  # the key a golden hash is stored under
    _threads_field,
    _threads_source,
    device_class,
    onednn_from_tf,
    tf_gpus,
)

MODEL = "envpin-golden-cnn-v1"
STEPS = 40
BATCH = 32
IMAGE = (16, 16, 3)
CLASSES = 10
EXAMPLES = 256
LEARNING_RATE = 0.05
SEED = 1234

# --------------------------------------------------------------------------------------- the child


def weights_digest(arrays: Sequence[Any]) -> str:
    """sha256 over every weight in model order: index, dtype, shape, then the little-endian C-order bytes."""
    import numpy as np

    h = hashlib.sha256(MODEL.encode("ascii"))
    for i, arr in enumerate(arrays):
        a = np.ascontiguousarray(np.asarray(arr))
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        h.update(("%d:%s:%s\n" % (i, a.dtype.name, "x".join(str(d) for d in a.shape))).encode("ascii"))
        h.update(a.tobytes())
    return "sha256:" + h.hexdigest()


def _layers(tf: Any) -> List[Any]:
    """Conv -> max-pool -> conv -> avg-pool -> dense -> dense, every initializer seeded explicitly."""
    k = tf.keras
    # TF 1.x's v1 Keras API names the class glorot_uniform only
    glorot = getattr(k.initializers, "GlorotUniform", None) or k.initializers.glorot_uniform
    return [
        k.Input(shape=IMAGE),
        k.layers.Conv2D(8, 3, padding="same", activation="relu", kernel_initializer=glorot(seed=SEED + 1)),
        k.layers.MaxPooling2D(2),
        k.layers.Conv2D(16, 3, padding="same", activation="relu", kernel_initializer=glorot(seed=SEED + 2)),
        k.layers.AveragePooling2D(2),
        k.layers.Flatten(),
        k.layers.Dense(32, activation="relu", kernel_initializer=glorot(seed=SEED + 3)),
        k.layers.Dense(CLASSES, kernel_initializer=glorot(seed=SEED + 4)),
    ]


def _data(tf: Any) -> Tuple[Any, Any]:
    """Synthetic images and labels from stateless RNG: the same bits in every process, no global state.
    Labels come from a fixed random projection, so the loss (and every gradient) is far from trivial."""
    x = tf.random.stateless_normal((EXAMPLES, *IMAGE), seed=[SEED, 1])
    proj = tf.random.stateless_normal((IMAGE[0] * IMAGE[1] * IMAGE[2], CLASSES), seed=[SEED, 2])
    y = tf.argmax(tf.matmul(tf.reshape(x, [EXAMPLES, -1]), proj), axis=1, output_type=tf.int32)
    return x, y


def _seed_everything(tf: Any) -> None:
    """Python, NumPy, TensorFlow and, from TF 2.7, Keras's set_random_seed (what the recipes ask for)."""
    seeding.seed(SEED, tf, seeding.STEPS)


def _train_eager(tf: Any, steps: int) -> Tuple[List[Any], float]:
    model = tf.keras.Sequential(_layers(tf))
    x_all, y_all = _data(tf)
    variables = model.trainable_variables

    def one_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, variables)
        for i, v in enumerate(variables):
            v.assign_sub(LEARNING_RATE * grads[i])
        return loss

    step: Callable[[Any, Any], Any] = tf.function(one_step)
    loss: Any = None
    for i in range(steps):
        lo = (i * BATCH) % EXAMPLES
        loss = step(x_all[lo : lo + BATCH], y_all[lo : lo + BATCH])
    return [tfchild.to_numpy(w) for w in model.weights], float(tfchild.to_numpy(loss))


def _train_graph_tf1(tf: Any, steps: int, intra: Optional[int], inter: Optional[int]) -> Tuple[List[Any], float]:
    """TF1 path: graph + Session, run on TF 1.15 (tests/oldtf/test_golden_oldtf.py). Not on 1.12 and older:
    their Keras takes no Input layer in a Sequential, and _layers() starts with one."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        seeding.seed(SEED, tf, ("seed_tf",))  # the graph's own seed: set inside as_default()
        model = tf.keras.Sequential(_layers(tf))
        x_all, y_all = _data(tf)
        x_ph = v1.placeholder(tf.float32, (BATCH, *IMAGE))
        y_ph = v1.placeholder(tf.int32, (BATCH,))
        logits = model(x_ph, training=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_ph, logits=logits))
        variables = model.trainable_variables
        grads = tf.gradients(loss, variables)
        train = tf.group(*[v1.assign_sub(v, LEARNING_RATE * grads[i]) for i, v in enumerate(variables)])
        config = v1.ConfigProto(intra_op_parallelism_threads=intra or 0, inter_op_parallelism_threads=inter or 0)
        with v1.Session(graph=graph, config=config) as sess:
            sess.run(v1.global_variables_initializer())
            xs, ys = sess.run([x_all, y_all])
            value: Any = None
            for i in range(steps):
                lo = (i * BATCH) % EXAMPLES
                _, value = sess.run([train, loss], {x_ph: xs[lo : lo + BATCH], y_ph: ys[lo : lo + BATCH]})
            weights = sess.run(model.weights)
    return list(weights), float(value)


def train_once(
    steps: int = STEPS,
    intra_op: Optional[int] = None,
    inter_op: Optional[int] = None,
    replicas: Optional[int] = None,
    trace_dir: Optional[str] = None,
    replica_steps: Optional[int] = None,
) -> Dict[str, Any]:
    """One golden training run in this process (which must be fresh); returns the JSON-able result.

    With `replicas`, the process then runs the multi-replica self-test's MirroredStrategy set-up too
    (:mod:`envpin.probe.replicas`), its result under ``mirrored``: the two golden children are the two fresh
    runs it needs, so it costs no TensorFlow start-up of its own. The devices are split before the first op,
    which leaves the golden training's numerics alone (the split of a CPU into logical devices shares its
    thread pools; tests/tf/test_selftest_replicas.py compares the hashes with and without)."""
    started = time.time()
    try:
        tf, det = tfchild.import_tensorflow(determinism=True)
    except Exception as exc:  # ImportError, or a broken install raising anything else
        return {"skipped": "TensorFlow cannot be imported: %s: %s" % (type(exc).__name__, exc)}
    version = getattr(tf, "__version__", "unknown")
    eager = tfchild.is_eager(tf)
    if eager:
        # Thread pools are sized when the runtime starts: set them before the first op.
        if intra_op is not None:
            tf.config.threading.set_intra_op_parallelism_threads(intra_op)
        if inter_op is not None:
            tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    mirrored: Optional[Dict[str, Any]] = None
    devices: Optional[Tuple[List[str], str]] = None
    if replicas:
        from envpin.probe import replicas as multi

        too_old = multi.too_old(tf)
        if too_old:
            mirrored = {"skipped": too_old}
        else:
            try:
                devices = multi.prepare_devices(tf, replicas)
            except ValueError as exc:
                mirrored = {"error": str(exc)}
    _seed_everything(tf)
    if eager:
        weights, loss = _train_eager(tf, steps)
    else:
        weights, loss = _train_graph_tf1(tf, steps, intra_op, inter_op)
    onednn = onednn_from_tf(version)
    settings = {
        "intra_op": _threads_field(intra_op, os.environ.get("TF_NUM_INTRAOP_THREADS")),
        "inter_op": _threads_field(inter_op, os.environ.get("TF_NUM_INTEROP_THREADS")),
        "intra_op_source": _threads_source(intra_op, "TF_NUM_INTRAOP_THREADS"),
        "inter_op_source": _threads_source(inter_op, "TF_NUM_INTEROP_THREADS"),
        "onednn": onednn,
        "env": tfchild.relevant_env(),
    }
    if devices is not None:
        trace = os.path.join(trace_dir, "mirrored-%d.bin" % os.getpid()) if trace_dir else None
        mirrored = multi.mirrored_run(tf, det, devices[0], devices[1], replica_steps or multi.STEPS, trace)
    extra = {} if mirrored is None else {"mirrored": mirrored}
    return {
        **extra,
        "hash": weights_digest(weights),
        "device_class": device_class(gpus=tf_gpus(tf), intra_op=intra_op, inter_op=inter_op, onednn=onednn),
        "tf_version": version,
        "model": MODEL,
        "steps": steps,
        "final_loss": loss,
        "weights": len(weights),
        "determinism": det["method"],
        "settings": settings,
        "seconds": round(time.time() - started, 3),
    }


# --------------------------------------------------------------------------------------- the parent


def run_golden(
    steps: int = STEPS,
    intra_op: Optional[int] = None,
    inter_op: Optional[int] = None,
    environ: Optional[Mapping[str, str]] = None,
    runs: int = 2,
    timeout: Optional[float] = None,
    python: Optional[str] = None,
    replicas: Optional[int] = None,
    trace_dir: Optional[str] = None,
    replica_steps: Optional[int] = None,
) -> Dict[str, Any]:
    """Train in ``runs`` fresh processes (at once, up to the child limit) and compare the weight hashes.

    With ``replicas`` each child also runs the MirroredStrategy set-up (:func:`train_once`); their
    results come back under ``mirrored_runs``, (payload, None) per child, for
    :func:`envpin.probe.replicas.assemble_mirrored`.

    The children inherit ``environ`` (default: this process's environment), so TF_ENABLE_ONEDNN_OPTS,
    TF_NUM_*_THREADS, OMP_NUM_THREADS and the like pass through; explicit thread counts are passed as
    arguments and applied before TensorFlow's runtime starts.
    """
    args = ["--child", "--steps", str(steps)]
    if intra_op is not None:
        args += ["--intra-op", str(intra_op)]
    if inter_op is not None:
        args += ["--inter-op", str(inter_op)]
    if replicas:
        args += ["--replicas", str(replicas), "--replica-steps", str(replica_steps or 0)]
        args += ["--trace-dir", trace_dir] if trace_dir else []
    env = tfchild.child_env(environ, determinism=True)
    results = tfchild.run_children("envpin.probe.golden", args, env, timeout, python, runs)
    payloads = []
    mirrored_runs = []
    for payload, error, _seconds in results:
        if payload is None:
            return dict(tfchild.failure(error, "golden training"), steps=steps)
        if "skipped" in payload:
            return {"skipped": payload["skipped"], "steps": steps}
        if "mirrored" in payload:
            mirrored_runs.append((payload.pop("mirrored"), None))
        payloads.append(payload)
    first = payloads[0]
    hashes = [p["hash"] for p in payloads]
    out = dict(first)
    out["hashes"] = hashes
    out["runs"] = runs
    out["runs_equal"] = len(set(hashes)) == 1
    out["seconds"] = [p["seconds"] for p in payloads]
    out["final_losses"] = [p["final_loss"] for p in payloads]
    out.pop("final_loss", None)
    if mirrored_runs:
        out["mirrored_runs"] = mirrored_runs
    return out


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envpin.probe.golden", description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help="one training run in this process")
    parser.add_argument("--steps", type=_positive, default=STEPS)
    parser.add_argument("--intra-op", type=_positive, default=None, help="intra-op threads (default: TF's)")
    parser.add_argument("--inter-op", type=_positive, default=None, help="inter-op threads (default: TF's)")
    parser.add_argument("--replicas", type=_positive, default=None, help="then the MirroredStrategy set-up")
    parser.add_argument("--replica-steps", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--trace-dir", default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.child:
        with tfchild.StdoutToStderr():
            result = train_once(
                opts.steps, opts.intra_op, opts.inter_op, opts.replicas, opts.trace_dir, opts.replica_steps or None
            )
    else:
        result = run_golden(opts.steps, opts.intra_op, opts.inter_op)
    tfchild.emit(result)
    return 0 if (result.get("runs_equal", True) and "error" not in result) else 1


if __name__ == "__main__":
    sys.exit(main())
