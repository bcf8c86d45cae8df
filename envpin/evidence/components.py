"""What an SBOM of a built image lists, as one format-neutral value: pure functions, no I/O.

The inputs are what envpin already holds once an image is built: the lock and the plan re-derived from it
(envpin.environment.render.checked_lock; the plan carries the catalog entry of the base), the built image's
config (ID, tag, creation time, ENV, labels) and the in-image reading of envpin.probe.inventory (the dpkg
status database as dpkg wrote it, os-release, the Python distributions with their RECORD hashes).

Each component says where its version comes from. A GPU-stack version (CUDA, cuDNN, NCCL, TensorRT, cuBLAS,
the driver minimum) the image config declares is taken from there (evidence kind `image`, as `catalog sync`
records it); otherwise from the catalog entry of the lock's base with the kind and source the catalog records
(`notes`, `sibling`, ...). Where the two disagree the component keeps the image's value and names the
catalog's.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from envpin import __version__
from envpin.record import Value

if TYPE_CHECKING:
    from envpin.environment.lockfile import Lock
    from envpin.environment.plan import BuildPlan

#: Properties envpin adds to components are named envpin:... (CycloneDX's property taxonomy: a namespace of the
#: producer's own).
P = "envpin:"
#: catalog field -> (component name, CycloneDX component type); the order the SBOM lists them in.
STACK: dict[str, tuple[str, str]] = {
    "cuda": ("CUDA", "framework"),
    "cudnn": ("cuDNN", "library"),
    "nccl": ("NCCL", "library"),
    "cublas": ("cuBLAS", "library"),
    "tensorrt": ("TensorRT", "library"),
    "driver_min": ("NVIDIA driver (minimum)", "device-driver"),
}


@dataclass(frozen=True, slots=True)
class Component(Value):
    """One thing in (or required by) the image. `kind` is a CycloneDX component type; `ref` is unique in one
    SBOM and stable across runs for the same image (bom-ref, and the seed of the SPDX id)."""

    ref: str
    kind: str
    name: str
    version: str | None
    purl: str | None = None
    #: (algorithm as CycloneDX names it, lowercase hex)
    hashes: tuple[tuple[str, str], ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    description: str | None = None
    supplier: str | None = None
    #: False for what the image needs but does not hold (the host's driver).
    contained: bool = True


@dataclass(frozen=True, slots=True)
class BuiltImage(Value):
    """What the engine says of the built image (docker image inspect)."""

    id: str
    tag: str
    env: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def from_attrs(attrs: dict[str, Any], tag: str) -> BuiltImage:
        config = attrs.get("Config") or {}
        return BuiltImage(
            str(attrs["Id"]),
            tag,
            tuple(config.get("Env") or ()),
            dict(config.get("Labels") or {}),
        )


@dataclass(frozen=True, slots=True)
class Sbom(Value):
    """The image (`subject`) and everything listed about it, in a stable order, ready for either format."""

    subject: Component
    components: tuple[Component, ...]
    #: The build's one timestamp (BuildPlan.source_date_epoch: the release month, never the clock), UTC.
    created: datetime
    #: From the inputs, the in-image reading and envpin's version: the same image contents give the same
    #: document, on every machine that builds the lock's inputs.
    serial: uuid.UUID
    tool_version: str = __version__
    #: What could not be listed, or disagrees with the lock, one line each (the CLI prints them on stderr).
    notes: tuple[str, ...] = ()

    def by_ref(self) -> dict[str, Component]:
        return {c.ref: c for c in (self.subject, *self.components)}


def _ref(*parts: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9.]+", ".", p).strip(".") or "x" for p in parts)


def _purl(kind: str, name: str, version: str | None, namespace: str | None = None, **qualifiers: str) -> str:
    from packageurl import PackageURL

    kept = {k: v for k, v in qualifiers.items() if v}
    return str(PackageURL(type=kind, namespace=namespace, name=name, version=version, qualifiers=kept or None))


# --- the parts ---------------------------------------------------------------------------------------------


def subject(image: BuiltImage, locked: Lock) -> Component:
    """The built image, by what every machine building the lock's inputs gives it: its tag (the inputs hash)
    and the lock's inputs. Its image ID is left out: Docker's classic builder gives every machine its own (the
    reason the lock holds none either), and an SBOM with it would differ on a teammate's machine."""
    name, _, tag = image.tag.rpartition(":")
    props = [
        (f"{P}inputs-hash", locked.inputs_hash),
        (f"{P}recipe", f"{locked.recipe.id} {locked.recipe.hash}"),
        (f"{P}envpin-version", locked.envpin_version),
    ]
    if locked.image is not None:  # a reproducible (podman) build's ID, the same on every machine
        props.append((f"{P}reproducible-image-id", locked.image.id))
    return Component(
        _ref("image", locked.inputs_hash),
        "container",
        name or image.tag,
        tag or None,
        properties=tuple(props),
        description=f"the image envpin builds from the lock of {locked.inputs.name}",
    )


