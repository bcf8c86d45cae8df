"""Seed hygiene: find randomness that is not pinned, by running the same code in fresh processes.

Standard library only at import time, Python 3.6+. Each run is a fresh interpreter that records, before
and after the *target* runs:

* ``hash()`` of a string and the iteration order of a set of strings (PYTHONHASHSEED);
* a digest of Python's ``random`` state and of NumPy's legacy global RandomState, and every
  ``numpy.random.default_rng()`` created without a seed while the program runs (not while a library is
  being imported);
* if the target imported TensorFlow: whether its global seed is set, one draw from ``tf.random.uniform``,
  one from an unseeded Keras initializer and the state of ``tf.random.get_global_generator()`` if the
  target created it.

Two runs are then compared. An RNG whose state moved during the run and differs between the runs was used
without a seed (or seeded from OS entropy); an RNG that never moved was not used. The target is a user's
script (``python -m envpin.probe.hygiene train.py args...``), the envpin recipe
(``envpin.enable_determinism(seed)``, the self-test's default), or nothing (hash-seed checks only).
"""

import argparse
import hashlib
import json
import os
import runpy
import sys
from types import FrameType, ModuleType
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envpin.probe import tfchild

_PROBE_STRINGS = ["envpin-%02d" % i for i in range(32)]
SEED = 42

FIXES = {
    "PYTHONHASHSEED": "set PYTHONHASHSEED=0 (any fixed integer) in the image environment (Dockerfile ENV); it "
    "must be set before Python starts, setting os.environ inside the script is too late",
    "python-random": "call random.seed(SEED) before the first draw (envpin.enable_determinism(seed) does it); "
    "give each random.Random(...) instance an explicit seed",
    "numpy-random": "call numpy.random.seed(SEED) for the legacy global RNG and pass a seed to every "
    "numpy.random.default_rng(SEED)",
    "tensorflow-random": "call tf.random.set_seed(SEED) (TF1: tf.compat.v1.set_random_seed) before building "
    "the model, or tf.keras.utils.set_random_seed(SEED); give random ops a seed",
    "keras-initializers": "call tf.keras.utils.set_random_seed(SEED) (it seeds Python, NumPy, TensorFlow and "
    "the Keras seed generator) or pass seed= to every initializer",
    "tensorflow-generator": "create the generator from a seed: tf.random.set_global_generator("
    "tf.random.Generator.from_seed(SEED)), or use stateless random ops",
}


def _digest(obj: Any) -> str:
    return hashlib.sha256(repr(obj).encode("utf-8")).hexdigest()[:16]


def _numpy_state_digest(np: Any) -> str:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return hashlib.sha256(keys.tobytes() + repr((name, pos, has_gauss, cached)).encode()).hexdigest()[:16]


def _hex(arr: Any) -> str:
    return hashlib.sha256(tfchild.to_numpy(arr).tobytes()).hexdigest()[:16]


def _tensorflow_record(tf: Any) -> Dict[str, Any]:
    """What TensorFlow's RNGs will do next in this process; draws are hashed, never printed."""
    rec: Dict[str, Any] = {"tf_version": getattr(tf, "__version__", "unknown")}
    eager = tfchild.is_eager(tf)
    try:
        if eager:
            from tensorflow.python.eager import context

            rec["global_seed_set"] = context.global_seed() is not None
        else:
            rec["global_seed_set"] = tf.compat.v1.get_default_graph().seed is not None
    except Exception as exc:
        rec["global_seed_error"] = "%s: %s" % (type(exc).__name__, exc)

    def draw(key: str, fn: Any) -> None:
        try:
            value = fn()
            if not eager:  # TF1: evaluate in a session (untested here)
                with tf.compat.v1.Session() as sess:
                    value = sess.run(value)
            rec[key] = _hex(value)
        except Exception as exc:  # under determinism TF >= 2.8 refuses unseeded random ops
            rec[key + "_error"] = "%s: %s" % (type(exc).__name__, tfchild.tail(str(exc), 1, 300))

    draw("tf_draw", lambda: tf.random.uniform([8]))
    initializers = getattr(getattr(tf, "keras", None), "initializers", None)
    if initializers is not None:
        draw("keras_draw", lambda: initializers.GlorotUniform()(shape=(8, 8)))
    try:
        from tensorflow.python.ops import stateful_random_ops as sro

        gen = getattr(sro, "global_generator", None)
        if gen is None:
            gen = getattr(sro, "_global_generator", None)
        if gen is not None:
            rec["generator_state"] = _hex(gen.state)
    except Exception as exc:
        rec["generator_error"] = "%s: %s" % (type(exc).__name__, exc)
    return rec


