"""CPU model, feature flags, x86-64 ISA level and the CPUs this process may use.

On CPU the ISA level and the SIMD flags decide which kernels oneDNN, Eigen and MKL dispatch to, and the
usable CPU count decides how reductions are split between threads: both change numerical results.
"""

import os
import re
from typing import Any, Dict, List, Set

from envpin.probe._common import Context, Unavailable, capture, value

# x86-64 micro-architecture levels (psABI), spelled as /proc/cpuinfo spells the flags
# ("abm" is how Linux shows LZCNT; "lahf_lm" is LAHF/SAHF in long mode).
ISA_LEVELS = (
    ("x86-64-v1", ("lm", "cmov", "cx8", "fpu", "fxsr", "mmx", "sse", "sse2")),
    ("x86-64-v2", ("cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3")),
    ("x86-64-v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")),
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
)

# Flags that change which arithmetic kernels get dispatched (x86 and Arm spellings).
_SIMD = re.compile(
    r"^(sse|ssse|avx|fma|f16c|amx|vnni|bmi|popcnt|abm|movbe|xop|asimd|sve|sme(?!p)|bf16|i8mm|dotprod|fp$|fphp$)"
)


def isa_level(flags: Set[str]) -> str:
    """The highest x86-64-vN whose every flag (and every lower level's) is present."""
    level = None
    for name, required in ISA_LEVELS:
        if all(f in flags for f in required):
            level = name
        else:
            break
    if level is None:
        raise ValueError("flags lack the x86-64 baseline (lm, cmov, sse2...)")
    return level


def parse_cpuinfo(text: str) -> Dict[str, Any]:
    """First processor's identity plus the processor, socket and physical core counts."""
    blocks = [b for b in re.split(r"\n\s*\n", text) if b.strip()]
    if not blocks:
        raise ValueError("empty cpuinfo")
    first: Dict[str, str] = {}
    for line in blocks[0].splitlines():
        key, sep, val = line.partition(":")
        if sep:
            first.setdefault(key.strip(), val.strip())
    sockets = set()
    cores = set()
    processors = 0
    for block in blocks:
        fields = {}
        for line in block.splitlines():
            key, sep, val = line.partition(":")
            if sep:
                fields[key.strip()] = val.strip()
        if "processor" in fields:
            processors += 1
            sockets.add(fields.get("physical id", "0"))
            cores.add((fields.get("physical id", "0"), fields.get("core id", fields["processor"])))
    flags = (first.get("flags") or first.get("Features") or "").split()
    if not flags:
        raise ValueError("no flags/Features line in cpuinfo")
    return {
        "vendor": first.get("vendor_id") or first.get("CPU implementer") or "unknown",
        "model": first.get("model name") or first.get("CPU part") or first.get("Processor") or "unknown",
        "family_model_stepping": "%s/%s/%s"
        % (first.get("cpu family", "-"), first.get("model", "-"), first.get("stepping", "-")),
        "microcode": first.get("microcode", "unknown"),
        "flags": sorted(set(flags)),
        "processors": processors,
        "sockets": len(sockets),
        "physical_cores": len(cores),
    }


def _affinity() -> List[int]:
    if not hasattr(os, "sched_getaffinity"):
        raise Unavailable("os.sched_getaffinity is not available on this platform")
    return sorted(os.sched_getaffinity(0))


def _ranges(cpus: List[int]) -> str:
    """[0,1,2,5] -> '0-2,5' (the cpuset notation)."""
    spans: List[List[int]] = []  # [first, last] of each run of consecutive numbers
    for c in cpus:
        if spans and c == spans[-1][1] + 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return ",".join(str(first) if first == last else "%d-%d" % (first, last) for first, last in spans)


def collect_cpu(ctx: Context) -> Dict[str, Any]:
    src = ctx.path("/proc/cpuinfo")
    info = capture(src, lambda: parse_cpuinfo(ctx.read_text("/proc/cpuinfo")))
    section: Dict[str, Any] = {}
    if "value" in info:
        v = info["value"]
        flags = set(v["flags"])
        for key in ("vendor", "model", "family_model_stepping", "microcode", "sockets", "physical_cores"):
            section[key] = value(v[key], src)
        section["flags"] = value(" ".join(v["flags"]), src)
        section["simd_flags"] = value(" ".join(f for f in v["flags"] if _SIMD.match(f)), src)
        machine = os.uname().machine
        if machine in ("x86_64", "amd64", "AMD64"):
            section["isa_level"] = capture(src + " flags", isa_level, flags)
        else:
            section["isa_level"] = {"unavailable": "not x86-64 (%s)" % machine, "source": "os.uname().machine"}
    else:
        for key in ("model", "flags", "simd_flags", "isa_level"):
            section[key] = dict(info)
    section["logical_cpus"] = value(os.cpu_count(), "os.cpu_count()")
    aff = capture("os.sched_getaffinity(0)", _affinity)
    if "value" in aff:
        section["affinity_cpus"] = value(len(aff["value"]), aff["source"])
        section["affinity"] = value(_ranges(aff["value"]), aff["source"])
    else:
        section["affinity_cpus"] = aff
    return section
