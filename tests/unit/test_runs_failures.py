"""envpin bisect/study/cost on commands that fail in odd ways, through the CLI in-process, refused before any
run starts: each is one error line and one hint line (exit 2) that says what happened, never another failure's
words. The commands that do run are in tests/cli/test_runs_failures.py."""

from __future__ import annotations

from pathlib import Path

#: A command that leaves a mark when it runs (its path comes next): refused input must leave none.
MARK_COMMAND = ("sh", "-c", 'echo ran > "$1"', "sh")


def _one_error(result) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    lines = result.stderr.strip().splitlines()
    assert result.code == 2, result.stderr
    assert len(lines) == 2 and lines[0].startswith("error:") and lines[1].startswith("hint:"), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0], lines[1]


def test_a_seed_the_hook_cannot_give_is_refused_before_any_run(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """NumPy takes seeds of 0 to 2**32-1: a seed outside (for study, or a varied seed after it) would fail
    inside every run and leave the fixed-seed runs unseeded, and the spread would be blamed on nondeterminism.
    (That the last seed accepted works: tests/cli/test_runs_failures.py.)"""
    mark, keep = tmp_path / "mark", tmp_path / "keep"
    command = ["--keep", str(keep), "--", *MARK_COMMAND, str(mark)]
    for args in (
        ("study", "-n", "2", "--seed", "-3"),
        ("study", "-n", "3", "--seed", str(2**32 - 3)),
        ("cost", "--seed", str(2**32)),
        ("bisect", "--seed", "-1"),
    ):
        error, hint = _one_error(cli(*args, *command))
        assert "--seed must be between 0 and 4294967295" in error and "--seed" in hint, args
    assert not mark.exists() and not keep.exists()


def test_a_command_that_exists_but_cannot_run_is_named_for_what_it_is(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A script without execute permission, or a folder, is not 'not found': the error says what it is."""
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    for command, words in (
        ((str(script),), "is not executable"),
        ((str(tmp_path),), "is a folder"),
        (("no-such-program-xyz",), "not found"),
    ):
        error, hint = _one_error(cli("study", "-n", "2", "--", *command))
        assert words in error, error
    error, hint = _one_error(cli("cost", "--", str(script)))
    assert "is not executable" in error and "chmod +x" in hint and "bash train.sh" in hint


def test_a_run_stopped_by_timeout_has_failed_whatever_its_status() -> None:
    """A wrapper may exit 0 in the instant its child is killed: a run past --timeout still failed (it once
    counted as a run that succeeded, and the next runs started)."""
    from envpin.runs import launch

    spec = launch.RunSpec("fixed 1", seed=42)
    assert launch.Run(spec, Path("/nonexistent"), 0, 5.0, timed_out=True).failed
    assert launch.unusable(launch.Run(spec, Path("/nonexistent"), 0, 5.0, timed_out=True))
    assert not launch.Run(spec, Path("/nonexistent"), 0, 5.0).failed
    assert launch.Run(spec, Path("/nonexistent"), -9, 5.0).failed
