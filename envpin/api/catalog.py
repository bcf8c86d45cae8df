"""`envpin catalog`, `catalog show`, `catalog sync`: what the catalog knows, and refreshing it from registries."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envpin.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from envpin.knowledge.catalog import Entry
    from envpin.knowledge.sync import SyncResult

def catalog_entries(tf: str | None = None, flavor: str | None = None) -> list[Entry]:
    from envpin.knowledge import catalog
    from envpin.knowledge.versions import parse_tf_spec

    spec = parse_tf_spec(tf) if tf is not None else None
    if flavor is not None and not flavor.strip():
        raise UsageError("--flavor is empty", hint="use one of: py2, py3, tf1, tf1-py2, tf2")
    entries = catalog.load().select(None, tf=spec, flavor=flavor)
    if not entries:
        what = " and ".join(x for x in (f"TensorFlow {tf}" if tf else "", f"flavor {flavor}" if flavor else "") if x)
        raise UsageError(f"no NGC release in the catalog matches {what}", hint="see 'envpin catalog'")
    return entries


def catalog_release(release: str) -> list[Entry]:
    """`envpin catalog show`: every tag of a release, or the one tag named."""
    from envpin.knowledge import catalog

    return catalog.load().select(release)


def sync_catalog(
    registry: str, releases: list[str], write: Path | None = None, ca_bundle: Path | None = None,
    progress: Callable[[str], None] | None = None, save: bool = True,
) -> SyncResult:
    """`envpin catalog sync`: compare each tag's image config with the catalog, keep what was read in the
    user's image-facts cache (unless save=False), optionally write a refreshed catalog file."""
    from envpin.knowledge import sync

    return sync.sync_catalog(registry, tuple(releases), write, ca_bundle, progress=progress, save=save)
