"""`envpin lock`: resolve requirements.in for the target image, with its own packages as constraints.

By default resolution runs in a throwaway container of the base image itself, so the lock is exact for
the image's Python version and platform, and pip sees NVIDIA's TensorFlow, NumPy etc. as installed: every
package the base already has is pinned to the installed version with a constraints file, so the lock can
never replace them. Only packages the base lacks end up in the lock, each with the sha256 of the file pip
picked for that platform; the image installs them with --require-hashes --no-deps.

That needs pip>=23.1 (--dry-run --report) inside the image, which needs Python 3.7. For the Python 3.6
images (NGC 19.07-20.xx) the resolution runs on the host instead (resolve_on_host): uv resolves for the
image's Python version and platform (markers included), the image's packages are offered as stand-in wheels
pinned to their installed versions (NVIDIA's `+nv` local versions included), and every locked file is
checked against the wheel tags the image's own pip accepts.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from envpin.environment.requirements import Requirement, parse_lock, read_text, render_lock
from envpin.errors import EngineError, EnvpinError, RequirementsError, param, shown
from envpin.files.read import read_regular, sha256_bytes
from envpin.files.write import atomic_write
from envpin.knowledge.facts import cache_dir
from envpin.record import Value

#: Where the resolution runs: auto (in the image when its Python is 3.7+, else on the host), image, host.
RESOLVERS = ("auto", "image", "host")
#: The oldest Python a recent pip (--dry-run --report) runs on, and the oldest uv resolves for.
IMAGE_RESOLVER_MIN = (3, 7)
HOST_RESOLVER_MIN = (3, 6)
#: The most of a kept image-facts copy read back (real ones are a few KiB); a larger one is read from the image.
_FACTS_LIMIT = 4 << 20

# Runs inside the image with envpin's payload (envpin.pyz) in /work: the Python version, the installed
# distributions, and the wheel tags the image's own pip accepts, best first (its internal API moved twice:
# pip>=20 compatibility_tags, pip 10-19 pep425tags, pip<10 pip.pep425tags; None when there is no pip).
# Python 3.5 syntax: it runs with the oldest images' interpreter.
_LIST = r"""
import json, sys
sys.path.insert(0, '/work/envpin.pyz')
from envpin.probe import pyenv

def tags():
    try:
        from pip._internal.utils.compatibility_tags import get_supported
    except ImportError:
        try:
            from pip._internal.pep425tags import get_supported
        except ImportError:
            try:
                from pip.pep425tags import get_supported
            except ImportError:
                return None
    try:
        return ['-'.join(t) if isinstance(t, tuple) else str(t) for t in get_supported()]
    except Exception:
        return None

d, _ = pyenv.scan_distributions(pyenv.search_paths())
print(json.dumps({'python': '%d.%d.%d' % sys.version_info[:3], 'dists': {x['name']: x['version'] for x in d},
                  'tags': tags()}))
