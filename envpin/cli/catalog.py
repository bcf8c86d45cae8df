"""`envpin catalog`, `catalog show` and `catalog sync`: every NGC TensorFlow release with its sources."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envpin.cli import LazyGroup
from envpin.cli.options import Flavor, Format, FormatOpt, JsonOpt, TfOpt, command_app, value, wants_json

DEFAULT_REGISTRY = "nvcr.io"  # kept equal to envpin.knowledge.sync.DEFAULT_REGISTRY by a test


catalog_app = command_app(
    name="catalog",
    cls=LazyGroup,
    help="Every NGC TensorFlow release with its versions and sources.",
    no_args_is_help=False,
)
show_app = command_app()
sync_app = command_app()


@catalog_app.callback(invoke_without_command=True)
def catalog_list(
    ctx: typer.Context,
    tf: TfOpt = None,
    flavor: Annotated[Flavor | None, typer.Option("--flavor", help="The tag's flavor.")] = None,
    stock: Annotated[
        bool,
        typer.Option(
            "--stock",
            help="List the stock TensorFlow GPU images (Docker Hub's tensorflow/tensorflow:X.Y.Z-gpu) instead.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """List the catalog (filter with --tf and --flavor; --stock for the stock TensorFlow GPU images)."""
    if ctx.invoked_subcommand is not None:
        return
    from envpin import api
    from envpin.views import catalog, console

    entries = api.catalog_entries(tf=tf, flavor=value(flavor), stock=stock)
    if wants_json(fmt, as_json):
        console.print_json([e.to_json() for e in entries])
    elif stock:
        catalog.stock_table(entries, console.out(), note=console.err())
    else:
        catalog.table(entries, console.results(), note=console.notes() if tf is not None else None)


@show_app.command("show")
def catalog_show(
    release: Annotated[
        str,
        typer.Argument(help="Release or tag, e.g. 20.02 or 20.02-tf2-py3, or a stock image's tag, e.g. 2.20.0-gpu."),
    ],
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """Show one release: every field with its source, or why it is unknown."""
    from envpin import api
    from envpin.views import catalog, console

    entries = api.catalog_release(release)
    if wants_json(fmt, as_json):
        console.print_json([e.to_json() for e in entries])
    else:
        catalog.detail(entries, console.out(), note=console.err())


@sync_app.command("sync")
def catalog_sync(
    registry: Annotated[
        str,
        typer.Option(
            "--registry",
            metavar="URL",
            help="Registry (or mirror) to read: HOST[:PORT][/PREFIX]; tags are read from "
            "HOST/PREFIX/nvidia/tensorflow. http:// only for loopback.",
        ),
    ] = DEFAULT_REGISTRY,
    releases: Annotated[
        list[str] | None,
        typer.Option(
            "--release", metavar="R", help="Only this release or tag (20.03, 20.03-tf2-py3); repeat for more."
        ),
    ] = None,
    write: Annotated[
        Path | None,
        typer.Option("--write", metavar="FILE", help="Write the catalog with each read tag's image facts to FILE."),
    ] = None,
    no_save: Annotated[
        bool,
        typer.Option(
            "--no-save",
            help="Only compare: do not record what was read in the image-facts cache "
            "($XDG_CACHE_HOME/envpin/image-facts.json) that every envpin command merges.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
    ca_bundle: Annotated[
        Path | None,
        typer.Option("--ca-bundle", metavar="PEM", help="PEM CA bundle to trust (TLS-intercepting proxies)."),
    ] = None,
) -> None:
    """Read each tag's image config from the registry, report where it disagrees with the catalog, and keep
    what the images declare in the image-facts cache. Values read from nvcr.io (or under a digest the
    catalog records) outrank written ones; a mirror's fill only unknown values (docs/catalog-sync.md).

    Exit 0: every declared value agrees (or fills a gap, or is more precise); 1: some value disagrees;
    2: the registry is unreachable or refused access.
    """
    from envpin import api
    from envpin.views import catalog, console

    with console.progress("reading image configs") as update:
        result = api.sync_catalog(registry, releases or [], write, ca_bundle, progress=update, save=not no_save)
    if wants_json(fmt, as_json):
        console.print_json(result.to_json())
        for line in (catalog.mirror_line(result), catalog.sync_summary(result)):
            if line:
                console.say(console.err(), line)
    else:
        catalog.sync_report(result, console.out())
    raise typer.Exit(result.exit_code)
