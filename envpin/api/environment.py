"""`envpin recipe`, `render`, `build`, `lock`: from command-line inputs to an environment folder, an image
and a lock."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from envpin.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Unpack  # Python 3.11+; annotations are strings here, never evaluated

    from envpin.environment.lockfile import Image, Lock
    from envpin.environment.plan import BuildPlan
    from envpin.image.buildstate import BuildRecord
    from envpin.image.podman import ImageFacts
    from envpin.knowledge.catalog import Entry
    from envpin.knowledge.recipes import Recipe
    from envpin.knowledge.sync import ImageRead

DEFAULT_IMAGES_DIR = Path("images")


def recipe_for(ngc: str, tf: str | None) -> tuple[Entry, Recipe]:
    from envpin.environment.plan import make_plan

    plan = make_plan(ngc=ngc, tf=tf)
    return plan.entry, plan.recipe


@dataclass(frozen=True)
class RenderResult:
    plan: BuildPlan
    out: Path
    files: dict[str, bytes]
    #: What was read on the way (e.g. the TensorFlow version from the image config), for stderr.
    notes: tuple[str, ...] = ()
    #: The output formats rendered (docker, apptainer).
    formats: tuple[str, ...] = ("docker",)


class Inputs(TypedDict, total=False):
    """What the user says about an environment on the command line (render, build, build --dry-run)."""

    ngc: str | None
    tf: str | None
    requirements: Path | None
    base_image: str | None
    ca_bundle: Path | None
    name: str | None
    out: Path | None


def _plan_and_target(
    lock: Path | None = None, notes: list[str] | None = None, keep: bool = True, **inputs: Unpack[Inputs]
) -> tuple[BuildPlan, Path]:
    """The plan for command-line inputs and the folder it goes to (default images/<name>); with no --ngc,
    everything comes from the lock (found as `find_lock` finds it).

    When no source gives the tag's TensorFlow version and --tf is not given, the image config is read from
    the registry (--base-image, else the upstream tag): two small requests instead of a question. What was
    read goes to `notes`, and (keep=True) into the image-facts cache when the image names this very tag."""
    from envpin.environment.plan import UnknownTF, make_plan, validate_name

    ngc, name, out = inputs.get("ngc"), inputs.get("name"), inputs.get("out")
    if ngc is None:
        return plan_from_lock(find_lock(lock))
    if name is not None:
        validate_name(name)  # before any catalog look-up: a bad name is reported first
    args: dict[str, Any] = {"ngc": ngc, "tf": inputs.get("tf"), "name": name,
                            "requirements": inputs.get("requirements"), "base_image": inputs.get("base_image"),
                            "ca_bundle": inputs.get("ca_bundle")}
    try:
        plan = make_plan(**args)
    except UnknownTF as unknown:
        from envpin.environment.plan import release_version
        from envpin.knowledge import sync

        got = _read_unknown_tf(unknown.entry, args["tf"], args["base_image"], args["ca_bundle"],
                               notes if notes is not None else [], keep)
        plan = make_plan(**{**args, "tf": release_version(got.declared["tf_version"])}, tf_source="image",
                         base_digest=got.digest, base_declared=sync.version_env(got.env))
    if out is not None:
        from envpin.fsutil import check_output_path

        check_output_path(out, "--out")
    return plan, out if out is not None else DEFAULT_IMAGES_DIR / plan.name


def _read_unknown_tf(
    entry: Entry, tf: str | None, base_image: str | None, ca_bundle: Path | None, notes: list[str], keep: bool
) -> ImageRead:
    """The image config of `entry` (or of the mirror that stands for it), which must declare its TensorFlow."""
    from envpin.environment.plan import release_version, validate_image_ref
    from envpin.errors import RegistryError
    from envpin.knowledge import catalog, sync
    from envpin.knowledge import facts as imagecache

    ref = validate_image_ref(base_image) if base_image is not None else entry.image
    what = f"the catalog does not know which TensorFlow {entry.tag} contains"
    try:
        got = sync.read_image(sync.registry_client(ca_bundle), ref)
    except RegistryError as exc:
        raise UsageError(f"{what}, and {ref}'s image config could not be read: {exc.message}",
                         hint="give it as --tf MAJOR.MINOR, or read it from a mirror that holds the tag with "
                         "--base-image MIRROR/nvidia/tensorflow:TAG") from exc
    declared = got.declared.get("tf_version")
    if not declared:
        raise UsageError(f"{what}, and {ref}'s image config does not declare it (no ENV TENSORFLOW_VERSION)",
                         hint="give it as --tf MAJOR.MINOR")
    version = release_version(declared)
    if tf is not None and not (version + ".").startswith(tf.strip() + "."):
        raise UsageError(f"--tf {tf} does not match TensorFlow {declared}, which {ref} declares",
                         hint=f"drop --tf, or build from an image that holds TensorFlow {tf}")
    named = got.declared.get("nvidia_tensorflow_version")
    if named and sync.compare_ngc_version(entry.tag, named) != sync.AGREES:
        raise UsageError(f"{ref} declares it is NGC {named} (ENV NVIDIA_TENSORFLOW_VERSION), not {entry.tag}",
                         hint="--base-image must be a copy of the tag named with --ngc")
    note = f"read TensorFlow {declared} from the image config of {ref} ({got.digest[:19]}…)"
    if named and keep:
        cache = imagecache.save(catalog.load().repository, {entry.tag: got.image})
        note += f"; kept in {cache}"
    elif not named:
        note += "; not kept: the image does not name its NGC release (ENV NVIDIA_TENSORFLOW_VERSION)"
    notes.append(note)
    return got


def render_environment(
    *, force: bool = False, write: bool = True, formats: tuple[str, ...] | None = None, **inputs: Unpack[Inputs]
) -> RenderResult:
    """Resolve, render, and (unless write=False, as for --dry-run) write the environment folder.

    formats: docker and/or apptainer; None keeps what the folder's lock records (docker for a new folder)."""
    from envpin.environment.render import (
        DEF_NAME,
        apptainer_from,
        choose_formats,
        parse_formats,
        render,
        write_environment,
    )

    if inputs.get("ngc") is None:
        raise UsageError("render needs --ngc", hint="e.g. envpin render --ngc 20.02 --tf 2.1")
    if formats is not None:
        formats = parse_formats(formats)  # a bad --format is reported before any catalog look-up
    notes: list[str] = []
    plan, target = _plan_and_target(notes=notes, keep=write, **inputs)
    chosen = choose_formats(formats, target)
    if "apptainer" in chosen and not apptainer_from(plan.from_ref)[1]:
        notes.append(f"{DEF_NAME}: {plan.from_ref} is not pinned by digest (none is known for it), so Apptainer "
                     "pulls what the tag names on the day of the build; `envpin build` pins it, or give "
                     "--base-image REF@sha256:DIGEST")
    files = render(plan, chosen)
    if write:
        write_environment(target, plan, files, force=force)
    return RenderResult(plan, target, files, tuple(notes), chosen)


