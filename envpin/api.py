"""Library entry points behind the CLI: each command calls exactly one of these.

Imports of the library modules happen inside the functions, so a command loads only what it uses
(`envpin probe` never loads the catalog, Jinja2 or the Docker SDK).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from envpin.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Unpack  # Python 3.11+; annotations are strings here, never evaluated

    from envpin.audit import AuditRun
    from envpin.doctor import Diagnosis
    from envpin.environment.lockfile import Image, Lock
    from envpin.environment.plan import BuildPlan
    from envpin.image.buildstate import BuildRecord
    from envpin.image.podman import ImageFacts
    from envpin.image.probing import ImageProbe
    from envpin.knowledge.catalog import Entry
    from envpin.knowledge.recipes import Recipe
    from envpin.knowledge.sync import ImageRead, SyncResult
    from envpin.reports.diff import Difference

DEFAULT_IMAGES_DIR = Path("images")


def catalog_entries(tf: str | None = None, flavor: str | None = None) -> list[Entry]:
    from envpin.knowledge import catalog
    from envpin.knowledge.versions import parse_tf_spec

    spec = parse_tf_spec(tf) if tf is not None else None
    if flavor is not None and not flavor.strip():
        raise UsageError("--flavor is empty", hint="use one of: py2, py3, tf1, tf1-py2, tf2")
    entries = catalog.load().select(None, tf=spec, flavor=flavor)
    if not entries:
        what = " and ".join(x for x in (f"TensorFlow {tf}" if tf else "", f"flavor {flavor}" if flavor else "") if x)
        raise UsageError(f"no NGC release in the catalog matches {what}", hint="see 'envpin catalog'")
    return entries


def catalog_release(release: str) -> list[Entry]:
    """`envpin catalog show`: every tag of a release, or the one tag named."""
    from envpin.knowledge import catalog

    return catalog.load().select(release)


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
    from envpin import probe
    from envpin.environment import lockfile as lockmod
    from envpin.reports import diff

    actual = diff.load_report(report) if report is not None else probe.collect()
    done: list[str] = []
    if record:
        from envpin.fsutil import exclusive

        with exclusive(lock.parent):  # read, add, write as one step against other envpin writers
            locked, _ = lockmod.read_checked(lock)
            locked, done = locked.record(actual)
            if done:
                locked.write(lock)
    else:
        locked, _ = lockmod.read_checked(lock)
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


@dataclass(frozen=True)
class ProbeResult:
    fingerprint: str
    fingerprinted: int
    errors: int
    written: list[str]
    report_on_stdout: bool
    selftest: str | None = None  # the self-test's one-line outcome, when it ran or was asked for
    exit_code: int = 0  # 1 when the self-test failed


def probe_machine(
    *,
    out: Path | None = None,
    json_file: Path | None = None,
    markdown: Path | None = None,
    with_tf: bool = False,
    selftest: bool = False,
    quick: bool = False,
    anonymize: bool = False,
) -> ProbeResult:
    """Probe this machine and write the report(s); with no destination the JSON goes to stdout."""
    from envpin import probe
    from envpin.fsutil import check_output_path

    for path, option in ((out, "--out"), (json_file, "--output"), (markdown, "--markdown")):
        if path is not None and str(path) != "-":
            check_output_path(path, option)
    report = probe.collect(selftest=selftest, quick=quick, with_tf=with_tf, anonymize=anonymize)
    try:
        written = probe.write_reports(
            report,
            out_dir=str(out) if out else None,
            json_path=str(json_file) if json_file else None,
            markdown_path=str(markdown) if markdown else None,
        )
    except OSError as exc:
        raise UsageError(f"cannot write the report: {exc}", hint="check the output path") from None
    on_stdout = not (out or json_file or markdown) or "-" in (str(json_file), str(markdown))
    failed, line = False, None
    if "selftest" in report:
        from envpin.probe.selftest.run import verdict

        failed, line = verdict(report["selftest"], insisted=True)
    return ProbeResult(report["fingerprint"], len(probe.fingerprint_fields(report)),
                       len(report["probe"]["errors"]["value"]), [w for w in written if w != "-"], on_stdout,
                       line, 1 if failed else 0)


def probe_image(
    image: str, *, out: Path | None = None, gpus: str = "auto", selftest: bool | None = None, quick: bool = False,
    anonymize: bool = False, progress: Callable[[str], None] | None = None,
) -> ImageProbe:
    """`envpin probe --image`: the probe in a throwaway container of `image`, reports into `out` (./reports);
    the self-test runs where the image has TensorFlow unless selftest is False."""
    from envpin.environment.plan import validate_image_ref
    from envpin.fsutil import check_output_path
    from envpin.image import docker as build
    from envpin.image import probing as probeimage

    ref = validate_image_ref(image)
    if out is not None:
        check_output_path(out, "--out")
    if gpus not in probeimage.GPU_CHOICES:
        raise UsageError(f"--gpus must be one of {', '.join(probeimage.GPU_CHOICES)}",
                         hint="the default, auto, asks the host")
    client = build.docker_client()
    try:
        return probeimage.run(client, ref, out or Path("reports"), gpus=gpus, selftest=selftest, quick=quick,
                              anonymize=anonymize, progress=progress)
    finally:
        client.close()


@dataclass(frozen=True)
class DiffResult:
    diffs: list[Difference]
    a: Path
    b: Path
    fingerprint_a: str | None
    fingerprint_b: str | None

    @property
    def exit_code(self) -> int:
        from envpin.reports import diff

        return diff.exit_code(self.diffs)


def diff_files(a: Path, b: Path) -> DiffResult:
    """Every difference between two probe reports, classified."""
    from envpin.reports import diff

    ra, rb = diff.load_report(a), diff.load_report(b)
    return DiffResult(diff.diff_reports(ra, rb), a, b, ra.get("fingerprint"), rb.get("fingerprint"))


def _check_python(interpreter: str) -> None:
    """--python must be a Python 3.6+ that starts: anything else is a usage error (exit 2), not a failed test."""
    import subprocess

    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        proc = subprocess.run([interpreter, "-c", code], capture_output=True, text=True, timeout=60)
        parts = tuple(int(p) for p in proc.stdout.strip().split(".")) if proc.returncode == 0 else ()
    except (OSError, ValueError, subprocess.TimeoutExpired):
        parts = ()
    if parts < (3, 6):
        raise UsageError(f"{interpreter} is not a Python 3.6 or later that runs",
                         hint="pass the python executable of the environment that has TensorFlow")


class SelftestError(UsageError):
    """The self-test could not run here (no usable TensorFlow)."""


def run_selftest(
    *, compare: bool = False, quick: bool = False, hygiene_script: Path | None = None, python: str | None = None
) -> dict[str, object]:
    """The determinism self-test in fresh child processes; its result, or SelftestError if it cannot run."""
    import shutil

    from envpin.probe import selftest

    if hygiene_script is not None and not hygiene_script.is_file():
        raise UsageError(f"hygiene script {hygiene_script} does not exist", hint="pass the path of a Python script")
    interpreter = None
    if python is not None:
        interpreter = shutil.which(python)
        if interpreter is None:
            raise UsageError(f"interpreter {python} not found", hint="pass the path of a python executable")
        _check_python(interpreter)
    result = selftest.run_selftest(compare=compare, quick=quick, python=interpreter,
                                   hygiene_script=str(hygiene_script) if hygiene_script else None)
    if "skipped" in result:
        raise SelftestError(
            f"self-test skipped: {result['skipped']}",
            hint="install TensorFlow here, or run it inside the image: python3 -m envpin.probe.selftest",
        )
    result["problems"] = selftest.problems(result)
    return result


def diagnose_host(ngc: str | None = None, lock: Path | None = None) -> Diagnosis:
    """`envpin doctor`: can this host run the image of --ngc or of the lock?"""
    from envpin import doctor

    return doctor.run(ngc=ngc, lock=lock)


def audit_files(
    dockerfiles: list[Path],
    *,
    fail_on: str | None = None,
    build_args: list[str] | None = None,
    target: str | None = None,
    tf: str | None = None,
    fix: bool = False,
    fix_out: Path | None = None,
    in_place: bool = False,
    resolve: bool = True,
    use_config: bool = True,
    context: Path | None = None,
    read_context: bool = True,
) -> AuditRun:
    """`envpin audit`: findings for each Dockerfile, and with fix=True the corrected files. The nearest
    pyproject.toml with [tool.envpin.audit] (from the working directory up) adds ignores and fail-on."""
    from envpin import audit
    from envpin.audit import config as audit_config

    settings = audit_config.load(audit_config.find(Path.cwd())) if use_config else audit_config.AuditConfig()

    if tf is not None:
        from envpin.knowledge.versions import parse_tf_spec

        if len(parse_tf_spec(tf).parts) < 2:
            raise UsageError(f"--tf {tf} names no minor version; a recipe is chosen by MAJOR.MINOR",
                             hint="e.g. --tf 2.1")
    if not fix and not resolve:
        raise UsageError("--no-resolve only makes sense with --fix", hint="add --fix")
    if context is not None and not read_context:
        raise UsageError("--context and --no-context exclude each other", hint="choose one")
    if context is not None and not context.is_dir():
        raise UsageError(f"--context {context} is not a directory", hint="give the folder `docker build` is given")
    resolver = None
    if fix and resolve:
        from envpin.registry.client import RegistryClient

        resolver = RegistryClient().resolve_digest
    return audit.run(
        [str(p) for p in dockerfiles],
        fail_on=fail_on or settings.fail_on or "warning",
        config=settings,
        context=context,
        read_context=read_context,
        build_args=audit.parse_build_args(build_args or []),
        target=target,
        tf=tf,
        do_fix=fix,
        fix_out=fix_out,
        in_place=in_place,
        resolve=resolver,
    )


def sync_catalog(
    registry: str, releases: list[str], write: Path | None = None, ca_bundle: Path | None = None,
    progress: Callable[[str], None] | None = None, save: bool = True,
) -> SyncResult:
    """`envpin catalog sync`: compare each tag's image config with the catalog, keep what was read in the
    user's image-facts cache (unless save=False), optionally write a refreshed catalog file."""
    from envpin.knowledge import sync

    return sync.sync_catalog(registry, tuple(releases), write, ca_bundle, progress=progress, save=save)


