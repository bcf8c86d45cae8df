"""Call functions of envpin's standard-library part and print what they returned, as canonical JSON.

tests/pythons/test_pythons.py runs this file under every CPython the probe supports (3.6 to 3.9, as NGC images
ship them) and under the host's Python, with the same calls, and requires the same output: the same code
must mean the same thing on every version (re.split on empty matches, for one, does not).

Standard library only, Python 3.6 syntax; no annotations (they would have to be 3.6-compatible and the
repository's linter targets 3.10). Usage: python pythons_calls.py REPO < calls.json, where calls.json is
``[{"id": ..., "module": ..., "func": ..., "args": [...], "kwargs": {...}}, ...]``. Arguments may be
tagged ``{"$set": [...]}``, ``{"$tuple": [...]}``, ``{"$bytes": latin-1 text}`` or ``{"$context": {"root": ...,
"environ": ...}}`` (a probe Context); results tag sets, tuples, named tuples and objects the same way.
Warnings are recorded per call (never printed), exceptions as ``{"$raised": type, "message": text}``.
"""

import importlib
import json
import sys
import warnings


def decode(value):
    """JSON argument -> Python value (sets and tuples are tagged, JSON has neither)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if list(value) == ["$set"]:
            return set(decode(v) for v in value["$set"])
        if list(value) == ["$tuple"]:
            return tuple(decode(v) for v in value["$tuple"])
        if list(value) == ["$bytes"]:
            return value["$bytes"].encode("latin-1")
        if list(value) == ["$context"]:
            from envpin.probe._common import Context

            return Context(**decode(value["$context"]))
        return {k: decode(v) for k, v in value.items()}
    return value


def encode(value):
    """Python value -> JSON whose text compares equal exactly when the values are the same."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (set, frozenset)):
        items = [encode(v) for v in value]
        return {"$set": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {"$named": type(value).__name__, "fields": encode(dict(value._asdict()))}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return {"$bytes": value.decode("latin-1")}
    if hasattr(value, "__dict__"):
        return {"$obj": type(value).__name__, "fields": encode(vars(value))}
    return {"$repr": type(value).__name__}


def call(spec):
    """One call's result (or the exception it raised) and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn = getattr(importlib.import_module(spec["module"]), spec["func"])
            out = {"result": encode(fn(*decode(spec.get("args", [])), **decode(spec.get("kwargs", {}))))}
        except Exception as exc:  # the exception is the result being compared
            # A SyntaxError's text is the interpreter's own parser talking (it changed in 3.8 and 3.10).
            message = "" if isinstance(exc, SyntaxError) else str(exc)
            out = {"result": {"$raised": type(exc).__name__, "message": message}}
    out["warnings"] = [w.category.__name__ + ": " + str(w.message) for w in caught]
    return out


def main(argv):
    sys.path.insert(0, argv[0])
    specs = json.loads(sys.stdin.read())
    results = {spec["id"]: call(spec) for spec in specs}
    sys.stdout.write(json.dumps(results, sort_keys=True, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
