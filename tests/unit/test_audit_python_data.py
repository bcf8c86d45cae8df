"""Edge cases of the data family (py-data-nondeterministic, py-data-random-map, py-fit-multiprocessing): the
pipeline however tf.data was imported, the words in strings and comments, the version from which the recipe
table says determinism overrides the request (TF 2.7), suppressions, and --fix (deterministic=False removed
once, with its comma, and nowhere else)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.knowledge import recipes
from tests.unit.test_audit_python_families import findings, fix_twice, seen

ON = "import os\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\nimport tensorflow as tf\n"
AUGMENT = "def aug(x):\n    return tf.image.random_flip_left_right(x)\n\n\n"


@pytest.mark.parametrize(
    "pipeline",
    [
        "from tensorflow import data as tfd\nds = tfd.Dataset.range(3).map(f, deterministic=False)\n",
        "ds = tf.data.Dataset.range(3).interleave(f, cycle_length=2, deterministic=False)\n",
        "from tensorflow.data.experimental import parallel_interleave as pi\nds = ds.apply(pi(f, 2, sloppy=True))\n",
        "opts = tf.data.Options()\nopts.experimental_deterministic = False\n",
    ],
)
def test_nondeterministic_order_however_it_is_asked_for(tmp_path: Path, pipeline: str) -> None:
    text = "import tensorflow as tf\n" + pipeline
    [f] = findings(tmp_path, text, "2.6")
    assert (f.line, f.rule, f.severity) == (text.count("\n"), "py-data-nondeterministic", "warning")  # the last line


@pytest.mark.parametrize(
    "words",
    [
        "s = 'ds.map(f, deterministic=False)'\n",
        "# ds = ds.map(f, num_parallel_calls=4, deterministic=False)\n",
        "ds = ds.map(f, num_parallel_calls=4, deterministic=True)\n",
        "ds = ds.map(f, num_parallel_calls=4, deterministic=None)\n",  # the default: the options decide
    ],
)
def test_no_request_in_strings_comments_or_other_values(tmp_path: Path, words: str) -> None:
    assert findings(tmp_path, "import tensorflow as tf\n" + words, "2.6") == []


def test_from_the_version_the_table_gives_determinism_overrides_the_request(tmp_path: Path) -> None:
    overrides = {o.id: o.tf_min for o in recipes.book().overridden}
    assert overrides["tf-data-deterministic-false"] == overrides["tf-data-stateful-map-serial"] == "2.7"
    text = ON + AUGMENT + "ds = ds.map(aug, num_parallel_calls=4, deterministic=False)\n"
    assert {(f.rule, f.severity) for f in findings(tmp_path, text, "2.6")} == {
        ("py-data-nondeterministic", "warning"),
        ("py-data-random-map", "warning"),
    }
    after = {f.rule: f for f in findings(tmp_path, text, "2.7") if f.rule.startswith("py-data")}
    assert {r: f.severity for r, f in after.items()} == {
        "py-data-nondeterministic": "info",
        "py-data-random-map": "info",
    }
    assert "with determinism on, op determinism overrides it to True" in after["py-data-nondeterministic"].message
    off = {f.rule: f for f in findings(tmp_path, text.replace("'1'", "'0'"), "2.7") if f.rule.startswith("py-data")}
    assert {f.severity for f in off.values()} == {"warning"}  # 2.7, but determinism is not on
    assert "is not switched on" in off["py-data-nondeterministic"].message


@pytest.mark.parametrize(
    ("call", "fires"),
    [
        ("ds.map(aug, num_parallel_calls=4)", True),
        ("ds.map(aug, tf.data.AUTOTUNE)", True),  # positional num_parallel_calls
        ("ds.map(aug, num_parallel_calls=1)", False),
        ("ds.map(aug)", False),
        ("ds.map(lambda x: tf.image.stateless_random_flip_left_right(x, seed=(1, 2)), num_parallel_calls=4)", False),
        ("ds.map(lambda x: tf.random.uniform([1], seed=3), num_parallel_calls=4)", False),  # an op given a seed
        ("ds.map(lambda x: tf.random.uniform([1]), num_parallel_calls=4)", True),
    ],
)
def test_a_random_map_needs_parallel_calls_and_an_unseeded_stateful_op(tmp_path: Path, call: str, fires: bool) -> None:
    text = "import tensorflow as tf\n" + AUGMENT + f"ds = {call}\n"
    assert ((6, "py-data-random-map") in seen(tmp_path, text, "2.6")) is fires


@pytest.mark.parametrize(
    ("call", "fires"),
    [
        ("m.fit(x, workers=4, use_multiprocessing=True)", True),
        ("m.predict(x, workers=2, use_multiprocessing=True)", True),
        ("m.fit(x, workers=1, use_multiprocessing=True)", False),
        ("m.fit(x, workers=4)", False),
        ("m.fit(x, workers=4, use_multiprocessing=False)", False),
    ],
)
def test_worker_processes_fill_batches_out_of_order(tmp_path: Path, call: str, fires: bool) -> None:
    assert ((2, "py-fit-multiprocessing") in seen(tmp_path, f"import tensorflow as tf\n{call}\n")) is fires


def test_a_suppression_on_the_line_silences_that_rule_only(tmp_path: Path) -> None:
    text = (
        ON
        + AUGMENT
        + "ds = ds.map(aug, num_parallel_calls=4, deterministic=False)  # envpin: ignore=py-data-random-map\n"
    )
    assert {r for _, r in seen(tmp_path, text, "2.6")} == {"py-data-nondeterministic"}


@pytest.mark.parametrize(
    ("line", "fixed"),
    [
        ("ds = ds.map(f, num_parallel_calls=4, deterministic=False)\n", "ds = ds.map(f, num_parallel_calls=4)\n"),
        ("ds = ds.map(f, deterministic=False, num_parallel_calls=4)\n", "ds = ds.map(f, num_parallel_calls=4)\n"),
        (
            "ds = ds.map(f, num_parallel_calls=4, deterministic=False)  # not 'deterministic=False' here\n",
            "ds = ds.map(f, num_parallel_calls=4)  # not 'deterministic=False' here\n",
        ),
        (
            "ds = ds.map(g('deterministic=False'), deterministic=False)\n",
            "ds = ds.map(g('deterministic=False'))\n",
        ),
    ],
)
def test_fix_removes_the_keyword_with_its_comma_and_nothing_in_strings(tmp_path: Path, line: str, fixed: str) -> None:
    text = "import tensorflow as tf\nNOTE = 'map(f, deterministic=False) is slower'\n" + line
    once, twice, first = fix_twice(tmp_path, text, "2.6")
    assert once == text.replace(line, fixed) and twice == once
    assert first.fixed[0].outcome.actions == ["line 3: removed deterministic=False"]


def test_fix_comments_a_request_it_cannot_remove_on_one_line(tmp_path: Path) -> None:
    text = "import tensorflow as tf\nds = ds.map(\n    f,\n    deterministic=(\n        False\n    ),\n)\n"
    once, twice, first = fix_twice(tmp_path, text, "2.6")
    assert once == text.replace(
        "ds = ds.map(",
        "# envpin audit: py-data-nondeterministic: remove deterministic=False (`fix` of audit removes it)\n"
        "ds = ds.map(",
    )
    assert twice == once and [f.rule for f in first.fixed[0].outcome.commented] == ["py-data-nondeterministic"]
