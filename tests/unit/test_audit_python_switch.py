"""Edge cases of the switch family (py-determinism-switch-missing, py-determinism-switch-unavailable): the switch
however it was imported, a switch named only in a string or comment, the versions each switch exists from,
suppressions, and --fix (the switch inserted once, strings left alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_audit_python_families import findings, fix_twice, rules, seen

TRAINS = "tf.random.set_seed(1)\nm.fit(x)\n"


@pytest.mark.parametrize(
    "enable",
    [
        "from tensorflow.config import experimental as exp\nimport tensorflow as tf\n\nexp.enable_op_determinism()\n",
        "from tensorflow.config.experimental import *\nimport tensorflow as tf\n\nenable_op_determinism()\n",
        "import tensorflow as t\nimport tensorflow as tf\n\nt.config.experimental.enable_op_determinism()\n",
    ],
)
def test_an_aliased_or_star_imported_switch_is_the_switch(tmp_path: Path, enable: str) -> None:
    text = enable + TRAINS
    assert seen(tmp_path, text, "2.8") == set()  # on: nothing missing
    assert seen(tmp_path, text, "2.7") == {(4, "py-determinism-switch-unavailable")}  # and it is known as the call


@pytest.mark.parametrize(
    "words",
    [
        "# tf.config.experimental.enable_op_determinism()\n",
        "s = 'tf.config.experimental.enable_op_determinism()'\n",
        "s = \"os.environ['TF_DETERMINISTIC_OPS'] = '1'\"\n",
        "v = os.environ.get('TF_DETERMINISTIC_OPS')\n",  # read, not set
    ],
)
def test_a_switch_named_in_a_string_or_a_comment_is_not_on(tmp_path: Path, words: str) -> None:
    text = "import os\nimport tensorflow as tf\n" + words + TRAINS
    [f] = findings(tmp_path, text, "2.8")
    assert (f.line, f.rule) == (2, "py-determinism-switch-missing")
    assert f.fix == "add tf.config.experimental.enable_op_determinism() before training (`fix` of audit inserts it)"


@pytest.mark.parametrize(
    ("variable", "before", "first"),
    [
        ("TF_DETERMINISTIC_OPS", "2.0", "2.1"),  # stock builds read it from 2.1
        ("TF_CUDNN_DETERMINISTIC", "1.13", "1.14"),  # read from 1.14 (for cuDNN only once 2.1 has the other)
    ],
)
def test_a_determinism_variable_counts_from_the_version_that_reads_it(
    tmp_path: Path, variable: str, before: str, first: str
) -> None:
    text = f"import os\nos.environ['{variable}'] = '1'\nimport tensorflow as tf\ntf.compat.v1.set_random_seed(1)\n"
    text += "m.fit(x)\n"
    assert (2, "py-determinism-switch-unavailable") in seen(tmp_path, text, before)
    assert seen(tmp_path, text, first) == set()


def test_a_switch_the_image_sets_counts_and_a_false_one_does_not(tmp_path: Path) -> None:
    text = "import tensorflow as tf\n" + TRAINS
    assert seen(tmp_path, text, "2.5", image={"TF_DETERMINISTIC_OPS": "1"}) == set()
    assert seen(tmp_path, text, "2.5", image={"TF_DETERMINISTIC_OPS": "0"}) == {(1, "py-determinism-switch-missing")}


def test_a_script_that_does_not_train_or_is_a_test_is_asked_for_no_switch(tmp_path: Path) -> None:
    assert rules(tmp_path, "import tensorflow as tf\n\nlayer = tf.keras.layers.Dense(1)\n", "2.8") == set()
    text = "import pytest\nimport tensorflow as tf\n" + TRAINS
    assert rules(tmp_path, text, "2.8") == set()


def test_a_suppression_above_the_import_silences_the_missing_switch(tmp_path: Path) -> None:
    text = "import os\n# envpin: ignore=py-determinism-switch-missing\nimport tensorflow as tf\n" + TRAINS
    assert seen(tmp_path, text, "2.8") == set()
    wrong = text.replace("switch-missing", "switch-unavailable")
    assert seen(tmp_path, wrong, "2.8") == {(3, "py-determinism-switch-missing")}


@pytest.mark.parametrize(
    ("tf", "inserted"),
    [
        (
            "2.8",
            "import tensorflow as tf\n# envpin audit --fix: TensorFlow 2.8, recipe stock-2.8-2.15\n"
            "tf.config.experimental.enable_op_determinism()\n",
        ),
        (
            "2.5",
            "# envpin audit --fix: TensorFlow 2.5, recipe stock-2.5-2.7\nimport os\n"
            'os.environ["TF_DETERMINISTIC_OPS"] = "1"\nimport tensorflow as tf\n',
        ),
    ],
)
def test_fix_inserts_the_switch_once_and_leaves_strings_alone(tmp_path: Path, tf: str, inserted: str) -> None:
    text = "import tensorflow as tf\nHELP = 'import tensorflow as tf\\nm.fit(x)'\n" + TRAINS
    once, twice, first = fix_twice(tmp_path, text, tf)
    assert once == text.replace("import tensorflow as tf\n", inserted, 1)
    assert twice == once  # the second --fix finds the switch on
    assert [f.rule for f in first.fixed[0].outcome.fixed] == ["py-determinism-switch-missing"]
    assert not first.findings  # nothing left in the fixed file
