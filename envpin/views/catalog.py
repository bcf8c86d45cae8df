"""Catalog views: the release table, one release in detail, the grade notice, and the `catalog sync` report."""

from __future__ import annotations

from collections.abc import Iterable

from envpin.errors import param
from envpin.views.console import Plain, say

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from rich.console import Console

    from envpin.knowledge.catalog import Entry, Fact
    from envpin.knowledge.sync import SyncResult
    from envpin.knowledge.trust import ImageUse

_SHORT = ("tf_version", "python", "ubuntu", "cuda", "cudnn", "nccl", "driver_min")
#: Fields a plan (render, build, lock) takes from the catalog: a weak grade among them gets a notice.
PLAN_FIELDS = ("tf_version", "python", "ubuntu", "cuda", "cudnn", "nccl", "driver_min")


def cell(value: object) -> str:
    """A catalog value as table text: — for unknown, lists joined."""
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def graded(fact: Fact) -> str:
    """A value as table text with its grade when that grade is below NVIDIA's own text: '2.15.0 (jetson)'."""
    return f"{cell(fact.value)} ({fact.kind})" if fact.weak else cell(fact.value)


def grade_notice(entries: Iterable[Entry], names: Iterable[str] | None = None) -> str | None:
    """One line naming every value (of `names`) that rests on a grade below NVIDIA's own text (for a stock
    image: below TensorFlow's and NVIDIA's own text), or None."""
    from envpin.knowledge.fields import FIELDS
    from envpin.knowledge.trust import MIRROR_KIND

    wanted = tuple(FIELDS if names is None else names)
    entries = list(entries)
    stock = [e for e in entries if e.distribution == "stock"]
    if stock:
        lines = [
            line
            for line in (
                _stock_notice(stock, wanted),
                grade_notice([e for e in entries if e.distribution != "stock"], wanted),
            )
            if line
        ]
        return "\n".join(lines) or None
    parts, releases, kinds = [], [], set()
    for e in entries:
        weak = e.weak(n for n in wanted if n in FIELDS)  # "digest" is a stock image's (_stock_notice)
        if weak:
            listed = ", ".join(f"{name} {cell(f.value)} ({f.kind})" for name, f in weak.items())
            parts.append(f"{e.tag} {listed}")
            releases.append(e.release)
            kinds |= {f.kind for f in weak.values()}
    if not parts:
        return None
    sync = param("releases", command="catalog sync", values=list(dict.fromkeys(releases)))
    docs = ", ".join(
        d
        for d, shown in (
            ("docs/catalog-sources.md", kinds - {MIRROR_KIND}),
            ("docs/catalog-sync.md", kinds & {MIRROR_KIND}),
        )
        if shown
    )
    return f"notice: below NVIDIA's own notes: {'; '.join(parts)} ({docs}); confirm from the image with `{sync}`"


def _stock_notice(entries: list[Entry], wanted: tuple[str, ...]) -> str | None:
    """Stock images: weak values among `wanted`; with "digest" in `wanted`, a stated digest on a weak grade."""
    from envpin.knowledge.fields import FIELDS

    parts = []
    for e in entries:
        listed = [f"{name} {cell(f.value)} ({f.kind})" for name, f in e.weak(n for n in wanted if n in FIELDS).items()]
        d = e.stated_digest
        if "digest" in wanted and d is not None and d.weak:
            listed.append(f"digest {d.value[:19]}… ({d.kind})")
        if listed:
            parts.append(f"{e.tag} " + ", ".join(listed))
    if not parts:
        return None
    return (
        f"notice: below TensorFlow's and NVIDIA's own text: {'; '.join(parts)} (docs/catalog-sources.md); "
        f"confirm in the image itself (`{param('image', command='probe')} IMAGE`)"
    )


def notice(entries: Iterable[Entry], console: Console | Plain, names: Iterable[str] | None = None) -> None:
    """The grade notice on `console` (stderr), when there is one (a line per kind of base)."""
    text = grade_notice(entries, names)
    for line in (text or "").splitlines():
        say(console, line)


