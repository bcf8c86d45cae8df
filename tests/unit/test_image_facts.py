"""Image facts beyond the written sources: the user's image-facts cache and how the catalog merges it, the
TensorFlow version a plan takes (catalog, image, --tf), the base image's declared versions in the lock, and the
build's cross-check. The registry side runs in tests/docker/test_catalog_from_images.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from envpin.environment import lockfile
from envpin.environment.plan import UnknownTF, make_plan, release_version, resolve_tf
from envpin.environment.render import render
from envpin.errors import UsageError
from envpin.image import basecheck
from envpin.knowledge import catalog, facts, imageconfig, sync
from envpin.knowledge.fields import FIELDS
from envpin.knowledge.sync import ImageRead
from envpin.knowledge.versions import parse_tf_spec

REPO = "nvcr.io/nvidia/tensorflow"


@pytest.fixture(autouse=True)
def _shipped_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(catalog.CATALOG_ENV, raising=False)


def _image(registry: str = REPO, **declared: Any) -> dict[str, Any]:
    return {
        "digest": "sha256:" + hashlib.sha256(json.dumps(declared, sort_keys=True).encode()).hexdigest(),
        "created": "2023-10-20T00:00:00Z",
        "registry": registry,
        "declared": declared,
        "source": "image config",
    }


def _entry(tag: str) -> catalog.Entry:
    return next(e for e in catalog.load().entries() if e.tag == tag)


# -- the cache file -------------------------------------------------------------------------------------------------
def test_cache_lives_under_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    assert facts.cache_path() == tmp_path / "c" / "envpin" / "image-facts.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert facts.cache_path() == Path.home() / ".cache" / "envpin" / "image-facts.json"


def test_save_keys_images_by_repository_and_digest_and_writes_canonical_json() -> None:
    assert facts.read(REPO).images == {}
    a, b, b2 = _image(tf_version="2.14.0"), _image(cuda="12.2.2"), _image(cuda="12.2.1")
    mirror = _image(registry="127.0.0.1:5000/nvidia/tensorflow", cuda="12.2.2")
    path = facts.save(REPO, {"23.10-tf2-py3": a, "23.11-tf2-py3": b})
    facts.save(REPO, {"23.11-tf2-py3": b2})  # read again from the same repository: the new digest replaces it
    facts.save(REPO, {"23.11-tf2-py3": mirror})  # the same tag from a mirror is another entry, not a replacement
    images = {(REPO, "23.10-tf2-py3"): a, (REPO, "23.11-tf2-py3"): b2, (mirror["registry"], "23.11-tf2-py3"): mirror}
    assert facts.read(REPO).images == images
    text = path.read_bytes()
    assert text == facts.dumps(REPO, images)
    data = json.loads(text)
    assert text.endswith(b"\n") and data["schema"] == facts.SCHEMA == 2
    assert set(data["images"]) == {
        f"{REPO}@{a['digest']}",
        f"{REPO}@{b2['digest']}",
        f"{mirror['registry']}@{mirror['digest']}",
    }
    assert data["images"][f"{REPO}@{a['digest']}"] == {
        "tags": ["23.10-tf2-py3"],
        "created": a["created"],
        "declared": a["declared"],
    }


def test_tags_that_resolved_to_one_digest_share_an_entry() -> None:
    same = _image(cuda="10.2.89")
    path = facts.save(REPO, {"20.03-tf1-py3": same, "20.03-tf2-py3": same})
    assert json.loads(path.read_text())["images"][f"{REPO}@{same['digest']}"]["tags"] == [
        "20.03-tf1-py3",
        "20.03-tf2-py3",
    ]
    assert set(facts.read(REPO).images) == {(REPO, "20.03-tf1-py3"), (REPO, "20.03-tf2-py3")}


def test_a_schema_1_cache_is_read_and_rewritten_as_schema_2() -> None:
    """Schema 1 keyed by tag alone, but each image object names its registry: nothing is lost in the move."""
    nv, mirror = _image(tf_version="2.14.0"), _image(registry="127.0.0.1:5000/nvidia/tensorflow", cudnn="8.9.5")
    path = facts.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps({"schema": 1, "image_repository": REPO, "tags": {"23.10-tf2-py3": nv, "23.11-tf2-py3": mirror}})
    )
    got = facts.read(REPO)
    assert got.images == {(REPO, "23.10-tf2-py3"): nv, (mirror["registry"], "23.11-tf2-py3"): mirror}
    assert got.notice is None
    facts.save(REPO, {"23.12-tf2-py3": _image(cuda="12.3.1")})
    data = json.loads(path.read_text())
    assert data["schema"] == 2 and len(data["images"]) == 3


@pytest.mark.parametrize(
    "content, message, whole",
    [
        ("{", "it is not valid JSON", True),
        ("[]", "it is not an image-facts cache", True),
        (json.dumps({"schema": 9, "image_repository": REPO, "images": {}}), "it has schema 9", True),
        (json.dumps({"schema": 2, "image_repository": REPO, "tags": {}}), "needs exactly the keys", True),
        (
            json.dumps({"schema": 1, "image_repository": "other/repo", "tags": {}}),
            "holds facts for the tags of 'other/repo'",
            True,
        ),
        (
            json.dumps({"schema": 1, "image_repository": REPO, "tags": {"x": {"digest": "nope"}}}),
            "tag x: needs 'created', 'registry', 'declared', 'source'",
            False,
        ),
        (
            json.dumps(
                {
                    "schema": 2,
                    "image_repository": REPO,
                    "images": {
                        "127.0.0.1:5000/x@sha256:zz/../../etc": {
                            "tags": ["20.02-tf2-py3"],
                            "created": None,
                            "declared": {},
                        }
                    },
                }
            ),
            "digest 'sha256:zz/../../etc' is not sha256:<64 hex digits>",
            False,
        ),
        (
            json.dumps(
                {
                    "schema": 2,
                    "image_repository": REPO,
                    "images": {
                        "../../etc@sha256:" + "a" * 64: {"tags": ["20.02-tf2-py3"], "created": None, "declared": {}}
                    },
                }
            ),
            "the key is not REPOSITORY@DIGEST",
            False,
        ),
        (
            json.dumps(
                {
                    "schema": 2,
                    "image_repository": REPO,
                    "images": {f"{REPO}@sha256:" + "a" * 64: {"tags": ["../x"], "created": None, "declared": {}}},
                }
            ),
            "is not a tag",
            False,
        ),
    ],
)
def test_a_broken_cache_is_ignored_with_one_notice_naming_the_file(content: str, message: str, whole: bool) -> None:
    """envpin fills the cache itself, so damage is never fatal: the catalog loads without what cannot be used,
    and carries one line that names the file, what is wrong and the fix."""
    path = facts.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(content)
    cat = catalog.load()
    (notice,) = cat.notices
    assert str(path) in notice and message in notice and "`envpin catalog sync`" in notice
    assert notice.startswith("ignoring the image-facts cache" if whole else "ignoring that entry of the image-facts")
    assert [e.facts for e in cat.entries()] == [e.facts for e in catalog.load(cache=False).entries()]
    # The next save keeps what was valid and drops the rest.
    facts.save(REPO, {"23.10-tf2-py3": _image(tf_version="2.14.0")})
    assert facts.read(REPO).notice is None and catalog.load().notices == ()


def test_an_unreadable_cache_is_ignored_with_one_notice() -> None:
    path = facts.cache_path()
    path.mkdir(parents=True)  # a folder where the file should be: reading it fails
    (notice,) = catalog.load().notices
    assert f"ignoring the image-facts cache {path}: it cannot be read" in notice


def test_cli_warns_once_about_a_broken_cache_and_goes_on(cli) -> None:  # type: ignore[no-untyped-def]
    path = facts.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text("{")
    res = cli("catalog", "show", "20.02")
    assert res.code == 0 and "20.02-tf2-py3" in res.stdout
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"warning: ignoring the image-facts cache {path}: it is not valid JSON")
    again = cli("catalog", "show", "20.02", "--json")  # each command reports it, once
    assert again.code == 0 and again.stderr.count("warning:") == 1
    assert cli("-q", "catalog", "show", "20.02").stderr == ""


# -- merging into the catalog ---------------------------------------------------------------------------------------
def test_cached_image_facts_outrank_written_ones_but_stay_out_of_portable_values() -> None:
    before = _entry("23.10-tf2-py3")
    assert before.tf_version is None and not before.cached
    facts.save(REPO, {"23.10-tf2-py3": _image(tf_version="2.14.0", cuda="12.2.1")})
    cat = catalog.load()
    e = next(x for x in cat.entries() if x.tag == "23.10-tf2-py3")
    assert e.cached and e.tf_version == "2.14.0" and e.facts["tf_version"].kind == "image"
    assert e.value("cuda") == "12.2.1" and e.outranked["cuda"].value == before.value("cuda")
    assert e.portable_value("tf_version") is None and e.portable_value("cuda") == before.value("cuda")
    assert str(facts.cache_path()) in cat.origin
    assert [x.tag for x in cat.select(None, tf=parse_tf_spec("2.14"))] == ["23.10-tf2-py3", "23.12-tf2-py3"]
    # The README's tables describe the shipped file alone.
    assert not any(x.cached for x in catalog.load(cache=False).entries())


def test_a_cache_with_no_catalog_tag_changes_nothing() -> None:
    shipped = catalog.load()
    facts.save(REPO, {"99.99-tf2-py3": _image(tf_version="9.9.0")})
    assert catalog.load() is shipped


def test_coverage_counts_values_per_kind() -> None:
    cat = catalog.load()
    before = sync.coverage_by_kind(cat)
    assert sum(before.values()) == len(cat.entries()) * len(FIELDS)
    facts.save(REPO, {"23.10-tf2-py3": _image(tf_version="2.14.0")})
    after = sync.coverage_by_kind(catalog.load())
    assert after["image"] == before.get("image", 0) + 1 and after["unknown"] == before["unknown"] - 1


# -- which TensorFlow a plan is for ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, version", [("2.14.0", "2.14.0"), ("1.15.5+nv23.03", "1.15.5"), (" 2.9 ", "2.9"), ("2.17.0rc1", "2.17.0")]
)
def test_release_version(text: str, version: str) -> None:
    assert release_version(text) == version


def test_release_version_refuses_what_is_not_a_version() -> None:
    with pytest.raises(UsageError, match="not a version"):
        release_version("latest")


def test_tf_from_the_catalog_file_first() -> None:
    assert resolve_tf(_entry("20.02-tf2-py3"), None) == ("2.1", "catalog")


def test_unknown_tf_asks_unless_given() -> None:
    e = _entry("23.10-tf2-py3")
    with pytest.raises(UnknownTF) as info:
        resolve_tf(e, None)
    assert info.value.entry is e and "`tf`" in (info.value.hint or "")
    with pytest.raises(UnknownTF):
        resolve_tf(e, parse_tf_spec("2"))  # a major alone does not choose a recipe
    assert resolve_tf(e, parse_tf_spec("2.14")) == ("2.14", "user")
    assert resolve_tf(e, parse_tf_spec("2.14.0"), "image") == ("2.14.0", "image")


def test_a_cached_tf_fills_the_gap_as_image_evidence() -> None:
    facts.save(REPO, {"23.10-tf2-py3": _image(tf_version="2.14.0")})
    assert resolve_tf(_entry("23.10-tf2-py3"), None) == ("2.14.0", "image")


def test_a_cached_tf_agreeing_in_major_minor_keeps_the_catalogs() -> None:
    facts.save(REPO, {"20.02-tf2-py3": _image(tf_version="2.1.0")})
    assert resolve_tf(_entry("20.02-tf2-py3"), None) == ("2.1", "catalog")


def test_a_cached_tf_contradicting_the_catalog_is_refused_unless_chosen() -> None:
    facts.save(REPO, {"20.02-tf2-py3": _image(tf_version="2.2.0")})
    e = _entry("20.02-tf2-py3")
    with pytest.raises(UsageError) as info:
        resolve_tf(e, None)
    assert "2.1" in info.value.message and "2.2.0" in info.value.message and "`tf` 2.2" in (info.value.hint or "")
    assert resolve_tf(e, parse_tf_spec("2.2")) == ("2.2.0", "image")


def test_a_plan_does_not_depend_on_one_users_cache() -> None:
    """Teammates with and without the cache derive the same inputs hash (the lock stays current for both)."""
    plain = make_plan(ngc="20.03-tf2-py3")
    facts.save(REPO, {"20.03-tf2-py3": _image(tf_version="2.1.0", cuda="10.1.243", python="3.6.9")})
    assert _entry("20.03-tf2-py3").value("cuda") == "10.1.243"
    cached = make_plan(ngc="20.03-tf2-py3")
    assert cached.inputs_hash == plain.inputs_hash and render(cached) == render(plain)
    assert cached.base_digest is None  # a cached digest never pins a render


def test_a_digest_is_pinned_only_for_the_repository_it_was_read_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.loads(catalog.shipped_catalog_path().read_text())
    image = _image(registry="127.0.0.1:5000/mirror/nvidia/tensorflow", tf_version="2.1.0")
    data["releases"]["20.02"]["flavors"]["tf2"]["image"] = image
    path = tmp_path / "catalog.json"
    path.write_bytes(sync.dump_catalog(data))
    monkeypatch.setenv(catalog.CATALOG_ENV, str(path))
    assert make_plan(ngc="20.02-tf2-py3").base_digest is None  # read from a mirror; FROM is nvcr.io
    mirrored = make_plan(ngc="20.02-tf2-py3", base_image="127.0.0.1:5000/mirror/nvidia/tensorflow:20.02-tf2-py3")
    assert mirrored.base_digest == image["digest"]


# -- the base's declared versions in the lock ----------------------------------------------------------------------
DECLARED = {"TENSORFLOW_VERSION": "2.1.0", "CUDA_VERSION": "10.2.89", "NVIDIA_REQUIRE_CUDA": "cuda>=10.2"}


def test_version_env_keeps_the_version_variables_only() -> None:
    env = {**DECLARED, "PATH": "/usr/bin", "NCCL_VERSION": " ", "PYVER": "3.6"}
    assert imageconfig.version_env(env) == {**DECLARED, "PYVER": "3.6"}


def test_lock_records_what_the_base_declares_outside_the_inputs_hash() -> None:
    plan = make_plan(ngc="20.02-tf2-py3", base_digest="sha256:" + "1" * 64)
    files = render(plan)
    bare = lockfile.Lock.from_plan(plan, files)
    assert bare.base.declared == {} and "declared" not in bare.dumps().decode()
    with_declared = lockfile.Lock.from_plan(
        make_plan(ngc="20.02-tf2-py3", base_digest="sha256:" + "1" * 64, base_declared=DECLARED), files
    )
    assert with_declared.inputs_hash == bare.inputs_hash
    text = with_declared.dumps().decode()
    assert '[base.declared]\nCUDA_VERSION = "10.2.89"\n' in text
    assert lockfile.loads(text).base.declared == DECLARED
    # A re-render of the same digest keeps it; another digest drops it.
    assert lockfile.Lock.from_plan(plan, files, with_declared).base.declared == DECLARED
    other = make_plan(ngc="20.02-tf2-py3", base_digest="sha256:" + "2" * 64)
    assert lockfile.Lock.from_plan(other, render(other), with_declared).base.declared == {}


def test_lock_refuses_declared_values_that_are_not_strings() -> None:
    plan = make_plan(ngc="20.02-tf2-py3", base_declared=DECLARED)
    data = lockfile.Lock.from_plan(plan, render(plan)).to_toml()
    data["base"]["declared"] = {"CUDA_VERSION": 10}
    data["lock"]["self_hash"] = lockfile.self_hash(data)
    import tomli_w

    with pytest.raises(Exception, match=r"base\.declared must map names to strings"):
        lockfile.loads(lockfile.HEADER + tomli_w.dumps(data))


# -- the build's cross-check ---------------------------------------------------------------------------------------
def _read(**env: str) -> ImageRead:
    config = {"config": {"Env": [f"{k}={v}" for k, v in env.items()]}}
    declared, origin = imageconfig.declared_from_config(config)
    image = {
        "digest": "sha256:" + "3" * 64,
        "created": None,
        "registry": "127.0.0.1:5000/m/nvidia/tensorflow",
        "declared": declared,
        "source": "image config",
    }
    return ImageRead("127.0.0.1:5000/m/nvidia/tensorflow:20.02-tf2-py3", image["digest"], dict(env), image, origin)


def test_cross_check_accepts_what_agrees() -> None:
    plan = make_plan(ngc="20.02-tf2-py3")
    got = _read(
        TENSORFLOW_VERSION="2.1.0", NVIDIA_TENSORFLOW_VERSION="20.02-tf2", CUDA_VERSION=plan.entry.value("cuda")
    )
    assert basecheck.cross_check(plan, got) == []
    assert basecheck.cross_check(plan, _read()) == []  # an image that declares nothing is not contradicted


def test_cross_check_refuses_another_tensorflow_minor_with_both_values() -> None:
    plan = make_plan(ngc="20.02-tf2-py3")
    with pytest.raises(UsageError) as info:
        basecheck.cross_check(plan, _read(TENSORFLOW_VERSION="1.15.2"))
    message = info.value.message
    assert "declares TensorFlow 1.15.2" in message and "TensorFlow 2.1 (from the catalog)" in message
    assert "`releases` of catalog sync 20.02-tf2-py3" in (info.value.hint or "")
    user = make_plan(ngc="23.10-tf2-py3", tf="2.13")
    with pytest.raises(UsageError) as info:
        basecheck.cross_check(user, _read(TENSORFLOW_VERSION="2.14.0"))
    assert info.value.hint == "pass `tf` 2.14, the version the image holds"


def test_cross_check_warns_about_other_differences() -> None:
    plan = make_plan(ngc="20.02-tf2-py3")
    got = _read(
        TENSORFLOW_VERSION="2.1.0+nv20.02",
        NVIDIA_TENSORFLOW_VERSION="20.03-tf2",
        CUDA_VERSION="10.1.243",
        NVIDIA_REQUIRE_CUDA="cuda>=11.0",
    )
    warnings = basecheck.cross_check(plan, got)
    assert len(warnings) == 3
    assert "declares it is NGC 20.03-tf2" in warnings[0]
    assert f"declares CUDA_VERSION 10.1.243; the catalog says cuda {plan.entry.value('cuda')}" in warnings[1]
    assert "requires CUDA >= 11.0" in warnings[2]
