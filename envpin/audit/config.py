"""What a repository tells the audit: `[tool.envpin.audit]` in pyproject.toml and inline suppressions.

Configuration (found like ruff's: the nearest pyproject.toml from the working directory up that has the table):

    [tool.envpin.audit]
    ignore = ["apt-unpinned"]          # rules never reported
    fail-on = "error"                  # default for --fail-on
    [[tool.envpin.audit.per-path]]
    paths = ["docker/legacy/*"]        # globs, relative to the pyproject.toml's folder
    ignore = ["pip-unpinned"]

An inline suppression names the rules it silences on the finding's line, or on a comment line right above it:

    # envpin: ignore=pip-unpinned,pip-no-hashes
    RUN pip install -r requirements-dev.txt

A `parse-error` cannot be suppressed: the line it names stops the build.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from envpin.audit.check import Finding
from envpin.audit.rule import IGNORE_MARK as _MARK
from envpin.audit.rule import SEVERITIES
from envpin.audit.rules import RULES
from envpin.errors import UsageError, shown
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

_KEYS = {"ignore", "fail-on", "per-path"}


@dataclass(frozen=True, slots=True)
class AuditConfig(Value):
    """[tool.envpin.audit] of the nearest pyproject.toml: rules ignored (everywhere or per file) and fail-on."""

    path: Path | None = None
    ignore: frozenset[str] = frozenset()
    fail_on: str | None = None
    per_path: tuple[tuple[tuple[str, ...], frozenset[str]], ...] = ()

    def ignored(self, file: str) -> frozenset[str]:
        """The rules ignored for this Dockerfile (or requirements file): global plus matching per-path ones."""
        out = set(self.ignore)
        if self.per_path and self.path is not None:
            rel = _relative(Path(file), self.path.parent)
            for globs, rules in self.per_path:
                if rel is not None and any(fnmatch.fnmatchcase(rel, g) for g in globs):
                    out |= rules
        return frozenset(out)


def _relative(file: Path, root: Path) -> str | None:
    try:
        return PurePosixPath(file.resolve().relative_to(root.resolve())).as_posix()
    except (ValueError, OSError):
        return None


def find(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` that has a [tool.envpin.audit] table."""
    for folder in (start.resolve(), *start.resolve().parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _table(candidate) is not None:
            return candidate
    return None


def _table(path: Path) -> dict[str, Any] | None:
    """The [tool.envpin.audit] table of a pyproject.toml, or None. A file whose bytes hold neither `envpin` nor a
    `\\u`/`\\U` escape cannot spell the key, so it is not parsed (the TOML parser costs more than a one-file
    audit's own work; a broken pyproject.toml of another tool is that tool's to report)."""
    from envpin.files.read import read_regular

    try:
        raw = read_regular(path)
    except OSError as exc:
        raise UsageError(
            f"{path} cannot be read as TOML: {exc}", hint="fix the file, or run from another folder"
        ) from None
    if b"envpin" not in raw and b"\\u" not in raw and b"\\U" not in raw:
        return None
    from envpin._compat import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise UsageError(
            f"{path} cannot be read as TOML: {exc}", hint="fix the file, or run from another folder"
        ) from None
    except ValueError:  # an integer past Python's 4,300-digit conversion limit
        raise UsageError(
            f"{path} holds a number too long to read (more than 4,300 digits)",
            hint="fix the file, or run from another folder",
        ) from None
    tool = data.get("tool")
    envpin = tool.get("envpin") if isinstance(tool, dict) else None
    table = envpin.get("audit") if isinstance(envpin, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.envpin.audit] must be a table", hint="see docs/audit.md#configuration")
    return table


def load(path: Path | None) -> AuditConfig:
    """Read and check one [tool.envpin.audit] table; None gives the empty configuration."""
    if path is None:
        return AuditConfig()
    table = _table(path) or {}
    where = f"{path} [tool.envpin.audit]"
    unknown = set(table) - _KEYS
    if unknown:
        raise UsageError(
            f"{where}: unknown key {sorted(unknown)[0]!r}",
            hint="keys: ignore, fail-on, per-path (docs/audit.md#configuration)",
        )
    fail_on = table.get("fail-on")
    if fail_on is not None and fail_on not in SEVERITIES:
        raise UsageError(
            f"{where}: fail-on {shown(repr(fail_on))} is not a severity", hint="use error, warning or info"
        )
    per_path = []
    entries = table.get("per-path", [])
    if not isinstance(entries, list):
        raise UsageError(
            f"{where}: per-path must be an array of tables",
            hint="write [[tool.envpin.audit.per-path]] with paths = [...] and ignore = [...]",
        )
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or set(entry) != {"paths", "ignore"}:
            raise UsageError(
                f"{where}: per-path entry {n} needs exactly 'paths' and 'ignore'",
                hint='e.g. paths = ["docker/legacy/*"], ignore = ["pip-unpinned"]',
            )
        globs = entry["paths"]
        if not isinstance(globs, list) or not globs or not all(isinstance(g, str) and g for g in globs):
            raise UsageError(f"{where}: per-path entry {n}: paths must be a list of globs", hint='e.g. ["docker/*"]')
        per_path.append((tuple(globs), _rules(entry["ignore"], f"{where} per-path entry {n}")))
    return AuditConfig(path, _rules(table.get("ignore", []), where), fail_on, tuple(per_path))


def _rules(value: Any, where: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where}: ignore must be a list of rule ids", hint='e.g. ignore = ["apt-unpinned"]')
    for rid in value:
        _check_rule(rid, where)
    return frozenset(value)


def _check_rule(rid: str, where: str) -> None:
    if rid not in RULES:
        raise UsageError(f"{where}: unknown rule {rid!r}", hint="the rules are listed in docs/audit.md")
    if not RULES[rid].suppressible:
        raise UsageError(
            f"{where}: {rid} cannot be ignored", hint="the line it names stops the build; fix the line instead"
        )


def inline(lines: list[str], line: int) -> frozenset[str]:
    """The rules suppressed for a finding on `line` (1-based): a mark on that line or a comment line above."""
    found: set[str] = set()
    candidates = [line]
    if line >= 2 and lines[line - 2].lstrip().startswith("#"):
        candidates.append(line - 1)
    for n in candidates:
        if 1 <= n <= len(lines):
            m = _MARK.search(lines[n - 1])
            if m:
                found.update(r.strip() for r in m.group(1).split(",") if r.strip())
    return frozenset(found)


def unknown_marks(lines: list[str]) -> Iterable[tuple[int, str]]:
    """(line, rule) for each inline suppression naming a rule that does not exist (a typo silences nothing)."""
    for n, text in enumerate(lines, 1):
        m = _MARK.search(text)
        if m:
            for rid in (r.strip() for r in m.group(1).split(",")):
                if rid and (rid not in RULES or not RULES[rid].suppressible):
                    yield n, rid


def apply(findings: list[Finding], lines_of: dict[str, list[str]], config: AuditConfig) -> list[Finding]:
    """The findings neither the configuration nor an inline suppression silences."""
    out = []
    ignored: dict[str, frozenset[str]] = {}
    # the rules nothing silences (Rule.suppressible is False): a parse-error's line stops the build
    kept = frozenset(rid for rid in {f.rule for f in findings} if not RULES[rid].suppressible)
    for f in findings:
        if f.rule in kept:
            out.append(f)
            continue
        if f.file not in ignored:
            ignored[f.file] = config.ignored(f.file)
        if f.rule in ignored[f.file]:
            continue
        lines = lines_of.get(f.file)
        if lines is not None and f.rule in inline(lines, f.line):
            continue
        out.append(f)
    return out
