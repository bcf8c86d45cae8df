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
    ``reason``); ``hygiene`` and ``errors`` (one line each); ``lines`` (everything under
    the table as plain lines). A skipped self-test has ``skipped`` (the reason), no rows, and one line.
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
        reason = gold.get("skipped") or gold.get("error")
        return {"text": "golden hash not available: %s" % reason, "reason": reason}
    state = "equal in two fresh runs" if gold["runs_equal"] else "DIFFERENT in two fresh runs"
    return {
        "text": "golden hash %s (%s, %d steps) on %s" % (gold["hash"], state, gold["steps"], gold["device_class"]),
        "hash": gold["hash"],
        "device_class": gold["device_class"],
        "runs_equal": gold["runs_equal"],
        "steps": gold["steps"],
    }


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
    lines += ["hygiene %s" % h for h in s["hygiene"]]
    lines += ["error: %s" % e for e in s["errors"]]
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
    lines += ["", "### Seed hygiene", ""] + ["- %s" % h for h in s["hygiene"]]
    if s["errors"]:
        lines += ["", "### Errors", ""] + ["- %s" % _cell(e) for e in s["errors"]]
    return "\n".join(lines) + "\n"
