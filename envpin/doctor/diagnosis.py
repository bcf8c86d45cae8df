"""What the host's readings mean for one image: will run, will run through forward compatibility, will not
run, or cannot tell, each check with what to do about it.

:func:`diagnose` compares :class:`envpin.doctor.readings.Readings` with the catalog's facts for the image
and is pure, so every verdict can be tested with readings of hosts that do not exist here (old drivers,
consumer GPUs). Nothing is guessed: a catalog fact that is unknown, or a GPU/driver that is not visible,
makes the verdict "cannot tell" with what is missing and how to find it out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from envpin.doctor.readings import CDI_DIRS, GPU_HOOKS, Readings, read_host
from envpin.environment import lockfile
from envpin.errors import LockError, UsageError, param
from envpin.knowledge import catalog
from envpin.portable.versions import parse_version
from envpin.record import Value

WILL_RUN = "will run"
FORWARD_COMPAT = "will run through forward compatibility (data-center GPUs only)"
WILL_NOT_RUN = "will not run"
CANNOT_TELL = "cannot tell"
#: Exit status per verdict. "cannot tell" is not 0, so a script gating a pull does not go ahead on it, and not
#: 1 either, so that a script can tell "this host cannot run it" from "find out more first" (2 is bad input).
EXIT_CODES = {WILL_RUN: 0, FORWARD_COMPAT: 0, WILL_NOT_RUN: 1, CANNOT_TELL: 3}
FORWARD_COMPAT_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/"
TOOLKIT_DOC = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"

#: GPU classes by marketing name, first match wins. CUDA forward compatibility applies only to data-center
#: GPUs (and select NGC-Ready RTX server SKUs, which a name cannot distinguish); GeForce and TITAN never.
GPU_CLASSES: tuple[tuple[str, str], ...] = (
    (r"\bGeForce\b", "consumer"),
    (r"\bTITAN\b", "consumer"),
    (r"\bTesla\b", "data-center"),
    (
        r"\b(?:A100|A800|A30|A40|A10G?|A16|A2|H100|H800|H200|H20|GH200|B100|B200|GB200|L4|L40S?|L20|"
        r"T4|V100S?|P100|P40|P4|P6|K80|K40|M60|M40|M10)\b",
        "data-center",
    ),
    (r"\b(?:Quadro|RTX\s+A\d+|RTX\s+PRO|RTX\s+\d+\s+Ada)\b", "workstation"),
)
_GPU_CLASS_RE = tuple((re.compile(pattern, re.IGNORECASE), cls) for pattern, cls in GPU_CLASSES)
_CLASS_WHY = {
    "consumer": "a consumer GPU (GeForce/TITAN): CUDA forward compatibility does not work on it",
    "workstation": "a workstation GPU: forward compatibility covers only select NGC-Ready RTX server SKUs, "
    "which the name does not tell apart",
    "unknown": "a GPU envpin does not classify: forward compatibility covers only data-center GPUs",
}
#: A branch as the notes write it: a version, or BRANCH.xx, optionally followed by '+'.
_BRANCH = re.compile(r"([0-9][0-9.]*?)(\.xx)?\+?\Z")


def gpu_class(name: str) -> str:
    """'data-center', 'consumer', 'workstation' or 'unknown', from GPU_CLASSES."""
    for pattern, cls in _GPU_CLASS_RE:
        if pattern.search(name):
            return cls
    return "unknown"


# -- the image's requirements --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Target(Value):
    """The facts doctor needs about one image (or all tags of one release, when they agree)."""

    label: str
    release: str
    image: str
    driver_min: catalog.Fact
    driver_compat: catalog.Fact
    compute_capability_min: catalog.Fact
    source_url: str | None
    chosen_by: str
    #: "ngc", or "stock" for Docker Hub's tensorflow/tensorflow:X.Y.Z-gpu (release is then its tag).
    distribution: str = "ngc"

    def to_json(self) -> dict[str, Any]:
        def fact(f: catalog.Fact) -> dict[str, Any]:
            return {"value": f.value} if f.known else {"value": None, "reason": f.reason}

        return {
            "label": self.label,
            "release": self.release,
            "image": self.image,
            "chosen_by": self.chosen_by,
            "source": self.source_url,
            "driver_min": fact(self.driver_min),
            "driver_compat": fact(self.driver_compat),
            "compute_capability_min": fact(self.compute_capability_min),
        }


_FACTS = ("driver_min", "driver_compat", "compute_capability_min")


def target_from_ngc(ngc: str, cat: catalog.Catalog | None = None) -> Target:
    """A release or tag; a release with several tags is fine when their driver/GPU facts agree."""
    cat = cat or catalog.load()
    from envpin.knowledge.stock import refuse_as_ngc

    refuse_as_ngc(ngc)
    return _target(cat.select(ngc), f"{param('ngc')} {ngc}")


def target_from_stock(spec: str) -> Target:
    """A stock TensorFlow GPU image (--stock 2.20, 2.20.0-gpu): its minimum driver from NVIDIA's CUDA release
    notes for the CUDA TensorFlow built it against (envpin.knowledge.stock)."""
    from envpin.knowledge import stock

    return _target([stock.load().select(spec)], f"{param('stock')} {spec}")


def target_from_lock(path: Path, cat: catalog.Catalog | None = None) -> Target:
    """The image an envpin.lock was made for (a folder means its envpin.lock), from a lock re-derived first."""
    from envpin.environment.render import checked_lock

    cat = cat or catalog.load()
    lock_path = path / lockfile.LOCK_NAME if path.is_dir() else path
    inputs = checked_lock(lock_path)[0].inputs
    release, flavor = inputs.release, inputs.flavor
    from envpin.knowledge import stock

    if stock.is_stock_flavor(flavor):
        return _target([stock.load().select(inputs.tag)], f"{param('lock')} {lock_path}")
    entries = [e for e in cat.release_entries(release) if e.flavor == flavor]  # a lock names one tag
    if not entries:
        raise LockError(
            f"{lock_path} asks for {release} {flavor}, which the catalog does not hold",
            hint="is this lock from a newer envpin? upgrade envpin",
        )
    return _target(entries, f"{param('lock')} {lock_path}")


def _target(entries: list[catalog.Entry], chosen_by: str) -> Target:
    first = entries[0]
    for e in entries[1:]:
        if any(e.facts[k] != first.facts[k] for k in _FACTS):
            raise UsageError(
                f"the tags of NGC {first.release} differ in their driver or GPU requirements",
                hint="name the tag, e.g. " + ", ".join(f"{param('ngc')} {x.tag}" for x in entries),
            )
    label = first.tag if len(entries) == 1 else f"NGC {first.release} ({', '.join(e.tag for e in entries)})"
    image = first.image if len(entries) == 1 else f"{first.image.rsplit(':', 1)[0]}:{first.release}-*"
    url = next((first.source_url(k) for k in _FACTS if first.source_url(k)), None)
    if first.distribution == "stock":  # named by its tag: "2.20.0-gpu's minimum driver"
        return Target(
            label,
            first.tag,
            image,
            first.facts["driver_min"],
            first.facts["driver_compat"],
            first.facts["compute_capability_min"],
            url,
            chosen_by,
            "stock",
        )
    return Target(
        label,
        first.release,
        image,
        first.facts["driver_min"],
        first.facts["driver_compat"],
        first.facts["compute_capability_min"],
        url,
        chosen_by,
    )


# -- driver versions and forward-compatible branches ------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Branch(Value):
    """One forward-compatible driver branch as NVIDIA's notes write it.

    '450.51+' is R450 at 450.51 or later; '384.111+' R384 at 384.111 or later; '418.xx' and a bare '410'
    any driver of that branch; '440.30' (a version without '+') that driver or a later one of R440.
    """

    text: str
    branch: int
    minimum: tuple[int, ...] | None  # None: any driver of the branch

    def covers(self, version: tuple[int, ...]) -> bool:
        return version[0] == self.branch and (self.minimum is None or version >= self.minimum)

    def describe(self) -> str:
        if self.minimum is None:
            return f"any R{self.branch} driver"
        return f"R{self.branch} at {'.'.join(map(str, self.minimum))} or later"


def parse_branch(text: str) -> Branch | None:
    m = _BRANCH.match(text.strip())
    version = parse_version(m.group(1), exact=True) if m else None
    if m is None or version is None:
        return None
    if m.group(2) or len(version) == 1:  # '418.xx', '410': any driver of the branch
        return Branch(text, version[0], None)
    return Branch(text, version[0], version)


# -- the diagnosis ----------------------------------------------------------------------------------
OK, FORWARD, PROBLEM, UNKNOWN = "ok", "forward-compat", "problem", "unknown"


@dataclass(frozen=True, slots=True)
class Check(Value):
    """One thing checked. `fix` says what to do (problem) or how to find out (unknown)."""

    name: str
    status: str
    message: str
    fix: str | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis(Value):
    target: Target
    readings: Readings
    checks: tuple[Check, ...]
    verdict: str
    reasons: tuple[Check, ...]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "target": self.target.to_json(),
            "reasons": [asdict(c) for c in self.reasons],
            "checks": [asdict(c) for c in self.checks],
            "readings": self.readings.to_json(),
            "compose": self.readings.compose_advice,
        }


def diagnose(target: Target, readings: Readings) -> Diagnosis:
    """Compare host readings with the image's requirements. Pure: no I/O."""
    checks = tuple(_checks(target, readings))
    for status, verdict in ((PROBLEM, WILL_NOT_RUN), (UNKNOWN, CANNOT_TELL), (FORWARD, FORWARD_COMPAT)):
        reasons = tuple(c for c in checks if c.status == status)
        if reasons:
            return Diagnosis(target, readings, checks, verdict, reasons)
    return Diagnosis(target, readings, checks, WILL_RUN, checks)


