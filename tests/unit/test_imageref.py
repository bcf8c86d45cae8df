"""envpin.portable.imageref: the one image-reference parser (registry client, --base-image, --registry, audit).

Examples of Docker's normalisation first, then the callers, then properties: arbitrary text raises only
RefError, the canonical and familiar forms parse back to the same reference, and parsing is idempotent.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.errors import RegistryError, UsageError
from envpin.knowledge import sync
from envpin.portable import imageref
from envpin.portable.imageref import ImageRef, RefError
from envpin.registry import client
from tests.props import examples

DIGEST = "sha256:" + "a" * 64
EXAMPLE = "registry.example.com/mirror/tensorflow:20.02-tf2-py3"


@pytest.mark.parametrize(
    ("text", "registry_name", "repository", "api_host", "scheme"),
    [
        ("ubuntu", "docker.io", "library/ubuntu", "registry-1.docker.io", "https"),
        ("ubuntu:22.04", "docker.io", "library/ubuntu", "registry-1.docker.io", "https"),
        ("docker.io/ubuntu:22.04", "docker.io", "library/ubuntu", "registry-1.docker.io", "https"),
        ("index.docker.io/library/ubuntu", "docker.io", "library/ubuntu", "registry-1.docker.io", "https"),
        (
            "registry-1.docker.io/tensorflow/tensorflow:2.4.0",
            "docker.io",
            "tensorflow/tensorflow",
            "registry-1.docker.io",
            "https",
        ),
        ("tensorflow/tensorflow:2.4.0-gpu", "docker.io", "tensorflow/tensorflow", "registry-1.docker.io", "https"),
        ("nvcr.io/nvidia/tensorflow:20.02-tf2-py3", "nvcr.io", "nvidia/tensorflow", "nvcr.io", "https"),
        (
            "127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3",
            "127.0.0.1:5000",
            "nvidia/tensorflow",
            "127.0.0.1:5000",
            "http",
        ),
        ("127.8.9.10/x:1", "127.8.9.10", "x", "127.8.9.10", "http"),
        ("[::1]:5000/nvidia/tensorflow:20.02-tf2-py3", "[::1]:5000", "nvidia/tensorflow", "[::1]:5000", "http"),
        ("[::1]/x:1", "[::1]", "x", "[::1]", "http"),
        ("localhost/x:1", "localhost", "x", "localhost", "http"),
        ("localhost:5000/x/y@" + DIGEST, "localhost:5000", "x/y", "localhost:5000", "http"),
        (
            "registry.example.com:443/mirror/tensorflow:20.02",
            "registry.example.com:443",
            "mirror/tensorflow",
            "registry.example.com:443",
            "https",
        ),
        ("[2001:db8::1]:5000/x:1", "[2001:db8::1]:5000", "x", "[2001:db8::1]:5000", "https"),
        ("10.0.0.1:5000/x:1", "10.0.0.1:5000", "x", "10.0.0.1:5000", "https"),
    ],
)
def test_normalisation(text: str, registry_name: str, repository: str, api_host: str, scheme: str) -> None:
    ref = imageref.parse(text)
    assert (ref.registry, ref.repository, ref.api_host) == (registry_name, repository, api_host)
    # "http" marks the loopback hosts, the only ones the registry client may speak plain HTTP to.
    assert imageref.is_loopback(ref.api_host) == (scheme == "http")
    if scheme == "https":
        url = client.RegistryClient()._url(ref, "manifests/1")
        assert url == f"https://{api_host}/v2/{repository}/manifests/1"
    assert imageref.parse(ref.canonical) == ref == imageref.parse(ref.familiar)


def test_forms() -> None:
    ref = imageref.parse("ubuntu:22.04@" + DIGEST)
    assert ref == ImageRef("docker.io", "library/ubuntu", "22.04", DIGEST)
    assert ref.canonical == str(ref) == "docker.io/library/ubuntu:22.04@" + DIGEST
    assert ref.familiar == "ubuntu:22.04@" + DIGEST and ref.name == "docker.io/library/ubuntu"
    assert imageref.parse("docker.io/tensorflow/tensorflow:2.8.0").familiar == "tensorflow/tensorflow:2.8.0"
    nvcr = imageref.parse("nvcr.io/nvidia/tensorflow:20.02-tf2-py3")
    assert nvcr.familiar == nvcr.canonical == "nvcr.io/nvidia/tensorflow:20.02-tf2-py3"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is not an image reference"),
        ("Ubuntu:22.04", "is not an image reference"),
        ("ubuntu:22.04\n", "is not an image reference"),
        (" ubuntu", "is not an image reference"),
        ("a//b:1", "is not an image reference"),
        ("nvcr.io/:1", "is not an image reference"),
        ("nvcr.io/nvidia/../tensorflow:1", "is not an image reference"),
        ("a" * 600, "is not an image reference"),
        ("nvcr.io/nvidia/tensorflow:bad tag", "is not a valid tag"),
        ("nvcr.io/nvidia/tensorflow:", "is not a valid tag"),
        ("nvcr.io/nvidia/tensorflow:" + "t" * 200, "is not a valid tag"),
        ("x@sha256:abc", "is not a sha256 or sha512 digest"),
        ("ubuntu@", "is not a sha256 or sha512 digest"),
        ("x@md5:" + "a" * 32, "is not a sha256 or sha512 digest"),
        ("x@sha256:" + "A" * 64, "is not a sha256 or sha512 digest"),
        ("x@sha256:zz/../../etc", "is not a sha256 or sha512 digest"),
        ("x@sha512:" + "a" * 64, "is not a sha256 or sha512 digest"),
        ("x@sha256:" + "a" * 64 + "\n", "is not an image reference"),
        ("a..b/c:1", "is not a registry host"),
        ("-reg.io/c:1", "is not a registry host"),
        ("localhost:0/c:1", "is not a registry host"),
        ("localhost:99999/c:1", "is not a registry host"),
        ("localhost:٥٠٠٠/c:1", "is not a registry host"),
        ("[::1/c:1", "is not a registry host"),
    ],
)
def test_refused(text: str, message: str) -> None:
    with pytest.raises(RefError, match=message) as info:
        imageref.parse(text)
    assert info.value.hint and "\n" not in info.value.message


def test_validate_for_base_image() -> None:
    """plan's --base-image: kept as written, one message for every way it can be wrong."""
    assert imageref.validate("ubuntu:22.04") == "ubuntu:22.04"
    pinned = "127.0.0.1:5000/mirror/tensorflow@" + DIGEST
    assert imageref.validate(pinned) == pinned
    for bad in ("Bad Ref", "a..b/c:1", "ubuntu@", "nvcr.io/x:bad tag", "", "x\ny"):
        with pytest.raises(RefError) as info:
            imageref.validate(bad)
        assert info.value.message == f"'{bad}' is not an image reference".replace("\n", "\\n")
        assert info.value.hint == "use REGISTRY/REPOSITORY:TAG, e.g. " + EXAMPLE


