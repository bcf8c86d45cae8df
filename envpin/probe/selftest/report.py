"""What a self-test result says, once: a neutral summary that the Markdown report and the terminal view
both render, so the two can never disagree."""

from typing import Any, Dict, List

from envpin.probe.selftest.compare import fmt_diff

COLUMNS = ["check", "op", "verdict", "differing", "max abs diff", "s"]
NUMERIC = ("differing", "max abs diff", "s")  # right-aligned columns


def summary(result: Dict[str, Any]) -> Dict[str, Any]:
    """The result as plain data (text only, no markup), in the order a person reads it.

    Keys: ``title``; ``tf_version`` and ``method`` (how determinism was switched on); ``headline`` (the
    verdict summary) and ``without_determinism`` (the --compare one, or ""); ``columns`` and ``rows`` (each
    ``{"cells": [...], "verdict": ...}``); ``notes`` (``{"check", "message"}`` for every check that is not
    deterministic or whose verdict contradicts the recipe table, the surprise first); ``golden``
    (``{"text"}`` plus ``hash``, ``device_class``, ``runs_equal``, ``steps`` when there is a hash, else
    ``reason``); ``hygiene``, ``errors`` and ``timed_out`` (one line each); ``replicas`` (the multi-replica
    self-test, one line per set-up and per problem); ``lines`` (everything under the table as plain lines).
    A skipped self-test has ``skipped`` (the reason), no rows, and one line.
    """
    if "skipped" in result:
        return {
            "title": "Determinism self-test",
            "skipped": result["skipped"],
            "tf_version": None,
            "method": None,
            "headline": "",
            "without_determinism": "",
            "columns": [],
            "rows": [],
            "notes": [],
            "golden": {"text": ""},
            "hygiene": [],
            "errors": [],
            "timed_out": [],
            "replicas": [],
            "lines": ["self-test skipped: %s" % result["skipped"]],
        }
    det = result.get("determinism", {})
    method = det.get("method", det.get("requested"))
    off = dict((c["name"], c["verdict"]) for c in result.get("without_determinism", []))
    rows = []
    for c in result.get("checks", []):
        cells = [
            c["name"],
            c["op"],
            c["verdict"],
            "-" if c["differing_elements"] is None else str(c["differing_elements"]),
            fmt_diff(c["max_abs_diff"]) if c["verdict"] != "deterministic" else "0",
            "%.2f" % c["seconds"],
        ]
        if off:
            cells.append(off.get(c["name"], "-"))
        rows.append({"cells": cells, "verdict": c["verdict"]})
    out: Dict[str, Any] = {
        "title": "TensorFlow %s: %s" % (result.get("tf_version"), "" if method is None else method),
        "tf_version": result.get("tf_version"),
        "method": method,
        "headline": result.get("summary", ""),
        "without_determinism": result.get("summary_without_determinism", ""),
        "columns": COLUMNS + (["without determinism"] if off else []),
        "rows": rows,
        "notes": [
            {"check": c["name"], "message": _note(c)}
            for c in result.get("checks", [])
            if c["verdict"] != "deterministic" or c.get("surprise")
        ],
        "golden": _golden(result.get("golden") or {}),
        "hygiene": [_hygiene(h) for h in result.get("hygiene", [])],
        "errors": [str(e) for e in result.get("errors", [])],
        "timed_out": [str(t.get("message")) for t in result.get("timed_out", []) if isinstance(t, dict)],
        "replicas": replica_lines(result["replicas"]) if isinstance(result.get("replicas"), dict) else [],
    }
    out["lines"] = _lines(out)
    return out


def outcome(result: Any, problems: List[str]) -> str:
    """One line for a terminal or a log: what the self-test found, or why it did not run. `problems` is
    run.problems(result) (passed in: this module does not decide what fails)."""
    if not isinstance(result, dict):
        return "self-test: no result"
    if "skipped" in result:
        return "self-test skipped: %s" % result["skipped"]
    if "error" in result:
        return "self-test could not run: %s" % result["error"]
    s = summary(result)
    ran = [c for c in result.get("checks") or [] if c.get("verdict") != "skipped"]
    if problems:
        verdict = "FAILED (%d problem%s)" % (len(problems), "" if len(problems) == 1 else "s")
    elif s["timed_out"]:
        verdict = "inconclusive (%d child%s ran out of time)" % (
            len(s["timed_out"]),
            "" if len(s["timed_out"]) == 1 else "ren",
        )
    elif not ran and (result.get("golden") or {}).get("runs_equal") is not True:
        verdict = "inconclusive (no check could run here, and no golden runs were compared)"  # not "passed"
    else:
        verdict = "passed"
    return "self-test %s: %s; %s" % (verdict, s["headline"], s["golden"]["text"])


def _note(check: Dict[str, Any]) -> str:
    """The check's message, led by the surprise when its verdict contradicts the recipe table."""
    if check.get("surprise"):
        source = (check.get("expected") or {}).get("source")
        cite = " (%s)" % source if source else ""
        return "%s%s. %s" % (check["surprise"], cite, check["message"])
    return str(check["message"])


def _golden(gold: Dict[str, Any]) -> Dict[str, Any]:
    if "hash" not in gold:
        late = gold.get("timed_out")
        reason = gold.get("skipped") or gold.get("error") or (late.get("message") if isinstance(late, dict) else None)
        return {"text": "golden hash not available: %s" % reason, "reason": reason}
    state = "equal in two fresh runs" if gold["runs_equal"] else "DIFFERENT in two fresh runs"
    return {
        "text": "golden hash %s (%s, %d steps) on %s" % (gold["hash"], state, gold["steps"], gold["device_class"]),
        "hash": gold["hash"],
        "device_class": gold["device_class"],
        "runs_equal": gold["runs_equal"],
        "steps": gold["steps"],
    }