def table(entries: list[Entry], console: Console | Plain, note: Console | Plain | None = None) -> None:
    """The release table on `console`; each value shows its grade when weaker than NVIDIA's own text, and the
    TensorFlow version's grade has a column. With `note` (stderr, given when the listing was chosen by
    TensorFlow version), one notice line when a listed TensorFlow version rests on a weak grade."""
    from envpin.knowledge.catalog import WEAK_KINDS

    headers = ["tag"]
    for name in _SHORT:
        headers.append(name.replace("_", " "))
        if name == "tf_version":
            headers.append("tf grade")
    rows = []
    for e in entries:
        cells = [e.tag]
        for n in _SHORT:
            fact = e.facts[n]
            if n == "tf_version":
                cells += [cell(fact.value), fact.kind or "—"]
            else:
                cells.append(graded(fact))
        rows.append(cells)
    from envpin.views import tables

    console = tables.show(
        console, "NGC TensorFlow releases (— = unknown; (grade) = evidence below NVIDIA's own text)", headers, rows
    )
    images = f"{len(entries)} image{'' if len(entries) == 1 else 's'}"
    say(
        console,
        f"{images}; `envpin catalog show YY.MM` for sources and unknowns; "
        f"`{param('stock', command='catalog')}` for Docker Hub's stock TensorFlow GPU images",
    )
    weak = sum(len(e.weak(_SHORT)) for e in entries)
    if weak:
        say(
            console,
            f"{weak} value{'s' if weak > 1 else ''} shown rest{'s' if weak == 1 else ''} on evidence below "
            f"NVIDIA's own text ({', '.join(sorted(WEAK_KINDS))}; docs/catalog-sources.md)",
        )
    if note is not None:
        notice(entries, note, ("tf_version",))
    cached = [e for e in entries if e.cached]
    if cached:
        from envpin.knowledge.facts import cache_path
        from envpin.knowledge.trust import IMAGE_KIND, MIRROR_KIND

        def count(kind: str) -> int:
            return sum(any(f.kind == kind for f in e.facts.values()) for e in cached)

        parts = [
            f"{n} {what}"
            for n, what in (
                (
                    count(IMAGE_KIND),
                    "from the catalog's repository or under a digest it records, outranking the written sources",
                ),
                (count(MIRROR_KIND), "from another registry, filling unknown values only (grade mirror)"),
            )
            if n
        ]
        say(
            console,
            f"{len(cached)} of them carry what their image config declares, from {cache_path()} "
            f"(`envpin catalog sync`): {'; '.join(parts)}",
        )


def stock_table(entries: list[Entry], console: Console, note: Console | None = None) -> None:
    """The stock TensorFlow GPU images (Docker Hub's tensorflow/tensorflow:X.Y.Z-gpu) with the facts a plan
    uses; weak-grade values show their grade, and `note` (stderr) gets one notice line for them."""
    from envpin.knowledge.stock import RECORDED
    from envpin.views import tables

    headers = ["tag", *(name.replace("_", " ") for name in RECORDED), "digest a source states"]
    rows = [
        [
            e.tag,
            *(graded(e.facts[n]) for n in RECORDED),
            f"{e.stated_digest.value[:19]}… ({e.stated_digest.kind})" if e.stated_digest else "—",
        ]
        for e in entries
    ]
    title = "stock TensorFlow GPU images, tensorflow/tensorflow (— = unknown; (grade) = a third party's statement)"
    tables.show(console, title, headers, rows)
    images = f"{len(entries)} image{'' if len(entries) == 1 else 's'}"
    say(
        console,
        f"{images}; cuda and cudnn are what TensorFlow's pip package was built and tested "
        "against; `envpin catalog show X.Y.Z-gpu` for sources and unknowns",
    )
    if note is not None:
        notice(entries, note, (*RECORDED, "digest"))


def detail(entries: list[Entry], console: Console, note: Console | None = None) -> None:
    """Every field of each tag with its value, grade and source (or why it is unknown), further sources that
    agree and sources that disagree; with `note` (stderr), one notice line when a value rests on a weak grade."""
    from envpin.knowledge.fields import FIELDS
    from envpin.views import tables

    for e in entries:
        rows = []
        for name in FIELDS:
            fact = e.facts[name]
            where = e.source_url(name) if fact.known else (fact.reason or "")
            rows.append([name, cell(fact.value), fact.kind or "—", where or ""])
        tables.show(console, e.image, ["field", "value", "grade", "source / why unknown"], rows, fold=frozenset({3}))
        for name in FIELDS:
            fact = e.facts[name]
            for sid in fact.also:
                src = e.sources[sid]
                say(console, f"  {name}: also {cell(fact.value)} from {src['kind']} evidence ({src['url']})")
            for value, sid in fact.conflicts:
                src = e.sources[sid]
                say(console, f"  {name}: {src['kind']} evidence says {cell(value)} ({src['url']})")
        for sid in e.published:
            say(console, f"  published: {e.sources[sid]['url']} uses {e.image}")
        if e.stated_digest is not None:
            d = e.stated_digest
            where = e.sources[d.source]["url"] if d.source is not None else "no source"
            say(
                console,
                f"  digest: {d.value} ({d.kind} evidence, {where}); "
                "render pins it, build checks it against the registry",
            )
        for name, old in sorted(e.outranked.items()):
            say(
                console,
                f"  {name}: the image declares {cell(e.value(name))}; {old.kind} said {cell(old.value)} "
                f"({e.sources[old.source]['url'] if old.source else 'no source'})",
            )
        for use in e.images:
            image_config(use, console)
    if note is not None:
        notice(entries, note, (*FIELDS, "digest"))  # a stock image's stated digest too, as its listing's notice


