"""Tables for the README, generated from the data so the docs cannot drift from it."""

from __future__ import annotations

from collections import Counter

from envpin import catalog, recipes


def recipe_table() -> str:
    rows = [
        "| recipe | applies to | env set in the image | Python steps (envpin.enable_determinism) |",
        "| --- | --- | --- | --- |",
    ]
    common = recipes.table()["common"]
    shared = ", ".join(f"`{e['name']}={e['value']}`" for e in common["env"])
    for row in recipes.rows():
        m = row["match"]
        tf = f"TF {m['tf_min']}–{m['tf_max']}" if m["tf_max"] else f"TF {m['tf_min']}+"
        where = (
            "stock"
            if m["distribution"] == "stock"
            else (f"NGC {m.get('ngc_min')}–{m.get('ngc_max')}" if m.get("ngc_max") else f"NGC {m.get('ngc_min')}+")
        )
        env = ", ".join(f"`{e['name']}={e['value']}`" for e in row["env"]) or "—"
        steps = ", ".join(s["step"] for s in row["steps"])
        rows.append(f"| `{row['id']}` | {where}, {tf} | {env} | {steps} |")
    unset = ", ".join(f"`{u['name']}`" for u in common["unset"])
    rows.append("")
    rows.append(f"Every recipe also sets {shared} and requires that {unset} is **not** set.")
    return "\n".join(rows) + "\n"


def coverage_table() -> str:
    cat = catalog.load()
    entries = cat.entries()
    known = Counter(name for e in entries for name in catalog.FIELDS if e.facts[name].known)
    rows = [
        f"{len(cat.releases())} releases ({cat.releases()[0]}–{cat.releases()[-1]}), {len(entries)} image tags; "
        f"months without a release: {', '.join(sorted(cat.missing))}.",
        "",
        "| field | known | unknown (null with a reason) |",
        "| --- | --- | --- |",
    ]
    for name in catalog.FIELDS:
        rows.append(f"| {name} | {known[name]} | {len(entries) - known[name]} |")
    return "\n".join(rows) + "\n"


BLOCKS = {"recipes": recipe_table, "coverage": coverage_table}


def refresh(text: str) -> str:
    """Replace every `<!-- envpin:NAME -->...<!-- /envpin:NAME -->` block with freshly generated content."""
    for name, make in BLOCKS.items():
        start, end = f"<!-- envpin:{name} -->\n", f"<!-- /envpin:{name} -->"
        if start in text and end in text:
            head, rest = text.split(start, 1)
            _, tail = rest.split(end, 1)
            text = head + start + make() + end + tail
    return text
