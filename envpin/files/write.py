"""Writing files and folders atomically: nothing envpin writes is ever left half-written.

Outputs are checked before any work is done (`check_output_path`, `check_output_file`,
`check_output_folder`): the parameter that named the path is spelled through `envpin.errors.param`, never
as an option, so the same text serves a Python caller and the CLI.

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
import time
from collections.abc import Iterator
from pathlib import Path

from envpin.errors import EnvpinError, param
from envpin.portable.atomic import _temp_prefix as atomic_temp_prefix
from envpin.portable.atomic import kept_mode, replace_all, signals_held, write_into, write_target

#: Linux's limits (NAME_MAX, PATH_MAX): longer names are refused before anything touches the disk.
MAX_NAME_BYTES, MAX_PATH_BYTES = 255, 4095


def check_path_length(path: Path, name: str) -> Path:
    """Refuse a path the file system would refuse (ENAMETOOLONG) with one clear error instead; `name` is the
    parameter that gave the path."""
    named = param(name)
    raw = os.fsencode(os.path.abspath(path))
    if len(raw) > MAX_PATH_BYTES:
        raise EnvpinError(
            f"{named} is {len(raw):,} bytes long; paths are limited to {MAX_PATH_BYTES:,}",
            hint=f"choose a shorter {named}",
        )
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > MAX_NAME_BYTES:
        raise EnvpinError(
            f"{named} has a name of {len(longest):,} bytes; names are limited to {MAX_NAME_BYTES}",
            hint=f"choose a shorter {named}",
        )
    return path


def check_output_path(path: Path, name: str) -> Path:
    """An output the caller named (parameter `name`): short enough for the file system, and in a folder that exists. A
    missing parent is refused, never created: a typo in a path should not grow a tree of folders elsewhere.
    A symbolic link that leads nowhere (dangling, or a loop) is refused too: writing through it would
    create its target, or its target's folders."""
    check_path_length(path, name)
    named = param(name)
    for where in (path.parent, path):  # a folder on the way that cannot be entered: said, not an internal error
        try:
            os.lstat(where)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise EnvpinError(
                    f"{named}: {where}: {exc.strerror}",
                    hint=f"check the permissions of the folders on its path, or choose another {named}",
                ) from None
    _check_link(path, named)
    parent = path.parent
    _check_link(parent, named)
    if parent.exists() and not parent.is_dir():
        raise EnvpinError(f"{named}: {parent} is not a folder", hint=f"choose another {named}")
    if not parent.is_dir():
        raise EnvpinError(
            f"{named}: the folder {parent} does not exist",
            hint=f"create it first (mkdir -p {parent}), or choose another {named}",
        )
    return path


def check_output_file(path: Path, name: str) -> Path:
    """check_output_path for an output that is one file: a folder, a socket or a block device already there is
    refused now, before any work is done, not once the result is ready to be written."""
    named = param(name)
    if str(path) == "-":
        raise EnvpinError(
            f"{named} -: '-' is not stdout for {named}, and envpin writes no file named '-'",
            hint=f"name a file, or give {named} /dev/stdout to write to stdout",
        )
    check_output_path(path, name)
    try:
        _write_target(path)
    except OSError as exc:
        raise EnvpinError(f"{named}: {path}: {exc.strerror or exc}", hint=f"choose another {named}") from exc
    return path


def check_output_folder(path: Path, name: str) -> Path:
    """check_output_path for an output that is a folder envpin writes reports into (created if missing): a
    file, device or anything else already there that is not a folder is refused now, before any work."""
    named = param(name)
    if str(path) == "-":
        raise EnvpinError(
            f"{named} -: {named} names a folder, and envpin makes no folder named '-'",
            hint=f"name a folder, e.g. {named} reports",
        )
    check_output_path(path, name)
    if path.exists() and not path.is_dir():
        raise EnvpinError(f"{named}: {path} exists and is not a folder", hint=f"choose another {named}")
    return path


