"""The container engines behind one interface, and the one place where `--engine auto` is decided.

An engine builds an environment folder into an image, says whether an image is there, and reads an
image's layers. Docker (envpin.image.docker) and podman (envpin.image.podman) are the two; only podman's
images are bit-identical across machines (docs/reproducible.md), and the build treats the two kinds
differently by that property alone, never by an engine's name.

Adding an engine: its module with a class that satisfies `Engine` (and `ReproducibleEngine` if its images
are bit-identical), and one entry in `ENGINES`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from envpin.errors import EngineError, UsageError, param, shown
from envpin.image.model import BuildContext, BuildOutcome, ImageFacts
from envpin.record import ProgressCallback, Value

if TYPE_CHECKING:
    from envpin.environment.lockfile import Lock

#: Default for --engine (CI and build hosts that should always use podman).
ENGINE_ENV = "ENVPIN_ENGINE"
AUTO = "auto"
#: When `auto` finds no engine at all.
NO_ENGINE_HINT = "start Docker (`bash scripts/services.sh start`) or install podman (`apt-get install podman`)"


@runtime_checkable
class Engine(Protocol):
    """What envpin needs of a container engine: build, find and read images. Opened engines only (the
    engine answered); `close` gives back what opening took."""

    @property
    def name(self) -> str:
        """'docker', 'podman': the key of machine-local build records and what results say was used."""
        ...

    @property
    def bit_identical(self) -> bool:
        """Whether the same context on the same base gives the same image ID on every machine (what the lock's
        [image] records and `build --check` confirms)."""
        ...

    def build(
        self,
        context: BuildContext,
        tag: str,
        log_path: Path,
        *,
        no_cache: bool = False,
        pull: bool = False,
        progress: ProgressCallback | None = None,
    ) -> BuildOutcome:
        """Build and tag the image, streaming the log to `log_path`; EngineError (step, log tail) on failure."""
        ...

    def exists(self, image: str) -> bool:
        """Whether the engine still holds `image` (ID or tag): an up-to-date build needs its image."""
        ...

    def inspect(self, image: str) -> ImageFacts:
        """The image's ID and layers, and the step behind each layer where the engine records it."""
        ...

    def close(self) -> None:
        """Release the connection (no-op for a daemonless engine)."""
        ...


@runtime_checkable
class ReproducibleEngine(Engine, Protocol):
    """What only an engine with bit-identical images does: name what its image IDs depend on, and build in an
    empty store (`build --check`), where no cached layer can stand in for a rebuilt one."""

    def version(self) -> str:
        """e.g. 'podman 4.3.1': the lock records it, because the engine stamps its version into the image."""
        ...

    def storage_driver(self) -> str:
        """e.g. 'overlay': the lock records it, because RUN layers differ between drivers."""
        ...

    def scratch(self, under: Path) -> AbstractContextManager[ReproducibleEngine]:
        """The same engine over a fresh, empty store under `under`, removed afterwards."""
        ...


def _docker() -> Engine:
    from envpin.image.docker import DockerEngine

    return DockerEngine.open()


def _podman() -> Engine:
    from envpin.image.podman import PodmanEngine

    return PodmanEngine.open()


#: Every engine by name, each with its opener (EngineError, with a hint, when the engine cannot be used
#: here), in the order `auto` tries them.
ENGINES: dict[str, Callable[[], Engine]] = {"docker": _docker, "podman": _podman}


@dataclass(frozen=True, slots=True)
class LockedEngine(Value):
    """The engine a lock says it was built with, and the sentence that says how it says so."""

    name: str
    why: str


def lock_engine(
    locked: Lock | None, origin: str = "envpin.lock", engines: Mapping[str, Callable[[], Engine]] | None = None
) -> LockedEngine | None:
    """Which engine built `locked`, as far as the lock can tell (it holds nothing machine-local):

    - it records an image ([image]: only a bit-identical engine's images are recorded) -> that image's engine;
    - it pins a base digest and records no image -> auto's first engine (Docker), whose images stay machine-local;
    - neither (only rendered, never built) -> None: any engine may build it first."""
    first = next(iter(ENGINES if engines is None else engines))
    if locked is None:
        return None
    if locked.image is not None:
        name = locked.image.engine.split()[0]
        return LockedEngine(name, f"{origin} records an image built with {locked.image.engine}")
    if locked.base.digest is not None:
        return LockedEngine(
            first,
            f"{origin} pins its base and records no reproducible image (its builds are "
            f"{first}'s, kept on each machine)",
        )
    return None


@dataclass(frozen=True, slots=True)
class ChosenEngine(Value):
    """The engine to use, and why `auto` did not take the first one: a caller says that, so the engine never
    changes silently (the CLI prints it on stderr)."""

    engine: Engine
    fallback: str | None = None


def resolve_engine(
    requested: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    engines: Mapping[str, Callable[[], Engine]] | None = None,
    locked: LockedEngine | None = None,
) -> ChosenEngine:
    """The opened engine for 'auto', 'docker' or 'podman' (None: $ENVPIN_ENGINE, else auto), before any
    registry request or write, so that a missing engine is said first.

    auto takes the engine `locked` names (what the folder's lock was built with, `lock_engine`) and refuses
    when that one does not answer: a lock's builds never change engine behind the user's back. Without a
    lock that says, auto takes the first engine of `engines` that opens (Docker when its daemon answers,
    else podman), and a fallback is said in the result."""
    engines = ENGINES if engines is None else engines
    env = os.environ if environ is None else environ
    choice = requested or env.get(ENGINE_ENV) or AUTO
    names = [AUTO, *engines]
    if choice not in names:
        raise UsageError(
            f"unknown engine '{shown(choice)}'", hint=f"use {param('engine')} {', '.join(names[:-1])} or {names[-1]}"
        )
    if choice != AUTO:
        return ChosenEngine(engines[choice]())
    if locked is not None and locked.name in engines:
        others = " or ".join(f"{param('engine')} {n}" for n in engines if n != locked.name)
        try:
            engine = engines[locked.name]()
        except EngineError as exc:
            raise EngineError(
                f"{locked.why}, and {locked.name} does not answer here: {exc.message}; auto does not switch "
                "engines for a built lock",
                hint=f"{exc.hint or f'make {locked.name} answer'}; or build with another engine on purpose: {others}"
                if others
                else exc.hint,
            ) from exc
        first = next(iter(engines))
        return ChosenEngine(
            engine, None if locked.name == first else f"engine auto chose {locked.name}, because {locked.why}"
        )
    refused: list[tuple[str, EngineError]] = []
    for name, opener in engines.items():
        try:
            engine = opener()
        except EngineError as exc:
            refused.append((name, exc))
            continue
        if not refused:
            return ChosenEngine(engine)
        why = "; ".join(f"{skipped}: {exc.message}" for skipped, exc in refused)
        return ChosenEngine(engine, f"engine auto chose {name}, because {why}")
    why_not = refused[0][1] if refused else EngineError("no engine is known")
    raise EngineError(f"no container engine answers: {why_not.message}", hint=NO_ENGINE_HINT) from why_not
