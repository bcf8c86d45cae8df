"""Compare two TensorFlow debugger dumps op execution by op execution (a program, standard library at import
time, Python 3.6+): ``python dumpdiff.py DUMP_A DUMP_B [--max-ops N] [--device NAME]`` prints one JSON
object. With ``--device`` only the op executions on that device are compared (one replica of a strategy
that runs several in one process, each on its own device): a graph op's device is where its trace says it
ran, an eager op's where its outputs are (one without outputs has none, and is left out).

It runs where the dumps were made (TensorFlow's reader,
``tensorflow.python.debug.lib.debug_events_reader.DebugDataReader``, must match the writer), so the host
never imports TensorFlow: in the process of bisect's second run, as it ends (envpin/runs/hook.py loads this
file and calls ``diff``; that process has TensorFlow loaded already, where another would spend seconds
importing it), or, as a program, on the Python that made the dumps or the one ``--reader-python`` names.

Two runs execute the same ops, but not in the same order: ops of one graph without a data dependency run
on several threads, and tf.data functions run beside the training step. So an execution is known by
its place, not its position: (eager or graph, the function's name without its uniquifying number, the
op's name, the output slot, and how many times that key was seen before). Run A's executions are walked
in the order they happened; the first whose value differs from its counterpart in run B is the answer.
"""

import contextlib
import json
import re
import sys

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

    import numpy as np

    #: Where an execution happened: (eager or graph, function, op name, output slot) ...
    Place = Tuple[str, str, str, int]
    #: ... and how many times that place executed before.
    Key = Tuple[str, str, str, int, int]
    #: (wall time, key, "eager" or "graph", TensorFlow's digest of the execution)
    Event = Tuple[float, Key, str, Any]
    #: One output value of an execution (None when it is not a plain tensor).
    Value = Optional[np.ndarray]

_SUFFIX = re.compile(r"_[0-9]+$")
#: Ops whose output is uninitialised memory by design: their values differ without anything being wrong.
UNINITIALISED = frozenset({"Empty", "_ScopedAllocator", "TensorListReserve"})
#: A resource handle serialised into a string (an iterator's string handle, which MirroredStrategy's
#: multi-device iterator passes to its per-device functions) names its resource by its address in memory:
#: the address is left out of the comparison, the resource's name and device are kept.
_ADDRESS = re.compile(rb"(Resource-[0-9]+-at-)0x[0-9a-f]+")


def _stem(name: "Optional[str]") -> str:
    return _SUFFIX.sub("", name or "")


def _frames(stack: "Optional[Sequence[Sequence[Any]]]") -> "List[Dict[str, Any]]":
    """(file, line, function) of each frame, innermost last."""
    out = []
    for frame in stack or ():
        # Frames are (host, file, line, function) or (file, line, function) depending on the version.
        frame = tuple(frame)
        file_path, line, function = frame[-3], frame[-2], frame[-1]
        out.append({"file": str(file_path), "line": int(line), "function": str(function)})
    return out


def same_device(a: "Optional[str]", b: "Optional[str]") -> bool:
    """Whether two device names name one device: '/job:localhost/replica:0/task:0/device:CPU:1' and
    '/device:cpu:1' do (the job, replica and task are compared only when both names have them)."""
    if not a or not b:
        return False
    a, b = a.lower(), b.lower()
    head_a, _, tail_a = a.rpartition("device:")
    head_b, _, tail_b = b.rpartition("device:")
    if not tail_a or tail_a != tail_b:
        return False
    return not (head_a.strip("/") and head_b.strip("/")) or head_a.rstrip("/") == head_b.rstrip("/")


def _device(reader: "Any", kind: str, digest: "Any") -> "Optional[str]":
    """Where one execution ran: a graph op's trace names its device, an eager op's outputs theirs."""
    if kind == "graph":
        return str(reader.read_graph_execution_trace(digest).device_name or "") or None
    execution = reader.read_execution(digest)
    ids = execution.output_tensor_device_ids or ()
    return str(reader.device_name_by_id(ids[0])) if ids else None