def _hash_text(hashes: Any) -> str:
    """The per-replica hashes of the first run: one hash when every replica holds the same weights."""
    first = hashes[0] if hashes else {}
    values = sorted(set(first.values()))
    if len(values) == 1:
        return "every replica %s" % values[0]
    return ", ".join("replica %s %s" % (k, v) for k, v in sorted(first.items()))


def replica_lines(multi: Dict[str, Any]) -> List[str]:
    """The multi-replica self-test as plain lines: one per set-up, then its problems."""
    if "skipped" in multi:
        return ["multi-replica self-test skipped: %s" % multi["skipped"]]
    lines = []
    mirrored = multi.get("mirrored") or {}
    if "error" in mirrored or "skipped" in mirrored:
        lines.append("MirroredStrategy: could not run: %s" % mirrored.get("error", mirrored.get("skipped")))
    elif mirrored:
        state = "equal in %d fresh runs" % mirrored["runs"] if mirrored.get("runs_equal") else "DIFFERENT between runs"
        lines.append(
            "MirroredStrategy over %d devices (%s, %s): %s; %s"
            % (
                multi.get("replicas", 0),
                mirrored.get("device_kind"),
                mirrored.get("cross_device_ops"),
                state,
                _hash_text(mirrored.get("replica_hashes")),
            )
        )
    worker = multi.get("multi_worker")
    if isinstance(worker, dict) and ("error" in worker or "skipped" in worker):
        lines.append("MultiWorkerMirroredStrategy: could not run: %s" % worker.get("error", worker.get("skipped")))
    elif isinstance(worker, dict):
        agree = "workers agree" if worker.get("workers_equal") else "workers DISAGREE"
        runs = worker.get("runs_equal")
        repeat = {True: "equal in %d runs" % worker["runs"], False: "DIFFERENT between runs", None: "one run"}[runs]
        lines.append(
            "MultiWorkerMirroredStrategy, %d workers on loopback (%s): %s, %s; %s"
            % (
                (worker.get("workers") or [0])[0],
                worker.get("communication"),
                agree,
                repeat,
                _hash_text(worker.get("replica_hashes")),
            )
        )
    lines += ["problem: %s" % p for p in multi.get("problems", [])]
    return lines


def _hygiene(h: Dict[str, Any]) -> str:
    text = "%s: %s: %s" % (h["check"], h["status"], h["message"])
    if h["status"] == "finding":
        text += " Fix: %s" % h["fix"]
    return text


def _lines(s: Dict[str, Any]) -> List[str]:
    """The text under the table, in the order a person reads it."""
    lines = ["%s: %s" % (n["check"], n["message"]) for n in s["notes"]]
    lines.append("summary: %s" % s["headline"])
    if s["without_determinism"]:
        lines.append("without determinism: %s" % s["without_determinism"])
    lines.append(s["golden"]["text"])
    lines += s["replicas"]
    lines += ["hygiene %s" % h for h in s["hygiene"]]
    lines += ["error: %s" % e for e in s["errors"]]
    lines += ["timed out (inconclusive): %s" % t for t in s["timed_out"]]
    return lines


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(result: Dict[str, Any]) -> str:
    """The self-test section of a Markdown report (``python -m envpin.probe.selftest --markdown``)."""
    s = summary(result)
    if "skipped" in s:
        return "## Determinism self-test\n\nSkipped: %s\n" % s["skipped"]
    lines = [
        "## Determinism self-test",
        "",
        "TensorFlow %s, determinism: %s." % (s["tf_version"], s["method"]),
        "",
        "**%s**" % s["headline"],
        "",
    ]
    header = "| " + " | ".join("seconds" if c == "s" else c for c in s["columns"]) + " |"
    rule = "|" + "".join("---:|" if c in NUMERIC else "---|" for c in s["columns"])
    lines += [header, rule]
    for row in s["rows"]:
        lines.append("| " + " | ".join(_cell(c) for c in row["cells"]) + " |")
    if s["notes"]:
        lines += [""] + ["- **%s**: %s" % (n["check"], _cell(n["message"])) for n in s["notes"]]
    lines += ["", "### Golden training hash", ""]
    gold = s["golden"]
    if "hash" in gold:
        lines += [
            "- hash: `%s`" % gold["hash"],
            "- device class: `%s`" % gold["device_class"],
            "- two fresh runs equal: %s (%d steps)" % ("yes" if gold["runs_equal"] else "**NO**", gold["steps"]),
        ]
    else:
        lines.append("- not available: %s" % gold["reason"])
    if s["replicas"]:
        lines += ["", "### Multi-replica self-test", ""] + ["- %s" % _cell(r) for r in s["replicas"]]
    lines += ["", "### Seed hygiene", ""] + ["- %s" % h for h in s["hygiene"]]
    if s["errors"]:
        lines += ["", "### Errors", ""] + ["- %s" % _cell(e) for e in s["errors"]]
    if s["timed_out"]:
        lines += ["", "### Did not finish (inconclusive)", ""] + ["- %s" % _cell(t) for t in s["timed_out"]]
    return "\n".join(lines) + "\n"
