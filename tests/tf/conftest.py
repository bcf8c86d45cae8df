"""Everything under tests/tf needs TensorFlow: marked `tensorflow`, skipped (with the import error) without it.

Importability is checked once, in a child interpreter: the tests themselves run TensorFlow in fresh child
processes (as the self-test does), so the test process never needs to load it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_state: dict[str, str | None] = {}


def tensorflow_import_error() -> str | None:
    """None if `import tensorflow` works for this interpreter, else the exception line it printed."""
    if "error" not in _state:
        proc = subprocess.run(
            [sys.executable, "-c", "import tensorflow as tf; print(tf.__version__)"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode == 0:
            _state["error"], _state["version"] = None, proc.stdout.strip().splitlines()[-1]
        else:
            lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
            _state["error"] = lines[-1] if lines else f"exit status {proc.returncode}"
    return _state["error"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if HERE in Path(str(item.path)).resolve().parents]
    if not mine:
        return
    error = tensorflow_import_error()
    for item in mine:
        item.add_marker(pytest.mark.tensorflow)
        if error is not None:
            item.add_marker(pytest.mark.skip(reason=f"`import tensorflow` fails for {sys.executable}: {error}"))
