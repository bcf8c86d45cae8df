"""All-or-nothing file replacement (standard library only, Python 3.6+).

The probe writes its reports with it inside images, and the host side (envpin.files.write) builds its atomic
writes and folder swaps on it, so both get the same guarantees: staged and fsynced beside the target,
renamed together with Ctrl-C and termination held back.
"""

import contextlib
import errno
import os
import re
import stat

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Dict, Iterator, List, Optional, Tuple


@contextlib.contextmanager
def signals_held() -> "Iterator[None]":
    """Hold back Ctrl-C and termination for a few renames that must happen together (both reports, or an
    environment folder's swap); they are delivered right after. Only the main thread can block them;
    elsewhere this does nothing."""
    import signal  # here, not at the top: most commands that load this module never hold signals

    held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _temp_prefix(path: str) -> str:
    """'.NAME.' for the staged file, or a hash of NAME where '.NAME.XXXXXXXX.tmp' would pass NAME_MAX (255
    bytes): a name the file system accepts must also be one envpin can stage beside."""
    name = os.path.basename(path)
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) + 14 <= 255:
        return "." + name + "."
    import hashlib

    return ".envpin-" + hashlib.sha256(raw).hexdigest()[:16] + "."


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words ('a FIFO', 'a character device'...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


#: An open descriptor of this process named as a path (/dev/stdout leads to /proc/self/fd/1).
_DESCRIPTOR = re.compile(r"/(?:proc/(?:self|thread-self|[0-9]+)/fd|dev/fd)/[0-9]+")


def is_descriptor(path: str) -> bool:
    """Whether `path` is, or links to, one of this process's open descriptors (/dev/stdout, /dev/fd/3)."""
    current = os.path.abspath(path)
    for _ in range(40):
        if _DESCRIPTOR.fullmatch(current):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return False


def write_target(path: str) -> "Tuple[str, bool]":
    """Where a write of `path` lands and whether it is written into (True) rather than replaced by a rename:
    a character device (as `probe -o /dev/null` is), a FIFO someone reads, and /dev/stdout or /dev/fd/N
    whatever they lead to (a file the shell redirected there is appended to, so the redirection keeps it). A
    link to an existing file is followed (the link stays); a dangling link, a folder, a socket, a block device
    or a FIFO nobody reads is refused (OSError): never replaced. The probe's reports and every envpin output
    go through it."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path, False
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(path)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise OSError(
                    errno.ENOENT,
                    "a symbolic link to %s, which does not exist (envpin does not write "
                    "through a dangling link)" % os.readlink(path),
                    str(path),
                ) from None
            raise
        if is_descriptor(path):
            if stat.S_ISDIR(st.st_mode) or not (
                stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)
            ):
                raise OSError(errno.EINVAL, "it leads to %s" % kind_of(st.st_mode), str(path))
            return path, True
        path = os.path.realpath(path)
    if stat.S_ISDIR(st.st_mode):
        raise OSError(errno.EISDIR, "it is a folder, not a file", str(path))
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or (stat.S_ISREG(st.st_mode) and is_descriptor(path)):
        return path, True
    if not stat.S_ISREG(st.st_mode):
        raise OSError(
            errno.EINVAL, "it is %s, which envpin neither replaces nor writes into" % kind_of(st.st_mode), str(path)
        )
    return path, False


_OWN = re.compile(r"/(?:proc/(?:self|thread-self|%d)/fd|dev/fd)/([0-9]+)" % os.getpid())


def own_descriptor(path: str) -> "Optional[int]":
    """N when `path` is, or links to, this process's descriptor N (/dev/stdout: 1, /dev/fd/3: 3), else None."""
    current = os.path.abspath(path)
    for _ in range(40):
        m = _OWN.fullmatch(current)
        if m:
            return int(m.group(1))
        if not os.path.islink(current):
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return None


def write_into(path: str, data: bytes) -> None:
    """Write into a character device, a FIFO or an open descriptor's file. One of this process's own
    descriptors (/dev/stdout, /dev/fd/N) is written through that very descriptor, so the bytes land where the
    process's own output goes on (a file the shell redirected there keeps everything, in order; the caller
    flushes what it buffers for it first); anything else is opened, a regular file for appending. A FIFO
    nobody reads is refused at once (opening it without blocking fails) instead of waiting for a reader."""
    import fcntl

    own = own_descriptor(path)
    if own is not None:
        view = memoryview(data)
        while view:
            view = view[os.write(own, view) :]
        return

    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "it is a FIFO that nobody reads", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
            raise OSError(errno.EINVAL, "it changed while envpin was writing it", str(path))
        flags = fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | (os.O_APPEND if stat.S_ISREG(mode) else 0))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def kept_mode(path: str, default: int = 0o644) -> int:
    """The permission bits a file written over `path` gets: those of the regular file there (a report made
    private, chmod 600, stays private), else `default`. Set-id and sticky bits are not carried over."""
    try:
        st = os.stat(path)
    except OSError:
        return default
    return st.st_mode & 0o777 if stat.S_ISREG(st.st_mode) else default


def _keep_owner(staged: str, path: str) -> None:
    """Give the staged file the owner and group of the regular file it replaces, where this process may (root,
    or a group it is in): `audit --fix --in-place` by root on a user's script must leave the user's file, not
    a root-owned one. A new file, or an owner this process may not give, keeps the process's own."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        return
    mine = os.stat(staged)
    if (st.st_uid, st.st_gid) == (mine.st_uid, mine.st_gid):
        return
    with contextlib.suppress(OSError):
        os.chown(staged, st.st_uid if os.geteuid() == 0 else -1, st.st_gid)


def replace_all(files: "Dict[str, bytes]", modes: "Optional[Dict[str, int]]" = None) -> None:
    """Write several files all or nothing: each is staged (fsynced) beside its target, then all are renamed
    into place together with signals held back. Renames need no free space, so a full disk or a permission
    problem is found while staging, before any target changes; then every staged file is removed and the
    error raised. The probe's reports and envpin's host-side writes both use this."""
    import tempfile

    staged: List[Tuple[str, str]] = []
    try:
        for path, data in files.items():
            folder = os.path.dirname(os.path.abspath(path))
            with signals_held():  # a Ctrl-C between mkstemp and the bookkeeping would leak the file
                fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=folder)
                staged.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, modes[path] if modes and path in modes else kept_mode(path))
            _keep_owner(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    with signals_held():
        for tmp, path in staged:
            os.replace(tmp, path)
