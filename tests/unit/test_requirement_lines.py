"""Requirement lines read with pip's grammar (packaging), hashes with envpin's own strict rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.environment.requirements import parse_line, parse_lock
from envpin.errors import RequirementsError
from tests.props import examples

H1, H2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64


@pytest.mark.parametrize(
    "line, expected",
    [
        (f"six==1.16.0 --hash={H1}", ("six", "==", "1.16.0", "", "")),
        (f"legacy===2020.1-custom --hash={H1}", ("legacy", "===", "2020.1-custom", "", "")),
        (
            f'pkg==1.0 ; platform_release >= "5.4.0-generic" --hash={H1}',
            ("pkg", "==", "1.0", "", 'platform_release >= "5.4.0-generic"'),
        ),
        (f"Pkg[b,a]==1.0 --hash {H1} --hash={H2}", ("Pkg", "==", "1.0", "[a,b]", "")),
        (
            f"tf==2.1.0+nv20.2 ; python_version < '3.8' --hash={H1}",
            ("tf", "==", "2.1.0+nv20.2", "", 'python_version < "3.8"'),
        ),
    ],
)
def test_lines_pip_accepts(line: str, expected: tuple[str, ...]) -> None:
    req = parse_line(line, "r:1")
    assert (req.name, req.op, req.version, req.extras, req.marker) == expected
    # What is rendered reads back the same.
    assert parse_lock(req.render() + "\n") == (req,)


@pytest.mark.parametrize(
    "line, message",
    [
        (f"six==1.16.0 --hash={H1} junk", "'junk' is not allowed"),
        (f"six==1.16.0 --hash={H1} --no-deps", "'--no-deps' is not allowed"),
        ("six==1.16.0 --hash=sha256:abc", "is not a sha256 hash"),
        ("six==1.16.0 --hash", "'' is not a sha256 hash"),
        (f"six==1.* --hash={H1}", "not pinned"),
        (f"six>=1,==1.16 --hash={H1}", "not pinned"),
        (f"six @ https://example.com/six.whl --hash={H1}", "not pinned"),
        ("six==1.16.0", "has no --hash"),
        ("six==1.16.0 " + "x" * 100_001, "is not a requirement"),
    ],
)
def test_lines_refused(line: str, message: str) -> None:
    with pytest.raises(RequirementsError, match=message):
        parse_line(line, "r:1")


@settings(max_examples=examples(400), deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=200))
def test_any_line_parses_or_is_refused_cleanly(text: str) -> None:
    try:
        reqs = parse_lock(text)
    except RequirementsError as exc:
        assert exc.message and "\n" not in exc.message
    else:
        for req in reqs:
            assert req.hashes and all(h.startswith("sha256:") for h in req.hashes)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.from_regex(r"[A-Za-z][A-Za-z0-9._-]{0,20}[A-Za-z0-9]", fullmatch=True),
    st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}", fullmatch=True),
    st.lists(st.from_regex(r"[0-9a-f]{64}", fullmatch=True), min_size=1, max_size=3),
)
def test_generated_locked_lines_round_trip(name: str, version: str, hexes: list[str]) -> None:
    line = f"{name}=={version} " + " ".join(f"--hash=sha256:{h}" for h in hexes)
    req = parse_line(line, "r:1")
    assert (req.name, req.version) == (name, version) and set(req.hashes) == {f"sha256:{h}" for h in hexes}
