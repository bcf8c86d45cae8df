"""NGC-spec selection: envpin.portable.ngc's rules behind Catalog.select, the one way from '20.02',
'20.02-tf2-py3' or a full reference (plus --tf and a flavor) to catalog tags.

Every caller (plan, catalog show, catalog sync, doctor, audit) goes through it, so each dead end has one
message and one hint wherever it is reached.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin import api
from envpin.audit import base
from envpin.audit.parser import parse
from envpin.doctor.diagnosis import target_from_ngc
from envpin.errors import UsageError
from envpin.knowledge import catalog, sync
from envpin.portable import ngc
from envpin.portable.versions import SpecError, parse_tf_spec
from tests.props import examples

CAT = catalog.load()
TAGS = [e.tag for e in CAT.entries()]


# --- examples --------------------------------------------------------------------------------------------


def test_release_and_tag_forms() -> None:
    assert [e.tag for e in CAT.select("20.03")] == ["20.03-tf1-py3", "20.03-tf2-py3"]
    assert [e.tag for e in CAT.select("20.03-tf2-py3")] == ["20.03-tf2-py3"]
    assert [e.tag for e in CAT.select("nvcr.io/nvidia/tensorflow:20.03-tf2-py3")] == ["20.03-tf2-py3"]
    assert [e.tag for e in CAT.select("20.02", parse_tf_spec("2.1"), single=True)] == ["20.02-tf2-py3"]
    assert [e.tag for e in CAT.select("20.02", parse_tf_spec("1"))] == ["20.02-tf1-py3"]


def test_the_users_example_explains_itself() -> None:
    with pytest.raises(UsageError) as info:
        CAT.select("20.01", parse_tf_spec("2.1"), single=True)
    assert info.value.message == "NGC 20.01 contains TF 1.15 (tf1), TF 2.0 (tf2), not TensorFlow 2.1"
    assert info.value.hint == "TensorFlow 2.1 is in NGC 20.02, 20.03"


@pytest.mark.parametrize(
    ("spec", "tf", "message", "hint"),
    [
        ("20.04", None, "NVIDIA published no TensorFlow container in 20.04", "nearest releases: "),
        (
            "18.12",
            None,
            "release 18.12 is outside the catalog, which covers 19.01 to 25.02",
            "25.02 was the last NGC TensorFlow release; see 'envpin catalog'",
        ),
        (
            "24.01",
            "1.15",
            "NGC 24.01 ships only TensorFlow 2 (24.01-tf2-py3); TensorFlow 1.15 is not in it",
            "tf1 images ended with 23.03; TF 1.15 is in ",
        ),
        (
            "24.01-tf1-py3",
            None,
            "NGC 24.01 has no tf1-py3 image; it was published as 24.01-tf2-py3",
            "tf1 images ended with 23.03",
        ),
        (
            "20.02",
            None,
            "NGC 20.02 has 2 images: 20.02-tf1-py3 (TF 1.15), 20.02-tf2-py3 (TF 2.1)",
            "add `tf`, or name the tag, e.g. `ngc` 20.02-tf2-py3",
        ),
        ("20.02", "3", "NGC 20.02 contains", "no NGC release in the catalog is known to contain TensorFlow 3"),
    ],
)
def test_dead_ends(spec: str, tf: str | None, message: str, hint: str) -> None:
    with pytest.raises(UsageError) as info:
        CAT.select(spec, parse_tf_spec(tf) if tf else None, single=True)
    assert info.value.message.startswith(message) and (info.value.hint or "").startswith(hint)


def test_flavor_narrows_like_a_tag() -> None:
    assert CAT.select("20.03", flavor="tf2") == CAT.select("20.03-tf2-py3")
    assert CAT.select("20.03-tf2-py3", flavor="tf2") == CAT.select("20.03-tf2-py3")
    with pytest.raises(UsageError, match=r"NGC 20\.03-tf2-py3 is the tf2 image, not tf1"):
        CAT.select("20.03-tf2-py3", flavor="tf1")
    with pytest.raises(UsageError) as info:
        CAT.select("20.03", flavor="tf3")
    assert (info.value.message, info.value.hint) == ("unknown flavor 'tf3'", "use one of: py2, py3, tf1, tf1-py2, tf2")


def test_tf_versions_known_only_from_weak_grades_are_selectable() -> None:
    """`envpin catalog --tf 2.15` used to say no NGC release matches: the 23.02-25.02 sweep gives graded values."""
    assert [e.tag for e in CAT.select(None, parse_tf_spec("2.15"))] == [
        "24.02-tf2-py3",
        "24.03-tf2-py3",
        "24.05-tf2-py3",
    ]
    assert [e.tag for e in CAT.select(None, parse_tf_spec("2.17"))] == [
        "24.11-tf2-py3",
        "24.12-tf2-py3",
        "25.02-tf2-py3",
    ]
    assert [e.tag for e in api.catalog_entries(tf="2.17.0")] == ["24.11-tf2-py3", "24.12-tf2-py3", "25.02-tf2-py3"]
    (e,) = CAT.select("25.02", parse_tf_spec("2.17"), single=True)
    assert e.facts["tf_version"].kind == "nv-version" and e.facts["tf_version"].weak
    # 24.07's Jetson wheels disagree, so its version stays unknown and a --tf is the user's claim, as before.
    assert CAT.select("24.07", parse_tf_spec("2.16"), single=True)[0].tf_version is None
    with pytest.raises(UsageError, match=r"NGC 24\.05 contains TF 2\.15\.0"):
        CAT.select("24.05", parse_tf_spec("2.16"), single=True)


def test_without_a_spec_every_release_is_searched() -> None:
    tf21 = CAT.select(None, parse_tf_spec("2.1"))
    assert [e.tag for e in tf21] == ["20.02-tf2-py3", "20.03-tf2-py3"]
    assert CAT.select(None) == CAT.entries()
    assert all(e.flavor == "tf1" for e in CAT.select(None, flavor="tf1"))
    assert CAT.select(None, parse_tf_spec("3")) == []
    with pytest.raises(UsageError, match="unknown flavor"):
        CAT.select(None, flavor="py4")


# --- the callers -----------------------------------------------------------------------------------------


def test_callers_agree() -> None:
    assert api.catalog_release("20.03") == CAT.select("20.03")
    assert api.catalog_entries(tf="2.1") == CAT.select(None, parse_tf_spec("2.1"))
    assert api.catalog_entries(flavor="tf1") == CAT.select(None, flavor="tf1")
    res = api.recipe_for("20.02", "2.1")
    assert res.entry == CAT.select("20.02", parse_tf_spec("2.1"), single=True)[0] and res.recipe.id == "ngc-tf2.0-2.4"
    assert res.distributed is None
    assert sync.select_entries(CAT, ["20.03-tf2-py3,20.02-tf1-py3"]) == [
        CAT.select("20.02-tf1-py3")[0],
        CAT.select("20.03-tf2-py3")[0],
    ]
    assert target_from_ngc("nvcr.io/nvidia/tensorflow:22.06-tf2-py3", CAT).release == "22.06"


@pytest.mark.parametrize(
    "call",
    [
        lambda: api.catalog_release("20.04"),
        lambda: api.recipe_for("20.04", "2"),
        lambda: sync.select_entries(CAT, ["20.04"]),
        lambda: target_from_ngc("20.04", CAT),
    ],
)
def test_callers_share_the_messages(call: object) -> None:
    with pytest.raises(UsageError) as info:
        call()  # type: ignore[operator]
    assert info.value.message.startswith("NVIDIA published no TensorFlow container in 20.04")


def test_catalog_entries_without_a_match() -> None:
    with pytest.raises(UsageError, match="no NGC release in the catalog matches TensorFlow 3"):
        api.catalog_entries(tf="3")


def test_audit_reads_the_base_through_select() -> None:
    def info(image: str) -> base.BaseInfo:
        df = parse(f"FROM {image}\n")
        return base.identify(df, df.stages[-1])

    assert info("nvcr.io/nvidia/tensorflow:20.02-tf2-py3").tf_version == "2.1"
    assert info("mirror.example/ngc/nvidia/tensorflow:20.02-tf1-py3").tf_version == "1.15"
    bare = info("nvcr.io/nvidia/tensorflow:20.02")
    assert bare.recipe is None
    assert "NGC 20.02 has no tag 20.02 (it has 20.02-tf1-py3, 20.02-tf2-py3)" in (bare.reason or "")
    gone = info("nvcr.io/nvidia/tensorflow:20.04-tf2-py3")
    assert "NVIDIA published no TensorFlow container in 20.04" in (gone.reason or "")


# --- the rules without the host: any entries with release, flavor, tag, tf_version ------------------------


class _E(NamedTuple):
    release: str
    flavor: str
    tag: str
    tf_version: str | None


def _selector() -> ngc.Selector:
    entries = [
        _E("20.01", "tf1", "20.01-tf1-py3", "1.15.0"),
        _E("20.01", "tf2", "20.01-tf2-py3", "2.0.0"),
        _E("20.03", "tf2", "20.03-tf2-py3", None),
    ]
    return ngc.Selector(entries, {"20.02": {"reason": "none published"}})


def test_selector_on_plain_entries_raises_spec_error() -> None:
    sel = _selector()
    assert [e.tag for e in sel.select("20.01", parse_tf_spec("2"))] == ["20.01-tf2-py3"]
    # The catalog does not know 20.03's TF version: a MAJOR.MINOR --tf is the user's claim.
    assert [e.tag for e in sel.select("20.03", parse_tf_spec("2.2"))] == ["20.03-tf2-py3"]
    with pytest.raises(SpecError, match=r"no TensorFlow container in 20\.02: none published"):
        sel.select("20.02")
    with pytest.raises(SpecError, match="has 2 images"):
        sel.select("20.01", single=True)
    with pytest.raises(ValueError, match="needs an NGC spec"):
        sel.select(None, single=True)
    assert ngc.nearest_releases("20.02", ["20.03", "20.01"], 2) == ["20.03", "20.01"]


# --- properties ------------------------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=60), st.sampled_from([None, "1", "2", "2.1", "1.15"]), st.booleans())
def test_arbitrary_specs_raise_only_usage_error(text: str, tf: str | None, single: bool) -> None:
    try:
        entries = CAT.select(text, parse_tf_spec(tf) if tf else None, single=single)
    except UsageError as exc:
        assert exc.message and exc.hint and "\n" not in exc.message
    else:
        assert entries and len({e.release for e in entries}) == 1 and (not single or len(entries) == 1)


@settings(max_examples=examples(100), deadline=None)
@given(
    st.sampled_from(TAGS), st.sampled_from(["", "nvcr.io/nvidia/tensorflow:", "127.0.0.1:5000/m/nvidia/tensorflow:"])
)
def test_every_tag_selects_itself(tag: str, prefix: str) -> None:
    (entry,) = CAT.select(prefix + tag, single=True)
    assert entry.tag == tag
    assert entry in CAT.select(entry.release) and entry in CAT.select(entry.release, flavor=entry.flavor)
    if entry.tf_version:
        assert entry in CAT.select(entry.release, parse_tf_spec(entry.tf_version.split("+")[0]))


def test_a_hint_names_the_parameter_for_python_and_the_option_for_the_command_line(cli) -> None:  # type: ignore[no-untyped-def]
    """The selection rules (envpin.portable, no command line there) keep the parameters a hint speaks of as
    fields: a Python caller reads `tf`, the CLI its option, and another command's option with that command."""
    with pytest.raises(UsageError) as info:
        CAT.select("19.01", parse_tf_spec("2"), single=True)
    assert info.value.hint is not None and info.value.hint.startswith("TensorFlow 2 is in NGC 19.11, ")
    assert info.value.hint.endswith(" more: `tf` of catalog 2)") and "--" not in info.value.hint
    result = cli("render", "--ngc", "19.01", "--tf", "2")
    error, hint = result.stderr.splitlines()
    assert result.code == 2 and error.startswith("error: NGC 19.01 contains TF ")
    assert hint.startswith("hint: TensorFlow 2 is in NGC 19.11, ") and hint.endswith(" more: envpin catalog --tf 2)")
    result = cli("render", "--ngc", "20.02")
    assert result.stderr.splitlines()[-1] == "hint: add --tf, or name the tag, e.g. --ngc 20.02-tf2-py3"
