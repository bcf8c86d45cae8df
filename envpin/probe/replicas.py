"""Multi-replica self-test: the same training step on several replicas, repeated in fresh processes.

Standard library only at import time (Python 3.6+); TensorFlow and NumPy are imported in the children.

Two set-ups, each run twice in fresh processes and compared bit for bit:

* **MirroredStrategy** over N devices in one process: every visible GPU, or on a CPU-only machine the CPU
  split into N logical devices (what TensorFlow's own distribution tests do). An all-reduce check (odd-sized
  vectors, SUM and MEAN, repeated) and a small training step whose gradients are all-reduced explicitly.
* **MultiWorkerMirroredStrategy** (MWMS) across two worker processes on loopback, the cluster given by
  ``TF_CONFIG`` and the collectives pinned to ``RING`` (the distributed recipe's setting): real collectives
  between processes. The same worker program runs on Slurm nodes with ``--resolver slurm``.

Every collective's output (each gradient all-reduce, each all-reduce check) and the weights after each
step are traced per replica: the child writes the raw little-endian bytes to a trace file and lists each
entry with its sha256, so the parent finds the *first* collective that differs between runs (or between
replicas, which an all-reduce must never allow) and the first differing element, without NumPy.

``python -m envpin.probe.replicas [--replicas N] [--quick] [--plant HAZARD]``  both set-ups, one JSON object
``python -m envpin.probe.replicas --child mirrored --replicas N --trace FILE``   one MirroredStrategy run
``python -m envpin.probe.replicas --worker [--resolver tf_config|slurm] [--trace FILE]``   one MWMS worker

``--plant`` runs a known hazard so the verdict can be checked in the other direction: ``generator`` draws
input noise in every replica from a ``tf.random.Generator`` made under the strategy's scope and seeded from
entropy (op determinism refuses ``from_non_deterministic_state()``, not a seed a script drew itself);
``replicas`` runs the second MirroredStrategy run with one replica more.
"""

import argparse
import hashlib
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envpin.probe import tfchild

MODEL = "envpin-replicas-mlp-v1"
STEPS = 6
GLOBAL_BATCH = 32
FEATURES = 24
HIDDEN = 32
CLASSES = 8
EXAMPLES = 256
LEARNING_RATE = 0.1
SEED = 1234
ALLREDUCE_SIZE = 4099  # odd and prime: no even split into chunks
ALLREDUCE_ROUNDS = 3
PLANTS = ("generator", "replicas")
MIN_TF = (2, 4)  # experimental_distribute_values_from_function and CommunicationOptions


# --------------------------------------------------------------------------------------- trace files


