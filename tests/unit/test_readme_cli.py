"""The README's CLI reference stays true for a newcomer: every command and group has a row, and every option a
row names exists on the command the row is about."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from envpin.cli import app

README = Path(__file__).resolve().parents[2] / "README.md"


def _rows() -> list[str]:
    """The first cell of each row of the CLI reference table (`envpin …` invocations, several per cell)."""
    text = README.read_text()
    section = text.split("## CLI reference", 1)[1].split("\n## ", 1)[0]
    return [line.split(" | ", 1)[0] for line in section.splitlines() if line.startswith("| `envpin ")]


def _command(words: list[str]) -> Any:
    """The (sub)command the leading words name (typer's click objects)."""
    command: Any = typer.main.get_command(app)
    for word in words:
        if word not in getattr(command, "commands", {}):
            break
        command = command.commands[word]
    return command


def test_every_command_has_a_row() -> None:
    root: Any = typer.main.get_command(app)
    named = {m.group(1) for row in _rows() for m in re.finditer(r"`envpin ([a-z][a-z-]*)", row)}
    assert set(root.commands) - named == set(), "commands without a row in README's CLI reference"


def test_every_option_a_row_names_exists() -> None:
    missing = []
    for row in _rows():
        for invocation in re.findall(r"`(envpin [^`]+)`", row):
            words = [w for w in invocation.split()[1:] if re.fullmatch(r"[a-z][a-z-]*", w)]
            command = _command(words)
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"-h", "--help"}
            # an option stands after a space, an opening bracket or a `|` (`YY.MM[-tag]` is a placeholder)
            for option in re.findall(r"(?:(?<=\s)|(?<=\s\[)|(?<=\|))(--?[a-zA-Z][\w-]*)", invocation):
                if option not in known:
                    missing.append(f"{invocation}: {option}")
    assert missing == []
