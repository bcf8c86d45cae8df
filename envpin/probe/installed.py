"""Installed files against their RECORD hashes, and the start-up hooks Python runs without an import.

A distribution's RECORD (PEP 376/627) lists each installed file with its hash and size, written by the
installer after it wrote the files; hashing RECORD alone (packages.site_hash) cannot see a file edited in
place afterwards. This module hashes the files themselves and reports those that no longer match, the way
`pip` verifies a wheel: rows without a hash (RECORD itself, ``*.pyc``) are skipped.

Cost: every hashed file is read once, in 1 MiB blocks into one reused buffer; a file whose size differs
from RECORD's is changed without being read; a file this process verified before and that has not been
written since is not read again. docs/probe.md records what it costs with TensorFlow installed.

Start-up hooks run code in every interpreter without being imported by the program: ``sitecustomize`` and
``usercustomize`` anywhere on sys.path (the first found runs), and the ``import`` lines of ``*.pth`` files in
site-packages folders (site.py executes lines that start with ``import`` followed by a space or tab).
"""

import base64
import csv
import errno
import hashlib
import os
import stat
import sys
from typing import Any, Dict, List, Optional, Tuple

from envpin.probe._common import MAX_READ_BYTES, read_file

#: The most paths listed per distribution; more are counted in one last entry (the report stays bounded).
MAX_LISTED = 100
#: One read buffer for every file: large blocks keep the per-call overhead small on a gigabyte install.
BLOCK = 1 << 20
HOOK_MODULES = ("sitecustomize", "usercustomize")


class Totals(object):
    """What the check covered, for the record_check field (what a verdict says it compared)."""

    def __init__(self) -> None:
        self.distributions = 0
        self.without_record = 0
        self.files = 0
        self.hashed_bytes = 0
        self.skipped_rows = 0

    def as_dict(self) -> Dict[str, int]:
        return {
            "distributions": self.distributions,
            "distributions_without_record": self.without_record,
            "files": self.files,
            "bytes": self.hashed_bytes,
            "rows_without_hash": self.skipped_rows,
        }


def _urlsafe(digest: bytes) -> str:
    """RECORD's encoding of a digest: urlsafe base64 without padding (PEP 376)."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


#: Files this process has already verified, by everything a write to them changes (st_ctime cannot be set
#: back by a program): a second probe in one process (a library caller, a test run) hashes nothing twice.
_VERIFIED: Dict[Tuple[Any, ...], bool] = {}
_MAX_REMEMBERED = 250000


def file_matches(path: str, algorithm: str, expected: str, size: Optional[int], buf: bytearray) -> Tuple[bool, int]:
    """(whether the file at `path` has RECORD's size and hash, its size). Raises OSError when it cannot be
    opened (missing: FileNotFoundError). A non-regular file never matches, and is not opened."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        return False, 0
    if size is not None and st.st_size != size:
        return False, st.st_size
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, algorithm, expected)
    known = _VERIFIED.get(key)
    if known is not None:
        return known, st.st_size
    digest = hashlib.new(algorithm)
    view = memoryview(buf)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(view)
            if not n:
                break
            digest.update(view[:n])
    ok = _urlsafe(digest.digest()) == expected
    if len(_VERIFIED) >= _MAX_REMEMBERED:
        _VERIFIED.clear()
    _VERIFIED[key] = ok
    return ok, st.st_size


def _rows(record: str) -> List[List[str]]:
    text = read_file(record, MAX_READ_BYTES, whole=True).decode("utf-8", "surrogateescape")
    return list(csv.reader(text.splitlines()))


def check_distribution(location: str, record: str, buf: bytearray, totals: Totals) -> Tuple[List[str], List[str]]:
    """(changed, missing): RECORD paths of one distribution whose file no longer has its recorded hash or
    size, and those that are gone. Rows without a hash, or with an algorithm hashlib lacks, are skipped."""
    changed: List[str] = []
    missing: List[str] = []
    for row in _rows(record):
        if len(row) < 2 or "=" not in row[1]:
            totals.skipped_rows += 1
            continue
        rel = row[0]
        algorithm, _, expected = row[1].partition("=")
        if algorithm not in hashlib.algorithms_available:
            totals.skipped_rows += 1
            continue
        size: Optional[int] = None
        if len(row) > 2 and row[2].strip().isdigit():
            size = int(row[2])
        totals.files += 1
        try:
            ok, done = file_matches(os.path.join(location, rel), algorithm, expected, size, buf)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                missing.append(rel)
            else:
                changed.append(rel)  # unreadable: it cannot be shown to be what was installed
            continue
        totals.hashed_bytes += done
        if not ok:
            changed.append(rel)
    return changed, missing


