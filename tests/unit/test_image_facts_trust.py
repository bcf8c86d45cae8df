"""Which image facts speak for a catalog tag (issue "Verdicts users can trust", item 9 and the cache part of
item 1): facts are keyed by the repository and digest they were read from; those from the catalog's own
repository, or under a digest the catalog records for the tag, count as the image; a mirror's (or a local
stand-in's) other facts only fill unknown values (grade "mirror"); every contradiction with a written value
is one `warning:` line, and a damaged cache entry is reported once and ignored.

The registry side runs in tests/docker/test_catalog_from_images.py."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from envpin.environment.plan import resolve_tf
from envpin.knowledge import catalog, facts, notices, sync

REPO = "nvcr.io/nvidia/tensorflow"
STAND_IN = "127.0.0.1:5000/nvidia/tensorflow"
NOTES_20_03 = "https://docs.nvidia.com/deeplearning/frameworks/tensorflow-release-notes/rel_20-03.html"


@pytest.fixture(autouse=True)
def _shipped_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(catalog.CATALOG_ENV, raising=False)
    notices.drain()


def _image(registry: str = REPO, digest: str | None = None, **declared: Any) -> dict[str, Any]:
    seed = json.dumps([registry, declared], sort_keys=True).encode()
    return {
        "digest": digest or "sha256:" + hashlib.sha256(seed).hexdigest(),
        "created": "2020-03-19T00:00:00Z",
        "registry": registry,
        "declared": declared,
        "source": "image config",
    }


def _entry(tag: str, cat: catalog.Catalog | None = None) -> catalog.Entry:
    return next(e for e in (cat or catalog.load()).entries() if e.tag == tag)


def _plant(images: dict[str, Any]) -> Path:
    """A schema-2 cache file as written by hand (keys REPOSITORY@DIGEST)."""
    path = facts.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": 2, "image_repository": REPO, "images": images}))
    return path


# -- a stand-in's facts never silently replace NVIDIA's ------------------------------------------------------------
def test_a_stand_ins_facts_for_a_known_tag_do_not_replace_nvidias() -> None:
    """What a local stand-in for 20.03-tf2-py3 declares (TensorFlow 2.1.9, another CUDA) keeps its own name:
    NVIDIA's values stay, the contradiction is one line naming both values and both sources."""
    written = _entry("20.03-tf2-py3")
    stand_in = _image(STAND_IN, tf_version="2.1.9", cuda="10.1.243")
    facts.save(REPO, {"20.03-tf2-py3": stand_in})
    e = _entry("20.03-tf2-py3")
    assert (e.tf_version, e.facts["tf_version"].kind) == (written.tf_version, "nvidia") == ("2.1", "nvidia")
    assert (e.value("cuda"), e.facts["cuda"].kind) == ("10.2.89", "notes")
    assert not e.cached and e.verified is None and e.facts == written.facts
    (use,) = e.images
    assert use.grade == "mirror" and use.read_from == f"{STAND_IN}@{stand_in['digest']}"
    (line,) = e.notices  # 2.1.9 only refines 2.1; 10.1.243 contradicts 10.2.89
    assert line.startswith("20.03-tf2-py3 cuda: the image config " + use.read_from + " declares 10.1.243")
    assert f"the notes source {NOTES_20_03} says 10.2.89; envpin keeps 10.2.89" in line
    assert resolve_tf(e, None) == ("2.1", "catalog")


def test_cli_says_so_in_one_warning_and_names_registry_and_digest(cli) -> None:  # type: ignore[no-untyped-def]
    stand_in = _image(STAND_IN, tf_version="2.1.9", cuda="10.1.243")
    facts.save(REPO, {"20.03-tf2-py3": stand_in})
    res = cli("catalog", "show", "20.03-tf2-py3")
    assert res.code == 0, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("warning: 20.03-tf2-py3 cuda:") and "10.1.243" in line and "10.2.89" in line
    assert f"{STAND_IN}@{stand_in['digest']}" in line and NOTES_20_03 in line
    assert f"image config {STAND_IN}@{stand_in['digest']}" in res.stdout and "grade mirror" in res.stdout
    shown = json.loads(cli("catalog", "show", "20.03-tf2-py3", "--json").stdout)[0]
    assert shown["tf_version"] == "2.1" and shown["cuda"] == "10.2.89"
    (config,) = shown["image_configs"]
    assert config["read_from"] == f"{STAND_IN}@{stand_in['digest']}" and config["grade"] == "mirror"
    # A command about another release is not told about 20.03.
    assert cli("catalog", "show", "20.02").stderr == ""


