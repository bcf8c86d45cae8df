"""`envpin audit`'s tty colours, in a process of its own: rich decides on colour once per process, from the
terminal and FORCE_COLOR / NO_COLOR as the process starts (the other output forms are tested in-process in
tests/unit/test_audit_output.py)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import run_envpin
from tests.unit.test_audit_output import MIXED


def test_tty_colours_place_rule_and_severity_only_where_colour_is_asked_for(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(MIXED)
    terminal = {"FORCE_COLOR": "1", "TERM": "xterm-256color"}
    coloured = run_envpin("audit", "Dockerfile", cwd=tmp_path, env={**terminal, "NO_COLOR": ""})
    assert coloured.stdout.splitlines()[0].startswith(
        "\x1b[1mDockerfile:3\x1b[0m \x1b[2mpip-no-hashes\x1b[0m \x1b[33mwarning\x1b[0m: pip install"
    )
    plain = run_envpin("audit", "Dockerfile", cwd=tmp_path, env={**terminal, "NO_COLOR": "1"})
    assert "\x1b" not in plain.stdout
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured.stdout) == plain.stdout
