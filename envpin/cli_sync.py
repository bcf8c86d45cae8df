"""CLI adapter for ``envpin catalog sync`` (a subcommand of the ``catalog`` group)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from envpin import sync
from envpin.console import err, print_json

_STYLE = {
    sync.AGREES: "green",
    sync.MORE_PRECISE: "cyan",
    sync.FILLED: "yellow",
    sync.DISAGREES: "bold red",
    "missing": "magenta",
}


def _cell(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def _table(result: sync.SyncResult) -> Table:
    """One row per value that does not simply agree; one row for a tag whose values all agree."""
    table = Table(title=f"catalog sync: {result.repository} vs {result.catalog}")
    table.add_column("tag")
    table.add_column("field")
    table.add_column("catalog", overflow="fold")
    table.add_column("image", overflow="fold")
    table.add_column("from", overflow="fold")
    table.add_column("status")
    for t in result.tags:
        if t.missing is not None:
            table.add_row(t.entry.tag, "—", "", "not in the registry", "", f"[{_STYLE['missing']}]missing[/]")
            continue
        shown = [c for c in t.comparisons if c.status != sync.AGREES]
        agreeing = len(t.comparisons) - len(shown)
        for c in shown:
            style = _STYLE[c.status]
            table.add_row(t.entry.tag, c.field, _cell(c.catalog), _cell(c.image), c.origin, f"[{style}]{c.status}[/]")
        if agreeing or not shown:
            table.add_row(
                t.entry.tag,
                f"{agreeing} other" if shown else f"all {agreeing}",
                "",
                "",
                "",
                f"[{_STYLE[sync.AGREES]}]{sync.AGREES}[/]",
            )
    return table


def _summary(result: sync.SyncResult) -> str:
    n = result.counts()
    line = (
        f"{n['read']} of {n['tags']} tags read ({n['missing']} missing): {n[sync.DISAGREES]} disagree, "
        f"{n[sync.FILLED]} filled, {n[sync.MORE_PRECISE]} more precise, {n[sync.AGREES]} agree"
    )
    if result.written:
        line += f"; wrote {result.written} (use it with ENVPIN_CATALOG={result.written})"
    return line


def _catalog_group(app: typer.Typer) -> typer.Typer:
    for group in app.registered_groups:
        if group.name == "catalog" and group.typer_instance is not None:
            return group.typer_instance
    raise RuntimeError("the envpin application has no 'catalog' command group to add 'sync' to")


def register(app: typer.Typer) -> None:
    """Add `catalog sync` to the envpin application's catalog group."""
    catalog_app = _catalog_group(app)

    @catalog_app.command("sync")
    def catalog_sync(
        registry: Annotated[
            str,
            typer.Option(
                "--registry",
                metavar="URL",
                help="Registry (or mirror) to read: HOST[:PORT][/PREFIX]; tags are read from "
                "HOST/PREFIX/nvidia/tensorflow. http:// only for loopback.",
            ),
        ] = sync.DEFAULT_REGISTRY,
        release: Annotated[
            list[str] | None,
            typer.Option(
                "--release", metavar="R", help="Only this release or tag (20.03, 20.03-tf2-py3); repeat for more."
            ),
        ] = None,
        write: Annotated[
            Path | None,
            typer.Option("--write", metavar="FILE", help="Write the catalog with each read tag's image facts to FILE."),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
        ca_bundle: Annotated[
            Path | None,
            typer.Option("--ca-bundle", metavar="PEM", help="PEM CA bundle to trust (TLS-intercepting proxies)."),
        ] = None,
    ) -> None:
        """Read each tag's image config from the registry and report where it disagrees with the catalog.

        Exit 0: every declared value agrees (or fills a gap, or is more precise); 1: some value disagrees;
        2: the registry is unreachable or refused access.
        """
        if err.is_terminal:
            with err.status("reading image configs") as status:
                result = sync.sync_catalog(
                    registry, release or (), write, ca_bundle, progress=lambda m: status.update(m)
                )
        else:
            result = sync.sync_catalog(registry, release or (), write, ca_bundle)
        if as_json:
            print_json(result.to_json())
        else:
            err.print(_table(result))
        err.print(_summary(result), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(result.exit_code)
