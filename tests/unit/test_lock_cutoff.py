"""`envpin lock --exclude-newer` and `--pylock`: the cut-off as both resolvers get it, how the lock records it,
and pylock.toml as packaging's own reader of PEP 751 reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin._compat import tomllib
from envpin.environment import resolve
from envpin.environment.requirements import Requirement, parse_lock
from envpin.errors import RequirementsError

H1, H2 = "sha256:" + "a" * 64, "sha256:" + "b" * 64


@pytest.mark.parametrize(
    ("given", "utc"),
    [
        ("2024-03-01", "2024-03-01T00:00:00Z"),
        ("2024-03-01T12:30:00Z", "2024-03-01T12:30:00Z"),
        ("2024-03-01T12:30:00+02:00", "2024-03-01T10:30:00Z"),
        ("2024-03-01T00:00:00.5-01:00", "2024-03-01T01:00:00Z"),
        ("none", None),
    ],
)
def test_a_cutoff_is_one_utc_time(given: str, utc: str | None) -> None:
    assert resolve.cutoff(given) == utc


@pytest.mark.parametrize("given", ["P7D", "1 week", "2024-03-01T12:00:00", "2024-13-01", "yesterday", ""])
def test_relative_or_zoneless_cutoffs_are_refused(given: str) -> None:
    """A duration or a local time would lock differently later or elsewhere: not a reproducible input."""
    with pytest.raises(RequirementsError, match="is not a date or a UTC time") as err:
        resolve.cutoff(given)
    assert err.value.hint and "2024-03-01" in err.value.hint


def test_the_image_resolver_needs_python_3_10_for_a_cutoff() -> None:
    assert resolve.choose("auto", "3.8.10", "2024-03-01T00:00:00Z") == "host"
    assert resolve.choose("auto", "3.8.10", None) == "image"
    assert resolve.choose("auto", "3.11.2", "2024-03-01T00:00:00Z") == "image"
    with pytest.raises(RequirementsError, match="uploaded-prior-to"):
        resolve.choose("image", "3.8.10", "2024-03-01T00:00:00Z")


def _resolved(cut: str | None, where: str = "host") -> resolve.Resolved:
    reqs = (Requirement("python-dateutil", "2.9.0.post0", (H1,)), Requirement("toy", "1.0", (H2,)))
    files = {
        "python-dateutil": (
            resolve.LockedFile("python_dateutil-2.9.0.post0-py2.py3-none-any.whl", "https://f/d.whl", H1),
        ),
        "toy": (resolve.LockedFile("toy-1.0.tar.gz", "https://f/toy-1.0.tar.gz", H2, "sdist"),),
    }
    return resolve.Resolved(resolve.ImageFacts("3.11.2", {}, None), reqs, where, files, cut)


@pytest.mark.parametrize("where", ["host", "image"])
def test_the_lock_records_its_cutoff_and_origin(where: str) -> None:
    text = resolve.lock_text(_resolved("2024-03-01T00:00:00Z", where), "reg/img:1", Path("requirements.in"), "toy\n")
    assert resolve.recorded_cutoff(text) == "2024-03-01T00:00:00Z"
    origin = resolve.recorded_origin(text)
    assert origin is not None and (origin.image, origin.where, origin.source) == ("reg/img:1", where, "requirements.in")
    assert [r.name for r in parse_lock(text)] == ["python-dateutil", "toy"]  # the header is comments only
    plain = resolve.lock_text(_resolved(None, where), "reg/img:1", Path("requirements.in"), "toy\n")
    assert resolve.recorded_cutoff(plain) is None and "exclude-newer" not in plain


def test_pylock_lists_the_same_files_and_validates() -> None:
    from packaging.pylock import Pylock

    res = _resolved("2024-03-01T00:00:00Z")
    body = resolve.lock_text(res, "reg/img:1", Path("requirements.in"), "toy\n")
    data = tomllib.loads(resolve.pylock_text(res, "reg/img:1", body))
    lock = Pylock.from_dict(data)
    got = {str(p.name): (str(p.version), p.wheels, p.sdist) for p in lock.packages}
    dateutil, toy = got["python-dateutil"], got["toy"]
    assert dateutil[0] == "2.9.0.post0" and [w.hashes["sha256"] for w in dateutil[1] or ()] == ["a" * 64]
    assert toy[2] is not None and toy[2].hashes["sha256"] == "b" * 64 and not toy[1]
    assert data["tool"]["envpin"]["exclude-newer"] == "2024-03-01T00:00:00Z"
    assert data["tool"]["envpin"]["requirements-lock"].startswith("sha256:")


def test_a_pylock_without_a_file_url_is_refused() -> None:
    res = _resolved(None)
    res = resolve.Resolved(res.facts, res.locked, "image", {}, None)  # no files known: nothing to install from
    with pytest.raises(RequirementsError, match=r"pylock\.toml for reg/img:1 would not be valid"):
        resolve.pylock_text(res, "reg/img:1", "")