@dataclass(frozen=True)
class BuildResult:
    plan: BuildPlan
    out: Path
    image_id: str
    tag: str
    up_to_date: bool
    seconds: float
    engine: str = "docker"
    notes: tuple[str, ...] = ()
    #: Why the image is not the one envpin.lock records (exit 1), or None.
    problem: str | None = None
    #: What the base image declares that the catalog does not say (the build went on).
    warnings: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 1 if self.problem else 0


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


def build_formats(folder: Path) -> tuple[str, ...]:
    """What a build renders into `folder`: the Dockerfile it builds, and every other format the folder's lock
    records (an Apptainer definition stays, pinned to the same digest)."""
    from envpin.environment.render import FORMATS, choose_formats

    kept = choose_formats(None, folder)
    return tuple(name for name in FORMATS if name == "docker" or name in kept)


def plan_from_lock(lock_path: Path) -> tuple[BuildPlan, Path]:
    """The plan for building from a lock: its inputs re-derived, and the lock refused when it states
    something they do not produce (envpin.lock.read_checked)."""
    from envpin.environment import lockfile as lockmod

    _, plan = lockmod.read_checked(lock_path)
    return plan, lock_path.parent


def check_lock(lock_path: Path) -> list[str]:
    """Why the lock is wrong or stale against its inputs (catalog, recipes, envpin, payload, folder); [] if
    current. Fields the inputs do not produce come first."""
    from envpin.environment import lockfile as lockmod
    from envpin.environment.render import formats_of, render

    locked = lockmod.read(lock_path)
    plan = lockmod.plan_of(locked, lock_path.parent)
    wrong = locked.disagreements(plan)
    stale = locked.stale_against(plan, render(plan, formats_of(locked.files)), lock_path.parent)
    return wrong + [p for p in stale if not (wrong and p.startswith("inputs hash "))]


