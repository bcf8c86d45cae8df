"""Pure rendering (plan -> files), the one careful writer of environment folders, and the one rule for which
folder's lock a command acts on (find_lock, checked_lock)."""

from __future__ import annotations

import contextlib
import functools
import json
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

import jinja2

from envpin.environment import lockfile
from envpin.environment.payload import IMAGE_PATH, PAYLOAD_NAME, payload
from envpin.environment.plan import BuildPlan
from envpin.environment.requirements import render_lock
from envpin.errors import LockError, RenderError, UsageError, param, shown
from envpin.files.read import folder_files, sha256_file
from envpin.files.write import exclusive, replace_folder
from envpin.portable import imageref

GENERATED_MARK = "# envpin: generated from inputs "
#: The Apptainer (Singularity) definition file of an environment folder (docs/apptainer.md).
DEF_NAME = "envpin.def"
#: What each output format adds to the folder, beside what every format shares (plan.json, the payload,
#: requirements.lock and ca-bundle.crt when given); the first file names the format in a lock's [files].
FORMATS: dict[str, tuple[str, ...]] = {"docker": ("Dockerfile", ".dockerignore"), "apptainer": (DEF_NAME,)}
DEFAULT_FORMATS = ("docker",)


@functools.lru_cache(maxsize=4)
def template_env(package: str = "envpin.environment", autoescape: bool = False) -> jinja2.Environment:
    """The one way envpin loads templates: those in `package`'s templates/ folder, as package resources
    (envpin.environment: Dockerfile, Apptainer definition; envpin.fleet: Kubernetes manifest, HTML fleet
    report). StrictUndefined, so a missing value is an error, never an empty string.
    autoescape=True for HTML. One per process, so compiled templates are reused, and their compiled code is
    kept in envpin's cache folder for the next process (_bytecode_cache). Filters: `sh` (one POSIX shell word)
    and `q` (a JSON string, which YAML reads as a double-quoted scalar)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=autoescape,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_bytecode_cache(f"{package}{'-autoescape' if autoescape else ''}"),
    )
    env.filters["sh"] = shlex.quote  # one word for a POSIX shell, whatever the value holds
    env.filters["q"] = lambda v: json.dumps(str(v))  # nothing a value holds can change a YAML structure
    return env


class _Cache(jinja2.FileSystemBytecodeCache):
    """jinja2's compiled templates in a folder of their own; one that cannot be read or written is no cache
    (the template is compiled, the command goes on), and jinja2 recompiles a template whose source or jinja2
    or Python version is not the cached one's."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # a damaged or foreign file: compiled afresh, and replaced
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _bytecode_cache(name: str) -> jinja2.BytecodeCache | None:
    """Compiled templates kept in envpin's cache folder (envpin.knowledge.facts.cache_dir()/templates/NAME, one
    folder per template environment: jinja2 keys the code by the template alone), so that a command loads
    the code instead of compiling the template; None where the folder cannot be made."""
    from envpin.knowledge.facts import cache_dir

    folder = cache_dir() / "templates" / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _Cache(str(folder))


def _env() -> jinja2.Environment:
    return template_env()


def parse_formats(asked: Sequence[str]) -> tuple[str, ...]:
    """The output formats asked for, checked, once each, in FORMATS order."""
    unknown = [name for name in asked if name not in FORMATS]
    if unknown or not asked:
        given = param("formats")
        raise UsageError(
            f"'{shown(unknown[0] if unknown else '')}' is not an output format",
            hint=f"use {given} docker or {given} apptainer; repeat {given} for both",
        )
    return tuple(name for name in FORMATS if name in asked)


def choose_formats(asked: Sequence[str] | None, folder: Path) -> tuple[str, ...]:
    """The formats to render into `folder`: those asked for; else those its envpin.lock records (a re-render
    keeps what the folder holds); else Docker's."""
    if asked is not None:
        return parse_formats(asked)
    return formats_of(lockfile.recorded_files(folder / lockfile.LOCK_NAME))


def choose_distributed(asked: bool | None, folder: Path) -> bool:
    """Whether to bake the distributed recipe into `folder`: as asked; else as its envpin.lock records (a
    re-render keeps what the folder holds); else not."""
    if asked is not None:
        return asked
    return lockfile.recorded_distributed(folder / lockfile.LOCK_NAME)


def formats_of(files: Iterable[str]) -> tuple[str, ...]:
    """The formats whose files a lock's [files] lists (a lock always describes at least one: else Docker's)."""
    have = set(files)
    return tuple(name for name, names in FORMATS.items() if names[0] in have) or DEFAULT_FORMATS


def apptainer_from(ref: str) -> tuple[str, bool]:
    """(From: reference for Apptainer's docker bootstrap, whether it is pinned). A pinned reference keeps
    the digest alone: Apptainer's image library refuses one that carries a tag and a digest."""
    name, _tag, digest = imageref.split(ref)
    return (f"{name}@{digest}", True) if digest else (ref, False)