def test_registry_client_needs_a_tag_or_digest() -> None:
    with pytest.raises(RefError, match="no tag or digest"):
        imageref.parse("nvcr.io/nvidia/tensorflow", need_version=True)
    with pytest.raises(RegistryError, match="no tag or digest"):
        client.parse_ref("nvcr.io/nvidia/tensorflow")
    with pytest.raises(RegistryError, match="is not a registry host"):
        client.parse_ref("a..b/c:1")
    url = client.RegistryClient()._url(client.parse_ref("ubuntu:22.04"), "tags/list")
    assert url == "https://registry-1.docker.io/v2/library/ubuntu/tags/list"


def test_split_keeps_what_was_written() -> None:
    assert imageref.split("127.0.0.1:5000/x") == ("127.0.0.1:5000/x", None, None)
    assert imageref.split("[::1]:5000/x:1") == ("[::1]:5000/x", "1", None)
    assert imageref.split("ubuntu:22.04@" + DIGEST) == ("ubuntu", "22.04", DIGEST)
    assert imageref.split("img:$TAG") == ("img", "$TAG", None)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.1.2.3:80", "[::1]", "[::1]:5000", "localhost:5000"])
def test_loopback(host: str) -> None:
    assert imageref.is_loopback(host)


@pytest.mark.parametrize("host", ["nvcr.io", "127.0.0.1.evil.com", "[::2]:5000", "10.0.0.1:5000", "localhost.evil"])
def test_not_loopback(host: str) -> None:
    assert not imageref.is_loopback(host)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("nvcr.io", True),
        ("localhost", True),
        ("reg:5000", True),
        ("[::1]:5000", True),
        ("registry", False),
        ("a..b", False),
        ("reg:65536", False),
        ("", False),
        ("reg.io/x", False),
    ],
)
def test_registry_hosts(text: str, ok: bool) -> None:
    assert imageref.is_registry_host(text) is ok


