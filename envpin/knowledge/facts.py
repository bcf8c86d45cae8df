"""The user's image-facts cache: what image configs declared, read by `envpin catalog sync` (or by render and
build for a tag whose TensorFlow version no written source gives), merged into the catalog on every load.

It lives outside the package and the repository, in ``$XDG_CACHE_HOME/envpin/image-facts.json`` (default
``~/.cache/envpin``): it is one user's knowledge. A team that wants the same facts on every machine commits a
catalog written with ``catalog sync --write`` and points ``ENVPIN_CATALOG`` at it. Deleting the file forgets
everything in it; nothing else refers to it.

Schema 2 keys each image config by where it was read and what it is, ``REPOSITORY@DIGEST``, and lists the
catalog tags that resolved to it there::

    {"schema": 2, "image_repository": "nvcr.io/nvidia/tensorflow",
     "images": {"127.0.0.1:5000/nvidia/tensorflow@sha256:…": {"tags": ["20.03-tf2-py3"],
                                                              "created": "…", "declared": {…}}}}

A tag of one repository resolves to one digest at a time; the same tag read from two registries is two
entries, so a mirror's facts never overwrite nvcr.io's (envpin.knowledge.catalog decides which apply).
Schema 1 (image objects by tag alone, each naming its registry) is read as schema 2 and rewritten as schema 2
on the next save: nothing in it is lost.

The cache is envpin's own file, so damage never stops a command: `read` keeps what is valid and describes the
rest in one line (CacheRead.notice), which the catalog carries to the command line (envpin.knowledge.notices); the next
save writes the file anew without it.

Checking an image object's shape imports jsonschema (envpin.knowledge.schema), which costs more than a command's own
work, and every command that loads the catalog reads the cache. So `save`, which writes only objects it checked,
records the SHA-256 of the bytes it wrote beside the file (``image-facts.checked``, as the shipped tables' records),
and `read` checks the image objects of exactly those bytes no more; a cache edited by hand, or written by another
program, is checked in full.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from envpin.errors import EnvpinError, shown
from envpin.files.read import parse_json, read_regular
from envpin.knowledge.fields import IMAGE_SOURCE, image_problems, is_repository_name
from envpin.knowledge.schema import matches_record, write_record
from envpin.portable.imageref import is_digest
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

    #: Image objects by (the repository they were read from, the catalog tag that resolved to them there).
    Images = dict[tuple[str, str], dict[str, Any]]

SCHEMA = 2
#: Schemas this envpin reads; older ones are rewritten as SCHEMA on the next save.
READS = (1, 2)
FILE_NAME = "image-facts.json"
_KEYS = {"schema", "image_repository", "images"}
_V1_KEYS = {"schema", "image_repository", "tags"}
_RECORD_KEYS = {"tags", "created", "declared"}
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")  # Docker's tag grammar


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/envpin, else ~/.cache/envpin: the one folder every envpin cache lives in."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "envpin"


def cache_path() -> Path:
    """$XDG_CACHE_HOME/envpin/image-facts.json, else ~/.cache/envpin/image-facts.json."""
    return cache_dir() / FILE_NAME


@dataclass(frozen=True, slots=True)
class CacheRead(Value):
    """What the cache file holds that can be used, and what is wrong with the rest (never an exception: a
    damaged cache is ignored, in part or whole, and reported once)."""

    path: Path
    images: Images
    #: One phrase per ignored entry, or the one reason the whole file was ignored (whole=True).
    problems: tuple[str, ...] = ()
    whole: bool = False

    @property
    def notice(self) -> str | None:
        """One line naming the file, what is wrong, what envpin does about it and the fix; None when sound."""
        if not self.problems:
            return None
        if self.whole:
            return (
                f"ignoring the image-facts cache {self.path}: it {self.problems[0]}; the next "
                "`envpin catalog sync` writes it anew"
            )
        n = len(self.problems)
        more = f" (and {n - 1} more)" if n > 1 else ""
        which = "that entry" if n == 1 else f"those {n} entries"
        return (
            f"ignoring {which} of the image-facts cache {self.path}: {self.problems[0]}{more}; the next "
            f"`envpin catalog sync` rewrites the file without {'it' if n == 1 else 'them'}"
        )


def read(repository: str, path: Path | None = None) -> CacheRead:
    """The usable image objects of the cache for the catalog of `repository` (empty when there is no cache)."""
    path = path or cache_path()
    try:
        raw = read_regular(path)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        return CacheRead(path, {})
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        return CacheRead(path, {}, (f"cannot be read ({why})",), whole=True)
    try:
        data = parse_json(text, "it", EnvpinError)
    except EnvpinError as exc:
        return CacheRead(path, {}, (exc.message.removeprefix("it "),), whole=True)
    why = _file_problem(data, repository)
    if why:
        return CacheRead(path, {}, (why,), whole=True)
    images: Images = {}
    if data["schema"] == 1:
        problems = list(_v1_entries(data["tags"], images))
    else:  # image objects save() checked and recorded are not checked again
        problems = list(_v2_entries(data["images"], images, matches_record(record_path(path), raw)))
    return CacheRead(path, images, tuple(problems))


def record_path(path: Path) -> Path:
    """Where the record of the cache file `path` is: beside it, image-facts.checked."""
    return path.with_suffix(".checked")


def _file_problem(data: Any, repository: str) -> str | None:
    """Why the whole file is unusable, or None."""
    if not isinstance(data, dict) or data.get("schema") not in READS:
        schema = data.get("schema") if isinstance(data, dict) else None
        if isinstance(schema, int) and not isinstance(schema, bool):
            return f"has schema {schema}; this envpin reads schemas {' and '.join(map(str, READS))}"
        return "is not an image-facts cache (no schema number)"
    keys = _V1_KEYS if data["schema"] == 1 else _KEYS
    if set(data) != keys:
        return f"needs exactly the keys {sorted(keys)} for schema {data['schema']}"
    if data["image_repository"] != repository:
        return f"holds facts for the tags of {shown(data['image_repository'])!r}, not of the catalog's {repository!r}"
    if not isinstance(data["tags" if data["schema"] == 1 else "images"], dict):
        return f"has no object of {'tags' if data['schema'] == 1 else 'images'}"
    return None


def _tag_problem(tag: Any) -> str | None:
    return None if isinstance(tag, str) and _TAG.match(tag) else f"{shown(tag)!r} is not a tag"


def _v1_entries(tags: dict[str, Any], out: Images) -> Iterator[str]:
    """Schema 1: image objects by tag; each names the repository it was read from, so it moves over whole."""
    for tag, image in tags.items():
        problem = _tag_problem(tag) or next(iter(image_problems(image)), None)
        if problem:
            yield f"tag {shown(tag)}: {problem}"
        else:
            out[(image["registry"], tag)] = dict(image)


def _v2_entries(records: dict[str, Any], out: Images, recorded: bool = False) -> Iterator[str]:
    """Schema 2: REPOSITORY@DIGEST -> tags, created, declared; with `recorded`, the image objects are those save()
    checked."""
    for key in sorted(records):
        problem = _record_problem(key, records[key], recorded)
        if problem:
            yield f"{shown(key)}: {problem}"
            continue
        registry, _, digest = key.rpartition("@")
        record = records[key]
        for tag in record["tags"]:
            if (registry, tag) in out:
                yield f"{shown(key)}: {registry}:{tag} is listed under another digest too (kept the first)"
                continue
            out[(registry, tag)] = {
                "digest": digest,
                "created": record["created"],
                "registry": registry,
                "declared": record["declared"],
                "source": IMAGE_SOURCE,
            }


def _record_problem(key: str, record: Any, recorded: bool = False) -> str | None:
    registry, at, digest = key.rpartition("@")
    if not at or not is_repository_name(registry):
        return "the key is not REPOSITORY@DIGEST (e.g. nvcr.io/nvidia/tensorflow@sha256:…)"
    if not is_digest(digest):
        return f"digest {shown(digest)!r} is not sha256:<64 hex digits> or sha512:<128 hex digits>"
    if not isinstance(record, dict) or set(record) != _RECORD_KEYS:
        return f"must be an object with exactly {sorted(_RECORD_KEYS)}"
    tags = record["tags"]
    if not isinstance(tags, list) or not tags:
        return "tags must be a non-empty list"
    problem = next((p for p in map(_tag_problem, tags) if p), None)
    if problem:
        return problem
    image = {
        "digest": digest,
        "created": record["created"],
        "registry": registry,
        "declared": record["declared"],
        "source": IMAGE_SOURCE,
    }
    return None if recorded else next(iter(image_problems(image)), None)


def dumps(repository: str, images: Mapping[tuple[str, str], dict[str, Any]]) -> bytes:
    """Canonical schema-2 form: sorted keys and tags, no clock of its own (each image keeps the config's
    `created`). Tags that resolved to the same digest in the same repository share one entry."""
    records: dict[str, dict[str, Any]] = {}
    for (registry, tag), image in images.items():
        record = records.setdefault(
            f"{registry}@{image['digest']}", {"tags": [], "created": image["created"], "declared": image["declared"]}
        )
        record["tags"] = sorted({*record["tags"], tag})
    data = {"schema": SCHEMA, "image_repository": repository, "images": records}
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def save(repository: str, images: Mapping[str, dict[str, Any]], path: Path | None = None) -> Path:
    """Record `images` (catalog tag -> image object, each naming the repository it was read from) and write
    the cache atomically. What the file held for other tags or other repositories is kept; a tag read again
    from the same repository replaces its earlier digest there; entries the file could not use are dropped."""
    path = path or cache_path()
    merged: Images = dict(read(repository, path).images)
    for tag, image in images.items():
        problem = _tag_problem(tag) or next(iter(image_problems(image)), None)
        if problem:  # what sync and render read is verified before it gets here: this is envpin's own bug
            raise EnvpinError(
                f"refusing to keep an invalid image object for {shown(tag)} in {path}: {problem}",
                hint="report this as a bug in envpin",
            )
        merged.pop((image["registry"], tag), None)  # re-inserted last: the newest read wins a shared digest
        merged[(image["registry"], tag)] = dict(image)
    newest_first = dict(reversed(list(merged.items())))
    from envpin.files.write import atomic_write

    blob = dumps(repository, newest_first)
    atomic_write(path, blob)
    write_record(record_path(path), blob)  # after the file: a crash between them leaves a full check
    return path
