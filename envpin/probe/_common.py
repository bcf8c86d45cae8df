"""Shared plumbing for the collectors: the field shape, guarded calls and file reads under a root.

Runs on Python 3.6+ with the standard library only (it is copied into NGC images).

Every field of a report is one small object that says how it was read:

* ``{"value": ..., "source": "..."}``            the thing was read;
* ``{"unavailable": "reason", "source": "..."}`` the thing does not exist here (no GPU, no TensorFlow);
* ``{"error": "Type: message", "source": "..."}`` reading it failed; the probe goes on;
* ``{"present": true, "redacted": true, ...}``   an environment variable that looks like a credential.
"""

import errno
import os
import stat
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple  # noqa: F401 (type comments)

#: The most the probe reads from one file (a lock, a plan, a package's METADATA): real ones are kilobytes.
MAX_READ_BYTES = 64 * 1024 * 1024


def _open_regular(path: str, limit: int, whole: bool) -> int:
    """A descriptor of a regular file, opened without blocking (a FIFO, device or socket raises OSError
    instead of blocking or being read forever) and checked on the open descriptor; with `whole`, a file
    already larger than `limit` is refused before anything is read (/proc files say 0 here)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if whole and st.st_size > limit:
            raise OSError(errno.EFBIG, "larger than %d bytes" % limit, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(path: str, limit: int = MAX_READ_BYTES, whole: bool = False) -> bytes:
    """At most `limit` bytes of a regular file (/proc and /sys files are regular); with `whole`, a longer file
    raises OSError (a file hashed or parsed whole must not be cut). A FIFO, device or socket raises OSError
    instead of blocking or being read forever: it is opened without blocking and checked on the open
    descriptor."""
    fd = _open_regular(path, limit, whole)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1 if whole else limit)
    if whole and len(data) > limit:
        raise OSError(errno.EFBIG, "larger than %d bytes" % limit, path)
    return data


#: The most the probe hashes of one file it does not parse (a shared library, a topology file).
MAX_HASH_BYTES = 1024 * 1024 * 1024


def hash_file(path: str, limit: int = MAX_HASH_BYTES) -> Tuple[str, int]:
    """("sha256:<hex>", size) of a whole regular file, read in 1 MiB blocks so that a large library costs no
    more memory than a small one; refused like read_file(whole=True) when it is no regular file or larger
    than `limit` (a file that grows while it is read included)."""
    import hashlib

    fd = _open_regular(path, limit, True)
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb") as fh:
        while True:
            block = fh.read(1 << 20)
            if not block:
                break
            size += len(block)
            if size > limit:
                raise OSError(errno.EFBIG, "larger than %d bytes" % limit, path)
            digest.update(block)
    return "sha256:" + digest.hexdigest(), size


class Unavailable(Exception):
    """Raised by a reader when the thing it reads does not exist on this machine (not a failure)."""


class Context(object):
    """What every collector may consult: the filesystem root to read /proc, /sys and /etc under,
    the environment, and options. A context also caches results shared between collectors."""

    def __init__(
        self,
        root: str = "/",
        environ: Optional[Dict[str, str]] = None,
        with_tf: bool = False,
        check_files: bool = False,
    ) -> None:
        self.root = root or "/"
        self.environ = dict(os.environ if environ is None else environ)
        self.with_tf = with_tf
        self.check_files = check_files  # hash every installed file against RECORD (seconds: envpin.probe.installed)
        self.cache: Dict[str, Any] = {}

    def path(self, absolute: str) -> str:
        """Map an absolute system path (``/proc/cpuinfo``) to the path read under the context's root."""
        if self.root == "/":
            return absolute
        return os.path.join(self.root, absolute.lstrip("/"))

    def read_text(self, absolute: str, limit: int = 4 * 1024 * 1024) -> str:
        """Read a small text file (decoded leniently: /proc files are ASCII, garbage must not crash)."""
        return read_file(self.path(absolute), limit).decode("utf-8", "replace")

    def exists(self, absolute: str) -> bool:
        return os.path.exists(self.path(absolute))


def value(v: Any, source: str) -> Dict[str, Any]:
    return {"value": v, "source": source}


def unavailable(reason: str, source: str) -> Dict[str, Any]:
    return {"unavailable": reason, "source": source}


def error(exc: BaseException, source: str) -> Dict[str, Any]:
    return {"error": describe(exc), "source": source}


def describe(exc: BaseException) -> str:
    """One line naming the exception type: reports are compared, so keep messages short and stable."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


def capture(source: str, fn: Callable[..., Any], *args: Any) -> Dict[str, Any]:
    """Run one reader and turn its result or its failure into a field; never raises."""
    try:
        result = fn(*args)
    except Unavailable as exc:
        return unavailable(str(exc), source)
    except Exception as exc:  # a broken collector must not stop the probe
        return error(exc, source)
    return value(result, source)


def guarded_section(name: str, fn: "Callable[[Context], Dict[str, Any]]", ctx: "Context") -> Dict[str, Any]:
    """Run a whole section collector; if it crashes outside its own guards, keep the crash as a field."""
    try:
        section = fn(ctx)
    except Exception as exc:
        return {"collector": error(exc, "envpin.probe." + name)}
    return section


def parse_int(text: str) -> int:
    return int(text.strip())


def package_data(package: str, name: str) -> bytes:
    """A data file shipped beside a module, also when envpin is imported from the envpin.pyz zip."""
    import pkgutil

    data = pkgutil.get_data(package, name)
    if data is None:
        raise IOError("%s/%s cannot be read by its loader" % (package, name))
    return data
