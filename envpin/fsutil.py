"""Atomic file writes and content hashes: nothing envpin writes is ever left half-written."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from envpin.errors import EnvpinError


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
    """All or nothing: stage every file next to its target first, then rename them all into place.

    Renames need no free space, so a full disk or a permission problem is found while staging, before
    any target changes.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, (modes or {}).get(path, 0o644))
    except OSError as exc:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise EnvpinError(f"cannot write {path}: {exc.strerror or exc}", hint=_hint(exc)) from exc
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    for tmp, path in staged:
        os.replace(tmp, path)


def _hint(exc: OSError) -> str | None:
    import errno

    if exc.errno == errno.ENOSPC:
        return "the disk is full: free some space and retry"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "check the folder's permissions, or choose another with --out"
    return None
