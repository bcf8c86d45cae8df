"""Content addressing: every manifest, index and config blob envpin reads is hashed and compared with the
digest that names it, so that what envpin pins (in a Dockerfile, a lock, the image-facts cache) is what the
registry holds under that digest, whatever a registry, mirror or proxy in between says about it.

Only well-formed digests are taken from anywhere (envpin.portable.imageref.is_digest): a digest reaches a
URL path and a FROM line, so 'sha256:zz/../../etc' or 'md5:…' is refused before it is used.
"""

from __future__ import annotations

import hashlib

from envpin.errors import RegistryError, shown
from envpin.portable.imageref import DIGEST_FORMS, is_digest

_HASHES = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}
_HINT_MISMATCH = (
    "the registry, or a proxy or mirror in between, sent content other than the digest names; "
    "nothing was pinned or recorded: check the mirror (re-push the image) or the proxy, then retry"
)


def compute(body: bytes, algorithm: str = "sha256") -> str:
    """The digest of `body` with `algorithm` (sha256 or sha512), in canonical 'alg:hex' form."""
    return f"{algorithm}:{_HASHES[algorithm](body).hexdigest()}"


def require(digest: object, what: str, where: str) -> str:
    """`digest` if it is well-formed, else a RegistryError naming `what` carried it (a header, an index
    entry, the manifest's config descriptor) and `where` (the registry and reference)."""
    if isinstance(digest, str) and is_digest(digest):
        return digest
    raise RegistryError(
        f"{where}: {what} '{shown(digest)}' is not a digest envpin accepts",
        hint=f"digests are {DIGEST_FORMS}; the registry (or a proxy in between) sent something "
        "else: check it, or use another mirror",
    )


def verify(body: bytes, expected: str, what: str, named_by: str, where: str) -> str:
    """`expected` if `body` hashes to it (with expected's own algorithm); else one RegistryError that names
    `where` and both digests: '`where`: `what` does not match `named_by`: expected …, computed …'.
    `expected` must already be well-formed (require)."""
    algorithm = expected.split(":", 1)[0]
    computed = compute(body, algorithm)
    if computed != expected:
        raise RegistryError(
            f"{where}: {what} does not match {named_by}: expected {expected}, computed {computed}", hint=_HINT_MISMATCH
        )
    return expected


def check_size(declared: object, length: int, what: str, where: str) -> None:
    """A descriptor's `size` (when it gives one) must be the length of what was read: OCI descriptors carry
    both, and a registry that disagrees with itself is not trusted."""
    if isinstance(declared, int) and not isinstance(declared, bool) and declared != length:
        raise RegistryError(
            f"{where}: {what} is {length} bytes, but its descriptor says {declared}", hint=_HINT_MISMATCH
        )
