"""Fully pinned, hashed requirement locks: the only form envpin bakes into an image."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envpin.errors import RequirementsError, param, shown
from envpin.files.read import read_user_text
from envpin.record import Value

_HASH = re.compile(r"sha256:[0-9a-f]{64}\Z")
#: Longest logical line read; a locked line is a name, a version and a few hashes.
MAX_LINE = 100_000


@dataclass(frozen=True, slots=True)
class Requirement(Value):
    name: str
    version: str
    hashes: tuple[str, ...]
    extras: str = ""
    marker: str = ""
    #: '==' or, for a version that is not PEP 440, '===' (arbitrary equality).
    op: str = "=="

    @property
    def key(self) -> str:
        return re.sub(r"[-_.]+", "-", self.name).lower()

    def render(self) -> str:
        head = f"{self.name}{self.extras}{self.op}{self.version}"
        if self.marker:
            head += f" ; {self.marker}"
        return " \\\n    ".join([head, *(f"--hash={h}" for h in self.hashes)])


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line, logical line) of a requirements file: comments dropped, continuations joined."""
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not buf:
            start = no
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            out.append((start, " ".join(buf.split())))
        buf = ""
    if buf.strip():
        out.append((start, " ".join(buf.split())))
    return out


def _split_options(line: str) -> tuple[str, list[str]]:
    """(requirement, option tokens): options start at the first ' --' outside a quoted marker string."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "-" and line.startswith("--", i) and i > 0 and line[i - 1] == " ":
            return line[:i].strip(), line[i:].split()
    return line.strip(), []


def _hashes(tokens: list[str], where: str) -> tuple[str, ...]:
    """The sha256 values of `--hash=sha256:H` / `--hash sha256:H`; anything else after the requirement is an
    error (pip would reject it, or it is junk that must not be dropped silently)."""
    found: list[str] = []
    it = iter(tokens)
    for tok in it:
        value = tok[len("--hash=") :] if tok.startswith("--hash=") else next(it, "") if tok == "--hash" else None
        if value is None:
            raise RequirementsError(
                f"{where}: '{shown(tok)}' is not allowed after a locked requirement",
                hint="a locked line is NAME==VERSION followed by --hash=sha256:... only",
            )
        if not _HASH.match(value):
            raise RequirementsError(
                f"{where}: '{shown(value)}' is not a sha256 hash",
                hint="use --hash=sha256: followed by 64 lower-case hex digits",
            )
        found.append(value)
    return tuple(found)


def parse_line(line: str, where: str) -> Requirement:
    """One logical line `NAME[EXTRAS]==VERSION [; MARKER] --hash=sha256:...`, parsed with `packaging`
    (the grammar pip uses); the hash options are envpin's, since `packaging` does not read them."""
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Spec

    if len(line) > MAX_LINE:
        raise RequirementsError(
            f"{where}: a line of {len(line)} characters is not a requirement",
            hint=f"requirement lines are at most {MAX_LINE} characters",
        )
    spec_text, options = _split_options(line)
    unpinned = RequirementsError(
        f"{where}: '{shown(spec_text)}' is not pinned with == to one version",
        hint="lock it first: `envpin lock requirements.in` (or pip-compile --generate-hashes)",
    )
    try:
        spec = Spec(spec_text)
    except InvalidRequirement:
        raise unpinned from None
    pins = list(spec.specifier)
    if spec.url or len(pins) != 1 or pins[0].operator not in ("==", "===") or pins[0].version.endswith(".*"):
        raise unpinned
    hashes = _hashes(options, where)
    if not hashes:
        raise RequirementsError(
            f"{where}: {spec.name}{pins[0].operator}{pins[0].version} has no --hash=sha256:...",
            hint="lock it with hashes: `envpin lock requirements.in` (or pip-compile --generate-hashes)",
        )
    extras = f"[{','.join(sorted(spec.extras))}]" if spec.extras else ""
    return Requirement(
        spec.name,
        pins[0].version,
        tuple(sorted(set(hashes))),
        extras,
        str(spec.marker) if spec.marker else "",
        pins[0].operator,
    )


def parse_lock(text: str, origin: str = "requirements") -> tuple[Requirement, ...]:
    """Parse a pip requirements file where every line is `name==version --hash=sha256:...`."""
    reqs: dict[str, Requirement] = {}
    for no, line in logical_lines(text):
        where = f"{origin}:{no}"
        if line.startswith("-"):
            raise RequirementsError(
                f"{where}: option '{shown(line.split()[0])}' is not allowed in a locked requirements file",
                hint="envpin installs with --require-hashes --no-deps from PyPI; remove index/options lines",
            )
        req = parse_line(line, where)
        if req.key in reqs and not req.marker:
            raise RequirementsError(f"{where}: {req.name} is listed twice", hint="keep one pinned line per package")
        reqs[req.key + (";" + req.marker if req.marker else "")] = req
    return tuple(reqs[k] for k in sorted(reqs))


def read_text(path: Path) -> str:
    """A requirements file as text, or a RequirementsError saying why it cannot be one."""
    return read_user_text(path, "requirements file", RequirementsError)


def read_lock(path: Path) -> tuple[Requirement, ...]:
    reqs = parse_lock(read_text(path), str(path))
    if not reqs:
        raise RequirementsError(
            f"{path} lists no packages", hint=f"drop {param('requirements')} or add pinned packages"
        )
    return reqs


def render_lock(reqs: tuple[Requirement, ...], header: str) -> str:
    return header + "".join(r.render() + "\n" for r in reqs)