def base(locked: Lock, plan: BuildPlan) -> list[Component]:
    """The base image by digest, and the NGC release it is (stock images have none)."""
    from envpin.portable import imageref

    ref = imageref.parse(locked.base.image)
    namespace, _, name = ref.repository.rpartition("/")
    digest = locked.base.digest
    props = [(f"{P}tag", ref.tag or locked.inputs.tag)]
    if locked.inputs.build_from:
        props.append((f"{P}built-from", locked.inputs.build_from))
    hashes: tuple[tuple[str, str], ...] = ()
    if digest and digest.startswith("sha256:"):
        hashes = (("SHA-256", digest.split(":", 1)[1]),)
        props.append((f"{P}digest", digest))
    out = [
        Component(
            _ref("base", locked.base.image),
            "container",
            ref.name,
            digest or ref.tag,
            purl=_purl(
                "docker",
                name,
                digest,
                namespace or None,
                repository_url=ref.registry,
                tag=ref.tag or "",
            ),
            hashes=hashes,
            properties=tuple(props),
            description="the base image, pinned by the digest of its manifest",
            supplier="NVIDIA" if plan.distribution == "ngc" else None,
        )
    ]
    if plan.distribution == "ngc":
        out.append(
            Component(
                _ref("ngc-release", locked.inputs.release),
                "platform",
                "NGC TensorFlow container release",
                locked.inputs.release,
                properties=((f"{P}flavor", locked.inputs.flavor), (f"{P}tag", locked.inputs.tag)),
                supplier="NVIDIA",
            )
        )
    return out


def stack(image: BuiltImage, plan: BuildPlan) -> tuple[list[Component], list[str]]:
    """CUDA, cuDNN, NCCL, cuBLAS, TensorRT and the driver minimum: from the image config where it declares
    them, else from the catalog entry of the base, each with its evidence kind and source."""
    from envpin.knowledge.imageconfig import declared_from_config, parse_env

    declared, origin = declared_from_config({"config": {"Env": list(image.env), "Labels": image.labels}})
    env = parse_env(list(image.env))
    entry = plan.entry
    out: list[Component] = []
    notes: list[str] = []
    for key, (name, kind) in STACK.items():
        fact = entry.facts.get(key)
        written = fact.value if fact is not None and fact.known else None
        props: list[tuple[str, str]] = [(f"{P}catalog-field", key)]
        if key in declared:
            version = str(declared[key])
            props += [(f"{P}evidence-kind", "image"), (f"{P}source", f"image config {origin[key]}")]
            if written is not None and str(written) != version:
                props.append((f"{P}catalog-value", f"{written} ({fact.kind if fact else '?'})"))
        elif written is not None and fact is not None:
            version = str(written)
            props += [(f"{P}evidence-kind", str(fact.kind)), (f"{P}source", entry.source_url(key) or str(fact.source))]
        else:
            reason = fact.reason if fact is not None and fact.reason else "no source gives it"
            notes.append(
                f"{name}: not listed, the image config does not declare it and the catalog does not know it ({reason})"
            )
            continue
        if key == "driver_min":
            props.append((f"{P}requirement", "the host's driver must be this version or later; not in the image"))
        if key == "cuda" and env.get("NVIDIA_REQUIRE_CUDA"):
            props.append((f"{P}nvidia-require-cuda", env["NVIDIA_REQUIRE_CUDA"]))
        out.append(
            Component(
                _ref("nvidia", key, version),
                kind,
                name,
                version,
                properties=tuple(props),
                supplier="NVIDIA",
                contained=key != "driver_min",
            )
        )
    return out, notes


def operating_system(inventory: dict[str, Any]) -> Component | None:
    release = inventory.get("os_release") or {}
    if not isinstance(release, dict) or not release.get("id"):
        return None
    return Component(
        _ref("os", str(release["id"]), str(release.get("version_id") or "")),
        "operating-system",
        str(release["id"]),
        str(release.get("version_id") or "") or None,
        description=str(release.get("pretty_name") or "") or None,
        properties=((f"{P}source", "/etc/os-release"),),
    )