def build_or_plan(*, dry_run: bool = False, **options: Any) -> BuildResult | dict[str, object]:
    """`envpin build`: the build, or with dry_run=True only the plan it would build (nothing written)."""
    if dry_run:
        keep = (*Inputs.__annotations__, "lock")
        return build_dry_run(**{k: v for k, v in options.items() if k in keep})
    return build_environment(**options)


def probe_here_or_image(
    *, image: str | None = None, gpus: str = "auto", progress: Callable[[str], None] | None = None,
    **options: Any,
) -> ProbeResult | ImageProbe:
    """`envpin probe`: this machine, or with image= a throwaway container of that image (GPUs per `gpus`).

    The self-test (selftest None) is opt-in on this machine and the default in a container, as in every
    image the probe runs in."""
    if image is None:
        if options.get("quick") and not options.get("selftest"):
            raise UsageError("--quick shortens the self-test, which runs on this machine only with --selftest",
                             hint="add --selftest, or drop --quick")
        options["selftest"] = bool(options.get("selftest"))
        return probe_machine(**options)
    if options.get("json_file") or options.get("markdown") or options.get("with_tf"):
        raise UsageError("--image writes both reports into --out; --output, --markdown and --with-tf are for "
                         "probing this machine", hint="drop them, or give --out DIR")
    return probe_image(image, out=options.get("out"), gpus=gpus, selftest=options.get("selftest"),
                       quick=bool(options.get("quick")), anonymize=bool(options.get("anonymize")), progress=progress)


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


