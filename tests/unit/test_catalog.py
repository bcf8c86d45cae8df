"""The catalog data: schema, invariants, provenance, and the look-ups users hit."""

from __future__ import annotations

import copy
import json

import pytest

from envpin.errors import CatalogError, UsageError
from envpin.knowledge import catalog, catalogcheck, recipes
from envpin.knowledge.fields import FIELDS, IMAGE_SOURCE
from envpin.knowledge.versions import parse_ngc_spec, parse_tf_spec, release_index


@pytest.fixture(scope="module")
def cat() -> catalog.Catalog:
    return catalog.load()


def test_every_month_is_a_release_or_known_missing(cat: catalog.Catalog) -> None:
    months = set(cat.releases()) | set(cat.missing)
    lo, hi = release_index("19.01"), release_index("25.02")
    assert len(months) == hi - lo + 1
    assert cat.releases()[0] == "19.01" and cat.releases()[-1] == "25.02"
    assert {"20.04", "20.05", "21.01"} <= set(cat.missing)


def test_flavor_eras(cat: catalog.Catalog) -> None:
    for e in cat.entries():
        if release_index(e.release) <= release_index("19.10"):
            assert e.flavor in ("py2", "py3") and e.tag == f"{e.release}-{e.flavor}"
        elif e.flavor == "tf1-py2":  # NVIDIA's 19.11 and 19.12 notes name a Python 2 TF1 image too
            assert e.release in ("19.11", "19.12") and e.tag == f"{e.release}-tf1-py2"
        else:
            assert e.flavor in ("tf1", "tf2") and e.tag == f"{e.release}-{e.flavor}-py3"
        if release_index(e.release) > release_index("23.03"):
            assert e.flavor == "tf2"


def test_a_python_2_image_is_chosen_only_by_its_tag(cat: catalog.Catalog) -> None:
    assert [e.tag for e in cat.select("19.11", parse_tf_spec("1.15"), single=True)] == ["19.11-tf1-py3"]
    assert [e.tag for e in cat.select("19.10", single=True)] == ["19.10-py3"]
    assert [e.tag for e in cat.select("19.12-tf1-py2", single=True)] == ["19.12-tf1-py2"]
    assert [e.tag for e in cat.select("19.12", flavor="tf1-py2")] == ["19.12-tf1-py2"]
    with pytest.raises(UsageError, match="Python 2 image"):
        from envpin.environment.plan import make_plan

        make_plan(ngc="nvcr.io/nvidia/tensorflow:19.12-tf1-py2")


def test_every_fact_has_a_source_or_a_reason(cat: catalog.Catalog) -> None:
    for e in cat.entries():
        for name, fact in e.facts.items():
            if fact.known:
                assert e.source_url(name).startswith("https://"), (e.tag, name)
            else:
                assert fact.reason and len(fact.reason) > 20, (e.tag, name)


def test_known_values_from_nvidia_notes(cat: catalog.Catalog) -> None:
    e = next(x for x in cat.entries() if x.tag == "20.03-tf2-py3")
    assert (e.tf_version, e.value("cuda"), e.value("cudnn"), e.value("nccl")) == ("2.1", "10.2.89", "7.6.5", "2.6.3")
    assert e.value("driver_min") == "440.33.01" and "418.xx" in e.value("driver_compat")
    assert "rel_20-03" in e.source_url("cuda")
    e = next(x for x in cat.entries() if x.tag == "21.06-tf2-py3")
    assert (e.value("ubuntu"), e.value("python"), e.value("cuda")) == ("20.04", "3.8", "11.3.1")


