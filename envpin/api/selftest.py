"""`envpin selftest`: the determinism self-test in a chosen Python."""

from __future__ import annotations

from pathlib import Path

from envpin.errors import UsageError


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


class SelftestError(UsageError):
    """The self-test could not run here (no usable TensorFlow)."""


def run_selftest(
    *, compare: bool = False, quick: bool = False, hygiene_script: Path | None = None, python: str | None = None
) -> dict[str, object]:
    """The determinism self-test in fresh child processes; its result, or SelftestError if it cannot run."""
    import shutil

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
        compare=compare, quick=quick, python=interpreter, hygiene_script=str(hygiene_script) if hygiene_script else None
    )
    if "skipped" in result:
        raise SelftestError(
            f"self-test skipped: {result['skipped']}",
            hint="install TensorFlow here, or run it inside the image: python3 -m envpin.probe.selftest",
        )
    result["problems"] = problems(result)
    return result
