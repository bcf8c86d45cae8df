"""`envpin probe --image IMG`: run the standard-library probe inside any image through the engine.

The probe archive (the same envpin.pyz envpin builds into images) is mounted read-only and put in front of
the image's PYTHONPATH; nothing is installed. GPUs are requested when the host can give them (the NVIDIA
runtime or CDI, as `envpin doctor` reads them) and not otherwise, so the same command works on a laptop
and on a GPU node, and says which it did. Unlike `docker compose run` on a host without the NVIDIA
runtime, a container that cannot start or fails is an error with its exit status.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envpin.errors import EngineError, UsageError, param
from envpin.record import Value

if TYPE_CHECKING:
    from envpin.environment.lockfile import Lock

MOUNT = "/opt/envpin-mount/envpin.pyz"
#: Passed through when set on the host, so the report shows the settings training would use.
PASS_THROUGH = ("TF_ENABLE_ONEDNN_OPTS", "OMP_NUM_THREADS", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS")
GPU_CHOICES = ("auto", "all", "none")


@dataclass(frozen=True, slots=True)
class ImageProbe(Value):
    image: str
    gpus: str  # what was asked of the engine, in words
    exit_code: int
    written: tuple[str, ...]
    log_tail: tuple[str, ...]
    selftest: str | None = None  # the self-test's one-line outcome, read from the written report
    timed_out: bool = False  # the self-test did not finish in time: inconclusive, not a failed probe


def _device_requests(gpus: str, gpu_access: Callable[[], str | None]) -> tuple[list[Any] | None, str]:
    """(device_requests for the SDK, a sentence saying what was chosen and why).

    gpu_access reads how this host gives containers GPUs ('runtime', 'cdi' or None; envpin.doctor knows
    how), asked only when GPUs may be wanted."""
    from docker.types import DeviceRequest

    if gpus == "none":
        return None, f"without GPUs ({param('gpus')} none)"
    access = gpu_access()
    if access == "runtime":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])], "with all GPUs (NVIDIA container runtime)"
    if access == "cdi":
        return [DeviceRequest(driver="cdi", device_ids=["nvidia.com/gpu=all"])], "with all GPUs (CDI)"
    if gpus == "all":
        raise EngineError(
            f"{param('gpus')} all, but this host has no NVIDIA container runtime or CDI spec",
            hint=f"install the NVIDIA Container Toolkit, or use {param('gpus')} auto (see `envpin doctor`)",
        )
    return None, "without GPUs: this host has no NVIDIA container runtime or CDI spec (`envpin doctor` says more)"


def run(
    client: Any,
    image: str,
    out: Path,
    *,
    gpu_access: Callable[[], str | None],
    gpus: str = "auto",
    selftest: bool | None = None,
    quick: bool = False,
    anonymize: bool = False,
    progress: Callable[[str], None] | None = None,
    replicas: int | None = None,
    timeout: float | None = None,
) -> ImageProbe:
    """Probe `image` in a throwaway container; the reports land in `out` (created if its parent exists).

    selftest None is the probe's own default: the self-test runs where the image has TensorFlow."""
    from docker.errors import APIError

    from envpin.environment.payload import payload

    if not out.parent.is_dir():
        raise UsageError(f"{out.parent} does not exist", hint=f"create it, or choose another {param('out')}")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a folder", hint=f"choose another {param('out')}")
    requests, said = _device_requests(gpus, gpu_access)
    _ensure_image(client, image, progress)
    created = not out.exists()
    out.mkdir(exist_ok=True)
    before = set(os.listdir(out))
    command = f"PYTHONPATH={MOUNT}${{PYTHONPATH:+:$PYTHONPATH}} exec python3 -m envpin.probe --out /reports"
    command += {None: "", True: " --selftest", False: " --no-selftest"}[selftest] + (" --quick" if quick else "")
    command += " --anonymize" if anonymize else ""
    command += f" --replicas {int(replicas)}" if replicas else ""
    command += f" --timeout {float(timeout):g}" if timeout else ""
    env = {k: os.environ[k] for k in PASS_THROUGH if k in os.environ}
    with tempfile.TemporaryDirectory(prefix="envpin-probe-") as tmp:
        archive = Path(tmp) / "envpin.pyz"
        archive.write_bytes(payload())
        if progress:
            progress(f"probing {image} {said}")
        try:
            container = client.containers.run(
                image,
                ["-c", command],
                entrypoint=["/bin/sh"],
                detach=True,
                environment=env,
                device_requests=requests,
                # The host's UTS namespace: the report names this machine (its hostname), not the container ID.
                uts_mode="host",
                volumes={
                    str(archive): {"bind": MOUNT, "mode": "ro"},
                    str(out.resolve()): {"bind": "/reports", "mode": "rw"},
                },
            )
        except APIError as exc:
            if created:
                out.rmdir()  # nothing was written: leave no empty folder behind
            raise EngineError(
                f"cannot start a container of {image}: {exc.explanation or exc}",
                hint="`envpin doctor` checks the engine and the GPU runtime",
            ) from None
        try:
            code = int(container.wait(timeout=3600)["StatusCode"])
            logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        finally:
            container.remove(force=True)
    written = tuple(str(out / n) for n in sorted(set(os.listdir(out)) - before))
    return ImageProbe(
        image,
        said,
        code,
        written,
        tuple(logs.strip().splitlines()[-15:]),
        *_selftest_line(written, insisted=selftest is True),
    )


