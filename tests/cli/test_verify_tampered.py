"""Two scratch environments probed for real, one of them tampered with: `diff` and `verify` fail naming it.

The probe runs as in an image (`python -S -m envpin.probe`, the checkout and the scratch site-packages on
PYTHONPATH and nothing else), so it reads these environments and not the development one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from envpin.environment.plan import make_plan
from envpin.environment.render import render, write_environment
from tests.conftest import REPO
from tests.unit.lock_reports import as_lock_image
from tests.unit.test_probe_installed import make_site


def _probe(site: Path, out: Path) -> dict[str, Any]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": f"{REPO}{os.pathsep}{site}"}
    res = subprocess.run(
        [sys.executable, "-S", "-m", "envpin.probe", "--json", str(out)],
        env=env,
        cwd=site.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_diff_and_verify_name_the_tampered_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clean_site, bad_site = make_site(tmp_path / "clean"), make_site(tmp_path / "bad")
    (bad_site / "demo" / "core.py").write_bytes(b"def add(a, b):\n    return a - b\n")
    (bad_site / "sitecustomize.py").write_text("import os\nos.environ['TF_DETERMINISTIC_OPS'] = '0'\n")
    clean = _probe(clean_site, tmp_path / "clean.json")
    bad = _probe(bad_site, tmp_path / "bad.json")
    assert "tensorflow" in clean["selftest"]["skipped"].lower()  # no TensorFlow: the self-test did not run

    res = cli("diff", str(tmp_path / "clean.json"), str(tmp_path / "bad.json"), "--json")
    assert res.code == 1, res.stdout
    found = {d["key"]: d for d in json.loads(res.stdout)["differences"]}
    assert found["packages.changed"]["b"] == '["demo: demo/core.py"]'
    assert found["packages.changed"]["severity"] == "breaking"
    assert "sitecustomize.py" in found["packages.startup_hooks"]["b"]

    folder = tmp_path / "env"
    plan = make_plan(ngc="20.02", tf="2.1")
    write_environment(folder, plan, render(plan))
    lock = folder / "envpin.lock"
    reference, subject = tmp_path / "reference.json", tmp_path / "subject.json"
    reference.write_text(json.dumps(as_lock_image(clean, lock)))
    subject.write_text(json.dumps(as_lock_image(bad, lock)))
    rec = cli("verify", "--lock", str(lock), "--report", str(reference), "--record")
    assert rec.code == 0, rec.stderr
    first = rec.stdout.splitlines()
    assert first[0] == "identical in what was compared (1 thing not compared)"
    assert any(line.startswith("compared: 2 installed files of 1 distributions") for line in first)
    assert any(
        line.startswith("not compared: golden training hash: none recorded or checked (no self-test ran: ")
        for line in first
    ), first
    res = cli("verify", "--lock", str(lock), "--report", str(subject))
    assert res.code == 1, res.stdout
    assert res.stdout.splitlines()[0].startswith("2 breaking differences")
    doc = json.loads(cli("verify", "--lock", str(lock), "--report", str(subject), "--json").stdout)
    named = {d["key"]: d["b"] for d in doc["differences"] if d["severity"] == "breaking"}
    assert (
        named["packages.changed"] == '["demo: demo/core.py"]' and "sitecustomize.py" in named["packages.startup_hooks"]
    )
