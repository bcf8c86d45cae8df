"""`envpin probe --image`: the self-test line is read from the report the container left in --out, a file the
container made. Only a regular file of bounded size is read: a FIFO or a folder there is no report, never a wait."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envpin.image.probing import _selftest_line
from tests.conftest import make_unreadable


@pytest.mark.parametrize("kind", ["fifo", "folder", "broken"])
def test_a_report_that_is_no_readable_json_file_gives_no_line(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    make_unreadable(path, kind)
    assert _selftest_line((str(path),), insisted=True) == (None, False)


def test_a_report_with_a_skipped_selftest_gives_its_line(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"selftest": {"skipped": "TensorFlow cannot be imported: x"}}))
    assert _selftest_line((str(path),), insisted=True) == (
        "self-test could not run: TensorFlow cannot be imported: x",
        False,
    )