def _checks(t: Target, r: Readings) -> Iterator[Check]:
    yield _docker_check(r)
    driver = parse_version(r.driver_version, exact=True) if r.driver_version else None
    if r.driver_version is None:
        yield Check(
            "driver",
            UNKNOWN,
            f"no NVIDIA driver or GPU is visible on this host: {r.driver_problem}",
            "run `nvidia-smi` on the machine that will run the container: it prints the driver "
            f"version and the GPUs{_needs(t)}; if it fails there, install the NVIDIA driver",
        )
    elif driver is None:
        yield Check(
            "driver",
            UNKNOWN,
            f"the driver version '{r.driver_version}' ({r.driver_source}) is not a dotted number",
            "check it with `nvidia-smi --query-gpu=driver_version --format=csv`",
        )
    else:
        yield from _driver_checks(t, r, driver)
    yield from _gpu_checks(t, r)
    yield _runtime_check(r)


def _needs(t: Target) -> str:
    return f" ({t.release} needs driver {t.driver_min.value} or later)" if t.driver_min.known else ""


def _docker_check(r: Readings) -> Check:
    d = r.docker
    if d.reachable:
        return Check("docker", OK, f"Docker {d.version or '(version not reported)'} is reachable")
    return Check(
        "docker",
        PROBLEM,
        d.problem or "the Docker engine is not reachable",
        d.hint or "start the Docker engine, or set DOCKER_HOST",
    )


