"""The lean path (envpin.__main__: `audit FILES...`, `catalog`, `recipe --ngc TAG` without Typer): for every argv it
takes, the same stdout, stderr and exit status as the full Typer CLI (envpin.cli.main); every other argv goes to
Typer."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envpin import __main__ as entry
from envpin import cli
from envpin.views import console

WARNINGS = ("FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
            "RUN pip install numpy==1.18.5\n")
CLEAN = "FROM nvcr.io/nvidia/tensorflow:25.01-tf2-py3@sha256:" + "cd" * 32 + "\nENV PYTHONHASHSEED=0\n"
ERRORS = "FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3\nENV TF_CUDNN_USE_AUTOTUNE=0\nRUN curl -s https://x/i.sh | sh\n"
BROKEN = "FROM\nRUN\tpip install ./x\t# :smile: \x07\n"
SCRIPT = "import tensorflow as tf\nimport random\nrandom.shuffle([1, 2])\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("lean")
    made = {"warnings": WARNINGS, "clean": CLEAN, "errors": ERRORS, "broken": BROKEN, "train.py": SCRIPT}
    for name, text in made.items():
        (root / name).write_text(text)
    (root / "binary").write_bytes(b"\x00\xff\xfe")
    (root / "folder").mkdir()
    paths = {name: str(root / name) for name in [*made, "binary", "folder"]}
    paths["missing"] = str(root / "missing")
    paths["relative"] = f"{root}/./clean"
    return paths


def _run(call: object, args: list[str]) -> tuple[str, str, int | None]:
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    with redirect_stdout(out), redirect_stderr(err):
        try:
            taken = call(args)  # type: ignore[operator]
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
        else:
            assert taken is False, "the lean path either exits or declines"
            return "", "", None
    return out.getvalue(), err.getvalue(), code


def _both(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[tuple, tuple]:
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # the lean path ignores Ctrl-C once done
    lean = _run(entry._lean, args)
    full = _run(cli.main, args)
    return lean, full


MATRIX = [
    ["warnings"], ["clean"], ["errors"], ["broken"], ["train.py"], ["warnings", "train.py"],
    ["warnings", "clean", "errors"], ["missing"], ["binary"], ["folder"], ["relative"],
    ["warnings", "--format", "json"], ["--format=sarif", "errors"], ["errors", "--json"], ["errors", "--sarif"],
    ["errors", "--format", "gcc"], ["errors", "--format", "github"], ["errors", "--format", "tty"],
    ["errors", "--format", "xml"], ["errors", "--json", "--sarif"], ["errors", "--format", "gcc", "--json"],
    ["errors", "--fail-on", "error"], ["warnings", "--fail-on", "error"], ["clean", "--fail-on", "info"],
    ["warnings", "--no-config", "--no-context"], ["broken", "--format", "json", "--fail-on=warning"],
]


@pytest.mark.parametrize("names", MATRIX, ids=[" ".join(m) for m in MATRIX])
def test_the_lean_path_answers_as_the_full_cli(names: list[str], files: dict[str, str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["audit", *(files.get(n, n) for n in names)]
    lean, full = _both(args, monkeypatch)
    assert lean[2] is not None, "the lean path takes this argv"
    assert lean == full


TOKENS = ["warnings", "clean", "errors", "broken", "train.py", "missing", "binary", "folder",
          "--format", "--format=json", "--format=", "json", "sarif", "gcc", "github", "tty", "xx", "--fail-on",
          "--fail-on=info", "error", "warning", "info", "ERROR", "--json", "--sarif", "--no-config", "--no-context",
          "--help", "-h", "--", "-", "", "--target", "--tf", "2.1", "--fix", "--debug", "-q", "audit", "a=b"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens=st.lists(st.sampled_from(TOKENS), max_size=6))
def test_every_argv_the_lean_path_takes_answers_as_the_full_cli(tokens: list[str], files: dict[str, str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["audit", *(files.get(t, t) for t in tokens)]
    lean, full = _both(args, monkeypatch)
    if lean[2] is None:  # declined: Typer answers (nothing was written)
        assert entry._lean_call(args) is None
        return
    assert lean == full


@pytest.mark.parametrize("args", [["audit"], ["audit", "--help"], ["audit", "x", "--fix"], ["probe"],
                                  ["--debug", "audit", "x"], ["audit", "x", "--format", "json", "--format", "tty"],
                                  ["audit", "x", "--fail-on", "Error"], ["audit", "--", "x"]])
def test_what_it_does_not_read_goes_to_typer(args: list[str]) -> None:
    assert entry._audit_args(args) is None


@pytest.mark.parametrize("text", ["2 findings in 1 file: 2 warnings", "a\tb", "bell \x07 here", "x :smile: y",
                                  "C1 \x85 line", "plain: text: with colons"])
def test_plain_lines_are_what_rich_writes(text: str) -> None:
    from rich.console import Console

    rich_out = io.StringIO()
    Console(file=rich_out, highlight=False, width=120).print(text, markup=False, highlight=False, soft_wrap=True)
    plain_out = io.StringIO()
    with redirect_stdout(plain_out):
        console.Plain(False).print(text, markup=False, highlight=False, soft_wrap=True)
    assert plain_out.getvalue() == rich_out.getvalue()


def test_the_console_script_audits_without_typer_or_rich(files: dict[str, str]) -> None:
    code = ("import sys; from envpin.__main__ import main; sys.argv = ['envpin', 'audit', sys.argv[1]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n"
            "    sys.stderr.write(repr(sorted(m for m in ('typer', 'rich') if m in sys.modules)) + ' ' + str(e.code))")
    proc = subprocess.run([sys.executable, "-c", code, files["warnings"]], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.stderr.endswith("[] 1"), proc.stderr
    assert "pip-no-hashes" in proc.stdout


def _damaged_cache() -> None:
    from envpin.knowledge.facts import cache_path

    cache_path().parent.mkdir(parents=True, exist_ok=True)
    cache_path().write_text("{not json")


@pytest.mark.parametrize("args", [["catalog"], ["recipe", "--ngc", "20.02-tf2-py3"], ["recipe", "--ngc=20.02-tf2-py3"],
                                  ["recipe", "--ngc", "19.01-py2"], ["recipe", "--ngc", "20.02"],
                                  ["recipe", "--ngc", "99.99"], ["recipe", "--ngc", "nonsense"],
                                  ["recipe", "--ngc", "24.01-tf2-py3"]])
@pytest.mark.parametrize("setup", ["plain", "broken ENVPIN_CATALOG", "damaged image-facts cache"])
def test_catalog_and_recipe_answer_as_the_full_cli(args: list[str], setup: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from envpin.knowledge import catalog

    catalog._load_file.cache_clear()
    catalog._with_cache.cache_clear()
    if setup == "broken ENVPIN_CATALOG":
        (tmp_path / "catalog.json").write_text('{"schema": 2}')
        monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "catalog.json"))
    elif setup == "damaged image-facts cache":
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        _damaged_cache()
    lean, full = _both(args, monkeypatch)
    assert lean[2] is not None, "the lean path takes this argv"
    assert lean == full
    if setup == "damaged image-facts cache" and lean[2] == 0:  # the catalog was loaded: the notice is printed
        assert "warning:" in lean[1]


@pytest.mark.parametrize("args", [["catalog", "--stock"], ["catalog", "show", "20.02"], ["recipe"],
                                  ["recipe", "--ngc"], ["recipe", "--ngc", "--json"], ["recipe", "--ngc="],
                                  ["recipe", "--ngc", "20.02", "--json"], ["recipe", "--tf", "2.1"],
                                  ["recipe", "20.02"], ["catalog", "-h"]])
def test_other_catalog_and_recipe_calls_go_to_typer(args: list[str]) -> None:
    assert entry._lean_call(args) is None


def test_the_console_script_lists_the_catalog_without_typer_or_rich() -> None:
    code = ("import sys; from envpin.__main__ import main; sys.argv = ['envpin', 'catalog']\n"
            "try:\n    main()\nexcept SystemExit as e:\n"
            "    sys.stderr.write(repr(sorted(m for m in ('typer', 'rich') if m in sys.modules)) + ' ' + str(e.code))")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # 80 columns: the title wraps, rich lays it out
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False,
                          env=env)
    assert proc.stderr.endswith("[] 0"), proc.stderr
    assert "20.02-tf2-py3" in proc.stdout


def test_the_console_script_shows_a_recipe_without_typer_or_rich() -> None:
    code = ("import sys; from envpin.__main__ import main; sys.argv = ['envpin', 'recipe', '--ngc', '20.02-tf2-py3']\n"
            "try:\n    main()\nexcept SystemExit as e:\n"
            "    sys.stderr.write(repr(sorted(m for m in ('typer', 'rich') if m in sys.modules)) + ' ' + str(e.code))")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False,
                          env=env)
    assert proc.stderr.endswith("[] 0"), proc.stderr
    assert "TF_DETERMINISTIC_OPS" in proc.stdout


def test_the_lean_audit_collects_garbage_while_auditing(files: dict[str, str]) -> None:
    """The lean path turns the collector off while importing; the audit itself runs with it on (its own
    thresholds), and it is off again afterwards."""
    code = ("import gc, sys\nfrom envpin import audit\nseen = []\norig = audit._run\n"
            "def spy(*a, **k):\n    seen.append(gc.isenabled())\n    return orig(*a, **k)\n"
            "audit._run = spy\nfrom envpin.__main__ import main\nsys.argv = ['envpin', 'audit', sys.argv[1]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    sys.stderr.write(repr((seen, gc.isenabled(), e.code)))")
    proc = subprocess.run([sys.executable, "-c", code, files["warnings"]], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.stderr.endswith("([True], False, 1)"), proc.stderr


@pytest.mark.parametrize("args", [["catalog"], ["recipe", "--ngc", "20.02-tf2-py3"], ["audit", "warnings"]])
def test_a_reader_that_went_away_ends_both_paths_with_141(args: list[str], files: dict[str, str]) -> None:
    argv = [files.get(a, a) for a in args]
    codes = []
    for code in ("from envpin.__main__ import main; import sys; sys.argv = ['envpin', *sys.argv[1:]]; main()",
                 "from envpin.cli import main; main()"):
        proc = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()  # gone before anything is written
        _, err = proc.communicate(timeout=60)
        codes.append((proc.returncode, err))
    assert codes[0] == codes[1] == (cli.CLOSED_STDOUT_EXIT, b"")
