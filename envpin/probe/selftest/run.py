"""The parent side: run the battery, golden training and hygiene children, assemble and judge the result."""

import argparse
import shutil
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from envpin.probe import tfchild
from envpin.probe.replicas import replica_count as multi_replica_count
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
    timeout: Optional[float] = None,
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
        return tfchild.failure(error, "battery (determinism %s)" % ("on" if determinism else "off"))
    return payload


def _verdicts(checks: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [dict(c) for c in checks]


def run_selftest(
    compare: bool = False,
    quick: bool = False,
    environ: Optional[Dict[str, str]] = None,
    hygiene_script: Optional[str] = None,
    hygiene_args: Sequence[str] = (),
    timeout: Optional[float] = None,
    python: Optional[str] = None,
    replicas: Optional[int] = None,
    progress: Optional[Callable[[int, int, str], None]] = None,
) -> Dict[str, Any]:
    """The whole self-test as one JSON-able dict (``{"skipped": reason}`` when TensorFlow cannot be imported).

    Children run concurrently (up to :func:`envpin.probe.tfchild.max_jobs` TensorFlow processes at a time):
    the battery with determinism on, with ``compare`` a second battery with it off, the two golden
    training runs, the seed-hygiene processes, and with ``replicas`` the multi-replica self-test
    (:mod:`envpin.probe.replicas`: MirroredStrategy over that many devices, MWMS over two workers).
    ``progress(done, total, part)`` hears how many of these parts have finished: once before they start
    (part "") and as each one ends, from the thread that ran it.
    """
    from concurrent.futures import ThreadPoolExecutor

    from envpin.probe import golden, hygiene
    from envpin.probe import replicas as multi

    started = time.time()
    tmp = tempfile.mkdtemp(prefix="envpin-replicas-") if replicas else None
    try:
        with ThreadPoolExecutor(max_workers=5) as pool:
            # The MWMS pair first: it holds one child slot for two processes, the longest wait otherwise.
            f_workers = pool.submit(multi.run_multi_worker, quick, tmp, environ, timeout, python) if tmp else None
            f_on = pool.submit(run_battery, True, quick, None, 1, environ, timeout, python)
            f_off = pool.submit(run_battery, False, quick, None, 1, environ, timeout, python) if compare else None
            # With replicas the two golden children run the MirroredStrategy set-up after their training.
            f_golden = pool.submit(
                golden.run_golden,
                golden.STEPS,
                None,
                None,
                environ,
                2,
                timeout,
                python,
                replicas,
                tmp,
                multi.STEPS,
            )
            f_hygiene = pool.submit(
                hygiene.run_hygiene, hygiene_script, list(hygiene_args), quick, environ, timeout, python
            )
            parts = [
                (f_workers, "MultiWorkerMirroredStrategy workers"),
                (f_on, "the op battery"),
                (f_off, "the op battery without determinism"),
                (f_golden, "golden training"),
                (f_hygiene, "seed hygiene"),
            ]
            _count_parts([(f, part) for f, part in parts if f is not None], progress)
            on = f_on.result()
            off = f_off.result() if f_off is not None else None
            gold = f_golden.result()
            hyg = f_hygiene.result()
            workers = f_workers.result() if f_workers is not None else None
        multi_result = None
        if replicas:
            runs = gold.pop("mirrored_runs", None)
            if runs:
                mirrored = multi.assemble_mirrored(runs)
            elif "timed_out" in gold:
                mirrored = {"timed_out": dict(gold["timed_out"], what="MirroredStrategy (in the golden children)")}
            else:
                mirrored = {"error": "golden training: %s" % _why(gold)}
            multi_result = multi.combine(replicas, mirrored, workers, started)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
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
    if "error" in on or "timed_out" in on:
        if "error" in on:
            errors.append("battery (determinism on): " + on["error"])
        why = on["error"] if "error" in on else on["timed_out"]["message"]
        result.update(
            {
                "tf_version": None,
                "determinism": {"requested": "on"},
                "checks": [],
                "summary": ("battery failed: " if "error" in on else "battery did not finish: ") + why,
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
        elif "timed_out" in off:
            result["without_determinism"] = []
        else:
            result["without_determinism"] = _verdicts(off["checks"])
            result["summary_without_determinism"] = verdict_summary(off["checks"])
    if "error" in gold:
        errors.append("golden training: " + gold["error"])
    if multi_result is not None:
        result["replicas"] = multi_result
    late = _timeouts(on, off, gold, hyg, multi_result)
    if late:
        result["timed_out"] = late
    if errors:
        result["errors"] = errors
    result["seconds"] = round(time.time() - started, 3)
    return result


def _count_parts(parts: Sequence[Tuple[Any, str]], progress: Optional[Callable[[int, int, str], None]]) -> None:
    """Tell `progress` how many of the parts (futures, each with its name) have finished: 0 now, then one
    more as each ends, each count once and in order whichever child's thread ends first."""
    if progress is None:
        return
    finished = [0]
    counting = threading.Lock()

    def ended(part: str) -> Callable[[Any], None]:
        def report(_future: Any) -> None:
            with counting:
                finished[0] += 1
                progress(finished[0], len(parts), part)

        return report

    progress(0, len(parts), "")
    for future, part in parts:
        future.add_done_callback(ended(part))


def _timeouts(*parts: Any) -> List[Dict[str, Any]]:
    """Every child that ran out of time, wherever its part of the result recorded it."""
    out = []
    for part in parts:
        items = part if isinstance(part, list) else [part]
        if isinstance(part, dict) and "mirrored" in part:  # the multi-replica section
            items = [part.get("mirrored"), part.get("multi_worker")]
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("timed_out"), dict):
                out.append(item["timed_out"])
    return out


def timed_out(result: Any) -> List[str]:
    """The children of a self-test that ran out of time, one line each: an unfinished self-test is
    inconclusive, never FAILED (its exit status is 2, with a hint to raise the limit)."""
    if not isinstance(result, dict):
        return []
    return [str(t.get("message")) for t in result.get("timed_out", []) if isinstance(t, dict)]


def _why(gold: Dict[str, Any]) -> str:
    return str(gold.get("error") or gold.get("skipped") or "no MirroredStrategy result")


def _listed_silent(check: Dict[str, Any]) -> bool:
    return (check.get("expected") or {}).get("verdict") == SILENT


def known_nondeterministic(check: Dict[str, Any]) -> bool:
    """A check that differed under determinism where the recipe table says this op stays nondeterministic
    on this TensorFlow and device (weighted Bincount on CPU): a limitation to avoid in a model, like an op
    that raises, not a sign that this environment is broken."""
    return check.get("verdict") == "NONDETERMINISTIC" and (check.get("expected") or {}).get("verdict") == SILENT


def problems(result: Dict[str, Any]) -> List[str]:
    """What makes a self-test fail (exit 1): ops that differ under determinism where the recipe table does
    not say they stay nondeterministic, a verdict that contradicts the table (an op listed as raising that
    ran, or listed as deterministic that raised), unequal golden runs,
    hygiene findings and child failures. Ops that raise under determinism, and ops the table lists as
    nondeterministic here, as the table says, are reported, not failures: they say which ops a model must
    avoid, not that this environment is broken. A battery run without
    determinism carries no expectations, so every op that differs there counts."""
    out = []
    for c in result.get("checks", []):
        if c["verdict"] == "NONDETERMINISTIC" and not known_nondeterministic(c):
            out.append("%s (%s) is NONDETERMINISTIC with determinism on: %s" % (c["name"], c["op"], c["message"]))
        elif c.get("surprise") and not (c["verdict"] == "deterministic" and _listed_silent(c)):
            # The table says otherwise: it is wrong for this platform, or this environment is not what it says.
            # (A listed race that did not show is no evidence against the table: under load its threads may
            # not collide; it stays a note.)
            source = (c.get("expected") or {}).get("source")
            out.append(
                "%s (%s) contradicts the recipe table: %s%s"
                % (c["name"], c["op"], c["surprise"], " (%s)" % source if source else "")
            )
    gold = result.get("golden") or {}
    if gold.get("runs_equal") is False:
        out.append("golden training differs between two fresh runs: %s" % ", ".join(gold.get("hashes", [])))
    for h in result.get("hygiene", []):
        if h.get("status") == "finding":
            out.append("%s: %s Fix: %s" % (h["check"], h["message"], h["fix"]))
    multi = result.get("replicas")
    if isinstance(multi, dict):
        if "skipped" in multi:
            out.append("multi-replica self-test could not run: %s" % multi["skipped"])
        else:
            from envpin.probe.replicas import problems as replica_problems

            out.extend(replica_problems(multi))
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
    if not found and timed_out(result):
        return False, "self-test timed out (inconclusive): %s" % "; ".join(timed_out(result))
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
    parser.add_argument("--replicas", type=multi_replica_count, default=None, help="also the multi-replica self-test")
    parser.add_argument("--timeout", type=float, default=None, help="CPU seconds per child (default 600)")
    opts = parser.parse_args(argv)
    if opts.child:
        names = [n for n in opts.checks.split(",") if n]
        select(names)  # unknown names fail here, before TensorFlow is imported
        with tfchild.StdoutToStderr():
            result = battery(opts.determinism == "on", opts.quick, names, max(1, opts.rounds))
        tfchild.emit(result)
        return 0
    result = run_selftest(compare=opts.compare, quick=opts.quick, replicas=opts.replicas, timeout=opts.timeout)
    if opts.markdown:
        sys.stdout.write(render_markdown(result))
    else:
        tfchild.emit(result)
    if "skipped" in result:
        return 2
    if problems(result):
        return 1
    return 2 if timed_out(result) else 0
