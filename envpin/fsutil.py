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
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from envpin.errors import EnvpinError
from envpin.portable.atomic import _temp_prefix as atomic_temp_prefix
from envpin.portable.atomic import kept_mode, replace_all, signals_held, write_into, write_target
from envpin.portable.atomic import kind_of as _kind

TYPE_CHECKING = False  # typing's, without importing typing (every command loads this module)
if TYPE_CHECKING:
    from typing import Any


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, limit: int | None = None) -> str:
    """The hash of a regular file (a FIFO or device raises OSError instead of blocking or never ending)."""
    h = hashlib.sha256()
    with _open_regular(path) as fh:
        read = 0
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            read += len(chunk)
            if limit is not None and read > limit:
                raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", str(path))
    return "sha256:" + h.hexdigest()


#: The most envpin reads from one file (a report, lock, catalog, Dockerfile, configuration, requirements file,
#: CA bundle, cache): real ones are kilobytes; the bound keeps /dev/zero or a huge file from exhausting memory.
MAX_READ_BYTES = 64 << 20


@contextlib.contextmanager
def _open_regular(path: Path | str) -> Iterator[Any]:
    """A regular file opened for reading. Opened without blocking (a FIFO with no writer would block open
    itself) and checked with fstat on the open descriptor, so nothing can be swapped in between."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_kind(mode)})", str(path))
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def read_regular(path: Path | str, limit: int = MAX_READ_BYTES, *, truncate: bool = False) -> bytes:
    """The bytes of a regular file, at most `limit` of them: a longer file raises OSError (EFBIG), or is cut
    at `limit` with `truncate`. A FIFO, device, socket or folder raises OSError; nothing blocks."""
    with _open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        if truncate:
            return data[:limit]
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes, the most envpin reads from one file", str(path))
    return data


def read_tail(path: Path | str, limit: int = MAX_READ_BYTES) -> bytes:
    """The last `limit` bytes of a regular file: for logs whose end is what counts (a command's last lines,
    its metrics line), however much the command wrote before it. Nothing blocks."""
    with _open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            fh.seek(size - limit)
        return fh.read(limit)


def read_user_text(
    path: Path, what: str, error: type[EnvpinError], missing_hint: str = "check the path", limit: int = MAX_READ_BYTES
) -> str:
    """A text file the user pointed at, or one `error` saying why it cannot be read as one (no traceback):
    a regular file of at most `limit` bytes (a FIFO or device is refused, never waited on or read forever)."""
    try:
        raw = read_regular(path, limit)
    except FileNotFoundError as exc:
        raise error(f"{what} {path} does not exist", hint=missing_hint) from exc
    except IsADirectoryError as exc:
        raise error(f"{what} {path} is a folder, not a file", hint="pass the file's path") from exc
    except OSError as exc:
        raise error(
            f"cannot read {what} {path}: {exc.strerror or exc}",
            hint="pass a regular file; check the path and its permissions",
        ) from exc
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
        raise error(
            f"{origin} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", hint=hint
        ) from None
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
        raise EnvpinError(
            f"{option} is {len(raw):,} bytes long; paths are limited to {MAX_PATH_BYTES:,}",
            hint=f"choose a shorter {option}",
        )
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > MAX_NAME_BYTES:
        raise EnvpinError(
            f"{option} has a name of {len(longest):,} bytes; names are limited to {MAX_NAME_BYTES}",
            hint=f"choose a shorter {option}",
        )
    return path


def check_output_path(path: Path, option: str) -> Path:
    """An output named on the command line: short enough for the file system, and in a folder that exists. A
    missing parent is refused, never created: a typo in a path should not grow a tree of folders elsewhere.
    A symbolic link that leads nowhere (dangling, or a loop) is refused too: writing through it would
    create its target, or its target's folders."""
    check_path_length(path, option)
    for where in (path.parent, path):  # a folder on the way that cannot be entered: said, not an internal error
        try:
            os.lstat(where)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise EnvpinError(
                    f"{option}: {where}: {exc.strerror}",
                    hint=f"check the permissions of the folders on its path, or choose another {option}",
                ) from None
    _check_link(path, option)
    parent = path.parent
    _check_link(parent, option)
    if parent.exists() and not parent.is_dir():
        raise EnvpinError(f"{option}: {parent} is not a folder", hint=f"choose another {option}")
    if not parent.is_dir():
        raise EnvpinError(
            f"{option}: the folder {parent} does not exist",
            hint=f"create it first (mkdir -p {parent}), or choose another {option}",
        )
    return path


