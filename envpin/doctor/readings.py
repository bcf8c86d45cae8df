"""What `envpin doctor` observes on this host: Docker, the NVIDIA container runtime or CDI specs, the driver
and the GPUs, read once into a :class:`Readings` value.

The real readings come from the Docker engine and from the probe's own NVML / nvidia-smi collector
(``envpin.probe.nvml``). An engine that cannot be asked, or a driver that cannot be read, is a reading with
its problem, never a crash. ENVPIN_DOCTOR_FAKE names a JSON file whose sections replace the host's (a
testing aid, docs/doctor.md). What the readings mean for an image is envpin.doctor.diagnosis.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from envpin.errors import EngineError, UsageError, param
from envpin.files.read import read_regular
from envpin.record import Value

#: Testing aid: a JSON file whose sections replace the host readings (see docs/doctor.md).
FAKE_ENV = "ENVPIN_DOCTOR_FAKE"
FAKE_KEYS = frozenset({"docker", "cdi_specs", "container_hooks", "driver", "gpus"})
#: Where CDI specs live by default (the CDI spec's static and dynamic directories).
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_SUFFIXES = (".yaml", ".yml", ".json")
#: The OCI hook whose presence makes `docker run --gpus` work (the engine looks it up on its PATH).
GPU_HOOKS = ("nvidia-container-runtime-hook",)


@dataclass(frozen=True, slots=True)
class DockerReading(Value):
    """The engine as seen through the Docker SDK; `problem` is set when it could not be asked."""

    version: str | None = None
    runtimes: tuple[str, ...] = ()
    cdi_spec_dirs: tuple[str, ...] = ()
    problem: str | None = None
    hint: str | None = None

    @property
    def reachable(self) -> bool:
        return self.problem is None


@dataclass(frozen=True, slots=True)
class Gpu(Value):
    index: int
    name: str | None = None
    compute_capability: str | None = None
    problem: str | None = None  # why the name or compute capability could not be read


@dataclass(frozen=True, slots=True)
class Readings(Value):
    """Everything doctor reads from the host; build one by hand (or ENVPIN_DOCTOR_FAKE) to simulate a host."""

    docker: DockerReading
    driver_version: str | None = None
    driver_source: str | None = None
    driver_problem: str | None = None  # why no driver version could be read
    gpus: tuple[Gpu, ...] = ()
    cdi_specs: tuple[str, ...] = ()
    container_hooks: tuple[str, ...] = ()
    origin: str = "host"

    @property
    def gpu_access(self) -> str | None:
        """How a container gets this host's GPUs: 'runtime' (the nvidia runtime or its hook, `--gpus`),
        'cdi' (a CDI-aware Docker with an NVIDIA spec), or None (containers run without GPUs)."""
        if "nvidia" in self.docker.runtimes or self.container_hooks:
            return "runtime"
        if self.cdi_specs and self.docker.cdi_spec_dirs:
            return "cdi"
        return None

    @property
    def compose_advice(self) -> str:
        """Which of the repository's compose files fits this host (compose.yaml asks for NVIDIA GPUs)."""
        if self.gpu_access:
            return "docker compose run --rm probe (compose.yaml: GPUs through the NVIDIA runtime)"
        return (
            f"docker compose -f compose.yaml -f compose.cpu.yaml run --rm probe, or {param('image', command='probe')} "
            "IMAGE (this host has no NVIDIA container runtime, so compose.yaml alone cannot start)"
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["docker"]["reachable"] = self.docker.reachable
        return out


def read_docker() -> DockerReading:
    """Ask the engine for its version and registered runtimes; an unreachable engine is a reading, not a crash."""
    from envpin.image.docker import docker_client

    try:
        client = docker_client()
    except EngineError as exc:
        return DockerReading(problem=exc.message, hint=exc.hint)
    try:
        version = client.version().get("Version")
        info = client.info()
    except Exception as exc:  # docker.errors.APIError, requests errors: the engine answered ping only
        return DockerReading(problem=f"the Docker engine answered but 'docker info' failed: {exc}")
    finally:
        client.close()
    return DockerReading(
        version=version,
        runtimes=tuple(sorted(info.get("Runtimes") or {})),
        cdi_spec_dirs=tuple(info.get("CDISpecDirs") or ()),
    )


def read_cdi_specs(dirs: tuple[str, ...] = CDI_DIRS) -> tuple[str, ...]:
    """NVIDIA CDI spec files (those naming an nvidia.com device kind) in the given directories."""
    found: set[str] = set()
    for directory in dirs:
        base = Path(directory)
        if not base.is_dir():
            continue
        for spec in sorted(base.iterdir()):
            if spec.suffix not in CDI_SUFFIXES or not spec.is_file():
                continue
            try:
                text = read_regular(spec).decode("utf-8", errors="replace")
            except OSError:
                text = spec.name  # unreadable: judge by its name only
            if "nvidia.com/" in text or "nvidia" in spec.name.lower():
                found.add(str(spec))
    return tuple(sorted(found))


def read_nvidia(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Driver version and GPUs through the probe's collector (NVML by ctypes, else nvidia-smi)."""
    from envpin.probe._common import Context
    from envpin.probe.nvml import collect_gpu

    section = collect_gpu(Context(environ=environ))
    out: dict[str, Any] = {"version": None, "source": None, "problem": None, "gpus": ()}
    drv = section.get("driver_version", {})
    if "value" in drv:
        out["version"], out["source"] = str(drv["value"]), drv["source"]
    else:
        kernel = section.get("kernel_module", {})
        if "value" in kernel:  # NVML and nvidia-smi failed, but the kernel module says which driver runs
            out["version"], out["source"] = str(kernel["value"]), kernel["source"]
        else:
            out["problem"] = drv.get("unavailable") or drv.get("error") or "no driver version reported"
    count = section.get("count", {}).get("value") or 0
    gpus = []
    for index in range(count):
        name = section.get(f"devices.{index}.name", {})
        cc = section.get(f"devices.{index}.compute_capability", {})
        problems = [
            f"{what}: {f.get('unavailable') or f.get('error') or 'not reported'}"
            for what, f in (("name", name), ("compute capability", cc))
            if "value" not in f
        ]
        gpus.append(Gpu(index, name.get("value"), cc.get("value"), "; ".join(problems) or None))
    out["gpus"] = tuple(gpus)
    return out


def read_host(environ: dict[str, str] | None = None) -> Readings:
    """The real readings, with the sections a fake file (ENVPIN_DOCTOR_FAKE) names replaced by its values."""
    env = dict(os.environ if environ is None else environ)
    fake: dict[str, Any] = {}
    origin = "host"
    if env.get(FAKE_ENV):
        fake = load_fake(Path(env[FAKE_ENV]))
        origin = f"{FAKE_ENV}={env[FAKE_ENV]}"
    docker = _fake_docker(fake["docker"]) if "docker" in fake else read_docker()
    if "driver" in fake:
        drv = fake["driver"]
        gpus = tuple(_fake_gpu(i, g) for i, g in enumerate(fake["gpus"]))
        nvidia: dict[str, Any] = {
            "version": drv.get("version"),
            "source": drv.get("source", "fake") if drv.get("version") else None,
            "problem": None if drv.get("version") else drv.get("problem", "no NVIDIA driver (fake readings)"),
            "gpus": gpus,
        }
    else:
        nvidia = read_nvidia(env)
    cdi_dirs = tuple(dict.fromkeys((*CDI_DIRS, *docker.cdi_spec_dirs)))
    return Readings(
        docker=docker,
        driver_version=nvidia["version"],
        driver_source=nvidia["source"],
        driver_problem=nvidia["problem"],
        gpus=nvidia["gpus"],
        cdi_specs=tuple(fake["cdi_specs"]) if "cdi_specs" in fake else read_cdi_specs(cdi_dirs),
        container_hooks=tuple(fake["container_hooks"])
        if "container_hooks" in fake
        else tuple(h for h in GPU_HOOKS if shutil.which(h, path=env.get("PATH"))),
        origin=origin,
    )


def load_fake(path: Path) -> dict[str, Any]:
    """Read and check a fake-readings file; any mistake in it is a usage error (exit 2)."""
    from envpin.files.read import parse_json

    try:
        text = read_regular(path).decode("utf-8")
    except OSError as exc:
        raise UsageError(f"{FAKE_ENV}: cannot read {path}: {exc.strerror}", hint="unset it to read this host") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{FAKE_ENV}: {path} is not JSON: {exc}", hint="see docs/doctor.md") from exc
    data = parse_json(text, f"{FAKE_ENV}: {path}", UsageError, hint="see docs/doctor.md")
    problem = _fake_problem(data)
    if problem:
        raise UsageError(f"{FAKE_ENV}: {path}: {problem}", hint="see docs/doctor.md for the format")
    fake: dict[str, Any] = data  # an object of the documented sections (_fake_problem)
    return fake


def _fake_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "top level must be an object"
    unknown = set(data) - FAKE_KEYS
    if unknown:
        return f"unknown keys {sorted(unknown)} (allowed: {sorted(FAKE_KEYS)})"
    if ("driver" in data) != ("gpus" in data):
        return "'driver' and 'gpus' come together (one NVIDIA reading)"
    if "docker" in data and not isinstance(data["docker"], dict):
        return "'docker' must be an object"
    if "driver" in data and not isinstance(data["driver"], dict):
        return "'driver' must be an object"
    for key in ("cdi_specs", "container_hooks", "gpus"):
        if key in data and not isinstance(data[key], list):
            return f"'{key}' must be a list"
    if any(
        not isinstance(g, dict) or not all(isinstance(g.get(k), str | None) for k in ("name", "compute_capability"))
        for g in data.get("gpus", [])
    ):
        return "each of 'gpus' must be an object with 'name' and 'compute_capability' strings"
    if not isinstance(data.get("driver", {}).get("version"), str | None):
        return "'driver.version' must be a string such as \"470.82.01\""
    lists = (data.get("cdi_specs", []), data.get("container_hooks", []), data.get("docker", {}).get("runtimes", []))
    if not all(isinstance(x, list) and all(isinstance(v, str) for v in x) for x in lists):
        return "'cdi_specs', 'container_hooks' and 'docker.runtimes' are lists of strings"
    return None


def _fake_docker(d: dict[str, Any]) -> DockerReading:
    return DockerReading(
        version=d.get("version"),
        runtimes=tuple(sorted(d.get("runtimes", []))),
        cdi_spec_dirs=tuple(d.get("cdi_spec_dirs", [])),
        problem=d.get("problem"),
        hint=d.get("hint"),
    )


def _fake_gpu(index: int, g: dict[str, Any]) -> Gpu:
    return Gpu(index, g.get("name"), g.get("compute_capability"), g.get("problem"))
