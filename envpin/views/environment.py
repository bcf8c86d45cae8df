"""Views of recipes and environment folders: recipe detail, render/build/lock results, lock checks."""

from __future__ import annotations

import re

from envpin import HOMEPAGE
from envpin.api.environment import PlannedBuild
from envpin.views.console import Plain, say, width_of

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from rich.console import Console

    from envpin.api.environment import RecipeResult, RenderResult
    from envpin.api.lock import LockChecks, LockResult
    from envpin.image.build import BuildResult
    from envpin.knowledge.catalog import Entry
    from envpin.knowledge.distributedrecords import Guarded
    from envpin.knowledge.recipes import Distributed, Recipe

#: An :emoji: code, which rich would replace in the heading (it is printed as markup).
_EMOJI = re.compile(r":\S*?:")


def recipe_result(res: RecipeResult, console: Console | Plain) -> None:
    """`envpin recipe`: the image's recipe, then the distributed recipe when it was asked for. With no image, the
    stock build's recipe, led by a line that says so and names the NGC releases that ship the TensorFlow."""
    if res.entry is None:
        from envpin.environment.plan import listed

        tf = res.recipe.tf_version
        from envpin.errors import param

        ngc = (
            f"; NGC releases with it: {listed(res.ngc_releases)} (`envpin recipe {param('ngc')} RELEASE "
            f"{param('tf')} {tf}` for NVIDIA's build)"
            if res.ngc_releases
            else "; no NGC release in the catalog ships it"
        )
        say(
            console,
            f"no stock TensorFlow GPU image in the catalog holds TensorFlow {tf}: the recipe of a stock "
            f"TensorFlow {tf} build{ngc}",
        )
    console = recipe(res.entry.tag if res.entry is not None else "no image", res.recipe, console)
    if res.distributed is not None:
        distributed(res.entry, res.recipe, res.distributed, console)


def _headed_table(
    console: Console | Plain, heading: list[tuple[str, bool]], summary: str, title: str, rows: list[list[str]]
) -> Console | Plain:
    """A heading (its pieces, each bold or not), a summary line, then a variable/value/why table (its sources
    under it, envpin.views.tables); returns the console the lines that follow are written to."""
    from envpin.views import tables

    if isinstance(console, Plain):
        width = width_of(console.file)
        if width is None or not _plain_heading("".join(t for t, _ in heading), width):
            console = console.rich()
    if isinstance(console, Plain):
        console.print("".join(t for t, _ in heading))
    else:
        from rich.markup import escape

        console.print("".join(f"[bold]{escape(t)}[/]" if bold else escape(t) for t, bold in heading))
    say(console, summary)
    return tables.show(console, title, ["variable", "value", "why (source)"], rows, fold=frozenset({2}))


#: Where a recipe entry holds, by the table's `devices` field.
_WHERE = {"gpu": "on GPUs", "cpu": "on CPUs", "any": "on every device"}


def recipe(tag: str, r: Recipe, console: Console | Plain) -> Console | Plain:
    """The recipe of `tag`: its heading, the environment table, then one line per step, op and caveat; returns
    the console it wrote to (rich's, once a table needed it)."""
    parts = r.records
    rows = []
    for e in parts.env:
        unverified = f"; unverified {e.unverified}" if e.unverified is not None else ""
        rows.append([e.name, e.value or "", f"{e.why}{unverified} ({r.source_url(e.source)})"])
    for u in parts.unset:
        rows.append([u.name, u.rule(), f"{u.why} ({r.source_url(u.source)})"])
    for u in parts.no_effect:
        rows.append([u.name, f"no effect: use {u.instead}", f"{u.why} ({r.source_url(u.source)})"])
    heading = [(tag, True), (f": TensorFlow {r.tf_version} → recipe ", False), (r.id, True)]
    console = _headed_table(console, heading, r.summary, "environment", rows)
    say(console, "Python steps: " + ", ".join(s.step for s in parts.steps))
    for s in parts.steps:
        if s.step == "keras3_no_auto_xla":  # the one step that asks something of the model code itself
            say(console, f"Keras 3 step: {s.why} ({r.source_url(s.source)})")
    for x in parts.raises:
        where = _WHERE[x.devices]
        unverified = f"; unverified: {x.unverified}" if x.unverified is not None else ""
        say(
            console,
            f"raises under determinism {where}: {x.op}: {x.exception}: {x.message} "
            f"({r.source_url(x.source)}{unverified})",
        )
    for x in parts.silent:
        where = _WHERE[x.devices]
        unverified = f"; unverified: {x.unverified}" if x.unverified is not None else ""
        say(
            console,
            f"stays nondeterministic {where}, no exception: {x.op}: {x.why} ({r.source_url(x.source)}{unverified})",
        )
    for c in parts.caveats:
        say(console, f"caveat: {c.text}")
    for o in parts.ngc_overrides:
        say(console, f"NGC differs from stock TensorFlow here: {o.op}: {o.why} ({r.source_url(o.source)})")
    for a in parts.advice:
        say(console, f"common advice that is wrong here: {a.text} (see {HOMEPAGE}/blob/main/{a.doc})")
    return console