class Tracer(object):
    """Appends each traced array's raw bytes to a file and keeps the index (one entry per array)."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.entries: List[Dict[str, Any]] = []
        self._fh = open(path, "wb") if path else None  # noqa: SIM115 -- open while the run lasts, closed by close()
        self._offset = 0

    def add(self, name: str, step: int, replica: int, value: Any) -> None:
        import numpy as np

        a = np.ascontiguousarray(np.asarray(value))
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        data = a.tobytes()
        entry = {
            "name": name,
            "step": step,
            "replica": replica,
            "dtype": a.dtype.name,
            "shape": [int(d) for d in a.shape],
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        if self._fh is not None:
            entry["offset"] = self._offset
            entry["bytes"] = len(data)
            self._fh.write(data)
            self._offset += len(data)
        self.entries.append(entry)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def _read_span(path: str, offset: int, size: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(size)


_FORMATS = {"float32": ("<f", 4), "float64": ("<d", 8), "int32": ("<i", 4), "int64": ("<q", 8)}


def _unravel(index: int, shape: Sequence[int]) -> List[int]:
    out = []
    for dim in reversed(list(shape)):
        out.append(index % dim if dim else 0)
        index = index // dim if dim else 0
    return list(reversed(out))


def first_difference(a: Dict[str, Any], a_path: str, b: Dict[str, Any], b_path: str) -> Dict[str, Any]:
    """Where two traced arrays first differ: flat index, multi-index, both values and how many elements
    differ (bitwise: -0.0 and 0.0 differ). Needs both trace files; without them, only that the hashes do."""
    out: Dict[str, Any] = {"name": a["name"], "step": a["step"], "replica": a["replica"]}
    if a.get("shape") != b.get("shape") or a.get("dtype") != b.get("dtype"):
        out["detail"] = "shape or dtype differs: %s %s vs %s %s" % (a["dtype"], a["shape"], b["dtype"], b["shape"])
        return out
    fmt = _FORMATS.get(a["dtype"])
    if fmt is None or "offset" not in a or "offset" not in b:
        out["detail"] = "sha256 differs (no element comparison for %s)" % a["dtype"]
        return out
    code, width = fmt
    x = _read_span(a_path, a["offset"], a["bytes"])
    y = _read_span(b_path, b["offset"], b["bytes"])
    first = None
    count = 0
    for i in range(0, min(len(x), len(y)), width):
        if x[i : i + width] != y[i : i + width]:
            count += 1
            if first is None:
                first = i // width
    if first is None:
        out["detail"] = "sha256 differs but the bytes are equal"
        return out
    va = struct.unpack(code, x[first * width : (first + 1) * width])[0]
    vb = struct.unpack(code, y[first * width : (first + 1) * width])[0]
    out.update(
        {
            "element": first,
            "index": _unravel(first, a["shape"]),
            "values": [repr(va), repr(vb)],
            "differing_elements": count,
            "elements": len(x) // width,
        }
    )
    return out


# --------------------------------------------------------------------------------------- the children


def _tf_version_tuple(version: str) -> Tuple[int, int]:
    parts = ([*version.split("-")[0].split("+")[0].split("."), "0", "0"])[:2]
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except ValueError:
        return (0, 0)


def _data(tf: Any) -> Tuple[Any, Any]:
    """Inputs and labels from stateless RNG (the same bits in every process); labels from a fixed projection."""
    x = tf.random.stateless_normal((EXAMPLES, FEATURES), seed=[SEED, 1])
    proj = tf.random.stateless_normal((FEATURES, CLASSES), seed=[SEED, 2])
    y = tf.argmax(tf.matmul(x, proj), axis=1, output_type=tf.int32)
    return x, y


def _variables(tf: Any) -> List[Any]:
    """A two-layer perceptron as plain variables (no Keras: its optimizer API changed with Keras 3)."""

    def init(shape: Tuple[int, ...], k: int) -> Any:
        scale = (6.0 / float(sum(shape))) ** 0.5 if len(shape) == 2 else 0.0
        return tf.random.stateless_uniform(shape, seed=[SEED, 10 + k], minval=-scale, maxval=scale)

    shapes = [(FEATURES, HIDDEN), (HIDDEN,), (HIDDEN, CLASSES), (CLASSES,)]
    agg = tf.VariableAggregation.ONLY_FIRST_REPLICA
    return [tf.Variable(init(s, i), aggregation=agg, name="w%d" % i) for i, s in enumerate(shapes)]


def _local_values(strategy: Any, value: Any) -> List[Any]:
    return [tfchild.to_numpy(v) for v in strategy.experimental_local_results(value)]


def _replica_ids(strategy: Any) -> List[int]:
    """The global replica id of each local replica (MWMS: worker index times local replicas, plus local)."""
    ids = strategy.run(lambda: tf_module().distribute.get_replica_context().replica_id_in_sync_group)
    return [int(v) for v in _local_values(strategy, ids)]


_TF: Dict[str, Any] = {}


def tf_module() -> Any:
    return _TF["tf"]


def _allreduce_check(strategy: Any, ids: List[int], tracer: Tracer) -> None:
    """SUM and MEAN of odd-sized per-replica vectors, repeated: every replica must get the same bits."""
    tf = tf_module()
    reduce_ops = (("allreduce-sum", tf.distribute.ReduceOp.SUM), ("allreduce-mean", tf.distribute.ReduceOp.MEAN))

    def values_fn(ctx: Any) -> Any:
        rid = ctx.replica_id_in_sync_group
        return tf.random.stateless_normal((ALLREDUCE_SIZE,), seed=tf.stack([SEED + 100, rid]))

    inputs = strategy.experimental_distribute_values_from_function(values_fn)

    def reduce_fn(v: Any) -> Any:
        ctx = tf.distribute.get_replica_context()
        v = tf.identity(v)  # placed on the replica's device: MWMS refuses a value with no device
        return [ctx.all_reduce(op, v) for _name, op in reduce_ops]

    all_reduce = tf.function(lambda v: strategy.run(reduce_fn, args=(v,)))
    for round_ in range(ALLREDUCE_ROUNDS):
        for (name, _op), out in zip(reduce_ops, all_reduce(inputs)):
            for rid, val in zip(ids, _local_values(strategy, out)):
                tracer.add(name, round_, rid, val)


def _noise(plant: Optional[str]) -> Any:
    """The planted Generator hazard (None without it); call under the strategy's scope."""
    if plant != "generator":
        return None
    # from_non_deterministic_state() raises while op determinism is on (TF 2.21's stateful_random_ops.py);
    # a seed drawn from entropy or the clock is what slips through.
    return tf_module().random.Generator.from_seed(struct.unpack("<I", os.urandom(4))[0])


