"""Atomic file and folder writes and content hashes: nothing envpin writes is ever left half-written.

A folder envpin generates (an environment folder) is written as a transaction: the whole new folder is
staged beside the target and swapped in with one rename (Linux renameat2 RENAME_EXCHANGE; elsewhere two
renames with signals held back), under an fcntl lock on the parent folder that serialises envpin writers.
A reader sees the old folder or the new one, never a mix; staging left by a killed writer is removed by
the next one.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from envpin.errors import EnvpinError
from envpin.portable.atomic import replace_all, signals_held


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def read_user_text(path: Path, what: str, error: type[EnvpinError], missing_hint: str = "check the path") -> str:
    """A text file the user pointed at, or one `error` saying why it cannot be read as one (no traceback)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise error(f"{what} {path} does not exist", hint=missing_hint) from exc
    except IsADirectoryError as exc:
        raise error(f"{what} {path} is a folder, not a file", hint="pass the file's path") from exc
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}",
                    hint="check the path and its permissions") from exc
    if b"\0" in raw:
        raise error(f"{path} is a binary file, not a {what}", hint="pass the text file itself")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not UTF-8 text", hint=f"save the {what} as UTF-8") from exc


#: Deepest nesting accepted in a JSON document envpin reads (reports, catalogs, caches, docker's config):
#: real ones stay under 10 levels; deeper input is refused before anything walks it recursively.
MAX_JSON_DEPTH = 64