def _check_link(path: Path, named: str) -> None:
    """Refuse `path` when it is a symbolic link whose target does not exist or cannot be reached (`named`: the
    parameter that named it, as param() spells it)."""
    if not os.path.islink(path):
        return
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EnvpinError(
                f"{named}: {path} is a symbolic link that loops", hint=f"remove the link, or choose another {named}"
            ) from None
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise EnvpinError(
                f"{named}: cannot follow the symbolic link {path}: {exc.strerror or exc}",
                hint=f"check the link, or choose another {named}",
            ) from None
        raise EnvpinError(
            f"{named}: {path} is a symbolic link to {os.readlink(path)}, which does not exist",
            hint=f"envpin does not write through a dangling link; remove it, or choose another {named}",
        ) from None


def _write_target(path: Path) -> tuple[Path, bool]:
    """envpin.portable.atomic.write_target (where a write lands, and whether it is written into) for a Path."""
    where, direct = write_target(str(path))
    return Path(where), direct


def _write_device(path: Path, data: bytes) -> None:
    write_into(str(path), data)


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
            raise EnvpinError(f"cannot write {path}: {exc.strerror or exc}", hint=write_hint(exc)) from exc
        raise


def atomic_write_many(
    files: dict[Path, bytes], modes: dict[Path, int] | None = None, *, make_parents: bool = True
) -> None:
    """All or nothing (envpin.portable.atomic.replace_all), with missing parent folders made first (unless
    `make_parents` is False) and an OSError as one envpin error. Character devices are written into, after the
    regular files; a dangling link, folder, FIFO or socket is refused before anything is written."""
    current: Path | None = None  # the file at work, for the error when the OSError names none
    try:
        regular: dict[Path, bytes] = {}
        devices: dict[Path, bytes] = {}
        kept_modes: dict[str, int] = {}
        for current, data in files.items():
            where, device = _write_target(current)
            (devices if device else regular)[where] = data
            if modes and current in modes:
                kept_modes[str(where)] = modes[current]
        current = None
        if make_parents:
            for current in regular:
                current.parent.mkdir(parents=True, exist_ok=True)
        replace_all({str(p): data for p, data in regular.items()}, kept_modes)
        for current, data in devices.items():
            _write_device(current, data)
    except BrokenPipeError:
        raise  # the reader of a pipe went away: the CLI ends quietly
    except OSError as exc:
        failed = exc.filename or current
        raise EnvpinError(f"cannot write {failed}: {exc.strerror or exc}", hint=write_hint(exc)) from exc


def write_hint(exc: OSError) -> str:
    """The hint for a write that failed with `exc` (a full disk, permissions, a path that cannot be a file)."""
    if exc.errno == errno.ENOSPC:
        return "the disk is full: free some space and retry"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "check the folder's permissions, or choose another output path"
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
        raise EnvpinError(f"cannot write in {parent}: {exc.strerror or exc}", hint=write_hint(exc)) from exc
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
        raise EnvpinError(f"cannot write in {parent}: {exc.strerror or exc}", hint=write_hint(exc)) from exc
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
                    raise EnvpinError(f"cannot lock {parent}: {exc.strerror or exc}", hint=write_hint(exc)) from exc
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
    NAME_MAX (a 255-byte output name is within the documented limit, so its staging must be too)."""
    if len(os.fsencode(target.name)) + 1 + len(_STAGE) + 8 <= MAX_NAME_BYTES:
        return f".{target.name}"
    return ".envpin-" + hashlib.sha256(os.fsencode(target.name)).hexdigest()[:16]


def _remove_leftovers(target: Path) -> None:
    import shutil

    tag = _tag(target)
    for entry in target.parent.glob(f"{_glob_escape(tag)}.envpin-*"):
        if entry.name.startswith((f"{tag}{_STAGE}", f"{tag}{_OLD}")) and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def _glob_escape(text: str) -> str:
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
        raise EnvpinError(f"cannot write in {target.parent}: {exc.strerror or exc}", hint=write_hint(exc)) from exc
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
            raise EnvpinError(f"cannot write {target}: {exc.strerror or exc}", hint=write_hint(exc)) from exc
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

    try:
        # The process's own symbols, libc's among them: ctypes.util.find_library would start `ldconfig -p`.
        libc = ctypes.CDLL(None, use_errno=True)
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
        raise EnvpinError(f"cannot replace {target}: {exc.strerror or exc}", hint=write_hint(exc)) from exc
    _fsync_dir(target.parent)
    shutil.rmtree(old, ignore_errors=True)
