"""The parent side: run the battery, golden training and hygiene children, assemble and judge the result."""

import argparse
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envpin.probe import tfchild
from envpin.probe.selftest.battery import battery
from envpin.probe.selftest.compare import verdict_summary
from envpin.probe.selftest.expect import SILENT
from envpin.probe.selftest.ops import select
from envpin.probe.selftest.report import outcome, render_markdown

SCHEMA = "envpin.selftest/1"


def run_battery(
    determinism: bool = True,
    quick: bool = False,
    names: Optional[Sequence[str]] = None,
    rounds: int = 1,
    environ: Optional[Dict[str, str]] = None,
    timeout: float = 600,
    python: Optional[str] = None,
) -> Dict[str, Any]:
    """Run the battery in a fresh child with determinism switched on (or off) in its environment."""
    args = ["--child", "--determinism", "on" if determinism else "off", "--rounds", str(rounds)]
    if quick:
        args.append("--quick")
    if names:
        args += ["--checks", ",".join(names)]
    env = tfchild.child_env(environ, determinism=determinism)
    payload, error, _seconds = tfchild.run_child("envpin.probe.selftest", args, env, timeout, python)
    if payload is None:
        return {"error": error}
    return payload


def _verdicts(checks: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [dict(c) for c in checks]


def run_selftest(
    compare: bool = False,
    quick: bool = False,
    environ: Optional[Dict[str, str]] = None,
    hygiene_script: Optional[str] = None,
    hygiene_args: Sequence[str] = (),
    timeout: float = 600,
    python: Optional[str] = None,
) -> Dict[str, Any]:
    """The whole self-test as one JSON-able dict (``{"skipped": reason}`` when TensorFlow cannot be imported).

    Children run concurrently (up to :func:`envpin.probe.tfchild.max_jobs` TensorFlow processes at a time):
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
        f_hygiene = pool.submit(
            hygiene.run_hygiene, hygiene_script, list(hygiene_args), quick, environ, timeout, python
        )
        on = f_on.result()
        off = f_off.result() if f_off is not None else None
        gold = f_golden.result()
        hyg = f_hygiene.result()
    if "skipped" in on:
        return {"skipped": on["skipped"]}
    errors = []
    result: Dict[str, Any] = {
        "schema": SCHEMA,
        "mode": "quick" if quick else "full",
        "python": tfchild.python_info(),
        "golden": gold,
        "hygiene": hyg,
    }
    if "error" in on:
        errors.append("battery (determinism on): " + on["error"])
        result.update(
            {
                "tf_version": None,
                "determinism": {"requested": "on"},
                "checks": [],
                "summary": "battery failed: " + on["error"],
            }
        )
    else:
        result.update(
            {
                "python": on["python"],  # the interpreter TensorFlow ran in
                "tf_version": on["tf_version"],
                "numpy_version": on["numpy_version"],
                "keras_version": on.get("keras_version"),
                "build": on.get("build", "stock"),
                "eager": on["eager"],
                "device": on.get("device", "cpu"),
                "determinism": on["determinism"],
                "trials": on["trials"],
                "runs_per_trial": on["runs_per_trial"],
                "checks": _verdicts(on["checks"]),
                "summary": verdict_summary(on["checks"]),
            }
        )
    if off is not None:
        if "error" in off or "skipped" in off:
            errors.append("battery (determinism off): " + off.get("error", off.get("skipped", "")))
            result["without_determinism"] = []
        else:
            result["without_determinism"] = _verdicts(off["checks"])
            result["summary_without_determinism"] = verdict_summary(off["checks"])
    if "error" in gold:
        errors.append("golden training: " + gold["error"])
    if errors:
        result["errors"] = errors
    result["seconds"] = round(time.time() - started, 3)
    return result


def known_nondeterministic(check: Dict[str, Any]) -> bool:
    """A check that differed under determinism where the recipe table says this op stays nondeterministic
    on this TensorFlow and device (weighted Bincount on CPU): a limitation to avoid in a model, like an op
    that raises, not a sign that this environment is broken."""
    return check.get("verdict") == "NONDETERMINISTIC" and (check.get("expected") or {}).get("verdict") == SILENT


def problems(result: Dict[str, Any]) -> List[str]:
    """What makes a self-test fail (exit 1): ops that differ under determinism where the recipe table does
    not say they stay nondeterministic, unequal golden runs, hygiene findings and child failures. Ops that
    raise under determinism, and ops the table lists as nondeterministic here, are reported, not failures:
    they say which ops a model must avoid, not that this environment is broken. A battery run without
    determinism carries no expectations, so every op that differs there counts."""
    out = []
    for c in result.get("checks", []):
        if c["verdict"] == "NONDETERMINISTIC" and not known_nondeterministic(c):
            out.append("%s (%s) is NONDETERMINISTIC with determinism on: %s" % (c["name"], c["op"], c["message"]))
    gold = result.get("golden") or {}
    if gold.get("runs_equal") is False:
        out.append("golden training differs between two fresh runs: %s" % ", ".join(gold.get("hashes", [])))
    for h in result.get("hygiene", []):
        if h.get("status") == "finding":
            out.append("%s: %s Fix: %s" % (h["check"], h["message"], h["fix"]))
    out.extend(result.get("errors", []))
    return out


def verdict(result: Any, insisted: bool = False) -> Tuple[bool, str]:
    """(failed, one line) for a self-test result: failed on problems() or when it could not run; a skipped
    one (no TensorFlow) fails only when it was asked for by name (`insisted`)."""
    if not isinstance(result, dict):
        return False, "self-test: no result"
    if "skipped" in result:
        return insisted, ("self-test could not run: %s" % result["skipped"]) if insisted else outcome(result, [])
    if "error" in result:
        return True, outcome(result, [])
    try:
        found = problems(result)
    except (KeyError, TypeError, AttributeError) as exc:
        return True, "self-test result is malformed: %s" % exc
    return bool(found), outcome(result, found)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m envpin.probe.selftest",
        description="Determinism self-test: per-op verdicts, the golden training hash and seed hygiene.",
    )
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
        with tfchild.StdoutToStderr():
            result = battery(opts.determinism == "on", opts.quick, names, max(1, opts.rounds))
        tfchild.emit(result)
        return 0
    result = run_selftest(compare=opts.compare, quick=opts.quick)
    if opts.markdown:
        sys.stdout.write(render_markdown(result))
    else:
        tfchild.emit(result)
    if "skipped" in result:
        return 2
    return 1 if problems(result) else 0