def _index(reader: "Any", device: "Optional[str]" = None) -> "List[Event]":
    """Every op execution of one dump (only those on `device` when given): (wall time, key, kind, digest), in
    the order they happened. Occurrences are counted among the executions kept, so another device's
    executions of the same eager op do not shift them."""
    seen: Dict[Place, int] = {}
    events: List[Event] = []
    for digest in reader.executions(digest=True):
        if device is not None and not same_device(_device(reader, "eager", digest), device):
            continue
        key = ("eager", _stem(digest.op_type), "", 0)
        seen[key] = seen.get(key, -1) + 1
        events.append((digest.wall_time, (*key, seen[key]), "eager", digest))
    names: Dict[str, str] = {}
    for digest in reader.graph_execution_traces(digest=True):
        if device is not None and not same_device(_device(reader, "graph", digest), device):
            continue
        graph = names.get(digest.graph_id)
        if graph is None:
            graph = names[digest.graph_id] = _stem(reader.graph_by_id(digest.graph_id).name)
        key = ("graph", graph, digest.op_name, digest.output_slot)
        seen[key] = seen.get(key, -1) + 1
        events.append((digest.wall_time, (*key, seen[key]), "graph", digest))
    events.sort(key=lambda e: e[0])
    return events


def _values(reader: "Any", kind: str, digest: "Any") -> "List[Value]":
    """The output value(s) of one execution, as NumPy arrays (None when not a plain tensor)."""
    import numpy as np

    if kind == "graph":
        values = [reader.graph_execution_trace_to_tensor_value(digest)]
    else:
        values = reader.execution_to_tensor_values(reader.read_execution(digest))
    out: List[Value] = []
    for value in values:
        array: Value
        try:
            array = np.asarray(value)
        except Exception:
            array = None
        if array is not None and array.dtype == object:
            array = np.array(
                [_ADDRESS.sub(rb"\1ADDRESS", v) if isinstance(v, bytes) else repr(v).encode() for v in array.ravel()],
                dtype=object,
            ).reshape(array.shape)
        out.append(array)
    return out


def compare(a: "Value", b: "Value") -> "Optional[Dict[str, Any]]":
    """None when a and b are bit-identical, else how they differ."""
    import numpy as np

    if a is None or b is None:
        return None
    if a.dtype != b.dtype or a.shape != b.shape:
        return {"kind": "shape", "a": "%s%s" % (a.dtype, list(a.shape)), "b": "%s%s" % (b.dtype, list(b.shape))}
    if a.dtype == object:
        equal = np.array([x == y for x, y in zip(a.ravel(), b.ravel())], dtype=bool)
    else:
        width = a.dtype.itemsize
        raw_a = np.ascontiguousarray(a).view(np.uint8).reshape(-1, width) if a.size else a.reshape(0, 1)
        raw_b = np.ascontiguousarray(b).view(np.uint8).reshape(-1, width) if b.size else b.reshape(0, 1)
        equal = (raw_a == raw_b).all(axis=1)
    bit_equal = int(equal.sum())
    if bit_equal == a.size:
        return None
    found: Dict[str, Any] = {
        "kind": "values",
        "dtype": str(a.dtype),
        "shape": list(a.shape),
        "elements": int(a.size),
        "bit_equal": bit_equal,
        "max_abs": None,
        "max_rel": None,
    }
    if a.dtype.kind in "fciu":
        x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
        both = np.isfinite(x) & np.isfinite(y)
        if both.any():
            diff = np.abs(x[both] - y[both])
            scale = np.maximum(np.abs(x[both]), np.abs(y[both]))
            found["max_abs"] = float(diff.max())
            rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), 0.0)
            found["max_rel"] = float(rel.max())
        found["nonfinite_mismatch"] = int((np.isfinite(x) != np.isfinite(y)).sum())
    return found


