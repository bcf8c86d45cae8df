"""`envpin build` below the command line: pin the base by digest, render, build with the chosen engine, and
keep or confirm the result.

What is kept depends on the engine's one property that matters here, `bit_identical`: an engine whose image
IDs differ per machine (Docker) records its image in machine-local state only; a bit-identical one (podman)
records the image in the lock when the build writes the lock for new inputs (or with --update) and must
reproduce it afterwards (docs/reproducible.md). A lock that already describes the build is never rewritten
without --update (docs/build.md#when-a-build-writes-the-lock).
Nothing here prints: progress goes to the caller's callback, notes and warnings into the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from envpin.errors import UsageError, param
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from collections.abc import Sequence

    from envpin.environment.lockfile import Image, Lock
    from envpin.environment.plan import BuildPlan
    from envpin.image.buildstate import BuildRecord
    from envpin.image.engine import Engine, ReproducibleEngine
    from envpin.image.model import BuildContext, ImageFacts
    from envpin.record import ProgressCallback


@dataclass(frozen=True, slots=True)
class BuildResult(Value):
    """What `envpin build` did: the image, whether it was already there, and what the user should know."""

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

    def to_json(self) -> dict[str, object]:
        """What `envpin build --format json` prints: the image, how it came about, and the lock it belongs to."""
        from envpin.environment.lockfile import LOCK_NAME

        return {
            "tag": self.tag,
            "image_id": self.image_id,
            "engine": self.engine,
            "up_to_date": self.up_to_date,
            "seconds": round(self.seconds, 1),
            "out": str(self.out),
            "lock": str(self.out / LOCK_NAME),
            "inputs_hash": self.plan.inputs_hash,
            "from": self.plan.from_ref,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
            "problem": self.problem,
        }


def _reproducible(engine: Engine) -> ReproducibleEngine | None:
    """The engine as a bit-identical one, or None (Docker)."""
    from envpin.image.engine import ReproducibleEngine

    return engine if engine.bit_identical and isinstance(engine, ReproducibleEngine) else None


def require_bit_identical(engine: Engine) -> ReproducibleEngine:
    """A build's check compares image IDs, which only a bit-identical engine can reproduce."""
    reproducible = _reproducible(engine)
    if reproducible is None:
        raise UsageError(
            f"{param('check')} rebuilds with podman, the engine whose images are reproducible",
            hint=f"add {param('engine')} podman (Docker 20.10's classic builder stamps build times)",
        )
    return reproducible


def previous_lock(out: Path) -> Lock | None:
    """The lock already in the folder, if any and intact (a broken one is refused by render)."""
    from envpin.environment import lockfile
    from envpin.errors import LockError

    path = out / lockfile.LOCK_NAME
    if not path.exists():
        return None
    try:
        return lockfile.read(path)
    except LockError:
        return None


def check_base_moved(lock: Lock | None, ref: str, digest: str, update: bool) -> None:
    """NGC tags are re-pushed: a lock pins one digest, and a different one now is refused."""
    from envpin.errors import RegistryError

    pinned = lock.base.digest if lock else None
    if pinned and pinned != digest and not update:
        raise RegistryError(
            f"{ref} now points to {digest[:19]}…, but envpin.lock pins {pinned[:19]}…: the tag was re-pushed",
            hint=f"keep building the pinned image from a mirror, or accept the new base with {param('update')} and "
            "re-verify",
        )


def image_tag(plan: BuildPlan) -> str:
    """envpin/<name>:<inputs-hash-12>: other inputs, another tag, so a tag never names a stale image."""
    return f"envpin/{plan.name.lower()}:{plan.inputs_hash.split(':', 1)[1][:12]}"


