"""Image references, parsed in one place (standard library only, Python 3.6+).

Docker's rules: the first path component is a registry host when it has a '.' or a ':' or is
'localhost' (an IPv6 host is bracketed: '[::1]:5000'); otherwise the image is on Docker Hub, whose
canonical name is 'docker.io/library/<name>' for one-component names and whose API host is
'registry-1.docker.io'. How a registry is spoken to (HTTPS, HTTP for a loopback one that answers HTTP,
logins) is the registry client's business, on the host side.
"""

import re
from typing import NamedTuple, Optional

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, Tuple

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io")
_MAX = 512  # longer than any real reference; refused rather than parsed
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|%s(?:\.%s)*)(?::([0-9]{1,5}))?\Z" % (_LABEL, _LABEL))
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*\Z")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")
#: The digests envpin accepts anywhere (user input, registry headers, index entries, config descriptors): the
#: OCI-registered algorithms in their canonical form, lower-case hex of the exact length. Anything else
#: (md5:, upper-case hex, 'sha256:zz/../../etc') is refused before it can reach a URL, a pin or a file.
DIGEST_HEX_LENGTHS = {"sha256": 64, "sha512": 128}
_DIGEST = re.compile(r"(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})\Z")
DIGEST_FORMS = "sha256:<64 lower-case hex digits> or sha512:<128 lower-case hex digits>"
EXAMPLE = "registry.example.com/mirror/tensorflow:20.02-tf2-py3"


class RefError(ValueError):
    """Text that is not an image reference; `hint` says what one looks like."""

    def __init__(self, message: str, hint: "Optional[str]" = None) -> None:
        ValueError.__init__(self, message)
        self.message = message
        self.hint = hint


def split(text: str) -> "Tuple[str, Optional[str], Optional[str]]":
    """(name, tag, digest) exactly as written, without validation: what a Dockerfile's FROM says.
    'nvcr.io/nvidia/tensorflow:20.02-tf2-py3@sha256:..' -> ('nvcr.io/nvidia/tensorflow', '20.02-tf2-py3', ..);
    a ':' inside the registry host ('127.0.0.1:5000/x') is not a tag."""
    name, _, digest = text.partition("@")
    tag = None
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest or None


def is_registry_host(text: str) -> bool:
    """Docker's test for a first path component that names a registry: a '.' or a ':' (a port), 'localhost',
    or a bracketed IPv6 address; and then a well-formed HOST[:PORT] with a port from 1 to 65535."""
    if not isinstance(text, str) or not ("." in text or ":" in text or text == "localhost" or text.startswith("[")):
        return False
    m = _HOST.match(text)
    return m is not None and (m.group(1) is None or 0 < int(m.group(1)) <= 65535)


def is_repository_path(text: str) -> bool:
    """'nvidia/tensorflow', 'mirror/nvidia/tensorflow': lower-case components with Docker's separators."""
    return isinstance(text, str) and bool(text) and all(_COMPONENT.match(p) for p in text.split("/"))


def is_digest(text: object) -> bool:
    """A well-formed sha256 or sha512 digest; the one test for every digest envpin takes from anywhere."""
    return isinstance(text, str) and _DIGEST.match(text) is not None


def is_loopback(host: str) -> bool:
    """'localhost', '127.x.x.x' and '[::1]', with or without a port."""
    name = host[1 : host.index("]")] if host.startswith("[") and "]" in host else host.rsplit(":", 1)[0]
    return name in ("localhost", "::1") or re.match(r"127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\Z", name) is not None