# The functions of the random module that draw from (or reseed) its hidden global instance.
_RANDOM_FUNCS = (
    "random",
    "uniform",
    "triangular",
    "randint",
    "choice",
    "randrange",
    "sample",
    "shuffle",
    "choices",
    "normalvariate",
    "lognormvariate",
    "expovariate",
    "vonmisesvariate",
    "gammavariate",
    "gauss",
    "betavariate",
    "paretovariate",
    "weibullvariate",
    "getrandbits",
    "randbytes",
)


def _where_called(skip: Sequence[str]) -> Tuple[Optional[str], bool]:
    """The first caller outside the files in *skip*, and whether the call happens while a module is being
    imported: libraries that draw at import time (rich's style ids under Keras 3, SciPy 1.17's generated
    docstring examples) are not the program using an unseeded RNG."""
    frame: Optional[FrameType] = sys._getframe(2)
    caller = None
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith("<frozen importlib"):
            return caller, True
        if caller is None and os.path.abspath(name) not in skip:
            caller = "%s:%d" % (name, frame.f_lineno)
        frame = frame.f_back
    return caller, False


def _watch_python_random(draws: Dict[str, Any]) -> None:
    """Count draws from the global random instance, telling apart draws made while a module is being
    imported from draws made while the program runs, and remember where the first runtime draw came from."""
    import random

    skip = (os.path.abspath(__file__), os.path.abspath(random.__file__))

    def wrap(fn: Any) -> Any:
        def spy(*args: Any, **kwargs: Any) -> Any:
            caller, importing = _where_called(skip)
            if importing:
                draws["import_time"] += 1
            else:
                draws["runtime"] += 1
                draws.setdefault("first", caller)
            return fn(*args, **kwargs)

        return spy

    for name in _RANDOM_FUNCS:
        if hasattr(random, name):
            setattr(random, name, wrap(getattr(random, name)))