def build(
    plan: BuildPlan,
    folder: Path,
    engine: Engine,
    *,
    formats: Sequence[str],
    ca_bundle: Path | None = None,
    force: bool = False,
    no_cache: bool = False,
    pull: bool = False,
    update: bool = False,
    check: bool = False,
    from_lock: bool = False,
    notes: Sequence[str] = (),
    started: float | None = None,
    progress: ProgressCallback | None = None,
) -> BuildResult:
    """Resolve the base digest, render `formats` with FROM pinned to it, build, and keep the result.

    The folder's lock is written only when this build makes it: no lock yet, or (with --ngc, `from_lock`
    False) inputs it does not describe, which is what `envpin render` would write. A lock that already
    describes these inputs, and any lock a build works from (`from_lock`), is never rewritten without
    `update`: not its base digest, not what the base declares, not a bit-identical engine's image; a build
    that would need to is refused (docs/build.md). The image ID and tag go to envpin.image.buildstate.
    check=True rebuilds in a scratch store and compares with the lock's image (a bit-identical engine only)."""
    from envpin.environment.render import render
    from envpin.image import basecheck
    from envpin.knowledge import imageconfig, sync

    started = time.monotonic() if started is None else started
    reproducible = require_bit_identical(engine) if check else _reproducible(engine)
    previous = previous_lock(folder)
    ref = plan.build_from or plan.image
    # The manifest gives the digest to pin; the config (one more small request) what the base declares.
    got = sync.read_image(sync.registry_client(ca_bundle), ref)
    check_base_moved(previous, ref, got.digest, update)
    declared = imageconfig.version_env(got.env)
    check_declared(previous, got.digest, declared, update, folder)
    warnings = basecheck.cross_check(plan, got)
    plan = replace(plan, base_digest=got.digest, base_declared=declared)
    keeps = from_lock or (previous is not None and previous.inputs_hash == plan.inputs_hash)
    if keeps and previous is not None and not update:
        # The lock stays as it is: what it records of the base is what this build records.
        plan = replace(plan, base_declared=dict(previous.base.declared) or None)
    files = render(plan, formats)
    if keeps and previous is not None and not check:  # --check writes nothing: it has nothing to refuse
        _refuse_rewrite(previous, plan, files, folder, update)
    job = _BuildJob(
        plan,
        folder,
        files,
        image_tag(plan),
        previous,
        force,
        no_cache,
        pull,
        started,
        progress,
        record=update or not keeps,
    )
    if reproducible is None:
        result = job.machine_local(engine)
    elif check:
        result = job.check(reproducible)
    else:
        result = job.reproducible(reproducible)
    return replace(result, notes=(*notes, *result.notes), warnings=tuple(warnings))


def check_declared(previous: Lock | None, digest: str, declared: dict[str, str], update: bool, folder: Path) -> None:
    """The lock's [base.declared] is re-derived whenever the image is at hand: what the config at the pinned
    digest declares now. A lock that says otherwise (an edit, re-signed) is refused unless --update, which
    records what the image declares."""
    from envpin.environment import lockfile
    from envpin.errors import LockError

    if previous is None or previous.base.digest != digest or update:
        return
    wrong = previous.declared_against(declared)
    if wrong:
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        raise LockError(
            f"{folder / lockfile.LOCK_NAME} does not match what its base declares: {wrong[0]}{more}",
            hint=f"restore it from git, or let `{param('update', command='build')}` record what the image declares "
            "(and review the lock's diff)",
        )


def _refuse_rewrite(previous: Lock, plan: BuildPlan, files: dict[str, bytes], folder: Path, update: bool) -> None:
    """A build never rewrites a lock that already describes its inputs, or that it builds from, unless
    --update: say what would change and stop before anything is built or written."""
    from envpin.environment import lockfile

    if update:
        return
    changes = previous.changes_to(lockfile.Lock.from_plan(plan, files, previous))
    if not changes:
        return
    path = folder / lockfile.LOCK_NAME
    more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
    given = param("update")
    raise UsageError(
        f"building would rewrite {path}: {changes[0]}{more}; a build changes a lock only with {given}",
        hint=f"add {given} to let this build rewrite it (then review and commit the lock's diff)",
    )


