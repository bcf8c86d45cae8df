"""`envpin runs`: the environment diff between two tracked runs (envpin.track), read back from their tracker."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envpin.errors import UsageError, param
from envpin.record import Value

if TYPE_CHECKING:
    from envpin.reports.diff import Difference

#: An MLflow run id: 32 hexadecimal digits (what MLflow's stores generate).
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True, slots=True)
class TrackedRun(Value):
    """One side of `envpin runs`: where it was read (`source`, `kind`), its run record and probe report."""

    source: str
    kind: str
    record: dict[str, object]
    report: dict[str, object]

    @property
    def weights_hash(self) -> str | None:
        end = self.record.get("end")
        value = end.get("weights_hash") if isinstance(end, dict) else None
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class RunsDiff(Value):
    """The differences between two tracked runs' environments, classified as `envpin diff` classifies them."""

    diffs: list[Difference]
    a: TrackedRun
    b: TrackedRun
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        from envpin.reports import diff

        return diff.exit_code(self.diffs)


def diff_runs(a: str, b: str, tracking_uri: str | None = None) -> RunsDiff:
    """Compare the environments of two tracked runs: each an MLflow run id (read through the MLflow client at
    `tracking_uri`, default MLFLOW_TRACKING_URI), a TensorBoard log folder or a W&B (offline) run folder."""
    from envpin.reports import diff

    ra, rb = _read(a, tracking_uri), _read(b, tracking_uri)
    for side in (ra, rb):
        diff.check_report(side.report, f"the probe report of run {side.source}")
    notes = []
    if ra.weights_hash and rb.weights_hash:
        same = ra.weights_hash == rb.weights_hash
        notes.append(
            f"final weights: {'identical' if same else 'different'} ({ra.weights_hash[:19]}… / {rb.weights_hash[:19]}…)"
        )
    return RunsDiff(diff.diff_reports(ra.report, rb.report), ra, rb, notes)


def _read(source: str, tracking_uri: str | None) -> TrackedRun:
    from envpin.probe import trackers

    try:
        if os.path.isdir(source):
            if trackers.is_tensorboard(source):
                return TrackedRun(source, "tensorboard", *_need("tensorboard", trackers.read_tensorboard, source))
            if trackers.wandb_files(source) is not None:
                return TrackedRun(source, "wandb", *trackers.read_wandb(source))
            raise UsageError(
                f"{source} is neither a TensorBoard log folder of a tracked run nor a W&B run folder",
                hint="give the folder envpin.track(tensorboard=...) wrote, or a wandb/offline-run-* folder",
            )
        if _RUN_ID.match(source):
            uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
            if not uri:
                raise UsageError(
                    f"{source} looks like an MLflow run id, but no tracking server is named",
                    hint=f"add {param('tracking_uri')} URI (or set MLFLOW_TRACKING_URI)",
                )
            return TrackedRun(source, "mlflow", *_need("mlflow", trackers.read_mlflow, source, uri))
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot read the tracked run {source}: {exc}", hint="was it tracked with envpin.track?"
        ) from None
    raise UsageError(
        f"{source} is not a folder and not an MLflow run id (32 hexadecimal digits)",
        hint="give two MLflow run ids, TensorBoard log folders or W&B run folders",
    )


def _need(library: str, read: Any, *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from envpin.probe.trackers import available

    if not available(library):
        raise UsageError(
            f"reading {args[0]} needs the {library} package, which is not installed",
            hint="pip install 'envpin[track]'",
        )
    try:
        result: tuple[dict[str, Any], dict[str, Any]] = read(*args)
    except (OSError, ValueError):
        raise
    except Exception as exc:  # the tracker library's own errors (MlflowException: no such run, server down)
        raise UsageError(
            f"{library} could not read {args[0]}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            hint="check the run id and the tracking URI",
        ) from None
    return result