def _train(strategy: Any, ids: List[int], steps: int, tracer: Tracer, plant: Optional[str]) -> Tuple[List[Any], Any]:
    """`steps` steps of SGD, the global batch split over the replicas, gradients all-reduced explicitly."""
    tf = tf_module()
    x_all, y_all = _data(tf)
    per_replica = GLOBAL_BATCH // strategy.num_replicas_in_sync
    with strategy.scope():
        variables = _variables(tf)
        noise = _noise(plant)

    def batch_fn(step: int) -> Any:
        lo = (step * GLOBAL_BATCH) % EXAMPLES

        def fn(ctx: Any) -> Any:
            start = lo + ctx.replica_id_in_sync_group * per_replica
            return x_all[start : start + per_replica], y_all[start : start + per_replica]

        return fn

    def step_fn(x: Any, y: Any) -> Any:
        if noise is not None:
            x = x + 0.1 * noise.normal(tf.shape(x))
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(x, variables[0]) + variables[1])
            logits = tf.matmul(h, variables[2]) + variables[3]
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            loss = tf.reduce_sum(per_example) / GLOBAL_BATCH
        grads = tape.gradient(loss, variables)
        ctx = tf.distribute.get_replica_context()
        reduced = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        total = ctx.all_reduce(tf.distribute.ReduceOp.SUM, loss)
        for v, g in zip(variables, reduced):
            v.assign_sub(LEARNING_RATE * g)
        return [total, *reduced]

    train_step = tf.function(lambda x, y: strategy.run(step_fn, args=(x, y)))
    loss = None
    for s in range(steps):
        data = strategy.experimental_distribute_values_from_function(batch_fn(s))
        for k, out in enumerate(train_step(*data)):
            name = "loss-allreduce" if k == 0 else "grad-allreduce/w%d" % (k - 1)
            for rid, val in zip(ids, _local_values(strategy, out)):
                tracer.add(name, s, rid, val)
                if k == 0:
                    loss = float(val)
        for k, v in enumerate(variables):
            for rid, val in zip(ids, _local_values(strategy, v)):
                tracer.add("weights/w%d" % k, s, rid, val)
    return variables, loss