def build_environment(
    *,
    lock: Path | None = None,
    force: bool = False,
    no_cache: bool = False,
    pull: bool = False,
    update: bool = False,
    engine: str | None = None,
    check: bool = False,
    **inputs: Unpack[Inputs],
) -> BuildResult:
    """Resolve the base digest, render with FROM pinned to it, build, and keep the result machine-local.

    The committed lock changes only when the inputs change (or, with podman, when the reproducible image
    of new inputs is first recorded); the image ID and tag go to envpin.image.buildstate."""
    import time

    from envpin.environment.render import render
    from envpin.image import basecheck
    from envpin.image import docker as build
    from envpin.knowledge import sync

    started = time.monotonic()
    chosen = build.choose_engine(engine)
    if check and chosen != "podman":
        raise UsageError("--check rebuilds with podman, the engine whose images are reproducible",
                         hint="add --engine podman (Docker 20.10's classic builder stamps build times)")
    notes: list[str] = []
    plan, target = _plan_and_target(lock, notes, **inputs)
    ca_bundle = inputs.get("ca_bundle")
    if inputs.get("ngc") is None:
        # Everything from the lock (the arrival workflow: `git clone`, then `envpin build`); the base
        # digest is resolved again and compared with the pinned one below.
        ca_bundle = target / "ca-bundle.crt" if plan.ca_bundle else None
        plan = replace(plan, base_digest=None)
    previous = build.previous_lock(target)
    ref = plan.build_from or plan.image
    # The manifest gives the digest to pin; the config (one more small request) what the base declares.
    got = sync.read_image(sync.registry_client(ca_bundle), ref)
    build.check_base_moved(previous, ref, got.digest, update)
    warnings = basecheck.cross_check(plan, got)
    plan = replace(plan, base_digest=got.digest, base_declared=sync.version_env(got.env))
    files = render(plan, build_formats(target))
    tag = f"envpin/{plan.name.lower()}:{plan.inputs_hash.split(':', 1)[1][:12]}"
    job = _BuildJob(plan, target, files, tag, previous, force, no_cache, pull, started)
    result = job.podman(check) if chosen == "podman" else job.docker()
    return replace(result, notes=(*notes, *result.notes), warnings=tuple(warnings))


