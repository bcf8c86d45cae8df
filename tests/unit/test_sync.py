"""catalog sync, the pure parts: NVIDIA_REQUIRE_CUDA, version comparison, --registry mapping, the refreshed
catalog file (schema, canonical form) and ENVPIN_CATALOG. The registry side is in tests/docker."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envpin.errors import CatalogError, UsageError
from envpin.knowledge import catalog, imageconfig, sync
from tests.conftest import Result

Cli = Callable[..., Result]

REQUIRE_21_06 = (
    "cuda>=11.3 brand=tesla,driver>=418,driver<419 brand=tesla,driver>=440,driver<441 "
    "brand=tesla,driver>=450,driver<451 brand=tesla,driver>=460,driver<461"
)


@pytest.fixture(autouse=True)
def _shipped_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts from the shipped catalog, whatever the developer's shell exports."""
    monkeypatch.delenv(catalog.CATALOG_ENV, raising=False)


@pytest.fixture
def shipped() -> dict[str, Any]:
    return json.loads(catalog.shipped_catalog_path().read_text(encoding="utf-8"))


def _entry(tag: str) -> catalog.Entry:
    return next(e for e in catalog.load().entries() if e.tag == tag)


def _image(**declared: Any) -> dict[str, Any]:
    return {
        "digest": "sha256:" + hashlib.sha256(json.dumps(declared, sort_keys=True).encode()).hexdigest(),
        "created": "2020-03-19T22:04:11.5Z",
        "registry": "nvcr.io/nvidia/tensorflow",
        "declared": declared,
        "source": "image config",
    }


# -- NVIDIA_REQUIRE_CUDA --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, cuda_min, branches",
    [
        (REQUIRE_21_06, "11.3", ("418", "440", "450", "460")),
        (
            "cuda>=10.2 brand=tesla,driver>=396,driver<397 brand=tesla,driver>=410,driver<411 "
            "brand=tesla,driver>=418,driver<419",
            "10.2",
            ("396", "410", "418"),
        ),
        # Newer images repeat each branch for every brand; only data-center (tesla) branches count.
        (
            "cuda>=12.0 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 "
            "brand=geforce,driver>=510,driver<511 brand=tesla,driver>=450,driver<451",
            "12.0",
            ("450", "470"),
        ),
        ("cuda>=9.0", "9.0", ()),
        # A branch clause without a brand applies to every brand, data-center included.
        ("cuda>=10.0 driver>=384,driver<385", "10.0", ("384",)),
        # Out of order and repeated: sorted numerically, once each (not "1000" < "418").
        (
            "brand=tesla,driver>=1000,driver<1001 cuda>=13.0 brand=tesla,driver>=418,driver<419 "
            "brand=tesla,driver>=418,driver<419",
            "13.0",
            ("418", "1000"),
        ),
        ("", None, ()),
    ],
)
def test_parse_require_cuda(text: str, cuda_min: str | None, branches: tuple[str, ...]) -> None:
    req = imageconfig.parse_require_cuda(text)
    assert (req.cuda_min, req.branches, req.unparsed) == (cuda_min, branches, ())


def test_parse_require_cuda_keeps_what_it_cannot_read() -> None:
    req = imageconfig.parse_require_cuda(
        "cuda>=11.3 brand=tesla,driver>=x,driver<419 nonsense brand=tesla,driver>=440,driver<441"
    )
    assert req.cuda_min == "11.3" and req.branches == ("440",)
    assert req.unparsed == ("brand=tesla,driver>=x,driver<419", "nonsense")


