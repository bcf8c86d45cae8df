"""The probe's redaction of hostile values under a real CPython 3.6 (the oldest NGC images' Python): the same
answers as the host's Python (tests/unit and tests/cli test_hostile_inputs.py hold the cases' expectations)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_PY36 = Path.home() / ".pyenv" / "versions" / "3.6.15" / "bin" / "python"
_SCRUB = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); from envpin.probe import secrets; "
    "cases = json.loads(sys.stdin.read()); "
    "print(json.dumps([[secrets.scrub(c), secrets.secret_value(c), secrets.key_parts(c)] for c in cases]))"
)
_CASES = [
    "--password hunter2",
    "password:x",
    "privateKeyId=abc",
    "aB-cD_eF",
    "camelCaseName",
    "",
    "https://u:p/w@h/x",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "a:b:c",
    "--a --b c",
    "XMLHttpToken=z",
    '--password "a b" -v',
    'pw="a b"',
    "Authorization: token abcdef123456",
    "PGPASSWORD=x",
    "https://u:p@w@h/x@y",
]


@pytest.mark.skipif(not _PY36.exists(), reason="needs CPython 3.6.15 under pyenv (scripts/pythons.sh)")
def test_redaction_on_python_36_is_the_same_as_here() -> None:
    """re.split and empty matches differ between 3.6 and 3.7+; the probe must not (it runs in old images)."""
    repo = str(Path(__file__).resolve().parents[2])
    here = subprocess.run(
        [sys.executable, "-c", _SCRUB, repo], input=json.dumps(_CASES), capture_output=True, text=True, timeout=60
    )
    old = subprocess.run(
        [str(_PY36), "-W", "error", "-c", _SCRUB, repo],
        input=json.dumps(_CASES),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert old.returncode == 0, old.stderr
    assert json.loads(old.stdout) == json.loads(here.stdout)
