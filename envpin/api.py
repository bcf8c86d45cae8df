"""Library entry points behind the CLI: each command calls exactly one of these."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from envpin import catalog, recipes
from envpin.catalog import Entry
from envpin.errors import UsageError
from envpin.plan import BuildPlan, make_plan, validate_name
from envpin.render import render, write_environment
from envpin.versions import parse_ngc_spec, parse_tf_spec

if TYPE_CHECKING:
    from envpin.diff import Difference

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


def _plan_and_target(
    ngc: str,
    tf: str | None,
    name: str | None,
    requirements: Path | None,
    base_image: str | None,
    ca_bundle: Path | None,
    out: Path | None,
) -> tuple[BuildPlan, Path]:
    """The plan for command-line inputs and the folder it goes to (default images/<name>)."""
    if name is not None:
        validate_name(name)  # before any catalog look-up: a bad name is reported first
    plan = make_plan(ngc=ngc, tf=tf, name=name, requirements=requirements, base_image=base_image, ca_bundle=ca_bundle)
    return plan, out if out is not None else DEFAULT_IMAGES_DIR / plan.name


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
    plan, target = _plan_and_target(ngc, tf, name, requirements, base_image, ca_bundle, out)
    files = render(plan)
    if write:
        write_environment(target, plan, files, force=force)
    return RenderResult(plan, target, files)


@dataclass(frozen=True)
class BuildResult:
    plan: BuildPlan
    out: Path
    image_id: str
    tag: str
    up_to_date: bool
    seconds: float


def find_lock(explicit: Path | None = None) -> Path:
    """The lock a flag-less `envpin build` works from: --lock, ./envpin.lock, or the only images/*/envpin.lock."""
    from envpin.errors import LockError

    if explicit is not None:
        return explicit
    if Path("envpin.lock").exists():
        return Path("envpin.lock")
    found = sorted(DEFAULT_IMAGES_DIR.glob("*/envpin.lock"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(
            "no --ngc given and no envpin.lock here or under images/",
            hint="pass --ngc (and --tf), or run from a checkout that holds images/<name>/envpin.lock",
        )
    raise LockError(
        f"several locks under images/: {', '.join(str(p) for p in found)}",
        hint="choose one with --lock images/<name>/envpin.lock",
    )


def plan_from_lock(lock_path: Path) -> tuple[BuildPlan, Path]:
    """Rebuild the plan from a lock's inputs and the files in its folder (requirement lock, CA bundle)."""
    from envpin import lock as lockmod

    locked = lockmod.read(lock_path)
    inp, folder = locked.inputs, lock_path.parent
    plan = make_plan(
        ngc=inp.tag,
        tf=inp.tf_version if inp.tf_version_source == "user" else None,
        name=inp.name,
        requirements=folder / "requirements.lock" if inp.requirements_hash else None,
        base_image=inp.build_from,
        base_digest=locked.base.digest,
        ca_bundle=folder / "ca-bundle.crt" if inp.ca_bundle_hash else None,
    )
    return plan, folder


def check_lock(lock_path: Path) -> list[str]:
    """Why the lock is stale against its inputs (catalog, recipes, envpin, payload, folder); [] if current."""
    from envpin import lock as lockmod

    locked = lockmod.read(lock_path)
    plan, folder = plan_from_lock(lock_path)
    return locked.stale_against(plan, render(plan), folder)