def image_config(use: ImageUse, console: Console) -> None:
    """One image config read for a tag: where (REPOSITORY@DIGEST), where it is kept, what the catalog does
    with it and why, then what it declares."""
    from envpin.knowledge.trust import IMAGE_KIND, MIRROR_KIND

    v = use.image
    if use.cached:
        from envpin.knowledge.facts import cache_path

        kept = f"kept in {cache_path()}"
    else:
        kept = "recorded in the catalog file"
    about = f"created {v.get('created') or 'unknown'}; {kept}"
    if use.grade == IMAGE_KIND:
        say(console, f"verified from image: digest {v['digest']} ({v['registry']}, {about}): {use.why}")
    elif use.grade == MIRROR_KIND:
        say(console, f"image config {use.read_from} ({about}): grade mirror, {use.why}")
    else:
        say(console, f"image config {use.read_from} ({about}): not used, {use.why}")
    declared = v.get("declared") or {}
    if declared:
        listed = ", ".join(f"{k} {cell(declared[k])}" for k in sorted(declared))
        say(console, f"  declared by the image: {listed}")


def mirror_line(result: SyncResult) -> str | None:
    """What facts read from another repository than the catalog's do, when they were (None otherwise)."""
    if not result.mirror:
        return None
    from envpin.knowledge.trust import IMAGE_KIND

    confirmed = sum(t.grade == IMAGE_KIND for t in result.tags)
    return (
        f"{result.repository} is not the catalog's repository {result.upstream}: what it declares fills only "
        f"values that nothing else gives (grade mirror), except for tags whose digest the catalog records "
        f"({confirmed} here), which count as the image itself (docs/catalog-sync.md)"
    )


def sync_report(result: SyncResult, console: Console) -> None:
    """One row per value that does not simply agree, one row for a tag whose values all agree; summary."""
    from rich.table import Table
    from rich.text import Text

    from envpin.knowledge.imageconfig import AGREES, DISAGREES, FILLED, MORE_PRECISE

    style = {
        AGREES: "green",
        MORE_PRECISE: "cyan",
        FILLED: "yellow",
        DISAGREES: "bold red",
        "missing": "magenta",
    }
    t = Table(title=f"catalog sync: {result.repository} vs {result.catalog}")
    for col in ("tag", "field", "catalog", "image", "from", "status"):
        t.add_column(col, overflow="fold")
    for tag in result.tags:
        if tag.missing is not None:
            t.add_row(tag.entry.tag, "—", "", "not in the registry", "", Text("missing", style=style["missing"]))
            continue
        shown = [c for c in tag.comparisons if c.status != AGREES]
        agreeing = len(tag.comparisons) - len(shown)
        for c in shown:
            t.add_row(
                tag.entry.tag, c.field, cell(c.catalog), cell(c.image), c.origin, Text(c.status, style=style[c.status])
            )
        if agreeing or not shown:
            t.add_row(
                tag.entry.tag,
                f"{agreeing} other" if shown else f"all {agreeing}",
                "",
                "",
                "",
                Text(AGREES, style=style[AGREES]),
            )
    console.print(t)
    coverage(result, console)
    line = mirror_line(result)
    if line:
        say(console, line)
    say(console, sync_summary(result))


def coverage(result: SyncResult, console: Console) -> None:
    """Values per kind of evidence over the whole catalog, before and after what this sync read."""
    from rich.table import Table

    from envpin.knowledge.catalogcheck import KINDS

    before, after = result.coverage_before, result.coverage_after
    t = Table(title="catalog coverage (values over all tags)")
    for col in ("evidence", "before", "after", "change"):
        t.add_column(col, justify="left" if col == "evidence" else "right")
    for kind in [*KINDS, "unknown"]:
        b, a = before.get(kind, 0), after.get(kind, 0)
        if a or b:
            t.add_row(kind, str(b), str(a), f"{a - b:+d}" if a != b else "")
    console.print(t)


def sync_summary(result: SyncResult) -> str:
    from envpin.knowledge.imageconfig import AGREES, DISAGREES, FILLED, MORE_PRECISE

    n = result.counts()
    line = (
        f"{n['read']} of {n['tags']} tags read ({n['missing']} missing): {n[DISAGREES]} disagree, "
        f"{n[FILLED]} filled, {n[MORE_PRECISE]} more precise, {n[AGREES]} agree"
    )
    if result.written:
        line += f"; wrote {result.written} (use it with ENVPIN_CATALOG={result.written})"
    if result.cache:
        line += f"; image facts kept in {result.cache} (merged by every envpin command)"
    return line