"""
# A recent pip (for --dry-run --report) goes to /tmp/pip in the throwaway container only. The dry run installs
# nothing, so a PEP 668 marker (Debian 12, Ubuntu 24.04 bases) is overridden for it. {pip}: the pip to bootstrap,
# {options}: more resolver options (a cut-off).
_RESOLVE = (
    "set -e; python3 -m pip install -q --disable-pip-version-check --no-cache-dir --target /tmp/pip '{pip}' "
    ">/work/pip-bootstrap.log 2>&1 || {{ cat /work/pip-bootstrap.log >&2; exit 3; }}; "
    "PYTHONPATH=/tmp/pip PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --disable-pip-version-check --dry-run "
    "--quiet --report /work/report.json -c /work/constraints.txt -r /work/requirements.in{options}"
)
#: The pip the image resolver bootstraps: any that has --dry-run --report; with a cut-off, one that has
#: --uploaded-prior-to (pip 26.1, which needs Python 3.10).
_PIP = "pip>=23.1"
_PIP_CUTOFF = "pip>=26.1"
CUTOFF_IMAGE_MIN = (3, 10)
#: How a requirements lock records its cut-off (one header line), and how it says where it was resolved.
_CUTOFF_LINE = re.compile(r"^# exclude-newer: (\S+)", re.M)
_FROM_LINE = re.compile(
    r"^# envpin: locked from (\S+) \((sha256:[0-9a-f]{64})\) (inside (\S+)|on the host for (\S+)'s Python)", re.M
)


class ContainerEngine(Protocol):
    """What the lock needs of the engine (envpin.image.docker.DockerEngine; this layer does not import it):
    whether it holds an image and the image's ID (`exists`, `inspect`: one API request each, without the Docker
    SDK), and the SDK client that runs the throwaway containers (`client`, opened on first use)."""

    def exists(self, image: str) -> bool: ...

    def inspect(self, image: str) -> Any: ...

    @property
    def client(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class ImageFacts(Value):
    """What the lock needs to know about the base image."""

    python: str
    dists: dict[str, str]
    #: The wheel tags its pip installs, best first; None when the image has no pip that says.
    tags: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class LockedFile(Value):
    """One file a locked requirement may install: its file name, where the index serves it, its sha256
    ('sha256:…'), and whether it is a wheel or a source distribution."""

    name: str
    url: str
    sha256: str
    kind: str = "wheel"


@dataclass(frozen=True, slots=True)
class Resolved(Value):
    facts: ImageFacts
    locked: tuple[Requirement, ...]
    #: "image" or "host": where the resolution ran.
    where: str
    #: The files behind each locked requirement (Requirement.key -> files), what pylock.toml lists.
    files: dict[str, tuple[LockedFile, ...]] = field(default_factory=dict)
    #: The upload-time cut-off the resolution ran with ('2024-03-01T00:00:00Z'), or None.
    exclude_newer: str | None = None


def cutoff(value: str) -> str | None:
    """A cut-off as given (`exclude_newer`): a date (midnight UTC starting it) or an RFC 3339 time with a zone,
    as the UTC time both resolvers are given ('2024-03-01T00:00:00Z'); 'none' for no cut-off. Durations and
    local times are refused: the same lock must re-lock the same on any machine, in any time zone, later."""
    from datetime import datetime, timezone

    text = value.strip()
    if text.lower() == "none":
        return None
    bad = RequirementsError(
        f"{param('exclude_newer')} {shown(text)!r} is not a date or a UTC time",
        hint="give a date (2024-03-01: files uploaded before 00:00 UTC that day) or a time with its zone "
        "(2024-03-01T12:00:00Z), or none",
    )
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        text += "T00:00:00Z"
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})", text):
        raise bad
    # Python 3.10's fromisoformat takes 3 or 6 digits of a fraction only: pad (or cut) it to microseconds.
    text = re.sub(r"\.(\d+)", lambda m: "." + (m.group(1) + "000000")[:6], text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise bad from None
    return when.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def recorded_cutoff(text: str) -> str | None:
    """The cut-off a requirements lock's header records, or None."""
    m = _CUTOFF_LINE.search(text)
    return m.group(1) if m else None


@dataclass(frozen=True, slots=True)
class Origin(Value):
    """What a requirements lock's header says it was resolved from: the source file's name and digest, the
    image, where it ran ("image" or "host"), and the cut-off."""

    source: str
    source_hash: str
    image: str
    where: str
    exclude_newer: str | None


def recorded_origin(text: str) -> Origin | None:
    """The origin an envpin-written requirements lock records, or None (a lock written by hand or pip-compile)."""
    m = _FROM_LINE.search(text)
    if m is None:
        return None
    where = "image" if m.group(4) else "host"
    return Origin(m.group(1), m.group(2), m.group(4) or m.group(5), where, recorded_cutoff(text))


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