def _where(reader: "Any", kind: str, digest: "Any") -> "Dict[str, Any]":
    """Op type, name, device and the Python stack that created (graph) or ran (eager) the op."""
    if kind == "graph":
        graph = reader.graph_by_id(digest.graph_id)
        creation = graph.get_op_creation_digest(digest.op_name)
        _, stack = reader.read_graph_op_creation_stack_trace(creation)
        device = getattr(creation, "device_name", None)
        return {
            "kind": "graph",
            "op_type": digest.op_type,
            "op_name": digest.op_name,
            "output_slot": digest.output_slot,
            "graph": graph.name,
            "device": device,
            "stack": _frames(stack),
        }
    execution = reader.read_execution(digest)
    _, stack = reader.read_execution_stack_trace(execution)
    devices = [reader.device_name_by_id(i) for i in (execution.output_tensor_device_ids or ())]
    return {
        "kind": "eager",
        "op_type": digest.op_type,
        "op_name": None,
        "output_slot": None,
        "graph": None,
        "device": devices[0] if devices else None,
        "stack": _frames(stack),
    }


def _fingerprint(values: "Sequence[Value]") -> str:
    import hashlib

    h = hashlib.sha256()
    for array in values:
        if array is None:
            h.update(b"None")
        elif array.dtype == object:
            h.update(repr(array.shape).encode() + b"".join(array.ravel().tolist()))
        else:
            h.update(("%s%r" % (array.dtype, array.shape)).encode() + array.tobytes())
    return h.hexdigest()


#: The functions of tf.data's multi-device iterator (tensorflow/python/data/ops/multi_device_iterator_ops.py),
#: through which MirroredStrategy feeds each device: one function serves every device's shard, on threads
#: of their own, so its calls for the shards interleave in another order in every run.
_ITERATOR_FUNCTIONS = frozenset(
    {"_init_func", "_next_func", "_finalize_func", "_remote_init_func", "_remote_next_func", "_remote_finalize_func"}
)


def _unordered(key: "Key") -> bool:
    """tf.data runs its functions on several threads at once (a parallel map keeps its output order, not
    the order of its calls): their executions are compared as a multiset, not one by one."""
    return key[0] == "graph" and (key[1].startswith("Dataset_") or key[1] in _ITERATOR_FUNCTIONS)


def _fingerprints(reader: "Any", events: "Sequence[Event]") -> "Dict[Place, List[Tuple[Key, str]]]":
    """Group -> list of (key, fingerprint) of the executions inside tf.data functions, in time order."""
    groups: Dict[Place, List[Tuple[Key, str]]] = {}
    for _, key, kind, digest in events:
        if _unordered(key) and digest.op_type not in UNINITIALISED:
            try:
                fp = _fingerprint(_values(reader, kind, digest))
            except Exception:
                continue
            groups.setdefault(key[:4], []).append((key, fp))
    return groups


def _extra(readers: "Sequence[Any]", events_a: "Sequence[Event]", events_b: "Sequence[Event]") -> "Set[Key]":
    """Keys of run A's executions inside tf.data functions whose value the other run never produced.

    A run may compute a few more elements than the other (prefetching runs ahead of the last step), so
    the run with fewer executions of a function is checked against the other: each of its values must
    be among the other's. A value of run B that run A lacks is charged to run A's execution of the same
    occurrence (the nearest counterpart there is)."""
    from collections import Counter

    groups_a, groups_b = _fingerprints(readers[0], events_a), _fingerprints(readers[1], events_b)
    extra: Set[Key] = set()
    for group, items_a in groups_a.items():
        items_b = groups_b.get(group, [])
        small, large = (items_a, items_b) if len(items_a) <= len(items_b) else (items_b, items_a)
        pool = Counter(fp for _, fp in large)
        for key, fp in small:
            if pool[fp] > 0:
                pool[fp] -= 1
            else:
                extra.add(key)
    return extra