def parse_json(text: str, origin: str, error: type[EnvpinError], hint: str | None = None) -> Any:
    """The one way envpin parses JSON it did not just write: syntax errors, integers of more than 4,300
    digits (Python's conversion limit) and nesting deeper than MAX_JSON_DEPTH all become one `error`."""
    import json

    try:
        data = json.loads(text)
    except RecursionError:
        raise error(f"{origin} is nested more than {MAX_JSON_DEPTH} levels deep", hint=hint) from None
    except json.JSONDecodeError as exc:
        raise error(f"{origin} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                    hint=hint) from None
    except ValueError as exc:  # int('9' * 5000): the digit limit
        raise error(f"{origin} holds a number too long to read ({str(exc).split(':')[0]})", hint=hint) from None
    level, depth = [data], 0
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise error(f"{origin} is nested more than {MAX_JSON_DEPTH} levels deep", hint=hint)
        nxt: list[Any] = []
        for node in level:
            if isinstance(node, dict):
                nxt.extend(v for v in node.values() if isinstance(v, (dict, list)))
            elif isinstance(node, list):
                nxt.extend(v for v in node if isinstance(v, (dict, list)))
        level = nxt
    return data


#: Linux's limits (NAME_MAX, PATH_MAX): longer names are refused before anything touches the disk.
MAX_NAME_BYTES, MAX_PATH_BYTES = 255, 4095


def check_path_length(path: Path, option: str) -> Path:
    """Refuse a path the file system would refuse (ENAMETOOLONG) with one clear error instead."""
    raw = os.fsencode(os.path.abspath(path))
    if len(raw) > MAX_PATH_BYTES:
        raise EnvpinError(f"{option} is {len(raw):,} bytes long; paths are limited to {MAX_PATH_BYTES:,}",
                          hint=f"choose a shorter {option}")
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > MAX_NAME_BYTES:
        raise EnvpinError(f"{option} has a name of {len(longest):,} bytes; names are limited to {MAX_NAME_BYTES}",
                          hint=f"choose a shorter {option}")
    return path


def check_output_path(path: Path, option: str) -> Path:
    """An output named on the command line: short enough for the file system, and in a folder that exists. A
    missing parent is refused, never created: a typo in a path should not grow a tree of folders elsewhere."""
    check_path_length(path, option)
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise EnvpinError(f"{option}: {parent} is not a folder", hint=f"choose another {option}")
    if not parent.is_dir():
        raise EnvpinError(f"{option}: the folder {parent} does not exist",
                          hint=f"create it first (mkdir -p {parent}), or choose another {option}")
    return path


def folder_files(folder: Path) -> Iterator[str]:
    """Files and links under `folder` as relative POSIX paths, lazily (links are not followed), so a caller
    looking for the first unexpected file stops there even in a large tree."""
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        base = Path(root)
        for n in sorted(names) + [d for d in dirs if (base / d).is_symlink()]:
            yield (base / n).relative_to(folder).as_posix()


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over the target."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError):
            raise EnvpinError(f"cannot write {path}: {exc.strerror or exc}", hint=_hint(exc)) from exc
        raise


def atomic_write_many(files: dict[Path, bytes], modes: dict[Path, int] | None = None) -> None:
    """All or nothing (envpin.portable.atomic.replace_all), with missing parent folders made first and an
    OSError as one envpin error."""
    path = None
    try:
        for path in files:
            path.parent.mkdir(parents=True, exist_ok=True)
        replace_all({str(p): data for p, data in files.items()},
                    {str(p): mode for p, mode in (modes or {}).items()})
    except OSError as exc:
        where = exc.filename or path
        raise EnvpinError(f"cannot write {where}: {exc.strerror or exc}", hint=_hint(exc)) from exc


def _hint(exc: OSError) -> str | None:
    import errno

    if exc.errno == errno.ENOSPC:
        return "the disk is full: free some space and retry"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "check the folder's permissions, or choose another with --out"
    return None


#: How long a writer waits for another envpin writing in the same folder.
LOCK_WAIT_S = 60.0
_STAGE, _OLD = ".envpin-new-", ".envpin-old-"


#: Parent folders this process holds the writers' lock on, with a count: exclusive() is re-entrant, so a
#: read-modify-write of the lock (verify --record) can hold it around a Lock.write that takes it too.
_HELD: dict[str, int] = {}


@contextlib.contextmanager
def exclusive(target: Path, wait: float | None = None) -> Iterator[None]:
    """Serialise envpin processes writing `target` (a folder): an fcntl lock on its parent folder, which
    exists for as long as the target can be swapped and leaves no lock file behind. Staging left there by
    a killed writer is removed once the lock is held. Where the file system cannot lock (some NFS mounts
    refuse an exclusive lock on a folder opened for reading), the write goes ahead unserialised: the swap
    itself is still atomic."""
    import fcntl

    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        key = str(parent.resolve())
    except OSError as exc:
        raise EnvpinError(f"cannot write in {parent}: {exc.strerror or exc}", hint=_hint(exc)) from exc
    if _HELD.get(key):
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    try:
        fd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise EnvpinError(f"cannot write in {parent}: {exc.strerror or exc}", hint=_hint(exc)) from exc
    try:
        deadline = time.monotonic() + (LOCK_WAIT_S if wait is None else wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise EnvpinError(
                        f"another envpin is writing in {parent}",
                        hint="wait for it to finish and retry (it holds an advisory lock on the folder)",
                    ) from None
                time.sleep(0.02)
            except OSError as exc:
                if exc.errno not in (errno.EBADF, errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP):
                    raise EnvpinError(f"cannot lock {parent}: {exc.strerror or exc}", hint=_hint(exc)) from exc
                break  # this file system cannot lock: unserialised, still atomic
        _HELD[key] = 1
        try:
            _remove_leftovers(target)
            yield
        finally:
            _HELD.pop(key, None)
    finally:
        os.close(fd)


def _remove_leftovers(target: Path) -> None:
    for entry in target.parent.glob(f".{target.name}.envpin-*"):
        if entry.name.startswith((f".{target.name}{_STAGE}", f".{target.name}{_OLD}")) and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def replace_folder(target: Path, files: dict[str, bytes], keep: tuple[str, ...] = (),
                   modes: dict[str, int] | None = None) -> None:
    """Make `target` hold exactly `files` (relative POSIX paths -> bytes) plus the existing entries named
    in `keep` (hard-linked, or re-created when they are links), in one swap. Call it inside exclusive().

    The staged folder takes the target's permissions (a new one: 0777 less the umask)."""
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}{_STAGE}", dir=target.parent))
    try:
        for rel in keep:
            src, dst = target / rel, stage / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            else:
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copy2(src, dst)
        for rel, data in files.items():
            path = stage / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "xb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(path, (modes or {}).get(rel, 0o644))
        os.chmod(stage, _folder_mode(target))
        _fsync_dir(stage)
    except BaseException as exc:
        shutil.rmtree(stage, ignore_errors=True)
        if isinstance(exc, OSError):
            raise EnvpinError(f"cannot write {target}: {exc.strerror or exc}", hint=_hint(exc)) from exc
        raise
    _swap_in(stage, target)


def _folder_mode(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o777 & ~umask


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where the system cannot."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap_in(stage: Path, target: Path) -> None:
    """Put the staged folder at `target`; the old folder goes away after the swap."""
    try:
        if not target.exists():
            with signals_held():
                os.rename(stage, target)
            return
        old = stage  # after an exchange the staged name holds the old folder
        if not _exchange(stage, target):
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}{_OLD}", dir=target.parent))
            os.rmdir(old)
            with signals_held():
                os.rename(target, old)
                try:
                    os.rename(stage, target)
                except OSError:
                    os.rename(old, target)  # put the old folder back: never leave the target missing
                    raise
    except OSError as exc:
        shutil.rmtree(stage, ignore_errors=True)
        raise EnvpinError(f"cannot replace {target}: {exc.strerror or exc}", hint=_hint(exc)) from exc
    _fsync_dir(target.parent)
    shutil.rmtree(old, ignore_errors=True)
