"""`envpin recipe`, `render`, `build`: from command-line inputs to an environment folder and an image. Thin
entry points: the build itself is envpin.image.build, the engines envpin.image.engine. `envpin lock` is
envpin.api.lock, so that a recipe or a render does not create the lock's five result and request classes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, overload

from envpin.errors import RecipeError, UsageError, param
from envpin.record import Value

if TYPE_CHECKING:
    from envpin.environment.plan import BuildPlan
    from envpin.image.build import BuildResult
    from envpin.knowledge.catalog import Entry
    from envpin.knowledge.recipes import Distributed, Recipe
    from envpin.knowledge.sync import ImageRead
    from envpin.record import ProgressCallback

DEFAULT_IMAGES_DIR = Path("images")


@dataclass(frozen=True, slots=True)
class RecipeResult(Value):
    """`envpin recipe`: the image, its recipe, and the distributed recipe for its TensorFlow when asked for. With
    no image (`--tf` alone, a TensorFlow no stock image in the catalog holds): the table's recipe for a stock
    build of that TensorFlow, and the NGC releases that ship it."""

    entry: Entry | None
    recipe: Recipe
    distributed: Distributed | None = None
    #: With no image: the NGC releases (YY.MM) with a tag of this TensorFlow, oldest first.
    ngc_releases: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """What `envpin recipe --json` prints: the tag (null with no image, then `ngc_releases` too), the recipe's
        hash and entries, and the distributed recipe (its hash and entries) when asked for."""
        out: dict[str, object] = {
            "tag": self.entry.tag if self.entry is not None else None,
            "hash": self.recipe.hash,
            **self.recipe.to_dict(),
        }
        if self.entry is None:
            out["ngc_releases"] = list(self.ngc_releases)
        if self.distributed is not None:
            out["distributed"] = {"hash": self.distributed.hash, **self.distributed.to_dict()}
        return out


def recipe_for(ngc: str | None, tf: str | None, stock: str | None = None, distributed: bool = False) -> RecipeResult:
    """The recipe of an NGC image (`ngc`), or of a stock TensorFlow GPU image (`stock`, or `tf` alone); with
    `distributed`, also the distributed recipe for its TensorFlow (NCCL, Horovod, tf.distribute)."""
    from envpin.environment.plan import make_plan

    _need_base("recipe", ngc, stock, tf)
    if ngc is None and stock is None and tf is not None:
        table_only = _table_recipe(tf, distributed)
        if table_only is not None:
            return table_only
    plan = make_plan(ngc=ngc, stock=stock, tf=tf, distributed=distributed)
    return RecipeResult(plan.entry, plan.recipe, plan.distributed)


def _table_recipe(tf: str, distributed: bool) -> RecipeResult | None:
    """`recipe --tf X.Y` for a TensorFlow no stock image in the catalog holds (2.17, 1.15): the recipe table
    still covers stock builds of it, so that row, with the NGC releases that ship it; None when a stock image
    holds it (the image's recipe is the answer)."""
    from envpin.environment.plan import ngc_releases
    from envpin.knowledge import recipes
    from envpin.knowledge import stock as stock_table
    from envpin.knowledge.versions import parse_tf_spec

    spec = parse_tf_spec(tf)
    if stock_table.load().filtered(spec):
        return None
    try:
        recipe = recipes.select(spec.text, "stock")
    except RecipeError as exc:
        covered = [r.get("match", {}) for r in recipes.rows() if r["match"]["distribution"] == "stock"]
        low = min((m["tf_min"] for m in covered), key=_version_key)
        high = max((m["tf_max"] for m in covered if m["tf_max"]), key=_version_key)
        raise UsageError(
            exc.message, hint=exc.hint or f"the recipe table covers stock TensorFlow {low} to {high}"
        ) from None
    extra = recipes.distributed(spec.text) if distributed else None
    return RecipeResult(None, recipe, extra, ngc_releases(spec))


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _need_base(command: str, ngc: str | None, stock: str | None, tf: str | None) -> None:
    """A command that needs an image: `ngc`, `stock`, or `tf` alone (the stock image of that TensorFlow)."""
    if ngc is None and stock is None and tf is None:  # one given, even empty, is checked as what it is
        raise UsageError(
            f"{command} needs {param('ngc')} RELEASE, or {param('stock')} TAG / {param('tf')} VERSION for a stock "
            "TensorFlow GPU image",
            hint=f"e.g. {param('ngc', command=command)} 20.02 {param('tf')} 2.1, or "
            f"{param('tf', command=command)} 2.20",
        )


@dataclass(frozen=True, slots=True)
class RenderResult(Value):
    plan: BuildPlan
    out: Path
    files: dict[str, bytes]
    #: What was read on the way (e.g. the TensorFlow version from the image config), for stderr.
    notes: tuple[str, ...] = ()
    #: The output formats rendered (docker, apptainer).
    formats: tuple[str, ...] = ("docker",)


@dataclass(frozen=True, slots=True)
class EnvironmentInputs(Value):
    """What the user says about an environment on the command line (render, build, build --dry-run).

    With no ngc, stock or tf, everything comes from a lock: `lock`, else the one `find_lock` finds; with no ngc
    but stock or tf, the base is Docker Hub's stock TensorFlow GPU image (envpin.knowledge.stock)."""

    ngc: str | None = None
    tf: str | None = None
    stock: str | None = None
    requirements: Path | None = None
    base_image: str | None = None
    ca_bundle: Path | None = None
    name: str | None = None
    out: Path | None = None
    lock: Path | None = None
    #: Bake the distributed recipe in beside the base recipe (NCCL, Horovod); None: as the folder's lock records.
    distributed: bool | None = None

    def __post_init__(self) -> None:
        """`lock` names the image as `ngc`, `stock` and `tf` do: given together, one of them would be ignored; and
        a build from the lock takes whether it is distributed from the lock, so `distributed` cannot go with it."""
        named = next((param(k) for k in ("ngc", "stock", "tf") if getattr(self, k) is not None), None)
        if self.lock is not None and named is not None:
            lock = param("lock")
            raise UsageError(
                f"give {lock} or {named}, not both: each names the image to build",
                hint=f"{lock} builds everything from the lock; {named} renders anew (without {lock})",
            )
        if self.distributed is not None and named is None:
            dist = param("distributed")
            raise UsageError(
                f"{dist} says what a new render bakes in; a build from the lock takes it from the lock "
                "(its [distributed] table), so it cannot change it",
                hint=f"name the image to render it anew with or without the distributed recipe, e.g. "
                f"{param('ngc')} RELEASE {dist}, or build from the lock as it is",
            )

    @property
    def from_lock(self) -> bool:
        """No image named: everything comes from the lock."""
        return self.ngc is None and self.stock is None and self.tf is None


def _plan_and_target(
    inputs: EnvironmentInputs, notes: list[str] | None = None, keep: bool = True
) -> tuple[BuildPlan, Path]:
    """The plan for command-line inputs and the folder it goes to (default images/<name>); with no --ngc,
    everything comes from the lock (found as `find_lock` finds it).

    When no source gives the tag's TensorFlow version and --tf is not given, the image config is read from
    the registry (--base-image, else the upstream tag): two small requests instead of a question. What was
    read goes to `notes`, and (keep=True) into the image-facts cache when the image names this very tag."""
    from envpin.environment.plan import UnknownTF, make_plan, release_version, validate_name

    if inputs.from_lock:
        return plan_from_lock(_build_lock(inputs.lock))
    if inputs.name is not None:
        validate_name(inputs.name)  # before any catalog look-up: a bad name is reported first

    ngc = inputs.ngc
    try:
        plan = make_plan(
            ngc=ngc,
            stock=inputs.stock,
            tf=inputs.tf,
            name=inputs.name,
            requirements=inputs.requirements,
            base_image=inputs.base_image,
            ca_bundle=inputs.ca_bundle,
            distributed=bool(inputs.distributed),
        )
    except UnknownTF as unknown:
        from envpin.knowledge import imageconfig

        got = _read_unknown_tf(
            unknown.entry, inputs.tf, inputs.base_image, inputs.ca_bundle, notes if notes is not None else [], keep
        )
        plan = make_plan(
            ngc=ngc,
            tf=release_version(got.declared["tf_version"]),
            name=inputs.name,
            requirements=inputs.requirements,
            base_image=inputs.base_image,
            ca_bundle=inputs.ca_bundle,
            tf_source="image",
            base_digest=got.digest,
            base_declared=imageconfig.version_env(got.env),
            distributed=bool(inputs.distributed),
        )
    if inputs.out is not None:
        from envpin.files.write import check_output_path

        check_output_path(inputs.out, "out")
    target = inputs.out if inputs.out is not None else DEFAULT_IMAGES_DIR / plan.name
    if inputs.distributed is None and plan.distributed is None:
        from envpin.environment.render import choose_distributed
        from envpin.knowledge import recipes

        if choose_distributed(None, target):  # a re-render keeps the distributed recipe the folder's lock records
            plan = plan.replace(distributed=recipes.distributed(plan.tf_version))
    return plan, target


def _read_unknown_tf(
    entry: Entry, tf: str | None, base_image: str | None, ca_bundle: Path | None, notes: list[str], keep: bool
) -> ImageRead:
    """The image config of `entry` (or of the mirror that stands for it), which must declare its TensorFlow."""
    from envpin.environment.plan import release_version, validate_image_ref
    from envpin.errors import RegistryError
    from envpin.knowledge import catalog, facts, imageconfig, sync

    ref = validate_image_ref(base_image) if base_image is not None else entry.image
    what = f"the catalog does not know which TensorFlow {entry.tag} contains"
    try:
        got = sync.read_image(sync.registry_client(ca_bundle), ref)
    except RegistryError as exc:
        raise UsageError(
            f"{what}, and {ref}'s image config could not be read: {exc.message}",
            hint=f"give it as {param('tf')} MAJOR.MINOR, or read it from a mirror that holds the tag with "
            f"{param('base_image')} MIRROR/nvidia/tensorflow:TAG",
        ) from exc
    declared = got.declared.get("tf_version")
    if not declared:
        raise UsageError(
            f"{what}, and {ref}'s image config does not declare it (no ENV TENSORFLOW_VERSION)",
            hint=f"give it as {param('tf')} MAJOR.MINOR",
        )
    version = release_version(declared)
    if tf is not None and not (version + ".").startswith(tf.strip() + "."):
        raise UsageError(
            f"{param('tf')} {tf} does not match TensorFlow {declared}, which {ref} declares",
            hint=f"drop {param('tf')}, or build from an image that holds TensorFlow {tf}",
        )
    named = got.declared.get("nvidia_tensorflow_version")
    if named and imageconfig.compare_ngc_version(entry.tag, named) != imageconfig.AGREES:
        raise UsageError(
            f"{ref} declares it is NGC {named} (ENV NVIDIA_TENSORFLOW_VERSION), not {entry.tag}",
            hint=f"{param('base_image')} must be a copy of the tag named with {param('ngc')}",
        )
    note = f"read TensorFlow {declared} from the image config of {ref} ({got.digest[:19]}…)"
    if named and keep:
        cache = facts.save(catalog.load().repository, {entry.tag: got.image})
        note += f"; kept in {cache}"
    elif not named:
        note += "; not kept: the image does not name its NGC release (ENV NVIDIA_TENSORFLOW_VERSION)"
    notes.append(note)
    return got


def render_environment(
    *,
    ngc: str | None = None,
    tf: str | None = None,
    stock: str | None = None,
    requirements: Path | None = None,
    base_image: str | None = None,
    ca_bundle: Path | None = None,
    name: str | None = None,
    out: Path | None = None,
    force: bool = False,
    write: bool = True,
    formats: tuple[str, ...] | None = None,
    distributed: bool | None = None,
) -> RenderResult:
    """Resolve, render, and (unless write=False, as for a dry run) write the environment folder.

    formats: docker and/or apptainer; None keeps what the folder's lock records (docker for a new folder).
    distributed: bake the distributed recipe's variables in beside the base recipe (the plan and the lock record
    it, so a build or a check from the lock renders the same); None keeps what the folder's lock records."""
    from envpin.environment.render import (
        DEF_NAME,
        apptainer_from,
        choose_formats,
        parse_formats,
        render,
        write_environment,
    )

    _need_base("render", ngc, stock, tf)
    if formats is not None:
        formats = parse_formats(formats)  # a bad format is reported before any catalog look-up
    notes: list[str] = []
    inputs = EnvironmentInputs(
        ngc=ngc,
        tf=tf,
        stock=stock,
        requirements=requirements,
        base_image=base_image,
        ca_bundle=ca_bundle,
        name=name,
        out=out,
        distributed=distributed,
    )
    plan, target = _plan_and_target(inputs, notes, keep=write)
    chosen = choose_formats(formats, target)
    if "apptainer" in chosen and not apptainer_from(plan.from_ref)[1]:
        notes.append(
            f"{DEF_NAME}: {plan.from_ref} is not pinned by digest (none is known for it), so Apptainer "
            "pulls what the tag names on the day of the build; `envpin build` pins it, or give "
            f"{param('base_image')} REF@sha256:DIGEST"
        )
    files = render(plan, chosen)
    if write:
        write_environment(target, plan, files, force=force)
    return RenderResult(plan, target, files, tuple(notes), chosen)


def find_lock(explicit: Path | None = None) -> Path:
    """The lock a command acts on: `explicit` (a folder: its envpin.lock), else ./envpin.lock, else the only
    images/*/envpin.lock (envpin.environment.render.find_lock, the one rule; docs/lock.md)."""
    from envpin.environment import render

    return render.find_lock(explicit)


def _build_lock(explicit: Path | None) -> Path:
    """The lock a build without `ngc` works from (render.find_lock), said as a build says it: with no lock, what
    a build needs instead."""
    from envpin.environment import render

    ngc, tf = param("ngc"), param("tf")
    return render.find_lock(
        explicit,
        context=f"no {ngc} given and ",
        hint=f"pass {ngc} (and {tf}), {param('stock')} TAG or {tf} alone (a stock TensorFlow GPU image), or run "
        "from a checkout that holds images/<name>/envpin.lock",
    )


def build_formats(folder: Path) -> tuple[str, ...]:
    """What a build renders into `folder`: the Dockerfile it builds, and every other format the folder's lock
    records (an Apptainer definition stays, pinned to the same digest)."""
    from envpin.environment.render import FORMATS, choose_formats

    kept = choose_formats(None, folder)
    return tuple(name for name in FORMATS if name == "docker" or name in kept)


def plan_from_lock(lock_path: Path) -> tuple[BuildPlan, Path]:
    """The plan for building from a lock: its inputs re-derived, and the lock refused when it states
    something they do not produce, its [files] included (envpin.environment.render.checked_lock)."""
    from envpin.environment.render import checked_lock

    _, plan = checked_lock(lock_path)
    return plan, lock_path.parent


@dataclass(frozen=True, slots=True)
class BuildRequest(Value):
    """`envpin build`: the inputs, and how to build them."""

    inputs: EnvironmentInputs = EnvironmentInputs()
    force: bool = False
    no_cache: bool = False
    pull: bool = False
    #: Let the build rewrite a lock that already describes its inputs, or that it builds from: a base tag
    #: that now points elsewhere, a digest pinned for the first time, a bit-identical engine's image recorded.
    update: bool = False
    #: auto, docker or podman; None: $ENVPIN_ENGINE, else auto (envpin.image.engine.resolve_engine).
    engine: str | None = None
    #: Rebuild in a scratch store and compare with the lock's image (a bit-identical engine only).
    check: bool = False


@dataclass(frozen=True, slots=True)
class DryRunRequest(Value):
    """`envpin build`'s dry run: the plan a build would use; nothing is written and no engine is asked."""

    inputs: EnvironmentInputs = EnvironmentInputs()


@dataclass(frozen=True, slots=True)
class PlannedBuild(Value):
    """What `envpin build` would build: the plan, the folder and the files it would render there."""

    plan: BuildPlan
    out: Path
    files: tuple[str, ...]
    #: What was read on the way (e.g. the TensorFlow version from the image config), for stderr.
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """A plan is never a failure (bad inputs raise before there is one)."""
        return 0

    def to_json(self) -> dict[str, object]:
        """The plan's JSON plus inputs hash, folder and files (and notes, when there are any)."""
        out = {
            **self.plan.to_dict(),
            "inputs_hash": self.plan.inputs_hash,
            "out": str(self.out),
            "files": list(self.files),
        }
        return {**out, "notes": list(self.notes)} if self.notes else out


def build_environment(request: BuildRequest, progress: ProgressCallback | None = None) -> BuildResult:
    """Resolve the engine and the plan, then build (envpin.image.build): the base pinned by digest, the result
    kept machine-local, or with a bit-identical engine recorded in and confirmed against the lock.

    The engine is resolved before any registry request or write, so that a missing engine is said first;
    `auto` keeps the engine the folder's lock was built with (envpin.image.engine.lock_engine), and when it
    takes another than Docker the result's first note says why."""
    import time

    from envpin.image import build as building
    from envpin.image.engine import lock_engine, resolve_engine

    started = time.monotonic()
    inputs = request.inputs
    from_lock: tuple[BuildPlan, Path] | None = None
    if inputs.from_lock:  # the lock is read and re-derived first: a lock that cannot be used is said first
        from_lock = plan_from_lock(_build_lock(inputs.lock))
    folder = from_lock[1] if from_lock is not None else _target_folder(inputs)
    chosen = resolve_engine(
        request.engine, locked=lock_engine(building.previous_lock(folder), str(folder / "envpin.lock"))
    )
    try:
        if request.check:
            building.require_bit_identical(chosen.engine)
        notes = [chosen.fallback] if chosen.fallback else []
        plan, folder = from_lock if from_lock is not None else _plan_and_target(inputs, notes)
        ca_bundle = inputs.ca_bundle
        if inputs.from_lock:
            # Everything from the lock (the arrival workflow: `git clone`, then `envpin build`); the base
            # digest is resolved again and compared with the pinned one.
            ca_bundle = folder / "ca-bundle.crt" if plan.ca_bundle else None
            plan = replace(plan, base_digest=None)
        result = building.build(
            plan,
            folder,
            chosen.engine,
            formats=build_formats(folder),
            ca_bundle=ca_bundle,
            force=request.force,
            no_cache=request.no_cache,
            pull=request.pull,
            update=request.update,
            check=request.check,
            from_lock=inputs.from_lock,
            notes=notes,
            started=started,
            progress=progress,
        )
        if request.check:
            return result
        from envpin.evidence.write import after_build

        return after_build(result, chosen.engine)
    finally:
        chosen.engine.close()


def _target_folder(inputs: EnvironmentInputs) -> Path:
    """The folder `build --ngc` writes (--out, else images/<name>), found without asking a registry: the
    catalog names the default, even for a tag whose TensorFlow only the image config will say."""
    from envpin.environment.plan import UnknownTF, make_plan, validate_name

    if inputs.out is not None:
        return inputs.out
    if inputs.name is not None:
        return DEFAULT_IMAGES_DIR / validate_name(inputs.name)
    try:
        plan = make_plan(ngc=inputs.ngc, stock=inputs.stock, tf=inputs.tf, base_image=inputs.base_image)
    except UnknownTF as unknown:
        return DEFAULT_IMAGES_DIR / f"{unknown.entry.release}-{unknown.entry.flavor}"
    return DEFAULT_IMAGES_DIR / plan.name


def plan_build(inputs: EnvironmentInputs) -> PlannedBuild:
    """What `envpin build` would do with these inputs; writes nothing and asks no engine."""
    from envpin.environment.render import render

    notes: list[str] = []
    plan, folder = _plan_and_target(inputs, notes, keep=False)
    return PlannedBuild(plan, folder, tuple(sorted(render(plan, build_formats(folder)))), tuple(notes))


@overload
def build_or_plan(request: BuildRequest, progress: ProgressCallback | None = None) -> BuildResult: ...


@overload
def build_or_plan(request: DryRunRequest, progress: ProgressCallback | None = None) -> PlannedBuild: ...


def build_or_plan(
    request: BuildRequest | DryRunRequest, progress: ProgressCallback | None = None
) -> BuildResult | PlannedBuild:
    """`envpin build`: the build, or for a DryRunRequest only the plan it would build."""
    if isinstance(request, DryRunRequest):
        return plan_build(request.inputs)
    return build_environment(request, progress)