def render(plan: BuildPlan, formats: Sequence[str] = DEFAULT_FORMATS) -> dict[str, bytes]:
    """All files of the environment folder except envpin.lock, as bytes, keyed by relative path.

    The folder holds only what a reviewer should read plus the one payload artifact, so plain
    `docker build images/<name>` (or `apptainer build` there) works without envpin installed. Every
    format renders the same plan: the same base, recipe, payload, labels and build steps."""
    d = plan.to_dict()
    def_from, def_pinned = apptainer_from(plan.from_ref)
    ctx = {
        **d,
        "from_ref": plan.from_ref,
        "source_date_epoch": plan.source_date_epoch,
        "pip_compile": plan.pip_compiles_reproducibly,
        "inputs_hash": plan.inputs_hash,
        "recipe": plan.recipe,
        "recipe_hash": plan.recipe.hash,
        "ca_bundle": plan.ca_bundle is not None,
        "payload_name": PAYLOAD_NAME,
        "payload_path": IMAGE_PATH,
        "cuda": d["catalog"]["cuda"],
        "cudnn": d["catalog"]["cudnn"],
        "driver_min": d["catalog"]["driver_min"],
        "recipe_env": list(plan.recipe.env_dict().items()),
        "distributed": plan.distributed,
        "distributed_env": list(plan.distributed.env_dict().items()) if plan.distributed is not None else [],
        "distributed_vars": _distributed_vars(plan),
        "def_from": def_from,
        "def_pinned": def_pinned,
        "def_named": plan.from_ref.partition("@")[0],
        # What the image is built on, and what its one timestamp is, as the files say it.
        "base_title": f"{'stock' if plan.distribution == 'stock' else 'NGC'} TensorFlow {plan.entry.tag}",
        "epoch_what": "a fixed date" if plan.distribution == "stock" else "the release month",
    }
    env = _env()
    header = f"{GENERATED_MARK}{plan.inputs_hash}; do not edit, re-run `envpin render`.\n"
    files = {"plan.json": plan.canonical_json().encode()}
    if "docker" in formats:
        files["Dockerfile"] = env.get_template("Dockerfile.j2").render(**ctx).encode()
        files[".dockerignore"] = env.get_template("dockerignore.j2").render(**ctx).encode()
    if "apptainer" in formats:
        files[DEF_NAME] = env.get_template("envpin.def.j2").render(**ctx).encode()
    if plan.requirements:
        files["requirements.lock"] = render_lock(plan.requirements, header).encode()
    if plan.ca_bundle is not None:
        files["ca-bundle.crt"] = plan.ca_bundle
    files[PAYLOAD_NAME] = payload()
    return dict(sorted(files.items()))


def _distributed_vars(plan: BuildPlan) -> list[dict[str, str]]:
    """The distributed recipe's variables as the files comment them: name, value, why, which library versions
    read it (and whether the image's, as the catalog gives it, does) and the source's address."""
    dist = plan.distributed
    if dist is None:
        return []
    out = []
    for v in sorted(dist.records.env, key=lambda v: v.name):
        version = plan.entry.portable_value(v.library) if v.library in ("nccl", "horovod") else None
        reading = v.reading(version)
        unverified = f"; unverified: {v.unverified}" if v.unverified else ""
        out.append(
            {
                "name": v.name,
                "value": v.value or "",
                "why": v.why + (f" ({reading})" if reading else "") + unverified,
                "url": dist.source_url(v.source),
            }
        )
    return out


# --- the lock a command acts on -----------------------------------------------------------------------


#: Where `find_lock` looks when no lock is named: ./envpin.lock, then images/*/envpin.lock.
IMAGES_DIR = Path("images")


def create_hint() -> str:
    """The next step when there is no lock at all (commands that can do without one say theirs)."""
    return (
        f"create one with `{param('ngc', command='build')} RELEASE` (it writes images/<name>/envpin.lock), or "
        f"pass {param('lock')} PATH"
    )


def find_lock(explicit: Path | None = None, *, context: str = "", hint: str | None = None) -> Path:
    """The lock a command acts on; the one rule every command that reads a lock follows (docs/lock.md):
    `explicit` (a folder: its envpin.lock); else ./envpin.lock; else the only images/*/envpin.lock.

    Nothing found: UsageError '<context>no envpin.lock here or under images/' with the command's next step
    as `hint` (default create_hint()); several under images/: LockError naming them; `explicit` naming
    nothing: LockError that names the locks the rule would find, if any."""
    hint = create_hint() if hint is None else hint
    if explicit is not None:
        path = explicit / lockfile.LOCK_NAME if explicit.is_dir() else explicit
        if not path.exists() and not path.is_symlink():
            found = _found()
            where = (
                f"the {'lock' if len(found) == 1 else 'locks'} here: {', '.join(map(str, found))}" if found else hint
            )
            raise LockError(f"lock file {path} does not exist", hint=where)
        return path
    found = _found()
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(f"{context}no {lockfile.LOCK_NAME} here or under {IMAGES_DIR}/", hint=hint)
    raise LockError(
        f"several locks under {IMAGES_DIR}/: {', '.join(str(p) for p in found)}",
        hint=f"choose one with {param('lock')} {IMAGES_DIR}/<name>/{lockfile.LOCK_NAME}",
    )


