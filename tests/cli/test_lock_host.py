"""Real host-side resolutions through uv for a Python 3.6 image, against PyPI. The rules around them (where a
resolution runs, the platform, the stand-in wheels, the hashes kept) are tests/unit/test_lock_host.py."""

from __future__ import annotations

import socket

import pytest

from envpin.environment import resolve
from envpin.errors import RequirementsError
from tests.unit.test_lock_host import CP36_TAGS


def _index_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


pypi = pytest.mark.pypi
NGC_20_02 = {"tensorflow": "2.1.0+nv20.2", "numpy": "1.17.3", "six": "1.14.0", "protobuf": "3.11.3"}


@pytest.fixture(scope="module")
def index() -> None:
    if not _index_reachable():
        pytest.skip("PyPI (pypi.org:443) is not reachable")


@pypi
def test_python_3_6_lock_follows_markers_and_keeps_the_base(index: None) -> None:
    """pydantic 1.x needs dataclasses on Python < 3.7 only: resolving for 3.6 from a 3.11 host must lock it.
    `tensorflow` is satisfied by NVIDIA's local version, numpy by the image's; neither is locked."""
    facts = resolve.ImageFacts("3.6.9", NGC_20_02, CP36_TAGS)
    locked = {r.key: r for r in resolve.resolve_on_host("ngc", "tensorflow\npydantic==1.9.2\npandas\n", facts)[0]}
    assert {"pydantic", "dataclasses", "pandas"} <= set(locked)
    assert not {"tensorflow", "numpy", "six", "protobuf"} & set(locked)
    assert locked["dataclasses"].version == "0.8" and locked["pandas"].version == "1.1.5"  # the last for 3.6
    for req in locked.values():
        assert req.hashes and all(h.startswith("sha256:") and len(h) == 71 for h in req.hashes)


@pypi
def test_python_3_6_lock_refuses_to_replace_a_base_package(index: None) -> None:
    facts = resolve.ImageFacts("3.6.9", NGC_20_02, CP36_TAGS)
    with pytest.raises(RequirementsError, match="without replacing its packages") as err:
        resolve.resolve_on_host("ngc", "numpy>=1.19\n", facts)
    assert "numpy" in err.value.message


@pypi
def test_a_base_version_no_constraint_can_name_is_not_replaced_silently(index: None) -> None:
    facts = resolve.ImageFacts("3.6.9", {**NGC_20_02, "six": "1.11.0-ubuntu1"}, CP36_TAGS)
    with pytest.raises(RequirementsError, match=r"would replace the image's six 1\.11\.0-ubuntu1"):
        resolve.resolve_on_host("ngc", "six\n", facts)