def _ensure_image(client: Any, image: str, progress: Callable[[str], None] | None) -> None:
    """Pull `image` unless the engine has it (an EngineError when it cannot be pulled)."""
    from docker.errors import APIError, ImageNotFound

    try:
        client.images.get(image)
    except ImageNotFound:
        if progress:
            progress(f"pulling {image}")
        try:
            client.images.pull(image)
        except APIError as exc:
            raise EngineError(
                f"cannot pull {image}: {exc.explanation or exc}",
                hint="check the name and `docker login`, or build the image first",
            ) from None


#: The most an in-image reading may print: a dpkg status database of a large image is a few MiB.
INVENTORY_LIMIT = 128 * 1024 * 1024


def read_inventory(client: Any, image: str, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """What envpin.probe.inventory reads inside `image` (its dpkg database, os-release, Python distributions),
    from the same envpin.pyz the probe runs, mounted read-only in a throwaway container without GPUs and
    without the network. An EngineError when the container cannot start, fails, or prints no JSON object."""
    from docker.errors import APIError

    from envpin.environment.payload import payload

    _ensure_image(client, image, progress)
    command = f"PYTHONPATH={MOUNT}${{PYTHONPATH:+:$PYTHONPATH}} exec python3 -m envpin.probe.inventory"
    with tempfile.TemporaryDirectory(prefix="envpin-inventory-") as tmp:
        archive = Path(tmp) / "envpin.pyz"
        archive.write_bytes(payload())
        if progress:
            progress(f"reading the packages of {image}")
        try:
            container = client.containers.run(
                image,
                ["-c", command],
                entrypoint=["/bin/sh"],
                detach=True,
                network_disabled=True,
                volumes={str(archive): {"bind": MOUNT, "mode": "ro"}},
            )
        except APIError as exc:
            raise EngineError(
                f"cannot start a container of {image}: {exc.explanation or exc}",
                hint="`envpin doctor` checks the engine",
            ) from None
        try:
            code = int(container.wait(timeout=600)["StatusCode"])
            out = container.logs(stdout=True, stderr=False)
            err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        finally:
            container.remove(force=True)
    tail = " | ".join(err.strip().splitlines()[-3:]) or "no output"
    if code != 0:
        raise EngineError(
            f"reading the packages inside {image} failed, exit {code}: {tail}",
            hint=f"`{param('image', command='probe')} {image}` shows whether the image's python3 runs envpin's probe",
        )
    return _inventory_json(out, image, tail)


def _inventory_json(out: bytes, image: str, tail: str) -> dict[str, Any]:
    import json

    last = out.strip().rsplit(b"\n", 1)[-1] if len(out) <= INVENTORY_LIMIT else b""
    try:
        found = json.loads(last.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        found = None
    if not isinstance(found, dict) or not isinstance(found.get("python"), dict):
        raise EngineError(
            f"reading the packages inside {image} printed no inventory: {tail}",
            hint=f"`{param('image', command='probe')} {image}` shows whether the image's python3 runs envpin's probe",
        )
    return found


@dataclass(frozen=True, slots=True)
class LockImage(Value):
    """The image of a lock's inputs that a build left on this machine (envpin.image.buildstate)."""

    id: str
    tag: str
    engine: str
    #: The Docker client that found it (the one to probe it with).
    client: Any = None


def lock_image(locked: Lock, lock_path: Path, connect: Callable[[], Any]) -> LockImage:
    """The Docker image this machine built from `locked`'s inputs, which `verify` probes; `connect` gives a
    Docker client, and is called only when there is a Docker build to look for.

    Docker's, as `probe --image` runs: a podman-built image lives in podman's store, which is said with the
    way to get a Docker one (the lock does not change). No build record, or an image since removed: a
    UsageError whose hint is the build that makes it."""
    from envpin.image import buildstate

    build = f"build it with `{param('lock', command='build')} {lock_path}`"
    other = f"or compare a report ({param('report')} FILE) or this machine ({param('host')}) instead"
    record = buildstate.load(locked.inputs_hash, "docker")
    if record is not None:
        client = connect()
        try:
            client.images.get(record.image_id)
        except Exception:  # docker.errors.ImageNotFound, APIError: either way it cannot be probed
            client.close()
            raise UsageError(
                f"the image built here from {lock_path} ({record.image_id[:19]}…, {record.tag}) is no longer in Docker",
                hint=f"{build}, {other}",
            ) from None
        return LockImage(record.image_id, record.tag, "docker", client)
    podman = buildstate.load(locked.inputs_hash, "podman")
    recorded = locked.expected_image()
    image_id = podman.image_id if podman is not None else recorded.id if recorded is not None else None
    if image_id is not None:
        raise UsageError(
            f"the image of {lock_path} ({image_id[:19]}…) was built with podman; `verify` probes "
            f"images through Docker, as `{param('image', command='probe')}` does",
            hint=f"build it with Docker too (`{param('engine', command='build')} docker` with that lock; it does not "
            f"change), {other}",
        )
    raise UsageError(
        f"no image of {lock_path} was built on this machine (no build record for its inputs "
        f"{locked.inputs_hash[:19]}…)",
        hint=f"{build}, {other}",
    )


def _selftest_line(written: tuple[str, ...], insisted: bool) -> tuple[str | None, bool]:
    """What the self-test in the container found, from the JSON report it wrote (None: no report, or no
    self-test in it), and whether it ran out of time."""
    from envpin.files.read import parse_json, read_regular
    from envpin.probe.selftest.run import timed_out, verdict

    for path in written:
        if path.endswith(".json"):
            try:  # what the container left there: a regular file of bounded size, else no report
                report = parse_json(read_regular(path).decode("utf-8"), path, EngineError)
            except (OSError, ValueError, EngineError):
                return None, False
            if isinstance(report, dict) and "selftest" in report:
                failed, line = verdict(report["selftest"], insisted=insisted)
                return line, not failed and bool(timed_out(report["selftest"]))
    return None, False
