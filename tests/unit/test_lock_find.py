"""One rule for which lock a command means (envpin.environment.render.find_lock): --lock (a folder: its
envpin.lock), else ./envpin.lock, else the only images/*/envpin.lock; the same errors and hints everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

LOCK = Path("images") / "20.02-tf2" / "envpin.lock"


@pytest.fixture
def checkout(cli, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A team checkout right after `envpin render` (what `envpin build` leaves, minus the image)."""
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", cwd=tmp_path).code == 0
    assert (tmp_path / LOCK).is_file()
    return tmp_path


def _lines(res) -> list[str]:  # type: ignore[no-untyped-def]
    return [line for line in res.stderr.splitlines() if line.strip()]


def test_every_command_finds_the_lock_under_images(cli, checkout: Path) -> None:  # type: ignore[no-untyped-def]
    """Regression: verify and doctor looked for ./envpin.lock only and hinted `envpin render` right after a
    build; build, lock --check, verify and doctor now find images/20.02-tf2/envpin.lock alike."""
    dry = cli("build", "--dry-run", cwd=checkout)
    assert dry.code == 0 and json.loads(dry.stdout)["out"] == str(LOCK.parent)
    check = cli("lock", "--check", cwd=checkout)
    assert check.code == 0 and check.stdout.startswith(f"{LOCK} is up to date")
    verify = cli("verify", cwd=checkout)  # found: it says the lock has no reference yet, naming it
    assert verify.code == 2 and _lines(verify)[0] == (
        f"error: lock {LOCK} has no 'expected' table: there is no fingerprint to verify against"
    )
    doctor = cli("doctor", "--json", cwd=checkout)
    assert doctor.code in (0, 1, 3) and "which image?" not in doctor.stderr, doctor.stderr
    assert json.loads(doctor.stdout)["target"]["chosen_by"] == f"--lock {LOCK}"


@pytest.mark.parametrize("command", [("verify",), ("doctor",), ("build", "--dry-run"), ("lock", "--check")])
def test_a_folder_means_its_lock(cli, checkout: Path, command: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    res = cli(*command, "--lock", str(LOCK.parent), cwd=checkout)
    assert "does not exist" not in res.stderr and "is a folder" not in res.stderr, res.stderr


@pytest.mark.parametrize("command", [("verify",), ("doctor",), ("build", "--dry-run"), ("lock", "--check")])
def test_a_missing_lock_hints_the_one_that_is_there(cli, checkout: Path, command: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    res = cli(*command, "--lock", "elsewhere/envpin.lock", cwd=checkout)
    assert res.code == 2 and _lines(res) == [
        "error: lock file elsewhere/envpin.lock does not exist",
        f"hint: the lock here: {LOCK}",
    ]


@pytest.mark.parametrize(
    ("command", "context", "hint"),
    [
        (("verify",), "", "create one with `envpin build --ngc RELEASE`"),
        (("lock", "--check"), "", "create one with `envpin build --ngc RELEASE`"),
        (("build",), "no --ngc given and ", "pass --ngc (and --tf)"),
        (("build", "--dry-run"), "no --ngc given and ", "pass --ngc (and --tf)"),
        (("doctor",), "which image? ", "give --ngc RELEASE"),
    ],
)
def test_no_lock_anywhere_is_one_error_with_the_next_step(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, command: tuple[str, ...], context: str, hint: str
) -> None:
    res = cli(*command, cwd=tmp_path)
    lines = _lines(res)
    assert res.code == 2 and res.stdout == "" and len(lines) == 2, res.stderr
    assert lines[0] == f"error: {context}no envpin.lock here or under images/"
    assert lines[1].startswith(f"hint: {hint}") and "envpin render` or `envpin build` first" not in lines[1]


@pytest.mark.parametrize("command", [("verify",), ("doctor",), ("build", "--dry-run")])
def test_several_locks_are_named(cli, checkout: Path, command: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    assert cli("render", "--ngc", "21.06-tf2-py3", cwd=checkout).code == 0
    res = cli(*command, cwd=checkout)
    assert res.code == 2 and _lines(res) == [
        "error: several locks under images/: images/20.02-tf2/envpin.lock, images/21.06-tf2/envpin.lock",
        "hint: choose one with --lock images/<name>/envpin.lock",
    ]
    both = cli("lock", "--check", cwd=checkout)  # the one command that checks them all
    assert both.code == 0 and both.stdout.count("is up to date") == 2


def test_a_lock_in_the_current_folder_comes_first(cli, checkout: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("verify", cwd=checkout / LOCK.parent)
    assert res.code == 2 and _lines(res)[0].startswith("error: lock envpin.lock has no 'expected' table")
