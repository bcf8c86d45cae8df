"""The catalog's fields and the check of an image object (what `catalog sync` read from an image config),
defined once for the catalog file and the user's image-facts cache, which both hold image objects. The names
here are the schema's too: catalog.schema.json lists them as a fact's fields (driver_compat a list, every other
one a string) and, with the facts release notes do not carry (cuda_min from NVIDIA_REQUIRE_CUDA, build_id,
nvidia_tensorflow_version), as what an image object may declare (tests/unit/test_schemas.py)."""

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
    """What is wrong with an image object (what `catalog sync` recorded from an image config, in the catalog
    file or the image-facts cache): its shape (catalog.schema.json's image), then its references."""
    from envpin.knowledge import schema

    shape = list(schema.problems(image, "catalog", "#/$defs/image"))
    yield from shape or reference_problems(image)


def reference_problems(image: dict[str, Any]) -> Iterator[str]:
    """The digest and the repository of an image object of the schema's shape, in the grammar the registry
    client accepts (envpin.portable.imageref), which a schema pattern would only copy."""
    if not is_digest(image["digest"]):
        yield f"digest: {shown(image['digest'])!r} is not sha256:<64 hex digits> or sha512:<128 hex digits>"
    if not is_repository_name(image["registry"]):
        yield (
            f"registry: {shown(image['registry'])!r} is not a repository name "
            "(HOST[:PORT]/PATH, e.g. nvcr.io/nvidia/tensorflow)"
        )
