"""Edge cases of the environment family (py-env-must-not-be-set, py-env-no-effect): the variable set however
os.environ was imported, reads and strings that set nothing, no version boundary (the recipe table's common
section holds for every TensorFlow), suppressions, and --fix (a comment above the line, once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.knowledge import recipes
from tests.unit.test_audit_python_families import findings, fix_twice, seen


def test_the_names_are_the_tables() -> None:
    book = recipes.book()
    assert [u.name for u in book.unset] == ["TF_CUDNN_USE_AUTOTUNE"]
    assert [u.name for u in book.no_effect] == ["TF_USE_CUDNN_AUTOTUNE"]


@pytest.mark.parametrize(
    "setting",
    [
        "from os import environ\nenviron['TF_CUDNN_USE_AUTOTUNE'] = '0'\n",
        "import os as o\no.environ.update(TF_CUDNN_USE_AUTOTUNE='0')\n",
        "import os\nos.environ.update({'TF_CUDNN_USE_AUTOTUNE': '0'})\n",
        "import os\nos.putenv('TF_CUDNN_USE_AUTOTUNE', '0')\n",
        "import os\nos.environ.setdefault('TF_CUDNN_USE_AUTOTUNE', '0')\n",
        "get_ipython().run_line_magic('set_env', 'TF_CUDNN_USE_AUTOTUNE 0')\n",  # a notebook's %set_env
    ],
)
def test_a_variable_set_however_os_environ_was_imported(tmp_path: Path, setting: str) -> None:
    line = setting.count("\n")
    assert seen(tmp_path, setting, "2.8") == {(line, "py-env-must-not-be-set")}


@pytest.mark.parametrize(
    "words",
    [
        "import os\nv = os.environ.get('TF_CUDNN_USE_AUTOTUNE')\n",
        "import os\ndel os.environ['TF_CUDNN_USE_AUTOTUNE']\n",
        "import os\nos.environ.pop('TF_USE_CUDNN_AUTOTUNE', None)\n",
        "s = \"os.environ['TF_CUDNN_USE_AUTOTUNE'] = '0'\"\n",
        "# os.environ['TF_USE_CUDNN_AUTOTUNE'] = '0'\n",
        "env = {}\nenv['TF_CUDNN_USE_AUTOTUNE'] = '0'\n",  # a dict of its own, not the environment
    ],
)
def test_reading_removing_or_naming_the_variable_sets_nothing(tmp_path: Path, words: str) -> None:
    assert findings(tmp_path, words, "2.8") == []


@pytest.mark.parametrize("tf", ["1.15", "2.8", "2.16", None])
def test_every_version_and_none_alike(tmp_path: Path, tf: str | None) -> None:
    text = "import os\nos.environ['TF_CUDNN_USE_AUTOTUNE'] = '0'\nos.environ['TF_USE_CUDNN_AUTOTUNE'] = '0'\n"
    assert seen(tmp_path, text, tf) == {(2, "py-env-must-not-be-set"), (3, "py-env-no-effect")}


def test_a_suppression_silences_the_rule_it_names(tmp_path: Path) -> None:
    text = "import os\n# envpin: ignore=py-env-no-effect\nos.environ['TF_USE_CUDNN_AUTOTUNE'] = '0'\n"
    assert seen(tmp_path, text, "2.8") == set()
    assert seen(tmp_path, text.replace("no-effect", "must-not-be-set"), "2.8") == {(3, "py-env-no-effect")}


def test_fix_comments_the_line_once_and_leaves_strings_alone(tmp_path: Path) -> None:
    setting = "os.environ['TF_CUDNN_USE_AUTOTUNE'] = '0'\n"
    text = f'import os\nHELP = "{setting.strip()}"\n{setting}'
    once, twice, first = fix_twice(tmp_path, text, "2.8")
    note = "# envpin audit: py-env-must-not-be-set: remove the line\n"
    assert once == f'import os\nHELP = "{setting.strip()}"\n{note}{setting}'
    assert twice == once
    assert [f.rule for f in first.fixed[0].outcome.commented] == ["py-env-must-not-be-set"]
    assert [(f.line, f.rule) for f in first.findings] == [(4, "py-env-must-not-be-set")]  # still there, noted
