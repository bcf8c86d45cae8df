"""The Python versions envpin says it supports, held to what is run: the host side's versions (3.10 to 3.13,
run by scripts/pythons.sh) are the ones pyproject.toml names, and the secrets parser's splitting, which
avoids what Python 3.6's re.split does differently, gives 3.7's answer. The image side's interpreters
themselves (CPython 3.6 to 3.9) run in tests/pythons/test_pythons.py."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from envpin._compat import tomllib
from envpin.probe import secrets
from tests.conftest import REPO

#: The host side's versions: pyproject's requires-python up to the newest one scripts/pythons.sh runs.
HOST_PYTHONS = ("3.10", "3.11", "3.12", "3.13")


@given(st.text(alphabet="aAbBzZ09_-.", max_size=24))
def test_key_parts_are_what_python37_split_gives(name: str) -> None:
    """key_parts() avoids the empty-match split Python 3.6 does not do, and gives what 3.7+ gives with it."""
    with_empty_match = [p.lower() for p in re.split(r"[_\-]+|(?<=[a-z])(?=[A-Z])", name) if p]
    assert secrets.key_parts(name) == with_empty_match


def test_key_parts_examples() -> None:
    assert secrets.key_parts("privateKey") == ["private", "key"]
    assert secrets.key_parts("XMLHttp_token-ID") == ["xmlhttp", "token", "id"]
    assert secrets.scrub("--privateKey=abc --keyName=k") == "--privateKey=<redacted> --keyName=k"


def _script_versions() -> list[str]:
    text = (REPO / "scripts" / "pythons.sh").read_text()
    found = re.search(r"versions=\(([0-9. ]+)\)", text)
    assert found, "scripts/pythons.sh names its default versions as versions=(3.X ...)"
    return found.group(1).split()


def test_metadata_says_what_is_run() -> None:
    """pyproject's requires-python and classifiers name exactly the versions scripts/pythons.sh runs, and
    .ci/run runs it."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert _script_versions() == list(HOST_PYTHONS)
    assert project["requires-python"] == f">={HOST_PYTHONS[0]}"
    listed = [
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert listed == list(HOST_PYTHONS)
    assert "bash scripts/pythons.sh" in (REPO / ".ci" / "run").read_text()
