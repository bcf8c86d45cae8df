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


# --- py-horovod-autotune: the distributed recipe's HOROVOD_AUTOTUNE -------------------------------------------

FUSED = "import os\nos.environ['HOROVOD_FUSION_THRESHOLD'] = '0'\n"


@pytest.mark.parametrize(
    ("value", "image", "line"),
    [
        ("1", None, 3),  # reported where the script sets it
        ("0", None, None),
        (None, None, None),  # unset: Horovod does not autotune
        (None, "1", 3),  # the image's value: reported on the import
        ("0", "1", None),  # the script's setting is what the process sees
        ("-1", None, None),  # Horovod autotunes only for a number above 0
        ("yes", None, None),  # strtol gives 0: off
    ],
)
def test_autotune_on_is_a_finding(tmp_path: Path, value: str | None, image: str | None, line: int | None) -> None:
    setting = f"os.environ['HOROVOD_AUTOTUNE'] = '{value}'\n" if value is not None else ""
    text = FUSED + setting + "import horovod.tensorflow as hvd\n"
    got = seen(tmp_path, text, "2.8", image={"HOROVOD_AUTOTUNE": image} if image else {})
    assert {x for x in got if x[1] == "py-horovod-autotune"} == ({(line, "py-horovod-autotune")} if line else set())


def test_autotune_without_horovod_is_nothing(tmp_path: Path) -> None:
    assert seen(tmp_path, "import os\nos.environ['HOROVOD_AUTOTUNE'] = '1'\n", "2.8") == set()


def test_autotune_message_quotes_the_distributed_recipe(tmp_path: Path) -> None:
    [f] = [
        f
        for f in findings(tmp_path, FUSED + "os.environ['HOROVOD_AUTOTUNE'] = '1'\nimport horovod\n", "2.8")
        if f.rule == "py-horovod-autotune"
    ]
    assert f.line == 3 and "the distributed recipe sets 0" in f.message and "fusion threshold" in f.message
