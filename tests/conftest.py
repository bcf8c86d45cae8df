"""Shared test plumbing: the golden-update switch, CLI runners, and CI's no-silent-skip rule."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

import tests.props  # noqa: F401 (registers and loads the Hypothesis profile before any test module)

REPO = Path(__file__).resolve().parent.parent
#: Tests with these markers need a real component; in CI (CI=true) skipping them is a failure.
REAL_COMPONENT_MARKERS = (
    "docker",
    "tensorflow",
    "podman",
    "slurm",
    "pypi",
    "pythons",
    "renderers",
    "oldtf",
    "trackers",
)
#: The user's folders envpin reads or writes (cache, state, config, Docker logins) and the switches that
#: change what it does; each test run gets its own before anything is collected (conftest.py is imported
#: before any test module, so a module that loads the catalog at import time sees these too).
USER_FOLDERS = ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "ENVPIN_STATE_DIR", "DOCKER_CONFIG")
USER_SWITCHES = (
    "ENVPIN_CATALOG",
    "ENVPIN_ENGINE",
    "ENVPIN_LOCK",
    "ENVPIN_PLAN",
    "ENVPIN_SELFTEST_JOBS",
    "ENVPIN_DOCTOR_FAKE",
    "ENVPIN_NODE_NAME",
    # how wide and how colourful output is: the tests' expected output is what a pipe of the default width gets
    "COLUMNS",
    "LINES",
    "FORCE_COLOR",
    "NO_COLOR",
    "TTY_COMPATIBLE",
)


def _isolate_from_the_user() -> Path:
    """Point every user folder at a fresh one under a temporary root and drop the user's switches. Docker's
    CLI plugins (the Compose plugin lives in ~/.docker/cli-plugins) are linked in, read-only use; the
    user's config.json and its logins are not."""
    import atexit
    import shutil
    import tempfile

    real_docker = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    root = Path(tempfile.mkdtemp(prefix="envpin-tests-"))
    atexit.register(shutil.rmtree, root, True)
    for name in USER_FOLDERS:
        folder = root / name.lower()
        folder.mkdir()
        os.environ[name] = str(folder)
    (root / "docker_config" / "config.json").write_text("{}\n")  # podman 4.3's run needs the file to exist
    if (real_docker / "cli-plugins").is_dir():
        (root / "docker_config" / "cli-plugins").symlink_to(real_docker / "cli-plugins")
    for name in USER_SWITCHES:
        os.environ.pop(name, None)
    return root


ISOLATED = _isolate_from_the_user()


def load_script(name: str) -> ModuleType:
    """A module from scripts/ (tools of the repository, not part of the wheel), imported once."""
    if f"scripts.{name}" in sys.modules:
        return sys.modules[f"scripts.{name}"]
    spec = importlib.util.spec_from_file_location(f"scripts.{name}", REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


#: A test's tier is its folder under tests/: the markers each folder's tests get (`pytest -m unit` or
#: `pytest tests/unit` is the inner loop). A test outside these folders is a collection error.
FOLDER_MARKERS: dict[str, tuple[str, ...]] = {
    "unit": ("unit",),
    "golden": ("golden",),
    "cli": ("cli",),
    "hooks": ("hooks", "slow"),
    "docker": ("docker",),
    "podman": ("podman",),
    "slurm": ("slurm",),
    "tf": ("tensorflow",),
    "oldtf": ("oldtf", "slow"),
    "pythons": ("pythons",),
    "trackers": ("trackers",),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.path)).resolve().relative_to(REPO / "tests").parts[0]
        if folder not in FOLDER_MARKERS:
            raise pytest.UsageError(f"{item.nodeid}: tests live in one of tests/{{{','.join(FOLDER_MARKERS)}}}/")
        for name in FOLDER_MARKERS[folder]:
            item.add_marker(name)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files from current output")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI", "").lower() == "true":
        marks = [m for m in REAL_COMPONENT_MARKERS if item.get_closest_marker(m)]
        if marks:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            report.outcome = "failed"
            report.longrepr = f"CI=true: a '{marks[0]}' test may not skip ({reason})"


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees a machine on which nothing was built or synced yet (the build state and the image-facts
    cache live outside the repo); the session-wide folders above guard collection."""
    monkeypatch.setenv("ENVPIN_STATE_DIR", str(tmp_path_factory.mktemp("envpin-state")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


#: A line of the progress display as stderr shows it when it is not a terminal (envpin.views.console.progress_line).
PROGRESS_LINE = re.compile(r"^[^:]+: (.+; )?(\d+ h )?(\d+ min )?(\d+ s )?elapsed(, about .+ left)?$")


def said(stderr: str) -> list[str]:
    """stderr's lines other than the progress display's: a command that works past 5 s under load prints those
    first, before its own first line."""
    return [line for line in stderr.splitlines() if not PROGRESS_LINE.match(line)]


def error_after_progress(stderr: str) -> list[str]:
    """The lines of a command that failed after some work: its progress lines first (the display's, never
    anything else), then what the error contract says, which is returned (one error line, one hint line)."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    rest = [line for line in lines if not PROGRESS_LINE.match(line)]
    assert not rest or lines[-len(rest) :] == rest, stderr  # no progress line after the error
    return rest


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run the real CLI entry point in-process; returns exit code, stdout and stderr."""
    from envpin.cli import main

    def run(*args: str, cwd: Path | None = None) -> Result:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        # A process runs one command: its consoles measure the streams they are made on, once. Each command run
        # here gets consoles made on this test's captured streams, as a fresh process would.
        if "envpin.views.console" in sys.modules:
            sys.modules["envpin.views.console"]._console.cache_clear()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return run


def run_envpin(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    """Run the installed `envpin` console script in a subprocess (real process boundary, real exit code).

    The console script, unlike `python -m envpin`, does not put the working directory on sys.path, so a
    folder named envpin/ there (a team checkout with the probe in it) cannot shadow the installed package.
    """
    script = Path(sys.executable).with_name("envpin")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "envpin"]
    proc = subprocess.run(
        [*cmd, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def make_unreadable(path: Path, kind: str) -> None:
    """Put at `path` something that is no regular file to read: a FIFO nobody writes to (a naive read waits
    for ever), a folder, a file that is not what its name says ("broken": text that is not JSON), a dangling
    link, or a link loop."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "broken":
        path.write_text("{not json")
    elif kind == "dangling":
        path.symlink_to(path.parent / "missing" / "deeper" / path.name)
    elif kind == "loop":
        other = path.with_name(path.name + ".loop")
        path.symlink_to(other)
        other.symlink_to(path)
    else:
        raise ValueError(f"unknown kind {kind!r}")
