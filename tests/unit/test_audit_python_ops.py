"""Edge cases of the ops family (py-op-raises, py-op-nondeterministic): what a call is however it was imported,
words that are no call, the versions the recipe table gives, suppressions, and --fix (a comment only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.knowledge import recipes
from envpin.knowledge.reciperecords import OpEntry
from tests.unit.test_audit_python_families import findings, fix_twice, seen

SEGMENT = "import tensorflow as tf\n\ny = tf.math.unsorted_segment_sum(a, b, 2)\n"


def _segment_entry() -> OpEntry:
    """The table's raising entry for unsorted_segment_sum that a script on Linux meets (not a build condition)."""
    [entry] = [
        e
        for e in recipes.book().raises
        if "tf.math.unsorted_segment_sum" in e.apis and e.build_condition is None and e.platform in (None, "linux")
    ]
    return entry


@pytest.mark.parametrize(
    "text",
    [
        "import tensorflow.math as tfm\n\ny = tfm.unsorted_segment_sum(a, b, 2)\n",
        "import tensorflow.compat.v1 as tf1\n\ny = tf1.unsorted_segment_sum(a, b, 2)\n",
        "from tensorflow import math as m\n\ny = m.unsorted_segment_sum(a, b, 2)\n",
        "from tensorflow.math import *\n\ny = unsorted_segment_sum(a, b, 2)\n",
        "import tensorflow as tf\nuss = tf.math.unsorted_segment_sum\ny = uss(a, b, 2)\n",
    ],
)
def test_an_aliased_or_star_imported_op_is_the_op(tmp_path: Path, text: str) -> None:
    assert seen(tmp_path, text, "2.5") == {(3, "py-op-raises")}


@pytest.mark.parametrize(
    "text",
    [
        "import tensorflow as tf\n\ns = 'tf.math.unsorted_segment_sum(a, b, 2)'\n",
        "import tensorflow as tf\n\n# y = tf.math.unsorted_segment_sum(a, b, 2)\n",
        'import tensorflow as tf\n\n\ndef f():\n    """tf.math.unsorted_segment_sum(a, b, 2)"""\n',
        "import tensorflow as tf\n\ny = eval('tf.math.unsorted_segment_sum(a, b, 2)')\n",
        "import mylib as tf\n\ny = tf.math.unsorted_segment_sum(a, b, 2)\n",  # not TensorFlow
        "from tensorflow.math import *\n\n\ndef unsorted_segment_sum(a, b, c):\n    return a\n\n\n"
        "y = unsorted_segment_sum(a, b, 2)\n",  # the script's own function, not the star import's
    ],
)
def test_a_name_in_a_string_comment_or_another_module_is_no_call(tmp_path: Path, text: str) -> None:
    assert findings(tmp_path, text, "2.5") == []


def test_the_versions_are_the_tables(tmp_path: Path) -> None:
    entry = _segment_entry()
    assert (entry.tf_min, entry.tf_max) == ("2.5", "2.6")
    assert seen(tmp_path, SEGMENT, "2.4") == {(3, "py-op-nondeterministic")}  # before: silently nondeterministic
    for tf in ("2.5", "2.6"):
        [f] = findings(tmp_path, SEGMENT, tf)
        assert (f.rule, f.severity) == ("py-op-raises", "error") and "; the table lists TF 2.5-2.6, gpu)" in f.message
        assert "TensorFlow 2.7 and later do not raise here" in f.fix
    assert findings(tmp_path, SEGMENT, "2.7") == []  # deterministic from 2.7
    assert findings(tmp_path, SEGMENT) == []  # no version known: nothing to judge by


@pytest.mark.parametrize(("value", "rule"), [("1", "py-op-nondeterministic"), ("0", "py-op-raises")])
def test_the_escape_hatch_turns_the_exception_off_only_when_set_to_its_value(
    tmp_path: Path, value: str, rule: str
) -> None:
    hatch = "TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS"
    text = f"import os\nos.environ['{hatch}'] = '{value}'\n" + SEGMENT
    assert seen(tmp_path, text, "2.5") == {(5, rule)}
    assert seen(tmp_path, SEGMENT, "2.5", image={hatch: value}) == {(3, rule)}  # the image's setting counts too


@pytest.mark.parametrize(
    ("mark", "left"),
    [
        ("y = tf.math.unsorted_segment_sum(a, b, 2)  # envpin: ignore=py-op-raises\n", set()),
        ("# envpin: ignore=py-op-raises\ny = tf.math.unsorted_segment_sum(a, b, 2)\n", set()),
        ("# envpin: ignore=py-op-nondeterministic\ny = tf.math.unsorted_segment_sum(a, b, 2)\n", {(4, "py-op-raises")}),
        (
            "# envpin: ignore=py-op-raise\ny = tf.math.unsorted_segment_sum(a, b, 2)\n",
            {(3, "suppression-unknown"), (4, "py-op-raises")},
        ),
    ],
)
def test_a_suppression_names_the_rule_it_silences(tmp_path: Path, mark: str, left: set[tuple[int, str]]) -> None:
    assert seen(tmp_path, "import tensorflow as tf\n\n" + mark, "2.5") == left


def test_fix_comments_the_statement_once_and_leaves_strings_alone(tmp_path: Path) -> None:
    text = (
        "import tensorflow as tf\n\nNOTE = 'tf.math.unsorted_segment_sum(a, b, 2) raises on 2.5'\n"
        "y = tf.math.unsorted_segment_sum(\n    a, b, 2\n)\n"
    )
    once, twice, first = fix_twice(tmp_path, text, "2.5")
    lines = once.splitlines(keepends=True)
    # the note goes above the statement's first line, with the table's way out; nothing else changes
    assert lines[3].startswith("# envpin audit: py-op-raises: TensorFlow 2.7 and later do not raise here; ")
    assert "escape hatch: TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS=1" in lines[3]
    assert "".join(lines[:3] + lines[4:]) == text
    assert twice == once  # a second --fix adds nothing
    [done] = first.fixed
    assert not done.outcome.fixed and [f.rule for f in done.outcome.commented] == ["py-op-raises"]