def debian_packages(inventory: dict[str, Any]) -> tuple[list[Component], list[str]]:
    """Every installed package of the dpkg status database, parsed with python-debian's deb822."""
    from debian.deb822 import Deb822

    dpkg = inventory.get("dpkg") or {}
    text = dpkg.get("text") if isinstance(dpkg, dict) else None
    if not isinstance(text, str):
        reason = dpkg.get("reason") if isinstance(dpkg, dict) else None
        return [], [f"no dpkg status database in the image ({reason or 'not read'}): no OS packages listed"]
    release = inventory.get("os_release") or {}
    distro_id = str(release.get("id") or "debian") if isinstance(release, dict) else "debian"
    distro = "-".join(p for p in (distro_id, str(release.get("version_id") or "")) if p) if release else ""
    source = f"{dpkg.get('path')} (sha256:{dpkg.get('sha256')})"
    out: list[Component] = []
    for para in Deb822.iter_paragraphs(text.splitlines(keepends=True), use_apt_pkg=False):
        name, version, status = para.get("Package"), para.get("Version"), para.get("Status", "")
        if not name or not version or not status.endswith(" installed"):
            continue
        arch = para.get("Architecture", "")
        props = [(f"{P}source", source)]
        if para.get("Source"):
            props.append((f"{P}deb-source", para["Source"]))
        out.append(
            Component(
                _ref("deb", name, arch, version),
                "library",
                name,
                version,
                purl=_purl("deb", name, version, distro_id, arch=arch, distro=distro),
                properties=tuple(props),
                supplier=para.get("Maintainer") or None,
            )
        )
    out.sort(key=lambda c: (c.name, c.ref))
    return out, []


def python_packages(inventory: dict[str, Any], plan: BuildPlan) -> tuple[list[Component], list[str]]:
    """The interpreter and every installed distribution with its RECORD hash; what requirements.lock pins
    says so, with the wheel hashes the lock allows, and a pinned version the image lacks is a note."""
    python = inventory.get("python") or {}
    locked = {r.key: r for r in plan.requirements}
    out: list[Component] = []
    notes: list[str] = []
    if python.get("version"):
        out.append(
            Component(
                _ref("python", str(python["version"])),
                "framework",
                "CPython",
                str(python["version"]),
                purl=None,
                properties=((f"{P}executable", str(python.get("executable") or "")),),
            )
        )
    seen: set[str] = set()
    for dist in python.get("distributions") or ():
        name, version = str(dist["name"]), str(dist["version"])
        seen.add(name)
        props = [
            (f"{P}record", str(dist.get("record") or "")),
            (f"{P}record-sha256", str(dist.get("record_sha256") or "")),
        ]
        pinned = locked.get(name)
        if pinned is not None:
            props.append((f"{P}locked", f"requirements.lock {pinned.name}{pinned.op}{pinned.version}"))
            props += [(f"{P}locked-hash", h) for h in pinned.hashes]
            if pinned.version != version:
                notes.append(f"requirements.lock pins {pinned.name}=={pinned.version}, the image has {version}")
        out.append(
            Component(
                _ref("pypi", name, version),
                "library",
                name,
                version,
                purl=_purl("pypi", name, version),
                properties=tuple(props),
            )
        )
    notes += [
        f"requirements.lock pins {r.name}=={r.version}, which the image does not have"
        for k, r in sorted(locked.items())
        if k not in seen
    ]
    return out, notes


def payload(locked: Lock) -> Component:
    """envpin's own archive, baked into the image (the probe and the runtime helper)."""
    from envpin.environment.payload import IMAGE_PATH

    algorithm, _, hexdigest = locked.inputs.payload_hash.partition(":")
    return Component(
        _ref("envpin", locked.envpin_version),
        "library",
        "envpin",
        locked.envpin_version,
        hashes=(("SHA-256", hexdigest),) if algorithm == "sha256" else (),
        properties=((f"{P}path", IMAGE_PATH),),
        description="envpin.pyz: the standard-library probe and runtime helper",
    )


def sbom(locked: Lock, plan: BuildPlan, image: BuiltImage, inventory: dict[str, Any]) -> Sbom:
    """Everything the SBOM of `image` lists, in a stable order: base and release, GPU stack, OS, OS packages,
    Python and its distributions, envpin."""
    stack_parts, stack_notes = stack(image, plan)
    debs, deb_notes = debian_packages(inventory)
    pys, py_notes = python_packages(inventory, plan)
    system = operating_system(inventory)
    parts = [*base(locked, plan), *stack_parts, *([system] if system else []), *debs, *pys, payload(locked)]
    reading = json.dumps(inventory, sort_keys=True).encode("utf-8")
    seed = hashlib.sha256(b"\n".join([locked.inputs_hash.encode(), reading, __version__.encode()])).hexdigest()
    return Sbom(
        subject(image, locked),
        tuple(parts),
        datetime.fromtimestamp(plan.source_date_epoch, tz=timezone.utc),
        uuid.UUID(seed[:32], version=5),
        notes=(*stack_notes, *deb_notes, *py_notes),
    )
