"""envpin.fleet.aggregate: classes, outliers, severities, golden hashes per device class, failed nodes, the
HTML page's escaping, and (property) that arbitrary report-shaped input raises nothing but envpin's errors."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import markupsafe
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envpin.errors import EnvpinError, ReportError
from envpin.fleet import aggregate as fleet
from envpin.fleet.aggregate import FAILED, MISSING, TIMED_OUT, Expected, NodeFailure, aggregate
from envpin.views import fleet as fleet_view
from tests.fleetdata import A100, H100, HASH_1, HASH_2, HASH_3, cudnn, fixed_fleet, node
from tests.props import examples

A100_CLASS = f"gpu:{A100};cc=8.0;count=1"
H100_CLASS = f"gpu:{H100};cc=9.0;count=1"


def _fleet(*reports: dict[str, Any]) -> fleet.FleetResult:
    return aggregate([(r["host"]["hostname"]["value"], r) for r in reports])


def _spread(result: fleet.FleetResult, key: str) -> fleet.Spread:
    (found,) = [s for s in result.spreads if s.key == key]
    return found


def test_identical_nodes_make_one_class_and_exit_0() -> None:
    res = _fleet(node("n1"), node("n2"), node("n3"))
    assert [c.nodes for c in res.classes] == [("n1", "n2", "n3")]
    assert res.classes[0].reference and res.outliers == () and res.spreads == ()
    assert res.exit_code == 0
    assert res.verdict() == "3 nodes consistent except informational differences"
    # Per-node identity is informational: listed by name only.
    assert {"host.hostname", "gpu.devices.0.uuid", "env.NVIDIA_VISIBLE_DEVICES"} <= set(res.informational)


def test_a_breaking_difference_splits_classes_and_names_the_outlier() -> None:
    res = _fleet(node("n1"), node("n2"), node("n3"), node("odd", cuda__cudnn=cudnn("9.0.0")))
    assert [(c.id, c.nodes, c.reference) for c in res.classes] == [(1, ("n1", "n2", "n3"), True), (2, ("odd",), False)]
    assert res.outliers == ("odd",)
    s = _spread(res, "cuda.cudnn.version")
    assert (s.severity, s.common, s.values) == ("breaking", "9.1.0", {"9.0.0": ("odd",), "9.1.0": ("n1", "n2", "n3")})
    assert _spread(res, "cuda.cudnn.path").severity == "risk"
    assert res.exit_code == 1
    assert res.verdict() == "1 breaking difference across 2 classes; 1 outlier"
    assert res.node("odd").class_id == 2 and res.node("n1").class_id == 1


def test_risk_differences_keep_one_class_and_exit_0() -> None:
    res = _fleet(node("n1"), node("n2", gpu__driver_version="550.90.07"))
    assert len(res.classes) == 1 and res.outliers == ()
    assert [(s.key, s.severity) for s in res.spreads] == [("gpu.driver_version", "risk")]
    assert res.exit_code == 0 and "1 risk difference" in res.verdict()


def test_a_field_set_on_some_nodes_only_is_a_difference_with_its_absent_nodes() -> None:
    res = _fleet(node("n1"), node("n2"), node("n3", env__OMP_NUM_THREADS="4"))
    s = _spread(res, "env.OMP_NUM_THREADS")
    assert (s.severity, s.absent, s.common, s.values) == ("breaking", ("n1", "n2"), None, {"4": ("n3",)})
    assert res.outliers == ("n3",)


def test_runtime_settings_present_on_some_nodes_only_are_informational() -> None:
    """envpin diff's rule: tensorflow.runtime.* only exists when the probe imported TensorFlow."""
    res = _fleet(node("n1"), node("n2", tensorflow__runtime={"intra_op_threads": 4}))
    assert "tensorflow.runtime.intra_op_threads" in res.informational and res.exit_code == 0