def find_all(explicit: Path | None = None) -> list[Path]:
    """`find_lock`, except that several images/*/envpin.lock are all returned (`lock --check` checks them all)."""
    found = _found()
    return found if explicit is None and len(found) > 1 else [find_lock(explicit)]


def _found() -> list[Path]:
    """./envpin.lock alone when it exists, else every images/*/envpin.lock (sorted)."""
    here = Path(lockfile.LOCK_NAME)
    if here.is_file():
        return [here]
    return sorted(IMAGES_DIR.glob(f"*/{lockfile.LOCK_NAME}"))


def lock_files(locked: lockfile.Lock, plan: BuildPlan) -> dict[str, bytes]:
    """The files a lock's plan renders, in the formats its [files] lists: what that table must hash."""
    return render(plan, formats_of(locked.files))


def checked_lock(path: Path) -> tuple[lockfile.Lock, BuildPlan]:
    """Read a lock and refuse it when it states anything its inputs do not produce, [files] included
    (lockfile.read_checked with this module's rendering): what every command that acts on a lock reads."""
    return lockfile.read_checked(path, lock_files)


def check_folder(out: Path, files: dict[str, bytes], force: bool) -> list[str]:
    """Refuse to overwrite anything envpin did not write or that was edited since; returns stale paths."""
    if out.exists() and not out.is_dir():
        raise RenderError(f"{out} exists and is not a folder", hint=f"choose another {param('out')}")
    if out.resolve() == Path(out.resolve().anchor) or out.resolve() == Path.home().resolve():
        raise RenderError(
            f"{out} is a root or home folder, not an environment folder",
            hint=f"choose a folder of its own, e.g. {param('out')} images/<name>",
        )
    lock_path = out / lockfile.LOCK_NAME
    recorded: dict[str, str] = {}
    if lock_path.exists():
        try:
            recorded = lockfile.read(lock_path).files
        except LockError as exc:
            if not force:
                raise RenderError(
                    f"{lock_path} cannot be trusted ({exc.message})", hint=f"re-run with {param('force')} to overwrite"
                ) from exc
    if force:
        # Generated files that are no longer generated (e.g. an older envpin's copy of its sources) go,
        # but only those still exactly as envpin wrote them, even when the lock itself is not trusted.
        old = recorded or lockfile.recorded_files(lock_path)
        return [rel for rel in old if rel not in files and _unchanged(out, rel, old[rel])]
    known = {*files, *recorded, lockfile.LOCK_NAME, lockfile.SBOM_NAME}
    foreign = next((rel for rel in folder_files(out) if rel not in known), None) if out.is_dir() else None
    if foreign is not None:
        raise RenderError(
            f"{out / foreign} was not written by envpin",
            hint=f"an environment folder holds only generated files: move it away, or re-run with {param('force')} "
            "to write the generated files and leave it where it is",
        )
    for rel in files:
        path = out / rel
        if not path.exists():
            continue
        want = recorded.get(rel)
        if want is None:
            raise RenderError(
                f"{path} exists and was not generated by envpin", hint=f"move it away, or re-run with {param('force')}"
            )
        if sha256_file(path) != want:
            raise RenderError(
                f"{path} was edited by hand since envpin generated it",
                hint=f"put the change into the inputs, or re-run with {param('force')} to overwrite it",
            )
    stale = [rel for rel in recorded if rel not in files and (out / rel).exists()]
    for rel in stale:
        if not _unchanged(out, rel, recorded[rel]):
            raise RenderError(
                f"{out / rel} was edited by hand (or replaced by a link) since envpin generated it",
                hint=f"re-run with {param('force')} to replace the folder's generated files",
            )
    return stale


def write_environment(out: Path, plan: BuildPlan, files: dict[str, bytes], force: bool = False) -> Path:
    """Write the folder as one transaction: under the writers' lock, every check, then the whole new
    folder (files and lock) staged beside it and swapped in. With --force, files envpin did not write stay."""
    target = out.resolve() if out.is_symlink() else out  # a linked environment folder stays linked
    with exclusive(target):
        stale = check_folder(out, files, force)
        previous = None
        if (out / lockfile.LOCK_NAME).exists():
            try:
                previous = lockfile.read(out / lockfile.LOCK_NAME)
            except LockError:
                previous = None  # only reachable with --force: the broken lock is replaced
        lock_bytes = lockfile.Lock.from_plan(plan, files, previous).dumps()
        leave = {*files, lockfile.LOCK_NAME, *stale}
        keep = tuple(rel for rel in folder_files(target) if rel not in leave) if target.is_dir() else ()
        replace_folder(target, {**files, lockfile.LOCK_NAME: lock_bytes}, keep)
    return out


def _unchanged(out: Path, rel: str, digest: str) -> bool:
    """A regular file inside `out` (no symlink on the way out of it) that still has the recorded hash."""
    path = out / rel
    try:
        inside = path.resolve().is_relative_to(out.resolve()) and not path.is_symlink()
        return inside and path.is_file() and sha256_file(path) == digest
    except OSError:
        return False
