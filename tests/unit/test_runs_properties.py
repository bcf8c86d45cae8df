"""Property tests of the metrics contract's parser: any stdout is read without an exception, and a metrics
line printed last is always found, whatever came before it."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.runs.launch import metrics_line
from tests.props import examples

NAMES = st.text(min_size=1, max_size=12)
VALUES = st.one_of(st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=2000))
def test_any_output_is_read_without_an_exception(text: str) -> None:
    found = metrics_line(text)
    assert all(isinstance(k, str) and isinstance(v, float) for k, v in found.items())


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=500), st.dictionaries(NAMES, VALUES, max_size=5))
def test_a_last_metrics_line_is_always_found(before: str, metrics: dict[str, float]) -> None:
    out = before + "\n" + json.dumps({"envpin_metrics": metrics}) + "\n"
    found = metrics_line(out)
    assert set(found) == set(metrics)
    assert all(math.isclose(found[k], float(v)) for k, v in metrics.items())


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(min_value=10**308, max_value=10**1000), st.sampled_from([1, -1]))
def test_an_integer_too_large_for_a_float_is_infinite_not_an_error(big: int, sign: int) -> None:
    found = metrics_line(json.dumps({"envpin_metrics": {"a": sign * big, "b": 0.5}}))
    assert found["b"] == 0.5 and math.copysign(1.0, found["a"]) == sign and abs(found["a"]) >= 1e308
    assert math.isinf(found["a"]) or found["a"] == sign * float(big)
