"""The build context: requirement and constraint files a COPY/ADD brings in, found and audited line by line.

A `RUN pip install -r requirements.txt` names a path inside the image. Walking the COPY/ADD instructions of the
stage (and the stages it is built on) backwards maps that path to a file in the context directory, which is then
read like pip reads it: unpinned lines, lines without --hash, extra package sources, trusted hosts, VCS/URL
requirements without a commit, and the files it includes with -r/-c (relative to itself). Findings point at
the requirements file's own lines.
"""

from __future__ import annotations

import bisect
import glob
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from envpin.audit.parser import Instruction, Stage, split_words

#: How deep -r/-c includes are followed (pip itself has no limit; a cycle is cut at the first repeat).
MAX_INCLUDES = 16
MAX_BYTES = 4 * 1024 * 1024


@dataclass
class BuildContext:
    """The context directory of one Dockerfile (what `docker build DIR` sends)."""

    root: Path
    #: Requirement files already audited (by resolved path), so two RUNs installing one file report it once.
    seen: set[Path] = field(default_factory=set)
    #: COPY/ADD sources already looked up in the context (a source is asked for by every RUN after its COPY).
    _sources: dict[str, list[Path]] = field(default_factory=dict)
    #: Each stage's COPY/ADD from the context and their lines, in order (looked up by every RUN that installs one).
    _copies: dict[int, tuple[list[Instruction], list[int]]] = field(default_factory=dict)
    #: Resolved paths of the files located so far (resolving asks the file system for every component).
    _resolved: dict[Path, Path] = field(default_factory=dict)

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
                        if candidate.is_file() and self._inside(candidate):
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
            return sorted(Path(p) for p in glob.glob(str(self.root / rel)) if self._inside(Path(p)))
        path = self.root / rel if rel not in ("", ".") else self.root
        return [path] if path.exists() and self._inside(path) else []

    def _inside(self, path: Path) -> bool:
        try:
            return path.resolve().is_relative_to(self.root.resolve())
        except OSError:
            return False


#: add(rule, file, line, message, fix)
Report = Callable[[str, str, int, str, str], None]


def audit_requirements(path: Path, kind: str, report: Report, ctx: BuildContext, shown: str,
                       require_hashes: bool = False, depth: int = 0) -> None:
    """Audit one requirements (or constraints) file; `shown` is how findings name it."""
    from envpin.audit.rules import req_name, spec_state
    from envpin.environment.requirements import logical_lines

    key = path.resolve()
    if key in ctx.seen or depth > MAX_INCLUDES:
        return
    ctx.seen.add(key)
    try:
        raw = path.read_bytes()[:MAX_BYTES]
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        report("pip-requirements-file", shown, 1, f"cannot read {kind} file {shown}: {exc}",
               "make it a readable UTF-8 text file")
        return
    lines = logical_lines(text)
    hashed_somewhere = any("--hash" in line for _, line in lines)
    unhashed: list[tuple[int, str]] = []
    extra: list[tuple[int, str]] = []
    specs: list[tuple[int, str, str]] = []
    for no, line in lines:
        words = line.split()
        head = words[0]
        if head in ("-r", "--requirement", "-c", "--constraint") or head.startswith(("-r", "-c", "--requirement=",
                                                                                    "--constraint=")):
            name = _option_value(words)
            if name:
                included = path.parent / name
                sub_kind = "constraints" if head.startswith(("-c", "--constraint")) else "requirements"
                if included.is_file() and ctx._inside(included):
                    audit_requirements(included, sub_kind, report, ctx, posixpath.join(posixpath.dirname(shown), name),
                                       require_hashes, depth + 1)
                else:
                    report("pip-requirements-file", shown, no, f"{shown} includes {name}, which is not in the "
                           "build context", f"add {name} to the context, pinned with == and --hash")
            continue
        if head in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links") or head.startswith(
                ("--index-url=", "--extra-index-url=", "--find-links=", "-f", "-i")):
            if not head.startswith(("-i", "--index-url")):
                extra.append((no, _option_value(words) or "?"))
            continue
        if head == "--trusted-host" or head.startswith("--trusted-host="):
            report("pip-trusted-host", shown, no, f"{shown} trusts {_option_value(words) or '?'} without TLS "
                   "verification", "drop --trusted-host and give pip the host's CA with --cert (or PIP_CERT)")
            continue
        if head in ("-e", "--editable"):
            spec = words[1] if len(words) > 1 else ""
        elif head.startswith("-"):
            continue  # --no-binary, --pre, --require-hashes ...: options, not packages
        else:
            spec = line.split(" --hash")[0].strip()
        state = spec_state(spec)
        if state == "local":
            continue
        specs.append((no, spec, state))
        if kind == "requirements" and not ("--hash" in line or require_hashes) and state in ("pinned", "unpinned"):
            unhashed.append((no, req_name(spec) or spec))
    for no, spec, state in specs:
        if state == "unpinned" and kind == "requirements":
            if "://" in spec or spec.startswith(("git+", "hg+", "svn+", "bzr+")):
                report("pip-unpinned", shown, no, f"{spec} in {shown} is not pinned to a commit",
                       "name the commit: git+https://host/repo@<40-hex sha>")
            else:
                report("pip-unpinned", shown, no, f"{spec} in {shown} is not pinned with ==",
                       "pin it: NAME==X.Y.Z (with --hash lines)")
    if unhashed and not hashed_somewhere:
        no, name = unhashed[0]
        report("pip-no-hashes", shown, no, f"{len(unhashed)} of {len(specs)} requirements in {shown} have no "
               f"--hash (first: {name})", "generate hashes (pip-compile --generate-hashes, or envpin lock) and "
               "install with --require-hashes")
    elif unhashed:
        for no, name in unhashed:
            report("pip-no-hashes", shown, no, f"{name} in {shown} has no --hash, while other lines have one "
                   "(pip will refuse it)", "add its --hash lines")
    exposed = [s for _, s, state in specs if state == "unpinned" or (state == "pinned" and not
                                                                       (hashed_somewhere or require_hashes))]
    for no, source in extra:
        if exposed:
            report("pip-extra-index", shown, no, f"{shown} adds the package source {source}; "
                   f"{', '.join(exposed[:5])}{' …' if len(exposed) > 5 else ''} may come from it or from the index",
                   "pin exact versions with --hash, or install from one index only")


def _option_value(words: list[str]) -> str | None:
    head = words[0]
    if "=" in head and head.startswith("--"):
        return head.split("=", 1)[1]
    if head in ("-r", "-c", "-i", "-f", "-e", "--requirement", "--constraint", "--index-url", "--extra-index-url",
                "--find-links", "--trusted-host", "--editable"):
        return words[1] if len(words) > 1 else None
    if head.startswith(("-r", "-c", "-i", "-f")) and len(head) > 2:
        return head[2:]
    return None
