"""Stock TensorFlow GPU images (Docker Hub's tensorflow/tensorflow:X.Y.Z-gpu) as bases: the table and its schema,
choosing a tag, plans and locks from it, and the commands that take --stock (or --tf alone)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envpin.environment import lockfile
from envpin.environment.plan import make_plan
from envpin.errors import CatalogError, UsageError
from envpin.knowledge import stock
from envpin.knowledge.versions import parse_tf_spec
from envpin.views.catalog import PLAN_FIELDS, grade_notice


def _data() -> dict:
    return json.loads(Path(stock.stock_path()).read_text())


# -- the table -----------------------------------------------------------------------------------------
def test_shipped_table_is_valid_and_every_tag_was_seen_published() -> None:
    table = stock.load()
    assert table.tags() == ["2.20.0-gpu", "2.19.0-gpu", "2.18.0-gpu", "2.16.1-gpu", "2.15.0-gpu"]  # newest first
    data = _data()
    for tag, rel in data["tags"].items():
        assert rel["published"] and all(
            data["sources"][s]["kind"] in ("usage", "third-party") for s in rel["published"]
        )
        # A usage source is a public file at a pinned commit that names the tag.
        for sid in rel["published"]:
            assert re.match(r"https://github\.com/[^/]+/[^/]+/blob/[0-9a-f]{40}/", data["sources"][sid]["url"]), sid
            assert tag in data["sources"][sid]["title"]


def test_every_value_cites_a_source_with_its_grade_or_says_why_it_is_unknown() -> None:
    for e in stock.load().entries:
        assert e.distribution == "stock" and e.flavor == stock.STOCK_FLAVOR
        assert e.image == f"tensorflow/tensorflow:{e.tag}"
        assert e.tf_version == e.release == e.tag.removesuffix("-gpu")
        for name, fact in e.facts.items():
            if fact.known:
                assert fact.kind in stock.KINDS and e.source_url(name).startswith("https://"), name
            else:
                assert fact.reason, name


def test_third_party_values_are_weak_and_a_weaker_conflict_is_kept() -> None:
    e = stock.load().select("2.20.0-gpu")
    assert set(e.weak()) == {"python", "ubuntu"}
    assert e.facts["cuda"].value == "12.5" and e.facts["cuda"].kind == "tensorflow"
    assert e.facts["cuda"].conflicts == (("12.3", "eg-tf-gpu-readme"),)
    prov = e.to_json()["provenance"]["cuda"]
    assert prov["conflicts"][0]["value"] == "12.3" and prov["conflicts"][0]["kind"] == "third-party"


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda d: d["tags"]["2.19.0-gpu"].update(published=[]), "published: needs at least 1 item"),
        (lambda d: d["tags"]["2.19.0-gpu"].update(published=["tf-tested-gpu"]), "must list public files that use"),
        (lambda d: d["tags"]["2.18.0-gpu"]["digest"].update(value="sha256:1f16"), "must be sha256:<64 hex digits>"),
        (lambda d: d["tags"]["2.18.0-gpu"]["digest"].update(source="dondi01-dockerfile"), "not usage"),
        (lambda d: d["tags"]["2.19.0-gpu"]["fields"]["tf_version"].update(value="2.19.1"), "the version the tag names"),
        (lambda d: d["tags"]["2.19.0-gpu"]["fields"]["cuda"].update(source="dondi01-dockerfile"), "backs no value"),
        (lambda d: d["tags"]["2.15.0-gpu"]["fields"]["python"].pop("reason"), "null without a reason"),
        (
            lambda d: d["tags"]["2.20.0-gpu"]["fields"]["python"].update(
                conflicts=[{"value": "3.11", "source": "tf-tested-gpu"}]
            ),
            "is not weaker than the value's source",
        ),
        (lambda d: d["tags"].update({"2.20-gpu": d["tags"]["2.20.0-gpu"]}), "X.Y.Z-gpu"),
        (lambda d: d["sources"]["cuda-drivers"].update(kind="notes"), "is not one of"),
        (lambda d: d["sources"]["cuda-drivers"].update(url="http://docs.nvidia.com/"), "https://"),
        (lambda d: d["epoch"].update(value="2020-1-1"), "YYYY-MM-DD"),
    ],
)
def test_schema_refuses(edit, problem: str) -> None:  # type: ignore[no-untyped-def]
    data = copy.deepcopy(_data())
    edit(data)
    with pytest.raises(CatalogError, match=re.escape(problem)):
        stock.validate(data)


@pytest.mark.parametrize(
    "edit, place",
    [
        (lambda d: d["tags"]["2.19.0-gpu"]["fields"]["cuda"].pop("source"), "tags['2.19.0-gpu'].fields.cuda: "),
        (
            lambda d: d["tags"]["2.20.0-gpu"]["fields"]["python"].update(conflicts=[{"value": "3.11"}]),
            "tags['2.20.0-gpu'].fields.python.conflicts[0]: ",
        ),
    ],
)
def test_a_fact_without_its_source_is_one_catalog_error_naming_the_place(edit, place: str) -> None:  # type: ignore[no-untyped-def]
    """The stock table's facts are checked by the catalog's own fact check: a missing source is a one-line
    CatalogError that names the tag and the field, never a KeyError from a copy of that check."""
    data = copy.deepcopy(_data())
    edit(data)
    with pytest.raises(CatalogError) as caught:
        stock.validate(data)
    assert "\n" not in caught.value.message and place in caught.value.message, caught.value.message


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_an_unreadable_table_is_one_catalog_error_never_a_wait(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    path = tmp_path / "stock.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    monkeypatch.setattr(stock, "stock_path", lambda: str(path))
    stock.load.cache_clear()
    try:
        with pytest.raises(CatalogError, match="cannot be read"):
            stock.load()
    finally:
        stock.load.cache_clear()


# -- choosing a tag ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, tf, tag",
    [
        (None, "2.20", "2.20.0-gpu"),
        (None, "2", "2.20.0-gpu"),
        ("2.19", None, "2.19.0-gpu"),
        ("2.19.0-gpu", None, "2.19.0-gpu"),
        ("tensorflow/tensorflow:2.15.0-gpu", None, "2.15.0-gpu"),
        ("docker.io/tensorflow/tensorflow:2.15.0-gpu", "2.15", "2.15.0-gpu"),
        ("2", "2.19", "2.19.0-gpu"),
    ],
)
def test_select(spec: str | None, tf: str | None, tag: str) -> None:
    assert stock.load().select(spec, parse_tf_spec(tf) if tf else None).tag == tag


@pytest.mark.parametrize(
    "spec, tf, message",
    [
        (None, "2.21", "no stock TensorFlow GPU image in the catalog holds TensorFlow 2.21"),
        ("2.19", "2.20", "name different TensorFlow releases"),
        ("nvcr.io/nvidia/tensorflow:2.20.0-gpu", None, "is not a version or a tag of tensorflow/tensorflow"),
        ("2.20.0-cpu", None, "is not a version or a tag"),
        ("BAD NAME:2.20.0-gpu", None, "is not a version or a tag"),
        (":", None, "is not a version or a tag"),
        ("tensorflow/tensorflow:2.20.0-gpu@sha256:" + "0" * 64, None, "is not a version or a tag"),
        ("tensorflow/tensorflow:latest-gpu", None, "is not a version or a tag"),
        # a full reference names one image: tensorflow/tensorflow:2.20.0 is not the -gpu image, never silently it
        ("tensorflow/tensorflow:2.20.0", None, "names tensorflow/tensorflow:2.20.0, which is not a -gpu image"),
        ("docker.io/tensorflow/tensorflow:2.20", None, "names tensorflow/tensorflow:2.20, which is not a -gpu image"),
        (
            "127.0.0.1:5000/tensorflow/tensorflow:2.20.0-gpu",
            None,
            "`stock` names the upstream tag, `base_image` the copy",
        ),
        (None, None, "needs a TensorFlow version"),
    ],
)
def test_select_refuses_with_a_hint(spec: str | None, tf: str | None, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)) as err:
        stock.load().select(spec, parse_tf_spec(tf) if tf else None)
    assert err.value.hint


@given(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99))
def test_stock_tags_are_never_ngc_tags(major: int, minor: int, patch: int) -> None:
    assert stock.names_stock_tag(f"{major}.{minor}.{patch}-gpu")
    assert stock.names_stock_tag(f"tensorflow/tensorflow:{major}.{minor}.{patch}-gpu")
    assert not stock.names_stock_tag(f"{major:02d}.{minor % 12 + 1:02d}-tf2-py3")
    assert not stock.names_stock_tag(f"{major:02d}.{minor % 12 + 1:02d}")
    assert not stock.names_stock_tag(f"nvcr.io/nvidia/tensorflow:{major}.{minor}.{patch}-gpu")


@given(st.text(max_size=40))
def test_names_stock_tag_never_raises(text: str) -> None:
    assert stock.names_stock_tag(text) in (True, False)


@given(st.text(max_size=60))
def test_any_stock_spec_is_a_tag_or_one_usage_error(text: str) -> None:
    try:
        entry = stock.load().select(text)
    except UsageError as exc:
        assert exc.hint and "\n" not in exc.message
    else:
        assert entry.tag in stock.load().tags()


# -- plans and locks -----------------------------------------------------------------------------------
def test_plan_from_tf_alone_is_the_stock_image_with_the_stock_recipe() -> None:
    plan = make_plan(tf="2.20")
    assert plan.entry.tag == "2.20.0-gpu" and plan.distribution == "stock"
    assert plan.recipe.distribution == "stock" and plan.tf_version == "2.20.0" and plan.tf_version_source == "catalog"
    assert plan.name == "2.20.0-gpu" and plan.from_ref == "tensorflow/tensorflow:2.20.0-gpu"
    assert plan.to_dict()["distribution"] == "stock" and plan.to_dict()["release"] == "2.20.0"
    assert plan.source_date_epoch == stock.load().epoch == 1577836800  # 2020-01-01, the table's fixed date


def test_ngc_plans_do_not_change() -> None:
    plan = make_plan(ngc="20.02", tf="2.1")
    assert "distribution" not in plan.to_dict() and plan.distribution == "ngc"
    with pytest.raises(UsageError, match="give `ngc` or `stock`, not both"):
        make_plan(ngc="20.02", stock="2.20")


def test_a_stock_lock_rederives_its_plan(tmp_path: Path) -> None:
    from envpin import api

    res = api.render_environment(tf="2.15", out=tmp_path / "env")
    locked = lockfile.read(tmp_path / "env" / "envpin.lock")
    assert (locked.inputs.release, locked.inputs.flavor, locked.inputs.tag) == ("2.15.0", "gpu", "2.15.0-gpu")
    assert locked.base.image == "tensorflow/tensorflow:2.15.0-gpu" and locked.base.digest is None  # none stated
    again = lockfile.plan_of(locked, tmp_path / "env")
    assert again.entry.tag == "2.15.0-gpu" and again.inputs_hash == res.plan.inputs_hash
    assert api.check_lock(tmp_path / "env" / "envpin.lock") == []


def test_a_digest_a_source_states_pins_the_render_from_docker_hub_only(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    stated = "sha256:1f16fbd9be8bb84891de12533e332bbd500511caeb5cf4db501dbe39d422f9c7"  # rlan/notebooks' label
    plan = make_plan(stock="2.18")
    assert plan.base_digest == stated and plan.from_ref == f"tensorflow/tensorflow:2.18.0-gpu@{stated}"
    assert make_plan(stock="2.18", base_image="mirror.example.com/tensorflow/tensorflow:2.18.0-gpu").base_digest is None
    res = cli("render", "--stock", "2.18.0-gpu", "--out", str(tmp_path / "x"))
    notices = [line for line in res.stderr.splitlines() if line.startswith("notice:")]
    assert res.code == 0 and len(notices) == 1 and "digest sha256:1f16fbd9be8b… (third-party)" in notices[0]
    assert f"\nFROM tensorflow/tensorflow:2.18.0-gpu@{stated}\n" in (tmp_path / "x" / "Dockerfile").read_text()
    assert lockfile.read(tmp_path / "x" / "envpin.lock").base.digest == stated
    res = cli(
        "render",
        "--stock",
        "2.18.0-gpu",
        "--base-image",
        "mirror.example.com/tensorflow/tensorflow:2.18.0-gpu",
        "--out",
        str(tmp_path / "m"),
    )
    assert res.code == 0 and "digest sha256" not in res.stderr and "python 3.11.0rc1 (third-party)" in res.stderr


def test_render_notice_names_the_weak_values() -> None:
    line = grade_notice([make_plan(stock="2.20").entry], PLAN_FIELDS)
    assert line is not None and line.startswith("notice: below TensorFlow's and NVIDIA's own text: 2.20.0-gpu ")
    assert "python 3.10 (third-party)" in line and "ubuntu 22.04 (third-party)" in line and "\n" not in line
    assert grade_notice([make_plan(stock="2.15").entry], PLAN_FIELDS) is None


# -- through the CLI -----------------------------------------------------------------------------------
def test_cli_render_tf_alone_writes_a_stock_environment(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("render", "--tf", "2.20", "--out", str(tmp_path / "x"))
    assert res.code == 0 and res.stdout.strip() == str(tmp_path / "x")
    notice = [line for line in res.stderr.splitlines() if line.startswith("notice:")]
    assert len(notice) == 1 and "python 3.10 (third-party)" in notice[0]
    assert "rendered 2.20.0-gpu (TensorFlow 2.20.0, recipe stock-" in res.stderr
    text = (tmp_path / "x" / "Dockerfile").read_text()
    assert "\nFROM tensorflow/tensorflow:2.20.0-gpu\n" in text
    assert 'org.opencontainers.image.description="stock TensorFlow 2.20.0-gpu pinned by envpin"' in text
    assert "ARG SOURCE_DATE_EPOCH=1577836800" in text


def test_cli_recipe_and_dry_run_for_a_stock_image(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("recipe", "--stock", "2.20.0-gpu", "--json")
    out = json.loads(res.stdout)
    assert res.code == 0 and out["tag"] == "2.20.0-gpu" and out["distribution"] == "stock"
    res = cli("build", "--stock", "2.15", "--dry-run", cwd=tmp_path)
    plan = json.loads(res.stdout)
    assert res.code == 0 and plan["tag"] == "2.15.0-gpu" and plan["recipe"]["id"].startswith("stock-")
    assert not (tmp_path / "images").exists()


def test_cli_catalog_lists_and_shows_stock_images(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "200")  # every cell on one line
    res = cli("catalog", "--stock")
    assert res.code == 0 and "2.20.0-gpu" in res.stdout and "3.10 (third-party)" in res.stdout
    assert res.stderr.count("notice:") == 1
    res = cli("catalog", "--stock", "--tf", "2.19", "--json")
    (listed,) = json.loads(res.stdout)
    assert listed["tag"] == "2.19.0-gpu" and listed["digest"].startswith("sha256:73fe35b6")
    assert listed["provenance"]["digest"]["kind"] == "third-party"
    res = cli("catalog", "show", "2.20.0-gpu", "--json")
    (shown,) = json.loads(res.stdout)
    assert shown["distribution"] == "stock" and shown["provenance"]["driver_min"]["kind"] == "nvidia-cuda"
    assert [p["kind"] for p in shown["published"]] == ["usage"]
    assert "enterprise_gateway" in shown["published"][0]["source"]
    res = cli("catalog", "show", "tensorflow/tensorflow:2.20.0-gpu")
    assert res.code == 0 and "cuda: third-party evidence says 12.3" in res.stdout
    assert "published: https://github.com/jupyter-server/enterprise_gateway/blob/" in res.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["catalog", "--tf", "2.20"], "hint: stock images hold it: 2.20.0-gpu (envpin catalog --stock --tf 2.20)"),
        (["catalog", "--stock", "--tf", "2.21"], "no stock TensorFlow GPU image in the catalog holds TensorFlow 2.21"),
        (["catalog", "--stock", "--flavor", "tf2"], "stock images have one flavor"),
        (["render", "--ngc", "20.02", "--stock", "2.20"], "give --ngc or --stock, not both"),
        (["render", "--stock", "2.21"], "the catalog knows 2.20.0-gpu, 2.19.0-gpu, 2.18.0-gpu, 2.16.1-gpu, 2.15.0-gpu"),
        (["recipe"], "recipe needs --ngc RELEASE, or --stock TAG"),
        (["doctor", "--stock", "2.20", "--ngc", "22.06"], "not both"),
        (["doctor", "--stock", ""], "--stock '' is not a version or a tag of tensorflow/tensorflow"),
        (["doctor", "--stock", " "], "--stock ' ' is not a version or a tag"),
        # an empty value given is named as what it is, never "needs --ngc RELEASE, or --stock TAG"
        (["render", "--stock", ""], "--stock '' is not a version or a tag of tensorflow/tensorflow"),
        (["recipe", "--stock", ""], "--stock '' is not a version or a tag of tensorflow/tensorflow"),
        (["lock", "requirements.in", "--stock", ""], "--stock '' is not a version or a tag of tensorflow/tensorflow"),
        (["render", "--ngc", ""], "'' is not an NGC TensorFlow release"),
        (["recipe", "--tf", ""], "'' is not a TensorFlow version"),
        (["recipe", "--stock", "2.20.0-gpu@x"], "--stock 2.20.0-gpu@x is not a version or a tag"),
        (["recipe", "--stock", "1.0.0-gpu"], "no stock TensorFlow GPU image in the catalog holds TensorFlow 1.0.0"),
        (["render", "--stock", "tensorflow/tensorflow:2.20.0"], "which is not a -gpu image"),
        (["render", "--ngc", "2.20.0-gpu"], "--ngc 2.20.0-gpu names a stock TensorFlow GPU image"),
        (
            ["recipe", "--ngc", "tensorflow/tensorflow:2.19.0-gpu"],
            "hint: give it as --stock tensorflow/tensorflow:2.19.0",
        ),
        (["doctor", "--ngc", "2.20.0-gpu"], "hint: give it as --stock 2.20.0-gpu"),
        (["build", "--dry-run", "--ngc", "2.20.0-gpu"], "names a stock TensorFlow GPU image"),
        (
            ["render", "--tf", "2.19", "--stock", "2.20"],
            "--stock 2.20 and --tf 2.19 name different TensorFlow releases",
        ),
        (["catalog", "show", "99.1.0-gpu"], "no stock TensorFlow GPU image in the catalog holds TensorFlow 99.1.0"),
        # --lock names the image as --ngc, --stock and --tf do: never one of them silently ignored
        (["build", "--dry-run", "--lock", "x/envpin.lock", "--stock", "2.20"], "give --lock or --stock, not both"),
        (["build", "--dry-run", "--lock", "x/envpin.lock", "--tf", "2.20"], "give --lock or --tf, not both"),
        (["build", "--dry-run", "--lock", "x/envpin.lock", "--ngc", "20.02-tf2-py3"], "give --lock or --ngc, not both"),
        (["build", "--lock", "x/envpin.lock", "--stock", "2.20"], "give --lock or --stock, not both"),
        (
            ["lock", "--check", "--stock", "2.20"],
            "--check tests the envpin.lock there is; --stock names what a new lock",
        ),
        (["lock", "--check", "--tf", "2.20"], "--check tests the envpin.lock there is; --tf names what a new lock"),
        (["lock", "--check", "--ngc", "20.02"], "--check tests the envpin.lock there is; --ngc names what a new lock"),
        (["lock", "--check", "requirements.in"], "--check tests the envpin.lock there is; REQUIREMENTS_IN names"),
        (["lock", "--check", "--out", "r.lock"], "--check tests the envpin.lock there is; --out names"),
        (["lock", "requirements.in", "--stock", "2.20", "--lock", "x/envpin.lock"], "--lock names the envpin.lock"),
    ],
)
def test_cli_bad_stock_input_is_one_error_and_one_hint(cli, tmp_path: Path, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    res = cli(*args, cwd=tmp_path)
    lines = res.stderr.splitlines()
    assert res.code == 2 and res.stdout == "" and len(lines) == 2, res.stderr
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: ") and message in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_doctor_checks_the_stock_images_driver(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from envpin.doctor.readings import FAKE_ENV

    readings = {
        "docker": {"version": "24.0.7", "runtimes": ["nvidia", "runc"]},
        "cdi_specs": [],
        "container_hooks": [],
        "driver": {"version": "560.35.03"},
        "gpus": [{"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}],
    }
    path = tmp_path / "readings.json"
    path.write_text(json.dumps(readings))
    monkeypatch.setenv(FAKE_ENV, str(path))
    res = cli("doctor", "--stock", "2.20", "--json")
    out = json.loads(res.stdout)
    assert out["target"]["image"] == "tensorflow/tensorflow:2.20.0-gpu" and out["target"]["release"] == "2.20.0-gpu"
    assert out["target"]["driver_min"] == {"value": "555.42.02"}
    checks = {c["name"]: c for c in out["checks"]}
    assert checks["driver"]["status"] == "ok" and "meets 2.20.0-gpu's minimum 555.42.02" in checks["driver"]["message"]
    readings["driver"] = {"version": "535.104.05"}
    path.write_text(json.dumps(readings))
    cli("render", "--stock", "2.20", "--out", str(tmp_path / "env"))
    res = cli("doctor", "--lock", str(tmp_path / "env"))
    assert "driver 535.104.05 is older than 2.20.0-gpu's minimum 555.42.02" in res.stdout and res.code != 0


def test_cli_render_of_an_ngc_tag_with_a_weak_value_prints_one_notice(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from envpin.knowledge import catalog

    weak = [e for e in catalog.load().entries() if e.weak(PLAN_FIELDS) and e.tf_version and e.flavor == "tf2"]
    assert weak, "the catalog has NGC tags whose plan values rest on a weak grade"
    e = weak[0]
    res = cli("render", "--ngc", e.tag, "--out", str(tmp_path / "n"))
    notices = [line for line in res.stderr.splitlines() if line.startswith("notice:")]
    assert res.code == 0 and len(notices) == 1, res.stderr
    assert notices[0].startswith(f"notice: below NVIDIA's own notes: {e.tag} ")
    name, fact = next(iter(e.weak(PLAN_FIELDS).items()))
    assert f"{name} {fact.value} ({fact.kind})" in notices[0]
    strong = next(x for x in catalog.load().entries() if x.tag == "20.02-tf2-py3")
    assert not strong.weak(PLAN_FIELDS)
    res = cli("render", "--ngc", "20.02-tf2-py3", "--out", str(tmp_path / "s"))
    assert res.code == 0 and "notice:" not in res.stderr


def test_cli_catalog_show_names_a_weak_stated_digest_in_its_notice(cli) -> None:  # type: ignore[no-untyped-def]
    """render pins the digest a third party states (2.19.0-gpu): catalog show's one notice names it, as the
    stock listing's does; an NGC release's notice is unchanged."""
    listed = [ln for ln in cli("catalog", "--stock", "--tf", "2.19").stderr.splitlines() if ln.startswith("notice:")]
    shown = [ln for ln in cli("catalog", "show", "2.19.0-gpu").stderr.splitlines() if ln.startswith("notice:")]
    assert len(shown) == 1 and shown == listed and "digest sha256:73fe35b67dad… (third-party)" in shown[0]
    ngc = cli("catalog", "show", "24.11")
    assert ngc.code == 0 and ngc.stderr.count("notice:") == 1 and "24.11-tf2-py3 tf_version 2.17.0" in ngc.stderr
