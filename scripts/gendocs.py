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
from envpin.knowledge.catalogcheck import KINDS
from envpin.knowledge.fields import FIELDS


def recipe_table() -> str:
    rows = [
        "| recipe | applies to | env set in the image | Python steps (envpin.enable_determinism) |",
        "| --- | --- | --- | --- |",
    ]
    book = recipes.book()
    shared = ", ".join(f"`{e.name}={e.value}`" for e in book.env)
    for row in book.rows:
        tf = f"TF {row.tf_min}–{row.tf_max}" if row.tf_max else f"TF {row.tf_min}+"
        where = (
            "stock"
            if row.distribution == "stock"
            else (f"NGC {row.ngc_min}–{row.ngc_max}" if row.ngc_max else f"NGC {row.ngc_min}+")
        )
        env = (
            ", ".join(
                f"`{e.name}={e.value}`"
                + (f" (unverified {e.unverified.split(':')[0]})" if e.unverified is not None else "")
                for e in row.env
            )
            or "—"
        )
        steps = ", ".join(s.step for s in row.steps)
        rows.append(f"| `{row.id}` | {where}, {tf} | {env} | {steps} |")
    unset = ", ".join(f"`{u.name}`" for u in book.unset)
    rows.append("")
    rows.append(f"Every recipe also sets {shared} and requires that {unset} is **not** set.")
    for item in book.no_effect:
        rows.append(
            f"`{item.name}` has no effect: TensorFlow reads `{item.instead}` "
            "(audit and the runtime check report the misspelt name)."
        )
    return "\n".join(rows) + "\n"


def coverage_table() -> str:
    cat = catalog.load(cache=False)
    entries = cat.entries()
    count = catalog.coverage(entries)
    kinds = [k for k in KINDS if any(kind == k for _, kind in count)]
    rows = [
        f"{len(cat.releases())} releases ({cat.releases()[0]}–{cat.releases()[-1]}), {len(entries)} image tags; "
        f"months without a release: {', '.join(sorted(cat.missing))}. Values per field by kind of evidence "
        "(`notes`: NVIDIA's TensorFlow release notes; `nvidia`: other NVIDIA sources on the TensorFlow image; "
        "`sibling`: another NGC framework's notes of the same month, base stack only):",
        "",
        "| field | " + " | ".join(kinds) + " | unknown |",
        "| --- | " + " | ".join("---:" for _ in kinds) + " | ---: |",
    ]
    for name in FIELDS:
        cells = [str(count[(name, k)]) for k in kinds] + [str(count[(name, None)])]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    total = [str(sum(count[(n, k)] for n in FIELDS)) for k in [*kinds, None]]
    rows.append("| **all** | " + " | ".join(total) + " |")
    return "\n".join(rows) + "\n"


def audit_rule_reference(part: str = "rules") -> str:
    """docs/audit.md's rule reference, made from the Rule constants (envpin/audit/rules/) so it cannot drift from
    them: `index`, one table row per rule in the families' order; `rules`, one section per rule with what it
    finds, why it matters, an example it fires on and one it does not, what --fix does, suppression and
    references. SARIF's helpUri points at each section by its heading, the rule id."""
    from envpin.audit.rules import families

    rules = [(family, r) for family in families() for r in family.RULES]
    if part == "index":
        out = ["| rule | severity | summary | `--fix` fixes it | suppressible |", "| --- | --- | --- | --- | --- |"]
        out += [
            f"| [`{r.id}`](#{r.id}) | {r.severity} | {r.title} | {'yes' if r.fixable else 'no'} | "
            f"{'yes' if r.suppressible else 'no'} |"
            for _, r in rules
        ]
        return "\n".join(out) + "\n"
    out = []
    for family, r in rules:
        name = next(k for k, v in vars(family).items() if v is r)
        where = f"`{name}` in `{family.__name__.replace('.', '/')}.py`"
        if r.suppressible:
            suppress = (
                f"`# envpin: ignore={r.id}` on the line or the line above silences one finding; "
                f'`ignore = ["{r.id}"]` in `[tool.envpin.audit]` silences every one.'
            )
        else:
            suppress = "Cannot be suppressed or ignored: the builder stops at this line."
        refs = ", ".join(f"[{title}]({target})" for title, target in r.references)
        judged = (
            f" (a script judged against TensorFlow {r.example_tf}: `--tf {r.example_tf}`)"
            if r.example_tf
            else (" (a script)" if r.language == "python" else "")
        )
        out += [
            f"### {r.id}",
            "",
            f"**{r.severity}**: {r.title}. ({where})",
            "",
            f"**What it finds.** {r.finds}",
            "",
            f"**Why it matters.** {r.why}",
            "",
            f"Fires on{judged}:",
            "",
            f"```{r.language}",
            r.bad.rstrip("\n"),
            "```",
            "",
            f"Does not fire on{judged}:",
            "",
            f"```{r.language}",
            r.good.rstrip("\n"),
            "```",
            "",
            f"**`--fix`.** {'Fixes it. ' if r.fixable else ''}{r.autofix}",
            "",
            f"**Suppression.** {suppress}",
            "",
            f"**References.** {refs}",
            "",
        ]
    return "\n".join(out)


BLOCKS = {"recipes": recipe_table, "coverage": coverage_table}
#: Generated blocks of docs/audit.md: the index under "Rules", the sections under "Rule reference".
AUDIT_BLOCKS: dict[str, Callable[[], str]] = {
    "audit-rule-index": lambda: audit_rule_reference("index"),
    "audit-rules": audit_rule_reference,
}


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