def _versions(lo: str | None, hi: str | None) -> str:
    """A TensorFlow range in words: 'every TensorFlow', 'TensorFlow 2.4 and later', 'TensorFlow 2.2 to 2.4'."""
    if lo is None and hi is None:
        return "every TensorFlow"
    if lo == hi:
        return f"TensorFlow {lo}"
    if hi is None:
        return f"TensorFlow {lo} and later"
    return f"TensorFlow up to {hi}" if lo is None else f"TensorFlow {lo} to {hi}"


def _cited(d: Distributed, source: str, range_source: str | None = None, unverified: str | None = None) -> str:
    """'(URL[; versions: URL][; unverified: ...])': where a distributed fact comes from, and what is not settled."""
    parts = [d.source_url(source)]
    if range_source is not None and range_source != source:
        parts.append(f"versions: {d.source_url(range_source)}")
    if unverified is not None:
        parts.append(f"unverified: {unverified}")
    return f"({'; '.join(parts)})"


def _guarded(kind: str, d: Distributed, g: Guarded) -> str:
    return (
        f"{kind} ({_versions(g.tf_min, g.tf_max)}): {g.what}: {g.text} "
        f"{_cited(d, g.source, g.range_source, g.unverified)}"
    )


def distributed(entry: Entry | None, r: Recipe, d: Distributed, console: Console | Plain) -> None:
    """The distributed recipe for the image `entry`: its heading, the table of the variables baked in (with the
    NCCL or Horovod versions that read each, and whether the image's does), the base recipe's variables it keeps,
    then one line per script setting, hazard, cost and caveat, each with its source."""
    parts = d.records
    rows = []
    for v in parts.env:
        version = entry.portable_value(v.library) if entry is not None and v.library in ("nccl", "horovod") else None
        reading = v.reading(version)
        rows.append(
            [
                v.name,
                v.value or "",
                f"{v.why}{f'; {reading}' if reading else ''} {_cited(d, v.source, v.range_source, v.unverified)}",
            ]
        )
    heading = [
        (entry.tag if entry is not None else "no image", True),
        (f": distributed recipe for TensorFlow {d.tf_version}", False),
    ]
    say(console, "")
    console = _headed_table(console, heading, parts.summary, "distributed environment", rows)
    base = r.env_dict()
    for name in parts.uses_common:
        say(console, f"kept in the base recipe above (every image sets it): {name}={base.get(name, '?')}")
    for c in parts.code:
        say(console, _guarded("in the script", d, c))
    if not parts.code:
        say(console, f"in the script: no tf.distribute setting is sourced for TensorFlow {d.tf_version}")
    for h in parts.hazards:
        say(console, _guarded("hazard", d, h))
    for cost in parts.cost:
        say(console, f"cost of {cost.about}: {cost.text} {_cited(d, cost.source, None, cost.unverified)}")
    for n in parts.caveats:
        say(console, f"caveat: {n.text} {_cited(d, n.source, None, n.unverified)}")


