"""Auditing one Python training script: parse it with `ast` (never import or run it), walk it once (Script) and
run every script family's checks over the walk."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable, Mapping

from envpin.audit.check import Finding, finding
from envpin.audit.engine import merge
from envpin.audit.python.script import Peer, Run, Script, ScriptTarget, make_runs, module_names
from envpin.audit.rules import script_families
from envpin.audit.rules.syntax import PARSE_ERROR
from envpin.errors import EnvpinError, UsageError
from envpin.files.read import read_regular

__all__ = [
    "ScriptTarget",
    "audit_script",
    "declared_encoding",
    "explain",
    "is_script",
    "parse_script",
    "peers_of",
    "read_script",
    "read_script_encoded",
    "run_checks",
    "target_for",
]

from envpin.audit.python import SUFFIXES as SUFFIXES  # their home is the package, which costs nothing to load
from envpin.audit.python import is_script


def parse_script(text: str, path: str) -> ast.Module | Finding:
    """The syntax tree, or the parse-error finding for the first line Python rejects."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like are the script's business
            return ast.parse(text.removeprefix("\ufeff"), filename=path)  # a UTF-8 BOM, as Python itself allows
    except SyntaxError as exc:
        return finding(
            PARSE_ERROR,
            path,
            exc.lineno or 1,
            f"Python cannot parse this line: {exc.msg}",
            "fix the syntax (the rest of the script is not audited until it parses)",
        )
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        return finding(PARSE_ERROR, path, 1, f"Python cannot parse the script: {type(exc).__name__}", "fix the file")


#: Every script family's checks, in the registry's order. The order does not change the output: each rule is
#: reported by one check, and findings are merged per rule and sorted.
CHECKS: tuple[Callable[[Script], None], ...] = tuple(check for family in script_families() for check in family.CHECKS)


def run_checks(s: Script) -> list[Finding]:
    """The findings of every check over one walked script, in the order the checks added them."""
    for check in CHECKS:
        check(s)
    return s.findings


def audit_script(
    text: str, path: str = "train.py", target: ScriptTarget | None = None, peers: Mapping[str, Peer] | None = None
) -> list[Finding]:
    """All findings for one script, one per rule and line, sorted; `peers`: the other scripts of the run
    (peers_of), which its imports may reach."""
    tree = parse_script(text, path)
    if isinstance(tree, Finding):
        return [tree]
    return merge(run_checks(Script(path, tree, target or ScriptTarget(), peers)))


def peers_of(texts: Mapping[str, str], target: ScriptTarget | None = None) -> dict[str, Peer]:
    """The scripts of one run by every module name an import may reach them by (envpin.audit.python.script.
    module_names): whether each uses TensorFlow and why it trains itself, so that a script that trains through
    a model or trainer of another one is judged to train (`envpin audit src/`); and which scripts of the run each
    imports and whether it trains through them, so that a hazard of the whole run is judged once, for the run
    (Script.runs)."""
    aim = target or ScriptTarget()
    first: dict[str, Peer] = {}  # by module name
    mine: dict[str, tuple[Script, Peer]] = {}  # by path
    for path, text in texts.items():
        tree = parse_script(text, path)
        if isinstance(tree, Finding):
            continue
        s = Script(path, tree, aim)
        peer = Peer(
            path, s.uses_tf(), None if s.is_test() else s.own_training_reason() if s.uses_tf() else None, walk=s
        )
        mine[path] = (s, peer)
        for name in module_names(path):
            first.setdefault(name, peer)
    final: dict[str, Peer] = {}
    for path, (s, peer) in mine.items():
        seen = s.with_peers(first)  # with the run: its imports of it, and training through them
        final[path] = peer.replace(imports=seen.imported_paths(), trains=seen.trains(), bound=seen.bindings())
    runs = make_runs(final)
    member: dict[str, list[Run]] = {}
    for run in runs:
        for w in run.scripts:
            member.setdefault(w.path, []).append(run)
    for path, peer in final.items():
        final[path] = peer.replace(member_of=tuple(member.get(path, ())))
    return {name: final[peer.path] for name, peer in first.items()}


