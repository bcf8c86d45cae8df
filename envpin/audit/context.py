"""The build context: which file of the context directory a COPY/ADD brings in as a path inside the image.

A `RUN pip install -r requirements.txt` names a path inside the image. Walking the COPY/ADD instructions of the
stage (and the stages it is built on) backwards maps that path to a file in the context directory; the pip rules
(envpin/audit/rules/pip.py) then read it as pip reads it, findings pointing at its own lines. This module knows
no rule.
"""

from __future__ import annotations

import bisect
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from envpin.audit.parser import Instruction, Stage
from envpin.audit.words import split_words
from envpin.record import Value

#: How deep -r/-c includes are followed (pip itself has no limit; a cycle is cut at the first repeat).
MAX_INCLUDES = 16
MAX_BYTES = 4 * 1024 * 1024


@dataclass(slots=True)
class BuildContext(Value):
    """The context directory of one Dockerfile (what `docker build DIR` sends), and what was looked up in it."""

    root: Path
    #: The requirement files already audited (by resolved path), so two RUNs installing one file report it once.
    seen: set[Path] = field(default_factory=set)
    #: The COPY/ADD sources already looked up (a source is asked for by every RUN after its COPY).
    _sources: dict[str, list[Path]] = field(default_factory=dict, init=False, repr=False, compare=False)
    #: Each stage's COPY/ADD from the context and their lines, in order (looked up by every RUN that installs one).
    _copies: dict[int, tuple[list[Instruction], list[int]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    #: The resolved paths of the files located so far (resolving asks the file system for every component).
    _resolved: dict[Path, Path] = field(default_factory=dict, init=False, repr=False, compare=False)

    def done(self, path: Path) -> bool:
        key = self._resolved.get(path)
        if key is None:
            key = self._resolved[path] = path.resolve()
        return key in self.seen

    def locate(self, chain: list[Stage], run: Instruction, image_path: str) -> Path | None:
        """The context file that ends up at `image_path` (absolute or relative to the RUN's workdir), or None
        when no COPY/ADD from the context put it there (a --from=stage copy, a download, a file the base has).
        The latest COPY/ADD before the RUN that puts a file there wins."""
        target = posixpath.normpath(posixpath.join(run.workdir, image_path))
        for st in reversed(chain):
            copies, lines = self._context_copies(st)
            for k in range(bisect.bisect_left(lines, run.line) - 1, -1, -1):
                found = self._from_copy(copies[k], target)
                if found is not None:
                    return found
        return None

    def _context_copies(self, st: Stage) -> tuple[list[Instruction], list[int]]:
        if st.index not in self._copies:
            copies = [i for i in st.instructions if i.keyword in ("COPY", "ADD") and "from" not in i.flags]
            self._copies[st.index] = (copies, [i.line for i in copies])
        return self._copies[st.index]

    def _from_copy(self, ins: Instruction, target: str) -> Path | None:
        words = ins.exec_form if ins.exec_form is not None else [w for w, _, _ in split_words(ins.args)]
        if len(words) < 2 or ins.heredocs:
            return None
        *sources, dest = words
        dest_abs = posixpath.normpath(posixpath.join(ins.workdir, dest))
        dest_is_dir = dest.endswith("/") or dest in (".", "./") or len(sources) > 1
        for src in sources:
            if "://" in src:
                continue  # ADD of a URL: not from the context
            for path in self._expand(src):
                if path.is_dir():
                    if target == dest_abs or target.startswith(dest_abs.rstrip("/") + "/"):
                        rel = posixpath.relpath(target, dest_abs)
                        candidate = path / rel
                        if candidate.is_file() and self.inside(candidate):
                            return candidate
                else:
                    at = posixpath.join(dest_abs, path.name) if dest_is_dir or "*" in src or "?" in src else dest_abs
                    if posixpath.normpath(at) == target:
                        return path
        return None

    def _expand(self, src: str) -> list[Path]:
        if src not in self._sources:
            self._sources[src] = self._lookup(src)
        return self._sources[src]

    def _lookup(self, src: str) -> list[Path]:
        rel = src.lstrip("/")
        if any(c in rel for c in "*?["):
            import glob  # only for a wildcard COPY source (not loaded by every audit)

            return sorted(Path(p) for p in glob.glob(str(self.root / rel)) if self.inside(Path(p)))
        path = self.root / rel if rel not in ("", ".") else self.root
        return [path] if path.exists() and self.inside(path) else []

    def inside(self, path: Path) -> bool:
        """Whether `path` lies in the context (after symbolic links): docker build sends nothing outside it."""
        try:
            return path.resolve().is_relative_to(self.root.resolve())
        except OSError:
            return False
