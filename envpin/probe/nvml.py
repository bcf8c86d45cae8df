"""NVIDIA driver and GPUs through NVML (``libnvidia-ml.so.1`` by ctypes), with an ``nvidia-smi`` fallback.

No pynvml: the probe is standard library only. ``ENVPIN_NVML_LIBRARY`` names another library file to load
instead (used to test the error paths with a library that fails on purpose). On a machine without an
NVIDIA driver every field says "unavailable" with the reason; that is not an error.

Fields are flat: ``driver_version``, ``count``, ``devices.<index>.<name>`` so each GPU property keeps its
own source and its own error.
"""

import contextlib
import ctypes
import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from envpin.probe._common import Context, Unavailable, capture, describe, unavailable, value

NVML_LIBRARY = "libnvidia-ml.so.1"
LIBRARY_OVERRIDE = "ENVPIN_NVML_LIBRARY"

# nvmlReturn_t (NVIDIA/go-nvml gen/nvml/nvml.h l.1295-1330 at 2f9e261).
ERRORS = {
    1: "NVML_ERROR_UNINITIALIZED",
    2: "NVML_ERROR_INVALID_ARGUMENT",
    3: "NVML_ERROR_NOT_SUPPORTED",
    4: "NVML_ERROR_NO_PERMISSION",
    5: "NVML_ERROR_ALREADY_INITIALIZED",
    6: "NVML_ERROR_NOT_FOUND",
    7: "NVML_ERROR_INSUFFICIENT_SIZE",
    8: "NVML_ERROR_INSUFFICIENT_POWER",
    9: "NVML_ERROR_DRIVER_NOT_LOADED",
    10: "NVML_ERROR_TIMEOUT",
    11: "NVML_ERROR_IRQ_ISSUE",
    12: "NVML_ERROR_LIBRARY_NOT_FOUND",
    13: "NVML_ERROR_FUNCTION_NOT_FOUND",
    14: "NVML_ERROR_CORRUPTED_INFOROM",
    15: "NVML_ERROR_GPU_IS_LOST",
    16: "NVML_ERROR_RESET_REQUIRED",
    17: "NVML_ERROR_OPERATING_SYSTEM",
    18: "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    19: "NVML_ERROR_IN_USE",
    20: "NVML_ERROR_MEMORY",
    21: "NVML_ERROR_NO_DATA",
    22: "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
    23: "NVML_ERROR_INSUFFICIENT_RESOURCES",
    24: "NVML_ERROR_FREQ_NOT_SUPPORTED",
    25: "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
    26: "NVML_ERROR_DEPRECATED",
    27: "NVML_ERROR_NOT_READY",
    28: "NVML_ERROR_GPU_NOT_FOUND",
    29: "NVML_ERROR_INVALID_STATE",
    30: "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",
    999: "NVML_ERROR_UNKNOWN",
}
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NOT_FOUND = 6
FUNCTION_NOT_FOUND = 13
ARGUMENT_VERSION_MISMATCH = 25
# nvmlInit failures that simply mean "no usable NVIDIA GPU here".
NO_GPU_CODES = (6, 9, 12)

_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


class NvmlError(Exception):
    def __init__(self, symbol: str, code: int, text: str) -> None:
        Exception.__init__(self, "%s: %s (%s)" % (symbol, ERRORS.get(code, "NVML error %d" % code), text))
        self.code = code


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _PciInfo(ctypes.Structure):
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
        ("_reserved", ctypes.c_char * 64),  # room for fields later drivers may add
    ]


#: NVML_NVLINK_MAX_LINKS of the current nvml.h (NVIDIA/go-nvml gen/nvml/nvml.h l.455 at 2f9e261, NVML API 13):
#: it grew from 12 to 18 (2022) to 36 (2026), and a link beyond what a GPU has answers INVALID_ARGUMENT, so
#: asking for the newest maximum is right on every driver.
NVLINK_MAX_LINKS = 36
NVML_FEATURE_ENABLED = 1
# nvmlGpuFabricState_t (nvml.h l.3800-3803) and the health summary of nvmlGpuFabricInfo_v3_t (l.3890-3893).
_FABRIC_STATES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}
_FABRIC_HEALTH = {0: "not supported", 1: "healthy", 2: "unhealthy", 3: "limited capacity"}