def test_cpu_features_are_breaking_only_when_a_node_computes_on_its_cpu() -> None:
    gpu = _fleet(node("n1"), node("n2", cpu__isa_level="x86-64-v4"))
    assert _spread(gpu, "cpu.isa_level").severity == "risk"
    cpu_only = {"gpu__count": 0, "gpu__devices.0.name": None, "gpu__devices.0.compute_capability": None}
    cpu = _fleet(node("n1", golden=None, **cpu_only), node("n2", golden=None, cpu__isa_level="x86-64-v4", **cpu_only))
    assert _spread(cpu, "cpu.isa_level").severity == "breaking"
    assert len(cpu.classes) == 2


def test_golden_hashes_are_compared_within_a_device_class() -> None:
    res = _fleet(node("a1"), node("a2"), node("a3", golden=HASH_2), node("h1", gpu=H100, cc="9.0", golden=HASH_3))
    groups = {g.device_class: g for g in res.golden}
    assert set(groups) == {A100_CLASS, H100_CLASS}
    a100 = groups[A100_CLASS]
    assert not a100.consistent and a100.hashes == {HASH_1: ("a1", "a2"), HASH_2: ("a3",)}
    assert groups[H100_CLASS].consistent
    s = _spread(res, "golden." + A100_CLASS)
    assert (s.severity, s.common) == ("breaking", HASH_1)
    # Another device class's hash is no difference: only the A100 class has a golden spread.
    assert [x.key for x in res.spreads if x.golden] == ["golden." + A100_CLASS]
    assert "a3" in res.outliers and "h1" in res.outliers and res.exit_code == 1
    # The golden hash does not split the fingerprint classes (as in the lock, it has its own rule).
    assert ("a1", "a2", "a3") in [c.nodes for c in res.classes]


def test_a_node_without_self_test_is_not_checked() -> None:
    res = _fleet(node("a1"), node("a2", golden=None))
    (group,) = res.golden
    assert group.consistent and group.unchecked == ("a2",)
    assert res.spreads == () and res.exit_code == 0 and len(res.classes) == 1


def test_failed_and_timed_out_nodes_stay_in_the_result() -> None:
    res = aggregate(
        [
            ("n1", node("n1")),
            ("n2", NodeFailure(FAILED, "probe exited 2")),
            ("n3", NodeFailure(TIMED_OUT, "no answer within 600 s")),
        ],
        ["a.json", None, None],
    )
    assert [(n.name, n.status, n.reason) for n in res.nodes] == [
        ("n1", "ok", None),
        ("n2", "failed", "probe exited 2"),
        ("n3", "timed_out", "no answer within 600 s"),
    ]
    assert [c.nodes for c in res.classes] == [("n1",)]
    assert res.exit_code == 1 and res.status == "failed"
    # The one probed node is fine, but the fleet is not: never "consistent".
    assert res.verdict() == (
        "failed: 1 node failed (n2); 1 node timed out (n3); 1 probed node: no breaking or risk difference"
    )
    doc = res.to_json()
    assert doc["nodes"]["n2"] == {
        "status": "failed",
        "reason": "probe exited 2",
        "source": None,
        "class": None,
        "device_class": None,
        "golden": None,
    }
    assert doc["counts"]["failed"] == 1 and doc["counts"]["timed_out"] == 1
    assert doc["nodes"]["n1"]["source"] == "a.json"


def test_only_failures_is_still_a_result() -> None:
    res = aggregate([("n1", NodeFailure(TIMED_OUT, "pending"))])
    assert res.classes == () and res.exit_code == 1
    assert res.verdict() == "failed: 1 node timed out (n1); no node was probed"


def test_a_node_failure_is_failed_or_timed_out() -> None:
    with pytest.raises(ValueError, match="not 'ok'"):
        NodeFailure("ok", "fine")


def test_duplicate_names_become_unique_deterministically() -> None:
    assert fleet.unique_names(["a", "b", "a", "a", "a#2"]) == ["a", "b", "a#3", "a#4", "a#2"]
    assert fleet.unique_names(["", ""]) == ["node", "node#2"]
    res = aggregate([("x", node("x")), ("x", node("x"))])
    assert [n.name for n in res.nodes] == ["x", "x#2"]


