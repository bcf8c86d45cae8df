"""Audit output: one line per finding for terminals (tty), compilers' form (gcc), GitHub workflow annotations,
JSON, and SARIF 2.1.0 for code-scanning upload. Every text form says file, line, rule, severity and the fix.

JSON and SARIF are written as a stream of pieces (`json_chunks`, `sarif_chunks`), the same text `json.dumps`
would give, because a benchmark shows the need: for 200,000 findings, `json.dumps(..., indent=2)` of the
document peaked at 437 MB (354 MB over the findings themselves) and took 1.6-2.0 s of CPU; the stream peaked at
84 MB (nothing over the findings) and took 0.8-1.2 s (a 2-core Intel Xeon, Python 3.11). It is the one JSON
writer of the audit; tests/unit/test_audit_stream.py checks its text is canonical JSON."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from json import dumps
from json.encoder import encode_basestring  # the C encoder where CPython has it (ensure_ascii=False)
from pathlib import Path, PurePosixPath

from envpin import HOMEPAGE, __version__
from envpin.audit.check import Finding
from envpin.audit.rule import SEVERITIES
from envpin.audit.rules import RULES

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

JSON_SCHEMA_VERSION = 1
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
FORMATS = ("tty", "json", "sarif", "gcc", "github")
#: Each rule's section in docs/audit.md (the rule id is its anchor).
RULE_DOCS = f"{HOMEPAGE}/blob/main/docs/audit.md"


def help_uri(rule: str) -> str:
    return f"{RULE_DOCS}#{rule}"


def text(f: Finding) -> str:
    """The finding's message and fix as one sentence pair (the same words in every format)."""
    return f"{f.message}. Fix: {f.fix}"


def tty_line(f: Finding) -> str:
    """hadolint's and ruff's shape: `path:line rule severity: message`, one line whatever its length."""
    return f"{f.file}:{f.line} {f.rule} {f.severity}: {_one_line(text(f))}"


def gcc_line(f: Finding) -> str:
    """What compilers print and editors' problem matchers read: `path:line:col: level: message [rule]`."""
    level = "note" if f.severity == "info" else f.severity
    return f"{f.file}:{f.line}:1: {level}: {_one_line(text(f))} [{f.rule}]"


def github_line(f: Finding) -> str:
    """A GitHub Actions workflow command: the finding becomes an annotation on the file and line."""
    level = "notice" if f.severity == "info" else f.severity
    props = f"file={_gh_prop(f.file)},line={f.line},title={_gh_prop(f'envpin {f.rule}')}"
    return f"::{level} {props}::{_gh_data(text(f))}"


def _one_line(value: str) -> str:
    return " ".join(value.split())


def _gh_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(value: str) -> str:
    return _gh_data(value).replace(":", "%3A").replace(",", "%2C")


def summary(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}


def summary_line(findings: list[Finding], files: int) -> str:
    counts = summary(findings)
    if not findings:
        return f"no findings in {files} file{'s' if files != 1 else ''}"
    parts = ", ".join(f"{n} {s}{'s' if n != 1 and s != 'info' else ''}" for s, n in counts.items() if n)
    where = f"{files} file{'s' if files != 1 else ''}"
    return f"{len(findings)} finding{'s' if len(findings) != 1 else ''} in {where}: {parts}"


def to_json(
    findings: list[Finding], files: list[str], fail_on: str, exit_code: int, fixed: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": JSON_SCHEMA_VERSION,
        "tool": {"name": "envpin audit", "version": __version__},
        "files": files,
        "fail_on": fail_on,
        "exit_code": exit_code,
        "summary": summary(findings),
        "findings": [f.to_json() for f in findings],
    }
    if fixed is not None:
        doc["fixed"] = fixed
    return doc


def artifact_uri(path: str) -> str:
    """A relative, forward-slash URI where possible (what code scanning maps onto the repository)."""
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(Path.cwd().resolve())
        except ValueError:
            return p.resolve().as_uri()
    posix = PurePosixPath(*p.parts).as_posix() if p.parts else path
    return urllib.parse.quote(posix.replace(os.sep, "/"), safe="/-._~!$&'()*+,;=@")


def to_sarif(findings: list[Finding]) -> dict[str, Any]:
    """SARIF 2.1.0: every rule with its help text, every finding with ruleId, level and location."""
    ids = sorted(RULES)
    rules = [
        {
            "id": rid,
            "name": "".join(w.capitalize() for w in rid.split("-")),
            "shortDescription": {"text": RULES[rid].title},
            "fullDescription": {"text": RULES[rid].why},
            "help": {"text": RULES[rid].why, "markdown": f"**{RULES[rid].title}**\n\n{RULES[rid].why}"},
            "helpUri": help_uri(rid),
            "defaultConfiguration": {"level": _SARIF_LEVEL[RULES[rid].severity]},
            "properties": {"tags": ["reproducibility", RULES[rid].language]},  # dockerfile or python
        }
        for rid in ids
    ]
    results = [
        {
            "ruleId": f.rule,
            "ruleIndex": ids.index(f.rule),
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": text(f)},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": artifact_uri(f.file)},
                        "region": {"startLine": f.line},
                    }
                }
            ],
        }
        for f in findings
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "envpin-audit",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


# -- streaming: the canonical JSON text in pieces ---------------------------------------------------------
# json.dumps(indent=2) runs the pure-Python encoder: about 25 us a finding, most of a 200,000-finding run.
# These write the same text (sorted keys, two-space indent, ensure_ascii=False, trailing newline) with one
# formatted string per finding and strings escaped in C, and never build the list of finding objects.