class _FabricInfoV1(ctypes.Structure):
    """nvmlGpuFabricInfo_t (nvml.h l.3813-3819), for nvmlDeviceGetGpuFabricInfo (deprecated in NVML 13)."""

    _fields_ = [
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
    ]


class _FabricInfoV2(ctypes.Structure):
    """nvmlGpuFabricInfo_v2_t (nvml.h l.3924-3932): a version first, a health mask last."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
    ]


class _FabricInfoV3(ctypes.Structure):
    """nvmlGpuFabricInfo_v3_t = nvmlGpuFabricInfoV_t (nvml.h l.3943-3953): v2 and a health summary."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
        ("healthSummary", ctypes.c_ubyte),
    ]


def struct_version(struct: Any, version: int) -> int:
    """NVML_STRUCT_VERSION(data, ver) of nvml.h l.141-142: the structure's size, the version in the top byte."""
    return int(ctypes.sizeof(struct)) | (version << 24)


class Nvml(object):
    """Thin ctypes wrapper: every call raises NvmlError with the library's own error text."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def error_text(self, code: int) -> str:
        try:
            fn = self.lib.nvmlErrorString
            fn.restype = ctypes.c_char_p
            fn.argtypes = [ctypes.c_int]
            text = fn(code)
            return text.decode("utf-8", "replace") if text else "no text"
        except Exception:
            return "no nvmlErrorString"

    def call(self, symbols: Tuple[str, ...], *args: Any) -> None:
        """Call the first symbol the library has (newer _v2/_v3 first)."""
        fn = None
        for symbol in symbols:
            fn = getattr(self.lib, symbol, None)
            if fn is not None:
                break
        if fn is None:
            raise AttributeError("NVML has no %s" % "/".join(symbols))
        rc = fn(*args)
        if rc != 0:
            raise NvmlError(symbol, rc, self.error_text(rc))

    def string(self, symbols: Tuple[str, ...], *args: Any) -> str:
        buf = ctypes.create_string_buffer(256)
        self.call(symbols, *args, buf, ctypes.c_uint(256))
        return buf.value.decode("utf-8", "replace")

    def uint(self, symbols: Tuple[str, ...], *args: Any) -> int:
        out = ctypes.c_uint(0)
        self.call(symbols, *args, ctypes.byref(out))
        return out.value

    def uint_pair(self, symbols: Tuple[str, ...], *args: Any) -> Tuple[int, int]:
        a, b = ctypes.c_uint(0), ctypes.c_uint(0)
        self.call(symbols, *args, ctypes.byref(a), ctypes.byref(b))
        return a.value, b.value


def _nvml_field(source: str, fn: Callable[[], Any]) -> Dict[str, Any]:
    try:
        result = fn()
    except NvmlError as exc:
        if exc.code == NOT_SUPPORTED:
            return unavailable("not supported on this GPU/driver (%s)" % exc, source)
        return {"error": str(exc), "source": source}
    except Exception as exc:
        return {"error": describe(exc), "source": source}
    return value(result, source)


def _on_off(v: int) -> str:
    return "enabled" if v else "disabled"


def load_library(ctx: Context) -> Any:
    name = ctx.environ.get(LIBRARY_OVERRIDE) or NVML_LIBRARY
    try:
        return ctypes.CDLL(name)
    except OSError as exc:
        raise Unavailable("%s could not be loaded (%s)" % (name, describe(exc))) from None


def nvlink_active_links(nv: Nvml, handle: Any) -> Optional[int]:
    """How many of the GPU's NVLink links are active (nvmlDeviceGetNvLinkState for every link up to
    NVLINK_MAX_LINKS; a link that answers INVALID_ARGUMENT or NOT_SUPPORTED is no link); None when this NVML
    has no such function."""
    fn = getattr(nv.lib, "nvmlDeviceGetNvLinkState", None)
    if fn is None:
        return None
    active = 0
    for link in range(NVLINK_MAX_LINKS):
        state = ctypes.c_int(0)
        rc = fn(handle, ctypes.c_uint(link), ctypes.byref(state))
        if rc == 0:
            active += 1 if state.value == NVML_FEATURE_ENABLED else 0
        elif rc == FUNCTION_NOT_FOUND:
            return None
        elif rc not in (INVALID_ARGUMENT, NOT_SUPPORTED):
            raise NvmlError("nvmlDeviceGetNvLinkState", rc, nv.error_text(rc))
    return active


def _fabric_info(nv: Nvml, handle: Any) -> Optional[Any]:
    """The filled fabric structure (v3, else v2 through nvmlDeviceGetGpuFabricInfoV, else v1 through the
    deprecated nvmlDeviceGetGpuFabricInfo of drivers before it), or None where the GPU or this NVML has no
    fabric information."""
    fn = getattr(nv.lib, "nvmlDeviceGetGpuFabricInfoV", None)
    if fn is not None:
        for struct, version in ((_FabricInfoV3, 3), (_FabricInfoV2, 2)):
            info = struct()
            info.version = struct_version(struct, version)  # "The caller must set the version field" (l.7835)
            rc = fn(handle, ctypes.byref(info))
            if rc == 0:
                return info
            if rc == ARGUMENT_VERSION_MISMATCH:
                continue
            if rc == NOT_SUPPORTED:
                return None
            if rc == FUNCTION_NOT_FOUND:
                break
            raise NvmlError("nvmlDeviceGetGpuFabricInfoV", rc, nv.error_text(rc))
    old = getattr(nv.lib, "nvmlDeviceGetGpuFabricInfo", None)
    if old is None:
        return None
    first = _FabricInfoV1()
    rc = old(handle, ctypes.byref(first))
    if rc in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
        return None
    if rc != 0:
        raise NvmlError("nvmlDeviceGetGpuFabricInfo", rc, nv.error_text(rc))
    return first


def fabric(nv: Nvml, handle: Any) -> Optional[Dict[str, Any]]:
    """The GPU's NVLink fabric (NVSwitch systems register their GPUs with the Fabric Manager; nvml.h
    l.7815-7817): its state, and once the state is "completed" the probe's status, clique and health. None
    where there is no fabric to speak of (no such function, NOT_SUPPORTED, or state "not supported"). The
    cluster UUID is left out: it names one NVLink domain, not its kind."""
    info = _fabric_info(nv, handle)
    if info is None or info.state == 0:
        return None
    out: Dict[str, Any] = {"state": _FABRIC_STATES.get(info.state, "state %d" % info.state)}
    if info.state == 3:  # "Must be checked only if state returns complete" (l.3816)
        out["status"] = "NVML_SUCCESS" if info.status == 0 else ERRORS.get(info.status, "NVML error %d" % info.status)
        out["clique_id"] = int(info.cliqueId)
        if isinstance(info, _FabricInfoV3):
            out["health"] = _FABRIC_HEALTH.get(info.healthSummary, "summary %d" % info.healthSummary)
    return out


def mig_devices(nv: Nvml, handle: Any) -> int:
    """How many MIG devices the GPU holds now (nvmlDeviceGetMaxMigDeviceCount, then a handle for each index;
    NOT_FOUND at an index is an empty slot)."""
    most = nv.uint(("nvmlDeviceGetMaxMigDeviceCount",), handle)
    fn = nv.lib.nvmlDeviceGetMigDeviceHandleByIndex
    count = 0
    for index in range(most):
        mig = ctypes.c_void_p()
        rc = fn(handle, ctypes.c_uint(index), ctypes.byref(mig))
        if rc == 0:
            count += 1
        elif rc != NOT_FOUND:
            raise NvmlError("nvmlDeviceGetMigDeviceHandleByIndex", rc, nv.error_text(rc))
    return count


def _optional_field(
    out: Dict[str, Any], name: str, source: str, fn: Callable[[], Any], keep_zero: bool = False
) -> None:
    """A field that exists only where there is something to record (a GPU without NVLink, fabric or MIG gets
    none, so reports and locks of such machines keep their fields): fn's None (or 0, unless `keep_zero`)
    adds nothing; a failure is recorded as the field's error."""
    try:
        result = fn()
    except NvmlError as exc:
        if exc.code in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
            return
        out[name] = {"error": str(exc), "source": source}
        return
    except AttributeError:  # an NVML older than the function
        return
    except Exception as exc:
        out[name] = {"error": describe(exc), "source": source}
        return
    if result or (keep_zero and result == 0):
        out[name] = value(result, source)