def _replica_hashes(strategy: Any, ids: List[int], variables: List[Any]) -> Dict[str, str]:
    """Each replica's own copy of the final weights, hashed (the per-replica golden hash)."""
    local = [_local_values(strategy, v) for v in variables]
    out = {}
    for pos, rid in enumerate(ids):
        h = hashlib.sha256(MODEL.encode("ascii"))
        for k, copies in enumerate(local):
            arr = copies[pos]
            h.update(("%d:%s\n" % (k, "x".join(str(d) for d in arr.shape))).encode("ascii"))
            h.update(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
        out[str(rid)] = "sha256:" + h.hexdigest()
    return out


def exercise(strategy: Any, steps: int, tracer: Tracer, plant: Optional[str] = None) -> Dict[str, Any]:
    """The all-reduce check and `steps` training steps under `strategy`; every collective traced."""
    ids = _replica_ids(strategy)
    _allreduce_check(strategy, ids, tracer)
    variables, loss = _train(strategy, ids, steps, tracer, plant)
    return {
        "replicas": strategy.num_replicas_in_sync,
        "replica_ids": ids,
        "replica_hashes": _replica_hashes(strategy, ids, variables),
        "final_loss": loss,
    }


def _start(determinism: bool = True) -> Tuple[Any, Dict[str, Any]]:
    tf, det = tfchild.import_tensorflow(determinism=determinism)
    _TF["tf"] = tf
    return tf, det


def too_old(tf: Any) -> Optional[str]:
    """Why this TensorFlow cannot run the multi-replica self-test (None when it can): TF1 graphs, or < 2.4."""
    version = getattr(tf, "__version__", "0")
    if not tfchild.is_eager(tf) or _tf_version_tuple(version) < MIN_TF:
        return "the multi-replica self-test needs TensorFlow %d.%d or later (this is %s)" % ((*MIN_TF, version))
    return None


def _base(tf: Any, det: Dict[str, Any], started: float) -> Dict[str, Any]:
    from envpin.probe import deviceclass

    version = getattr(tf, "__version__", "unknown")
    return {
        "model": MODEL,
        "tf_version": version,
        # the golden hash's key (GPU model and capability, or CPU ISA, threads, oneDNN): per-replica hashes
        # compare across machines of one class, at one replica count
        "device_class": deviceclass.device_class(
            gpus=deviceclass.tf_gpus(tf), onednn=deviceclass.onednn_from_tf(version)
        ),
        "determinism": det.get("method"),
        "env": tfchild.relevant_env(),
        "seconds": round(time.time() - started, 3),
    }


def prepare_devices(tf: Any, replicas: int) -> Tuple[List[str], str]:
    """The replicas' devices: every visible GPU, else the CPU split into `replicas` logical devices. Call
    before TensorFlow's runtime starts (the split is refused after). Raises ValueError when GPUs are visible
    and their count is not `replicas`. Splitting the CPU leaves single-device numerics alone: the golden hash
    of a split process equals an unsplit one's (tests/tf/test_selftest_replicas.py checks it), which is
    why the golden children can run this set-up after their own training."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if replicas != len(gpus):
            raise ValueError(
                "%d replicas asked for, %d GPUs visible (on GPUs every visible GPU is a replica)"
                % (replicas, len(gpus))
            )
        return ["/gpu:%d" % i for i in range(len(gpus))], "gpu"
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
    )
    return ["/cpu:%d" % i for i in range(replicas)], "cpu (logical devices)"


def mirrored_run(
    tf: Any,
    det: Dict[str, Any],
    devices: List[str],
    kind: str,
    steps: int,
    trace: Optional[str],
    plant: Optional[str] = None,
) -> Dict[str, Any]:
    """The MirroredStrategy set-up in this process, on devices from :func:`prepare_devices`."""
    started = time.time()
    _TF["tf"] = tf
    old = too_old(tf)
    if old:
        return {"skipped": old}
    strategy = tf.distribute.MirroredStrategy(devices)
    ops = getattr(strategy.extended, "_cross_device_ops", None)
    about = {
        "setup": "mirrored",
        "devices": devices,
        "device_kind": kind,
        "cross_device_ops": type(ops).__name__ if ops is not None else "default",
        "trace_file": trace,
    }
    return _traced(tf, det, strategy, steps, trace, plant, started, about)


def _traced(
    tf: Any,
    det: Dict[str, Any],
    strategy: Any,
    steps: int,
    trace: Optional[str],
    plant: Optional[str],
    started: float,
    about: Dict[str, Any],
) -> Dict[str, Any]:
    """:func:`exercise` under `strategy` with its trace written to `trace`, as one child's payload."""
    tracer = Tracer(trace)
    try:
        result = exercise(strategy, steps, tracer, plant)
    finally:
        tracer.close()
    out = _base(tf, det, started)
    out.update(result)
    out.update(about)
    out.update({"steps": steps, "plant": plant, "trace": tracer.entries})
    return out


def mirrored_child(replicas: int, steps: int, trace: Optional[str], plant: Optional[str]) -> Dict[str, Any]:
    """One MirroredStrategy run in this (fresh) process (the stand-alone and planted runs)."""
    try:
        tf, det = _start()
    except Exception as exc:  # ImportError, or a broken install raising anything else
        return {"skipped": "TensorFlow cannot be imported: %s: %s" % (type(exc).__name__, exc)}
    old = too_old(tf)
    if old:
        return {"skipped": old}
    try:
        devices, kind = prepare_devices(tf, replicas)
    except ValueError as exc:
        return {"error": str(exc)}
    return mirrored_run(tf, det, devices, kind, steps, trace, plant)


def _resolver(tf: Any, kind: str, port_base: int) -> Any:
    resolvers = tf.distribute.cluster_resolver
    if kind == "slurm":
        if tf.config.list_physical_devices("GPU"):
            return resolvers.SlurmClusterResolver(port_base=port_base)
        # On a node without GPUs the defaults fail: the resolver counts GPUs with nvidia-smi (FileNotFoundError
        # where there is none: it catches only CalledProcessError), and 0 GPUs per node makes cluster_spec()
        # step a range by 0 (ValueError). One pseudo GPU per task, never exported (TF 2.21's
        # slurm_cluster_resolver.py; both failures seen on the Slurm test cluster).
        module = sys.modules[resolvers.SlurmClusterResolver.__module__]
        tasks = max(module.expand_tasks_per_node(os.environ.get("SLURM_STEP_TASKS_PER_NODE", "1")) or [1])
        return resolvers.SlurmClusterResolver(
            port_base=port_base, gpus_per_node=tasks, gpus_per_task=1, auto_set_gpu=False
        )
    return resolvers.TFConfigClusterResolver()


def worker_child(
    steps: int, trace: Optional[str], plant: Optional[str], resolver: str = "tf_config", port_base: int = 8888
) -> Dict[str, Any]:
    """One MWMS worker in this (fresh) process, its cluster from TF_CONFIG or Slurm, collectives RING."""
    started = time.time()
    try:
        tf, det = _start()
    except Exception as exc:
        return {"skipped": "TensorFlow cannot be imported: %s: %s" % (type(exc).__name__, exc)}
    old = too_old(tf)
    if old:
        return {"skipped": old}
    try:
        res = _resolver(tf, resolver, port_base)
        spec = res.cluster_spec().as_dict()
        task_type, task_index = res.task_type, int(res.task_id)
    except Exception as exc:  # a missing or malformed TF_CONFIG, srun variables absent
        return {"error": "cluster resolver %s: %s: %s" % (resolver, type(exc).__name__, exc)}
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=res, communication_options=options)
    about = {
        "setup": "multi_worker",
        "role": task_type,
        "task_index": task_index,
        "num_workers": len(spec.get("worker", [])),
        "resolver": type(res).__name__,
        "communication": "RING",
    }
    return _traced(tf, det, strategy, steps, trace, plant, started, about)


