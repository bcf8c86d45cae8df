"""Reading the files envpin is given: regular files only, bounded, never blocking; content hashes.

Every file envpin reads that it did not just write itself (a report, lock, catalog, Dockerfile, configuration,
requirements file, CA bundle, cache) is read here: at most MAX_READ_BYTES of a regular file, opened without
blocking and checked on the open descriptor, so a FIFO, a device or /dev/zero is refused rather than waited on
or read forever. A file the user pointed at fails with one error of the caller's type, and JSON is parsed with
limits on its nesting and its numbers.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from envpin.errors import EnvpinError
from envpin.portable.atomic import kind_of as _kind

TYPE_CHECKING = False  # typing's, without importing typing (every command loads this module)
if TYPE_CHECKING:
    import re
    from collections.abc import Callable
    from io import BufferedReader
    from json import JSONDecoder
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
def _open_regular(path: Path | str) -> Iterator[BufferedReader]:
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
        # Read what the file's size says first: read(limit + 1) alone would allocate the whole bound (64 MiB)
        # for every file. A file longer than its size says (still growing, or /proc's) is read on to the bound.
        want = min(os.fstat(fh.fileno()).st_size, limit) + 1
        data = fh.read(want)
        if len(data) == want <= limit:
            data += fh.read(limit + 1 - want)
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


def parse_json(
    text: str,
    origin: str,
    error: type[EnvpinError],
    hint: str | None = None,
    *,
    depth: bool = True,
    members: Members | None = None,
) -> Any:
    """The one way envpin parses JSON it did not just write: syntax errors, integers of more than 4,300
    digits (Python's conversion limit) and nesting deeper than MAX_JSON_DEPTH all become one `error`.
    `depth=False` leaves the nesting to the caller (check_depth), for one that walks the document anyway.
    `members`: an object's members whose text `members` knows are not parsed again (Members)."""
    import json

    if members is not None:
        data = members.parse(text)
        if data is not None:
            if depth:
                check_depth(data, origin, error, hint)
            return data
    try:
        data = json.loads(text)
    except RecursionError:
        raise error(too_deep(origin), hint=hint) from None
    except json.JSONDecodeError as exc:
        raise error(
            f"{origin} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", hint=hint
        ) from None
    except ValueError as exc:  # int('9' * 5000): the digit limit
        raise error(f"{origin} holds a number too long to read ({str(exc).split(':')[0]})", hint=hint) from None
    if depth:
        check_depth(data, origin, error, hint)
    return data


class Members:
    """The top-level members of one JSON object (a fleet's first report), kept to read many alike faster: a
    member of a later object whose text is the same text (a section no node differs in) is not parsed
    again, it is the value kept (shared between the objects read, so never to be changed). Everything is
    read by json's own scanner, member by member; text that is not a JSON object read this way (invalid,
    or another kind of value) is left to json.loads, which reads it or says why."""

    __slots__ = ("_known", "_last")

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, Any]] = {}
        self._last: tuple[str, dict[str, tuple[int, int]]] | None = None

    def keep(self, values: dict[str, Any]) -> None:
        """Keep the members of the object parsed last, with these values (equal to those parsed: the
        caller's own copy); only objects, arrays and strings, whose text ends where their value does."""
        if self._last is not None:
            text, spans = self._last
            self._known = {k: (text[a:b], values[k]) for k, (a, b) in spans.items() if k in values and text[a] in '{["'}

    def parse(self, text: str) -> dict[str, Any] | None:
        """The object `text` holds, or None when it is not one read this way (json.loads then decides)."""
        decoder, skip = _json_parts()
        read, known = decoder.raw_decode, self._known
        out: dict[str, Any] = {}
        spans: dict[str, tuple[int, int]] = {}
        try:
            i = skip(text, 0).end()
            if text[i : i + 1] != "{":
                return None
            i = skip(text, i + 1).end()
            if text[i : i + 1] == "}":
                i += 1
            else:
                while True:  # as json's own object parser: a string, ':', a value, then ',' or '}'
                    if text[i : i + 1] != '"':
                        return None
                    key, i = read(text, i)
                    i = skip(text, i).end()
                    if text[i : i + 1] != ":":
                        return None
                    i = skip(text, i + 1).end()
                    hit = known.get(key)
                    if hit is not None and text.startswith(hit[0], i):
                        value, end = hit[1], i + len(hit[0])
                    else:
                        value, end = read(text, i)
                    out[key], spans[key] = value, (i, end)
                    i = skip(text, end).end()
                    mark, i = text[i : i + 1], i + 1
                    if mark == "}":
                        break
                    if mark != ",":
                        return None
                    i = skip(text, i).end()
            if skip(text, i).end() != len(text):
                return None
        except (ValueError, RecursionError):  # json.loads says what is wrong (JSONDecodeError is a ValueError)
            return None
        self._last = (text, spans)
        return out


@functools.cache
def _json_parts() -> tuple[JSONDecoder, Callable[[str, int], re.Match[str]]]:
    """A decoder as json.loads uses it (strict, no hooks), and what skips JSON's insignificant whitespace
    (RFC 8259, section 2: space, tab, line feed, carriage return; what json.decoder skips), made once."""
    import re
    from json import JSONDecoder
    from typing import cast

    skip = re.compile(r"[ \t\n\r]*").match  # matches everywhere (the empty string at least)
    return JSONDecoder(), cast("Callable[[str, int], re.Match[str]]", skip)


def too_deep(origin: str) -> str:
    """The message for a document nested deeper than MAX_JSON_DEPTH."""
    return f"{origin} is nested more than {MAX_JSON_DEPTH} levels deep"


def check_depth(data: Any, origin: str, error: type[EnvpinError], hint: str | None = None, level: int = 1) -> None:
    """Refuse `data` (a part of a parsed document at nesting `level`, the document itself being 1) when it
    reaches deeper than MAX_JSON_DEPTH; counted level by level, without recursion."""
    nodes, depth = [data], level - 1
    while nodes:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise error(too_deep(origin), hint=hint)
        nxt: list[Any] = []
        for node in nodes:
            if isinstance(node, dict):
                nxt += [v for v in node.values() if isinstance(v, (dict, list))]
            elif isinstance(node, list):
                nxt += [v for v in node if isinstance(v, (dict, list))]
        nodes = nxt


def folder_files(folder: Path) -> Iterator[str]:
    """Files and links under `folder` as relative POSIX paths, lazily (links are not followed), so a caller
    looking for the first unexpected file stops there even in a large tree."""
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        base = Path(root)
        for n in sorted(names) + [d for d in dirs if (base / d).is_symlink()]:
            yield (base / n).relative_to(folder).as_posix()