def check_output_file(path: Path, option: str) -> Path:
    """check_output_path for an output that is one file: a folder, a socket or a block device already there is
    refused now, before any work is done, not once the result is ready to be written."""
    if str(path) == "-":
        raise EnvpinError(
            f"{option} -: '-' is not stdout for {option}, and envpin writes no file named '-'",
            hint=f"name a file, or give {option} /dev/stdout to write to stdout",
        )
    check_output_path(path, option)
    try:
        _write_target(path)
    except OSError as exc:
        raise EnvpinError(f"{option}: {path}: {exc.strerror or exc}", hint=f"choose another {option}") from exc
    return path


def check_output_folder(path: Path, option: str) -> Path:
    """check_output_path for an output that is a folder envpin writes reports into (created if missing): a
    file, device or anything else already there that is not a folder is refused now, before any work."""
    if str(path) == "-":
        raise EnvpinError(
            f"{option} -: {option} names a folder, and envpin makes no folder named '-'",
            hint=f"name a folder, e.g. {option} reports",
        )
    check_output_path(path, option)
    if path.exists() and not path.is_dir():
        raise EnvpinError(f"{option}: {path} exists and is not a folder", hint=f"choose another {option}")
    return path


def _check_link(path: Path, option: str) -> None:
    """Refuse `path` when it is a symbolic link whose target does not exist or cannot be reached."""
    if not os.path.islink(path):
        return
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EnvpinError(
                f"{option}: {path} is a symbolic link that loops", hint=f"remove the link, or choose another {option}"
            ) from None
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise EnvpinError(
                f"{option}: cannot follow the symbolic link {path}: {exc.strerror or exc}",
                hint=f"check the link, or choose another {option}",
            ) from None
        raise EnvpinError(
            f"{option}: {path} is a symbolic link to {os.readlink(path)}, which does not exist",
            hint=f"envpin does not write through a dangling link; remove it, or choose another {option}",
        ) from None


def _write_target(path: Path) -> tuple[Path, bool]:
    """envpin.portable.atomic.write_target (where a write lands, and whether it is written into) for a Path."""
    where, direct = write_target(str(path))
    return Path(where), direct


def _write_device(path: Path, data: bytes) -> None:
    write_into(str(path), data)


def folder_files(folder: Path) -> Iterator[str]:
    """Files and links under `folder` as relative POSIX paths, lazily (links are not followed), so a caller
    looking for the first unexpected file stops there even in a large tree."""
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        base = Path(root)
        for n in sorted(names) + [d for d in dirs if (base / d).is_symlink()]:
            yield (base / n).relative_to(folder).as_posix()


def _temp_prefix(path: Path) -> str:
    """'.NAME.' for a temporary file beside `path`, or a hash of NAME where '.NAME.XXXXXXXX.tmp' would pass
    NAME_MAX: the rule of envpin.portable.atomic, which the probe's writes use too."""
    return atomic_temp_prefix(str(path))


def atomic_write(path: Path, data: bytes, mode: int | None = None, *, make_parents: bool = True) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over the target. A character
    device is written into instead (never replaced); a dangling link, folder, FIFO or socket is refused.
    `mode` defaults to the replaced file's permission bits, 0644 for a new file. `make_parents` is for
    envpin's own cache and state folders; outputs the user names pass False."""
    import tempfile  # here, as shutil below: only writers need them, and reading commands start faster

    tmp = None
    try:
        path, device = _write_target(path)
        if device:
            _write_device(path, data)
            return
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, kept_mode(str(path)) if mode is None else mode)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):  # a closed pipe: the CLI's to end
            raise EnvpinError(f"cannot write {path}: {exc.strerror or exc}", hint=_hint(exc)) from exc
        raise


