"""`envpin lock`: resolve requirements.in inside the target image, with its own packages as constraints.

Resolution runs in a throwaway container of the base image itself, so the lock is exact for the image's
Python version and platform, and pip sees NVIDIA's TensorFlow, NumPy etc. as installed: every package
the base already has is pinned to the installed version with a constraints file, so the lock can never
replace them. Only packages the base lacks end up in the lock, each with the sha256 of the file pip
picked for that platform; the image installs them with --require-hashes --no-deps.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from envpin.errors import EngineError, RequirementsError
from envpin.fsutil import atomic_write, sha256_bytes
from envpin.requirements import Requirement, parse_lock, read_text, render_lock

# Runs inside the image with envpin's payload (envpin.pyz) in /work: lists installed distributions.
_LIST = (
    "import json, sys; sys.path.insert(0, '/work/envpin.pyz'); from envpin.probe import pyenv;"
    "d, _ = pyenv.scan_distributions(pyenv.search_paths());"
    "print(json.dumps({'python': '%d.%d.%d' % sys.version_info[:3], 'dists': {x['name']: x['version'] for x in d}}))"
)
# A recent pip (for --dry-run --report) goes to /tmp/pip in the throwaway container only. The dry run installs
# nothing, so a PEP 668 marker (Debian 12, Ubuntu 24.04 bases) is overridden for it.
_RESOLVE = (
    "set -e; python3 -m pip install -q --disable-pip-version-check --no-cache-dir --target /tmp/pip 'pip>=23.1' "
    ">/work/pip-bootstrap.log 2>&1 || { cat /work/pip-bootstrap.log >&2; exit 3; }; "
    "PYTHONPATH=/tmp/pip PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --disable-pip-version-check --dry-run "
    "--quiet --report /work/report.json -c /work/constraints.txt -r /work/requirements.in"
)


def read_requirements_in(path: Path) -> str:
    text = read_text(path)
    lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    for no, line in enumerate(lines, 1):
        if line.startswith(("-r", "-c", "--requirement", "--constraint", "-e", "--editable")):
            raise RequirementsError(
                f"{path}:{no}: '{line.split()[0]}' is not supported in requirements.in",
                hint="list the packages directly; envpin resolves them against the image",
            )
    if not any(lines):
        raise RequirementsError(f"{path} lists no packages")
    return text


def _run(client: Any, image: str, command: list[str], work: Path) -> tuple[int, str]:
    """Run `command` in a throwaway container of `image` with `work` (and the payload in it) at /work."""
    from docker.errors import APIError, ImageNotFound

    from envpin.payload import PAYLOAD_NAME, payload

    (work / PAYLOAD_NAME).write_bytes(payload())
    try:
        container = client.containers.run(
            image,
            command,
            volumes={str(work): {"bind": "/work", "mode": "rw"}},
            working_dir="/work",
            detach=True,
            entrypoint=[],
        )
    except ImageNotFound as exc:
        raise EngineError(f"image {image} is not available", hint="check --base-image, or docker pull it") from exc
    except APIError as exc:
        raise EngineError(f"cannot start a container of {image}: {exc.explanation or exc}") from exc
    try:
        code = container.wait(timeout=900)["StatusCode"]
        logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
    finally:
        container.remove(force=True)
    return code, logs


def base_packages(client: Any, image: str) -> tuple[str, dict[str, str]]:
    """(Python version, {distribution: version}) inside the image, read by the probe's package listing."""
    with tempfile.TemporaryDirectory(prefix="envpin-lock-") as tmp:
        code, logs = _run(client, image, ["python3", "-c", _LIST], Path(tmp))
    if code != 0:
        raise EngineError(f"could not list the packages in {image}: {logs.strip().splitlines()[-1:]}")
    data = json.loads(logs.strip().splitlines()[-1])
    return data["python"], data["dists"]


def _conflict_hint(logs: str) -> str:
    lines = [ln.strip() for ln in logs.splitlines() if ln.strip()]
    keep = [ln for ln in lines if re.search(r"conflict|requires|because|No matching|Could not find", ln, re.I)]
    return " / ".join((keep or lines)[-3:])


def resolve(client: Any, image: str, requirements_in: str) -> tuple[str, dict[str, str], tuple[Requirement, ...]]:
    """Resolve inside the image; returns (python, base packages, locked requirements not in the base)."""
    python, dists = base_packages(client, image)
    with tempfile.TemporaryDirectory(prefix="envpin-lock-") as tmp:
        work = Path(tmp)
        (work / "requirements.in").write_text(requirements_in)
        (work / "constraints.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(dists.items())))
        code, logs = _run(client, image, ["/bin/sh", "-c", _RESOLVE], work)
        if code == 3:
            raise EngineError(
                f"could not install a recent pip inside {image} to resolve with: {_conflict_hint(logs)}",
                hint="the container needs to reach PyPI: check proxies, or render with --ca-bundle",
            )
        if code != 0:
            raise RequirementsError(
                f"the requirements cannot be resolved inside {image} without replacing its packages: "
                f"{_conflict_hint(logs)}",
                hint="relax the pins that conflict with the base image's packages (see `envpin probe` in the image)",
            )
        report = json.loads((work / "report.json").read_text())
    locked = []
    for item in report.get("install", []):
        meta = item.get("metadata", {})
        name, version = meta.get("name"), meta.get("version")
        info = item.get("download_info", {})
        hashes = info.get("archive_info", {}).get("hashes", {})
        digest = hashes.get("sha256") or (info.get("archive_info", {}).get("hash", "").partition("sha256=")[2])
        if not (name and version and digest):
            raise RequirementsError(
                f"pip chose {name or info.get('url')} from a source without a sha256 hash (VCS or local path)",
                hint="lock only packages published on an index",
            )
        locked.append(Requirement(name, version, (f"sha256:{digest}",)))
    return python, dists, tuple(sorted(locked, key=lambda r: r.key))


def write_lock(out: Path, reqs: tuple[Requirement, ...], image: str, python: str, source: Path, text: str) -> None:
    header = (
        f"# envpin: locked from {source.name} ({sha256_bytes(text.encode())}) inside {image}\n"
        f"# for Python {python} on linux/amd64. Packages the base image already has are not listed:\n"
        "# they stay exactly as NVIDIA ships them. Regenerate with `envpin lock`, do not edit.\n"
    )
    body = render_lock(reqs, header)
    parse_lock(body, str(out))  # what we write must be what render/build accept
    atomic_write(out, body.encode())
