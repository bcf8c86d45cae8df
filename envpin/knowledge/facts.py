"""The user's image-facts cache: what image configs declared, read by `envpin catalog sync` (or by render and
build for a tag whose TensorFlow version no written source gives), merged into the catalog on every load.

It lives outside the package and the repository, in ``$XDG_CACHE_HOME/envpin/image-facts.json`` (default
``~/.cache/envpin``): it is one user's knowledge, read from one registry. A team that wants the same facts on
every machine commits a catalog written with ``catalog sync --write`` and points ``ENVPIN_CATALOG`` at it.
Deleting the file forgets everything in it; nothing else refers to it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envpin.errors import CatalogError, EnvpinError
from envpin.fsutil import atomic_write, parse_json
from envpin.knowledge.fields import image_problems

SCHEMA = 1
FILE_NAME = "image-facts.json"
_KEYS = {"schema", "image_repository", "tags"}


def cache_path() -> Path:
    """$XDG_CACHE_HOME/envpin/image-facts.json, else ~/.cache/envpin/image-facts.json."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser().absolute() / "envpin" / FILE_NAME


def _broken(path: Path, why: str) -> CatalogError:
    return CatalogError(f"the image-facts cache {path} {why}",
                        hint=f"delete it (`rm {path}`); `envpin catalog sync` writes it again")


def read(repository: str, path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Image objects by tag ({} when there is no cache). A cache for another repository is refused, not mixed in."""
    path = path or cache_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise _broken(path, f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from exc
    try:
        data = parse_json(text, "it", EnvpinError)
    except EnvpinError as exc:
        raise _broken(path, exc.message.removeprefix("it ")) from None
    if not isinstance(data, dict) or set(data) != _KEYS:
        raise _broken(path, f"needs exactly the keys {sorted(_KEYS)}")
    if data["schema"] != SCHEMA:
        raise _broken(path, f"has schema {data['schema']!r}; this envpin reads schema {SCHEMA}")
    if data["image_repository"] != repository:
        raise _broken(path, f"holds facts for {data['image_repository']!r}, not for the catalog's {repository!r}")
    tags = data["tags"]
    if not isinstance(tags, dict):
        raise _broken(path, "has no object of tags")
    for tag, image in tags.items():
        problems = list(image_problems(image))
        if problems:
            raise _broken(path, f"is invalid: {tag}: {problems[0]}")
    return tags


def dumps(repository: str, tags: Mapping[str, dict[str, Any]]) -> bytes:
    """Canonical form: sorted keys, no clock of its own (each image object keeps the config's `created`)."""
    data = {"schema": SCHEMA, "image_repository": repository, "tags": dict(tags)}
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def save(repository: str, images: Mapping[str, dict[str, Any]], path: Path | None = None) -> Path:
    """Merge `images` (tag -> image object) into the cache and write it atomically; tags not given are kept."""
    path = path or cache_path()
    merged = {**read(repository, path), **images}
    atomic_write(path, dumps(repository, merged))
    return path