@dataclass(frozen=True)
class _BuildJob:
    """One resolved build: the plan with its base digest, the rendered files, and what the user asked."""

    plan: BuildPlan
    target: Path
    files: dict[str, bytes]
    tag: str
    previous: Lock | None
    force: bool
    no_cache: bool
    pull: bool
    started: float

    def _elapsed(self) -> float:
        import time

        return time.monotonic() - self.started

    def _unchanged(self, engine: str, exists: Callable[[str], bool]) -> BuildRecord | None:
        """The state record when these inputs were already built here and the image is still there."""
        from envpin.image import buildstate as state

        recorded = state.load(self.plan.inputs_hash, engine)
        if (
            self.previous is not None
            and self.previous.inputs_hash == self.plan.inputs_hash
            and recorded is not None
            and not (self.no_cache or self.pull)
            and exists(recorded.image_id)
        ):
            return recorded
        return None

    def _record_declared(self) -> None:
        """An up-to-date folder whose lock lacks what the base declares gets it; nothing else is rewritten."""
        from envpin.environment import lockfile as lockmod

        declared = self.plan.base_declared
        if self.previous is None or declared is None or self.previous.base.declared == declared:
            return
        updated = replace(self.previous, base=replace(self.previous.base, declared=dict(declared)))
        updated.write(self.target / lockmod.LOCK_NAME)

    def docker(self) -> BuildResult:
        from envpin.environment.render import check_folder, write_environment
        from envpin.image import buildstate as state
        from envpin.image import docker as build

        client = build.docker_client()
        notes: tuple[str, ...] = ()
        locked = self.previous.expected_image() if self.previous is not None else None
        if locked is not None:
            notes = (f"envpin.lock records the reproducible image {locked.id[:19]}… ({locked.engine}); Docker's "
                     "classic builder stamps build times, so confirm it with `envpin build --engine podman`",)
        recorded = self._unchanged("docker", lambda image: build.image_exists(client, image))
        if recorded is not None:
            check_folder(self.target, self.files, self.force)  # still refuse if someone edited the folder since
            self._record_declared()
            return BuildResult(self.plan, self.target, recorded.image_id, recorded.tag, True, self._elapsed(),
                               "docker", notes)
        write_environment(self.target, self.plan, self.files, force=self.force)
        outcome = build.build_image(client, self.target, self.tag, state.log_path(self.plan.inputs_hash),
                                    no_cache=self.no_cache, pull=self.pull)
        state.save(state.BuildRecord(self.plan.inputs_hash, outcome.image_id, self.tag, self.plan.from_ref))
        return BuildResult(self.plan, self.target, outcome.image_id, self.tag, False, self._elapsed(), "docker",
                           notes)

    def podman(self, check: bool) -> BuildResult:
        """Build from a normalised context with the plan's fixed timestamp; record or confirm the image."""
        import contextlib

        from envpin.environment import lockfile as lockmod
        from envpin.environment.render import check_folder, write_environment
        from envpin.image import buildstate as state
        from envpin.image import podman

        engine = podman.version()
        if check:
            locked = self.previous.image if self.previous is not None else None
            if locked is None:
                raise UsageError(f"{self.target / lockmod.LOCK_NAME} records no image to check against",
                                 hint="build it once with `envpin build --engine podman` and commit the lock")
            check_folder(self.target, self.files, self.force)
        else:
            recorded = self._unchanged("podman", podman.image_exists)
            if recorded is not None:
                check_folder(self.target, self.files, self.force)
                self._record_declared()
                facts = podman.inspect(recorded.image_id)
                built = lockmod.Image(facts.id, self.plan.inputs_hash, engine, podman.storage_driver(), facts.layers)
                return self._settle(built, facts, recorded.tag, up_to_date=True)
            write_environment(self.target, self.plan, self.files, force=self.force)
        log = state.log_path(self.plan.inputs_hash, "podman")
        work = state.state_dir() / "podman"
        with contextlib.ExitStack() as stack:
            store = stack.enter_context(podman.scratch_store(work)) if check else podman.DEFAULT_STORE
            context = stack.enter_context(podman.staged_context(self.files, self.plan.source_date_epoch, work))
            image_id, _ = podman.build(context, self.tag, log, epoch=self.plan.source_date_epoch, store=store,
                                       no_cache=self.no_cache or check, pull=self.pull)
            facts = podman.inspect(image_id, store)
            driver = podman.storage_driver(store)
        built = lockmod.Image(facts.id, self.plan.inputs_hash, engine, driver, facts.layers)
        if check:
            return self._podman_result(facts.id, self.tag, False, engine, _compare_image(locked, built, facts),
                                       checked=True)
        state.save(state.BuildRecord(self.plan.inputs_hash, facts.id, self.tag, self.plan.from_ref, "podman"))
        return self._settle(built, facts, self.tag, up_to_date=False)

    def _settle(self, built: Image, facts: ImageFacts, tag: str, *, up_to_date: bool) -> BuildResult:
        """Record the image in the lock the first time these inputs are built; afterwards, confirm it."""
        from envpin.environment import lockfile as lockmod
        from envpin.fsutil import exclusive

        lock_path = self.target / lockmod.LOCK_NAME
        with exclusive(self.target):  # read and record as one step against other envpin writers
            current = lockmod.read(lock_path)
            expected = current.expected_image()
            if expected is None:
                replace(current, image=built).write(lock_path)
        if expected is None:
            return self._podman_result(built.id, tag, up_to_date, built.engine, None, recorded_now=True)
        return self._podman_result(built.id, tag, up_to_date, built.engine, _compare_image(expected, built, facts))

    def _podman_result(self, image_id: str, tag: str, up_to_date: bool, engine: str, problem: str | None,
                       *, recorded_now: bool = False, checked: bool = False) -> BuildResult:
        lock_name = f"{self.target}/envpin.lock"
        if problem:
            notes: tuple[str, ...] = ()
        elif recorded_now:
            notes = (f"recorded image {image_id} ({engine}) in {lock_name}: commit it, and every teammate's "
                     "podman build must reproduce it",)
        elif checked:
            notes = (f"reproduced {image_id} in a scratch store: the image {lock_name} records",)
        else:
            notes = (f"reproduced {image_id}: the image {lock_name} records",)
        return BuildResult(self.plan, self.target, image_id, tag, up_to_date, self._elapsed(), "podman", notes,
                           problem)


def _compare_image(expected: Image, built: Image, facts: ImageFacts) -> str | None:
    """None when `built` is the image the lock records; else where and (as far as known) why it differs."""
    from envpin.image import podman

    if expected.id == built.id:
        return None
    why = [podman.first_difference(expected.layers, facts)]
    if expected.inputs_hash != built.inputs_hash:
        why.append(f"the inputs changed since it was recorded ({expected.inputs_hash[:19]}… -> "
                   f"{built.inputs_hash[:19]}…): a new image is expected; `envpin build --engine podman` records it")
    if expected.engine != built.engine or expected.storage_driver != built.storage_driver:
        why.append(f"it was recorded with {expected.engine} on {expected.storage_driver} storage; this build used "
                   f"{built.engine} on {built.storage_driver} (buildah stamps its version; overlay and vfs differ "
                   "in RUN layers)")
    return f"built {built.id[:19]}…, but envpin.lock records {expected.id[:19]}…: " + "; ".join(why)


