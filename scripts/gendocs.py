"""The generated parts of the docs: the README's recipe and coverage tables and docs/audit.md's rule
reference, made from the data so the docs cannot drift from it. Not part of the wheel.

    python scripts/gendocs.py           rewrite the generated blocks in README.md and docs/audit.md
    python scripts/gendocs.py --check   exit 1 when a block is stale (tests/unit/test_docs.py does the same)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from envpin.knowledge import catalog, recipes


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
        env = ", ".join(f"`{e['name']}={e['value']}`" + (f" (unverified {e['unverified'].split(':')[0]})"
                                                          if "unverified" in e else "")
                        for e in row["env"]) or "—"
        steps = ", ".join(s["step"] for s in row["steps"])
        rows.append(f"| `{row['id']}` | {where}, {tf} | {env} | {steps} |")
    unset = ", ".join(f"`{u['name']}`" for u in common["unset"])
    rows.append("")
    rows.append(f"Every recipe also sets {shared} and requires that {unset} is **not** set.")
    for item in common["no_effect"]:
        rows.append(f"`{item['name']}` has no effect: TensorFlow reads `{item['instead']}` "
                    "(audit and the runtime check report the misspelt name).")
    return "\n".join(rows) + "\n"


def coverage_table() -> str:
    cat = catalog.load(cache=False)
    entries = cat.entries()
    count = catalog.coverage(entries)
    kinds = [k for k in catalog.KINDS if any(kind == k for _, kind in count)]
    rows = [
        f"{len(cat.releases())} releases ({cat.releases()[0]}–{cat.releases()[-1]}), {len(entries)} image tags; "
        f"months without a release: {', '.join(sorted(cat.missing))}. Values per field by kind of evidence "
        "(`notes`: NVIDIA's TensorFlow release notes; `nvidia`: other NVIDIA sources on the TensorFlow image; "
        "`sibling`: another NGC framework's notes of the same month, base stack only):",
        "",
        "| field | " + " | ".join(kinds) + " | unknown |",
        "| --- | " + " | ".join("---:" for _ in kinds) + " | ---: |",
    ]
    for name in catalog.FIELDS:
        cells = [str(count[(name, k)]) for k in kinds] + [str(count[(name, None)])]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    total = [str(sum(count[(n, k)] for n in catalog.FIELDS)) for k in [*kinds, None]]
    rows.append("| **all** | " + " | ".join(total) + " |")
    return "\n".join(rows) + "\n"


def audit_rule_reference() -> str:
    """One section per audit rule; SARIF's helpUri points at each by its id (the heading's anchor)."""
    from envpin.audit import MECHANICAL, RULES
    from envpin.audit.config import UNSUPPRESSIBLE

    out = []
    for rid in sorted(RULES):
        r = RULES[rid]
        if rid == UNSUPPRESSIBLE:
            how = ("`--fix` refuses a file with this finding: it rewrites only files it fully understands. It "
                   "cannot be suppressed or ignored.")
        else:
            fix = "`--fix` fixes it." if rid in MECHANICAL else "`--fix` leaves a comment on the line."
            how = (f"{fix} Suppress one occurrence with `# envpin: ignore={rid}` on the line or the line above, "
                   "or every one with `ignore` in `[tool.envpin.audit]`.")
        out += [f"### {rid}", "", f"**{r.severity}**: {r.title}.", "", r.help, "", how, ""]
    return "\n".join(out)


BLOCKS = {"recipes": recipe_table, "coverage": coverage_table}
#: Generated blocks of docs/audit.md.
AUDIT_BLOCKS = {"audit-rules": audit_rule_reference}


def refresh(text: str, blocks: dict[str, Callable[[], str]] | None = None) -> str:
    """Replace every `<!-- envpin:NAME -->...<!-- /envpin:NAME -->` block with freshly generated content."""
    for name, make in (BLOCKS if blocks is None else blocks).items():
        start, end = f"<!-- envpin:{name} -->\n", f"<!-- /envpin:{name} -->"
        if start in text and end in text:
            head, rest = text.split(start, 1)
            _, tail = rest.split(end, 1)
            text = head + start + make() + end + tail
    return text


REPO = Path(__file__).resolve().parent.parent
#: Which generated blocks each document holds.
DOCUMENTS = {"README.md": BLOCKS, "docs/audit.md": AUDIT_BLOCKS}


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        sys.stderr.write("usage: python scripts/gendocs.py [--check]\n")
        return 2
    stale = []
    for name, blocks in DOCUMENTS.items():
        path = REPO / name
        text = path.read_text(encoding="utf-8")
        fresh = refresh(text, blocks)
        if fresh != text:
            stale.append(name)
            if not check:
                path.write_text(fresh, encoding="utf-8")
    for name in stale:
        sys.stderr.write(f"{name}: {'stale' if check else 'refreshed'}\n")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
