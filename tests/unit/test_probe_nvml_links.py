"""NVLink, NVSwitch fabric and MIG instances through NVML, in-process. This machine has no NVIDIA driver, so
libnvidia-ml.so.1 cannot exist here: a stand-in library object takes the ctypes arguments the real functions
take and writes through the same pointers (tests/cli/test_probe_run.py builds a C library with the header's
own structures and runs the real probe on it; tests/gpu_reports holds reports of a real H200)."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from envpin.probe import nvml

OK, INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND, FUNCTION_NOT_FOUND, MISMATCH = 0, 2, 3, 6, 13, 25


class FakeNvml:
    """The functions nvml.py calls for links, fabric and MIG, answering from the given tables. A function
    set to None is missing from this 'driver' (ctypes raises AttributeError for an absent symbol)."""

    def __init__(
        self,
        links: dict[int, int] | None = None,
        link_rc: int = INVALID_ARGUMENT,
        fabric_versions: tuple[int, ...] = (3, 2),
        fabric: dict[str, int] | None = None,
        fabric_rc: int = OK,
        mig_slots: tuple[int, ...] = (),
        missing: tuple[str, ...] = (),
    ) -> None:
        self.links = links or {}  # link -> state (0/1); any other link answers link_rc
        self.link_rc = link_rc
        self.asked_links: list[int] = []
        self.fabric_versions = fabric_versions
        self.fabric = fabric or {"state": 3, "status": 0, "cliqueId": 7, "healthSummary": 1}
        self.fabric_rc = fabric_rc
        self.mig_slots = mig_slots  # the answer for each MIG index: OK or NOT_FOUND
        self.missing = missing
        # a plain function, as a ctypes one is: nvml.py sets its restype and argtypes
        self.nvmlErrorString = lambda rc: b"Fake Error %d" % rc

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: ctypes.c_uint, ref: Any) -> int:
        self.asked_links.append(link.value)
        if link.value not in self.links:
            return self.link_rc
        ref._obj.value = self.links[link.value]
        return OK

    def nvmlDeviceGetGpuFabricInfoV(self, handle: Any, ref: Any) -> int:
        info = ref._obj
        size, version = info.version & 0xFFFFFF, info.version >> 24
        if version not in self.fabric_versions or size != ctypes.sizeof(type(info)):
            return MISMATCH
        if self.fabric_rc != OK:
            return self.fabric_rc
        for key, v in self.fabric.items():
            if hasattr(info, key):
                setattr(info, key, v)
        return OK

    def nvmlDeviceGetGpuFabricInfo(self, handle: Any, ref: Any) -> int:
        info = ref._obj
        assert not hasattr(info, "version")  # the v1 structure has none
        for key, v in self.fabric.items():
            if hasattr(info, key):
                setattr(info, key, v)
        return self.fabric_rc

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any, ref: Any) -> int:
        ref._obj.value = len(self.mig_slots)
        return OK

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: ctypes.c_uint, ref: Any) -> int:
        return self.mig_slots[index.value]


HANDLE = ctypes.c_void_p(1)


def test_links_are_asked_up_to_the_current_header_maximum() -> None:
    lib = FakeNvml(links={0: 1, 1: 0, 2: 1, 35: 1})
    assert nvml.nvlink_active_links(nvml.Nvml(lib), HANDLE) == 3
    assert lib.asked_links == list(range(36)) and nvml.NVLINK_MAX_LINKS == 36


@pytest.mark.parametrize(
    ("lib", "count"),
    [
        (FakeNvml(link_rc=NOT_SUPPORTED), 0),  # a GPU without NVLink
        (FakeNvml(link_rc=FUNCTION_NOT_FOUND), None),
        (FakeNvml(missing=("nvmlDeviceGetNvLinkState",)), None),  # a driver older than the function
    ],
)
def test_no_link_is_no_link(lib: FakeNvml, count: int | None) -> None:
    assert nvml.nvlink_active_links(nvml.Nvml(lib), HANDLE) == count


def test_fabric_through_the_versioned_structure() -> None:
    assert nvml.fabric(nvml.Nvml(FakeNvml()), HANDLE) == {
        "state": "completed",
        "status": "NVML_SUCCESS",
        "clique_id": 7,
        "health": "healthy",
    }
    # A driver that knows only v2: the version mismatch falls back to it (no health summary in v2).
    assert nvml.fabric(nvml.Nvml(FakeNvml(fabric_versions=(2,))), HANDLE) == {
        "state": "completed",
        "status": "NVML_SUCCESS",
        "clique_id": 7,
    }
    # A driver before nvmlDeviceGetGpuFabricInfoV: the deprecated v1 function.
    old = FakeNvml(missing=("nvmlDeviceGetGpuFabricInfoV",), fabric={"state": 2, "status": 0, "cliqueId": 0})
    assert nvml.fabric(nvml.Nvml(old), HANDLE) == {"state": "in progress"}


@pytest.mark.parametrize(
    "lib",
    [
        FakeNvml(fabric_rc=NOT_SUPPORTED),  # no NVSwitch fabric on this GPU
        FakeNvml(fabric={"state": 0, "status": 0, "cliqueId": 0, "healthSummary": 0}),
        FakeNvml(missing=("nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo")),
    ],
)
def test_no_fabric_is_nothing_to_record(lib: FakeNvml) -> None:
    assert nvml.fabric(nvml.Nvml(lib), HANDLE) is None


def test_fabric_errors_are_said() -> None:
    with pytest.raises(nvml.NvmlError, match="nvmlDeviceGetGpuFabricInfoV: NVML_ERROR_UNKNOWN"):
        nvml.fabric(nvml.Nvml(FakeNvml(fabric_rc=999)), HANDLE)


def test_the_version_field_is_size_and_version() -> None:
    assert nvml.struct_version(nvml._FabricInfoV3, 3) == 40 | (3 << 24)
    assert nvml.struct_version(nvml._FabricInfoV2, 2) == 36 | (2 << 24)


def test_mig_instances_are_counted_over_the_slots() -> None:
    lib = FakeNvml(mig_slots=(OK, NOT_FOUND, OK, NOT_FOUND, NOT_FOUND, NOT_FOUND, NOT_FOUND))
    assert nvml.mig_devices(nvml.Nvml(lib), HANDLE) == 2


def test_optional_fields_exist_only_with_something_to_record() -> None:
    out: dict[str, Any] = {}
    nvml._optional_field(out, "a", "s", lambda: 0)
    nvml._optional_field(out, "b", "s", lambda: None)
    nvml._optional_field(out, "c", "s", lambda: 0, keep_zero=True)
    nvml._optional_field(out, "d", "s", lambda: nvml.nvlink_active_links(nvml.Nvml(FakeNvml(link_rc=999)), HANDLE))
    nvml._optional_field(out, "e", "s", lambda: nvml.fabric(nvml.Nvml(FakeNvml(fabric_rc=NOT_SUPPORTED)), HANDLE))
    assert out == {
        "c": {"value": 0, "source": "s"},
        "d": {"error": "nvmlDeviceGetNvLinkState: NVML_ERROR_UNKNOWN (Fake Error 999)", "source": "s"},
    }


def test_devices_of_a_gpu_section() -> None:
    section = {
        "count": {"value": 2, "source": "t"},
        "devices.0.name": {"value": "NVIDIA H200", "source": "t"},
        "devices.0.compute_capability": {"value": "9.0", "source": "t"},
        "devices.0.uuid": {"value": "GPU-1", "source": "t"},
        "devices.1.name": {"error": "x", "source": "t"},
    }
    assert nvml.devices_of(section) == [
        {"index": 0, "name": "NVIDIA H200", "cc": "9.0", "uuid": "GPU-1"},
        {"index": 1, "name": None, "cc": None, "uuid": None},
    ]
    assert nvml.devices_of({"count": {"unavailable": "no GPU", "source": "t"}}) == []