# -- comparison ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "notes, image, status",
    [
        (None, "10.2.89", imageconfig.FILLED),
        ("10.2.89", "10.2.89", imageconfig.AGREES),
        ("2.1", "2.1.0", imageconfig.MORE_PRECISE),
        ("7.0.0", "7.0.0.11", imageconfig.MORE_PRECISE),
        ("1.15.5", "1.15.5+nv21.06", imageconfig.MORE_PRECISE),
        ("10.2.89", "10.2", imageconfig.AGREES),  # the image says less, not something else
        ("2.6.3", "2.06.3", imageconfig.AGREES),
        ("10.2.89", "10.1.243", imageconfig.DISAGREES),
        ("2.1", "2.10.0", imageconfig.DISAGREES),  # components, not string prefixes
        ("3.6", "3.8", imageconfig.DISAGREES),
    ],
)
def test_compare_version(notes: str | None, image: str, status: str) -> None:
    assert imageconfig.compare_version(notes, image) == status


def test_compare_branches_ignores_the_native_branch_the_notes_list() -> None:
    notes = ["396", "384.111+", "410", "418.xx", "440.30"]  # 20.03's notes; driver_min 440.33.01
    assert imageconfig.compare_branches(notes, "440.33.01", ["384", "396", "410", "418"]) == imageconfig.AGREES
    assert imageconfig.compare_branches(notes, "440.33.01", ["396", "410", "418"]) == imageconfig.DISAGREES
    assert imageconfig.compare_branches(notes, None, ["384", "396", "410", "418"]) == imageconfig.DISAGREES
    assert imageconfig.compare_branches(None, "465.19.01", ["418", "440"]) == imageconfig.FILLED


@pytest.mark.parametrize(
    "tag, value, status",
    [
        ("20.03-tf2-py3", "20.03-tf2", imageconfig.AGREES),
        ("19.01-py3", "19.01", imageconfig.AGREES),
        ("20.03-tf2-py3", "20.03-tf1", imageconfig.DISAGREES),
        ("20.03-tf2-py3", "20.02-tf2", imageconfig.DISAGREES),
        ("20.03-tf2-py3", "20.0", imageconfig.DISAGREES),
    ],
)
def test_compare_ngc_version(tag: str, value: str, status: str) -> None:
    assert imageconfig.compare_ngc_version(tag, value) == status


def test_declared_from_config_env_first_then_labels() -> None:
    config = {
        "created": "2021-06-10T01:02:03Z",
        "config": {
            "Env": [
                "PATH=/usr/bin",
                "CUDA_VERSION=11.3.0",
                "CUDA_VERSION=11.3.1",  # a later ENV overrides, as in a container
                "TRT_VERSION=7.2.3.4",
                "TENSORRT_VERSION=7.2.3",
                "HOROVOD_VERSION=",  # empty: not a declaration
                "PYVER=3.8",
                "NVIDIA_BUILD_ID=24152431",
                "NVIDIA_TENSORFLOW_VERSION=21.06-tf2",
                f"NVIDIA_REQUIRE_CUDA={REQUIRE_21_06}",
            ],
            "Labels": {"com.nvidia.tensorflow.version": "2.5.0", "com.nvidia.cudnn.version": "8.2.1.32"},
        },
    }
    declared, origin = imageconfig.declared_from_config(config)
    assert declared == {
        "cuda": "11.3.1",
        "tensorrt": "7.2.3.4",
        "python": "3.8",
        "build_id": "24152431",
        "nvidia_tensorflow_version": "21.06-tf2",
        "tf_version": "2.5.0",
        "cudnn": "8.2.1.32",
        "cuda_min": "11.3",
        "driver_compat": ["418", "440", "450", "460"],
    }
    assert origin["tensorrt"] == "ENV TRT_VERSION" and origin["tf_version"] == "LABEL com.nvidia.tensorflow.version"
    assert origin["driver_compat"] == "ENV NVIDIA_REQUIRE_CUDA"