# --------------------------------------------------------------------------------------- comparing


def _index(payload: Dict[str, Any]) -> Dict[Tuple[str, int, int], Dict[str, Any]]:
    return dict(((e["name"], e["step"], e["replica"]), e) for e in payload.get("trace", []))


def compare_runs(a: Dict[str, Any], a_trace: str, b: Dict[str, Any], b_trace: str) -> Optional[Dict[str, Any]]:
    """The first traced array (in the order the run produced them) that differs between two runs."""
    other = _index(b)
    for entry in a.get("trace", []):
        key = (entry["name"], entry["step"], entry["replica"])
        peer = other.get(key)
        if peer is None:
            return {
                "name": entry["name"],
                "step": entry["step"],
                "replica": entry["replica"],
                "detail": "missing in the other run",
            }
        if peer["sha256"] != entry["sha256"]:
            return first_difference(entry, a_trace, peer, b_trace)
    return None


def replicas_disagree(payload: Dict[str, Any], trace: str) -> Optional[Dict[str, Any]]:
    """The first collective whose output differs between replicas of one run (an all-reduce must give every
    replica the same bits; the weights after a step too)."""
    groups: Dict[Tuple[str, int], List[Dict[str, Any]]] = {}
    order: List[Tuple[str, int]] = []
    for e in payload.get("trace", []):
        key = (e["name"], e["step"])
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(e)
    for key in order:
        entries = groups[key]
        for e in entries[1:]:
            if e["sha256"] != entries[0]["sha256"]:
                found = first_difference(entries[0], trace, e, trace)
                found["replicas"] = [entries[0]["replica"], e["replica"]]
                return found
    return None


