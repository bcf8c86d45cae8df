"""The device class of this process: the key a golden hash (and a per-replica hash) is stored under.

Standard library only (Python 3.6+); the functions that take ``tf`` read what an imported TensorFlow
reports. The format is envpin.portable.device's (the one rule): GPU model + compute capability, or CPU ISA
level + thread settings + oneDNN setting. On CPU the class has to include the thread settings and oneDNN:
Eigen and oneDNN split reductions by the number of threads, and oneDNN's kernels sum in a different order
than Eigen's, so either changes the float32 rounding and therefore the final weights.
"""

import os
import platform
import subprocess
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from envpin.portable import device

# oneDNN-relevant extensions beyond the psABI level: oneDNN dispatches different kernels for them.
_ONEDNN_FEATURES = ("avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


# --------------------------------------------------------------------------------------- device class


def _cpu_flags() -> List[str]:
    try:
        with open("/proc/cpuinfo", "rb") as fh:
            text = fh.read(4 * 1024 * 1024).decode("utf-8", "replace")
    except OSError:
        return []
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return sorted(set(val.split()))
    return []


def cpu_isa(flags: Optional[Sequence[str]] = None, machine: Optional[str] = None) -> str:
    """'x86-64-v4+amx_bf16+avx512_bf16+...' on x86-64; the machine name plus a few SIMD features on Arm."""
    flags = _cpu_flags() if flags is None else list(flags)
    machine = machine or platform.machine() or "unknown"
    if machine in device.X86_64:
        from envpin.probe.cpu import isa_level

        try:
            level = isa_level(set(flags))
        except ValueError:
            level = "x86-64"
        extras = [f for f in _ONEDNN_FEATURES if f in flags]
        return "+".join([level, *extras])
    extras = [f for f in ("asimd", "sve", "sve2", "bf16", "i8mm", "sme") if f in flags]
    return "+".join([machine, *extras])


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _threads_field(explicit: Optional[int], env_value: Optional[str]) -> str:
    if explicit is not None and explicit > 0:
        return str(explicit)
    # Not set: TensorFlow sizes the pool from the CPUs this process may use. The class holds the effective
    # count, so "not set" on a 2-CPU machine and an explicit 2 compare equal (measured: same weights).
    return device.thread_count(env_value, str(usable_cpus()))


def _threads_source(explicit: Optional[int], env_name: str) -> str:
    if explicit is not None and explicit > 0:
        return "argument"
    raw = os.environ.get(env_name, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return env_name
    return "default (usable CPUs)"


def onednn_setting(
    tf_version: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
    machine: Optional[str] = None,
    flags: Optional[Sequence[str]] = None,
) -> str:
    """'on' or 'off' as TensorFlow will decide it: TF_ENABLE_ONEDNN_OPTS wins; unset, the default rule of
    :func:`envpin.portable.device.onednn_default` for this CPU; 'unknown' without a TensorFlow version."""
    env = os.environ if environ is None else environ
    explicit = device.onednn_switch(env.get("TF_ENABLE_ONEDNN_OPTS"))
    if explicit is not None:
        return explicit
    if tf_version is None:
        from envpin.probe.runtime import installed_tf_version

        tf_version = installed_tf_version()
    return device.onednn_default(tf_version, _cpu_flags() if flags is None else flags, machine or platform.machine())


def _nvidia_smi_gpus() -> List[Tuple[str, str]]:
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if proc.returncode != 0:
        return []
    gpus = []
    for line in proc.stdout.splitlines():
        name, _, cc = line.partition(",")
        if name.strip():
            gpus.append((name.strip(), cc.strip()))
    return gpus


def device_class(
    gpus: Optional[Sequence[Tuple[str, str]]] = None,
    intra_op: Optional[int] = None,
    inter_op: Optional[int] = None,
    onednn: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
    cpu: Optional[str] = None,
) -> str:
    """The key a golden hash is stored under: machines with equal classes should train bit-identically.

    The format is envpin.portable.device's (the one rule). Without arguments the GPUs come from nvidia-smi
    and the rest from this process's environment; the golden child passes what TensorFlow itself reports
    (a CPU-only TF on a GPU host trains on the CPU).
    """
    env = os.environ if environ is None else environ
    if gpus is None:
        gpus = _nvidia_smi_gpus()
    if gpus:
        return device.device_class(gpus, "", "", "", "")
    return device.device_class(
        [],
        cpu or cpu_isa(),
        _threads_field(intra_op, env.get("TF_NUM_INTRAOP_THREADS")),
        _threads_field(inter_op, env.get("TF_NUM_INTEROP_THREADS")),
        onednn or onednn_setting(environ=env),
    )


def tf_gpus(tf: Any) -> List[Tuple[str, str]]:
    lister = getattr(getattr(tf, "config", None), "list_physical_devices", None) or getattr(
        getattr(getattr(tf, "config", None), "experimental", None), "list_physical_devices", None
    )
    if lister is None:
        return []
    gpus = []
    for dev in lister("GPU"):
        name, cc = dev.name, ""
        details = getattr(tf.config.experimental, "get_device_details", None)
        if details is not None:
            d = details(dev)
            name = d.get("device_name", name)
            if d.get("compute_capability"):
                cc = "%d.%d" % tuple(d["compute_capability"])
        gpus.append((name, cc))
    return gpus


def onednn_from_tf(tf_version: str) -> str:
    """TensorFlow's own answer once it is imported; the documented rule only where it cannot tell."""
    from envpin.probe.tf import onednn_enabled

    enabled = onednn_enabled()
    if enabled is None:
        return onednn_setting(tf_version)
    return "on" if enabled else "off"
