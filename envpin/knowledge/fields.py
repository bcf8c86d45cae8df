"""The catalog's fields and the shape of an image object (what `catalog sync` read from an image config),
defined once for the catalog file and the user's image-facts cache, which both hold image objects."""

from __future__ import annotations

from collections.abc import Iterator

from envpin.errors import shown
from envpin.portable import imageref
from envpin.portable.imageref import is_digest

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

#: The fields every catalog entry carries, in display order.
FIELDS = (
    "tf_version",
    "python",
    "ubuntu",
    "cuda",
    "cublas",
    "cudnn",
    "nccl",
    "tensorrt",
    "horovod",
    "driver_min",
    "driver_compat",
    "compute_capability_min",
)
LIST_FIELDS = frozenset({"driver_compat"})
_IMAGE_KEYS = {"digest", "created", "registry", "declared", "source"}
#: What `envpin catalog sync` may record under a flavor's image.declared: catalog fields plus facts the
#: release notes do not carry (minimum CUDA from NVIDIA_REQUIRE_CUDA, NVIDIA_BUILD_ID, NVIDIA_TENSORFLOW_VERSION).
DECLARED_KEYS = frozenset(FIELDS) | {"cuda_min", "build_id", "nvidia_tensorflow_version"}
IMAGE_SOURCE = "image config"


def is_repository_name(text: object) -> bool:
    """'nvcr.io/nvidia/tensorflow', '127.0.0.1:5000/mirror/nvidia/tensorflow': a fully qualified repository,
    written exactly as envpin writes one (no tag, no digest, no short form). Image objects name where they
    were read with it, and the image-facts cache keys its entries by it, so nothing else can stand there."""
    if not isinstance(text, str) or "/" not in text:
        return False
    try:
        ref = imageref.parse(text)
    except imageref.RefError:
        return False
    return ref.tag is None and ref.digest is None and ref.name == text


def image_problems(image: Any) -> Iterator[str]:
    """What `catalog sync` recorded from the image config: digest, created, registry, declared, source."""
    if not isinstance(image, dict) or set(image) != _IMAGE_KEYS:
        got = sorted(image) if isinstance(image, dict) else type(image).__name__
        yield f"must be an object with exactly {sorted(_IMAGE_KEYS)}, got {got}"
        return
    if not is_digest(image["digest"]):  # the same grammar the registry client accepts
        yield f"digest {image['digest']!r} is not sha256:<64 hex digits> or sha512:<128 hex digits>"
    if image["created"] is not None and (not isinstance(image["created"], str) or not image["created"]):
        yield "created must be a non-empty string or null"
    if not isinstance(image["registry"], str) or not image["registry"]:
        yield "registry must be a non-empty string (the repository the image was read from)"
    elif not is_repository_name(image["registry"]):
        yield (
            f"registry {shown(image['registry'])!r} is not a repository name "
            "(HOST[:PORT]/PATH, e.g. nvcr.io/nvidia/tensorflow)"
        )
    if image["source"] != IMAGE_SOURCE:
        yield f"source must be {IMAGE_SOURCE!r}, got {image['source']!r}"
    declared = image["declared"]
    if not isinstance(declared, dict):
        yield "declared must be an object"
        return
    unknown = set(declared) - DECLARED_KEYS
    if unknown:
        yield f"declared holds unknown keys {sorted(unknown)}"
    for key in sorted(set(declared) & DECLARED_KEYS):
        value = declared[key]
        if key in LIST_FIELDS:
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                yield f"declared.{key} must be a list of strings"
        elif not isinstance(value, str) or not value:
            yield f"declared.{key} must be a non-empty string"
