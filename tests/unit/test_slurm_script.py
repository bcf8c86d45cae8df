"""scripts/slurm.sh's TensorFlow for the nodes: the version it installs is one the host's `pip install -e
'.[tf]'` can resolve to (pyproject's tf extra), for the Python the nodes have. Read from the two files."""

from __future__ import annotations

import re

from packaging.requirements import Requirement

from envpin._compat import tomllib
from tests.conftest import REPO

SCRIPT = (REPO / "scripts" / "slurm.sh").read_text()


def _constant(name: str) -> str:
    m = re.search(rf"^readonly {name}=(\S+)$", SCRIPT, re.M)
    assert m, f"scripts/slurm.sh sets no {name}"
    return m.group(1)


def test_the_nodes_tensorflow_is_inside_the_tf_extra() -> None:
    pinned = Requirement(_constant("NODE_TF_REQUIREMENT"))
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["tf"]
    (wanted,) = [Requirement(r) for r in extra]
    assert pinned.name == wanted.name
    (spec,) = pinned.specifier
    assert spec.operator == "==", "the nodes get one exact version (the image is keyed by it)"
    assert wanted.specifier.contains(spec.version), f"{spec.version} is outside the tf extra {wanted.specifier}"


def test_the_wheels_are_for_the_nodes_python() -> None:
    assert re.fullmatch(r"3\.\d+", _constant("NODE_PYTHON"))
    # The venv is where the tests look for the nodes' TensorFlow (tests/slurm/conftest.py).
    from tests.slurm.conftest import NODE_TF_PYTHON

    assert _constant("IN_TF_VENV") + "/bin/python" == NODE_TF_PYTHON