class ImageRef(NamedTuple):
    """A parsed reference: `registry` is the canonical registry name ('docker.io' for Docker Hub).

    A typing.NamedTuple (Python 3.6 has no dataclasses): fields declared once, seen by type checkers, and
    `.replace()` as the host side's value classes have it (envpin.record.Value)."""

    registry: str
    repository: str
    tag: Optional[str]
    digest: Optional[str]

    def replace(self, **changes: "Any") -> "ImageRef":
        """A copy with `changes` applied; an unknown name is a ValueError, as namedtuple's _replace says."""
        return self._replace(**changes)

    @property
    def api_host(self) -> str:
        """The host the registry API answers on (Docker Hub's is not docker.io)."""
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def name(self) -> str:
        """REGISTRY/REPOSITORY, fully qualified: 'docker.io/library/ubuntu'."""
        return "%s/%s" % (self.registry, self.repository)

    @property
    def canonical(self) -> str:
        """The fully qualified reference; it parses to the same ImageRef."""
        return self.name + (":" + self.tag if self.tag else "") + ("@" + self.digest if self.digest else "")

    @property
    def familiar(self) -> str:
        """The short form `docker` prints: 'ubuntu:22.04' for docker.io/library/ubuntu:22.04; others unchanged."""
        name = self.name
        if self.registry == DOCKER_HUB:
            name = self.repository[len("library/") :] if self.repository.startswith("library/") else self.repository
        return name + (":" + self.tag if self.tag else "") + ("@" + self.digest if self.digest else "")

    def __str__(self) -> str:
        return self.canonical


def parse(text: str, need_version: bool = False) -> ImageRef:
    """Parse and normalise ('ubuntu' -> docker.io/library/ubuntu); RefError says what is wrong.
    With need_version, a tag or a digest is required (a registry can only be asked for one of those)."""
    if not isinstance(text, str) or not text or len(text) > _MAX or text != text.strip() or "\n" in text:
        raise RefError(
            "'%s' is not an image reference" % _shown(text), hint="use REGISTRY/REPOSITORY:TAG, e.g. " + EXAMPLE
        )
    name, tag, digest = split(text)
    parts = name.split("/")
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, path = first, parts[1:]
        if not is_registry_host(registry):
            raise RefError(
                "'%s': '%s' is not a registry host" % (_shown(text), _shown(registry)),
                hint="use HOST[:PORT], e.g. 127.0.0.1:5000 or [::1]:5000",
            )
    else:
        registry, path = DOCKER_HUB, parts
    if registry.lower() in _HUB_ALIASES:
        registry = DOCKER_HUB
        if len(path) == 1:
            path.insert(0, "library")
    bad = [p for p in path if not _COMPONENT.match(p)]
    if bad or not path:
        raise RefError(
            "'%s' is not an image reference" % _shown(text),
            hint="repository names are lower-case letters, digits and '.', '_', '-' separators, e.g. " + EXAMPLE,
        )
    if tag is not None and not _TAG.match(tag):
        raise RefError(
            "'%s': '%s' is not a valid tag" % (_shown(text), _shown(tag)),
            hint="tags are letters, digits, '_', '.' and '-', at most 128 characters",
        )
    if "@" in text and not is_digest(digest):
        raise RefError(
            "'%s': '%s' is not a sha256 or sha512 digest" % (_shown(text), _shown(digest or "")),
            hint="a digest is " + DIGEST_FORMS,
        )
    if need_version and tag is None and digest is None:
        raise RefError(
            "'%s' is not a full image reference (no tag or digest)" % _shown(text), hint="use REGISTRY/REPOSITORY:TAG"
        )
    return ImageRef(registry, "/".join(path), tag, digest)


def validate(text: str) -> str:
    """A reference as the user wrote it, for a FROM line (kept verbatim), or RefError with one message."""
    try:
        parse(text)
    except RefError:
        raise RefError(
            "'%s' is not an image reference" % _shown(text), hint="use REGISTRY/REPOSITORY:TAG, e.g. " + EXAMPLE
        ) from None
    return text


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(text: object, limit: int = 100) -> str:
    """User input quoted in a one-line message: control characters escaped (an ESC or BEL never reaches the
    terminal raw), long input shortened. versions.py quotes with it too."""
    s = _CONTROL.sub(lambda m: _NAMED.get(m.group(), "\\x%02x" % ord(m.group())), str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."
