"""envpin.fleet.aggregate.Reducer: reports reduced as they are read (fleet report's path) give the same fleet,
to the byte, as the reports themselves; records keep only what differs from the first report."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from envpin.fleet.aggregate import Compact, NodeFailure, Reducer, aggregate, to_json_text
from envpin.probe import flatten
from envpin.views.fleet import html_page
from tests.fleetdata import H100, HASH_2, cudnn, fixed_fleet, node


def _mixed() -> list[tuple[str, Any]]:
    """Differences of every kind: values, a field absent on some nodes, a first report that is itself the odd
    one out, a CPU-only node (CPU features become result-affecting), failed nodes, a duplicate name."""
    cpu_only = node("cpu-1", gpu__count="0")
    cpu_only["gpu"] = {}
    return [
        ("odd", node("odd", cuda__cudnn=cudnn("9.1.0"), golden=HASH_2)),
        *fixed_fleet().items(),
        ("gone", node("gone", gpu__driver_version=None)),
        ("h", node("h", gpu=H100, cc="9.0")),
        ("cpu-1", cpu_only),
        ("down", NodeFailure("failed", "probe exited 2")),
        ("gpu-a01", node("gpu-a01")),
    ]


@pytest.mark.parametrize("first", [0, 1])
def test_reduced_records_give_the_same_fleet(first: int) -> None:
    pairs = _mixed()
    pairs = pairs[first:] + pairs[:first]
    reducer = Reducer()
    reduced = [(n, item if isinstance(item, NodeFailure) else reducer.add(item)) for n, item in pairs]
    direct, via = aggregate(pairs), aggregate(reduced)
    assert to_json_text(via) == to_json_text(direct)
    assert html_page(via) == html_page(direct)
    assert via.status == direct.status and via.exit_code == direct.exit_code


def test_a_record_keeps_only_what_differs_and_shares_names_and_values() -> None:
    reducer = Reducer()
    first = reducer.add(node("n1"))
    second = reducer.add(node("n2", gpu__driver_version="550.90.07"))
    third = reducer.add(node("n3", gpu__driver_version="550.90.07"))
    assert first.changed == {} and not first.missing
    one, two = flatten(node("n1")), flatten(node("n2", gpu__driver_version="550.90.07"))
    assert set(second.changed) == {k for k in two if one.get(k) != two[k]}
    assert {"host.hostname", "gpu.driver_version"} <= set(second.changed)
    key = next(k for k in third.changed if k == "gpu.driver_version")
    assert key is next(k for k in second.changed if k == "gpu.driver_version")  # one string, shared
    assert third.changed[key] is second.changed[key]
    assert second.get("gpu.driver_version") == "550.90.07" and first.get("gpu.driver_version") != "550.90.07"
    assert sys.getsizeof(second.changed) < 2048


def test_records_of_two_reducers_do_not_mix() -> None:
    a, b = Reducer(), Reducer()
    with pytest.raises(ValueError, match="one Reducer"):
        aggregate([("x", a.add(node("x"))), ("y", b.add(node("y")))])
    assert isinstance(a.add(node("z")), Compact)


def test_the_html_lists_a_field_s_values_whole_and_caps_a_long_tail() -> None:
    """The page names each value with its node count and a minority value's nodes; a field with a value per
    node (30 here) shows the 20 most common, then how many values and nodes are left."""
    from envpin.fleet.aggregate import Spread
    from envpin.views.fleet import _html_values

    values = {"common": tuple(f"n{i:03d}" for i in range(100))}
    values.update({f"v{i:02d}": (f"odd{i:02d}",) for i in range(29)})
    spread = Spread("cuda.cudnn.version", "breaking", "why", values, (), "common")
    shown = _html_values(spread)
    assert shown[0] == ("common", 100, None) and shown[1] == ("v00", 1, "odd00")
    assert len(shown) == 21 and shown[-1] == ("… 10 more values", 10, None)
    many = Spread("k", "risk", "why", {"a": tuple(f"n{i}" for i in range(60)), "b": ("x",) * 70}, (), "b")
    assert _html_values(many)[1][2].endswith(" and 10 more")