def describe(diff: Dict[str, Any]) -> str:
    """One line: which collective at which step, which element, which values."""
    where = "%s at step %d (replica %s)" % (diff["name"], diff["step"], diff.get("replica"))
    if "element" in diff:
        return "%s: %d of %d elements differ, first at %s: %s vs %s" % (
            where,
            diff["differing_elements"],
            diff["elements"],
            diff["index"],
            diff["values"][0],
            diff["values"][1],
        )
    return "%s: %s" % (where, diff.get("detail", "differs"))


def judge(runs: List[Tuple[Dict[str, Any], str]]) -> Dict[str, Any]:
    """Verdict over the runs of one set-up (each a payload and its trace file)."""
    out: Dict[str, Any] = {"runs": len(runs)}
    problems: List[str] = []
    first = runs[0][0]
    out["replicas"] = [p.get("replicas") for p, _ in runs]
    out["replica_hashes"] = [p.get("replica_hashes", {}) for p, _ in runs]
    out["final_losses"] = [p.get("final_loss") for p, _ in runs]
    for p, path in runs:
        bad = replicas_disagree(p, path)
        if bad is not None:
            out.setdefault("replicas_disagree", bad)
            problems.append("replicas %s of one run disagree: %s" % (bad["replicas"], describe(bad)))
            break
    counts = sorted(set(int(p.get("replicas") or 0) for p, _ in runs))
    if len(counts) > 1:
        problems.append(
            "the replica count changed between runs (%s): results are only comparable at one count"
            % " vs ".join(str(c) for c in counts)
        )
    for p, path in runs[1:]:
        diff = compare_runs(first, runs[0][1], p, path)
        if diff is not None:
            out["first_difference"] = diff
            problems.append("runs differ: first at %s" % describe(diff))
            break
    out["runs_equal"] = "first_difference" not in out and len(counts) == 1
    out["problems"] = problems
    out["verdict"] = "deterministic" if not problems else "NONDETERMINISTIC"
    return out


def compare_workers(runs: List[List[Tuple[Dict[str, Any], str]]]) -> Dict[str, Any]:
    """MWMS verdict: every worker of a run must hold the same weights (cross-worker), and each worker must
    repeat itself from run to run. `runs` is a list of runs, each the workers' (payload, trace file)."""
    out: Dict[str, Any] = {"runs": len(runs), "workers": [len(r) for r in runs]}
    problems: List[str] = []
    for r, workers in enumerate(runs):
        hashes = [sorted(p.get("replica_hashes", {}).items()) for p, _ in workers]
        merged: Dict[str, str] = {}
        for items in hashes:
            merged.update(items)
        out.setdefault("replica_hashes", []).append(merged)
        finals = set(merged.values())
        if len(finals) > 1:
            a, b = workers[0], workers[1] if len(workers) > 1 else workers[0]
            diff = compare_runs(a[0], a[1], b[0], b[1]) if a is not b else None
            detail = describe(diff) if diff else "final weights differ"
            problems.append("run %d: workers disagree: %s" % (r + 1, detail))
            out.setdefault("workers_disagree", diff)
    by_task: Dict[int, List[Tuple[Dict[str, Any], str]]] = {}
    for workers in runs:
        for p, path in workers:
            by_task.setdefault(int(p.get("task_index", 0)), []).append((p, path))
    for task in sorted(by_task):
        seq = by_task[task]
        for p, path in seq[1:]:
            diff = compare_runs(seq[0][0], seq[0][1], p, path)
            if diff is not None:
                out.setdefault("first_difference", dict(diff, worker=task))
                problems.append("worker %d differs between runs: first at %s" % (task, describe(diff)))
                break
    out["runs_equal"] = "first_difference" not in out if len(runs) > 1 else None
    out["workers_equal"] = "workers_disagree" not in out
    out["problems"] = problems
    if problems:
        out["verdict"] = "NONDETERMINISTIC"
    else:  # one run shows that the workers agree, not that a second run would give the same
        out["verdict"] = "deterministic" if len(runs) > 1 else "workers-agree"
    return out


# --------------------------------------------------------------------------------------- the parent