def explain(text: str, path: str, target: ScriptTarget | None = None, peers: Mapping[str, Peer] | None = None) -> str:
    """Why the audit judges the script to train, or why not (`envpin audit --explain`)."""
    tree = parse_script(text, path)
    if isinstance(tree, Finding):
        return "not judged: Python cannot parse it"
    s = Script(path, tree, target or ScriptTarget(), peers)
    reason = s.training_reason()
    if reason is not None:
        entries = [r.entry for r in s.runs() if r.entry != path]
        part = f"; judged as a module of the training run of {', '.join(entries)}" if entries else ""
        return f"trains: {reason}{part}"
    if s.is_test():
        return "does not train: a test module"
    entries = [r.entry for r in s.runs()]
    if entries:
        return f"does not train itself: a module of the training run of {', '.join(entries)}"
    if not s.uses_tf():
        return "does not train: it uses neither TensorFlow nor Keras (nor a module of the run that does)"
    return "does not train: no call of its own, nor of a module of the run, trains"


def read_script(path: str) -> str:
    """The script's text (see read_script_encoded)."""
    return read_script_encoded(path)[0]


def read_script_encoded(path: str) -> tuple[str, str]:
    """The script's text and the encoding Python reads it in: a UTF-8 BOM or a PEP 263 coding line (`# -*-
    coding: latin-1 -*-`, common in older training code), else UTF-8; --fix writes it back in the same one. A
    missing, binary or undecodable file stops the run (exit 2), as for Dockerfiles."""
    try:
        raw = read_regular(path)  # a regular file of at most 64 MiB: a FIFO or /dev/zero is refused
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file", hint="check the path") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a Python script", hint="name the script itself") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}", hint="check the file's permissions") from None
    if b"\0" in raw:
        line = raw[: raw.index(b"\0")].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: binary file (NUL byte), not a Python script", hint="name a .py file")
    encoding = declared_encoding(raw, path)
    try:
        return raw.decode(encoding), encoding
    except LookupError:  # a codec that is no text encoding (rot13, hex, base64): Python refuses it too
        line = next((n for n, text in enumerate(raw.splitlines()[:2], 1) if b"coding" in text), 1)
        raise UsageError(
            f"{path}:{line}: Python cannot read this script: its coding line names {encoding!r}, "
            "which is not a text encoding",
            hint="correct the coding line (PEP 263), or remove it and save the script as UTF-8",
        ) from None
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        named = "UTF-8" if encoding == "utf-8" else f"{encoding} (its coding line)"
        hint = (
            "save the script as UTF-8, or declare its encoding in a coding line (PEP 263)"
            if encoding == "utf-8"
            else "correct the coding line to the encoding the file is saved in"
        )
        raise UsageError(f"{path}:{line}: not {named} text (byte 0x{raw[exc.start]:02x})", hint=hint) from None


def declared_encoding(raw: bytes, path: str) -> str:
    """The encoding Python itself would read `raw` in (tokenize's rules: a BOM, a coding line on line 1 or 2),
    as a codec name; "utf-8" for a BOM (the text keeps the BOM, which --fix puts back)."""
    import io
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        if exc.msg.startswith("unknown encoding: "):
            why = f"its coding line names {exc.msg.removeprefix('unknown encoding: ')!r}, which Python does not know"
        elif exc.msg.startswith("encoding problem"):
            why = "it starts with a UTF-8 BOM but its coding line names another encoding"
        else:  # a first line that is not UTF-8, and no coding line: the UTF-8 decode names the byte
            return "utf-8"
        line = next((n for n, text in enumerate(raw.splitlines()[:2], 1) if b"coding" in text), 1)
        raise UsageError(
            f"{path}:{line}: Python cannot read this script: {why}",
            hint="correct the coding line (PEP 263), or remove it and save the script as UTF-8",
        ) from None
    return "utf-8" if encoding in ("utf-8", "utf-8-sig") else encoding


def target_for(
    tf_version: str, distribution: str, release: str | None, label: str, image_env: dict[str, str] | None = None
) -> ScriptTarget:
    """The target for a version: its recipe when the table has one (else the version alone)."""
    from envpin.knowledge import recipes

    try:
        recipe = recipes.select(tf_version, distribution, release)
    except EnvpinError:
        recipe = None
    return ScriptTarget(label, tf_version, recipe, dict(image_env or {}))