def test_compare_against_the_catalog() -> None:
    entry = _entry("21.06-tf2-py3")
    declared = {
        "tf_version": "2.5.0",
        "cuda": "11.3.0",
        "cudnn": "8.2.1.32",
        "build_id": "24152431",
        "nvidia_tensorflow_version": "21.06-tf2",
        "cuda_min": "11.3",
        "driver_compat": ["418", "440", "450", "460"],
    }
    compared = imageconfig.compare(entry, declared, {}, "sha256:" + "a" * 64, "nvcr.io/nvidia/tensorflow")
    got = {c.field: c for c in compared}
    assert "build_id" not in got  # recorded, but the notes have nothing to compare it with
    assert got["cuda"].status == imageconfig.DISAGREES and got["cuda"].catalog == entry.value("cuda")
    assert got["tf_version"].status == imageconfig.MORE_PRECISE
    assert got["cudnn"].status == imageconfig.MORE_PRECISE
    assert got["cuda_min"].status == imageconfig.AGREES
    # 21.06's TF notes lack the data-center branches; DLProf's 21.06 notes give them, and the image agrees.
    assert got["driver_compat"].status == imageconfig.AGREES
    assert got["nvidia_tensorflow_version"].status == imageconfig.AGREES
    assert "digest" not in got


def test_a_re_pushed_tag_is_a_disagreement() -> None:
    entry = _entry("21.06-tf2-py3")
    old = _image(tf_version="2.5.0")
    verified = catalog.Entry(entry.release, entry.flavor, entry.tag, entry.image, entry.facts, entry.sources, old)
    same = imageconfig.compare(verified, {}, {}, old["digest"], old["registry"])
    moved = imageconfig.compare(verified, {}, {}, "sha256:" + "b" * 64, old["registry"])
    mirror = imageconfig.compare(verified, {}, {}, "sha256:" + "b" * 64, "mirror.example.com/nvidia/tensorflow")
    assert [(c.field, c.status) for c in same] == [("digest", imageconfig.AGREES)]
    assert [(c.field, c.status) for c in moved] == [("digest", imageconfig.DISAGREES)]
    assert mirror == []  # a mirror may re-push with other digests: only the same repository is compared


# -- --registry and --release -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "registry, repository",
    [
        ("https://nvcr.io", "nvcr.io/nvidia/tensorflow"),
        ("nvcr.io", "nvcr.io/nvidia/tensorflow"),
        ("127.0.0.1:5000", "127.0.0.1:5000/nvidia/tensorflow"),
        ("http://127.0.0.1:5000/", "127.0.0.1:5000/nvidia/tensorflow"),
        ("127.0.0.1:5000/envpin-sync-test", "127.0.0.1:5000/envpin-sync-test/nvidia/tensorflow"),
        ("harbor.example.com/ngc/nvidia/tensorflow", "harbor.example.com/ngc/nvidia/tensorflow"),
        ("localhost:5000", "localhost:5000/nvidia/tensorflow"),
    ],
)
def test_registry_maps_to_repository(registry: str, repository: str) -> None:
    assert sync.repository_for(registry, "nvcr.io/nvidia/tensorflow") == repository


