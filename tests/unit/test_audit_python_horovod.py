"""Edge cases of the horovod family (py-horovod-fusion): Horovod however it was imported, an import named only in
a string or comment, where the threshold is set (the script's setting over the image's), no version boundary,
suppressions, and --fix (a comment above the import, once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_audit_python_families import findings, fix_twice, seen


@pytest.mark.parametrize(
    "imports",
    [
        "import horovod.tensorflow.keras as hvd\n",
        "from horovod import tensorflow as hvd\n",
        "from horovod.tensorflow import *\n",
        "import horovod\n",
    ],
)
def test_horovod_however_it_is_imported(tmp_path: Path, imports: str) -> None:
    [f] = findings(tmp_path, "import os\n" + imports + "hvd.init()\n", "2.8")
    assert (f.line, f.rule, f.severity) == (2, "py-horovod-fusion", "warning")
    assert "HOROVOD_FUSION_THRESHOLD is not set" in f.message


@pytest.mark.parametrize(
    "words", ["s = 'import horovod.tensorflow as hvd'\n", "# import horovod\n", "import horovod_like as hvd\n"]
)
def test_no_horovod_in_strings_comments_or_lookalike_modules(tmp_path: Path, words: str) -> None:
    assert findings(tmp_path, words, "2.8") == []


@pytest.mark.parametrize(
    ("script", "image", "left"),
    [
        ("0", None, set()),
        (None, "0", set()),
        ("1", None, {(2, "py-horovod-fusion")}),  # reported where the script sets it
        ("1", "0", {(2, "py-horovod-fusion")}),  # the script's setting is the one the process sees
        ("0", "1", set()),
        (None, "64", {(3, "py-horovod-fusion")}),  # the image's wrong value: reported on the import
    ],
)
def test_the_scripts_setting_wins_over_the_images(
    tmp_path: Path, script: str | None, image: str | None, left: set[tuple[int, str]]
) -> None:
    setting = f"os.environ['HOROVOD_FUSION_THRESHOLD'] = '{script}'\n" if script else "x = 1\n"
    text = "import os\n" + setting + "import horovod.tensorflow as hvd\n"
    assert seen(tmp_path, text, "2.8", image={"HOROVOD_FUSION_THRESHOLD": image} if image else {}) == left


@pytest.mark.parametrize("tf", ["1.15", "2.16", None])
def test_every_version_and_none_alike(tmp_path: Path, tf: str | None) -> None:
    assert seen(tmp_path, "import horovod.tensorflow as hvd\n", tf) == {(1, "py-horovod-fusion")}


def test_a_suppression_above_the_import_silences_it(tmp_path: Path) -> None:
    text = "# envpin: ignore=py-horovod-fusion\nimport horovod.tensorflow as hvd\n"
    assert seen(tmp_path, text, "2.8") == set()
    assert seen(tmp_path, text.replace("py-horovod-fusion", "horovod-fusion-threshold"), "2.8") == {
        (2, "py-horovod-fusion")  # the Dockerfile rule's id silences nothing here
    }


def test_fix_comments_the_import_once_and_leaves_strings_alone(tmp_path: Path) -> None:
    text = "HELP = 'import horovod.tensorflow as hvd'\nimport horovod.tensorflow as hvd\nhvd.init()\n"
    once, twice, first = fix_twice(tmp_path, text, "2.8")
    note = "# envpin audit: py-horovod-fusion: set HOROVOD_FUSION_THRESHOLD=0 in the image (ENV) or before hvd.init()\n"
    assert once == text.replace("\nimport horovod", "\n" + note + "import horovod") and twice == once
    assert [f.rule for f in first.fixed[0].outcome.commented] == ["py-horovod-fusion"]
