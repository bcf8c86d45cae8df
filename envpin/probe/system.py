"""Operating system, kernel, C library, container, memory and cgroup limits, and the volatile host facts."""

import datetime
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from envpin.probe._common import Context, Unavailable, capture, value


def _os_release(ctx: Context) -> Dict[str, str]:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        if ctx.exists(path):
            text = ctx.read_text(path)
            break
    else:
        raise Unavailable("no /etc/os-release")
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Z0-9_]+)=(.*)$", line.strip())
        if m and m.group(1) in ("ID", "VERSION_ID", "VERSION_CODENAME", "PRETTY_NAME", "ID_LIKE"):
            out[m.group(1).lower()] = m.group(2).strip().strip("\"'")
    if not out:
        raise ValueError("no KEY=value lines in os-release")
    return out


def _glibc() -> str:
    # confstr asks the running C library itself; platform.libc_ver() would scan the interpreter binary.
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        text = None
    if not text:
        raise Unavailable("not a GNU C library (musl or other)")
    return text.replace("glibc ", "")


def _dmi(ctx: Context) -> Dict[str, str]:
    out = {}
    for name in ("sys_vendor", "product_name"):
        path = "/sys/class/dmi/id/" + name
        if ctx.exists(path):
            out[name] = ctx.read_text(path).strip()
    if not out:
        raise Unavailable("no /sys/class/dmi/id")
    return out


def collect_os(ctx: Context) -> Dict[str, Any]:
    uname = os.uname()
    return {
        "release": capture(ctx.path("/etc/os-release"), _os_release, ctx),
        "kernel": value(uname.release, "os.uname().release"),
        "kernel_version": value(uname.version, "os.uname().version"),
        "arch": value(uname.machine, "os.uname().machine"),
        "glibc": capture("os.confstr(CS_GNU_LIBC_VERSION)", _glibc),
        "dmi": capture(ctx.path("/sys/class/dmi/id"), _dmi, ctx),
    }


