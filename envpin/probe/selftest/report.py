"""What a self-test result says, once: a neutral summary that the Markdown report and the terminal view
both render, so the two can never disagree."""

from typing import Any, Dict, List

from envpin.probe.selftest.compare import fmt_diff

COLUMNS = ["check", "op", "verdict", "differing", "max abs diff", "s"]


def summary(result: Dict[str, Any]) -> Dict[str, Any]:
    """The result as plain data: a title, table columns and rows (cells as text, plus the verdict), the
    notes on checks that are not deterministic, the golden hash, hygiene findings and errors."""
    if "skipped" in result:
        return {"title": "Determinism self-test", "skipped": result["skipped"], "columns": [], "rows": [],
                "notes": [], "golden": "", "hygiene": [], "errors": [], "lines": []}
    det = result.get("determinism", {})
    off = dict((c["name"], c["verdict"]) for c in result.get("without_determinism", []))
    columns = COLUMNS + (["without determinism"] if off else [])
    rows = []
    for c in result.get("checks", []):
        cells = [
            c["name"], c["op"], c["verdict"],
            "-" if c["differing_elements"] is None else str(c["differing_elements"]),
            fmt_diff(c["max_abs_diff"]) if c["verdict"] != "deterministic" else "0",
            "%.2f" % c["seconds"],
        ]
        if off:
            cells.append(off.get(c["name"], "-"))
        rows.append({"cells": cells, "verdict": c["verdict"]})
    notes = ["%s: %s" % (c["name"], c["message"]) for c in result.get("checks", []) if c["verdict"] != "deterministic"]
    gold = result.get("golden") or {}
    if "hash" in gold:
        state = "equal in two fresh runs" if gold["runs_equal"] else "DIFFERENT in two fresh runs"
        golden = "golden hash %s (%s, %d steps) on %s" % (gold["hash"], state, gold["steps"], gold["device_class"])
    else:
        golden = "golden hash not available: %s" % (gold.get("skipped") or gold.get("error"))
    hygiene = []
    for h in result.get("hygiene", []):
        text = "%s: %s: %s" % (h["check"], h["status"], h["message"])
        if h["status"] == "finding":
            text += " Fix: %s" % h["fix"]
        hygiene.append(text)
    out = {
        "title": "TensorFlow %s: %s" % (result.get("tf_version"), det.get("method", det.get("requested", ""))),
        "headline": result.get("summary", ""),
        "without_determinism": result.get("summary_without_determinism", ""),
        "columns": columns,
        "rows": rows,
        "notes": notes,
        "golden": golden,
        "hygiene": hygiene,
        "errors": list(result.get("errors", [])),
    }  # type: Dict[str, Any]
    out["lines"] = _lines(out)
    return out


def _lines(s: Dict[str, Any]) -> List[str]:
    """The text under the table, in the order a person reads it."""
    lines = list(s["notes"])
    lines.append("summary: %s" % s["headline"])
    if s["without_determinism"]:
        lines.append("without determinism: %s" % s["without_determinism"])
    lines.append(s["golden"])
    lines += ["hygiene %s" % h for h in s["hygiene"]]
    lines += ["error: %s" % e for e in s["errors"]]
    return lines


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(result: Dict[str, Any]) -> str:
    """The self-test section of the probe's Markdown report."""
    s = summary(result)
    if "skipped" in s:
        return "## Determinism self-test\n\nSkipped: %s\n" % s["skipped"]
    lines = ["## Determinism self-test", "", s["title"].replace(": ", ", determinism: ", 1) + ".", "",
             "**%s**" % s["headline"], ""]
    header = "| " + " | ".join("seconds" if c == "s" else c for c in s["columns"]) + " |"
    rule = "|---|---|---|---:|---:|---:|" + ("---|" if len(s["columns"]) > len(COLUMNS) else "")
    lines += [header, rule]
    for row in s["rows"]:
        lines.append("| " + " | ".join(_cell(c) for c in row["cells"]) + " |")
    if s["notes"]:
        lines += [""] + ["- **%s**:%s" % (n.split(":", 1)[0], _cell(n.split(":", 1)[1])) for n in s["notes"]]
    lines += ["", "### Golden training hash", ""]
    gold = result.get("golden") or {}
    if "hash" in gold:
        lines += [
            "- hash: `%s`" % gold["hash"],
            "- device class: `%s`" % gold["device_class"],
            "- two fresh runs equal: %s (%d steps)" % ("yes" if gold["runs_equal"] else "**NO**", gold["steps"]),
        ]
    else:
        lines.append("- not available: %s" % (gold.get("skipped") or gold.get("error")))
    lines += ["", "### Seed hygiene", ""] + ["- %s" % h for h in s["hygiene"]]
    if s["errors"]:
        lines += ["", "### Errors", ""] + ["- %s" % _cell(e) for e in s["errors"]]
    return "\n".join(lines) + "\n"