@dataclass(frozen=True)
class FleetReport:
    result: Any  # envpin.fleet.aggregate.FleetResult
    html: Path | None

    @property
    def exit_code(self) -> int:
        return int(self.result.exit_code)


def fleet_report(paths: list[Path], html: Path | None = None) -> FleetReport:
    """`envpin fleet report`: every node's report (files, folders, collected Kubernetes output) compared at
    once; with html= also the HTML page, written atomically."""
    from envpin.fleet import aggregate as fleet
    from envpin.fleet import inputs as fleetinput
    from envpin.fsutil import atomic_write, check_output_path

    if html is not None:
        check_output_path(html, "--html")
    entries = fleetinput.read(paths)
    result = fleet.aggregate([(e.name, e.item) for e in entries], [e.source for e in entries])
    if html is not None:
        atomic_write(html, fleet.html_bytes(result))
    return FleetReport(result, html)


@dataclass(frozen=True)
class FleetManifest:
    text: str
    written: Path | None
    warnings: list[str]


def fleet_manifest(
    *, kubernetes: bool, image: str | None = None, namespace: str = "default", out: Path | None = None,
    selftest: bool | None = None, quick: bool = False,
) -> FleetManifest:
    """`envpin fleet manifest --kubernetes`: the DaemonSet (and its payload ConfigMap) that probes every GPU
    node; written atomically to `out`, else returned for stdout. Warnings: an image not pinned by digest."""
    from envpin.environment.payload import payload
    from envpin.fleet import kubernetes as kube
    from envpin.fsutil import atomic_write, check_output_path

    if not kubernetes:
        raise UsageError("say which manifest to write: --kubernetes",
                         hint="envpin fleet manifest --kubernetes --image REGISTRY/REPOSITORY:TAG@sha256:...")
    if out is not None:
        check_output_path(out, "--out")
    warnings = []
    if image is None:
        image = _newest_ngc_image()
        warnings.append(f"no --image given: using {image}, the newest NGC TensorFlow image in the catalog")
    manifest = kube.render(image, namespace, payload(), selftest=selftest, quick=quick)
    if not manifest.pinned:
        warnings.append(f"{image} is not pinned by digest: nodes that pull it at different times may run "
                        "different images (add @sha256:..., e.g. from 'docker buildx imagetools inspect')")
    if out is not None:
        atomic_write(out, manifest.text.encode("utf-8"))
    return FleetManifest(manifest.text, out, warnings)