def collect_host(ctx: Context) -> Dict[str, Any]:
    """Facts that differ per machine or per run; they are reported but never fingerprinted."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return {
        "hostname": value(os.uname().nodename, "os.uname().nodename"),
        "time_utc": value(now.strftime("%Y-%m-%dT%H:%M:%SZ"), "datetime.now(utc)"),
        "pid": value(os.getpid(), "os.getpid()"),
        "boot_id": capture(
            ctx.path("/proc/sys/kernel/random/boot_id"),
            lambda: ctx.read_text("/proc/sys/kernel/random/boot_id").strip(),
        ),
        "uptime_s": capture(
            ctx.path("/proc/uptime"), lambda: round(float(ctx.read_text("/proc/uptime").split()[0]), 1)
        ),
    }


# --- containers -------------------------------------------------------------------------------------------

_CGROUP_HINTS = (
    ("kubepods", "kubernetes"),
    ("docker", "docker"),
    ("libpod", "podman"),
    ("containerd", "containerd"),
    ("lxc", "lxc"),
    ("garden", "garden"),
)


# Apptainer sets these in every container it starts, under both prefixes (SINGULARITY_* for compatibility);
# SingularityCE sets the SINGULARITY_* ones only. The host's own Apptainer settings use other names
# (APPTAINER_BIND, APPTAINER_CACHEDIR...), so a shell on the host does not carry these.
# https://apptainer.org/docs/user/main/environment_and_metadata.html
_APPTAINER_VARS = ("APPTAINER_CONTAINER", "APPTAINER_NAME")
_SINGULARITY_VARS = ("SINGULARITY_CONTAINER", "SINGULARITY_NAME")
# Every Apptainer/Singularity image holds its metadata (environment scripts, runscript, labels.json) here.
_SINGULARITY_DIR = "/.singularity.d"


def _apptainer(ctx: Context) -> Tuple[Optional[str], List[str], Optional[str]]:
    """(runtime, evidence, image file) from what Apptainer and SingularityCE leave in every container."""
    evidence = ["environ:" + name for name in _APPTAINER_VARS + _SINGULARITY_VARS if ctx.environ.get(name)]
    runtime: Optional[str] = None
    if any(ctx.environ.get(name) for name in _APPTAINER_VARS):
        runtime = "apptainer"
    elif any(ctx.environ.get(name) for name in _SINGULARITY_VARS):
        runtime = "singularity"
    if os.path.isdir(ctx.path(_SINGULARITY_DIR)):
        evidence.append(_SINGULARITY_DIR)
        runtime = runtime or "apptainer or singularity"
        if any(n.startswith("libcuda.so") for n in _listdir(ctx.path(_SINGULARITY_DIR + "/libs"))):
            evidence.append(_SINGULARITY_DIR + "/libs holds the host's libcuda (--nv)")
    image = ctx.environ.get("APPTAINER_CONTAINER") or ctx.environ.get("SINGULARITY_CONTAINER") or None
    return runtime, evidence, image


def _listdir(path: str) -> List[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _container(ctx: Context) -> Dict[str, Any]:
    # Apptainer first: it passes the host's environment in (container=..., KUBERNETES_SERVICE_HOST) and
    # shares the host's /proc/1 unless --pid, so the other signals describe the host, not this container.
    runtime, evidence, image = _apptainer(ctx)
    if ctx.exists("/.dockerenv"):
        evidence.append("/.dockerenv")
        runtime = runtime or "docker"
    if ctx.exists("/run/.containerenv"):
        evidence.append("/run/.containerenv")
        runtime = runtime or "podman"
    kind = ctx.environ.get("container")
    if kind:
        evidence.append("environ:container=" + kind)
        runtime = runtime or kind
    if ctx.environ.get("KUBERNETES_SERVICE_HOST"):
        evidence.append("environ:KUBERNETES_SERVICE_HOST")
        runtime = runtime or "kubernetes"
    for path in ("/proc/1/cgroup", "/proc/self/cgroup"):
        try:
            text = ctx.read_text(path)
        except (IOError, OSError):
            continue
        for needle, name in _CGROUP_HINTS:
            if needle in text:
                evidence.append("%s mentions %s" % (path, needle))
                runtime = runtime or name
                break
    container_id = None
    try:
        mountinfo = ctx.read_text("/proc/self/mountinfo")
    except (IOError, OSError):
        mountinfo = ""
    for line in mountinfo.splitlines():
        parts = line.split()
        if len(parts) > 4 and parts[4] == "/" and " - overlay " in line:
            evidence.append("/proc/self/mountinfo: overlay root filesystem")
            runtime = runtime or "unknown (overlay root)"
        m = re.search(r"/(?:docker/)?containers/([0-9a-f]{64})/", line)
        if m and container_id is None:
            container_id = m.group(1)
    # The NVIDIA container runtime mounts the driver in; NVIDIA_VISIBLE_DEVICES alone is only the image's ask.
    if ctx.exists("/dev/nvidiactl") or ctx.exists("/proc/driver/nvidia/version"):
        gpu_runtime = "nvidia"
    elif ctx.environ.get("NVIDIA_VISIBLE_DEVICES"):
        gpu_runtime = "requested (NVIDIA_VISIBLE_DEVICES set) but no NVIDIA driver visible"
    else:
        gpu_runtime = None
    return {
        "in_container": runtime is not None,
        "runtime": runtime or "none",
        "gpu_runtime": gpu_runtime or "none",
        "evidence": sorted(set(evidence)),
        "container_id": container_id or "unknown",
        # The image file the runtime says it started (Apptainer/Singularity: a path on the host).
        "image": image or "unknown",
    }


def collect_container(ctx: Context) -> Dict[str, Any]:
    field = capture(
        "$APPTAINER_*/$SINGULARITY_*, /.singularity.d, /.dockerenv, /run/.containerenv, "
        "/proc/1/cgroup, /proc/self/mountinfo",
        _container,
        ctx,
    )
    if "value" not in field:
        return {"detection": field}
    src = field["source"]
    return {k: value(v, src) for k, v in field["value"].items()}


# --- memory and cgroup limits ------------------------------------------------------------------------------


def _meminfo(ctx: Context) -> Dict[str, int]:
    out = {}
    for line in ctx.read_text("/proc/meminfo").splitlines():
        m = re.match(r"^(MemTotal|SwapTotal|HugePages_Total|Hugepagesize):\s+(\d+)\s*(kB)?", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * (1024 if m.group(3) else 1)
    if "MemTotal" not in out:
        raise ValueError("no MemTotal line in /proc/meminfo")
    return out


def collect_memory(ctx: Context) -> Dict[str, Any]:
    field = capture(ctx.path("/proc/meminfo"), _meminfo, ctx)
    if "value" not in field:
        return {"total_bytes": field}
    v = field["value"]
    return {
        "total_bytes": value(v["MemTotal"], field["source"]),
        "swap_bytes": value(v.get("SwapTotal", 0), field["source"]),
        "hugepages": value(v.get("HugePages_Total", 0), field["source"]),
    }


def cgroup_paths(ctx: Context) -> Tuple[Optional[str], Dict[str, str]]:
    """(v2 path or None, {v1 controller: path}) from /proc/self/cgroup."""
    v2 = None
    v1: Dict[str, str] = {}
    for line in ctx.read_text("/proc/self/cgroup").splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            v2 = path
        else:
            for c in controllers.split(","):
                if c:
                    v1[c] = path
    return v2, v1


def _first_file(ctx: Context, candidates: List[str]) -> Tuple[str, str]:
    for path in candidates:
        if os.path.isfile(ctx.path(path)):
            return path, ctx.read_text(path).strip()
    raise Unavailable("none of " + ", ".join(candidates))


def _cgroup_candidates(base: str, rel: str, name: str) -> List[str]:
    # Inside a container the cgroup namespace may show the host's path while mounting the leaf at base.
    out = []
    if rel and rel != "/":
        out.append(base.rstrip("/") + "/" + rel.strip("/") + "/" + name)
    out.append(base.rstrip("/") + "/" + name)
    return out


def _v1_base(ctx: Context, controller: str) -> str:
    for base in ("/sys/fs/cgroup/" + controller, "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct,cpu"):
        if os.path.isdir(ctx.path(base)):
            return base
    raise Unavailable("no cgroup v1 %s hierarchy mounted" % controller)


def _cpu_limit(ctx: Context) -> Dict[str, Any]:
    v2, v1 = cgroup_paths(ctx)
    if "cpu" in v1:
        base = _v1_base(ctx, "cpu")
        qpath, quota = _first_file(ctx, _cgroup_candidates(base, v1["cpu"], "cpu.cfs_quota_us"))
        _, period = _first_file(ctx, _cgroup_candidates(base, v1["cpu"], "cpu.cfs_period_us"))
        cpus = None if int(quota) < 0 else round(int(quota) / float(int(period)), 3)
        return {"cgroup": "v1", "cpus": "max" if cpus is None else cpus, "file": qpath}
    if v2 is not None and os.path.isfile(ctx.path("/sys/fs/cgroup/cgroup.controllers")):
        path, text = _first_file(ctx, _cgroup_candidates("/sys/fs/cgroup", v2, "cpu.max"))
        quota, _, period = text.partition(" ")
        limit = "max" if quota == "max" else round(int(quota) / float(int(period or "100000")), 3)
        return {"cgroup": "v2", "cpus": limit, "file": path}
    raise Unavailable("no cgroup CPU controller visible")


def _memory_limit(ctx: Context) -> Dict[str, Any]:
    v2, v1 = cgroup_paths(ctx)
    if "memory" in v1:
        base = _v1_base(ctx, "memory")
        path, text = _first_file(ctx, _cgroup_candidates(base, v1["memory"], "memory.limit_in_bytes"))
        limit = int(text)
        # v1 reports "unlimited" as a page-aligned number near 2**63.
        return {"cgroup": "v1", "bytes": "max" if limit >= 2**62 else limit, "file": path}
    if v2 is not None and os.path.isfile(ctx.path("/sys/fs/cgroup/cgroup.controllers")):
        path, text = _first_file(ctx, _cgroup_candidates("/sys/fs/cgroup", v2, "memory.max"))
        return {"cgroup": "v2", "bytes": "max" if text == "max" else int(text), "file": path}
    raise Unavailable("no cgroup memory controller visible")


def _cpuset(ctx: Context) -> str:
    v2, v1 = cgroup_paths(ctx)
    if "cpuset" in v1:
        base = _v1_base(ctx, "cpuset")
        return _first_file(ctx, _cgroup_candidates(base, v1["cpuset"], "cpuset.cpus"))[1]
    if v2 is not None:
        cands = _cgroup_candidates("/sys/fs/cgroup", v2, "cpuset.cpus.effective")
        return _first_file(ctx, cands)[1]
    raise Unavailable("no cgroup cpuset visible")


def collect_limits(ctx: Context) -> Dict[str, Any]:
    src = ctx.path("/proc/self/cgroup") + " + " + ctx.path("/sys/fs/cgroup")
    return {
        "cpu": capture(src, _cpu_limit, ctx),
        "memory": capture(src, _memory_limit, ctx),
        "cpuset": capture(src, _cpuset, ctx),
    }