def child(target: str, script: Optional[str], script_args: Sequence[str], seed: int) -> Dict[str, Any]:
    """One fresh run: record the RNG states around the target."""
    import random

    draws: Dict[str, Any] = {"import_time": 0, "runtime": 0}
    _watch_python_random(draws)
    rec: Dict[str, Any] = {
        "hash": hash("envpin-hygiene"),
        "set_order": list(set(_PROBE_STRINGS)),
        "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED"),
        "random_start": _digest(random.getstate()),
    }
    np: Optional[ModuleType] = None
    unseeded_rngs: List[str] = []
    if target != "none":
        try:
            import numpy as np
        except ImportError:
            np = None
    if np is not None:
        rec["numpy_start"] = _numpy_state_digest(np)
        original = np.random.default_rng

        skip = (os.path.abspath(__file__),)

        def default_rng(seed: Any = None, *args: Any, **kwargs: Any) -> Any:
            if seed is None and not _where_called(skip)[1]:
                unseeded_rngs.append("default_rng()")
            return original(seed, *args, **kwargs)

        np.random.default_rng = default_rng
    if target == "recipe":
        try:
            # what envpin.enable_determinism runs (the root's is this function, handed over)
            from envpin.probe.runtime import enable_determinism

            report = enable_determinism(seed=seed)
            rec["recipe"] = {"applied": report.get("applied", []), "recipe": report.get("recipe")}
        except Exception as exc:
            rec["target_error"] = "envpin.enable_determinism is unusable here: %s: %s" % (type(exc).__name__, exc)
    elif target == "script":
        if script is None:
            raise ValueError("the script target needs the script's path")
        saved_argv, saved_path = sys.argv, list(sys.path)
        sys.argv = [script, *list(script_args)]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python script.py` would
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                rec["target_error"] = "the script exited with status %s" % (exc.code,)
        except Exception as exc:
            rec["target_error"] = "the script raised %s: %s" % (type(exc).__name__, exc)
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path
    rec["random_end"] = _digest(random.getstate())
    rec["random_draws"] = dict(draws)  # before the TensorFlow probes below draw themselves
    if np is not None:
        rec["numpy_end"] = _numpy_state_digest(np)
        rec["numpy_unseeded_generators"] = len(unseeded_rngs)
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "random"):
        rec["tensorflow"] = _tensorflow_record(tf)
    return rec


# ------------------------------------------------------------------------- comparison (pure)


def _entry(check: str, status: str, message: str) -> Dict[str, Any]:
    return {"check": check, "status": status, "message": message, "fix": FIXES[check] if status == "finding" else ""}


def _state_check(check: str, label: str, runs: Sequence[Dict[str, Any]], start: str, end: str) -> Dict[str, Any]:
    moved = any(r[start] != r[end] for r in runs)
    ends = set(r[end] for r in runs)
    if not moved:
        return _entry(check, "ok", "%s was not used (its state did not change)" % label)
    if len(ends) > 1:
        return _entry(
            check,
            "finding",
            "%s was used without a fixed seed: its state after the run differs "
            "between %d fresh processes" % (label, len(runs)),
        )
    return _entry(check, "ok", "%s is seeded: same state after the run in %d fresh processes" % (label, len(runs)))


def _python_random_check(runs: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    entry = _state_check("python-random", "Python's random module", runs, "random_start", "random_end")
    counts: List[Dict[str, Any]] = [c for c in (r.get("random_draws") for r in runs) if c]
    if entry["status"] != "finding" or len(counts) != len(runs):
        return entry
    if all(c["runtime"] == 0 for c in counts):
        return _entry(
            "python-random",
            "ok",
            "Python's random module was drawn from only while modules were being "
            "imported (%d draw(s), e.g. a library's id counter); the program itself "
            "made no draw" % max(c["import_time"] for c in counts),
        )
    first = next((c["first"] for c in counts if c.get("first")), None)
    if first:
        entry["message"] += "; first draw at %s" % first
    return entry


def compare_runs(runs: Sequence[Dict[str, Any]], target: str) -> List[Dict[str, Any]]:
    """Findings from two or more fresh runs of the same target."""
    out = []
    hashes = set(r["hash"] for r in runs)
    orders = [r["set_order"] for r in runs]
    setting = runs[0].get("PYTHONHASHSEED")
    shown = "unset" if setting is None else "%r" % setting
    if len(hashes) > 1:
        moved = sum(1 for i, s in enumerate(orders[0]) if any(o[i] != s for o in orders[1:]))
        out.append(
            _entry(
                "PYTHONHASHSEED",
                "finding",
                "PYTHONHASHSEED is %s: str hashes differ between fresh processes and the iteration "
                "order of a set of %d strings changed (%d positions moved), so anything that iterates "
                "a set or keys by hash (vocabularies, file lists, feature order) can change from run to "
                "run" % (shown, len(_PROBE_STRINGS), moved),
            )
        )
    else:
        out.append(
            _entry(
                "PYTHONHASHSEED",
                "ok",
                "PYTHONHASHSEED is %s: str hashes and set order identical in %d fresh processes" % (shown, len(runs)),
            )
        )
    if target == "none":
        return out
    out.append(_python_random_check(runs))
    if all("numpy_start" in r for r in runs):
        entry = _state_check("numpy-random", "NumPy's global RandomState", runs, "numpy_start", "numpy_end")
        unseeded = max(r.get("numpy_unseeded_generators", 0) for r in runs)
        if unseeded:
            entry = _entry(
                "numpy-random",
                "finding",
                "numpy.random.default_rng() was called without a seed "
                "%d time(s)" % unseeded + ("" if entry["status"] == "ok" else "; " + entry["message"]),
            )
        out.append(entry)
    else:
        out.append({"check": "numpy-random", "status": "skipped", "message": "NumPy is not installed", "fix": ""})
    tfs: List[Dict[str, Any]] = [t for t in (r.get("tensorflow") for r in runs) if t]
    if len(tfs) != len(runs):
        out.append(
            {
                "check": "tensorflow-random",
                "status": "ok",
                "message": "TensorFlow was not imported by the %s" % ("script" if target == "script" else "target"),
                "fix": "",
            }
        )
        return out
    out.append(
        _draw_check(
            "tensorflow-random",
            "tf.random.uniform without an op seed",
            tfs,
            "tf_draw",
            seeded=all(t.get("global_seed_set") for t in tfs),
        )
    )
    if any("keras_draw" in t or "keras_draw_error" in t for t in tfs):
        out.append(
            _draw_check("keras-initializers", "an unseeded Keras initializer (GlorotUniform())", tfs, "keras_draw")
        )
    if any("generator_state" in t for t in tfs):
        states = set(t.get("generator_state") for t in tfs)
        if len(states) > 1:
            out.append(
                _entry(
                    "tensorflow-generator",
                    "finding",
                    "tf.random.get_global_generator() was created from a non-deterministic state",
                )
            )
        else:
            out.append(_entry("tensorflow-generator", "ok", "the global tf.random.Generator has the same state"))
    return out


def _draw_check(
    check: str, label: str, tfs: Sequence[Dict[str, Any]], key: str, seeded: Optional[bool] = None
) -> Dict[str, Any]:
    errors = [t[key + "_error"] for t in tfs if key + "_error" in t]
    if errors:
        return _entry(
            check, "finding", "%s raised %s: with determinism on, unseeded random ops fail" % (label, errors[0])
        )
    draws = set(t.get(key) for t in tfs)
    if len(draws) > 1:
        why = " (the global seed is not set)" if seeded is False else ""
        return _entry(check, "finding", "%s gives different values in fresh processes%s" % (label, why))
    return _entry(check, "ok", "%s gives identical values in %d fresh processes" % (label, len(tfs)))


# ------------------------------------------------------------------------- the parent


def run_hygiene(
    script: Optional[str] = None,
    script_args: Sequence[str] = (),
    quick: bool = False,
    environ: Optional[Dict[str, str]] = None,
    timeout: Optional[float] = None,
    python: Optional[str] = None,
    runs: int = 2,
    seed: int = SEED,
) -> List[Dict[str, Any]]:
    """Seed-hygiene findings: a script if given, else envpin's recipe (``quick``: the hash-seed check only).

    The children inherit ``environ`` unchanged (default: this process's environment), including whether
    PYTHONHASHSEED is set: that is what is being checked.
    """
    target = "script" if script else ("none" if quick else "recipe")
    env = dict(os.environ if environ is None else environ)
    env = tfchild.child_env(env, determinism=None)
    args = ["--child", "--target", target, "--seed", str(seed)]
    if script:
        args += ["--", os.path.abspath(script), *list(script_args)]
    results = tfchild.run_children("envpin.probe.hygiene", args, env, timeout, python, runs)
    payloads = []
    for payload, error, _seconds in results:
        if payload is None:
            failed = tfchild.failure(error, "seed hygiene")
            if "timed_out" in failed:
                entry = {"check": "hygiene", "status": "skipped", "message": failed["timed_out"]["message"], "fix": ""}
                return [dict(entry, timed_out=failed["timed_out"])]
            return [{"check": "hygiene", "status": "skipped", "message": "a hygiene run failed: %s" % error, "fix": ""}]
        payloads.append(payload)
    out = compare_runs(payloads, target)
    failures = sorted(set(p["target_error"] for p in payloads if "target_error" in p))
    if failures:
        note = {"check": target, "status": "skipped", "message": "; ".join(failures), "fix": ""}
        # Without the recipe nothing was seeded on purpose, so RNG verdicts would only restate that.
        out = [*out[:1], note] if target == "recipe" else [*out, note]
    if quick and not script:
        out.append(
            {
                "check": "rng-seeding",
                "status": "skipped",
                "message": "a quick self-test checks only the hash seed; the RNG checks need TensorFlow runs",
                "fix": "",
            }
        )
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envpin.probe.hygiene", description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target", choices=("none", "recipe", "script"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--quick", action="store_true", help="hash-seed check only")
    parser.add_argument("script", nargs="?", help="a training script to run twice (default: envpin's recipe)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    opts = parser.parse_args(argv)
    if opts.child:
        with tfchild.StdoutToStderr():
            rec = child(opts.target or "none", opts.script, opts.args, opts.seed)
        tfchild.emit(rec)
        return 0
    findings = run_hygiene(opts.script, opts.args, opts.quick, seed=opts.seed)
    sys.stdout.write(json.dumps(findings, sort_keys=True, indent=2) + "\n")
    return 1 if any(f["status"] == "finding" for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