def free_ports(n: int) -> List[int]:
    """n TCP ports free on loopback now (bound together, so they differ, then released for the workers)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _mirrored(
    replicas: int,
    steps: int,
    runs: int,
    tmp: str,
    env: Dict[str, str],
    timeout: Optional[float],
    python: Optional[str],
    plant: Optional[str],
) -> Dict[str, Any]:
    results: List[Any] = [None] * runs

    def one(i: int) -> None:
        count = replicas + 1 if (plant == "replicas" and i == runs - 1) else replicas
        trace = os.path.join(tmp, "mirrored-%d.bin" % i)
        args = ["--child", "mirrored", "--replicas", str(count), "--steps", str(steps), "--trace", trace]
        if plant and plant != "replicas":
            args += ["--plant", plant]
        payload, error, _s = tfchild.run_child("envpin.probe.replicas", args, env, timeout, python)
        results[i] = (payload, error)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return assemble_mirrored(results)


def assemble_mirrored(results: List[Tuple[Optional[Dict[str, Any]], Optional[str]]]) -> Dict[str, Any]:
    """The MirroredStrategy verdict from its runs: each (payload, error) with the payload naming its
    ``trace_file`` (its own child, or a golden child that ran the set-up after its training)."""
    for payload, error in results:
        if payload is None:
            failed = tfchild.failure(error, "MirroredStrategy")
            return failed if "timed_out" in failed else {"error": "mirrored: %s" % error}
        if "skipped" in payload:
            return {"skipped": payload["skipped"]}
        if "error" in payload:
            return {"error": "mirrored: %s" % payload["error"]}
    done = [p for p, _e in results if p is not None]
    verdict = judge([(p, str(p.get("trace_file") or "")) for p in done])
    first = done[0]
    verdict.update(
        {
            "devices": first.get("devices"),
            "device_class": first.get("device_class"),
            "tf_version": first.get("tf_version"),
            "device_kind": first.get("device_kind"),
            "cross_device_ops": first.get("cross_device_ops"),
            "steps": first.get("steps"),
            "traced": len(first.get("trace", [])),
            "seconds": [p.get("seconds") for p in done],
        }
    )
    return verdict


def _worker_pair(
    steps: int,
    run: int,
    tmp: str,
    env: Dict[str, str],
    timeout: Optional[float],
    python: Optional[str],
    plant: Optional[str],
    workers: int = 2,
) -> List[Any]:
    ports = free_ports(workers)
    cluster = {"worker": ["127.0.0.1:%d" % p for p in ports]}
    results: List[Any] = [None] * workers

    def one(i: int) -> None:
        trace = os.path.join(tmp, "worker-%d-%d.bin" % (run, i))
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        args = ["--worker", "--steps", str(steps), "--trace", trace]
        if plant and plant != "replicas":
            args += ["--plant", plant]
        wenv = dict(env, TF_CONFIG=tf_config)
        # The pair shares one child slot: both must run at once, or the first waits for its peer forever.
        payload, error, _s = tfchild.run_child("envpin.probe.replicas", args, wenv, timeout, python, slot=False)
        results[i] = (payload, error, trace)

    with tfchild.slot():
        threads = [threading.Thread(target=one, args=(i,)) for i in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return results


def run_multi_worker(
    quick: bool,
    tmp: str,
    environ: Optional[Dict[str, str]] = None,
    timeout: Optional[float] = None,
    python: Optional[str] = None,
    plant: Optional[str] = None,
) -> Dict[str, Any]:
    """MWMS over two worker processes on loopback, two runs (one with `quick`: then only the workers'
    agreement is checked); their traces go into the folder `tmp`."""
    env = tfchild.child_env(environ, determinism=True)
    steps = STEPS  # --quick as many steps: a per-replica hash must mean the same training in every mode
    runs = 1 if quick else 2
    all_runs = []
    seconds = []
    for r in range(runs):
        results = _worker_pair(steps, r, tmp, env, timeout, python, plant)
        for payload, error, _trace in results:
            if payload is None:
                failed = tfchild.failure(error, "MWMS worker")
                return failed if "timed_out" in failed else {"error": "multi-worker: %s" % error}
            if "skipped" in payload:
                return {"skipped": payload["skipped"]}
            if "error" in payload:
                return {"error": "multi-worker: %s" % payload["error"]}
        all_runs.append([(p, t) for p, _e, t in results])
        seconds.append([p.get("seconds") for p, _e, _t in results])
    verdict = compare_workers(all_runs)
    first = all_runs[0][0][0]
    verdict.update(
        {
            "communication": first.get("communication"),
            "resolver": first.get("resolver"),
            "device_class": first.get("device_class"),
            "steps": first.get("steps"),
            "traced": len(first.get("trace", [])),
            "seconds": seconds,
        }
    )
    return verdict


def run_replicas(
    replicas: int = 2,
    quick: bool = False,
    environ: Optional[Dict[str, str]] = None,
    timeout: Optional[float] = None,
    python: Optional[str] = None,
    plant: Optional[str] = None,
    multi_worker: bool = True,
) -> Dict[str, Any]:
    """Both set-ups, compared: MirroredStrategy over `replicas` devices in two fresh processes, and MWMS over
    two workers on loopback (two runs; one with `quick`, which then checks only that the workers agree)."""
    if plant is not None and plant not in PLANTS:
        raise ValueError("unknown hazard %r (one of %s)" % (plant, ", ".join(PLANTS)))
    started = time.time()
    env = tfchild.child_env(environ, determinism=True)
    tmp = tempfile.mkdtemp(prefix="envpin-replicas-")
    try:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=2) as pool:
            f_m = pool.submit(_mirrored, replicas, STEPS, 2, tmp, env, timeout, python, plant)
            f_w = pool.submit(run_multi_worker, quick, tmp, environ, timeout, python, plant) if multi_worker else None
            mirrored = f_m.result()
            worker = f_w.result() if f_w is not None else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return combine(replicas, mirrored, worker, started, plant)


def combine(
    replicas: int,
    mirrored: Dict[str, Any],
    worker: Optional[Dict[str, Any]],
    started: float,
    plant: Optional[str] = None,
) -> Dict[str, Any]:
    """The multi-replica section of a self-test from the two set-ups' verdicts."""
    if "skipped" in mirrored:
        return {"skipped": mirrored["skipped"]}
    out: Dict[str, Any] = {"model": MODEL, "replicas": replicas, "plant": plant, "mirrored": mirrored}
    if worker is not None:
        out["multi_worker"] = worker
    out["problems"] = problems(out)
    out["seconds"] = round(time.time() - started, 3)
    return out


