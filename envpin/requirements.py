"""Fully pinned, hashed requirement locks: the only form envpin bakes into an image."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envpin.errors import RequirementsError
from envpin.fsutil import read_user_text

_REQ = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?P<extras>\[[A-Za-z0-9._,\s-]*\])?"
    r"\s*==\s*(?P<version>[A-Za-z0-9.+!_-]+)\s*(?P<marker>;[^-]*?)?\s*(?P<opts>(?:--\S.*)?)$"
)
_HASH = re.compile(r"--hash[=\s](sha256:[0-9a-f]{64})\b")


@dataclass(frozen=True)
class Requirement:
    name: str
    version: str
    hashes: tuple[str, ...]
    extras: str = ""
    marker: str = ""

    @property
    def key(self) -> str:
        return re.sub(r"[-_.]+", "-", self.name).lower()

    def render(self) -> str:
        head = f"{self.name}{self.extras}=={self.version}"
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


def parse_lock(text: str, origin: str = "requirements") -> tuple[Requirement, ...]:
    """Parse a pip requirements file where every line is `name==version --hash=sha256:...`."""
    reqs: dict[str, Requirement] = {}
    for no, line in logical_lines(text):
        where = f"{origin}:{no}"
        if line.startswith("-"):
            raise RequirementsError(
                f"{where}: option '{line.split()[0]}' is not allowed in a locked requirements file",
                hint="envpin installs with --require-hashes --no-deps from PyPI; remove index/options lines",
            )
        m = _REQ.match(line)
        if not m:
            raise RequirementsError(
                f"{where}: '{line.split(' --hash')[0]}' is not pinned with == to one version",
                hint="lock it first: `envpin lock requirements.in` (or pip-compile --generate-hashes)",
            )
        hashes = tuple(_HASH.findall(m.group("opts") or ""))
        if not hashes:
            raise RequirementsError(
                f"{where}: {m.group('name')}=={m.group('version')} has no --hash=sha256:...",
                hint="lock it with hashes: `envpin lock requirements.in` (or pip-compile --generate-hashes)",
            )
        marker = (m.group("marker") or "").lstrip(";").strip()
        req = Requirement(
            m.group("name"), m.group("version"), tuple(sorted(set(hashes))), m.group("extras") or "", marker
        )
        if req.key in reqs and not marker:
            raise RequirementsError(f"{where}: {req.name} is listed twice", hint="keep one pinned line per package")
        reqs[req.key + (";" + marker if marker else "")] = req
    return tuple(reqs[k] for k in sorted(reqs))


def read_text(path: Path) -> str:
    """A requirements file as text, or a RequirementsError saying why it cannot be one."""
    return read_user_text(path, "requirements file", RequirementsError)


def read_lock(path: Path) -> tuple[Requirement, ...]:
    reqs = parse_lock(read_text(path), str(path))
    if not reqs:
        raise RequirementsError(f"{path} lists no packages", hint="drop --requirements or add pinned packages")
    return reqs


def render_lock(reqs: tuple[Requirement, ...], header: str) -> str:
    return header + "".join(r.render() + "\n" for r in reqs)
