"""The CLI builds only the command it runs (start-up): the result must be the same command."""

from __future__ import annotations

import io
from contextlib import redirect_stdout, suppress

import pytest
import typer

from envpin import cli

NAMES = sorted([c.name for c in cli.app.registered_commands if c.name] +
               [g.name for g in cli.app.registered_groups if g.name])


def test_every_command_is_found_by_name() -> None:
    assert len(NAMES) >= 12
    for name in NAMES:
        only = cli._app_for([name, "--help"])
        assert only is not cli.app
        assert [c.name for c in only.registered_commands] + [g.name for g in only.registered_groups] == [name]


@pytest.mark.parametrize("args", [["--version"], ["-q"], ["no-such-command"], ["--debug", "-v", "nope", "x"],
                                  ["--help", "nope"]])
def test_the_whole_app_where_no_single_command_is_named(args: list[str]) -> None:
    assert cli._app_for(args) is cli.app


def test_root_flags_before_the_name_are_skipped() -> None:
    only = cli._app_for(["--debug", "-q", "catalog", "show", "20.02"])
    assert [g.name for g in only.registered_groups] == ["catalog"] and only.registered_commands == []


def test_shell_completion_sees_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_ENVPIN_COMPLETE", "complete_bash")
    assert cli._app_for(["probe"]) is cli.app


def _help(app: typer.Typer, args: list[str]) -> str:
    out = io.StringIO()
    with redirect_stdout(out), suppress(SystemExit):
        typer.main.get_command(app).main(args=args, prog_name="envpin", standalone_mode=False)
    return out.getvalue()


@pytest.mark.parametrize("name", NAMES)
def test_a_single_command_has_the_same_help_as_in_the_whole_app(name: str) -> None:
    args = [name, "--help"]
    alone, whole = _help(cli._app_for(args), args), _help(cli.app, args)
    assert alone == whole and f"Usage: envpin {name}" in alone


@pytest.mark.parametrize("args", [[], ["--help"], ["-h"], ["-q", "--help"], ["--debug", "-h"]])
def test_the_root_help_lists_every_command_as_the_whole_app_does(args: list[str]) -> None:
    summary = cli._app_for(args)
    assert summary is not cli.app
    alone, whole = _page(summary, args), _page(cli.app, args)
    assert alone == whole and "Commands" in whole


def _page(app: typer.Typer, args: list[str]) -> str:
    """The help page, also when it comes as the error no arguments raise (NoArgsIsHelpError)."""
    try:
        return _help(app, args)
    except Exception as exc:  # the CLI prints this exception's message as the page
        return f"{type(exc).__name__}: {exc.format_message()}"  # type: ignore[attr-defined]