def _listed(name: str, paths: List[str]) -> List[str]:
    paths = sorted(paths)
    out = ["%s: %s" % (name, p) for p in paths[:MAX_LISTED]]
    if len(paths) > MAX_LISTED:
        out.append("%s: and %d more" % (name, len(paths) - MAX_LISTED))
    return out


def check_installed(dists: List[Dict[str, str]]) -> Dict[str, Any]:
    """Every distribution's files against its RECORD: {"changed": [...], "missing": [...], "totals": {...}},
    each list entry 'name: path as RECORD gives it', sorted."""
    buf = bytearray(BLOCK)
    totals = Totals()
    changed: List[str] = []
    missing: List[str] = []
    for d in dists:
        record = d.get("record", "")
        if not record.endswith("RECORD"):
            totals.without_record += 1
            continue
        totals.distributions += 1
        c, m = check_distribution(d["location"], record, buf, totals)
        changed.extend(_listed(d["name"], c))
        missing.extend(_listed(d["name"], m))
    return {"changed": changed, "missing": missing, "totals": totals.as_dict()}


# --- start-up hooks -------------------------------------------------------------------------------------


def shown_path(path: str) -> str:
    """A path as the report names it: under sys.prefix or sys.base_prefix relative to it, so that one
    environment installed in two places compares equal; else absolute."""
    full = os.path.abspath(path)
    for label, prefix in (("sys.prefix", sys.prefix), ("sys.base_prefix", getattr(sys, "base_prefix", sys.prefix))):
        base = os.path.abspath(prefix).rstrip(os.sep) + os.sep
        if full.startswith(base):
            return "%s/%s" % (label, full[len(base) :].replace(os.sep, "/"))
    return full


def site_dirs(paths: List[str]) -> List[str]:
    """The folders of `paths` whose .pth files site.py processes: those site.getsitepackages() or the user
    site (when enabled) name, and any site-packages or dist-packages folder (an old virtualenv's site module
    has no getsitepackages)."""
    import site

    known = set()
    getter = getattr(site, "getsitepackages", None)
    for d in getter() if getter is not None else []:
        known.add(os.path.realpath(d))
    if getattr(site, "ENABLE_USER_SITE", False):
        known.add(os.path.realpath(site.getusersitepackages()))
    out: List[str] = []
    seen = set()
    for d in paths:
        real = os.path.realpath(d)
        named = os.path.basename(real) in ("site-packages", "dist-packages")
        if (named or real in known) and real not in seen and os.path.isdir(real):
            seen.add(real)
            out.append(d)
    return out


def _sha256(path: str) -> str:
    return "sha256:" + hashlib.sha256(read_file(path, MAX_READ_BYTES, whole=True)).hexdigest()


def _runs_imports(data: bytes) -> bool:
    """Whether site.py would execute a line of this .pth file (it runs lines starting 'import ' or 'import\\t')."""
    return any(line.startswith((b"import ", b"import\t")) for line in data.splitlines())


def startup_hooks(paths: List[str]) -> List[str]:
    """'path sha256:...' of every sitecustomize/usercustomize module on `paths` and every .pth file with an
    import line in a site folder, sorted: code that runs at interpreter start-up without being imported."""
    import importlib.machinery

    suffixes = [".py", ".pyc", *importlib.machinery.EXTENSION_SUFFIXES]
    out = []
    for folder in paths:
        for module in HOOK_MODULES:
            candidates = [os.path.join(folder, module + s) for s in suffixes]
            candidates.append(os.path.join(folder, module, "__init__.py"))
            for path in candidates:
                if os.path.isfile(path):
                    out.append("%s %s" % (shown_path(path), _sha256(path)))
    for folder in site_dirs(paths):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not name.endswith(".pth") or name.startswith("."):
                continue
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                continue
            data = read_file(path, MAX_READ_BYTES, whole=True)
            if _runs_imports(data):
                out.append("%s sha256:%s" % (shown_path(path), hashlib.sha256(data).hexdigest()))
    return sorted(set(out))
