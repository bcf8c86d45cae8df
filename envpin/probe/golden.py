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
import platform
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from envpin.portable import device
from envpin.probe import seeding, tfchild

MODEL = "envpin-golden-cnn-v1"
STEPS = 40
BATCH = 32
IMAGE = (16, 16, 3)
CLASSES = 10
EXAMPLES = 256
LEARNING_RATE = 0.05
SEED = 1234

# oneDNN-relevant extensions beyond the psABI level: oneDNN dispatches different kernels for them.
_ONEDNN_FEATURES = ("avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


# --------------------------------------------------------------------------------------- device class


def _cpu_flags() -> List[str]:
    try:
        with open("/proc/cpuinfo", "rb") as fh:
            text = fh.read(4 * 1024 * 1024).decode("utf-8", "replace")
    except OSError:
        return []
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return sorted(set(val.split()))
    return []


def cpu_isa(flags: Optional[Sequence[str]] = None, machine: Optional[str] = None) -> str:
    """'x86-64-v4+amx_bf16+avx512_bf16+...' on x86-64; the machine name plus a few SIMD features on Arm."""
    flags = _cpu_flags() if flags is None else list(flags)
    machine = machine or platform.machine() or "unknown"
    if machine in device.X86_64:
        from envpin.probe.cpu import isa_level

        try:
            level = isa_level(set(flags))
        except ValueError:
            level = "x86-64"
        extras = [f for f in _ONEDNN_FEATURES if f in flags]
        return "+".join([level, *extras])
    extras = [f for f in ("asimd", "sve", "sve2", "bf16", "i8mm", "sme") if f in flags]
    return "+".join([machine, *extras])


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _threads_field(explicit: Optional[int], env_value: Optional[str]) -> str:
    if explicit is not None and explicit > 0:
        return str(explicit)
    # Not set: TensorFlow sizes the pool from the CPUs this process may use. The class holds the effective
    # count, so "not set" on a 2-CPU machine and an explicit 2 compare equal (measured: same weights).
    return device.thread_count(env_value, str(usable_cpus()))


def _threads_source(explicit: Optional[int], env_name: str) -> str:
    if explicit is not None and explicit > 0:
        return "argument"
    raw = os.environ.get(env_name, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return env_name
    return "default (usable CPUs)"


def onednn_setting(
    tf_version: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
    machine: Optional[str] = None,
    flags: Optional[Sequence[str]] = None,
) -> str:
    """'on' or 'off' as TensorFlow will decide it: TF_ENABLE_ONEDNN_OPTS wins; unset, the default rule of
    :func:`envpin.portable.device.onednn_default` for this CPU; 'unknown' without a TensorFlow version."""
    env = os.environ if environ is None else environ
    explicit = device.onednn_switch(env.get("TF_ENABLE_ONEDNN_OPTS"))
    if explicit is not None:
        return explicit
    if tf_version is None:
        from envpin.probe.runtime import installed_tf_version

        tf_version = installed_tf_version()
    return device.onednn_default(tf_version, _cpu_flags() if flags is None else flags, machine or platform.machine())


def _nvidia_smi_gpus() -> List[Tuple[str, str]]:
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if proc.returncode != 0:
        return []
    gpus = []
    for line in proc.stdout.splitlines():
        name, _, cc = line.partition(",")
        if name.strip():
            gpus.append((name.strip(), cc.strip()))
    return gpus


def device_class(
    gpus: Optional[Sequence[Tuple[str, str]]] = None,
    intra_op: Optional[int] = None,
    inter_op: Optional[int] = None,
    onednn: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
    cpu: Optional[str] = None,
) -> str:
    """The key a golden hash is stored under: machines with equal classes should train bit-identically.

    The format is envpin.portable.device's (the one rule). Without arguments the GPUs come from nvidia-smi
    and the rest from this process's environment; the golden child passes what TensorFlow itself reports
    (a CPU-only TF on a GPU host trains on the CPU).
    """
    env = os.environ if environ is None else environ
    if gpus is None:
        gpus = _nvidia_smi_gpus()
    if gpus:
        return device.device_class(gpus, "", "", "", "")
    return device.device_class(
        [],
        cpu or cpu_isa(),
        _threads_field(intra_op, env.get("TF_NUM_INTRAOP_THREADS")),
        _threads_field(inter_op, env.get("TF_NUM_INTEROP_THREADS")),
        onednn or onednn_setting(environ=env),
    )


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


def _tf_gpus(tf: Any) -> List[Tuple[str, str]]:
    lister = getattr(getattr(tf, "config", None), "list_physical_devices", None) or getattr(
        getattr(getattr(tf, "config", None), "experimental", None), "list_physical_devices", None
    )
    if lister is None:
        return []
    gpus = []
    for dev in lister("GPU"):
        name, cc = dev.name, ""
        details = getattr(tf.config.experimental, "get_device_details", None)
        if details is not None:
            d = details(dev)
            name = d.get("device_name", name)
            if d.get("compute_capability"):
                cc = "%d.%d" % tuple(d["compute_capability"])
        gpus.append((name, cc))
    return gpus


def _onednn_from_tf(tf_version: str) -> str:
    """TensorFlow's own answer once it is imported; the documented rule only where it cannot tell."""
    from envpin.probe.tf import onednn_enabled

    enabled = onednn_enabled()
    if enabled is None:
        return onednn_setting(tf_version)
    return "on" if enabled else "off"


def train_once(steps: int = STEPS, intra_op: Optional[int] = None, inter_op: Optional[int] = None) -> Dict[str, Any]:
    """One golden training run in this process (which must be fresh); returns the JSON-able result."""
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
    _seed_everything(tf)
    if eager:
        weights, loss = _train_eager(tf, steps)
    else:
        weights, loss = _train_graph_tf1(tf, steps, intra_op, inter_op)
    onednn = _onednn_from_tf(version)
    settings = {
        "intra_op": _threads_field(intra_op, os.environ.get("TF_NUM_INTRAOP_THREADS")),
        "inter_op": _threads_field(inter_op, os.environ.get("TF_NUM_INTEROP_THREADS")),
        "intra_op_source": _threads_source(intra_op, "TF_NUM_INTRAOP_THREADS"),
        "inter_op_source": _threads_source(inter_op, "TF_NUM_INTEROP_THREADS"),
        "onednn": onednn,
        "env": tfchild.relevant_env(),
    }
    return {
        "hash": weights_digest(weights),
        "device_class": device_class(gpus=_tf_gpus(tf), intra_op=intra_op, inter_op=inter_op, onednn=onednn),
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
    timeout: float = 600,
    python: Optional[str] = None,
) -> Dict[str, Any]:
    """Train in ``runs`` fresh processes (at once, up to the child limit) and compare the weight hashes.

    The children inherit ``environ`` (default: this process's environment), so TF_ENABLE_ONEDNN_OPTS,
    TF_NUM_*_THREADS, OMP_NUM_THREADS and the like pass through; explicit thread counts are passed as
    arguments and applied before TensorFlow's runtime starts.
    """
    args = ["--child", "--steps", str(steps)]
    if intra_op is not None:
        args += ["--intra-op", str(intra_op)]
    if inter_op is not None:
        args += ["--inter-op", str(inter_op)]
    env = tfchild.child_env(environ, determinism=True)
    results = tfchild.run_children("envpin.probe.golden", args, env, timeout, python, runs)
    payloads = []
    for payload, error, _seconds in results:
        if payload is None:
            return {"error": error, "steps": steps}
        if "skipped" in payload:
            return {"skipped": payload["skipped"], "steps": steps}
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
    opts = parser.parse_args(argv)
    if opts.child:
        with tfchild.StdoutToStderr():
            result = train_once(opts.steps, opts.intra_op, opts.inter_op)
    else:
        result = run_golden(opts.steps, opts.intra_op, opts.inter_op)
    tfchild.emit(result)
    return 0 if (result.get("runs_equal", True) and "error" not in result) else 1


if __name__ == "__main__":
    sys.exit(main())