def _device_fields(nv: Nvml, index: int, handle: Any) -> Dict[str, Any]:
    p = "devices.%d." % index
    src = "nvml:"
    out: Dict[str, Any] = {}

    def cc() -> str:
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        nv.call(("nvmlDeviceGetCudaComputeCapability",), handle, ctypes.byref(major), ctypes.byref(minor))
        return "%d.%d" % (major.value, minor.value)

    def memory() -> int:
        mem = _Memory()
        nv.call(("nvmlDeviceGetMemoryInfo",), handle, ctypes.byref(mem))
        return int(mem.total)

    def pci() -> str:
        info = _PciInfo()
        nv.call(
            ("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"), handle, ctypes.byref(info)
        )
        bus_id: bytes = info.busId
        return bus_id.decode("ascii", "replace")

    def clocks_max() -> Dict[str, int]:
        return {
            k: nv.uint(("nvmlDeviceGetMaxClockInfo",), handle, ctypes.c_int(t))
            for k, t in (("graphics", 0), ("sm", 1), ("memory", 2))
        }

    def clocks_app() -> Dict[str, int]:
        return {
            k: nv.uint(("nvmlDeviceGetApplicationsClock",), handle, ctypes.c_int(t))
            for k, t in (("graphics", 0), ("memory", 2))
        }

    out[p + "name"] = _nvml_field(src + "nvmlDeviceGetName", lambda: nv.string(("nvmlDeviceGetName",), handle))
    out[p + "uuid"] = _nvml_field(src + "nvmlDeviceGetUUID", lambda: nv.string(("nvmlDeviceGetUUID",), handle))
    out[p + "compute_capability"] = _nvml_field(src + "nvmlDeviceGetCudaComputeCapability", cc)
    out[p + "memory_total_bytes"] = _nvml_field(src + "nvmlDeviceGetMemoryInfo", memory)
    out[p + "pci_bus_id"] = _nvml_field(src + "nvmlDeviceGetPciInfo", pci)
    out[p + "ecc"] = _nvml_field(
        src + "nvmlDeviceGetEccMode", lambda: _on_off(nv.uint_pair(("nvmlDeviceGetEccMode",), handle)[0])
    )
    out[p + "mig"] = _nvml_field(
        src + "nvmlDeviceGetMigMode", lambda: _on_off(nv.uint_pair(("nvmlDeviceGetMigMode",), handle)[0])
    )
    out[p + "persistence_mode"] = _nvml_field(
        src + "nvmlDeviceGetPersistenceMode", lambda: _on_off(nv.uint(("nvmlDeviceGetPersistenceMode",), handle))
    )
    out[p + "compute_mode"] = _nvml_field(
        src + "nvmlDeviceGetComputeMode",
        lambda: _COMPUTE_MODES.get(nv.uint(("nvmlDeviceGetComputeMode",), handle), "unknown"),
    )
    out[p + "clocks_max_mhz"] = _nvml_field(src + "nvmlDeviceGetMaxClockInfo", clocks_max)
    out[p + "clocks_applications_mhz"] = _nvml_field(src + "nvmlDeviceGetApplicationsClock", clocks_app)
    out[p + "power_limit_w"] = _nvml_field(
        src + "nvmlDeviceGetPowerManagementLimit",
        lambda: round(nv.uint(("nvmlDeviceGetPowerManagementLimit",), handle) / 1000.0, 2),
    )
    out[p + "power_enforced_limit_w"] = _nvml_field(
        src + "nvmlDeviceGetEnforcedPowerLimit",
        lambda: round(nv.uint(("nvmlDeviceGetEnforcedPowerLimit",), handle) / 1000.0, 2),
    )
    out[p + "vbios"] = _nvml_field(
        src + "nvmlDeviceGetVbiosVersion", lambda: nv.string(("nvmlDeviceGetVbiosVersion",), handle)
    )
    _optional_field(
        out,
        p + "nvlink_active_links",
        src + "nvmlDeviceGetNvLinkState (links 0-%d)" % (NVLINK_MAX_LINKS - 1),
        lambda: nvlink_active_links(nv, handle),
    )
    _optional_field(out, p + "fabric", src + "nvmlDeviceGetGpuFabricInfoV", lambda: fabric(nv, handle))
    if out[p + "mig"].get("value") == "enabled":
        _optional_field(
            out,
            p + "mig_devices",
            src + "nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMigDeviceHandleByIndex",
            lambda: mig_devices(nv, handle),
            keep_zero=True,  # MIG on without instances: CUDA sees no device on this GPU
        )
    return out