def _start(
    readers: "Sequence[Any]", events: "Sequence[Sequence[Event]]", max_ops: "Optional[int]", device: "Optional[str]"
) -> "Dict[str, Any]":
    """The result before the walk: counts, and run B's op executions run A never had (A's missing ones are
    counted in the walk)."""
    result: Dict[str, Any] = {
        "tf_version": None,
        "executions": [len(events[0]), len(events[1])],
        "compared": 0,
        "unmatched": 0,
        "unmatched_data": 0,
        "skipped": 0,
        "first_difference": None,
        "max_ops": max_ops,
    }
    if device is not None:  # only then: the result of a whole dump stays as it was
        result["device"] = device
        result["other_devices"] = [
            len(r.executions(digest=True)) + len(r.graph_execution_traces(digest=True)) - len(e)
            for r, e in zip(readers, events)
        ]
    keys_a = {e[1] for e in events[0]}
    for e in events[1]:
        if e[1] not in keys_a:
            result["unmatched_data" if _unordered(e[1]) else "unmatched"] += 1
    with contextlib.suppress(Exception):
        result["tf_version"] = readers[0].tensorflow_version()
    return result


def diff(root_a: str, root_b: str, max_ops: "Optional[int]" = None, device: "Optional[str]" = None) -> "Dict[str, Any]":
    """The first op execution of run A whose output differs from run B's, or none, as a plain dict (of the
    executions on `device` only, when given)."""
    from tensorflow.python.debug.lib.debug_events_reader import DebugDataReader

    readers: List[Any] = []
    for root in (root_a, root_b):
        reader = DebugDataReader(root)
        reader.update()
        readers.append(reader)
    events_a, events_b = _index(readers[0], device), _index(readers[1], device)
    by_key = {e[1]: e for e in events_b}
    extra = _extra(readers, events_a, events_b)
    result = _start(readers, (events_a, events_b), max_ops, device)
    for _, key, kind, digest in events_a:
        if max_ops is not None and result["compared"] >= max_ops:
            break
        other = by_key.get(key)
        if other is None and key not in extra:
            result["unmatched_data" if _unordered(key) else "unmatched"] += 1
            continue
        if digest.op_type in UNINITIALISED:
            result["skipped"] += 1
            continue
        result["compared"] += 1
        if _unordered(key) and key not in extra:
            continue
        try:
            values_a = _values(readers[0], kind, digest)
            values_b = _values(readers[1], kind, other[3]) if other is not None else [None] * len(values_a)
        except Exception:
            result["skipped"] += 1
            result["compared"] -= 1
            continue
        for slot, (a, b) in enumerate(zip(values_a, values_b)):
            found = compare(a, b)
            if found is None and key in extra:
                found = {"kind": "unmatched-value"}
            if found is None and len(values_a) == len(values_b):
                continue
            if found is None:
                found = {"kind": "outputs", "a": len(values_a), "b": len(values_b)}
            where = _where(readers[0], kind, digest)
            if device is not None:  # where it ran (a graph op's creation often names no device)
                where["device"] = _device(readers[0], kind, digest)
            if kind == "eager":
                where["output_slot"] = slot
            where["index"] = result["compared"] - 1
            where["unordered"] = _unordered(key)
            where["difference"] = found
            result["first_difference"] = where
            return result
    return result


def main(argv: "Optional[List[str]]" = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    max_ops, device = None, None
    if "--max-ops" in args:
        at = args.index("--max-ops")
        max_ops = int(args[at + 1])
        del args[at : at + 2]
    if "--device" in args:
        at = args.index("--device")
        device = args[at + 1]
        del args[at : at + 2]
    if len(args) != 2:
        sys.stderr.write("usage: dumpdiff.py DUMP_A DUMP_B [--max-ops N] [--device NAME]\n")
        return 2
    try:
        from tensorflow.python.debug.lib.debug_events_reader import DebugDataReader  # noqa: F401
    except ImportError as exc:
        sys.stderr.write("this Python's TensorFlow cannot read debugger dumps (%s)\n" % exc)
        return 3
    sys.stdout.write(json.dumps(diff(args[0], args[1], max_ops, device), sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