def _run(engine: ContainerEngine, image: str, command: list[str], work: Path) -> tuple[int, str]:
    """Run `command` in a throwaway container of `image` with `work` (and the payload in it) at /work."""
    from docker.errors import APIError, ImageNotFound

    from envpin.environment.payload import PAYLOAD_NAME, payload

    (work / PAYLOAD_NAME).write_bytes(payload())
    client = engine.client
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
        raise EngineError(
            f"image {image} is not available", hint=f"check {param('base_image')}, or docker pull it"
        ) from exc
    except APIError as exc:
        raise EngineError(f"cannot start a container of {image}: {exc.explanation or exc}") from exc
    try:
        code = container.wait(timeout=900)["StatusCode"]
        logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
    finally:
        container.remove(force=True)
    return code, logs


def image_facts(engine: ContainerEngine, image: str) -> ImageFacts:
    """The image's Python version, installed distributions and wheel tags, read in one throwaway container,
    or from the copy kept for the same local image (see _facts_cache: starting the container is most of
    what `envpin lock` adds to the resolver's own time)."""
    cached = _facts_cache(engine, image)
    if cached is not None:
        try:
            return _facts_from(json.loads(read_regular(cached, _FACTS_LIMIT).decode("utf-8")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            pass  # none yet, or a damaged, oversized or non-regular copy: read again from the image (rewritten)
    with tempfile.TemporaryDirectory(prefix="envpin-lock-") as tmp:
        code, logs = _run(engine, image, ["python3", "-c", _LIST], Path(tmp))
    lines = logs.strip().splitlines()
    if code != 0 or not lines:
        raise EngineError(f"could not list the packages in {image}: {lines[-1:] or 'no output'}")
    try:
        facts = _facts_from(json.loads(lines[-1]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EngineError(
            f"could not list the packages in {image}: unexpected output {lines[-1][:200]!r}",
            hint=f"run `{param('image', command='probe')}` on it to see what its Python says",
        ) from exc
    if cached is not None:
        data = {"python": facts.python, "dists": facts.dists, "tags": list(facts.tags) if facts.tags else None}
        # A copy that cannot be written only costs the next lock the container.
        with contextlib.suppress(OSError, EnvpinError):
            atomic_write(cached, (json.dumps(data, sort_keys=True) + "\n").encode())
    return facts


def _facts_from(data: dict[str, Any]) -> ImageFacts:
    tags = data.get("tags")
    return ImageFacts(
        str(data["python"]),
        {str(k): str(v) for k, v in data["dists"].items()},
        tuple(str(t) for t in tags) if isinstance(tags, list) and tags else None,
    )


def _facts_cache(engine: ContainerEngine, image: str) -> Path | None:
    """Where the facts of this local image are kept: $XDG_CACHE_HOME/envpin/lock-facts/, keyed by the image's
    ID (the digest of its config, so of its layers: the same ID is the same Python and packages) and by the
    listing script; None when the image is not local yet (the container run pulls it and says what fails).
    An engine that does not answer is an EngineError here, before anything else is tried."""
    import hashlib

    if not engine.exists(image):
        return None
    image_id = str(engine.inspect(image).id)
    key = hashlib.sha256(f"{image_id}\n{_LIST}".encode()).hexdigest()
    return cache_dir() / "lock-facts" / f"{key}.json"


def _conflict_hint(logs: str) -> str:
    lines = [re.sub(r"^(cause|hint): ", "", ln.strip(" ×╰─▶│")) for ln in logs.splitlines() if ln.strip(" ×╰─▶│")]
    keep = [
        ln
        for ln in lines
        if re.search(
            r"conflict|requires|because|No matching|Could not find|no version|"
            r"unsatisfiable",
            ln,
            re.I,
        )
    ]
    return " / ".join((keep or lines)[-3:])


def choose(resolver: str, python: str, exclude_newer: str | None = None) -> str:
    """Where to resolve: `resolver` as asked, or for auto the image when its Python runs a recent pip (with a
    cut-off, one with --uploaded-prior-to: Python 3.10)."""
    if resolver not in RESOLVERS:
        raise RequirementsError(f"unknown resolver {resolver!r}", hint="use one of " + ", ".join(RESOLVERS))
    from envpin.portable.versions import major_minor

    version = major_minor(python) or (0, 0)
    least = CUTOFF_IMAGE_MIN if exclude_newer else IMAGE_RESOLVER_MIN
    where = resolver if resolver != "auto" else ("image" if version >= least else "host")
    if where == "image" and exclude_newer and version < CUTOFF_IMAGE_MIN:
        raise RequirementsError(
            f"the image's Python {python} cannot run the pip that resolves with a cut-off inside it "
            "(--uploaded-prior-to is pip 26.1's, which needs Python 3.10)",
            hint=f"use {param('resolver')} host (or auto)",
        )
    if where == "image" and version < IMAGE_RESOLVER_MIN:
        raise RequirementsError(
            f"the image's Python {python} cannot run the pip that resolves inside it (pip>=23.1 needs Python 3.7)",
            hint=f"use {param('resolver')} host (or auto)",
        )
    if where == "host" and version < HOST_RESOLVER_MIN:
        raise RequirementsError(
            f"envpin lock cannot resolve for Python {python}: pip's resolver needs 3.7 in the image and uv "
            "resolves for 3.6 at the oldest",
            hint="use a later NGC release (19.07 onwards ship Python 3.6), or pin and hash the "
            f"requirements yourself and pass them with {param('requirements', command='render')}",
        )
    return where


def resolve(
    engine: ContainerEngine, image: str, requirements_in: str, resolver: str = "auto", exclude_newer: str | None = None
) -> Resolved:
    """Resolve for the image, in it or on the host (see the module docstring); with `exclude_newer` (a UTC
    time, as `cutoff` gives it) only files uploaded before it are candidates."""
    facts = image_facts(engine, image)
    where = choose(resolver, facts.python, exclude_newer)
    if where == "image":
        locked, files = resolve_in_image(engine, image, requirements_in, facts, exclude_newer)
    else:
        locked, files = resolve_on_host(image, requirements_in, facts, exclude_newer)
    return Resolved(facts, locked, where, files, exclude_newer)


Files = dict[str, tuple[LockedFile, ...]]


def resolve_in_image(
    engine: ContainerEngine, image: str, requirements_in: str, facts: ImageFacts, exclude_newer: str | None = None
) -> tuple[tuple[Requirement, ...], Files]:
    """pip --dry-run --report inside the image; the locked requirements the base lacks, and their files."""
    options = f" --uploaded-prior-to {exclude_newer}" if exclude_newer else ""
    script = _RESOLVE.format(pip=_PIP_CUTOFF if exclude_newer else _PIP, options=options)
    with tempfile.TemporaryDirectory(prefix="envpin-lock-") as tmp:
        work = Path(tmp)
        (work / "requirements.in").write_text(requirements_in)
        (work / "constraints.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(facts.dists.items())))
        code, logs = _run(engine, image, ["/bin/sh", "-c", script], work)
        if code == 3:
            raise EngineError(
                f"could not install a recent pip inside {image} to resolve with: {_conflict_hint(logs)}",
                hint="the container needs to reach PyPI: check proxies, or render with "
                f"{param('ca_bundle', command='render')}; or lock with {param('resolver')} host",
            )
        if code != 0:
            raise RequirementsError(
                f"the requirements cannot be resolved inside {image} without replacing its packages: "
                f"{_conflict_hint(logs)}",
                hint="relax the pins that conflict with the base image's packages (see `envpin probe` in the image)",
            )
        report = json.loads((work / "report.json").read_text())
    locked = []
    files: Files = {}
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
        req = Requirement(name, version, (f"sha256:{digest}",))
        url = str(info.get("url") or "")
        filename = url.rsplit("/", 1)[-1].split("#", 1)[0]
        files[req.key] = (LockedFile(filename, url, f"sha256:{digest}", _kind(filename)),)
        locked.append(req)
    return tuple(sorted(locked, key=lambda r: r.key)), files


def _kind(filename: str) -> str:
    return "wheel" if filename.endswith(".whl") else "sdist"


# --------------------------------------------------------------------------- resolution on the host


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def manylinux_platform(tags: tuple[str, ...]) -> str:
    """uv's --python-platform for the image: its architecture and the newest manylinux level uv knows that
    the image's pip accepts (uv offers 2_17 and 2_28 onwards). Files are checked against `tags` afterwards,
    so a level uv rounds down to only narrows the choice."""
    levels: dict[str, tuple[int, int]] = {}
    legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
    for tag in tags:
        platform = tag.rsplit("-", 1)[-1]
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(x86_64|aarch64)", platform)
        level = (int(m.group(1)), int(m.group(2))) if m else None
        arch = m.group(3) if m else ""
        if m is None:
            head, _, arch = platform.partition("_")
            level = legacy.get(head)
        if level and arch in ("x86_64", "aarch64"):
            levels[arch] = max(levels.get(arch, (0, 0)), level)
    if not levels:
        raise RequirementsError(
            "the image's pip accepts no manylinux wheels (x86_64 or aarch64), which is all "
            "the host-side resolution knows how to choose for",
            hint=f"lock with {param('resolver')} image",
        )
    arch, (major, minor) = max(levels.items(), key=lambda kv: kv[1])
    known = [17, *range(28, 41)]
    chosen = max((k for k in known if (2, k) <= (major, minor)), default=17)
    return f"{arch}-manylinux_2_{chosen}"


def stub_wheel(folder: Path, name: str, version: str) -> Path | None:
    """An empty wheel standing in for a distribution the image already has, so the resolver can satisfy a
    `name==version` constraint that no index offers (NVIDIA's `tensorflow==2.1.0+nv20.2`). None for a
    version that is not PEP 440, which no resolver accepts."""
    from packaging.version import InvalidVersion, Version

    try:
        canonical = str(Version(version))
    except InvalidVersion:
        return None
    escaped = re.sub(r"[-_.]+", "_", name).lower()
    path = folder / f"{escaped}-{canonical}-py3-none-any.whl"
    info = f"{escaped}-{canonical}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {canonical}\n")
        zf.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: envpin\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        zf.writestr(f"{info}/RECORD", "")
    return path


def uv_binary() -> str:
    """The uv executable: the one the `uv` distribution (an envpin dependency) installs, else uv on PATH."""
    import shutil

    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
    if not found:
        raise EngineError(
            "uv is not installed, and resolving on the host needs it",
            hint="pip install 'uv>=0.11' into envpin's environment",
        )
    return found


def _files_for(package: dict[str, Any], accepted: frozenset[str]) -> tuple[LockedFile, ...]:
    """The package's files the image's pip would install: its wheels whose tags the image accepts; else its
    source distribution (built in the image); () when there is neither."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    wheels: list[LockedFile] = []
    for wheel in package.get("wheels") or []:
        url = str(wheel.get("url") or wheel.get("path") or "")
        filename = str(wheel.get("name") or url.rsplit("/", 1)[-1])
        try:
            _, _, _, wheel_tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        digest = (wheel.get("hashes") or {}).get("sha256")
        if digest and any(str(t) in accepted for t in wheel_tags):
            wheels.append(LockedFile(filename, url, f"sha256:{digest}"))
    if wheels:
        return tuple(sorted(wheels, key=lambda f: f.sha256))
    sdist = package.get("sdist") or {}
    digest = (sdist.get("hashes") or {}).get("sha256")
    url = str(sdist.get("url") or sdist.get("path") or "")
    name = str(sdist.get("name") or url.rsplit("/", 1)[-1])
    return (LockedFile(name, url, f"sha256:{digest}", "sdist"),) if digest else ()


def resolve_on_host(
    image: str, requirements_in: str, facts: ImageFacts, exclude_newer: str | None = None
) -> tuple[tuple[Requirement, ...], Files]:
    """uv resolves for the image's Python and platform with the image's packages as pinned stand-ins; the
    result keeps only what the base lacks, each with the hashes of the files the image's pip accepts."""
    if facts.tags is None:
        raise RequirementsError(
            f"cannot tell which wheels {image}'s pip installs (it has no pip envpin can ask)",
            hint=f"install pip in the base image, or lock with {param('resolver')} image",
        )
    from envpin._compat import tomllib

    platform = manylinux_platform(facts.tags)
    accepted = frozenset(facts.tags)
    base = {_key(n): (n, v) for n, v in facts.dists.items()}
    with tempfile.TemporaryDirectory(prefix="envpin-lock-") as tmp:
        work = Path(tmp)
        stubs = work / "base"
        stubs.mkdir()
        pinned: list[str] = []
        unpinned: set[str] = set()  # installed versions that are not PEP 440: no constraint can name them
        for n, v in sorted(facts.dists.items()):
            if stub_wheel(stubs, n, v) is None:
                unpinned.add(_key(n))
            else:
                pinned.append(f"{n}=={v}\n")
        (work / "constraints.txt").write_text("".join(pinned))
        (work / "requirements.in").write_text(requirements_in)
        cmd = [
            uv_binary(),
            "pip",
            "compile",
            "requirements.in",
            "--python-version",
            facts.python,
            "--python-platform",
            platform,
            "--format",
            "pylock.toml",
            "-o",
            "pylock.toml",
            "-c",
            "constraints.txt",
            "--find-links",
            str(stubs),
            "--quiet",
            "--color",
            "never",
            # The interpreter uv runs builds with, named: left to find one for --python-version, uv asks
            # every python3.X on PATH (pyenv's shims among them, each a shell script), which cost more than
            # the resolution itself. The target's version, platform and markers come from the flags above.
            "--python",
            sys.executable,
            *(["--exclude-newer", exclude_newer] if exclude_newer else []),
        ]
        try:
            proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise EngineError(
                "uv did not finish resolving within 900 s", hint="check the network path to the package index"
            ) from exc
        if proc.returncode != 0:
            raise RequirementsError(
                f"the requirements cannot be resolved for {image} (Python {facts.python}, {platform}) without "
                f"replacing its packages: {_conflict_hint(proc.stderr)}",
                hint="relax the pins that conflict with the base image's packages (see `envpin probe` in the image)",
            )
        lock = tomllib.loads((work / "pylock.toml").read_text(encoding="utf-8"))
    locked: list[Requirement] = []
    files: Files = {}
    for package in lock.get("packages", []):
        name, version = str(package.get("name", "")), str(package.get("version", ""))
        if _key(name) in unpinned:
            raise RequirementsError(
                f"{name} {version} would replace the image's {name} {base[_key(name)][1]}",
                hint="relax the requirement that needs it",
            )
        if _key(name) in base:
            continue  # the image has exactly this version: it was a constraint
        chosen = _files_for(package, accepted)
        if not chosen:
            raise RequirementsError(
                f"no file of {name} {version} installs in {image}: no wheel its pip accepts "
                f"(Python {facts.python}, {platform}) and no source distribution",
                hint=f"pin another version of {name} in the requirements",
            )
        req = Requirement(name, version, tuple(f.sha256 for f in chosen))
        files[req.key] = chosen
        locked.append(req)
    return tuple(sorted(locked, key=lambda r: r.key)), files


def lock_text(res: Resolved, image: str, source: Path, text: str) -> str:
    """The requirements lock for a resolution: a header saying what it was locked from, where, and the cut-off
    (what a re-lock takes again), then one hashed line per package the base lacks."""
    how = (
        f"inside {image}"
        if res.where == "image"
        else f"on the host for {image}'s Python and the wheel tags its pip accepts"
    )
    header = (
        f"# envpin: locked from {source.name} ({sha256_bytes(text.encode())}) {how}\n"
        f"# for Python {res.facts.python} on linux/amd64. Packages the base image already has are not listed:\n"
        "# they stay exactly as the base image ships them. Regenerate with `envpin lock`, do not edit.\n"
    )
    if res.exclude_newer:
        header += (
            f"# exclude-newer: {res.exclude_newer} (only files uploaded before then were candidates; a re-lock\n"
            "# keeps this cut-off, so the same inputs lock the same later)\n"
        )
    body = render_lock(res.locked, header)
    parse_lock(body, str(source.with_name("requirements.lock")))  # what we write must be what render/build accept
    return body


def pylock_text(res: Resolved, image: str, lock_body: str) -> str:
    """pylock.toml (PEP 751) for the same packages, files and hashes as the requirements lock `lock_body`,
    checked with packaging's own reader of the format before it is written. [tool.envpin] names the image,
    the cut-off and the digest of the requirements lock it mirrors."""
    import tomli_w
    from packaging.pylock import Pylock, PylockValidationError

    packages: list[dict[str, Any]] = []
    for req in res.locked:
        entry: dict[str, Any] = {"name": req.key, "version": req.version}
        if req.marker:
            entry["marker"] = req.marker
        chosen = res.files.get(req.key, ())
        entries = [(f.kind, {"name": f.name, "url": f.url, "hashes": {"sha256": f.sha256[7:]}}) for f in chosen]
        wheels = [e for kind, e in entries if kind == "wheel"]
        sdists = [e for kind, e in entries if kind != "wheel"]
        if wheels:
            entry["wheels"] = wheels
        elif sdists:
            entry["sdist"] = sdists[0]
        packages.append(entry)
    major, _, rest = res.facts.python.partition(".")
    minor = rest.partition(".")[0]
    tool: dict[str, Any] = {
        "image": image,
        "python": res.facts.python,
        "requirements-lock": sha256_bytes(lock_body.encode()),
    }
    if res.exclude_newer:
        tool["exclude-newer"] = res.exclude_newer
    data: dict[str, Any] = {
        "lock-version": "1.0",
        "created-by": "envpin",
        "requires-python": f"=={major}.{minor}.*",
        "environments": [f"python_version == '{major}.{minor}' and sys_platform == 'linux'"],
        "packages": packages,
        "tool": {"envpin": tool},
    }
    try:
        Pylock.from_dict(data)
    except PylockValidationError as exc:  # a file without a URL (pip resolved a local path): not lockable here
        raise RequirementsError(
            f"pylock.toml for {image} would not be valid: {exc}", hint="lock only packages published on an index"
        ) from exc
    return tomli_w.dumps(data)


def cutoff_drift(engine: ContainerEngine, lock_path: Path) -> list[str]:
    """What a re-lock of the requirements lock at `lock_path` without its recorded cut-off would change, one
    note (re-resolved from the source file its header names, beside it, for the same image and resolver);
    [] for a lock with no cut-off. What `lock --check` says: the cut-off is holding those updates back."""
    text = read_text(lock_path)
    origin = recorded_origin(text)
    if origin is None or origin.exclude_newer is None:
        return []
    cut = origin.exclude_newer
    source = lock_path.with_name(origin.source)
    try:
        source_text = read_requirements_in(source)
    except EnvpinError:
        return [f"{lock_path}: not re-locked without its cut-off {cut}: {source} is not beside it"]
    if sha256_bytes(source_text.encode()) != origin.source_hash:
        return [f"{lock_path}: not re-locked without its cut-off {cut}: {source} changed since it was locked"]
    fresh = resolve(engine, origin.image, source_text, origin.where, None)
    old = {r.key: r for r in parse_lock(text, str(lock_path))}
    new = {r.key: r for r in fresh.locked}
    changes = []
    for key in sorted({*old, *new}):
        a, b = old.get(key), new.get(key)
        if a is None and b is not None:
            changes.append(f"{b.name} {b.version} (new)")
        elif b is None and a is not None:
            changes.append(f"{a.name} {a.version} (dropped)")
        elif a is not None and b is not None and a.version != b.version:
            changes.append(f"{a.name} {a.version} -> {b.version}")
        elif a is not None and b is not None and a.hashes != b.hashes:
            changes.append(f"{a.name} {a.version} (other files)")
    if not changes:
        return [f"{lock_path}: a re-lock without its cut-off {cut} gives the same packages"]
    return [f"{lock_path}: a re-lock without its cut-off {cut} would change {len(changes)}: " + ", ".join(changes)]