def problems(result: Dict[str, Any]) -> List[str]:
    """Why a multi-replica result fails: runs or replicas or workers that differ, children that failed."""
    out = []
    for key, label in (("mirrored", "MirroredStrategy"), ("multi_worker", "MultiWorkerMirroredStrategy")):
        part = result.get(key)
        if not isinstance(part, dict) or "skipped" in part or "timed_out" in part:
            continue  # a set-up that timed out is inconclusive (envpin.probe.selftest.run.timed_out), not a failure
        if "error" in part:
            out.append("%s: %s" % (label, part["error"]))
            continue
        out.extend("%s: %s" % (label, p) for p in part.get("problems", []))
    return out


def replica_count(text: str) -> int:
    """argparse type of --replicas: 2 or more (one replica has nothing to all-reduce)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if value < 2:
        raise argparse.ArgumentTypeError("must be 2 or more (one replica has nothing to all-reduce)")
    return value


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envpin.probe.replicas", description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=replica_count, default=2, help="MirroredStrategy replicas (GPUs: all)")
    parser.add_argument(
        "--quick", action="store_true", help="one multi-worker run (the workers compared, not two runs)"
    )
    parser.add_argument("--plant", choices=PLANTS, default=None, help="run a known hazard (checks the checker)")
    parser.add_argument("--no-multi-worker", action="store_true", help="MirroredStrategy only")
    parser.add_argument("--child", choices=("mirrored",), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help="one MWMS worker in this process")
    parser.add_argument("--resolver", choices=("tf_config", "slurm"), default="tf_config")
    parser.add_argument("--port-base", type=int, default=8888, help="SlurmClusterResolver's first port")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--trace", default=None, help="where a child writes its traced arrays")
    opts = parser.parse_args(argv)
    if opts.child == "mirrored" or opts.worker:
        with tfchild.StdoutToStderr():
            if opts.worker:
                result = worker_child(opts.steps, opts.trace, opts.plant, opts.resolver, opts.port_base)
            else:
                result = mirrored_child(opts.replicas, opts.steps, opts.trace, opts.plant)
        tfchild.emit(result)
        return 0
    result = run_replicas(opts.replicas, opts.quick, plant=opts.plant, multi_worker=not opts.no_multi_worker)
    tfchild.emit(dict(result))
    if "skipped" in result:
        return 2
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