def test_each_fact_stored_once() -> None:
    data = json.loads(catalog.catalog_path().read_text())
    for release, rel in data["releases"].items():
        for flavor, fl in rel["flavors"].items():
            assert not set(rel["fields"]) & set(fl["fields"]), (release, flavor)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["releases"]["20.02"]["fields"].pop("cuda"), "field cuda missing"),
        (lambda d: d["releases"]["20.02"]["fields"].__setitem__("cuda", {"value": None}), "null without a reason"),
        (lambda d: d["releases"]["20.03"]["fields"]["cuda"].__setitem__("source", "nowhere"), "not a known source"),
        (lambda d: d["missing_months"].pop("20.04"), "20.04 is neither a release nor a known missing month"),
        (lambda d: d.__setitem__("schema", 1), "schema: must be 2, not 1"),
        (lambda d: d["sources"]["rn-20.03"].__setitem__("kind", "blog"), "kind: .blog. is not one of"),
        (lambda d: d["sources"]["rn-20.03"].__setitem__("kind", "usage"), "backs no value"),
        (lambda d: d["releases"]["20.03"]["flavors"]["tf2"].__setitem__("tag", "20.03-tf2"), "should be"),
        (
            lambda d: d["releases"]["20.03"]["flavors"]["tf2"]["fields"].__setitem__(
                "cuda", {"value": "1", "source": "rn-20.03"}
            ),
            "defined at release and flavor level",
        ),
    ],
)
def test_schema_rejects_bad_data(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(catalog.catalog_path().read_text())
    bad = copy.deepcopy(data)
    mutate(bad)
    with pytest.raises(CatalogError, match=message):
        catalog.validate(bad)


def test_every_catalog_tf_version_has_an_ngc_recipe_and_every_ngc_recipe_is_used(cat: catalog.Catalog) -> None:
    used = set()
    for e in cat.entries():
        if e.tf_version is None:
            continue
        used.add(recipes.select(e.tf_version, "ngc", e.release).id)
    ngc_rows = {r["id"] for r in recipes.rows() if r["match"]["distribution"] == "ngc"}
    # 19.01-19.05 have no TF version in the catalog (their notes' version section could not be read),
    # so only a user-given --tf reaches that row; every other NGC row is reached by catalog data.
    assert used <= ngc_rows
    assert ngc_rows - used == {"ngc-before-19.06"}
    assert all(e.tf_version is None for e in cat.entries() if release_index(e.release) < release_index("19.06"))


def test_users_example_20_01_explains_itself(cat: catalog.Catalog) -> None:
    with pytest.raises(UsageError) as info:
        cat.select(parse_ngc_spec("20.01"), parse_tf_spec("2.1"), single=True)
    assert "NGC 20.01 contains TF 1.15 (tf1), TF 2.0 (tf2)" in info.value.message
    assert info.value.hint is not None and info.value.hint.startswith("TensorFlow 2.1 is in NGC 20.02, 20.03")


@pytest.mark.parametrize("tf", ["2.1", "2.1.0", "2"])
def test_tf_spec_forms(cat: catalog.Catalog, tf: str) -> None:
    assert cat.select(parse_ngc_spec("20.02"), parse_tf_spec(tf), single=True)[0].tag == "20.02-tf2-py3"


def test_ngc_tag_form(cat: catalog.Catalog) -> None:
    assert cat.select(parse_ngc_spec("20.02-tf2-py3"), None, single=True)[0].tf_version == "2.1"
    assert cat.select(parse_ngc_spec("nvcr.io/nvidia/tensorflow:20.02-tf1-py3"), None, single=True)[0].flavor == "tf1"


@pytest.mark.parametrize(
    "ngc, tf, message",
    [
        ("20.04", "2", "NVIDIA published no TensorFlow container in 20.04"),
        ("18.12", "1", "outside the catalog"),
        ("26.01", "2", "outside the catalog"),
        ("24.01", "1.15", "ships only TensorFlow 2"),
        ("24.01-tf1-py3", None, "has no tf1-py3 image"),
        ("20.02", None, "has 2 images"),
    ],
)
def test_release_errors(cat: catalog.Catalog, ngc: str, tf: str | None, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        cat.select(parse_ngc_spec(ngc), parse_tf_spec(tf) if tf else None, single=True)


@pytest.mark.parametrize("text", ["20.2", "2020.02", "20.13", "20.00", "latest", "20.02-tf3-py3", ""])
def test_malformed_ngc(text: str) -> None:
    with pytest.raises(UsageError):
        parse_ngc_spec(text)


@pytest.mark.parametrize("text", ["2.x", "v2.1", "2.1.0.1", "two", "", "2..1"])
def test_malformed_tf(text: str) -> None:
    with pytest.raises(UsageError):
        parse_tf_spec(text)


def test_nearest_first() -> None:
    assert catalog.Catalog.nearest_releases("20.01", ["20.06", "20.02", "19.11"], 3) == ["20.02", "19.11", "20.06"]


def test_json_shape(cat: catalog.Catalog) -> None:
    required = {"release", "tag", "flavor", "tf_version", "python", "ubuntu", "cuda", "cudnn", "nccl", "driver_min"}
    for e in cat.entries():
        obj = e.to_json()
        assert required <= set(obj)
        assert set(obj["provenance"]) == set(FIELDS)


def test_every_value_carries_its_kind_and_an_image_outranks_the_notes() -> None:
    data = json.loads(catalog.shipped_catalog_path().read_text())
    cat = catalog.Catalog(copy.deepcopy(data), "shipped")
    e = next(x for x in cat.entries() if x.tag == "20.03-tf2-py3")
    assert e.facts["cuda"].kind == "notes" and e.facts["tf_version"].kind == "nvidia"
    assert all(f.kind is None for f in e.facts.values() if not f.known)
    assert {f.kind for x in cat.entries() for f in x.facts.values() if f.known} <= set(catalogcheck.KINDS)
    fl = data["releases"]["20.03"]["flavors"]["tf2"]
    fl["image"] = {
        "digest": "sha256:" + "b" * 64,
        "created": None,
        "registry": "127.0.0.1:5000/nvidia/tensorflow",
        "source": IMAGE_SOURCE,
        "declared": {"tf_version": "2.1.0", "cuda": "10.2.90"},
    }
    e = next(x for x in catalog.Catalog(data, "synced").entries() if x.tag == "20.03-tf2-py3")
    assert (e.tf_version, e.facts["tf_version"].kind) == ("2.1.0", "image")
    assert e.source_url("cuda") == "127.0.0.1:5000/nvidia/tensorflow@sha256:" + "b" * 64
    # The notes said 10.2.89: the image wins, and the contradiction stays visible.
    assert e.outranked["cuda"].value == "10.2.89" and e.outranked["cuda"].kind == "notes"
    assert e.to_json()["provenance"]["cuda"]["outranks"]["value"] == "10.2.89"
    assert "cudnn" not in e.outranked


def test_sibling_notes_give_base_stack_fields_only() -> None:
    data = json.loads(catalog.shipped_catalog_path().read_text())
    sibling = next(sid for sid, src in data["sources"].items() if src["kind"] == "sibling")
    data["releases"]["20.03"]["flavors"]["tf2"]["fields"]["tf_version"] = {"value": "2.1", "source": sibling}
    with pytest.raises(CatalogError, match="base-stack fields only"):
        catalog.validate(data)


# --- grades below NVIDIA's own text: the 23.02-25.02 sweep (docs/catalog-sources.md) ----------------------

WEAK = {"nv-version", "third-party", "jetson"}


def _tag(cat: catalog.Catalog, tag: str) -> catalog.Entry:
    return next(e for e in cat.entries() if e.tag == tag)


def test_the_sweep_gives_graded_tf_versions(cat: catalog.Catalog) -> None:
    got = {
        e.tag: (e.tf_version, e.facts["tf_version"].kind)
        for e in cat.entries()
        if e.flavor == "tf2" and release_index(e.release) >= release_index("23.02")
    }
    assert len(got) == 25
    assert got["23.05-tf2-py3"] == ("2.12.0", "nv-version")
    assert got["24.05-tf2-py3"] == ("2.15.0", "jetson")
    assert got["25.02-tf2-py3"] == ("2.17.0", "nv-version")
    assert got["24.11-tf2-py3"] == ("2.17.0", "third-party")
    assert got["24.03-tf2-py3"] == ("2.15.0", "third-party")
    assert got["24.02-tf2-py3"] == ("2.15", "third-party")  # as precise as its source: "tensorflow 2.15"
    known = {t for t, (v, _) in got.items() if v}
    assert len(known) == 13 and {k for _, k in got.values() if k} == WEAK
    for tag, (value, _) in got.items():  # an unknown says why, and never from memory
        if value is None:
            assert "docs/catalog-sources.md" in (_tag(cat, tag).facts["tf_version"].reason or ""), tag


def test_weak_sources_are_pinned_public_files(cat: catalog.Catalog) -> None:
    import re

    weak = {sid: s for sid, s in cat.sources.items() if s["kind"] in WEAK}
    assert len(weak) >= 14
    for sid, src in weak.items():
        assert re.match(r"https://github\.com/[^/]+/[^/]+/blob/[0-9a-f]{40}/", src["url"]), sid
        assert len(src["title"]) > 40, sid


def test_agreeing_and_conflicting_sources_are_kept(cat: catalog.Catalog) -> None:
    e = _tag(cat, "25.02-tf2-py3")
    assert e.facts["tf_version"].also == ("nomarr-25.02-banner", "tufts-25.02")
    prov = e.to_json()["provenance"]["tf_version"]
    assert [a["kind"] for a in prov["also"]] == ["nv-version", "third-party"]
    assert all(a["source"].startswith("https://github.com/") for a in prov["also"])
    # 23.05: NVIDIA's own banner outranks a Jetson wheel that names another TensorFlow for the same month.
    e = _tag(cat, "23.05-tf2-py3")
    assert e.facts["tf_version"].conflicts == (("2.15.0", "jc-2026-05"),)
    assert e.to_json()["provenance"]["tf_version"]["conflicts"][0] | {"source": ""} == {
        "value": "2.15.0",
        "kind": "jetson",
        "title": cat.sources["jc-2026-05"]["title"],
        "source": "",
    }
    # 24.07: Jetson wheels of one grade disagree, so nothing is chosen and every candidate stays visible.
    f = _tag(cat, "24.07-tf2-py3").facts["tf_version"]
    assert f.value is None and {v for v, _ in f.conflicts} == {"2.16.1", "2.17.1"} and "disagree" in (f.reason or "")
    # 23.12: two independent third parties agree (a Dockerfile comment and determined-ai's version matrix).
    assert _tag(cat, "23.12-tf2-py3").facts["tf_version"].also == ("determined-env-23.12",)


def test_python_from_a_third_party_version_matrix(cat: catalog.Catalog) -> None:
    for tag, sid in (("23.12-tf2-py3", "determined-env-23.12"), ("24.03-tf2-py3", "determined-env-24.03")):
        fact = _tag(cat, tag).facts["python"]
        assert (fact.value, fact.kind, fact.source) == ("3.10", "third-party", sid), tag
    assert _tag(cat, "24.02-tf2-py3").facts["python"].value is None  # its source names TensorFlow only


def _with(mutate):  # type: ignore[no-untyped-def]
    data = json.loads(catalog.catalog_path().read_text())
    mutate(data)
    return data


def _tf2(d: dict, release: str) -> dict:  # type: ignore[type-arg]
    return d["releases"][release]["flavors"]["tf2"]["fields"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda d: d["releases"]["25.02"]["fields"].__setitem__("cuda", {"value": "12.8", "source": "jc-2026-05"}),
            "jetson evidence gives the TensorFlow version only, not cuda",
        ),
        (
            lambda d: d["releases"]["25.02"]["fields"].__setitem__(
                "python", {"value": "3.12.3", "source": "cbica-hf-25.02"}
            ),
            "nv-version evidence gives the TensorFlow",
        ),
        (
            lambda d: _tf2(d, "23.05")["tf_version"]["conflicts"].append({"value": "2.11", "source": "rn-20.03"}),
            "is not weaker than the value's source",
        ),
        (
            lambda d: _tf2(d, "23.05")["tf_version"]["conflicts"].append({"value": "2.12.0", "source": "jc-2024-09-a"}),
            "gives the same value",
        ),
        (lambda d: _tf2(d, "25.02")["tf_version"]["also"].append("cbica-hf-25.02"), "'also' repeats a source"),
        (lambda d: _tf2(d, "25.02")["tf_version"]["also"].append("ext-tag-refs"), "backs no value"),
        (lambda d: _tf2(d, "25.02")["tf_version"]["also"].append("nowhere"), "not a known source"),
        (
            lambda d: _tf2(d, "23.05")["tf_version"].__setitem__("conflicts", [{"value": "2.15.0"}]),
            r"tf_version.conflicts\[0\]: needs 'source'",
        ),
        (lambda d: _tf2(d, "24.07")["tf_version"]["conflicts"].pop(), "at least two different candidate values"),
        (
            lambda d: _tf2(d, "24.07")["tf_version"]["conflicts"].append({"value": "2.16", "source": "uva-tf-2.17.0"}),
            "of different grades",
        ),
        (lambda d: _tf2(d, "24.04")["tf_version"].__setitem__("also", ["uva-tf-2.17.0"]), "'also' needs a value"),
        (lambda d: d["sources"]["tufts-25.02"].__setitem__("url", "http://example.org/x"), "https:// address"),
        (
            lambda d: _tf2(d, "24.03").__setitem__("tf_version", {"value": "2.15", "source": "x", "grade": "jetson"}),
            "tf_version: unknown key 'grade'",
        ),
    ],
)
def test_schema_checks_grades_also_and_conflicts(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CatalogError, match=message):
        catalog.validate(_with(mutate))


