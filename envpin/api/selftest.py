"""`envpin selftest`: the determinism self-test in a chosen Python."""

from __future__ import annotations

from pathlib import Path

from envpin.errors import UsageError, param

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

    from envpin.record import ProgressCallback

#: The title of the self-test's progress events.
_SELFTEST_TITLE = "determinism self-test"


def _parts_reported(progress: ProgressCallback | None) -> Callable[[int, int, str], None] | None:
    """The standard-library self-test's count of finished parts (envpin.probe.selftest.run) as ProgressEvents."""
    if progress is None:
        return None
    from envpin.record import ProgressEvent

    def report(done: int, total: int, part: str) -> None:
        step = f"{part} finished" if part else "TensorFlow children running"
        progress(ProgressEvent(_SELFTEST_TITLE, step, completed=done, total=total, unit="parts"))

    return report


def _check_python(interpreter: str) -> None:
    """`python` must be a Python 3.6+ that starts: anything else is a usage error (exit 2), not a failed test."""
    import subprocess

    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        proc = subprocess.run([interpreter, "-c", code], capture_output=True, text=True, timeout=60)
        parts = tuple(int(p) for p in proc.stdout.strip().split(".")) if proc.returncode == 0 else ()
    except (OSError, ValueError, subprocess.TimeoutExpired):
        parts = ()
    if parts < (3, 6):
        raise UsageError(
            f"{interpreter} is not a Python 3.6 or later that runs",
            hint="pass the python executable of the environment that has TensorFlow",
        )


def _check_replicas(replicas: int | None) -> None:
    """The multi-replica self-test needs two replicas at least: one has nothing to all-reduce."""
    if replicas is not None and replicas < 2:
        raise UsageError(
            f"{param('replicas')} must be 2 or more (one replica has nothing to all-reduce), not {replicas}",
            hint="on GPUs give the number of visible GPUs; on a CPU, any count (the CPU is split)",
        )


def _check_timeout(timeout: float | None, selftest: bool) -> None:
    """A limit must be a positive number of seconds, and limits a self-test that runs."""
    if timeout is None:
        return
    if not timeout > 0:
        raise UsageError(
            f"{param('timeout')} must be more than 0 seconds, not {timeout:g}",
            hint="CPU seconds each self-test child may use; the default is 600 (ENVPIN_SELFTEST_TIMEOUT)",
        )
    if not selftest:
        raise UsageError(
            f"{param('timeout')} limits the self-test, which does not run here",
            hint=f"add {param('selftest')}, or drop {param('timeout')}",
        )


class SelftestError(UsageError):
    """The self-test could not run here (no usable TensorFlow)."""


def run_selftest(
    *,
    compare: bool = False,
    quick: bool = False,
    hygiene_script: Path | None = None,
    python: str | None = None,
    replicas: int | None = None,
    timeout: float | None = None,
    progress: ProgressCallback | None = None,
) -> dict[str, object]:
    """The determinism self-test in fresh child processes; its result, or SelftestError if it cannot run.
    `replicas` adds the multi-replica self-test (MirroredStrategy over that many devices, MWMS over two
    workers on loopback). `timeout`: CPU seconds each child may use (default ENVPIN_SELFTEST_TIMEOUT or 600,
    wall time 4x that); a child that runs out of it leaves the result inconclusive (``timed_out``), not
    failed. `progress` hears how many of the self-test's parts (the op battery, golden training, seed
    hygiene, and the others asked for) have finished."""
    import shutil

    _check_replicas(replicas)
    _check_timeout(timeout, True)
    from envpin.probe.selftest.run import problems, run_selftest

    if hygiene_script is not None and not hygiene_script.is_file():
        raise UsageError(f"hygiene script {hygiene_script} does not exist", hint="pass the path of a Python script")
    interpreter = None
    if python is not None:
        interpreter = shutil.which(python)
        if interpreter is None:
            raise UsageError(f"interpreter {python} not found", hint="pass the path of a python executable")
        _check_python(interpreter)
    result: dict[str, object] = run_selftest(
        compare=compare,
        quick=quick,
        python=interpreter,
        hygiene_script=str(hygiene_script) if hygiene_script else None,
        replicas=replicas,
        timeout=timeout,
        progress=_parts_reported(progress),
    )
    if "skipped" in result:
        raise SelftestError(
            f"self-test skipped: {result['skipped']}",
            hint="install TensorFlow here, or run it inside the image: python3 -m envpin.probe.selftest",
        )
    result["problems"] = problems(result)
    return result
