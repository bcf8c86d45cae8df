"""What an image config declares about itself (ENV variables and labels NGC images set, and
NVIDIA_REQUIRE_CUDA), turned into catalog keys and compared with what the catalog's written sources say.

Pure functions over a config: `catalog sync` (envpin.knowledge.sync) feeds them what it reads from
registries, and the build's cross-check (envpin.image.basecheck) what the engine reports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from envpin.portable.versions import components, parse_version
from envpin.record import Value


class CatalogEntry(Protocol):
    """What compare() reads of a catalog entry (envpin.knowledge.catalog.Entry): this module stays free of
    the catalog, so the catalog's own rules (envpin.knowledge.trust) can use the comparisons below."""

    @property
    def tag(self) -> str: ...

    @property
    def verified(self) -> dict[str, Any] | None: ...

    def written_value(self, name: str) -> Any: ...


#: catalog key <- ENV variables NGC images set, first present wins.
ENV_KEYS: dict[str, tuple[str, ...]] = {
    "tf_version": ("TENSORFLOW_VERSION",),
    "cuda": ("CUDA_VERSION",),
    "cudnn": ("CUDNN_VERSION",),
    "nccl": ("NCCL_VERSION",),
    "cublas": ("CUBLAS_VERSION",),
    "tensorrt": ("TRT_VERSION", "TENSORRT_VERSION"),
    "horovod": ("HOROVOD_VERSION",),
    "python": ("PYTHON_VERSION", "PYVER"),
    # The driver the CUDA toolkit shipped with: what the release notes call "requires driver X or later".
    "driver_min": ("CUDA_DRIVER_VERSION",),
    "build_id": ("NVIDIA_BUILD_ID",),
    "nvidia_tensorflow_version": ("NVIDIA_TENSORFLOW_VERSION",),
}
#: Labels NGC images carry as well; used only when the ENV variable is absent.
LABEL_KEYS: dict[str, str] = {
    "tf_version": "com.nvidia.tensorflow.version",
    "cuda": "com.nvidia.cuda.version",
    "cudnn": "com.nvidia.cudnn.version",
    "nccl": "com.nvidia.nccl.version",
    "build_id": "com.nvidia.build.id",
}
REQUIRE_CUDA_ENV = "NVIDIA_REQUIRE_CUDA"

AGREES = "agrees"
MORE_PRECISE = "more precise"
FILLED = "filled"
DISAGREES = "disagrees"
#: Field statuses that make `catalog sync` exit 1. "filled" and "more precise" add knowledge without
#: contradicting the release notes.
FAILING = frozenset({DISAGREES})


# -- parsing the image config (pure) -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RequireCuda(Value):
    """NVIDIA_REQUIRE_CUDA, as nvidia-container-cli reads it: minimum CUDA and accepted data-center branches."""

    cuda_min: str | None
    branches: tuple[str, ...]
    unparsed: tuple[str, ...] = ()


# ASCII digits only, anchored with \Z; a branch longer than nine digits is not a driver, and is left unparsed.
_CUDA_MIN = re.compile(r"cuda>=([0-9]{1,9}(?:\.[0-9]{1,9})*)\Z")
_DRIVER_GE = re.compile(r"driver>=([0-9]{1,9})(?:\.[0-9.]*)?\Z")


def parse_require_cuda(text: str) -> RequireCuda:
    """'cuda>=11.3 brand=tesla,driver>=418,driver<419 ...' -> RequireCuda('11.3', ('418', ...)).

    Each space-separated clause is an alternative; a clause is comma-separated conditions that must all hold.
    Branch clauses name the older data-center drivers (brand=tesla, or no brand) that run this CUDA through
    forward compatibility; clauses for other brands (geforce, quadro...) are not data-center branches.
    """
    cuda_min: str | None = None
    branches: set[str] = set()
    unparsed: list[str] = []
    for clause in text.split():
        conds = [c.strip() for c in clause.split(",") if c.strip()]
        m = _CUDA_MIN.match(conds[0]) if len(conds) == 1 else None
        if m:
            cuda_min = m.group(1)
            continue
        brands = [c.split("=", 1)[1].lower() for c in conds if c.startswith("brand=")]
        lows = [_DRIVER_GE.match(c) for c in conds if c.startswith("driver>=")]
        lows_ok = [x.group(1) for x in lows if x]
        if not lows_ok or len(lows_ok) != len(lows):
            unparsed.append(clause)
            continue
        if all(b == "tesla" for b in brands):
            branches.update(lows_ok)
    return RequireCuda(cuda_min, tuple(sorted(branches, key=int)), tuple(unparsed))


def parse_env(env: Iterable[str]) -> dict[str, str]:
    """Config ENV entries ('NAME=value') as a dict; later entries win, as they do in a container."""
    out: dict[str, str] = {}
    for item in env:
        name, sep, value = str(item).partition("=")
        if sep and name:
            out[name] = value
    return out


