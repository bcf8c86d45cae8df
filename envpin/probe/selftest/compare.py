"""Bitwise comparison of op outputs and the verdict for one check (pure; runs anywhere).

Outputs travel between processes packed as raw bytes, so two runs are compared bit for bit, and the
largest absolute difference is reported only to say how far apart they are.
"""

import json
import re
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

TYPE_CHECKING = False  # typing's Literal is 3.8+: only its type checker sees it
if TYPE_CHECKING:
    from typing import Literal  # novermin (type checking only)

VERDICTS = ("deterministic", "NONDETERMINISTIC", "raises-under-determinism", "skipped")


# NumPy dtype name -> (struct format of one component, components per element).
_FORMATS = {
    "float16": ("e", 1),
    "float32": ("f", 1),
    "float64": ("d", 1),
    "complex64": ("f", 2),
    "complex128": ("d", 2),
    "int8": ("b", 1),
    "uint8": ("B", 1),
    "int16": ("h", 1),
    "uint16": ("H", 1),
    "int32": ("i", 1),
    "uint32": ("I", 1),
    "int64": ("q", 1),
    "uint64": ("Q", 1),
    "bool": ("?", 1),
}
_SIZES = {"bfloat16": 2}


#: Item size in bytes -> the memoryview format of an unsigned integer that wide (values compared word by word).
_WORDS: "Dict[int, Literal['B', 'H', 'I', 'Q']]" = {1: "B", 2: "H", 4: "I", 8: "Q"}


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
    max_abs: Optional[float] = None
    notes: List[str] = []
    if len(ref) != len(other):
        notes.append("runs returned %d and %d outputs" % (len(ref), len(other)))
    for idx, (a, b) in enumerate(zip(ref, other)):
        n = _count(a["shape"])
        elements += n
        if a["data"] == b["data"] and a["dtype"] == b["dtype"] and a["shape"] == b["shape"]:
            continue  # the common case, one C-level bytes comparison
        if a["dtype"] != b["dtype"] or a["shape"] != b["shape"]:
            differing += max(n, _count(b["shape"]))
            notes.append("output %d changed from %s%s to %s%s" % (idx, a["dtype"], a["shape"], b["dtype"], b["shape"]))
            continue
        size = _itemsize(a)
        code = _WORDS.get(size)
        if code is not None:
            wa, wb = memoryview(a["data"]).cast(code), memoryview(b["data"]).cast(code)
            diff_idx = [i for i in range(len(wa)) if wa[i] != wb[i]]
        else:
            diff_idx = [
                i for i in range(n) if a["data"][i * size : (i + 1) * size] != b["data"][i * size : (i + 1) * size]
            ]
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
    InvalidArgumentError (FailedPreconditionError for tf.timestamp, RuntimeError/ValueError for unseeded
    random ops), always in a message that says so ("A deterministic GPU implementation of ...", "... when
    determinism is enabled"): that is raises-under-determinism. Anything else (e.g. "Current CPU
    implementations do not yet support dilation rates larger than 1"), or any exception with determinism
    off, means the check itself could not run here: skipped, with the reason.
    """
    text = clean_tf_message(message)
    if "determinis" not in text.lower():  # a wrapper's first line (Keras 2: "Exception encountered when ...")
        inner = [ln.strip() for ln in str(message or "").splitlines() if "determinis" in ln.lower()]
        if inner:
            text = "%s %s" % (text, clean_tf_message(inner[0]))
    mentions = "determinis" in text.lower()
    if (
        determinism
        and mentions
        and type_name
        in (
            "UnimplementedError",
            "InvalidArgumentError",
            "FailedPreconditionError",
            "RuntimeError",
            "ValueError",
            "NotImplementedError",
        )
    ):
        return "raises-under-determinism", "%s: %s" % (type_name, text)
    return "skipped", "could not run here: %s: %s" % (type_name, text)


def fmt_diff(value: Optional[float]) -> str:
    return "n/a" if value is None else "%.6g" % value


def finish_check(
    name: str,
    op: str,
    comparisons: Sequence[Dict[str, Any]],
    seconds: float,
    exc: Optional[Tuple[str, str]] = None,
    determinism: bool = True,
    runs: int = 0,
) -> Dict[str, Any]:
    """Fold a check's comparisons (or the exception it raised) into one verdict record."""
    result: Dict[str, Any] = {
        "name": name,
        "op": op,
        "seconds": round(seconds, 3),
        "runs": runs,
        "comparisons": len(comparisons),
        "differing_elements": None,
        "max_abs_diff": None,
    }
    if exc is not None:
        result["verdict"], result["message"] = classify_exception(exc[0], exc[1], determinism)
        if result["verdict"] == "raises-under-determinism":
            result["message"] = (
                "no deterministic implementation in this TensorFlow: a model using %s "
                "fails once determinism is on. TensorFlow said: %s" % (op, result["message"])
            )
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
        result["message"] = (
            "%d of %d comparisons differ: %d differing elements in total (of %d per run), "
            "max abs diff %s" % (bad, len(comparisons), differing, elements, fmt_diff(result["max_abs_diff"]))
        )
    else:
        result["verdict"] = "deterministic"
        result["message"] = "%d runs bitwise identical (%d elements per run)" % (runs, elements)
    if notes:
        result["message"] += "; " + "; ".join(notes)
    return result


def verdict_summary(checks: Sequence[Dict[str, Any]]) -> str:
    """'17/19 deterministic, 1 raises under determinism (bincount), 1 skipped'."""
    total = len(checks)
    by: Dict[str, List[str]] = {}
    for c in checks:
        listed = c["verdict"] == "NONDETERMINISTIC" and (c.get("expected") or {}).get("verdict") == "NONDETERMINISTIC"
        by.setdefault("listed" if listed else c["verdict"], []).append(c["name"])
    parts = ["%d/%d deterministic" % (len(by.get("deterministic", [])), total)]
    if by.get("NONDETERMINISTIC"):
        parts.append("%d NONDETERMINISTIC (%s)" % (len(by["NONDETERMINISTIC"]), ", ".join(by["NONDETERMINISTIC"])))
    if by.get("listed"):
        parts.append(
            "%d nondeterministic as the recipe table lists for this device (%s)"
            % (len(by["listed"]), ", ".join(by["listed"]))
        )
    if by.get("raises-under-determinism"):
        names = by["raises-under-determinism"]
        parts.append("%d raises under determinism (%s)" % (len(names), ", ".join(names)))
    if by.get("skipped"):
        parts.append("%d skipped" % len(by["skipped"]))
    return ", ".join(parts)