def _runtime_check(r: Readings) -> Check:
    found = []
    if "nvidia" in r.docker.runtimes:
        found.append("the 'nvidia' runtime is registered with Docker")
    if r.container_hooks:
        found.append(f"{', '.join(r.container_hooks)} is installed (docker run --gpus)")
    if r.cdi_specs:
        note = (
            ""
            if r.docker.cdi_spec_dirs or not r.docker.reachable
            else (
                "; this Docker reports no CDI spec directories, so only CDI-aware engines (Docker 25+ with CDI "
                "enabled, Podman) use them"
            )
        )
        found.append(f"CDI specs {', '.join(r.cdi_specs)}{note}")
    if found:
        return Check("gpu runtime", OK, "; ".join(found))
    where = "Docker lists no 'nvidia' runtime" if r.docker.reachable else "Docker could not be asked for runtimes"
    message = (
        f"no NVIDIA container runtime: {where}, no {'/'.join(GPU_HOOKS)} on PATH, no NVIDIA CDI spec in "
        f"{', '.join(CDI_DIRS)}"
    )
    fix = f"install the NVIDIA Container Toolkit and restart Docker ({TOOLKIT_DOC})"
    if r.driver_version is None and not r.gpus:
        # Expected on a machine without a GPU; what matters is the host that will run the container.
        return Check(
            "gpu runtime",
            UNKNOWN,
            message + " (expected on a host without an NVIDIA driver)",
            "check on the GPU host; " + fix,
        )
    return Check("gpu runtime", PROBLEM, message + ": containers cannot reach the GPUs", fix)