def test_node_name_prefers_the_kubernetes_node_then_the_host_name() -> None:
    r = node("gpu-a01")
    r["host"]["hostname"]["value"] = "envpin-probe-x7k2p"
    assert fleet.node_name(r, "file") == "gpu-a01"
    del r["env"]["ENVPIN_NODE_NAME"]
    assert fleet.node_name(r, "file") == "envpin-probe-x7k2p"
    r["host"]["hostname"] = {"error": "OSError", "source": "x"}
    assert fleet.node_name(r, "file") == "file"


def test_largest_class_is_the_reference_and_ties_go_to_the_first_name() -> None:
    res = _fleet(node("b1"), node("b2"), node("a1", cuda__cudnn=cudnn("9.0.0")), node("a2", cuda__cudnn=cudnn("9.0.0")))
    assert [(c.nodes, c.reference) for c in res.classes] == [(("a1", "a2"), True), (("b1", "b2"), False)]
    assert res.outliers == ("b1", "b2")


def test_not_a_report_is_a_report_error() -> None:
    with pytest.raises(ReportError, match="node x: list is not a probe report"):
        aggregate([("x", [])])  # type: ignore[list-item]
    with pytest.raises(ReportError, match="no probe_schema"):
        aggregate([("x", {"host": {}})])


def test_json_is_canonical_and_complete() -> None:
    res = aggregate([(k, v) for k, v in fixed_fleet().items()], [f"{k}.json" for k in fixed_fleet()])
    text = fleet.to_json_text(res)
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"
    doc = json.loads(text)
    assert doc["fleet_schema"] == 1 and set(doc["nodes"]) == set(fixed_fleet())
    assert {d["key"] for d in doc["differences"]} >= {"cuda.cudnn.version", "golden." + A100_CLASS}


HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>&'


