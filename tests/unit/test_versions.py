"""envpin.portable.versions: the one parser of version numbers, TF specs, NGC specs and release months.

Examples first, then the callers that compare versions through it, then properties over arbitrary text:
the only exception raised is SpecError (UsageError on the host side, same message and hint), nothing
but ASCII digits counts, and what is printed parses back to the same value.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.audit.rules.determinism import seed_ok
from envpin.doctor.diagnosis import parse_branch
from envpin.errors import UsageError
from envpin.knowledge import imageconfig
from envpin.knowledge import versions as host
from envpin.portable import versions
from envpin.portable.versions import NGCSpec, SpecError, TFSpec
from envpin.probe import runtime
from tests.props import examples

# --- version tuples --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("2.1.0", (2, 1, 0)),
        ("1.15.5+nv22.12", (1, 15, 5)),
        ("2.1", (2, 1)),
        ("535.104.05", (535, 104, 5)),
        ("2.21.0rc1", (2, 21, 0)),
        (" 2.4.0\n", (2, 4, 0)),
        ("1234567890.1", (1234567890, 1)),  # one number, never cut at nine digits
        ("3.", (3,)),
        ("abc", None),
        ("", None),
        (None, None),
        ("v2.1", None),
        ("٢.١", None),  # str.isdigit() accepts these; a version does not
        ("2" * 5000, None),  # beyond int()'s 4,300-digit limit: refused, not ValueError
    ],
)
def test_parse_version(text: str | None, parts: tuple[int, ...] | None) -> None:
    assert versions.parse_version(text) == parts


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("535.104.05", (535, 104, 5)),
        ("8.0", (8, 0)),
        ("470", (470,)),
        ("535.104.05-beta", None),
        ("535.", None),
        ("1..2", None),
        ("٥٣٥.١٠٤", None),
        ("", None),
    ],
)
def test_parse_version_exact(text: str, parts: tuple[int, ...] | None) -> None:
    assert versions.parse_version(text, exact=True) == parts


def test_components_and_matches() -> None:
    assert versions.components("1.15.5+nv21.06") == ["1", "15", "5", "nv21", "6"]
    assert versions.components("1" * 20) == ["1" * 20]  # too long to be a number: kept as text
    assert versions.matches((2, 1, 0), "2.1")  # the catalog knows only MAJOR.MINOR: not a contradiction
    assert versions.matches((2,), "2.10.0") and not versions.matches((2, 1), "2.10.0")
    assert not versions.matches((2,), None) and not versions.matches((2,), "unknown")


# --- TensorFlow specs ------------------------------------------------------------------------------------

#: A spec's hint names the parameter as a Python caller reads it; the CLI names it through envpin.errors.param.
TF_HINT = "give MAJOR, MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. `tf` 2.1 or `tf` 1.15.2"
TF_HINT_CLI = "give MAJOR, MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. --tf 2.1 or --tf 1.15.2"


def _option(name: str, command: str | None) -> str:
    """How the CLI names a parameter (envpin.cli renders it from the click option; here, by hand)."""
    return f"--{name}" if command is None else f"envpin {command} --{name}"


@pytest.mark.parametrize(("text", "parts"), [("2", (2,)), ("2.1", (2, 1)), ("2.1.0", (2, 1, 0)), (" 1.15\n", (1, 15))])
def test_tf_spec(text: str, parts: tuple[int, ...]) -> None:
    spec = versions.parse_tf_spec(text)
    assert spec == TFSpec(parts) and spec.major == parts[0] and spec.text == text.strip()


def test_tf_spec_is_a_prefix() -> None:
    spec = versions.parse_tf_spec("2.1")
    assert spec.matches("2.1.0") and spec.matches("2.1") and spec.matches("2.1.4+nv20.06")
    assert not spec.matches("2.10.0") and not spec.matches("1.15.2") and not spec.matches(None)


@pytest.mark.parametrize("text", ["", "2.x", "v2.1", "2.1.0.1", "two", "2..1", "٢.١", "2.1\nRUN x", "1" * 4400])
def test_tf_spec_refused_with_a_hint(text: str) -> None:
    with pytest.raises(SpecError) as info:
        versions.parse_tf_spec(text)
    assert "is not a TensorFlow version" in info.value.message and info.value.hint == TF_HINT
    assert info.value.hint_naming(_option) == TF_HINT_CLI
    assert "\n" not in info.value.message and len(info.value.message) < 120
    with pytest.raises(UsageError) as host_info:
        host.parse_tf_spec(text)
    assert (host_info.value.message, host_info.value.hint) == (info.value.message, info.value.hint)


# --- NGC specs -------------------------------------------------------------------------------------------

NGC_HINT = "give YY.MM or a tag, e.g. `ngc` 20.02 or `ngc` 20.02-tf2-py3"
NGC_HINT_CLI = "give YY.MM or a tag, e.g. --ngc 20.02 or --ngc 20.02-tf2-py3"


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("20.02", NGCSpec("20.02", None)),
        ("20.02-tf2-py3", NGCSpec("20.02", "tf2")),
        ("20.02-tf1-py3", NGCSpec("20.02", "tf1")),
        ("19.10-py2", NGCSpec("19.10", "py2")),
        ("nvcr.io/nvidia/tensorflow:20.02-tf2-py3", NGCSpec("20.02", "tf2")),
        ("127.0.0.1:5000/mirror/nvidia/tensorflow:21.06-tf2-py3", NGCSpec("21.06", "tf2")),  # a mirror
        ("[::1]:5000/nvidia/tensorflow:20.03", NGCSpec("20.03", None)),
        (" 20.02\n", NGCSpec("20.02", None)),
    ],
)
def test_ngc_spec(text: str, spec: NGCSpec) -> None:
    assert versions.parse_ngc_spec(text) == spec


@pytest.mark.parametrize(
    "text",
    [
        "",
        "20.2",
        "2020.02",
        "2002",
        "latest",
        "20.02-tf3-py3",
        "20.02-tf2",
        "٢٠.٠٢",
        "20.02\nRUN x",
        "ubuntu:20.02",
        "tensorflow:20.02",
        "x/y:20.02",
        "nvcr.io/nvidia/pytorch:20.02-py3",
        "nvcr.io/nvidia/tensorflow",
        "nvcr.io/nvidia/tensorflow:20.02-tf2-py3@sha256:" + "a" * 64,
        "9" * 5000,
    ],
)
def test_ngc_spec_refused_with_a_hint(text: str) -> None:
    with pytest.raises(SpecError) as info:
        versions.parse_ngc_spec(text)
    assert "is not an NGC TensorFlow release" in info.value.message and info.value.hint == NGC_HINT
    assert info.value.hint_naming(_option) == NGC_HINT_CLI
    with pytest.raises(UsageError) as host_info:
        host.parse_ngc_spec(text)
    assert (host_info.value.message, host_info.value.hint) == (info.value.message, info.value.hint)


@pytest.mark.parametrize("text", ["20.13", "20.00", "nvcr.io/nvidia/tensorflow:20.13-tf2-py3"])
def test_ngc_month_that_does_not_exist(text: str) -> None:
    with pytest.raises(UsageError) as info:
        host.parse_ngc_spec(text)
    assert "which does not exist" in info.value.message and info.value.hint == "months run from 01 to 12"


def test_ngc_spec_text() -> None:
    assert NGCSpec("20.02", None).text == "20.02" and NGCSpec("20.02", "tf2").text == "20.02 (tf2)"


# --- release months --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("release", "index"), [("00.01", 0), ("19.01", 228), ("20.02", 241), ("25.02", 301)])
def test_release_index(release: str, index: int) -> None:
    assert versions.release_index(release) == index == host.release_index(release)


@pytest.mark.parametrize("release", ["20.13", "20.00", "20.2", "20.02x", "20.02\n", "٢٠.٠٢", "", None])
def test_release_index_refuses(release: str | None) -> None:
    with pytest.raises(SpecError, match="is not an NGC release"):
        versions.release_index(release)  # type: ignore[arg-type]
    with pytest.raises(UsageError) as info:
        host.release_index(release)  # type: ignore[arg-type]
    assert info.value.hint == "give YY.MM, e.g. 20.02"


# --- callers that compare versions through it ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "branch", "minimum"),
    [
        ("418.xx", 418, None),
        ("410", 410, None),
        ("384.111+", 384, (384, 111)),
        ("440.30", 440, (440, 30)),
        ("450.51+", 450, (450, 51)),
    ],
)
def test_doctor_driver_branches(text: str, branch: int, minimum: tuple[int, ...] | None) -> None:
    parsed = parse_branch(text)
    assert parsed is not None and (parsed.branch, parsed.minimum) == (branch, minimum)


@pytest.mark.parametrize("text", ["450.", "1..2", "٤١٨.xx", "9" * 5000, "R418", "418.xx.1", ""])
def test_doctor_odd_branches_are_not_branches(text: str) -> None:
    assert parse_branch(text) is None


def test_sync_branches_and_require_cuda_on_odd_input() -> None:
    assert imageconfig.driver_branch("384.111+") == "384" and imageconfig.driver_branch(" 418.xx") == "418"
    assert imageconfig.driver_branch("9" * 5000) is None and imageconfig.driver_branch("٤١٨") is None
    req = imageconfig.parse_require_cuda("cuda>=11.3 brand=tesla,driver>=" + "4" * 5000 + " brand=tesla,driver>=٤١٨")
    assert req.cuda_min == "11.3" and req.branches == () and len(req.unparsed) == 2


@pytest.mark.parametrize(
    ("env", "release"),
    [("20.02-tf2", "20.02"), ("19.01", "19.01"), ("20.13-tf2", None), ("٢٠.٠٢", None), ("2002", None), ("", None)],
)
def test_runtime_reads_the_release_it_can_index(monkeypatch: pytest.MonkeyPatch, env: str, release: str | None) -> None:
    monkeypatch.setenv("NVIDIA_TENSORFLOW_VERSION", env)
    assert runtime.ngc_release() == release
    if release is not None:
        versions.release_index(release)


def test_runtime_refuses_a_bare_major() -> None:
    table = runtime.load_table()
    with pytest.raises(ValueError, match=r"MAJOR\.MINOR"):
        runtime.resolve(table, "2", "stock")
    assert runtime.resolve(table, "2.21.0rc1", "stock")["tf_version"] == "2.21.0rc1"


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("0", True),
        ("4294967295", True),
        ("007", True),
        ("4294967296", False),
        ("9" * 5000, False),
        ("٢", False),
        ("-1", False),
        ("random", False),
        ("", False),
    ],
)
def test_hash_seed_values(value: str, ok: bool) -> None:
    assert seed_ok(value) is ok


# --- properties ------------------------------------------------------------------------------------------

_numbers = st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=5)


@settings(max_examples=examples(400), deadline=None)
@given(st.text(max_size=80) | st.from_regex(r"[0-9.]{1,30}[^\n]{0,5}", fullmatch=True))
def test_parsers_raise_only_spec_error(text: str) -> None:
    parsed = versions.parse_version(text)
    assert parsed is None or (parsed and all(isinstance(p, int) and p >= 0 for p in parsed))
    for parse in (versions.parse_tf_spec, versions.parse_ngc_spec, versions.release_index):
        try:
            parse(text)
        except SpecError as exc:
            assert exc.message and "\n" not in exc.message and exc.hint
    for parse_host in (host.parse_tf_spec, host.parse_ngc_spec, host.release_index):
        try:
            parse_host(text)
        except UsageError as exc:
            assert exc.hint


@given(_numbers, st.sampled_from(["", "+nv23.01", "rc1", "-beta", ".dev0"]))
def test_version_round_trip(parts: list[int], suffix: str) -> None:
    text = versions.version_text(tuple(parts))
    assert versions.parse_version(text) == tuple(parts) == versions.parse_version(text, exact=True)
    assert versions.parse_version(text + suffix) == tuple(parts)


@given(st.text(max_size=40))
def test_version_normalisation_is_idempotent(text: str) -> None:
    parsed = versions.parse_version(text)
    if parsed is not None:
        assert versions.parse_version(versions.version_text(parsed), exact=True) == parsed


@given(st.lists(st.integers(min_value=0, max_value=999_999_999), min_size=1, max_size=3))
def test_tf_spec_round_trip(parts: list[int]) -> None:
    spec = versions.parse_tf_spec(versions.version_text(tuple(parts)))
    assert spec == TFSpec(tuple(parts)) and versions.parse_tf_spec(spec.text) == spec
    assert spec.matches(spec.text + ".7") and spec.matches(spec.text + "+nv20.06")


@given(
    st.integers(min_value=0, max_value=99),
    st.integers(min_value=1, max_value=12),
    st.sampled_from([None, "py2", "py3", "tf1", "tf2"]),
    st.booleans(),
)
def test_ngc_spec_round_trip(yy: int, mm: int, flavor: str | None, full: bool) -> None:
    release = f"{yy:02d}.{mm:02d}"
    suffix = {None: "", "py2": "-py2", "py3": "-py3", "tf1": "-tf1-py3", "tf2": "-tf2-py3"}[flavor]
    text = ("nvcr.io/nvidia/tensorflow:" if full else "") + release + suffix
    assert versions.parse_ngc_spec(text) == NGCSpec(release, flavor)
    assert versions.release_index(release) == yy * 12 + mm - 1