@dataclass(frozen=True)
class LockResult:
    out: Path
    image: str
    python: str
    base_count: int
    locked: tuple[str, ...]
    #: "image" (pip inside a container of the image) or "host" (uv, for the image's Python and tags).
    resolver: str = "image"
    exit_code: int = 0


def lock_requirements(
    source: Path, *, ngc: str, tf: str | None = None, base_image: str | None = None, out: Path | None = None,
    resolver: str = "auto",
) -> LockResult:
    """Resolve requirements.in for the target image and write requirements.lock with hashes. resolver: auto
    (inside the image when its Python is 3.7+, on the host for 3.6), image or host (envpin.environment.resolve)."""
    from envpin.environment import resolve as locking
    from envpin.environment.plan import make_plan
    from envpin.fsutil import check_output_path
    from envpin.image import docker as build

    if out is not None:
        check_output_path(out, "--out")
    text = locking.read_requirements_in(source)
    plan = make_plan(ngc=ngc, tf=tf, base_image=base_image)
    image = plan.build_from or plan.image
    client = build.docker_client()
    res = locking.resolve(client, image, text, resolver)
    target = out or source.with_name("requirements.lock")
    locking.write_lock(target, res.locked, image, res.facts.python, source, text, res.where)
    return LockResult(target, image, res.facts.python, len(res.facts.dists),
                      tuple(f"{r.name}=={r.version}" for r in res.locked), res.where)


def build_dry_run(*, lock: Path | None = None, **inputs: Unpack[Inputs]) -> dict[str, object]:
    """What `envpin build` would do, as the plan's JSON plus inputs hash, folder and files; writes nothing."""
    from envpin.environment.render import render

    notes: list[str] = []
    plan, folder = _plan_and_target(lock, notes, keep=False, **inputs)
    files = sorted(render(plan, build_formats(folder)))
    out = {**plan.to_dict(), "inputs_hash": plan.inputs_hash, "out": str(folder), "files": files}
    return {**out, "notes": notes} if notes else out


@dataclass(frozen=True)
class LockCheck:
    path: Path
    problems: list[str]

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0


@dataclass(frozen=True)
class LockChecks:
    """`envpin lock --check` over one or more locks."""

    checks: list[LockCheck]

    @property
    def exit_code(self) -> int:
        return max((c.exit_code for c in self.checks), default=0)


def check_lock_file(lock: Path | None = None) -> LockChecks:
    """`envpin lock --check`: --lock, else ./envpin.lock, else every images/*/envpin.lock (what a pre-commit hook
    or CI job wants: one command for all environments of a repository), each checked for staleness."""
    if lock is None and not Path("envpin.lock").exists():
        found = sorted(DEFAULT_IMAGES_DIR.glob("*/envpin.lock"))
        if len(found) > 1:
            return LockChecks([LockCheck(p, check_lock(p)) for p in found])
    path = find_lock(lock)
    return LockChecks([LockCheck(path, check_lock(path))])


def build_or_plan(*, dry_run: bool = False, **options: Any) -> BuildResult | dict[str, object]:
    """`envpin build`: the build, or with dry_run=True only the plan it would build (nothing written)."""
    if dry_run:
        keep = (*Inputs.__annotations__, "lock")
        return build_dry_run(**{k: v for k, v in options.items() if k in keep})
    return build_environment(**options)


def lock_or_check(
    requirements_in: Path | None,
    *,
    ngc: str | None,
    tf: str | None = None,
    base_image: str | None = None,
    out: Path | None = None,
    check: bool = False,
    lock: Path | None = None,
    resolver: str | None = None,
) -> LockResult | LockChecks:
    """`envpin lock`: lock requirements.in for the image, or with check=True test envpin.lock."""
    if check:
        return check_lock_file(lock)
    if requirements_in is None or ngc is None:
        raise UsageError("lock needs REQUIREMENTS_IN and --ngc", hint="e.g. envpin lock requirements.in --ngc 20.02")
    return lock_requirements(requirements_in, ngc=ngc, tf=tf, base_image=base_image, out=out,
                             resolver=resolver or "auto")