def build_environment(
    *,
    ngc: str | None,
    tf: str | None,
    lock: Path | None = None,
    requirements: Path | None = None,
    base_image: str | None = None,
    ca_bundle: Path | None = None,
    name: str | None = None,
    out: Path | None = None,
    force: bool = False,
    no_cache: bool = False,
    pull: bool = False,
    update: bool = False,
) -> BuildResult:
    """Resolve the base digest, render with FROM pinned to it, build, and keep the result machine-local.

    The committed lock changes only when the inputs change; the image ID and tag go to envpin.state."""
    import time

    from envpin import build, state
    from envpin.registry import RegistryClient
    from envpin.render import check_folder

    started = time.monotonic()
    if ngc is None:
        # Everything from the lock: the arrival workflow (`git clone` then `envpin build`).
        plan, target = plan_from_lock(find_lock(lock))
        ca_bundle = target / "ca-bundle.crt" if plan.ca_bundle else None
        plan = replace(plan, base_digest=None)
    else:
        plan, target = _plan_and_target(ngc, tf, name, requirements, base_image, ca_bundle, out)
    previous = build.previous_lock(target)
    ref = plan.build_from or plan.image
    digest = RegistryClient(ca_file=str(ca_bundle) if ca_bundle else None).resolve_digest(ref)
    build.check_base_moved(previous, ref, digest, update)
    plan = replace(plan, base_digest=digest)
    files = render(plan)
    client = build.docker_client()
    recorded = state.load(plan.inputs_hash)
    if (
        previous is not None
        and previous.inputs_hash == plan.inputs_hash
        and recorded is not None
        and not (no_cache or pull)
        and build.image_exists(client, recorded.image_id)
    ):
        check_folder(target, files, force)  # still refuse if someone edited the folder since
        return BuildResult(plan, target, recorded.image_id, recorded.tag, True, time.monotonic() - started)
    write_environment(target, plan, files, force=force)
    tag = f"envpin/{plan.name.lower()}:{plan.inputs_hash.split(':', 1)[1][:12]}"
    outcome = build.build_image(
        client, target, tag, state.log_path(plan.inputs_hash), no_cache=no_cache, pull=pull
    )
    state.save(state.BuildRecord(plan.inputs_hash, outcome.image_id, tag, plan.from_ref))
    return BuildResult(plan, target, outcome.image_id, tag, False, time.monotonic() - started)


@dataclass(frozen=True)
class VerifyResult:
    """`envpin verify`: how this machine (or a report) compares with the lock's recorded reference."""

    diffs: list[Difference]
    recorded: list[str]
    notes: list[str]
    expected_fingerprint: str
    actual_fingerprint: str
    lock: Path
    source: str
    exit_code: int


def verify_environment(lock: Path, report: Path | None = None, record: bool = False) -> VerifyResult:
    """Compare a report (or a live probe) with the lock; with record=True first add what is missing.

    Recording writes the lock only when something new was added, and never overwrites a recorded value."""
    from envpin import diff, probe
    from envpin import lock as lockmod

    locked = lockmod.read(lock)
    actual = diff.load_report(report) if report is not None else probe.collect()
    done: list[str] = []
    if record:
        locked, done = locked.record(actual)
        if done:
            locked.write(lock)
    checked = locked.verify(actual, str(lock))
    return VerifyResult(
        diffs=checked.differences,
        recorded=done,
        notes=checked.notes,
        expected_fingerprint=checked.expected_fingerprint,
        actual_fingerprint=checked.actual_fingerprint,
        lock=lock,
        source=str(report) if report is not None else "live probe",
        exit_code=diff.exit_code(checked.differences),
    )


@dataclass(frozen=True)
class LockResult:
    out: Path
    image: str
    python: str
    base_count: int
    locked: tuple[str, ...]


def lock_requirements(
    source: Path, *, ngc: str, tf: str | None = None, base_image: str | None = None, out: Path | None = None
) -> LockResult:
    """Resolve requirements.in inside the target image and write requirements.lock with hashes."""
    from envpin import build, locking

    text = locking.read_requirements_in(source)
    plan = make_plan(ngc=ngc, tf=tf, base_image=base_image)
    image = plan.build_from or plan.image
    client = build.docker_client()
    python, dists, reqs = locking.resolve(client, image, text)
    target = out or source.with_name("requirements.lock")
    locking.write_lock(target, reqs, image, python, source, text)
    return LockResult(target, image, python, len(dists), tuple(f"{r.name}=={r.version}" for r in reqs))
