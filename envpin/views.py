"""Rich renderings for humans (always on stderr); JSON shapes live with the data they describe."""

from __future__ import annotations

from rich.table import Table

from envpin.catalog import FIELDS, Entry
from envpin.console import err
from envpin.recipes import Recipe

_SHORT = ("tf_version", "python", "ubuntu", "cuda", "cudnn", "nccl", "driver_min")


def _cell(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(value) or "none"
    return str(value)


def catalog_table(entries: list[Entry]) -> None:
    table = Table(title="NGC TensorFlow releases (— = not in NVIDIA's notes available to the catalog)")
    table.add_column("tag")
    for name in _SHORT:
        table.add_column(name.replace("_", " "))
    for e in entries:
        table.add_row(e.tag, *(_cell(e.value(n)) for n in _SHORT))
    err.print(table)
    err.print(f"{len(entries)} images; `envpin catalog show YY.MM` for sources and unknowns")


def catalog_detail(entries: list[Entry]) -> None:
    for e in entries:
        table = Table(title=f"{e.image}", show_lines=False)
        table.add_column("field")
        table.add_column("value")
        table.add_column("source / why unknown", overflow="fold")
        for name in FIELDS:
            fact = e.facts[name]
            where = e.source_url(name) if fact.known else (fact.reason or "")
            table.add_row(name, _cell(fact.value), where or "")
        err.print(table)
        if e.verified:
            v = e.verified
            err.print(
                f"verified from image: digest {v.get('digest')} ({v.get('registry')}, "
                f"created {v.get('created') or 'unknown'})",
                soft_wrap=True,
            )
            declared = v.get("declared") or {}
            if declared:
                listed = ", ".join(f"{k} {_cell(declared[k])}" for k in sorted(declared))
                err.print(f"  declared by the image: {listed}", soft_wrap=True)


def recipe_detail(tag: str, recipe: Recipe) -> None:
    err.print(f"[bold]{tag}[/]: TensorFlow {recipe.tf_version} → recipe [bold]{recipe.id}[/]")
    err.print(recipe.summary)
    table = Table(title="environment")
    table.add_column("variable")
    table.add_column("value")
    table.add_column("why (source)", overflow="fold")
    for e in recipe.env:
        table.add_row(e["name"], e["value"], f"{e['why']} ({recipe.source_url(e['source'])})")
    for u in recipe.unset:
        table.add_row(u["name"], "must NOT be set", f"{u['why']} ({recipe.source_url(u['source'])})")
    err.print(table)
    err.print("Python steps: " + ", ".join(s["step"] for s in recipe.steps))
    for r in recipe.raises:
        err.print(f"raises under determinism: {r['op']} ({r['message']})")
    for c in recipe.caveats:
        err.print(f"caveat: {c['text']}")
