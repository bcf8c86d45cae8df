"""Host-side resolution for images whose Python cannot run a recent pip (the Python 3.6 NGC images). Real
resolutions through uv (a process, and PyPI): tests/cli/test_lock_host.py."""

from __future__ import annotations

import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging import tags as packaging_tags
from packaging.utils import parse_wheel_filename

from envpin.environment import resolve
from envpin.errors import RequirementsError

# The wheel tags of CPython 3.6 with glibc 2.27 (Ubuntu 18.04, the 19.07-20.xx images), as pip>=20.3 lists them.
PLATFORMS_2_27 = [
    *(f"manylinux_2_{k}_x86_64" for k in range(27, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
]
CP36_TAGS = tuple(
    str(t)
    for t in [
        *packaging_tags.cpython_tags((3, 6), abis=["cp36m"], platforms=PLATFORMS_2_27),
        *packaging_tags.compatible_tags((3, 6), "cp36", PLATFORMS_2_27),
    ]
)


@pytest.mark.parametrize(
    ("asked", "python", "where"),
    [
        ("auto", "3.6.9", "host"),
        ("auto", "3.8.10", "image"),
        ("auto", "3.11.2", "image"),
        ("host", "3.11.2", "host"),
        ("image", "3.7.0", "image"),
    ],
)
def test_where_the_resolution_runs(asked: str, python: str, where: str) -> None:
    assert resolve.choose(asked, python) == where


@pytest.mark.parametrize(
    ("asked", "python", "fragment"),
    [
        ("image", "3.6.9", "pip>=23.1 needs Python 3.7"),
        ("auto", "3.5.2", "cannot resolve for Python 3.5.2"),
        ("host", "2.7.17", "cannot resolve for Python 2.7.17"),
        ("anywhere", "3.8.0", "unknown resolver"),
    ],
)
def test_resolutions_that_cannot_run_say_why(asked: str, python: str, fragment: str) -> None:
    with pytest.raises(RequirementsError, match=fragment.replace(".", r"\.")) as err:
        resolve.choose(asked, python)
    assert err.value.hint


@pytest.mark.parametrize(
    ("tags", "platform"),
    [
        (CP36_TAGS, "x86_64-manylinux_2_17"),  # glibc 2.27: uv knows 2_17 and 2_28+, so 2_17
        (
            ("cp38-cp38-manylinux_2_31_x86_64", "cp38-cp38-manylinux2014_x86_64", "py3-none-any"),
            "x86_64-manylinux_2_31",
        ),
        (("cp36-cp36m-manylinux1_x86_64", "cp36-cp36m-manylinux2010_x86_64", "py3-none-any"), "x86_64-manylinux_2_17"),
        (("cp310-cp310-manylinux_2_35_aarch64", "py3-none-any"), "aarch64-manylinux_2_35"),
    ],
)
def test_the_platform_uv_resolves_for(tags: tuple[str, ...], platform: str) -> None:
    assert resolve.manylinux_platform(tags) == platform


def test_an_image_without_manylinux_tags_is_refused() -> None:
    with pytest.raises(RequirementsError, match="no manylinux wheels"):
        resolve.manylinux_platform(("cp311-cp311-musllinux_1_2_x86_64", "py3-none-any"))


def test_stand_in_wheels_carry_the_installed_version(tmp_path: Path) -> None:
    path = resolve.stub_wheel(tmp_path, "Tensor.Flow", "2.1.0+nv20.2")
    assert path is not None
    name, version, _, wheel_tags = parse_wheel_filename(path.name)
    assert (name, str(version), [str(t) for t in wheel_tags]) == ("tensor-flow", "2.1.0+nv20.2", ["py3-none-any"])
    with zipfile.ZipFile(path) as zf:
        meta = Parser().parsestr(zf.read("tensor_flow-2.1.0+nv20.2.dist-info/METADATA").decode())
        assert "tensor_flow-2.1.0+nv20.2.dist-info/WHEEL" in zf.namelist()
    assert (meta["Name"], meta["Version"], meta.get_all("Requires-Dist")) == ("Tensor.Flow", "2.1.0+nv20.2", None)


def test_a_version_that_is_not_pep_440_gets_no_stand_in(tmp_path: Path) -> None:
    assert resolve.stub_wheel(tmp_path, "odd", "1.0-ubuntu1~18.04") is None
    assert list(tmp_path.iterdir()) == []


def _wheel(filename: str, digest: str) -> dict[str, object]:
    return {"url": f"https://files.example/{filename}", "hashes": {"sha256": digest}}


def test_only_files_the_image_accepts_are_hashed() -> None:
    package = {
        "name": "numpy",
        "version": "1.19.5",
        "sdist": {"url": "https://files.example/numpy-1.19.5.zip", "hashes": {"sha256": "s" * 64}},
        "wheels": [
            _wheel("numpy-1.19.5-cp36-cp36m-manylinux2010_x86_64.whl", "a" * 64),
            _wheel("numpy-1.19.5-cp36-cp36m-manylinux2014_aarch64.whl", "b" * 64),
            _wheel("numpy-1.19.5-cp37-cp37m-manylinux2010_x86_64.whl", "c" * 64),
            _wheel("numpy-1.19.5-cp36-cp36m-manylinux_2_28_x86_64.whl", "d" * 64),
        ],
    }
    name = "numpy-1.19.5-cp36-cp36m-manylinux2010_x86_64.whl"
    assert resolve._files_for(package, frozenset(CP36_TAGS)) == (
        resolve.LockedFile(name, f"https://files.example/{name}", f"sha256:{'a' * 64}", "wheel"),
    )


def test_without_an_accepted_wheel_the_source_distribution_is_locked() -> None:
    package = {
        "sdist": {"hashes": {"sha256": "s" * 64}},
        "wheels": [_wheel("x-1.0-cp39-cp39-manylinux2014_x86_64.whl", "a" * 64)],
    }
    (sdist,) = resolve._files_for(package, frozenset(CP36_TAGS))
    assert (sdist.sha256, sdist.kind) == (f"sha256:{'s' * 64}", "sdist")
    assert resolve._files_for({"wheels": package["wheels"]}, frozenset(CP36_TAGS)) == ()


def test_an_image_whose_pip_cannot_say_is_refused_before_resolving() -> None:
    facts = resolve.ImageFacts("3.6.9", {"numpy": "1.17.3"}, None)
    with pytest.raises(RequirementsError, match="cannot tell which wheels"):
        resolve.resolve_on_host("img", "six\n", facts)
