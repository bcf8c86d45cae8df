"""Library entry points behind the CLI: each command calls exactly one of these."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envpin import catalog, recipes
from envpin.catalog import Entry
from envpin.errors import UsageError
from envpin.plan import BuildPlan, make_plan, validate_name
from envpin.render import render, write_environment
from envpin.versions import parse_ngc_spec, parse_tf_spec

DEFAULT_IMAGES_DIR = Path("images")


def catalog_entries(tf: str | None = None, flavor: str | None = None) -> list[Entry]:
    spec = parse_tf_spec(tf) if tf else None
    entries = catalog.load().filter(tf=spec, flavor=flavor)
    if not entries:
        what = " and ".join(x for x in (f"TensorFlow {tf}" if tf else "", f"flavor {flavor}" if flavor else "") if x)
        raise UsageError(f"no NGC release in the catalog matches {what}", hint="see 'envpin catalog'")
    return entries


def catalog_release(release: str) -> list[Entry]:
    spec = parse_ngc_spec(release)
    entries = catalog.load().release_entries(spec.release)
    if spec.flavor:
        entries = [e for e in entries if e.flavor == spec.flavor]
        if not entries:
            raise UsageError(
                f"NGC {spec.release} has no {spec.flavor} image", hint=f"see 'envpin catalog show {spec.release}'"
            )
    return entries


def recipe_for(ngc: str, tf: str | None) -> tuple[Entry, recipes.Recipe]:
    plan = make_plan(ngc=ngc, tf=tf)
    return plan.entry, plan.recipe


@dataclass(frozen=True)
class RenderResult:
    plan: BuildPlan
    out: Path
    files: dict[str, bytes]


def render_environment(
    *,
    ngc: str,
    tf: str | None,
    requirements: Path | None = None,
    base_image: str | None = None,
    ca_bundle: Path | None = None,
    name: str | None = None,
    out: Path | None = None,
    force: bool = False,
    write: bool = True,
) -> RenderResult:
    """Resolve, render, and (unless write=False, as for --dry-run) write the environment folder."""
    if name is not None:
        validate_name(name)
    plan = make_plan(ngc=ngc, tf=tf, name=name, requirements=requirements, base_image=base_image, ca_bundle=ca_bundle)
    target = out if out is not None else DEFAULT_IMAGES_DIR / plan.name
    files = render(plan)
    if write:
        write_environment(target, plan, files, force=force)
    return RenderResult(plan, target, files)