def atomic_write_many(
    files: dict[Path, bytes], modes: dict[Path, int] | None = None, *, make_parents: bool = True
) -> None:
    """All or nothing (envpin.portable.atomic.replace_all), with missing parent folders made first (unless
    `make_parents` is False) and an OSError as one envpin error. Character devices are written into, after the
    regular files; a dangling link, folder, FIFO or socket is refused before anything is written."""
    path = None
    try:
        regular: dict[Path, bytes] = {}
        devices: dict[Path, bytes] = {}
        kept_modes: dict[str, int] = {}
        for path, data in files.items():
            where, device = _write_target(path)
            (devices if device else regular)[where] = data
            if modes and path in modes:
                kept_modes[str(where)] = modes[path]
        path = None
        if make_parents:
            for path in regular:
                path.parent.mkdir(parents=True, exist_ok=True)
        replace_all({str(p): data for p, data in regular.items()}, kept_modes)
        for path, data in devices.items():
            _write_device(path, data)
    except BrokenPipeError:
        raise  # the reader of a pipe went away: the CLI ends quietly
    except OSError as exc:
        where = exc.filename or path
        raise EnvpinError(f"cannot write {where}: {exc.strerror or exc}", hint=_hint(exc)) from exc


def write_hint(exc: OSError) -> str:
    """The hint for a write that failed with `exc` (a full disk, permissions, a path that cannot be a file)."""
    return _hint(exc)


def _hint(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "the disk is full: free some space and retry"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "check the folder's permissions, or choose another with --out"
    if exc.errno == errno.ENXIO:
        return "start what reads the FIFO first, or choose another output path"
    if exc.errno in (errno.EISDIR, errno.EINVAL, errno.ENOENT, errno.ELOOP, errno.ENAMETOOLONG, errno.EBUSY):
        return "choose another output path (a regular file in a folder that exists)"
    return "check the output path"


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
        parent.mkdir(exist_ok=True)  # one level at most (images/ on first use): never a chain of folders
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


def _tag(target: Path) -> str:
    """What staging names start with: '.NAME', or a hash of NAME where '.NAME.envpin-new-XXXXXXXX' would pass
    NAME_MAX (a 255-byte --out is within the documented limit, so its staging must be too)."""
    if len(os.fsencode(target.name)) + 1 + len(_STAGE) + 8 <= MAX_NAME_BYTES:
        return f".{target.name}"
    return ".envpin-" + hashlib.sha256(os.fsencode(target.name)).hexdigest()[:16]


def _remove_leftovers(target: Path) -> None:
    import shutil

    tag = _tag(target)
    for entry in target.parent.glob(f"{glob_escape(tag)}.envpin-*"):
        if entry.name.startswith((f"{tag}{_STAGE}", f"{tag}{_OLD}")) and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def glob_escape(text: str) -> str:
    """`text` with glob's special characters taken literally."""
    import glob

    return glob.escape(text)


def replace_folder(
    target: Path, files: dict[str, bytes], keep: tuple[str, ...] = (), modes: dict[str, int] | None = None
) -> None:
    """Make `target` hold exactly `files` (relative POSIX paths -> bytes) plus the existing entries named
    in `keep` (hard-linked, or re-created when they are links), in one swap. Call it inside exclusive().

    The staged folder takes the target's permissions (a new one: 0777 less the umask)."""
    import shutil
    import tempfile

    try:
        stage = Path(tempfile.mkdtemp(prefix=f"{_tag(target)}{_STAGE}", dir=target.parent))
    except OSError as exc:
        raise EnvpinError(f"cannot write in {target.parent}: {exc.strerror or exc}", hint=_hint(exc)) from exc
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
    import shutil
    import tempfile

    try:
        if not target.exists():
            with signals_held():
                os.rename(stage, target)
            return
        old = stage  # after an exchange the staged name holds the old folder
        if not _exchange(stage, target):
            old = Path(tempfile.mkdtemp(prefix=f"{_tag(target)}{_OLD}", dir=target.parent))
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