def test_a_mirror_fills_what_no_written_source_gives_as_its_own_grade() -> None:
    """An air-gapped team's mirror still completes the catalog: a TensorFlow version no written source gives
    comes from it, graded "mirror" and sourced REPOSITORY@DIGEST, and stays out of every plan's hash."""
    mirror = _image("harbor.example.com/ngc/nvidia/tensorflow", tf_version="2.14.0", cudnn="8.9.5.29", cuda="12.2.1")
    facts.save(REPO, {"23.10-tf2-py3": mirror})
    e = _entry("23.10-tf2-py3")
    where = f"{mirror['registry']}@{mirror['digest']}"
    assert (e.tf_version, e.facts["tf_version"].kind, e.source_url("tf_version")) == ("2.14.0", "mirror", where)
    assert e.facts["tf_version"].weak and e.facts["cuda"].kind == "sibling"  # a known value is not replaced
    assert e.cached and e.portable_value("tf_version") is None
    assert resolve_tf(e, None) == ("2.14.0", "image")
    assert e.to_json()["provenance"]["tf_version"] == {"source": where, "kind": "mirror"}


def test_facts_from_the_catalogs_repository_outrank_and_a_contradiction_is_said() -> None:
    nv = _image(REPO, tf_version="2.1.0", cuda="10.1.243")
    facts.save(REPO, {"20.03-tf2-py3": nv})
    e = _entry("20.03-tf2-py3")
    assert (e.tf_version, e.facts["tf_version"].kind, e.value("cuda")) == ("2.1.0", "image", "10.1.243")
    assert e.source_url("cuda") == f"{REPO}@{nv['digest']}" and e.verified == nv
    (line,) = e.notices
    assert line.startswith(f"20.03-tf2-py3 cuda: the image config {REPO}@{nv['digest']} declares 10.1.243")
    assert "says 10.2.89; envpin uses the image's 10.1.243" in line


def test_a_mirrors_copy_of_a_recorded_digest_counts_as_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same digest is the same image: a mirror's read of the digest the catalog file records applies."""
    data = json.loads(catalog.shipped_catalog_path().read_text())
    recorded = _image(REPO, tf_version="2.1.0")
    data["releases"]["20.03"]["flavors"]["tf2"]["image"] = recorded
    path = tmp_path / "catalog.json"
    path.write_bytes(sync.dump_catalog(data))
    monkeypatch.setenv(catalog.CATALOG_ENV, str(path))
    copied = _image(STAND_IN, recorded["digest"], tf_version="2.1.0", cuda="10.2.89")
    other = _image("harbor.example.com/ngc/nvidia/tensorflow", tf_version="2.1.9")
    facts.save(REPO, {"20.03-tf2-py3": copied})
    facts.save(REPO, {"20.03-tf2-py3": other})
    e = _entry("20.03-tf2-py3")
    grades = {u.image["registry"]: (u.grade, u.cached) for u in e.images}
    assert grades == {STAND_IN: ("image", True), REPO: (None, False), other["registry"]: ("mirror", True)}
    assert e.tf_version == "2.1.0" and e.source_url("tf_version") == f"{STAND_IN}@{recorded['digest']}"
    assert e.notices == ()


def test_the_catalogs_repository_speaks_first_and_the_mirror_is_kept_beside_it() -> None:
    nv, stand_in = _image(REPO, tf_version="2.1.0"), _image(STAND_IN, tf_version="1.15.2")
    facts.save(REPO, {"20.03-tf2-py3": stand_in})
    facts.save(REPO, {"20.03-tf2-py3": nv})
    assert set(facts.read(REPO).images) == {(REPO, "20.03-tf2-py3"), (STAND_IN, "20.03-tf2-py3")}
    e = _entry("20.03-tf2-py3")
    assert e.tf_version == "2.1.0" and e.facts["tf_version"].kind == "image"
    # Both are image-grade or mirror-grade evidence about the tag: the stand-in contradicts the written 2.1.
    assert [u.grade for u in e.images] == ["image", "mirror"]
    (line,) = e.notices
    assert line.startswith(f"20.03-tf2-py3 tf_version: the image config {STAND_IN}@") and "envpin keeps 2.1" in line


