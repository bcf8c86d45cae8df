"""The one version parser, image-reference parser, NGC-spec selection and device-class rule.

Examples first, then properties over arbitrary text: the only exception a parser raises is its own error
class, and normalisation is idempotent.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin import catalog
from envpin.errors import UsageError
from envpin.probe import device, imageref, versions

# --- versions -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts"),
    [("2.1.0", (2, 1, 0)), ("1.15.5+nv22.12", (1, 15, 5)), ("535.104.05", (535, 104, 5)), ("2.21.0rc1", (2, 21, 0)),
     ("2.1", (2, 1)), ("abc", None), ("", None), (None, None), ("٢.١", None), ("9" * 5000, None)],
)
def test_parse_version(text: str | None, parts: tuple[int, ...] | None) -> None:
    assert versions.parse_version(text) == parts


def test_exact_versions_and_components() -> None:
    assert versions.parse_version("535.104.05", exact=True) == (535, 104, 5)
    assert versions.parse_version("535.104.05-beta", exact=True) is None
    assert versions.components("1.15.5+nv21.06") == ["1", "15", "5", "nv21", "6"]


@pytest.mark.parametrize("text", ["2.1\n", " 2.1 ", "2"])
def test_tf_spec_accepts(text: str) -> None:
    assert versions.parse_tf_spec(text).text == text.strip()


@pytest.mark.parametrize("text", ["", "2.x", "٢.١", "2.1.0.0", "1" * 4400, "v2"])
def test_tf_spec_refuses(text: str) -> None:
    with pytest.raises(versions.SpecError, match="is not a TensorFlow version"):
        versions.parse_tf_spec(text)


@pytest.mark.parametrize(
    ("text", "release", "flavor"),
    [("20.02", "20.02", None), ("20.02-tf2-py3", "20.02", "tf2"),
     ("nvcr.io/nvidia/tensorflow:19.11-tf1-py2", None, None),
     ("nvcr.io/nvidia/tensorflow:20.02-tf1-py3", "20.02", "tf1"), ("19.10-py3", "19.10", "py3")],
)
def test_ngc_spec(text: str, release: str | None, flavor: str | None) -> None:
    if release is None:
        with pytest.raises(versions.SpecError):
            versions.parse_ngc_spec(text)
        return
    assert versions.parse_ngc_spec(text) == (release, flavor)


def test_ngc_month_and_trailing_junk() -> None:
    with pytest.raises(versions.SpecError, match="month 13"):
        versions.parse_ngc_spec("20.13")
    with pytest.raises(versions.SpecError, match="not an NGC TensorFlow release"):
        versions.parse_ngc_spec("20.02-tf2-py3\nRUN x")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_version_parsers_raise_only_their_own_error(text: str) -> None:
    assert versions.parse_version(text) is None or all(isinstance(p, int) for p in versions.parse_version(text))
    for parse in (versions.parse_tf_spec, versions.parse_ngc_spec):
        try:
            parse(text)
        except versions.SpecError as exc:
            assert "\n" not in exc.message
    # The host wrapper gives the same verdict as a UsageError (one error line and a hint for the CLI).
    from envpin.versions import parse_tf_spec

    try:
        ok = versions.parse_tf_spec(text)
    except versions.SpecError:
        with pytest.raises(UsageError):
            parse_tf_spec(text)
    else:
        assert parse_tf_spec(text) == ok


@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=4))
def test_version_round_trip(parts: list[int]) -> None:
    text = versions.version_text(tuple(parts))
    assert versions.parse_version(text) == tuple(parts)
    assert versions.parse_version(text + "+nv23.01") == tuple(parts)


# --- image references ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "registry", "repository", "host", "scheme"),
    [
        ("ubuntu:22.04", "docker.io", "library/ubuntu", "registry-1.docker.io", "https"),
        ("docker.io/ubuntu:22.04", "docker.io", "library/ubuntu", "registry-1.docker.io", "https"),
        ("index.docker.io/tensorflow/tensorflow:2.4.0", "docker.io", "tensorflow/tensorflow", "registry-1.docker.io",
         "https"),
        ("nvcr.io/nvidia/tensorflow:20.02-tf2-py3", "nvcr.io", "nvidia/tensorflow", "nvcr.io", "https"),
        ("127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3", "127.0.0.1:5000", "nvidia/tensorflow", "127.0.0.1:5000",
         "http"),
        ("[::1]:5000/nvidia/tensorflow:20.02-tf2-py3", "[::1]:5000", "nvidia/tensorflow", "[::1]:5000", "http"),
        ("localhost:5000/x/y@sha256:" + "a" * 64, "localhost:5000", "x/y", "localhost:5000", "http"),
        ("registry.example.com:443/mirror/tensorflow:20.02", "registry.example.com:443", "mirror/tensorflow",
         "registry.example.com:443", "https"),
    ],
)
def test_image_references(text: str, registry: str, repository: str, host: str, scheme: str) -> None:
    ref = imageref.parse(text)
    assert (ref.registry, ref.repository, ref.host, ref.scheme) == (registry, repository, host, scheme)
    assert ref.base_url == f"{scheme}://{host}/v2/{repository}"
    assert imageref.parse(str(ref)) == ref  # the canonical form parses to itself


@pytest.mark.parametrize(
    "text",
    ["", "Ubuntu:22.04", "ubuntu:22.04\n", " ubuntu", "nvcr.io/nvidia/tensorflow:bad tag", "a//b:1",
     "x@sha256:abc", "nvcr.io/:1", "a" * 600, "nvcr.io/nvidia/tensorflow:" + "t" * 200],
)
def test_bad_references(text: str) -> None:
    with pytest.raises(imageref.RefError):
        imageref.parse(text)


def test_a_registry_needs_a_tag_or_digest() -> None:
    with pytest.raises(imageref.RefError, match="no tag or digest"):
        imageref.parse("nvcr.io/nvidia/tensorflow", need_version=True)


def test_split_keeps_what_was_written() -> None:
    assert imageref.split("127.0.0.1:5000/x") == ("127.0.0.1:5000/x", None, None)
    assert imageref.split("ubuntu:22.04@sha256:" + "b" * 64) == ("ubuntu", "22.04", "sha256:" + "b" * 64)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.1.2.3:80", "[::1]", "[::1]:5000", "localhost:5000"])
def test_loopback(host: str) -> None:
    assert imageref.is_loopback(host)


@pytest.mark.parametrize("host", ["nvcr.io", "127.0.0.1.evil.com", "[::2]:5000", "10.0.0.1:5000"])
def test_not_loopback(host: str) -> None:
    assert not imageref.is_loopback(host)


# No "." in components: a first component with a dot is a registry host (Docker's rule, tested above).
_component = st.from_regex(r"[a-z0-9]{1,8}(?:[_-][a-z0-9]{1,8})?", fullmatch=True)


@given(st.one_of(st.none(), st.sampled_from(["nvcr.io", "docker.io", "127.0.0.1:5000", "[::1]:5000", "reg.example"])),
       st.lists(_component, min_size=1, max_size=3),
       st.one_of(st.none(), st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,20}", fullmatch=True)))
def test_normalisation_is_idempotent(registry: str | None, path: list[str], tag: str | None) -> None:
    text = "/".join(([registry] if registry else []) + path) + (f":{tag}" if tag else "")
    ref = imageref.parse(text)
    assert imageref.parse(str(ref)) == ref
    assert ref.tag == tag and ref.repository.endswith("/".join(path))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_reference_parser_raises_only_its_own_error(text: str) -> None:
    try:
        ref = imageref.parse(text)
    except imageref.RefError as exc:
        assert exc.hint
    else:
        assert imageref.parse(str(ref)) == ref
    imageref.split(text)  # never raises


# --- NGC-spec selection --------------------------------------------------------------------------------


def test_select_one_home_for_specs() -> None:
    cat = catalog.load()
    assert [e.tag for e in cat.select("20.03")] == ["20.03-tf1-py3", "20.03-tf2-py3"]
    assert [e.tag for e in cat.select("nvcr.io/nvidia/tensorflow:20.03-tf2-py3")] == ["20.03-tf2-py3"]
    with pytest.raises(UsageError, match="has 2 images"):
        cat.select("20.03", single=True)
    with pytest.raises(UsageError, match="has no tf1-py3 image"):
        cat.select("24.01-tf1-py3")
    with pytest.raises(UsageError, match=r"no TensorFlow container in 20\.04"):
        cat.select("20.04")


# --- device class --------------------------------------------------------------------------------------


def test_device_class_one_rule_for_both_sides() -> None:
    assert device.device_class([("NVIDIA A100", "8.0"), ("NVIDIA A100", "8.0")], "", "", "", "") == (
        "gpu:NVIDIA A100;cc=8.0;count=2")
    flat = {"cpu.isa_level": "x86-64-v3", "env.TF_NUM_INTRAOP_THREADS": "2", "env.TF_ENABLE_ONEDNN_OPTS": "0"}
    assert device.from_flat(flat) == "cpu:x86-64-v3;intra_op=2;inter_op=default;onednn=off"
    gpu = {"gpu.devices.0.name": "H100", "gpu.devices.0.compute_capability": "9.0"}
    assert device.from_flat(gpu) == device.device_class([("H100", "9.0")], "", "", "", "")
