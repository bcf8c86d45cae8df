"""`envpin lock`: requirements.in resolved and locked for an image, and `lock --check` of envpin.lock files.
A module of its own (the command's options are envpin/cli/environment.py's, its views envpin/views/environment.py's)
so that `envpin recipe` and `render`, which import envpin.api.environment, do not create these five dataclasses
(about 2.3 ms of a recipe's start-up; docs/cli.md, "Start-up")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envpin.record import Value


@dataclass(frozen=True, slots=True)
class LockResult(Value):
    out: Path
    image: str
    python: str
    base_count: int
    locked: tuple[str, ...]
    #: "image" (pip inside a container of the image) or "host" (uv, for the image's Python and tags).
    resolver: str = "image"
    exit_code: int = 0
    #: The upload-time cut-off the resolution ran with (UTC), or None.
    exclude_newer: str | None = None
    #: Whether the cut-off came from the lock being rewritten (a re-lock keeps it) rather than from the caller.
    cutoff_kept: bool = False
    #: pylock.toml written beside the lock, when asked for.
    pylock: Path | None = None


def lock_requirements(
    source: Path,
    *,
    ngc: str | None = None,
    tf: str | None = None,
    base_image: str | None = None,
    out: Path | None = None,
    resolver: str = "auto",
    stock: str | None = None,
    exclude_newer: str | None = None,
    pylock: bool = False,
) -> LockResult:
    """Resolve requirements.in for the target image and write requirements.lock with hashes. resolver: auto
    (inside the image when its Python is 3.7+, on the host for 3.6), image or host (envpin.environment.resolve).

    exclude_newer: only files uploaded before this date ('2024-03-01': 00:00 UTC) or UTC time are candidates,
    and the lock records it; None keeps the cut-off the lock being rewritten records (none for a new lock),
    'none' drops it. pylock: write pylock.toml (PEP 751) beside the lock, with the same files and hashes."""
    from envpin.api.environment import _need_base as need_base
    from envpin.environment import resolve
    from envpin.environment.plan import make_plan
    from envpin.files.read import read_regular
    from envpin.files.write import atomic_write, check_output_file
    from envpin.image.docker import DockerEngine

    if out is not None:
        check_output_file(out, "out")
    cut = resolve.cutoff(exclude_newer) if exclude_newer is not None else None
    need_base("lock", ngc, stock, tf)
    plan = make_plan(ngc=ngc, stock=stock, tf=tf, base_image=base_image)  # the image named, before any file is read
    text = resolve.read_requirements_in(source)
    image = plan.build_from or plan.image
    target = out or source.with_name("requirements.lock")
    kept = False
    if exclude_newer is None and target.is_file():
        try:
            cut = resolve.recorded_cutoff(read_regular(target, 16 << 20).decode("utf-8", "replace"))
        except OSError:
            cut = None
        kept = cut is not None
    # Docker only (resolution may run containers of the image); not pinged: its first request, for the image's
    # ID, says whether it answers, and the SDK is opened only when a container runs.
    engine = DockerEngine()
    try:
        res = resolve.resolve(engine, image, text, resolver, cut)
    finally:
        engine.close()
    body = resolve.lock_text(res, image, source, text)
    pylock_path = target.with_name("pylock.toml") if pylock else None
    pylock_body = resolve.pylock_text(res, image, body) if pylock else None  # both made before either is written
    atomic_write(target, body.encode(), make_parents=False)
    if pylock_path is not None and pylock_body is not None:
        atomic_write(pylock_path, pylock_body.encode(), make_parents=False)
    return LockResult(
        target,
        image,
        res.facts.python,
        len(res.facts.dists),
        tuple(f"{r.name}=={r.version}" for r in res.locked),
        res.where,
        exclude_newer=cut,
        cutoff_kept=kept,
        pylock=pylock_path,
    )


def check_lock(lock_path: Path) -> list[str]:
    """Why the lock is wrong or stale against its inputs (catalog, recipes, envpin, payload, folder); [] if
    current. Fields the inputs do not produce come first (a re-signed edit of [inputs], [base], [recipe] or
    [files]), then what is stale, each problem once."""
    from envpin.environment import lockfile
    from envpin.environment.render import lock_files

    locked = lockfile.read(lock_path)
    plan = lockfile.plan_of(locked, lock_path.parent)
    fresh = lock_files(locked, plan)
    wrong = locked.disagreements(plan, fresh)
    named = {line.split(" ", 1)[0].removeprefix("files.") for line in wrong if line.startswith("files.")}
    stale = locked.stale_against(plan, fresh, lock_path.parent)
    return wrong + [
        p for p in stale if not (wrong and p.startswith("inputs hash ")) and p.split(":", 1)[0] not in named
    ]


@dataclass(frozen=True, slots=True)
class LockCheck(Value):
    path: Path
    problems: list[str]
    #: What a re-lock of a requirements lock without its cut-off would change (not a problem: what it holds back).
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0


@dataclass(frozen=True, slots=True)
class LockChecks(Value):
    """`envpin lock --check` over one or more locks."""

    checks: list[LockCheck]

    @property
    def exit_code(self) -> int:
        return max((c.exit_code for c in self.checks), default=0)


def check_lock_file(lock: Path | None = None) -> LockChecks:
    """`envpin lock --check`: --lock, else ./envpin.lock, else every images/*/envpin.lock (what a pre-commit hook
    or CI job wants: one command for all environments of a repository), each checked for staleness. `lock` may
    name a requirements lock instead. A requirements lock with a cut-off (the one named, or the one beside an
    envpin.lock) is re-resolved without it, and the check notes what that would change."""
    from envpin.environment import render
    from envpin.environment.lockfile import LOCK_NAME

    if lock is not None and lock.is_file() and lock.name != LOCK_NAME:
        return LockChecks([LockCheck(lock, [], tuple(_cutoff_notes(lock)))])
    checks = []
    for path in render.find_all(lock):
        beside = path.parent / "requirements.lock"
        checks.append(LockCheck(path, check_lock(path), tuple(_cutoff_notes(beside)) if beside.is_file() else ()))
    return LockChecks(checks)


def _cutoff_notes(path: Path) -> list[str]:
    """resolve.cutoff_drift for one requirements lock: Docker and the index only for a lock with a cut-off."""
    from envpin.environment import resolve
    from envpin.environment.requirements import read_text
    from envpin.errors import EnvpinError
    from envpin.image.docker import DockerEngine

    if resolve.recorded_cutoff(read_text(path)) is None:
        return []
    engine = DockerEngine()
    try:
        return resolve.cutoff_drift(engine, path)
    except EnvpinError as exc:
        return [f"{path}: not re-locked without its cut-off: {exc}"]
    finally:
        engine.close()


@dataclass(frozen=True, slots=True)
class LockRequest(Value):
    """`envpin lock REQUIREMENTS_IN --ngc R`: lock requirements.in for the image of that release."""

    requirements_in: Path
    ngc: str | None
    tf: str | None = None
    base_image: str | None = None
    out: Path | None = None
    #: auto, image or host (envpin.environment.resolve).
    resolver: str = "auto"
    #: A stock TensorFlow GPU image instead of an NGC one (--stock).
    stock: str | None = None
    #: Upload-time cut-off (a date or UTC time; 'none' drops a recorded one; None keeps what the lock records).
    exclude_newer: str | None = None
    #: Write pylock.toml (PEP 751) beside the lock too.
    pylock: bool = False


@dataclass(frozen=True, slots=True)
class LockCheckRequest(Value):
    """`envpin lock --check`: test envpin.lock (`lock`, else ./envpin.lock, else every images/*/envpin.lock)."""

    lock: Path | None = None


def lock_or_check(request: LockRequest | LockCheckRequest) -> LockResult | LockChecks:
    """`envpin lock`: lock requirements.in for the image, or for a LockCheckRequest test envpin.lock."""
    if isinstance(request, LockCheckRequest):
        return check_lock_file(request.lock)
    return lock_requirements(
        request.requirements_in,
        ngc=request.ngc,
        tf=request.tf,
        base_image=request.base_image,
        out=request.out,
        resolver=request.resolver,
        stock=request.stock,
        exclude_newer=request.exclude_newer,
        pylock=request.pylock,
    )
