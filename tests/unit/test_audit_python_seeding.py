"""Edge cases of the seeding family (py-no-global-seed, py-unseeded-random, py-seed-from-clock,
py-pythonhashseed-runtime): seeding calls however they were imported, a seed named only in a string or comment,
the versions the recipe table gives (unseeded random layers raise from TF 2.7), suppressions, and --fix (the
seeding inserted once, strings left alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.knowledge import recipes
from tests.unit.test_audit_python_families import findings, fix_twice, seen

SWITCHED = "import tensorflow as tf\ntf.config.experimental.enable_op_determinism()\n"


@pytest.mark.parametrize(
    "seeding",
    [
        "from tensorflow.keras.utils import set_random_seed as srs\nsrs(1)\n",
        "from tensorflow import random as tfr\ntfr.set_seed(1)\n",
        "import keras\nkeras.utils.set_random_seed(1)\n",
        "from envpin import enable_determinism\nenable_determinism()\n",  # seeds too
    ],
)
def test_an_aliased_seeding_call_is_a_global_seed(tmp_path: Path, seeding: str) -> None:
    assert seen(tmp_path, SWITCHED + seeding + "m.fit(x)\n", "2.8") == set()


def test_keras_seeding_seeds_python_and_numpy_too_but_tf_seeding_does_not(tmp_path: Path) -> None:
    draws = "import numpy as onp\nonp.random.shuffle(x)\nm.fit(x)\n"
    assert seen(tmp_path, SWITCHED + "tf.keras.utils.set_random_seed(1)\n" + draws, "2.8") == set()
    assert seen(tmp_path, SWITCHED + "tf.random.set_seed(1)\n" + draws, "2.8") == {(5, "py-unseeded-random")}


def test_a_name_star_imported_from_two_modules_is_the_last_ones(tmp_path: Path) -> None:
    """`shuffle` after `from random import *` then `from numpy.random import *` is NumPy's: Python binds it from
    the last star import."""
    text = "from random import *\nfrom numpy.random import *\n" + SWITCHED + "tf.random.set_seed(1)\nshuffle(x)\n"
    [f] = findings(tmp_path, text + "m.fit(x)\n", "2.8")
    assert (f.line, f.rule) == (6, "py-unseeded-random") and f.message.startswith("np.random.shuffle() draws")


@pytest.mark.parametrize(
    "words",
    ["# tf.random.set_seed(1)\n", "s = 'tf.random.set_seed(1)'\n", "doc = f'{tf.random.set_seed}'\n"],
)
def test_a_seed_in_a_string_or_a_comment_is_no_seed(tmp_path: Path, words: str) -> None:
    assert seen(tmp_path, SWITCHED + words + "m.fit(x)\n", "2.8") == {(1, "py-no-global-seed")}


def test_unseeded_keras_2_layers_raise_from_the_version_the_table_gives(tmp_path: Path) -> None:
    [entry] = [e for e in recipes.book().raises if e.context == "no_global_seed" and "keras.layers.Dropout" in e.apis]
    assert entry.tf_min == "2.7"
    text = (
        "import os\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\nimport tensorflow as tf\n"
        "m = tf.keras.Sequential([tf.keras.layers.Dropout(0.5)])\nm.fit(x)\n"
    )
    before = [f for f in findings(tmp_path, text, "2.6") if f.rule == "py-no-global-seed"]
    assert [(f.line, f.severity) for f in before] == [(3, "warning")] and "raises" not in before[0].message
    [at] = [f for f in findings(tmp_path, text, "2.7") if f.rule == "py-no-global-seed"]
    assert at.severity == "error" and "unseeded Dropout raises (RuntimeError): line 4" in at.message


@pytest.mark.parametrize(
    ("seeding", "line"),
    [
        ("import time\nn = int(time.time())\ns = n % 7\ntf.random.set_seed(s)\n", 6),  # through two names
        ("import os\ntf.random.set_seed(int.from_bytes(os.urandom(4), 'little'))\n", 4),
        ("import numpy as np\nrng = np.random.default_rng(seed=os.getpid())\n", 4),
        ("import random\nrandom.seed()\n", 4),  # no seed: one from the OS
    ],
)
def test_a_seed_from_the_clock_or_the_os_is_no_seed(tmp_path: Path, seeding: str, line: int) -> None:
    assert (line, "py-seed-from-clock") in seen(tmp_path, SWITCHED + seeding, "2.8")


@pytest.mark.parametrize(
    "setting",
    [
        "os.environ['PYTHONHASHSEED'] = '0'\n",
        "os.environ.setdefault('PYTHONHASHSEED', '0')\n",
        "os.putenv('PYTHONHASHSEED', '0')\n",
        "os.environ.update({'PYTHONHASHSEED': '0'})\n",
        "get_ipython().run_line_magic('env', 'PYTHONHASHSEED=0')\n",
    ],
)
def test_pythonhashseed_set_at_run_time_however_it_is_set(tmp_path: Path, setting: str) -> None:
    assert seen(tmp_path, "import os\n" + setting + "v = os.environ.get('PYTHONHASHSEED')\n") == {
        (2, "py-pythonhashseed-runtime")
    }


def test_a_suppression_silences_one_seed_rule_on_its_line(tmp_path: Path) -> None:
    text = SWITCHED + "import random\ntf.random.set_seed(1)\nrandom.seed()  # envpin: ignore=py-seed-from-clock\n"
    assert seen(tmp_path, text, "2.8") == set()
    other = text.replace("ignore=py-seed-from-clock", "ignore=py-unseeded-random")
    assert seen(tmp_path, other, "2.8") == {(5, "py-seed-from-clock")}


@pytest.mark.parametrize(
    ("tf", "seeding"),
    [
        ("2.8", "tf.keras.utils.set_random_seed(0)\n"),  # the recipe's step from 2.7 seeds all three
        ("2.6", "import random\nimport numpy\nrandom.seed(0)\nnumpy.random.seed(0)\ntf.random.set_seed(0)\n"),
    ],
)
def test_fix_seeds_once_fixes_the_global_draws_and_leaves_strings_alone(tmp_path: Path, tf: str, seeding: str) -> None:
    text = (
        "import os\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\nimport random\nimport tensorflow as tf\n"
        "HELP = 'random.seed(0) before import tensorflow as tf'\nrandom.shuffle(files)\nm.fit(x)\n"
    )
    once, twice, first = fix_twice(tmp_path, text, tf)
    head = f"# envpin audit --fix: TensorFlow {tf}, recipe {'stock-2.8-2.15' if tf == '2.8' else 'stock-2.5-2.7'}\n"
    assert once == text.replace("import tensorflow as tf\n", "import tensorflow as tf\n" + head + seeding)
    assert twice == once
    done = first.fixed[0].outcome
    assert sorted(f.rule for f in done.fixed) == ["py-no-global-seed", "py-unseeded-random"] and not done.commented
    assert done.actions == ["inserted the global seeding (seed 0)"]


def test_fix_does_not_count_a_draw_above_the_inserted_seeding_as_fixed(tmp_path: Path) -> None:
    """The seeding goes after the TensorFlow import: a draw on a line above it still draws unseeded."""
    text = "import random\nrandom.shuffle(files)\nimport tensorflow as tf\nm.fit(x)\n"
    _, _, first = fix_twice(tmp_path, text, "2.8")
    done = first.fixed[0].outcome
    assert [f.rule for f in done.commented] == ["py-unseeded-random"]
    assert "py-no-global-seed" in {f.rule for f in done.fixed}
