"""envpin.probe and envpin.probe.selftest load their public names on first use under the oldest Python the probe
supports (CPython 3.6, as NGC 19.xx-20.xx images ship it; this interpreter: tests/cli/test_probe_lazy.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_probe_lazy import loads_lazily, payload_at
from tests.pythons.test_pythons import find_python


def _python_3_6() -> str:
    python = find_python("3.6")
    if python is None:
        pytest.skip("no CPython 3.6 on this machine (pyenv install 3.6, or put python3.6 on PATH)")
    return python


def test_public_names_load_on_first_use_on_python_3_6() -> None:
    loads_lazily(_python_3_6())


def test_public_names_load_on_first_use_on_python_3_6_from_the_payload(tmp_path: Path) -> None:
    loads_lazily(_python_3_6(), payload_at(tmp_path))