def _newest_ngc_image() -> str:
    """The newest tf2 image of the catalog, by digest when the catalog file records the one nvcr.io serves."""
    from envpin.environment.plan import _known_digest
    from envpin.knowledge import catalog

    entry = max((e for e in catalog.load().entries() if e.flavor.startswith("tf2")), key=lambda e: e.release)
    digest = _known_digest(entry, None)
    return f"{entry.image}@{digest}" if digest else entry.image


@dataclass(frozen=True)
class FleetProbe:
    """`envpin fleet probe --slurm`: where each node's report (or error) went, and the fleet comparison of
    them all (envpin.fleet.aggregate: the same classes, outliers and golden hashes as `fleet report`)."""

    job_id: str | None
    partition: str
    out: Path
    outcomes: list[Any]  # envpin.fleet.slurm.NodeOutcome, one per node, none dropped
    result: Any  # envpin.fleet.aggregate.FleetResult

    @property
    def exit_code(self) -> int:
        """0: every node probed and consistent; 1: a node failed or timed out, or a breaking difference."""
        return int(self.result.exit_code)


def probe_fleet(
    *, slurm: bool = False, nodes: int | None = None, partition: str | None = None, image: str | None = None,
    runtime: str | None = None, out: Path | None = None, timeout: int | None = None,
    slurm_args: list[str] | None = None, progress: Callable[[str], None] | None = None,
    selftest: bool | None = None, quick: bool = False,
) -> FleetProbe:
    """`envpin fleet probe --slurm`: the probe on every node (or `nodes` of them) of a Slurm partition,
    one report per node in `out` (./fleet-reports), compared by fingerprint."""
    from envpin.fleet import slurm as slurm_backend

    if not slurm:
        raise UsageError("fleet probe needs to know how to reach the nodes", hint="add --slurm")
    if runtime is not None and image is None:
        raise UsageError("--runtime chooses how --image runs", hint="add --image IMAGE, or drop --runtime")
    target = out or Path("fleet-reports")
    job_id, used, outcomes = slurm_backend.probe(
        target, nodes=nodes, partition=partition, image=image, runtime=runtime or "apptainer",
        timeout=slurm_backend.DEFAULT_TIMEOUT_S if timeout is None else timeout,
        slurm_args=slurm_args or (), progress=progress,
        probe_args=[*{True: ["--selftest"], False: ["--no-selftest"]}.get(selftest, []), *(["--quick"] * quick)],
    )
    return FleetProbe(job_id, used, target, list(outcomes), slurm_backend.fleet_result(outcomes))
