"""A user's script that calls envpin.api type-checks under `mypy --strict`, run in-process (mypy.api.run).

The script reads results the way a user does (a finding's rule, a catalog entry, a recipe, a diff, a fleet
report, a diagnosis) inside functions with declared return types, so an `Any` that leaks out of the api is
an error ("Returning Any") rather than silently accepted. mypy runs outside the repository with no
configuration file, as in a user's project: envpin is the installed package this interpreter imports.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api as mypy_api

import envpin.api

#: What a user writes: every envpin.api value it touches flows into a declared type.
USER_SCRIPT = '''\
"""A user's script against envpin's public API."""

from __future__ import annotations

from pathlib import Path

from envpin import api


def audit_rule() -> tuple[str, str, int, int]:
    res = api.audit_files([Path("Dockerfile")], fail_on="warning")
    finding = res.findings[0]
    return finding.rule, finding.severity, finding.line, res.exit_code


def catalog_image() -> tuple[str, str]:
    entry = api.catalog_entries(tf="2.1")[0]
    return entry.image, entry.release


def recipe() -> tuple[str, str]:
    res = api.recipe_for("20.02", None)
    assert res.entry is not None  # None: a recipe for a TensorFlow no image holds (recipe --tf 2.17)
    return res.entry.tag, str(res.recipe.env)


def diff() -> tuple[str, str, str | None, str | None, int]:
    res = api.diff_files(Path("a.json"), Path("b.json"))
    first = res.diffs[0]
    return first.key, first.severity, first.a, res.fingerprint_a, res.exit_code


def verify() -> tuple[str, int, list[str], Path]:
    res = api.verify_environment(Path("envpin.lock"), report=Path("a.json"))
    return res.expected_fingerprint, res.exit_code, res.notes, res.lock


def probe() -> tuple[str, list[str], int, str | None]:
    res = api.probe_machine(json_file=Path("report.json"))
    return res.fingerprint, res.written, res.exit_code, res.selftest


def fleet() -> tuple[str, int, list[str], str, Path | None]:
    res = api.fleet_report([Path("reports")], expect=4)
    result = res.result
    return result.verdict(), res.exit_code, [n.name for n in result.nodes], result.classes[0].fingerprint, res.html


def manifest() -> tuple[str, list[str]]:
    res = api.fleet_manifest(kubernetes=True, image="nvcr.io/nvidia/tensorflow:24.05-tf2-py3")
    return res.text, res.warnings


def slurm() -> tuple[str | None, str, list[str], int]:
    res = api.probe_fleet(slurm=True, nodes=2, slurm_args=["--account=ml"])
    return res.job_id, res.partition, [o.status for o in res.outcomes], res.exit_code


def doctor() -> tuple[str, int, str, str | None, str]:
    d = api.diagnose_host(ngc="22.06")
    return d.verdict, d.exit_code, d.checks[0].name, d.readings.driver_version, d.target.image
'''

#: Two mistakes a checker must catch: a rule id is a str, a diff side may be None.
MISTAKES = """

def wrong_rule() -> int:
    return api.audit_files([Path("Dockerfile")]).findings[0].rule


def wrong_side() -> str:
    return api.diff_files(Path("a.json"), Path("b.json")).diffs[0].a
"""


def _mypy(script: Path) -> tuple[int, list[str]]:
    """mypy --strict on `script` alone, as a user runs it: no configuration file, its own cache."""
    out, err, rc = mypy_api.run(
        ["--strict", "--config-file", "", "--cache-dir", str(script.parent / ".mypy_cache"), str(script)]
    )
    assert err == "", err
    return rc, [line for line in out.splitlines() if ": error: " in line]


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project: outside the repository, so mypy finds no configuration of envpin's."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_users_script_type_checks_strictly(user_dir: Path) -> None:
    """...and mypy sees every public name (each is exported explicitly, not found by a run-time hook)."""
    every = ", ".join(f"api.{name}" for name in envpin.api.__all__)
    script = user_dir / "user.py"
    script.write_text(USER_SCRIPT + f"\n\ndef every_name() -> list[object]:\n    return [{every}]\n")
    rc, errors = _mypy(script)
    assert (rc, errors) == (0, [])


def test_the_types_are_real_a_mistake_is_caught(user_dir: Path) -> None:
    """The check above is not vacuous: the api's types reach the script, so mismatches are errors."""
    script = user_dir / "user.py"
    script.write_text(USER_SCRIPT + MISTAKES)
    rc, errors = _mypy(script)
    base = USER_SCRIPT.count("\n")
    assert rc == 1 and errors == [
        f'user.py:{base + 4}: error: Incompatible return value type (got "str", expected "int")  [return-value]',
        f'user.py:{base + 8}: error: Incompatible return value type (got "str | None", expected "str")  [return-value]',
    ]