# -- a damaged entry is reported once and ignored; the others still merge -------------------------------------------
def test_an_invalid_entry_is_ignored_and_the_others_merge(cli) -> None:  # type: ignore[no-untyped-def]
    good = _image(REPO, tf_version="2.14.0")
    path = _plant(
        {
            f"{REPO}@{good['digest']}": {"tags": ["23.10-tf2-py3"], "created": None, "declared": good["declared"]},
            "127.0.0.1:5000/x@sha256:zz/../../etc": {"tags": ["20.02-tf2-py3"], "created": None, "declared": {}},
            f"{STAND_IN}@sha256:" + "c" * 64: {
                "tags": ["20.02-tf2-py3"],
                "created": None,
                "declared": {"tf_version": 2},
            },
        }
    )
    res = cli("catalog", "show", "23.10-tf2-py3", "--json")
    assert res.code == 0, res.stderr
    row = json.loads(res.stdout)[0]
    assert row["tf_version"] == "2.14.0" and row["provenance"]["tf_version"]["source"] == f"{REPO}@{good['digest']}"
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"warning: ignoring those 2 entries of the image-facts cache {path}: ")
    assert "declared.tf_version: must be a string (and 1 more)" in line
    assert "the next `envpin catalog sync` rewrites the file without them" in line


def test_the_library_never_prints(capsys: pytest.CaptureFixture[str]) -> None:
    _plant({"bad": {}})
    facts.save(REPO, {"20.03-tf2-py3": _image(STAND_IN, cuda="10.1.243")})  # drops the bad entry
    _plant(
        {
            "bad": {},
            **json.loads(facts.dumps(REPO, {(STAND_IN, "20.03-tf2-py3"): _image(STAND_IN, cuda="10.1.243")}))["images"],
        }
    )
    cat = catalog.load()
    cat.select("20.03")
    cat.select("20.03")
    assert capsys.readouterr() == ("", "")
    lines = notices.drain()
    assert len(lines) == 2 and lines[0].startswith("ignoring that entry") and lines[1].startswith("20.03-tf2-py3 cuda")
    assert notices.drain() == []
    cat.release_entries("20.03", notify=False)
    assert notices.pending() == []


def test_the_written_catalog_never_carries_one_users_cache(tmp_path: Path) -> None:
    """`catalog sync --write` writes the catalog file plus what that run read, not what the cache holds."""
    facts.save(REPO, {"23.10-tf2-py3": _image(REPO, tf_version="2.14.0")})
    cat = catalog.load()
    assert _entry("23.10-tf2-py3", cat).cached and cat.data == catalog.load(cache=False).data
    read = _image(STAND_IN, cuda="10.2.89")
    data = sync.updated_catalog(cat, [sync.TagResult(_entry("20.02-tf2-py3", cat), "x", copy.deepcopy(read))])
    assert data["releases"]["20.02"]["flavors"]["tf2"]["image"] == read
    assert "image" not in data["releases"]["23.10"]["flavors"]["tf2"]


@pytest.mark.parametrize(
    "name, written, declared",
    [
        ("tf_version", "2.1", "2.1.9"),
        ("tf_version", "2.1", "2.10.0"),
        ("tf_version", "2.1.0", "2.1"),
        ("cuda", "10.2.89", "10.1.243"),
        ("cudnn", "7.6.5", "7.6.5.32"),
        ("tf_version", "1.15.5", "1.15.5+nv21.06"),
        ("nccl", "2.06.3", "2.6.3"),
        ("python", "3.6", "3.8"),
        ("driver_compat", ["396", "384.111+", "410", "418.xx", "440.30"], ["384", "396", "410", "418"]),
        ("driver_compat", ["396", "384.111+", "410", "418.xx", "440.30"], ["396", "410", "418"]),
        ("driver_compat", ["418.xx"], ["418", "450"]),
    ],
)
def test_a_contradiction_is_what_sync_calls_disagrees(name: str, written: Any, declared: Any) -> None:
    """trust.disagrees applies imageconfig's rule (what `catalog sync` reports as disagreeing): the same answers."""
    from envpin.knowledge import imageconfig, trust

    if name == "driver_compat":
        status = imageconfig.compare_branches(written, "440.33.01", declared)
    else:
        status = imageconfig.compare_version(written, declared)
    assert trust.disagrees(name, written, declared, "440.33.01") == (status == imageconfig.DISAGREES)