def _driver_checks(t: Target, r: Readings, driver: tuple[int, ...]) -> Iterator[Check]:
    have = f"driver {r.driver_version}"
    if not t.driver_min.known:
        yield Check(
            "driver",
            UNKNOWN,
            f"{have} is installed; {t.release}'s minimum driver: unknown: {t.driver_min.reason}",
            _find_out(t),
        )
        return
    minimum = parse_version(t.driver_min.value, exact=True)
    if minimum is None:
        yield Check(
            "driver", UNKNOWN, f"the catalog's minimum driver '{t.driver_min.value}' is not a version", _find_out(t)
        )
        return
    if driver >= minimum:
        yield Check("driver", OK, f"{have} meets {t.release}'s minimum {t.driver_min.value}")
        return
    older = f"{have} is older than {t.release}'s minimum {t.driver_min.value}"
    upgrade = f"install NVIDIA driver {t.driver_min.value} or later"
    if not t.driver_compat.known:
        yield Check(
            "driver",
            UNKNOWN,
            f"{older}; whether forward compatibility covers R{driver[0]} is unknown: {t.driver_compat.reason}",
            f"{upgrade}, or {_find_out(t)}",
        )
        return
    branches = [parse_branch(b) for b in t.driver_compat.value]
    if any(b is None for b in branches):
        yield Check(
            "driver",
            UNKNOWN,
            f"{older}; the catalog's forward-compatible branches {t.driver_compat.value} are not all driver branches",
            f"{upgrade}, or {_find_out(t)}",
        )
        return
    listed = "; ".join(b.describe() for b in branches if b is not None)
    same = [b for b in branches if b is not None and b.branch == driver[0]]
    if not same:
        yield Check(
            "driver",
            PROBLEM,
            f"{older}, and R{driver[0]} is not one of its forward-compatible branches ({listed})",
            f"{upgrade} (data-center GPUs: or a driver of {listed})",
        )
        return
    if not any(b.covers(driver) for b in same):
        yield Check(
            "driver",
            PROBLEM,
            f"{older}, and forward compatibility needs {same[0].describe()}",
            f"{upgrade}, or update within R{driver[0]} ({same[0].describe()}, data-center GPUs only)",
        )
        return
    yield from _forward_compat_checks(t, r, f"{older}; {same[0].describe()} is a forward-compatible branch")


def _forward_compat_checks(t: Target, r: Readings, why: str) -> Iterator[Check]:
    if not r.gpus:
        yield Check(
            "driver",
            UNKNOWN,
            f"{why}, but that works only on data-center GPUs and no GPU is visible",
            "run `nvidia-smi -L` to list the GPUs",
        )
        return
    yield Check("driver", FORWARD, f"{why} (the image's CUDA forward-compatibility package is used)")
    data_center = [str(g.index) for g in r.gpus if g.name and gpu_class(g.name) == "data-center"]
    only_those = (
        (f", or give the container only the data-center GPUs (docker run --gpus '\"device={','.join(data_center)}\"')")
        if data_center
        else ""
    )
    for g in r.gpus:
        label = f"gpu {g.index} forward compatibility"
        if g.name is None:
            yield Check(
                label,
                UNKNOWN,
                f"GPU {g.index}: its name could not be read ({g.problem}), so envpin "
                "cannot tell whether it is a data-center GPU",
                "run `nvidia-smi -L`",
            )
            continue
        cls = gpu_class(g.name)
        if cls == "data-center":
            yield Check(label, FORWARD, f"{g.name} is a data-center GPU: forward compatibility applies")
        elif cls == "consumer":
            yield Check(
                label,
                PROBLEM,
                f"{g.name} is {_CLASS_WHY[cls]} (CUDA error 804, cudaErrorCompatNotSupportedOnDevice)",
                f"install NVIDIA driver {t.driver_min.value} or later on this host{only_those}",
            )
        else:
            yield Check(
                label,
                UNKNOWN,
                f"{g.name} is {_CLASS_WHY[cls]}",
                f"check the GPU against {FORWARD_COMPAT_DOC}, or install driver {t.driver_min.value}+",
            )


