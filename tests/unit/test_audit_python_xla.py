"""Edge cases of the xla family (py-keras3-auto-xla, py-jit-compile): layers however they were imported,
jit_compile in strings and comments, the versions the recipe table gives (Keras 3's automatic XLA raises on
TF 2.16-2.19; MaxPool's XLA gradient raises from 2.8), suppressions, and --fix (jit_compile=False added once,
strings left alone, a compile(jit_compile=True) that makes an op raise turned off)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.knowledge import recipes
from envpin.knowledge.reciperecords import OpEntry
from tests.unit.test_audit_python_families import findings, fix_twice, seen

SEEDED = (
    "import tensorflow as tf\n\ntf.keras.utils.set_random_seed(1)\ntf.config.experimental.enable_op_determinism()\n"
)


def _xla_entry(keras: bool) -> OpEntry:
    """The table's XLA entry for MaxPool's gradient: Keras 3's own compilation, or any XLA compilation."""
    [entry] = [e for e in recipes.book().raises if e.xla and bool(e.keras_min) is keras and "MaxPool" in e.op]
    return entry


@pytest.mark.parametrize(
    "model",
    [
        "from tensorflow.keras import layers as L\nm = tf.keras.Sequential([L.MaxPooling2D()])\n",
        "from keras.layers import MaxPool2D\nm = tf.keras.Sequential([MaxPool2D()])\n",
        "from tensorflow.keras.layers import *\nm = tf.keras.Sequential([MaxPooling1D()])\n",
        "import keras\nm = keras.Sequential([keras.layers.MaxPooling3D()])\n",
    ],
)
def test_a_maxpooling_layer_however_imported_makes_keras_3_compile_raise(tmp_path: Path, model: str) -> None:
    text = SEEDED + model + "m.compile(optimizer='adam', loss='mse')\nm.fit(x)\n"
    assert (7, "py-keras3-auto-xla") in seen(tmp_path, text, "2.16")


def test_keras_3_automatic_xla_only_on_the_versions_the_table_gives(tmp_path: Path) -> None:
    entry = _xla_entry(keras=True)
    assert (entry.tf_min, entry.tf_max, entry.keras_min, entry.keras_max) == ("2.16", "2.19", "3.0", "3.6")
    text = (
        SEEDED + "m = tf.keras.Sequential([tf.keras.layers.MaxPooling2D()])\nm.compile(optimizer='adam', loss='mse')\n"
    )
    text += "m.fit(x)\n"
    fired = {tf: (6, "py-keras3-auto-xla") in seen(tmp_path, text, tf) for tf in ("2.15", "2.16", "2.19", "2.20")}
    assert fired == {"2.15": False, "2.16": True, "2.19": True, "2.20": False}
    legacy = "import os\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\n" + text  # tf_keras: Keras 2
    assert not {r for _, r in seen(tmp_path, legacy, "2.16")} & {"py-keras3-auto-xla"}
    assert seen(tmp_path, text.replace("loss='mse')", "loss='mse', jit_compile=False)"), "2.16") == set()


def test_jit_compile_with_maxpool_raises_from_the_version_the_table_gives(tmp_path: Path) -> None:
    assert _xla_entry(keras=False).tf_min == "2.8"
    text = (
        "import tensorflow as tf\n\nm = tf.keras.Sequential([tf.keras.layers.MaxPooling2D()])\n\n\n"
        "@tf.function(jit_compile=True)\ndef step(x):\n    return m(x)\n"
    )
    [before] = findings(tmp_path, text, "2.7")
    assert (before.line, before.rule, before.severity) == (6, "py-jit-compile", "warning")
    assert "whose kernels the determinism switch does not fully cover" in before.message
    [at] = findings(tmp_path, text, "2.8")
    assert (at.line, at.severity) == (6, "error") and "keras.layers.MaxPooling2D (line 3) then raises" in at.message


@pytest.mark.parametrize(
    ("flags", "fires"),
    [
        ("--tf_xla_auto_jit=2", True),
        ("--tf_xla_auto_jit=1 --foo", True),
        ("--tf_xla_auto_jit=0", False),
        ("--tf_xla_auto_jit=-1", False),
    ],
)
def test_auto_clustering_in_tf_xla_flags(tmp_path: Path, flags: str, fires: bool) -> None:
    assert bool(seen(tmp_path, f"import os\nos.environ['TF_XLA_FLAGS'] = '{flags}'\n", "2.8")) is fires


@pytest.mark.parametrize(
    "words",
    [
        "s = 'model.compile(jit_compile=True)'\n",
        "# @tf.function(jit_compile=True)\n",
        "step = tf.function(f, jit_compile=False)\n",
        "tf.config.optimizer.set_jit(False)\n",
    ],
)
def test_no_xla_in_strings_comments_or_when_turned_off(tmp_path: Path, words: str) -> None:
    assert findings(tmp_path, "import tensorflow as tf\n" + words, "2.8") == []


def test_a_suppression_silences_the_rule_it_names(tmp_path: Path) -> None:
    text = "import tensorflow as tf\n\n# envpin: ignore=py-jit-compile\n@tf.function(jit_compile=True)\ndef f(x):\n"
    text += "    return x\n"
    assert seen(tmp_path, text, "2.8") == set()
    assert seen(tmp_path, text.replace("py-jit-compile", "py-keras3-auto-xla"), "2.8") == {(4, "py-jit-compile")}


@pytest.mark.parametrize(
    ("call", "fixed"),
    [
        ("m.compile(optimizer='adam', loss='mse')", "m.compile(optimizer='adam', loss='mse', jit_compile=False)"),
        ("m.compile(optimizer='adam', jit_compile='auto')", "m.compile(optimizer='adam', jit_compile=False)"),
        ("m.compile('adam', 'mse')", "m.compile('adam', 'mse', jit_compile=False)"),
    ],
)
def test_fix_turns_keras_3_xla_off_once_and_leaves_strings_alone(tmp_path: Path, call: str, fixed: str) -> None:
    text = (
        SEEDED
        + "m = tf.keras.Sequential([tf.keras.layers.MaxPooling2D()])\nNOTE = 'm.compile(optimizer=\"adam\") uses XLA'\n"
    )
    text += call + "\nm.fit(x)\n"
    once, twice, first = fix_twice(tmp_path, text, "2.16")
    assert once == text.replace(call + "\n", fixed + "\n") and twice == once
    assert [f.rule for f in first.fixed[0].outcome.fixed] == ["py-keras3-auto-xla"] and not first.findings


def test_fix_counts_the_jit_compile_true_it_turned_off_as_fixed(tmp_path: Path) -> None:
    text = SEEDED + "m = tf.keras.Sequential([tf.keras.layers.MaxPooling2D()])\n"
    text += "m.compile(optimizer='adam', loss='mse', jit_compile=True)\nm.fit(x)\n"
    once, twice, first = fix_twice(tmp_path, text, "2.16")
    done = first.fixed[0].outcome
    assert once == text.replace("jit_compile=True", "jit_compile=False") and twice == once
    # the script's own jit_compile=True is one hazard, reported by py-jit-compile alone, whose fix turns it off
    assert [f.rule for f in done.fixed] == ["py-jit-compile"] and not done.commented
