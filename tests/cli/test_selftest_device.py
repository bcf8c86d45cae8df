"""The self-test, the golden run and `envpin selftest` where TensorFlow cannot be imported (a real interpreter
without it), and a self-test child that fails."""

from __future__ import annotations

import subprocess
import sys
import venv

import pytest

from envpin.probe import golden, selftest


@pytest.fixture(scope="module")
def python_without_tensorflow(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real interpreter whose site-packages is empty: `import tensorflow` genuinely fails in it."""
    home = tmp_path_factory.mktemp("bare-venv")
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(home)
    python = str(home / "bin" / "python")
    probe = subprocess.run([python, "-c", "import tensorflow"], capture_output=True, text=True)
    assert probe.returncode != 0, "the bare venv unexpectedly imports TensorFlow"
    return python


def test_selftest_without_tensorflow_is_skipped_with_the_reason(python_without_tensorflow: str) -> None:
    result = selftest.run_selftest(quick=True, python=python_without_tensorflow)
    assert list(result) == ["skipped"]
    assert result["skipped"].startswith("TensorFlow cannot be imported: ModuleNotFoundError")
    assert "tensorflow" in result["skipped"]


def test_golden_without_tensorflow_is_skipped(python_without_tensorflow: str) -> None:
    result = golden.run_golden(steps=2, python=python_without_tensorflow)
    assert result["skipped"].startswith("TensorFlow cannot be imported")


def test_cli_selftest_without_tensorflow_exits_2_with_one_line(cli, python_without_tensorflow: str) -> None:  # type: ignore[no-untyped-def]
    res = cli("selftest", "--quick", "--python", python_without_tensorflow)
    assert res.code == 2
    assert "self-test skipped: TensorFlow cannot be imported" in res.stderr
    assert "Traceback" not in res.stderr
    assert res.stdout == ""
    res = cli("selftest", "--quick", "--json", "--python", python_without_tensorflow)
    assert res.code == 2 and res.stdout == "" and "self-test skipped" in res.stderr


def test_child_failure_is_reported_not_raised() -> None:
    # A child that dies (here: a module that does not exist) comes back as an error string.
    from envpin.probe import tfchild

    payload, error, _ = tfchild.run_child("envpin.probe.no_such_module", [], tfchild.child_env(), 60, sys.executable)
    assert payload is None
    assert "exited with status 1" in error and "No module named" in error