@pytest.mark.parametrize(
    ("registry_arg", "repository"),
    [
        ("http://[::1]:5000", "[::1]:5000/nvidia/tensorflow"),
        ("[::1]:5000/m", "[::1]:5000/m/nvidia/tensorflow"),
        ("http://localhost:5000/", "localhost:5000/nvidia/tensorflow"),
        ("nvcr.io", "nvcr.io/nvidia/tensorflow"),
        ("reg.example/a__b/nvidia/tensorflow", "reg.example/a__b/nvidia/tensorflow"),
    ],
)
def test_sync_registry_hosts_follow_the_same_rules(registry_arg: str, repository: str) -> None:
    assert sync.repository_for(registry_arg, "nvcr.io/nvidia/tensorflow") == repository


@pytest.mark.parametrize(
    ("registry_arg", "message"),
    [
        ("https://[::1]:5000", "reached over plain HTTP"),
        ("localhost:٥٠٠٠", "does not start with a registry host"),
        ("reg:99999", "does not start with a registry host"),
        ("nvcr.io/a//b", "is not a repository path"),
    ],
)
def test_sync_registry_refusals(registry_arg: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        sync.repository_for(registry_arg, "nvcr.io/nvidia/tensorflow")


# --- properties ------------------------------------------------------------------------------------------

# No "." in the first component: a first component with a dot is a registry host (Docker's rule, above).
_component = st.from_regex(r"[a-z0-9]{1,8}(?:(?:__|[_-]|-{2,3})[a-z0-9]{1,8})?", fullmatch=True)
_registry = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "nvcr.io",
            "docker.io",
            "index.docker.io",
            "127.0.0.1:5000",
            "[::1]:5000",
            "reg.example",
            "localhost",
            "Reg.Example:443",
        ]
    ),
)
_tag = st.one_of(st.none(), st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,20}", fullmatch=True))
_digest = st.one_of(st.none(), st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True))


@given(_registry, st.lists(_component, min_size=1, max_size=3), _tag, _digest)
def test_round_trip_and_idempotent(
    registry_name: str | None, path: list[str], tag: str | None, digest: str | None
) -> None:
    text = "/".join(([registry_name] if registry_name else []) + path)
    text += (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
    ref = imageref.parse(text)
    assert (ref.tag, ref.digest) == (tag, digest) and ref.repository.endswith("/".join(path))
    again = imageref.parse(ref.canonical)
    assert again == ref and again.canonical == ref.canonical
    assert imageref.parse(ref.familiar) == ref
    assert imageref.validate(text) == text
    assert imageref.is_loopback(ref.api_host) == (registry_name in ("127.0.0.1:5000", "[::1]:5000", "localhost"))
    if registry_name in (None, "docker.io", "index.docker.io"):
        assert ref.registry == "docker.io" and ref.api_host == "registry-1.docker.io"


@settings(max_examples=examples(400), deadline=None)
@given(st.text(max_size=80) | st.from_regex(r"[a-z0-9.:/@\[\]_-]{1,40}", fullmatch=True))
def test_arbitrary_text_raises_only_ref_error(text: str) -> None:
    try:
        ref = imageref.parse(text)
    except RefError as exc:
        assert exc.hint and "\n" not in exc.message
        with pytest.raises(RefError, match="is not an image reference"):
            imageref.validate(text)
    else:
        assert imageref.parse(ref.canonical) == ref == imageref.parse(ref.familiar)
        assert imageref.validate(text) == text
    imageref.split(text)  # never raises
    imageref.is_loopback(text)
    imageref.is_registry_host(text)