@dataclass(frozen=True, slots=True)
class _BuildJob(Value):
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
    progress: ProgressCallback | None
    #: Whether a bit-identical engine's image may be recorded in the lock: this build makes the lock (new
    #: folder, new inputs) or --update was given.
    record: bool = True

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _context(self) -> BuildContext:
        from envpin.image.model import BuildContext

        return BuildContext(self.target, self.files, self.plan.source_date_epoch)

    def _log(self, engine: Engine) -> Path:
        from envpin.image import buildstate

        return buildstate.log_path(self.plan.inputs_hash, engine.name)

    def _unchanged(self, engine: Engine) -> BuildRecord | None:
        """The state record when these inputs were already built here and the image is still there."""
        from envpin.image import buildstate

        recorded = buildstate.load(self.plan.inputs_hash, engine.name)
        if (
            self.previous is not None
            and self.previous.inputs_hash == self.plan.inputs_hash
            and recorded is not None
            and not (self.no_cache or self.pull)
            and engine.exists(recorded.image_id)
        ):
            return recorded
        return None

    def _keep_up_to_date_folder(self) -> None:
        """Still refuse a folder someone edited since; with --update, write what changed in the lock (what the
        base declares); otherwise the lock already says everything (build refused a lock it would change)."""
        from envpin.environment import lockfile
        from envpin.environment.render import check_folder, write_environment

        check_folder(self.target, self.files, self.force)
        if self.previous is not None and self.previous.changes_to(
            lockfile.Lock.from_plan(self.plan, self.files, self.previous)
        ):
            write_environment(self.target, self.plan, self.files, force=self.force)

    def _save(self, engine: Engine, image_id: str) -> None:
        from envpin.image import buildstate

        record = buildstate.BuildRecord(self.plan.inputs_hash, image_id, self.tag, self.plan.from_ref, engine.name)
        buildstate.save(record)

    def machine_local(self, engine: Engine) -> BuildResult:
        """An engine whose image IDs differ per machine: the image is recorded in machine-local state only."""
        from envpin.environment.render import write_environment

        notes: tuple[str, ...] = ()
        locked = self.previous.expected_image() if self.previous is not None else None
        if locked is not None:
            notes = (
                f"envpin.lock records the reproducible image {locked.id[:19]}… ({locked.engine}); Docker's "
                f"classic builder stamps build times, so confirm it with `{param('engine', command='build')} podman`",
            )
        recorded = self._unchanged(engine)
        if recorded is not None:
            self._keep_up_to_date_folder()
            return BuildResult(
                self.plan, self.target, recorded.image_id, recorded.tag, True, self._elapsed(), engine.name, notes
            )
        write_environment(self.target, self.plan, self.files, force=self.force)
        outcome = engine.build(
            self._context(), self.tag, self._log(engine), no_cache=self.no_cache, pull=self.pull, progress=self.progress
        )
        self._save(engine, outcome.image_id)
        return BuildResult(
            self.plan, self.target, outcome.image_id, self.tag, False, self._elapsed(), engine.name, notes
        )

    def reproducible(self, engine: ReproducibleEngine) -> BuildResult:
        """A bit-identical engine: record the image in the lock the first time, confirm it afterwards."""
        from envpin.environment import lockfile
        from envpin.environment.render import write_environment

        version = engine.version()
        recorded = self._unchanged(engine)
        if recorded is not None:
            self._keep_up_to_date_folder()
            facts = engine.inspect(recorded.image_id)
            built = lockfile.Image(facts.id, self.plan.inputs_hash, version, engine.storage_driver(), facts.layers)
            return self._settle(engine, built, facts, recorded.tag, up_to_date=True)
        write_environment(self.target, self.plan, self.files, force=self.force)
        outcome = engine.build(
            self._context(), self.tag, self._log(engine), no_cache=self.no_cache, pull=self.pull, progress=self.progress
        )
        facts = engine.inspect(outcome.image_id)
        built = lockfile.Image(facts.id, self.plan.inputs_hash, version, engine.storage_driver(), facts.layers)
        self._save(engine, facts.id)
        return self._settle(engine, built, facts, self.tag, up_to_date=False)

    def check(self, engine: ReproducibleEngine) -> BuildResult:
        """`build --check`: rebuild in an empty store, every layer anew, and compare with the lock's image."""
        from envpin.environment import lockfile
        from envpin.environment.render import check_folder
        from envpin.image import buildstate

        version = engine.version()
        locked = self.previous.image if self.previous is not None else None
        if locked is None:
            raise UsageError(
                f"{self.target / lockfile.LOCK_NAME} records no image to check against",
                hint=f"build it once with `{param('engine', command='build')} podman` and commit the lock",
            )
        check_folder(self.target, self.files, self.force)
        with engine.scratch(buildstate.state_dir() / engine.name) as scratch:
            outcome = scratch.build(
                self._context(), self.tag, self._log(engine), no_cache=True, pull=self.pull, progress=self.progress
            )
            facts = scratch.inspect(outcome.image_id)
            driver = scratch.storage_driver()
        built = lockfile.Image(facts.id, self.plan.inputs_hash, version, driver, facts.layers)
        return self._result(
            engine, facts.id, self.tag, False, version, compare_image(locked, built, facts), checked=True
        )

    def _settle(self, engine: Engine, built: Image, facts: ImageFacts, tag: str, *, up_to_date: bool) -> BuildResult:
        """Record the image in the lock the first time these inputs are built; afterwards, confirm it."""
        from envpin.environment import lockfile
        from envpin.files.write import exclusive

        lock_path = self.target / lockfile.LOCK_NAME
        with exclusive(self.target):  # read and record as one step against other envpin writers
            current = lockfile.read(lock_path)
            expected = current.expected_image()
            if expected is None and self.record:
                replace(current, image=built).write(lock_path)
        if expected is None:
            return self._result(
                engine,
                built.id,
                tag,
                up_to_date,
                built.engine,
                None,
                recorded_now=self.record,
                unrecorded=not self.record,
            )
        return self._result(engine, built.id, tag, up_to_date, built.engine, compare_image(expected, built, facts))

    def _result(
        self,
        engine: Engine,
        image_id: str,
        tag: str,
        up_to_date: bool,
        version: str,
        problem: str | None,
        *,
        recorded_now: bool = False,
        checked: bool = False,
        unrecorded: bool = False,
    ) -> BuildResult:
        lock_name = f"{self.target}/envpin.lock"
        if problem:
            notes: tuple[str, ...] = ()
        elif unrecorded:
            notes = (
                f"{lock_name} records no image for these inputs and was left as it is (a build changes a lock "
                f"only with {param('update')}): `{param('engine', command='build')} {engine.name} {param('update')}` "
                f"records {image_id} in it",
            )
        elif recorded_now:
            notes = (
                f"recorded image {image_id} ({version}) in {lock_name}: commit it, and every teammate's "
                f"{engine.name} build must reproduce it",
            )
        elif checked:
            notes = (f"reproduced {image_id} in a scratch store: the image {lock_name} records",)
        else:
            notes = (f"reproduced {image_id}: the image {lock_name} records",)
        return BuildResult(
            self.plan, self.target, image_id, tag, up_to_date, self._elapsed(), engine.name, notes, problem
        )


def compare_image(expected: Image, built: Image, facts: ImageFacts) -> str | None:
    """None when `built` is the image the lock records; else where and (as far as known) why it differs."""
    from envpin.image.model import first_difference

    if expected.id == built.id:
        return None
    why = [first_difference(expected.layers, facts)]
    if expected.inputs_hash != built.inputs_hash:
        why.append(
            f"the inputs changed since it was recorded ({expected.inputs_hash[:19]}… -> "
            f"{built.inputs_hash[:19]}…): a new image is expected; `{param('engine', command='build')} podman` "
            "records it"
        )
    if expected.engine != built.engine or expected.storage_driver != built.storage_driver:
        why.append(
            f"it was recorded with {expected.engine} on {expected.storage_driver} storage; this build used "
            f"{built.engine} on {built.storage_driver} (buildah stamps its version; overlay and vfs differ "
            "in RUN layers)"
        )
    return f"built {built.id[:19]}…, but envpin.lock records {expected.id[:19]}…: " + "; ".join(why)