def version_env(env: dict[str, str]) -> dict[str, str]:
    """The version variables among an image's ENV, as declared (what envpin.lock records under [base.declared])."""
    names = {name for names in ENV_KEYS.values() for name in names} | {REQUIRE_CUDA_ENV}
    return {name: env[name].strip() for name in sorted(names) if env.get(name, "").strip()}


def declared_from_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(declared values by catalog key, where each came from) for one image config JSON."""
    cfg = config.get("config") or {}
    env = parse_env(cfg.get("Env") or [])
    labels = cfg.get("Labels") or {}
    declared: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, names in ENV_KEYS.items():
        for name in names:
            if env.get(name, "").strip():
                declared[key], origin[key] = env[name].strip(), f"ENV {name}"
                break
        else:
            label = LABEL_KEYS.get(key)
            if label and str(labels.get(label, "")).strip():
                declared[key], origin[key] = str(labels[label]).strip(), f"LABEL {label}"
    if env.get(REQUIRE_CUDA_ENV, "").strip():
        req = parse_require_cuda(env[REQUIRE_CUDA_ENV])
        if req.cuda_min:
            declared["cuda_min"], origin["cuda_min"] = req.cuda_min, f"ENV {REQUIRE_CUDA_ENV}"
        if req.branches:
            declared["driver_compat"], origin["driver_compat"] = list(req.branches), f"ENV {REQUIRE_CUDA_ENV}"
    return declared, origin


# -- comparing (pure) ---------------------------------------------------------------------------------------------
def compare_version(catalog_value: str | None, image_value: str) -> str:
    """How a version the image declares relates to the release-notes value.

    Lenient by components: '2.1' (notes) vs '2.1.0' (image) is "more precise"; '10.2.89' vs '10.2' agrees
    (the image says less, not something else); '2.1' vs '2.10' disagrees.
    """
    if catalog_value is None:
        return FILLED
    c, i = components(catalog_value), components(image_value)
    if c == i or c[: len(i)] == i:
        return AGREES
    if i[: len(c)] == c:
        return MORE_PRECISE
    return DISAGREES


def driver_branch(version: str) -> str | None:
    """'418.xx', '384.111+', '440.30' -> '418', '384', '440'."""
    parsed = parse_version(version)
    return str(parsed[0]) if parsed else None


def compare_branches(catalog_value: list[str] | None, driver_min: str | None, image_value: list[str]) -> str:
    """Compare data-center driver branches as sets of branch numbers.

    The notes list the driver_min branch itself next to the forward-compatible older ones (e.g. '440.30' when
    440.33 is required); NVIDIA_REQUIRE_CUDA does not, because 'cuda>=X' already admits it. So only branches
    below driver_min's branch are compared.
    """
    if catalog_value is None:
        return FILLED
    floor = driver_branch(driver_min) if driver_min else None

    def below(values: Iterable[str]) -> set[int]:
        nums = {int(b) for b in (driver_branch(v) for v in values) if b is not None}
        return {n for n in nums if floor is None or n < int(floor)}

    return AGREES if below(catalog_value) == below(image_value) else DISAGREES


def compare_ngc_version(tag: str, image_value: str) -> str:
    """NVIDIA_TENSORFLOW_VERSION ('20.03-tf2', or '19.01' before the tf1/tf2 split) must name this tag."""
    v = image_value.strip()
    return AGREES if tag == v or tag.startswith(v + "-") else DISAGREES


@dataclass(frozen=True, slots=True)
class Comparison(Value):
    """One declared value next to what the catalog holds for it."""

    field: str
    catalog: Any
    image: Any
    status: str
    origin: str

    def to_json(self) -> dict[str, Any]:
        return {"catalog": self.catalog, "image": self.image, "status": self.status, "from": self.origin}


def compare(
    entry: CatalogEntry, declared: dict[str, Any], origin: dict[str, str], digest: str, repository: str
) -> list[Comparison]:
    """Every declared value against the catalog's release-notes value (and a recorded digest, if any)."""
    out: list[Comparison] = []
    for key in sorted(declared):
        value = declared[key]
        src = origin.get(key, "image config")
        if key == "build_id":
            continue  # the release notes have no build ids: recorded, nothing to compare
        if key == "nvidia_tensorflow_version":
            out.append(Comparison(key, entry.tag, value, compare_ngc_version(entry.tag, value), src))
        elif key == "cuda_min":
            cuda = entry.written_value("cuda")
            out.append(Comparison(key, cuda, value, compare_version(cuda, value), src))
        elif key == "driver_compat":
            driver_min = entry.written_value("driver_min") or declared.get("driver_min")
            status = compare_branches(entry.written_value("driver_compat"), driver_min, value)
            out.append(Comparison(key, entry.written_value("driver_compat"), value, status, src))
        else:
            noted = entry.written_value(key)
            out.append(Comparison(key, noted, value, compare_version(noted, value), src))
    recorded = entry.verified or {}
    if recorded.get("digest") and recorded.get("registry") == repository:
        # The tag was verified before from this same repository: a new digest means the tag was re-pushed.
        status = AGREES if recorded["digest"] == digest else DISAGREES
        out.append(Comparison("digest", recorded["digest"], digest, status, "manifest"))
    return out
