"""envpin bisect/study/cost on commands that fail in odd ways, run through the CLI: each is one error line and
one hint line (exit 2) that says what happened, never another failure's words."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import error_after_progress

#: A TensorFlow stand-in for what cannot be installed here: a release newer than the recipe table, or one whose
#: seeding refuses (the hook records the error and lets the command go on).
_STAND_IN = """
__version__ = "{version}"
class _NS(object):
    def __init__(self, **fns):
        self.__dict__.update(fns)
def _set_seed(seed):
    if {refuse}:
        raise ValueError("this seed is refused")
random = _NS(set_seed=_set_seed)
config = _NS(list_physical_devices=lambda kind: [])
"""


def _stand_in(tmp_path: Path, version: str, refuse: bool) -> Path:
    site = tmp_path / "site"
    (site / "tensorflow").mkdir(parents=True)
    (site / "tensorflow" / "__init__.py").write_text(_STAND_IN.format(version=version, refuse=refuse))
    script = tmp_path / "train.py"
    script.write_text(
        f"import json, os, sys\nsys.path.insert(0, {str(site)!r})\nimport tensorflow\n"
        "print(json.dumps({'envpin_metrics': {'seed': int(os.environ['ENVPIN_SEED'])}}))\n"
    )
    return script


def _dumping_stand_in(tmp_path: Path) -> Path:
    """A script importing a TensorFlow stand-in whose debugger 'dumps' (records the call) and which has the
    reader the hook checks for: the runs end with a dump for --reader-python to compare."""
    site = tmp_path / "site"
    reader = site / "tensorflow" / "python" / "debug" / "lib"
    reader.mkdir(parents=True)
    for folder in (site / "tensorflow" / "python", reader.parent, reader):
        (folder / "__init__.py").touch()
    (site / "tensorflow" / "__init__.py").write_text(
        _STAND_IN.format(version="2.21.0", refuse=False)
        + "debugging = _NS(experimental=_NS(enable_dump_debug_info=lambda root, **kw: None))\n"
    )
    (reader / "debug_events_reader.py").write_text("class DebugDataReader(object):\n    pass\n")
    script = tmp_path / "train.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(site)!r})\nimport tensorflow\n")
    return script


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie waiting for its new parent to reap it has stopped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _one_error(result) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """After the progress lines of the runs made (stderr is not a terminal), one error line and one hint line,
    exit 2."""
    lines = error_after_progress(result.stderr)
    assert result.code == 2, result.stderr
    assert len(lines) == 2 and lines[0].startswith("error:") and lines[1].startswith("hint:"), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0], lines[1]


def test_a_killed_run_is_not_called_a_timeout(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL (the out-of-memory killer's signal) without --timeout: the signal is named, --timeout is not;
    the hint names no folder of the temporary work folder, which is removed by then."""
    kill = (
        "import os, signal, sys; sys.stderr.write('loading\\n'); sys.stderr.flush(); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    error, hint = _one_error(cli("study", "-n", "2", "--", sys.executable, "-c", kill))
    assert "killed by signal 9 (SIGKILL) (fixed 1): loading" in error and "timeout" not in error + hint
    assert "envpin-runs-" not in hint and "--keep DIR" in hint
    error, _ = _one_error(cli("cost", "-r", "2", "--", sys.executable, "-c", "import os; os.abort()"))
    assert "killed by signal 6 (SIGABRT) (without recipe 1)" in error and "status" not in error
    error, hint = _one_error(
        cli("study", "-n", "2", "--timeout", "0.5", "--", sys.executable, "-c", "import time; time.sleep(30)")
    )
    assert "did not finish within --timeout" in error and "signal" not in error and "--timeout" in hint


def test_a_run_the_hook_could_not_seed_or_give_the_recipe_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The recipe table has no row for a TensorFlow newer than it: `--recipe on` must not report runs made
    without the recipe (and without seeds: the recipe does the seeding) as runs with it; nor may a run whose
    seeding failed count as a fixed-seed run."""
    newer = _stand_in(tmp_path / "newer", "2.99.0", refuse=False)
    error, hint = _one_error(cli("study", "-n", "2", "--recipe", "on", "--", sys.executable, str(newer)))
    assert "could not apply envpin's recipe (fixed recipe 1, TensorFlow 2.99.0)" in error
    assert "no determinism recipe covers TensorFlow 2.99.0" in error and "recipe" in hint
    error, _ = _one_error(cli("cost", "-r", "2", "--", sys.executable, str(newer)))
    assert "could not apply envpin's recipe (with recipe 1, TensorFlow 2.99.0)" in error
    assert cli("study", "-n", "2", "--", sys.executable, str(newer)).code == 0  # seeding alone works there
    refusing = _stand_in(tmp_path / "refusing", "2.21.0", refuse=True)
    error, _ = _one_error(cli("study", "-n", "2", "--", sys.executable, str(refusing)))
    assert "could not seed the run with ENVPIN_SEED=42 (fixed 1, TensorFlow 2.21.0)" in error
    assert "this seed is refused" in error


def test_a_metric_too_large_for_a_float_is_reported_as_not_finite(cli) -> None:  # type: ignore[no-untyped-def]
    """JSON integers have no bound: 10**400 is infinite as a float (as 1e400 reads), never an internal error."""
    script = (
        "import json, os; "
        "print(json.dumps({'envpin_metrics': {'big': 10**400, 'seed': int(os.environ['ENVPIN_SEED'])}}))"
    )
    result = cli("study", "-n", "2", "--", sys.executable, "-c", script)
    assert result.code == 0, result.stderr
    assert "big: 4 of 4 runs gave a value that is not a finite number" in result.stdout


def test_no_further_run_starts_once_one_has_failed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A command that fails (after an hour of training, say) is reported after its first failure, not after
    all 2n runs: those under way finish, no other one starts."""
    log = tmp_path / "starts"
    fail = "import sys; open(sys.argv[1], 'a').write('run\\n'); sys.exit(3)"
    for args, most in (
        (("study", "-n", "5"), 1),
        (("study", "-n", "5", "-j", "2"), 2),
        (("cost", "-r", "4"), 1),
        (("bisect",), 1),
    ):
        log.write_text("")
        error, _ = _one_error(cli(*args, "--", sys.executable, "-c", fail, str(log)))
        assert "exited with status 3" in error
        assert 1 <= len(log.read_text().splitlines()) <= most, (args, log.read_text())


def test_a_timeout_stops_what_the_command_started_too(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A wrapper (a shell script, a launcher) whose training process runs past --timeout: the training process
    is stopped with it, not left running orphaned after envpin has said the run was stopped."""
    import os
    import signal
    import time

    pids = tmp_path / "pids"
    wrapper = (
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "open(sys.argv[1], 'a').write('%d\\n' % p.pid); p.wait()"
    )
    try:
        error, _ = _one_error(cli("study", "-n", "2", "--timeout", "5", "--", sys.executable, "-c", wrapper, str(pids)))
        assert "did not finish within --timeout" in error
        [training] = [int(line) for line in pids.read_text().split()]
        deadline = time.monotonic() + 10
        while _alive(training) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(training), "the training process outlived its run's --timeout"
    finally:
        for line in pids.read_text().split() if pids.exists() else ():
            if _alive(int(line)):
                os.kill(int(line), signal.SIGKILL)


def test_a_spread_envpin_did_not_seed_is_not_called_nondeterminism(cli) -> None:  # type: ignore[no-untyped-def]
    """A command without TensorFlow that never reads ENVPIN_SEED: its 'fixed-seed' runs were never seeded, so
    their spread says nothing of nondeterminism, and the verdict must not give it a share."""
    unseeded = "import json, random; print(json.dumps({'envpin_metrics': {'a': random.random()}}))"
    result = cli("study", "-n", "3", "--format", "json", "--", sys.executable, "-c", unseeded)
    assert result.code == 0, result.stderr
    import json

    [metric] = json.loads(result.stdout)["metrics"]
    assert metric["seeded_by_envpin"] is False and metric["fixed"]["std"] > 0
    assert (
        "seeded nothing" in metric["verdict"]
        and "only if the command seeds itself from ENVPIN_SEED" in metric["verdict"]
        and "causes" not in metric["verdict"]
        and "alone" not in metric["verdict"]
    )
    from envpin.runs import study

    words = study.verdict("a", [1.0, 2.0], [3.0, 3.0], seeded=False)
    assert "varying the seed did not change it" in words and "alone" not in words and "seeded nothing" in words
    assert "exactly the same value" in study.verdict("a", [1.0, 1.0], [1.0, 2.0], seeded=False)


def test_the_stderr_in_an_error_is_one_plain_line(cli) -> None:  # type: ignore[no-untyped-def]
    """A failed run's last stderr lines go into the error line: a terminal code there (clear screen, window
    title) is shown escaped, never sent to the terminal, and a line of megabytes is shortened."""
    noisy = (
        "import sys; sys.stderr.write('a\\x1b[2Jb\\x1b]0;title\\x07c\\n' + 'x' * 1000000 + '\\nlast\\n'); sys.exit(3)"
    )
    error, _ = _one_error(cli("study", "-n", "2", "--", sys.executable, "-c", noisy))
    assert "\x1b" not in error and "\x07" not in error and "a\\x1b[2Jb\\x1b]0;title\\x07c" in error
    assert error.endswith("| last") and len(error) < 1000


def test_a_slow_or_talkative_dump_reader_is_one_error_that_says_so(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--reader-python may be a wrapper (an environment's activation, a module system) that prints before the
    reader's own line, or one that takes longer than --timeout: one error line saying which, one hint."""
    script = _dumping_stand_in(tmp_path)
    talkative = tmp_path / "talkative"
    refuse = 'import sys; sys.stderr.write("reader says no\\n"); sys.exit(3)'
    talkative.write_text(
        "#!/bin/sh\necho 'loading module tensorflow/2.21' >&2\necho 'second line' >&2\n"
        f"exec {sys.executable} -c '{refuse}'\n"
    )
    talkative.chmod(0o755)
    error, hint = _one_error(cli("bisect", "--reader-python", str(talkative), "--", sys.executable, str(script)))
    assert error.endswith("cannot read TensorFlow's debugger dumps: reader says no") and "2.2 or later" in hint
    slow = tmp_path / "slow"
    slow.write_text("#!/bin/sh\nexec sleep 60\n")
    slow.chmod(0o755)
    error, hint = _one_error(
        cli("bisect", "--timeout", "8", "--reader-python", str(slow), "--", sys.executable, str(script))
    )
    assert error == "error: comparing the dumps took longer than --timeout (8 s)" and "--max-ops" in hint


def test_a_comparison_that_fails_at_the_end_of_the_second_run_is_one_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Without --reader-python the second run's hook compares the dumps as the run ends, with that run's
    TensorFlow: one whose reader cannot read them gives one error line naming the reader's exception."""
    script = _dumping_stand_in(tmp_path)
    error, hint = _one_error(cli("bisect", "--", sys.executable, str(script)))
    assert error == (
        "error: comparing the dumps failed (at the end of run 2): TypeError: DebugDataReader() takes no arguments"
    )
    assert "--keep" in hint and "DebugDataReader" in hint


def test_a_dump_reader_that_prints_no_result_is_one_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A --reader-python that prints a line looking like JSON but is not the comparison's result."""
    script = _dumping_stand_in(tmp_path)
    for printed in ("{not json", '{"some": "other json"}', "[1, 2]"):
        reader = tmp_path / "reader"
        reader.write_text(f"#!/bin/sh\necho '{printed}'\n")
        reader.chmod(0o755)
        error, hint = _one_error(cli("bisect", "--reader-python", str(reader), "--", sys.executable, str(script)))
        assert "comparing the dumps" in error and "--reader-python" in hint, printed


def test_the_last_seed_the_hook_can_give_is_accepted(cli) -> None:  # type: ignore[no-untyped-def]
    """The last varied seed of `study -n 2 --seed 2**32-3` is 2**32-1, NumPy's largest: accepted, and the runs
    go (the seeds outside are refused before any run: tests/unit/test_runs_failures.py)."""
    result = cli(
        "study",
        "-n",
        "2",
        "--seed",
        str(2**32 - 3),
        "--",
        sys.executable,
        "-c",
        "import json, os; print(json.dumps({'envpin_metrics': {'s': int(os.environ['ENVPIN_SEED'])}}))",
    )
    assert result.code == 0, result.stderr  # the last varied seed is 2**32-1: accepted