def _plain_heading(text: str, width: int) -> bool:
    """The heading is printed as it is by rich (one line, as markup without tags): printable ASCII and the
    arrow, no markup brackets, backslashes or :emoji: codes, no wider than the console."""
    return (
        len(text) <= width
        and all((" " <= c <= "~" and c not in "[]\\") or c == "→" for c in text)
        and not _EMOJI.search(text)
    )


def rendered(res: RenderResult, console: Console | Plain, note: Console | Plain) -> None:
    """The folder's path on stdout (for scripts), what was rendered on stderr."""
    from envpin.views.catalog import PLAN_FIELDS, notice

    p = res.plan
    for line in res.notes:
        say(note, line)
    pinned = p.entry.stated_digest is not None and p.base_digest == p.entry.stated_digest.value
    notice([p.entry], note, (*PLAN_FIELDS, "digest") if pinned else PLAN_FIELDS)  # one line for weak grades
    say(
        note,
        f"rendered {p.entry.tag} (TensorFlow {p.tf_version}, recipe {p.recipe.id}"
        f"{' and the distributed recipe' if p.distributed is not None else ''}) for "
        f"{' and '.join(res.formats)} into {res.out}/",
    )
    say(console, str(res.out))


def build_outcome(res: BuildResult | PlannedBuild, as_json: bool, console: Console, note: Console) -> None:
    """A dry run's plan is JSON either way; a build's result is its tag, or with `as_json` all of it."""
    if isinstance(res, PlannedBuild):
        dry_run(res, console, note)
    else:
        built(res, as_json, console, note)


def lock_outcome(res: LockResult | LockChecks, console: Console | Plain, note: Console | Plain) -> None:
    from envpin.api.lock import LockResult  # here: a recipe's or a render's view does not create lock classes

    if isinstance(res, LockResult):
        locked(res, console, note)
    else:
        lock_check(res, console)


def dry_run(res: PlannedBuild, console: Console, note: Console) -> None:
    """The plan as JSON on stdout (what `--dry-run` is for), one line on stderr."""
    from envpin.views.console import print_json

    print_json(res.to_json())
    say(note, f"dry run: would build {res.plan.entry.tag} from {res.out}/ (nothing written)")


def built(res: BuildResult, as_json: bool, console: Console, note: Console) -> None:
    """The tag on stdout (or the JSON), what it took and what to know on stderr."""
    state = "up to date" if res.up_to_date else "built"
    say(
        note,
        f"{state} with {res.engine}: {res.tag} ({res.image_id[:19]}) in {res.seconds:.1f} s; "
        f"lock: {res.out}/envpin.lock",
    )
    for line in res.notes:
        say(note, line)
    for line in res.warnings:
        say(note, f"warning: {line}")
    if res.problem:
        say(note, f"not reproduced: {res.problem}")
    if as_json:
        from envpin.views.console import print_json

        print_json(res.to_json())
    else:
        say(console, res.tag)


def locked(res: LockResult, console: Console | Plain, note: Console | Plain) -> None:
    where = "resolved inside the image" if res.resolver == "image" else "resolved on the host with uv"
    say(
        note,
        f"locked {len(res.locked)} packages for Python {res.python} in {res.image} "
        f"({res.base_count} packages of the base kept as they are; {where}) -> {res.out}",
    )
    if res.exclude_newer:
        how = "kept from the lock it rewrote" if res.cutoff_kept else "recorded in the lock"
        say(note, f"cut-off: only files uploaded before {res.exclude_newer} ({how})")
    say(console, str(res.out))
    if res.pylock is not None:
        say(console, str(res.pylock))


def lock_check(res: LockChecks, console: Console | Plain) -> None:
    for check in res.checks:
        for line in check.notes:
            say(console, f"note: {line}")
        if not check.problems:
            if check.path.name == "envpin.lock":
                say(console, f"{check.path} is up to date with its inputs")
            continue
        say(console, f"{check.path} is stale ({len(check.problems)} problem{'' if len(check.problems) == 1 else 's'}):")
        for p in check.problems:
            say(console, f"  {p}")
    if res.exit_code:
        say(console, "hint: re-run `envpin render` (or `envpin build`) with the same inputs and commit the result")