def _collect_nvml(ctx: Context) -> Dict[str, Any]:
    """All NVML fields, or raise (Unavailable / NvmlError) when NVML cannot be used at all."""
    nv = Nvml(load_library(ctx))
    try:
        nv.call(("nvmlInit_v2", "nvmlInit"))
    except NvmlError as exc:
        if exc.code in NO_GPU_CODES:
            raise Unavailable(str(exc)) from None
        raise
    try:
        out: Dict[str, Any] = {"backend": value("nvml", "ctypes " + NVML_LIBRARY)}
        out["driver_version"] = _nvml_field(
            "nvml:nvmlSystemGetDriverVersion", lambda: nv.string(("nvmlSystemGetDriverVersion",))
        )
        out["nvml_version"] = _nvml_field(
            "nvml:nvmlSystemGetNVMLVersion", lambda: nv.string(("nvmlSystemGetNVMLVersion",))
        )

        def cuda_driver() -> str:
            out_v = ctypes.c_int(0)
            nv.call(("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"), ctypes.byref(out_v))
            return "%d.%d" % (out_v.value // 1000, (out_v.value % 1000) // 10)

        out["cuda_driver_version"] = _nvml_field("nvml:nvmlSystemGetCudaDriverVersion", cuda_driver)
        count = _nvml_field("nvml:nvmlDeviceGetCount", lambda: nv.uint(("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")))
        out["count"] = count
        for index in range(count.get("value") or 0):
            handle = ctypes.c_void_p()
            try:
                nv.call(
                    ("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"),
                    ctypes.c_uint(index),
                    ctypes.byref(handle),
                )
            except Exception as exc:
                out["devices.%d.name" % index] = {"error": describe(exc), "source": "nvml:nvmlDeviceGetHandleByIndex"}
                continue
            out.update(_device_fields(nv, index, handle))
        return out
    finally:
        with contextlib.suppress(Exception):
            nv.call(("nvmlShutdown",))


# --- nvidia-smi fallback -----------------------------------------------------------------------------------

SMI_QUERY = (
    ("name", "name"),
    ("uuid", "uuid"),
    ("compute_cap", "compute_capability"),
    ("memory.total", "memory_total_bytes"),
    ("pci.bus_id", "pci_bus_id"),
    ("ecc.mode.current", "ecc"),
    ("mig.mode.current", "mig"),
    ("persistence_mode", "persistence_mode"),
    ("compute_mode", "compute_mode"),
    ("clocks.max.graphics", "clocks_max_mhz.graphics"),
    ("clocks.max.sm", "clocks_max_mhz.sm"),
    ("clocks.max.memory", "clocks_max_mhz.memory"),
    ("power.limit", "power_limit_w"),
    ("enforced.power.limit", "power_enforced_limit_w"),
    ("vbios_version", "vbios"),
    ("driver_version", "driver_version"),
)


def _run_smi(ctx: Context, fields: List[str]) -> Tuple[int, str, str]:
    import subprocess

    smi = _which(ctx, "nvidia-smi")
    proc = subprocess.Popen(
        [smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
    )
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError("nvidia-smi did not answer within 20 s") from None
    return proc.returncode, out, err


def _which(ctx: Context, name: str) -> str:
    for directory in ctx.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        candidate = os.path.join(directory, name)
        if directory and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise Unavailable("%s is not on PATH" % name)


def _smi_value(raw: str, key: str) -> Any:
    raw = raw.strip()
    if raw in ("[N/A]", "N/A", "[Not Supported]", "Not Supported", ""):
        raise Unavailable("nvidia-smi reports %s" % (raw or "nothing"))
    if key == "memory_total_bytes":
        return int(float(raw)) * 1024 * 1024
    if key.startswith("clocks_"):
        return int(float(raw))
    if key.startswith("power_"):
        return round(float(raw), 2)
    if key in ("ecc", "mig", "persistence_mode"):
        return raw.lower()
    return raw


def parse_smi(text: str, fields: List[Tuple[str, str]], source: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {"backend": value("nvidia-smi", source)}
    rows = [line for line in text.splitlines() if line.strip()]
    out["count"] = value(len(rows), source)
    nested: Dict[str, Dict[str, Any]] = {}
    for index, line in enumerate(rows):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            raise ValueError("nvidia-smi row has %d cells, expected %d" % (len(cells), len(fields)))
        for (_query, key), cell in zip(fields, cells):
            if key == "driver_version":
                out.setdefault("driver_version", capture(source, _smi_value, cell, key))
                continue
            name = "devices.%d.%s" % (index, key)
            field = capture(source, _smi_value, cell, key)
            if "." in key:  # clocks_max_mhz.graphics -> one dict field, like NVML's
                parent, _, sub = name.rpartition(".")
                if "value" in field:
                    nested.setdefault(parent, {})[sub] = field["value"]
                continue
            out[name] = field
    for parent, clocks in nested.items():
        out[parent] = value(clocks, source)
    out.setdefault("driver_version", unavailable("no GPU rows", source))
    out["nvml_version"] = unavailable("not reported by the nvidia-smi fallback", source)
    out["cuda_driver_version"] = unavailable("not reported by the nvidia-smi fallback", source)
    return out


def _collect_smi(ctx: Context) -> Dict[str, Any]:
    fields = list(SMI_QUERY)
    rc, out, err = _run_smi(ctx, [q for q, _ in fields])
    if rc != 0 and "compute_cap" in (err + out):  # drivers before 510 do not know compute_cap
        fields = [f for f in fields if f[0] != "compute_cap"]
        rc, out, err = _run_smi(ctx, [q for q, _ in fields])
    if rc != 0:
        raise RuntimeError("nvidia-smi exited %d: %s" % (rc, (err or out).strip().splitlines()[:1]))
    return parse_smi(out, fields, "nvidia-smi --query-gpu")


def _kernel_module(ctx: Context) -> str:
    path = "/proc/driver/nvidia/version"
    if not ctx.exists(path):
        raise Unavailable("no NVIDIA kernel module (%s absent)" % path)
    m = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?([0-9][0-9.]+)", ctx.read_text(path))
    if not m:
        raise ValueError("no version in %s" % path)
    return m.group(1)


def collect_gpu(ctx: Context) -> Dict[str, Any]:
    reasons: List[str] = []
    section: Optional[Dict[str, Any]] = None
    nvml_error = None
    try:
        section = _collect_nvml(ctx)
    except Unavailable as exc:
        reasons.append(str(exc))
    except Exception as exc:
        nvml_error = describe(exc)
        reasons.append(nvml_error)
    if section is None:
        try:
            section = _collect_smi(ctx)
            if reasons:
                section["fallback_reason"] = value(reasons[0], "ctypes " + NVML_LIBRARY)
        except Unavailable as exc:
            reasons.append(str(exc))
        except Exception as exc:
            reasons.append("nvidia-smi: " + describe(exc))
    if section is None:
        why = "; ".join(reasons)
        src = "ctypes %s, nvidia-smi" % NVML_LIBRARY
        make = (lambda: {"error": why, "source": src}) if nvml_error else (lambda: unavailable(why, src))
        section = {k: make() for k in ("backend", "driver_version", "count")}
    ctx.cache["gpu_devices"] = devices_of(section)
    section["kernel_module"] = capture(ctx.path("/proc/driver/nvidia/version"), _kernel_module, ctx)
    drv = section.get("driver_version", {})
    if "value" in drv:
        section["driver_major"] = value(drv["value"].split(".")[0], drv["source"] + " (first component)")
    else:
        section["driver_major"] = dict(drv)
    return section


def devices_of(section: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The GPUs a gpu section read, in NVML's order: index, model, compute capability and UUID (None where a
    field was not read), for the collectors that map device names to GPUs (envpin.probe.distributed)."""
    count = section.get("count", {}).get("value")
    out: List[Dict[str, Any]] = []
    for index in range(count if isinstance(count, int) else 0):
        device: Dict[str, Any] = {"index": index}
        for key, name in (("name", "name"), ("cc", "compute_capability"), ("uuid", "uuid")):
            got = section.get("devices.%d.%s" % (index, name), {}).get("value")
            device[key] = got if isinstance(got, str) else None
        out.append(device)
    return out
