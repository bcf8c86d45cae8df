"""All-or-nothing file replacement (standard library only, Python 3.6+).

The probe writes its reports with it inside images, and the host side (envpin.fsutil) builds its atomic
writes and folder swaps on it, so both get the same guarantees: staged and fsynced beside the target,
renamed together with Ctrl-C and termination held back.
"""

import contextlib
import os
import signal
import stat
from typing import Dict, Iterator, List, Optional, Tuple  # noqa: F401 (type comments)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold back Ctrl-C and termination for a few renames that must happen together (both reports, or an
    environment folder's swap); they are delivered right after. Only the main thread can block them;
    elsewhere this does nothing."""
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


def kept_mode(path: str, default: int = 0o644) -> int:
    """The permission bits a file written over `path` gets: those of the regular file there (a report made
    private, chmod 600, stays private), else `default`. Set-id and sticky bits are not carried over."""
    try:
        st = os.stat(path)
    except OSError:
        return default
    return st.st_mode & 0o777 if stat.S_ISREG(st.st_mode) else default


def replace_all(files: Dict[str, bytes], modes: Optional[Dict[str, int]] = None) -> None:
    """Write several files all or nothing: each is staged (fsynced) beside its target, then all are renamed
    into place together with signals held back. Renames need no free space, so a full disk or a permission
    problem is found while staging, before any target changes; then every staged file is removed and the
    error raised. The probe's reports and envpin's host-side writes both use this."""
    import tempfile

    staged = []  # type: List[Tuple[str, str]]
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
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    with signals_held():
        for tmp, path in staged:
            os.replace(tmp, path)