class _Tags(HTMLParser):
    """Every tag and attribute of a page, and its style text, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [a for a, _ in attrs]
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data


def test_html_escapes_everything_a_report_holds_and_loads_nothing() -> None:
    evil = node(HOSTILE, env__TF_XLA_FLAGS=HOSTILE)
    res = aggregate([(HOSTILE, evil), ("n2", node("n2")), (HOSTILE + "2", NodeFailure(FAILED, HOSTILE))])
    page = fleet_view.to_html(res)
    assert "<script" not in page and "<img" not in page
    assert str(markupsafe.escape(HOSTILE)) in page
    parsed = _Tags()
    parsed.feed(page)
    # Self-contained and inert: no script, no external asset, no link out, no event handler.
    assert not {"script", "img", "link", "iframe", "object", "embed", "a"} & set(parsed.tags)
    assert not [a for a in parsed.attrs if a in ("src", "href") or a.startswith("on")]
    assert "url(" not in parsed.style and "@import" not in parsed.style
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")


def test_html_marks_cells_that_differ_from_the_common_value() -> None:
    res = _fleet(
        node("n1"), node("n2"), node("n3", gpu__driver_version="550.90.07"), node("n4", cuda__cudnn=cudnn("9.0.0"))
    )
    ctx = fleet_view.html_context(res)
    keys = [c.key for c in ctx["columns"]]
    rows = {r["name"]: dict(zip(keys, r["cells"], strict=True)) for r in ctx["rows"]}
    assert rows["n4"]["cuda.cudnn.version"] == {"text": "9.0.0", "full": "", "mark": "breaking"}
    assert rows["n3"]["gpu.driver_version"]["mark"] == "risk"
    assert rows["n1"]["gpu.driver_version"]["mark"] == "" and rows["n1"]["cuda.cudnn.version"]["mark"] == ""
    assert [r["name"] for r in ctx["rows"]][-1] == "n4"  # reference class first


def test_html_truncates_long_values_and_keeps_them_in_the_title() -> None:
    long = "x" * 100
    res = _fleet(node("n1"), node("n2"), node("n3", env__XLA_FLAGS=long))
    ctx = fleet_view.html_context(res)
    (row,) = [r for r in ctx["rows"] if r["name"] == "n3"]
    cell = row["cells"][[c.key for c in ctx["columns"]].index("env.XLA_FLAGS")]
    assert cell["full"] == long and len(cell["text"]) == fleet_view.CELL_LIMIT and cell["text"].endswith("…")
    assert f'title="{long}"' in fleet_view.to_html(res)


def test_undecodable_bytes_in_a_report_do_not_break_the_outputs() -> None:
    """The probe records undecodable environment bytes as lone surrogates (its JSON carries them as \\u)."""
    res = _fleet(node("n1"), node("n2", env__TF_XLA_FLAGS="bad\udcff"))
    assert "\\udcff" in fleet.to_json_text(res)
    assert b"\\udcff" in fleet_view.html_page(res)


# --- property: arbitrary report-shaped input --------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=()), max_size=8)  # lone surrogates included
_scalars = st.none() | st.booleans() | st.integers() | st.floats() | _text
_json = st.recursive(
    _scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=8
)
_field = st.one_of(
    st.fixed_dictionaries({"value": _json}, optional={"source": st.text(max_size=4)}),
    st.fixed_dictionaries({"error": _json}),
    st.fixed_dictionaries({"unavailable": _json}),
    st.fixed_dictionaries({"redacted": st.booleans()}),
    _json,
)
_names = st.sampled_from(
    [
        "hostname",
        "count",
        "devices.0.name",
        "devices.0.compute_capability",
        "isa_level",
        "OMP_NUM_THREADS",
        "TF_ENABLE_ONEDNN_OPTS",
        "ENVPIN_NODE_NAME",
        "version",
        "x",
    ]
)
_section = st.dictionaries(_names | _text, _field, max_size=4)
_selftest = _json | st.fixed_dictionaries(
    {"golden": st.fixed_dictionaries({"hash": _text | _json, "device_class": _text | _json})}
)
_report = st.fixed_dictionaries(
    {"probe_schema": st.integers(-1, 2) | _json},
    optional={s: _section | _json for s in ("host", "cpu", "gpu", "env", "tensorflow", "packages", "cuda")}
    | {"selftest": _selftest},
)
_item = _report | _json | st.builds(NodeFailure, st.sampled_from([FAILED, TIMED_OUT]), st.text(max_size=8))


_expected = (
    st.none()
    | st.integers(1, 6).map(Expected)
    | st.lists(st.sampled_from(["n1", "n2", "n3", "n1.x", "gpu"]), min_size=1, max_size=4, unique=True).map(
        Expected.nodes
    )
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_text, _item), max_size=5), _expected)
def test_aggregate_raises_nothing_but_envpin_errors(nodes: list[tuple[str, Any]], expected: Expected | None) -> None:
    try:
        res = aggregate(nodes, expected=expected)
    except EnvpinError:
        return
    assert len(res.nodes) >= len(nodes)
    json.loads(fleet.to_json_text(res))
    fleet_view.html_page(res)
    assert res.exit_code in (0, 1)
    # Never "consistent" unless every node is probed, none missing or unexpected, and nothing breaking differs.
    c = res.counts()
    complete = c["ok"] == c["nodes"] > 0 and not c["unexpected"]
    assert (res.status == "consistent") == (complete and not c["breaking"]) == (res.exit_code == 0)
    assert ("consistent" in res.verdict()) == (res.status == "consistent")
    assert res.verdict().startswith("failed: ") == (res.status == "failed")


def test_no_node_at_all_is_not_a_success() -> None:
    res = aggregate([])
    assert res.verdict() == "failed: no node was probed" and res.exit_code == 1 and res.status == "failed"


# --- the fleet the user expects -----------------------------------------------------------------------------


def test_a_breaking_difference_with_a_failed_node_leads_with_the_failure() -> None:
    res = aggregate(
        [
            ("n1", node("n1")),
            ("n2", node("n2", cuda__cudnn=cudnn("9.0.0"))),
            ("n3", NodeFailure(FAILED, "probe exited 2")),
        ]
    )
    assert res.verdict() == "failed: 1 node failed (n3); 1 breaking difference across 2 classes; 1 outlier"
    assert res.status == "failed"


def test_a_count_makes_nodes_without_any_file_missing() -> None:
    res = aggregate([("n1", node("n1")), ("n2", node("n2"))], expected=Expected(3))
    assert (res.status, res.exit_code, res.unnamed_missing) == ("failed", 1, 1)
    assert res.counts()["missing"] == 1 and res.counts()["nodes"] == 3 and res.found() == 2
    assert (
        res.verdict() == "failed: 1 node missing (2 of 3 expected nodes found); "
        "2 probed nodes: no breaking or risk difference"
    )
    assert res.to_json()["expected"] == {"count": 3, "source": None, "unexpected": []}


def test_a_count_met_exactly_changes_nothing() -> None:
    plain = aggregate([("n1", node("n1")), ("n2", node("n2"))])
    res = aggregate([("n1", node("n1")), ("n2", node("n2"))], expected=Expected(2))
    assert res.status == "consistent" and res.exit_code == 0 and res.verdict() == plain.verdict()
    assert res.counts() == plain.counts()


def test_more_nodes_than_the_count_is_a_failure_too() -> None:
    """A stale or duplicate report, or a wrong count: either way the inputs are not the fleet expected."""
    res = aggregate([("n1", node("n1")), ("n1", node("n1"))], expected=Expected(1))
    assert res.surplus == 1 and res.counts()["unexpected"] == 1 and res.exit_code == 1
    assert res.verdict().startswith("failed: 1 node more than expected (2 found, 1 expected); ")


def test_named_nodes_that_left_nothing_are_missing_by_name() -> None:
    res = aggregate(
        [("n1", node("n1")), ("n2", NodeFailure(TIMED_OUT, "pending"))],
        expected=Expected.nodes(["n1", "n2", "n3", "n4"], "nodes.txt"),
    )
    assert [(n.name, n.status) for n in res.nodes] == [
        ("n1", "ok"),
        ("n2", "timed_out"),
        ("n3", MISSING),
        ("n4", MISSING),
    ]
    assert res.node("n3").reason == (
        "nothing was found for this node: no report, error file or probe pod (listed in nodes.txt)"
    )
    assert res.counts()["missing"] == 2 and res.counts()["nodes"] == 4
    assert res.verdict() == (
        "failed: 1 node timed out (n2); 2 nodes missing (n3, n4); 1 probed node: no breaking or risk difference"
    )
    assert res.to_json()["nodes"]["n3"]["status"] == "missing"
    page = fleet_view.to_html(res)
    assert "missing: <b>2</b>" in page and ">n4<" in page


def test_a_node_nobody_listed_is_unexpected() -> None:
    res = aggregate([("n1", node("n1")), ("old", node("old"))], expected=Expected.nodes(["n1"], "nodes.txt"))
    assert res.unexpected == ("old",) and res.exit_code == 1
    assert res.verdict().startswith("failed: 1 node not in nodes.txt (old); ")
    assert res.to_json()["expected"] == {"count": 1, "source": "nodes.txt", "unexpected": ["old"]}


def test_listed_names_match_short_host_names() -> None:
    """Slurm lists gpu01 where the report's host name reads gpu01.cluster.local, and the other way round."""
    assert fleet.match_expected(["gpu01", "gpu02.x.org", "gpu03"], ["gpu01.cluster.local", "gpu02", "gpu03"]) == (
        [],
        [],
    )
    # Ambiguous short names match nothing rather than the wrong node.
    assert fleet.match_expected(["gpu01"], ["gpu01.a", "gpu01.b"]) == (["gpu01"], ["gpu01.a", "gpu01.b"])
    # An exact name wins over a short one.
    assert fleet.match_expected(["gpu01", "gpu01.a"], ["gpu01.a", "gpu01"]) == ([], [])


def test_expected_refuses_a_fleet_of_no_node_or_repeated_names() -> None:
    with pytest.raises(ValueError, match="at least one node"):
        Expected(0)
    with pytest.raises(ValueError, match="distinct"):
        Expected.nodes(["a", "a"])
