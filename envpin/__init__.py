"""envpin: pin, build, verify and share bit-reproducible TensorFlow environments on NVIDIA NGC images.

This module stays importable with the standard library alone (Python 3.6+): it is copied into every
image so that training scripts can ``import envpin; envpin.enable_determinism(seed=42)``.
"""

from envpin.portable.version import __version__ as __version__

#: Where envpin lives; its documentation is under docs/ there (audit rules link to their sections).
HOMEPAGE = "https://github.com/envpin/envpin"


TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Optional

    from envpin.probe.runtime import Report, Table


def enable_determinism(seed: int = 42, strict: bool = False, table: "Optional[Table]" = None) -> "Report":
    """Apply the determinism recipe for the TensorFlow found at run time (see envpin.probe.runtime)."""
    from envpin.probe.runtime import enable_determinism as _enable

    return _enable(seed=seed, strict=strict, table=table)


if TYPE_CHECKING:
    from typing import Any

    from envpin.probe.track import Run


def track(
    seed: "Optional[int]" = None,
    *,
    strict: "Optional[bool]" = None,
    lock: "Optional[str]" = None,
    report: "Optional[str]" = None,
    mlflow: "Any" = None,
    tensorboard: "Optional[str]" = None,
    wandb: "Any" = None,
) -> "Run":
    """Start a tracked run: log the environment's fingerprint, the lock, the device class, the recipe and the
    seed to MLflow, TensorBoard and W&B (see envpin.probe.track and envpin.probe.trackers); call
    ``run.finish(model)`` at the end. strict=True (or ENVPIN_STRICT=1) raises envpin.probe.track.DriftError
    before anything is logged when the environment differs from the lock in a breaking field."""
    from envpin.probe.track import start
    from envpin.probe.trackers import writers_for

    writers, skipped = writers_for(mlflow=mlflow, tensorboard=tensorboard, wandb=wandb)
    return start(seed=seed, strict=strict, lock=lock, report=report, writers=writers, skipped=skipped)


def before_step(
    step: "Optional[int]" = None, *, model: "Any" = None, optimizer: "Any" = None, iterator: "Any" = None
) -> None:
    """A custom training loop's step is about to begin, `step` steps done (default: the optimizer's
    iterations). Under ``envpin resume-check`` the run hook records the training state here (the model's
    variables, the optimizer's, the tf.data `iterator`'s state, the random generators) and may end the
    process here, as a preempted job would end; anywhere else this does nothing. Call it at the top of each
    step, after the previous step's checkpoint was saved and before the step takes its batch (docs/runs.md)."""
    import sys

    hook = getattr(sys.modules.get("sitecustomize"), "before_step", None)
    if hook is not None and getattr(hook, "__module__", None) == "sitecustomize":
        hook(step, model=model, optimizer=optimizer, iterator=iterator)