class _Stream:
    """A list in a document whose items are made while the text is written (findings, SARIF results)."""

    def __init__(self, items: Iterable[Any], render: Callable[[Any, str], str] | None = None) -> None:
        self.items = items
        #: item, indent -> its text, as _text would write the item's JSON (default: _text itself)
        self.render = render or _text


_KEYS: dict[str, str] = {}  # object keys as JSON, encoded once
_CONSTANTS = {True: "true", False: "false", None: "null"}


def _text(value: Any, pad: str) -> str:
    """`value` as json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) writes it at indent `pad`,
    as one string (an item of a streamed list: a finding, a SARIF result)."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if kind is int:
        return int.__repr__(value)
    if kind is dict:
        if not value:
            return "{}"
        inner, deeper = "\n" + pad + "  ", pad + "  "
        keys = _KEYS
        parts = []
        for k in sorted(value):
            key = keys.get(k) if type(k) is str else None
            if key is None:
                key = keys[k] = encode_basestring(k)
            parts.append(key + ": " + _text(value[k], deeper))
        return "{" + inner + ("," + inner).join(parts) + "\n" + pad + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        inner, deeper = "\n" + pad + "  ", pad + "  "
        return "[" + inner + ("," + inner).join(_text(v, deeper) for v in value) + "\n" + pad + "]"
    if kind is bool or value is None:
        return _CONSTANTS[value]
    if isinstance(value, str):
        return encode_basestring(value)
    if isinstance(value, (dict, list, tuple)):
        return _text(dict(value) if isinstance(value, dict) else list(value), pad)
    return dumps(value)  # floats, int subclasses; TypeError for what JSON cannot hold


def _streams(value: Any) -> bool:
    """A _Stream is somewhere in `value`."""
    if isinstance(value, _Stream):
        return True
    if isinstance(value, dict):
        return any(_streams(v) for v in value.values())
    return isinstance(value, (list, tuple)) and any(_streams(v) for v in value)


def _chunks(value: Any, pad: str) -> Iterator[str]:
    """`value` in pieces: a _Stream's items one by one as they are made, everything else as _text."""
    if isinstance(value, dict) and _streams(value):
        inner = "\n" + pad + "  "
        yield "{"
        for i, key in enumerate(sorted(value)):
            yield ("," if i else "") + inner + encode_basestring(key) + ": "
            yield from _chunks(value[key], pad + "  ")
        yield "\n" + pad + "}"
    elif isinstance(value, (list, tuple)) and _streams(value):
        inner = "\n" + pad + "  "
        for i, item in enumerate(value):
            yield ("[" if i == 0 else ",") + inner
            yield from _chunks(item, pad + "  ")
        yield "\n" + pad + "]"
    elif isinstance(value, _Stream):
        inner, deeper = "\n" + pad + "  ", pad + "  "
        empty = True
        render = value.render
        for item in value.items:
            yield ("[" if empty else ",") + inner + render(item, deeper)
            empty = False
        yield "[]" if empty else "\n" + pad + "]"
    else:
        yield _text(value, pad)


def json_chunks(
    findings: list[Finding], files: list[str], fail_on: str, exit_code: int, fixed: list[dict[str, Any]] | None = None
) -> Iterator[str]:
    """The text of to_json(...) as the CLI prints it (canonical JSON and a newline), in pieces to write as
    they come: no list of finding objects, no pure-Python encoder."""
    doc = to_json([], files, fail_on, exit_code, fixed)
    doc["summary"] = summary(findings)
    doc["findings"] = _Stream(f.to_json() for f in findings)
    yield from _chunks(doc, "")
    yield "\n"


def sarif_chunks(findings: list[Finding]) -> Iterator[str]:
    """The text of to_sarif(findings) as the CLI prints it, in pieces (see json_chunks). A result has one
    fixed shape, so its text is one template filled per finding (the same text _text writes for the dict
    to_sarif builds; tests/unit/test_audit_stream.py compares them)."""
    doc = to_sarif([])
    index = {rid: str(i) for i, rid in enumerate(sorted(RULES))}
    shared: dict[str, str] = {}  # file paths, levels and rule ids: encoded once

    def enc(value: str) -> str:
        out = shared.get(value)
        if out is None:
            out = shared[value] = encode_basestring(value)
        return out

    uris: dict[str, str] = {}
    templates: dict[str, str] = {}

    def result(f: Finding, pad: str) -> str:
        template = templates.get(pad)
        if template is None:
            template = templates[pad] = _sarif_result_template(pad)
        uri = uris.get(f.file)
        if uri is None:
            uri = uris[f.file] = encode_basestring(artifact_uri(f.file))
        return template.format(
            level=enc(_SARIF_LEVEL[f.severity]),
            uri=uri,
            line=int(f.line),
            text=encode_basestring(text(f)),
            rule=enc(f.rule),
            index=index[f.rule],
        )

    doc["runs"][0]["results"] = _Stream(findings, result)
    yield from _chunks(doc, "")
    yield "\n"


def _sarif_result_template(pad: str) -> str:
    """One SARIF result at indent `pad`, with {level} {uri} {line} {text} {rule} {index} to fill (JSON)."""
    sample = {
        "level": "\0level",
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": "\0uri"}, "region": {"startLine": "\0line"}}}],
        "message": {"text": "\0text"},
        "ruleId": "\0rule",
        "ruleIndex": "\0index",
    }
    out = _text(sample, pad).replace("{", "{{").replace("}", "}}")
    for name in ("level", "uri", "line", "text", "rule", "index"):
        out = out.replace(encode_basestring("\0" + name), "{" + name + "}")
    return out