def test_every_grade_is_a_schema_kind_and_ranks_below_nvidia() -> None:
    data = _with(lambda d: None)
    assert {s["kind"] for s in data["sources"].values()} <= catalogcheck.SOURCE_KINDS
    assert catalogcheck.KINDS.index("sibling") < min(catalogcheck.KINDS.index(k) for k in catalog.WEAK_KINDS)
    assert set(catalog.KIND_TEXT) == set(catalogcheck.KINDS)
    # A weak grade may back a value the schema accepts, and is ranked for conflicts like any other.
    data["releases"]["24.03"]["flavors"]["tf2"]["fields"]["tf_version"] = {
        "value": "2.15.0",
        "source": "tufts-25.02",
        "conflicts": [{"value": "2.14.0", "source": "jc-2026-05"}],
    }
    catalog.validate(data)


def test_catalog_tf_2_15_lists_the_release_with_its_grade(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("catalog", "--tf", "2.15")
    assert res.code == 0, res.stderr
    assert "24.05-tf2-py3" in res.stdout and "jetson" in res.stdout and "third-party" in res.stdout
    (line,) = res.stderr.splitlines()
    assert line.startswith(
        "notice: below NVIDIA's own notes: 24.02-tf2-py3 tf_version 2.15 (third-party); "
        "24.03-tf2-py3 tf_version 2.15.0 (third-party); 24.05-tf2-py3 tf_version 2.15.0 (jetson)"
    )
    assert "envpin catalog sync --release 24.02 --release 24.03 --release 24.05" in line
    rows = json.loads(cli("catalog", "--tf", "2.15", "--json").stdout)
    assert [(r["tag"], r["provenance"]["tf_version"]["kind"]) for r in rows] == [
        ("24.02-tf2-py3", "third-party"),
        ("24.03-tf2-py3", "third-party"),
        ("24.05-tf2-py3", "jetson"),
    ]


def test_catalog_tf_2_17_lists_the_releases_with_their_grades(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("catalog", "--tf", "2.17", "--json")
    assert res.code == 0, res.stderr
    rows = {r["tag"]: r["provenance"]["tf_version"]["kind"] for r in json.loads(res.stdout)}
    assert rows == {"24.11-tf2-py3": "third-party", "24.12-tf2-py3": "nv-version", "25.02-tf2-py3": "nv-version"}
    text = cli("catalog", "--tf", "2.17")
    assert all(tag in text.stdout for tag in rows) and "nv-version" in text.stdout and "third-party" in text.stdout
    assert len(text.stderr.splitlines()) == 1 and text.stderr.startswith("notice: ")


def test_a_weaker_grade_gives_one_notice_line(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("catalog", "show", "25.02")
    assert res.code == 0 and "grade" in res.stdout and "nv-version" in res.stdout
    assert "tf_version: also 2.17.0 from nv-version evidence" in res.stdout
    (line,) = res.stderr.splitlines()
    assert "tf_version 2.17.0 (nv-version), python 3.12.3 (third-party), cudnn 9.7.1 (third-party)" in line
    assert "tf_version: jetson evidence says 2.15.0" in cli("catalog", "show", "23.05").stdout
    # NVIDIA's own notes need no notice; neither does the whole list, whose cells carry their grades.
    assert cli("catalog", "show", "20.03").stderr == ""
    everything = cli("catalog")
    assert everything.stderr == "" and "17 values shown rest on evidence below" in everything.stdout


def test_grade_notice_view(cat: catalog.Catalog) -> None:
    from envpin.views import catalog as view

    assert view.grade_notice([_tag(cat, "20.03-tf2-py3")]) is None
    assert view.grade_notice([_tag(cat, "25.02-tf2-py3")], ("cuda",)) is None
    line = view.grade_notice([_tag(cat, "24.05-tf2-py3"), _tag(cat, "25.02-tf2-py3")], view.PLAN_FIELDS)
    assert line is not None and "\n" not in line and line.count("notice:") == 1
    assert "`releases` (24.05, 25.02) of catalog sync" in line  # a Python caller reads the parameter


def test_grade_notice_names_the_option_once_per_release_on_the_command_line(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("catalog", "--tf", "2.15")
    assert (
        res.code == 0
        and "confirm from the image with `envpin catalog sync --release 24.02 --release 24.03" in res.stderr
    )


@pytest.mark.parametrize(
    "release, message, hint",
    [
        (
            "2.20.0-gpu",
            "--release 2.20.0-gpu is a stock TensorFlow GPU image; catalog sync reads NGC tags",
            "envpin catalog show 2.20.0-gpu",
        ),
        ("tensorflow/tensorflow:2.19.0-gpu", "is a stock TensorFlow GPU image", "envpin catalog show"),
        ("bogus", "'bogus' is not an NGC TensorFlow release", "e.g. --release 20.02 or --release 20.02-tf2-py3"),
    ],
)
def test_sync_release_that_is_no_ngc_tag_names_the_option_it_came_from(
    cli, tmp_path, release: str, message: str, hint: str
) -> None:  # type: ignore[no-untyped-def]
    """`catalog sync` has --release, not --ngc; a stock tag is not read there (before any registry request)."""
    res = cli("catalog", "sync", "--release", release, "--no-save", "--write", str(tmp_path / "c.json"))
    lines = res.stderr.splitlines()
    assert res.code == 2 and res.stdout == "" and len(lines) == 2, res.stderr
    assert lines[0].startswith("error: ") and message in lines[0]
    assert lines[1].startswith("hint: ") and hint in lines[1] and "--ngc" not in lines[1]
    assert list(tmp_path.iterdir()) == []
