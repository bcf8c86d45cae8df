"""What every engine takes and gives: a build context, a build outcome, the facts of an image.

Kept apart from envpin.image.engine (the interface and the choice of engine), so that the engines import
these types and the chooser imports the engines without either importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envpin.record import Value


@dataclass(frozen=True, slots=True)
class BuildContext(Value):
    """One environment to build, in both forms an engine may want.

    Docker builds the folder as written; podman builds `files` staged with fixed modes and mtimes, so
    that a checkout's umask or clock never reaches the image."""

    #: The environment folder, already written.
    folder: Path
    #: The rendered files by relative path (the bytes the folder holds).
    files: dict[str, bytes]
    #: SOURCE_DATE_EPOCH of the plan: the time a reproducible engine stamps on everything it writes.
    epoch: int


@dataclass(frozen=True, slots=True)
class BuildOutcome(Value):
    """What one engine build gave, whichever engine ran it."""

    image_id: str
    tag: str
    #: Every step after FROM came from the engine's cache.
    cached: bool
    seconds: float
    #: The full log (machine-local state, never the committed folder).
    log: Path
    #: Its last lines, as an error message would quote them.
    log_tail: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ImageFacts(Value):
    """What the lock records about an image and what --check compares: config digest and layers."""

    id: str
    layers: tuple[str, ...]
    #: The instruction that made each layer (base layers: "base image"); empty where the engine does not say.
    steps: tuple[str, ...] = ()


def first_difference(expected: tuple[str, ...], built: ImageFacts) -> str:
    """Where two images part: the first layer whose digest differs, with the step that made it."""
    for n, (want, got) in enumerate(zip(expected, built.layers, strict=False), start=1):
        if want != got:
            step = built.steps[n - 1] if n <= len(built.steps) else "step unknown"
            return f"layer {n} of {len(built.layers)} differs ({step}): expected {want[:19]}…, built {got[:19]}…"
    if len(expected) != len(built.layers):
        return f"the layers agree, but the lock has {len(expected)} and the build made {len(built.layers)}"
    return "every layer agrees; the image configs differ (labels, environment, history or engine stamps)"
