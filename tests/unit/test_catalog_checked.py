"""The shipped catalog is validated in full by this suite and recorded (envpin/data/catalog.checked); loading skips
the check only for that exact file, and checks every other catalog file in full."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from envpin.knowledge import catalog, catalogcheck


def test_the_shipped_catalog_passes_the_full_check_and_is_the_one_recorded() -> None:
    raw = catalogcheck.shipped_catalog_path().read_bytes()
    import json

    catalogcheck.validate(json.loads(raw), "the shipped catalog")
    recorded = catalogcheck.checked_record_path().read_text(encoding="ascii").strip()
    assert recorded == catalogcheck.digest(raw), (
        "envpin/data/catalog.json changed since it was recorded: "
        "run `.venv/bin/python -m envpin.knowledge.catalogcheck`"
    )


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The origins of every full check made while loading (caches cleared before and after)."""
    seen: list[str] = []
    real = catalogcheck.validate

    def counting(data: object, origin: str = "catalog") -> None:
        seen.append(origin)
        real(data, origin)

    monkeypatch.setattr(catalogcheck, "validate", counting)
    catalog._load_file.cache_clear()
    catalog._with_cache.cache_clear()
    yield seen
    catalog._load_file.cache_clear()
    catalog._with_cache.cache_clear()


def test_the_recorded_shipped_file_loads_without_a_second_check(checks: list[str]) -> None:
    cat = catalog.load(cache=False)
    assert checks == []
    assert "20.02" in cat.releases() and cat.entries()  # the look-ups work on the unchecked load


def test_an_envpin_catalog_file_is_checked_in_full_even_when_identical(
    checks: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "catalog.json"
    shutil.copyfile(catalogcheck.shipped_catalog_path(), copy)
    monkeypatch.setenv(catalog.CATALOG_ENV, str(copy))
    catalog.load(cache=False)
    assert checks == [str(copy)]


def test_a_shipped_file_that_differs_from_the_record_is_checked_in_full(
    checks: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "catalog.checked"
    record.write_text("0" * 64 + "\n")
    monkeypatch.setattr(catalog, "checked_record_path", lambda: record)
    catalog.load(cache=False)
    assert checks == [str(catalogcheck.shipped_catalog_path())]


def test_a_missing_record_means_a_full_check(
    checks: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catalog, "checked_record_path", lambda: tmp_path / "absent")
    catalog.load(cache=False)
    assert len(checks) == 1


@pytest.mark.parametrize("kind", ["fifo", "folder", "oversized"])
def test_a_record_that_is_no_regular_small_file_means_a_full_check_never_a_wait(
    kind: str, checks: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    record = tmp_path / "catalog.checked"
    if kind == "fifo":
        os.mkfifo(record)
    elif kind == "folder":
        record.mkdir()
    else:  # the right digest, then more: not the one-line record
        digest = catalogcheck.checked_record_path().read_text(encoding="ascii").strip()
        record.write_text(digest + "\n" + " " * 4096)
    monkeypatch.setattr(catalog, "checked_record_path", lambda: record)
    catalog.load(cache=False)
    assert checks == [str(catalogcheck.shipped_catalog_path())]


def test_recording_refuses_an_invalid_file_and_writes_nothing(tmp_path: Path) -> None:
    bad, record = tmp_path / "catalog.json", tmp_path / "catalog.checked"
    bad.write_text('{"schema": 1}')
    with pytest.raises(catalog.CatalogError):
        catalogcheck.record(bad, record)
    assert not record.exists()