@pytest.mark.parametrize(
    "registry, message",
    [
        ("ftp://nvcr.io", "scheme ftp:// is not supported"),
        ("http://nvcr.io", "plain HTTP is used only for loopback"),
        ("https://127.0.0.1:5000", "loopback registries are reached over plain HTTP"),
        ("registry", "does not start with a registry host"),
        ("nvcr.io/Mirror", "is not a repository path"),
        ("", "does not start with a registry host"),
    ],
)
def test_registry_errors(registry: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        sync.repository_for(registry, "nvcr.io/nvidia/tensorflow")


def test_release_selection() -> None:
    cat = catalog.load()
    assert [e.tag for e in sync.select_entries(cat, ["20.03"])] == ["20.03-tf1-py3", "20.03-tf2-py3"]
    assert [e.tag for e in sync.select_entries(cat, ["21.06-tf2-py3,20.03-tf2-py3", "20.03"])] == [
        "20.03-tf1-py3",
        "20.03-tf2-py3",
        "21.06-tf2-py3",
    ]
    assert len(sync.select_entries(cat, [])) == len(cat.entries())
    with pytest.raises(UsageError, match=r"no TensorFlow container in 20\.04"):
        sync.select_entries(cat, ["20.04"])
    with pytest.raises(UsageError, match=r"has no tf1-py3 image; it was published as 24\.01-tf2-py3"):
        sync.select_entries(cat, ["24.01-tf1-py3"])


# -- the refreshed catalog file ------------------------------------------------------------------------------------
def test_canonical_form_is_the_shipped_files_form(shipped: dict[str, Any]) -> None:
    assert sync.dump_catalog(shipped) == catalog.shipped_catalog_path().read_bytes()


def test_refreshed_catalog_keeps_release_notes_and_validates(shipped: dict[str, Any]) -> None:
    cat = catalog.load()
    entry = _entry("20.02-tf2-py3")
    image = _image(cuda="10.2.89", driver_compat=["396", "410", "418"], cuda_min="10.2", build_id="9950418")
    data = sync.updated_catalog(cat, [sync.TagResult(entry, "x", image), sync.TagResult(_entry("20.03-tf2-py3"), "y")])
    catalog.validate(data)
    flavor = data["releases"]["20.02"]["flavors"]["tf2"]
    assert flavor.pop("image") == image
    assert data == shipped  # nothing else changed: notes values are not overwritten, missing tags untouched
    assert cat.data == shipped  # and the loaded catalog was not modified


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda i: i.pop("created"), "image: needs 'created'"),
        (lambda i: i.__setitem__("extra", 1), "image: unknown key 'extra'"),
        (lambda i: i.__setitem__("digest", "sha256:abc"), "image.digest: .* is not sha256:<64 hex digits>"),
        (lambda i: i.__setitem__("digest", "md5:" + "0" * 32), "image.digest: .* is not sha256:<64 hex digits>"),
        (lambda i: i.__setitem__("digest", "sha256:zz/../../etc"), "image.digest: .* is not sha256:<64 hex digits>"),
        (lambda i: i.__setitem__("digest", "sha256:" + "A" * 64), "image.digest: .* is not sha256:<64 hex digits>"),
        (lambda i: i.__setitem__("digest", "sha512:" + "a" * 64), "image.digest: .* or sha512:<128 hex digits>"),
        (lambda i: i.__setitem__("source", "release notes"), 'image.source: must be "image config"'),
        (lambda i: i.__setitem__("registry", ""), "image.registry: must not be empty"),
        (lambda i: i.__setitem__("registry", "tensorflow"), "image.registry: 'tensorflow' is not a repository name"),
        (lambda i: i.__setitem__("created", 2020), "image.created: must be a string or null"),
        (lambda i: i.__setitem__("declared", ["cuda"]), "image.declared: must be an object"),
        (lambda i: i["declared"].__setitem__("cuda_version", "10.2"), "image.declared: unknown key 'cuda_version'"),
        (lambda i: i["declared"].__setitem__("driver_compat", "418"), "image.declared.driver_compat: must be a list"),
        (lambda i: i["declared"].__setitem__("cuda", 10.2), "image.declared.cuda: must be a string"),
    ],
)
def test_schema_rejects_malformed_image(shipped: dict[str, Any], mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    image = _image(cuda="10.2.89", driver_compat=["418"])
    good = copy.deepcopy(shipped)
    good["releases"]["20.02"]["flavors"]["tf2"]["image"] = image
    catalog.validate(good)
    mutate(image)
    with pytest.raises(CatalogError, match=f"releases\\['20.02'\\].flavors.tf2.{message}"):
        catalog.validate(good)


def test_sha512_digests_are_image_digests(shipped: dict[str, Any]) -> None:
    shipped["releases"]["20.02"]["flavors"]["tf2"]["image"] = {**_image(), "digest": "sha512:" + "b" * 128}
    catalog.validate(shipped)


def test_created_may_be_null(shipped: dict[str, Any]) -> None:
    shipped["releases"]["20.02"]["flavors"]["tf2"]["image"] = {**_image(), "created": None}
    catalog.validate(shipped)


# -- ENVPIN_CATALOG -----------------------------------------------------------------------------------------------
def _write_override(path: Path, shipped: dict[str, Any], **declared: Any) -> dict[str, Any]:
    image = _image(**declared)
    data = copy.deepcopy(shipped)
    data["releases"]["20.03"]["flavors"]["tf2"]["image"] = image
    path.write_bytes(sync.dump_catalog(data))
    return image


def test_envpin_catalog_overrides_the_shipped_catalog(
    tmp_path: Path, shipped: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "catalog.json"
    image = _write_override(path, shipped, cuda="10.2.89")
    shipped_cat = catalog.load()
    monkeypatch.setenv(catalog.CATALOG_ENV, str(path))
    cat = catalog.load()
    assert cat.origin == str(path) and cat is not shipped_cat
    assert next(e for e in cat.entries() if e.tag == "20.03-tf2-py3").verified == image
    assert catalog.load() is cat  # cached per path
    image2 = _write_override(path, shipped, cuda="10.2.89", cudnn="7.6.5.32")  # rewritten in place
    assert next(e for e in catalog.load().entries() if e.tag == "20.03-tf2-py3").verified == image2
    monkeypatch.delenv(catalog.CATALOG_ENV)
    assert catalog.load() is shipped_cat


def test_a_bad_override_names_the_file(
    tmp_path: Path, shipped: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.json"
    data = copy.deepcopy(shipped)
    data["releases"]["20.03"]["flavors"]["tf2"]["image"] = {"digest": "latest"}
    bad.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setenv(catalog.CATALOG_ENV, str(bad))
    problem = "releases['20.03'].flavors.tf2.image: needs 'created'"
    with pytest.raises(CatalogError, match=re.escape(f"{bad} is invalid: {problem}")) as info:
        catalog.load()
    assert info.value.hint and catalog.CATALOG_ENV in info.value.hint
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(CatalogError, match=re.escape(f"catalog file {bad} is not valid JSON")):
        catalog.load()
    monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "absent.json"))
    with pytest.raises(CatalogError, match=r"absent\.json does not exist") as info:
        catalog.load()
    assert info.value.hint and catalog.CATALOG_ENV in info.value.hint


def test_catalog_show_uses_the_override(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shipped: dict[str, Any]
) -> None:
    path = tmp_path / "catalog.json"
    image = _write_override(path, shipped, cuda="10.2.89", cuda_min="10.2")
    monkeypatch.setenv(catalog.CATALOG_ENV, str(path))
    res = cli("catalog", "show", "20.03", "--json")
    assert res.code == 0, res.stderr
    by_tag = {e["tag"]: e for e in json.loads(res.stdout)}
    assert by_tag["20.03-tf2-py3"]["digest"] == image["digest"]
    assert by_tag["20.03-tf2-py3"]["verified_from_image"]["declared"] == {"cuda": "10.2.89", "cuda_min": "10.2"}
    assert by_tag["20.03-tf1-py3"]["digest"] is None and "verified_from_image" not in by_tag["20.03-tf1-py3"]
    res = cli("catalog", "show", "20.03-tf2-py3")
    assert res.code == 0 and f"verified from image: digest {image['digest']}" in res.stdout


def test_cli_bad_override_is_one_line(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bad = tmp_path / "c.json"
    bad.write_text("[]", encoding="utf-8")
    monkeypatch.setenv(catalog.CATALOG_ENV, str(bad))
    res = cli("catalog", "show", "20.03")
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert lines[0] == f"error: {bad} is invalid: must be an object"
    assert len(lines) == 2 and lines[1].startswith("hint: ENVPIN_CATALOG names this file")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--registry", "ftp://nvcr.io"], "scheme ftp:// is not supported"),
        (["--release", "20.04"], "NVIDIA published no TensorFlow container in 20.04"),
        (["--ca-bundle", "/nonexistent/ca.pem"], "CA bundle /nonexistent/ca.pem does not exist"),
    ],
)
def test_sync_bad_input_fails_before_the_network(cli: Cli, args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "catalog.json"
    res = cli("catalog", "sync", *args, "--write", str(out))
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert lines[0].startswith("error: ") and message in lines[0] and len(lines) <= 2
    assert not out.exists()