def _gpu_checks(t: Target, r: Readings) -> Iterator[Check]:
    cc = t.compute_capability_min
    if r.driver_version is not None and not r.gpus:
        yield Check(
            "gpus",
            UNKNOWN,
            f"driver {r.driver_version} is loaded but no GPU is visible",
            "run `nvidia-smi -L`; check CUDA_VISIBLE_DEVICES and that the GPUs are not passed to a VM",
        )
    if not cc.known:
        yield Check(
            "compute capability",
            UNKNOWN,
            f"{t.release}'s minimum compute capability: unknown: {cc.reason}",
            _find_out(t),
        )
        return
    minimum = parse_version(cc.value, exact=True)
    for g in r.gpus:
        label, name = f"gpu {g.index}", g.name or f"GPU {g.index}"
        have = parse_version(g.compute_capability, exact=True) if g.compute_capability else None
        if minimum is None:
            yield Check(
                label, UNKNOWN, f"the catalog's minimum compute capability '{cc.value}' is not a version", _find_out(t)
            )
        elif have is None:
            why = g.problem or f"'{g.compute_capability}' is not a version"
            yield Check(
                label,
                UNKNOWN,
                f"{name}: compute capability could not be read ({why})",
                "run `nvidia-smi --query-gpu=name,compute_cap --format=csv` (driver 510+) or look the "
                "GPU up at https://developer.nvidia.com/cuda-gpus",
            )
        elif have < minimum:
            yield Check(
                label,
                PROBLEM,
                f"{name} has compute capability {g.compute_capability}; {t.release} needs {cc.value} or higher",
                f"use a GPU of compute capability {cc.value} or higher",
            )
        else:
            yield Check(label, OK, f"{name}: compute capability {g.compute_capability} meets {cc.value}")


def _find_out(t: Target) -> str:
    if t.distribution == "stock":
        return (
            f"check which drivers and GPUs {t.release} supports in TensorFlow's install guide "
            "(tensorflow.org/install) and NVIDIA's CUDA Toolkit release notes for the CUDA it was built against "
            "(`envpin catalog show " + t.release + "`)"
        )
    where = f" (NVIDIA's release note: {t.source_url})" if t.source_url else ""
    return f"read the Driver and GPU Requirements of NVIDIA's TensorFlow release notes for {t.release}{where}"


# -- entry point ----------------------------------------------------------------------------------------
def run(
    ngc: str | None = None, lock: Path | None = None, readings: Readings | None = None, stock: str | None = None
) -> Diagnosis:
    """Resolve the image (`ngc` or `stock`, else the lock every command finds: `lock`, ./envpin.lock, the only
    images/*/envpin.lock), read the host, and diagnose."""
    if sum(x is not None for x in (ngc, lock, stock)) > 1:
        ngc_, stock_, lock_ = param("ngc"), param("stock"), param("lock")
        raise UsageError(
            f"give one of {ngc_}, {stock_} or {lock_}, not both", hint=f"{lock_} takes the image from the lock"
        )
    if ngc is not None:
        target = target_from_ngc(ngc)
    elif stock is not None:
        target = target_from_stock(stock)
    else:
        from envpin.environment.render import find_lock

        found = find_lock(
            lock,
            context="which image? ",
            hint=f"give {param('ngc')} RELEASE (e.g. {param('ngc')} 22.06) or {param('lock')} path/to/envpin.lock",
        )
        target = target_from_lock(found)
    return diagnose(target, readings if readings is not None else read_host())
