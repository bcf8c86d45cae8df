"""Forty-odd secrets planted in the environment in the forms they take in practice never reach the JSON,
the Markdown or stdout; --anonymize replaces host name, user name and home folder everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_probe_run import run_probe
from tests.unit.test_secrets_planted import PLANTED, planted_nccl_conf


def test_forty_planted_secrets_never_reach_any_output(tmp_path: Path) -> None:
    env = {name: value for name, (value, _) in PLANTED.items()}
    res = run_probe(
        "--out",
        str(tmp_path / "out"),
        "--json",
        str(tmp_path / "r.json"),
        "--markdown",
        str(tmp_path / "r.md"),
        env=env,
    )
    assert res.returncode == 0, res.stderr
    stdout = run_probe(env=env)
    blobs = {p.name: p.read_text() for p in [*(tmp_path / "out").iterdir(), tmp_path / "r.json", tmp_path / "r.md"]}
    blobs["stdout"], blobs["stderr"] = stdout.stdout, res.stderr + stdout.stderr
    leaks = [(name, where) for name, (_, secret) in PLANTED.items() for where, text in blobs.items() if secret in text]
    assert leaks == []
    report = json.loads((tmp_path / "r.json").read_text())
    # Useful context survives redaction: the flag list keeps its other flags and the parameter names.
    assert report["env"]["XLA_FLAGS"]["value"] == "--xla_dump_to=/tmp/x --some_token=<redacted>"
    assert "present" in report["env"]["TF_GCS_CRED"] and report["env"]["TF_GCS_CRED"]["redacted"] is True


def test_anonymize_replaces_host_user_and_home_everywhere(tmp_path: Path) -> None:
    home = tmp_path / "home" / "alice"
    (home / "lib").mkdir(parents=True)
    env = {
        "HOME": str(home),
        "USER": "alice",
        "PYTHONPATH": f"{home}/lib:/opt/x",
        "TF_OWNER": "alice",
        "TF_DATA": "/srv/alice/data",
        "TF_NOTE": "alice and bob share a gpu",
    }
    res = run_probe("--json", str(tmp_path / "r.json"), "--anonymize", env=env)
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "r.json").read_text()
    report = json.loads(text)
    assert str(home) not in text
    assert report["host"]["hostname"]["value"] == "<host>"
    assert os.uname().nodename not in json.dumps(report["host"])
    assert report["env"]["PYTHONPATH"]["value"] == "<home>/lib:/opt/x"
    assert report["env"]["TF_OWNER"]["value"] == "<user>"
    assert report["env"]["TF_DATA"]["value"] == "/srv/<user>/data"
    # Words inside other text are left alone: a user named like a common word must not rewrite reports.
    assert report["env"]["TF_NOTE"]["value"] == "alice and bob share a gpu"
    assert report["probe"]["options"]["value"]["anonymize"] is True


def test_anonymized_reports_are_named_host(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    res = subprocess.run(
        [sys.executable, "-m", "envpin.probe", "--no-selftest", "--anonymize", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert all(p.name.startswith("host-") for p in out.iterdir())


def test_planted_secrets_in_nccl_conf_files_never_reach_any_output(tmp_path: Path) -> None:
    """The same secrets in ~/.nccl.conf and in the file NCCL_CONF_FILE names (which replaces it), through the
    real probe: JSON, Markdown and stdout."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text(planted_nccl_conf())
    (tmp_path / "job.conf").write_text(planted_nccl_conf())
    for env in ({"HOME": str(home)}, {"HOME": str(home), "NCCL_CONF_FILE": str(tmp_path / "job.conf")}):
        out = tmp_path / ("job" if "NCCL_CONF_FILE" in env else "home")
        res = run_probe("--json", str(out) + ".json", "--markdown", str(out) + ".md", env=env)
        assert res.returncode == 0, res.stderr
        stdout = run_probe(env=env)
        report = json.loads(Path(str(out) + ".json").read_text())
        assert any(k.startswith("nccl.conf.") for k in report["distributed"])  # the file was read
        blobs = {"json": Path(str(out) + ".json").read_text(), "md": Path(str(out) + ".md").read_text()}
        blobs["stdout"], blobs["stderr"] = stdout.stdout, res.stderr + stdout.stderr
        leaks = [(n, w) for n, (_, secret) in PLANTED.items() for w, text in blobs.items() if secret in text]
        assert leaks == []
