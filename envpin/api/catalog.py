"""`envpin catalog`, `catalog show`, `catalog sync`: what the catalog knows, and refreshing it from registries."""

from __future__ import annotations

from pathlib import Path

from envpin.errors import UsageError, param

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

    from envpin.knowledge.catalog import Entry
    from envpin.knowledge.sync import SyncResult


def catalog_entries(tf: str | None = None, flavor: str | None = None, stock: bool = False) -> list[Entry]:
    """`envpin catalog`: the NGC tags that fit `tf` and `flavor`; with stock=True the stock TensorFlow GPU
    images (Docker Hub's tensorflow/tensorflow:X.Y.Z-gpu, envpin.knowledge.stock) that fit `tf`."""
    from envpin.knowledge import catalog
    from envpin.knowledge import stock as stock_table
    from envpin.knowledge.versions import parse_tf_spec

    spec = parse_tf_spec(tf) if tf is not None else None
    if stock:
        if flavor is not None:
            raise UsageError(
                f"{param('flavor')} names NGC tags; stock images have one flavor (-gpu)", hint=f"drop {param('flavor')}"
            )
        found = stock_table.load().filtered(spec)
        if not found:
            raise UsageError(
                f"no stock TensorFlow GPU image in the catalog holds TensorFlow {tf}",
                hint=f"see '{param('stock', command='catalog')}'",
            )
        return found
    if flavor is not None and not flavor.strip():
        raise UsageError(f"{param('flavor')} is empty", hint="use one of: py2, py3, tf1, tf1-py2, tf2")
    entries = catalog.load().select(None, tf=spec, flavor=flavor)
    if not entries:
        what = " and ".join(x for x in (f"TensorFlow {tf}" if tf else "", f"flavor {flavor}" if flavor else "") if x)
        held = stock_table.load().filtered(spec) if spec is not None and flavor is None else []
        raise UsageError(
            f"no NGC release in the catalog matches {what}",
            hint=f"stock images hold it: {', '.join(e.tag for e in held)} "
            f"({param('stock', command='catalog')} {param('tf')} {tf})"
            if held
            else "see 'envpin catalog'",
        )
    return entries


def catalog_release(release: str) -> list[Entry]:
    """`envpin catalog show`: every tag of a release, or the one tag named; a stock image's tag
    (2.20.0-gpu, tensorflow/tensorflow:2.20.0-gpu) shows that image."""
    from envpin.knowledge import catalog
    from envpin.knowledge import stock as stock_table

    if stock_table.names_stock_tag(release):
        return [stock_table.load().select(release)]
    from envpin.portable.versions import SpecError, parse_ngc_spec

    try:
        parse_ngc_spec(release)
    except SpecError as exc:  # a shape's hint speaks of the `ngc` parameter; `catalog show` takes a stock tag too
        shape = exc.message.endswith("is not an NGC TensorFlow release")
        raise UsageError(
            exc.message,
            hint="give an NGC release or tag, or a stock image's tag, e.g. envpin catalog "
            "show 20.02, 20.02-tf2-py3 or 2.20.0-gpu"
            if shape
            else exc.hint,
        ) from None
    return catalog.load().select(release)


def sync_catalog(
    registry: str,
    releases: list[str],
    write: Path | None = None,
    ca_bundle: Path | None = None,
    progress: Callable[[str], None] | None = None,
    save: bool = True,
) -> SyncResult:
    """`envpin catalog sync`: compare each tag's image config with the catalog, keep what was read in the
    user's image-facts cache (unless save=False), optionally write a refreshed catalog file."""
    from envpin.files.write import check_output_file
    from envpin.knowledge import sync

    if write is not None:
        check_output_file(write, "write")  # before the registry is asked: a bad path fails at once
    return sync.sync_catalog(registry, tuple(releases), write, ca_bundle, progress=progress, save=save)
