"""`envpin probe` on a host: the same collector as in images, files or stdout, the one-line error contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_probe_output_through_a_descriptor_or_a_link_is_written_into(tmp_path: Path) -> None:
    """-o /dev/fd/1 (or /dev/stdout) with stdout redirected to a file appends the report to that file, never
    renames a file over the descriptor's name; -o LINK to an existing file writes the file and the link stays:
    on the host and in the probe images run, as envpin.files.write does for every other output."""
    redirected = tmp_path / "redirected.txt"
    redirected.write_text("kept\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    commands = {
        "host": [str(Path(sys.executable).with_name("envpin")), "probe", "--no-selftest", "-o"],
        "image": [sys.executable, "-m", "envpin.probe", "--no-selftest", "--json"],
    }
    for where, command in commands.items():
        with redirected.open("a") as out:
            proc = subprocess.run(
                [*command, "/dev/fd/1"], stdout=out, stderr=subprocess.PIPE, text=True, env=env, timeout=120
            )
        assert proc.returncode == 0, (where, proc.stderr)
        text = redirected.read_text()
        assert text.startswith("kept\n") and text.count('"probe_schema"') == (1 if where == "host" else 2), where
    for where, command in commands.items():  # `> file`: the report and the summary after it, both whole
        with redirected.open("w") as out:
            proc = subprocess.run(
                [*command, "/dev/fd/1"], stdout=out, stderr=subprocess.PIPE, text=True, env=env, timeout=120
            )
        assert proc.returncode == 0, (where, proc.stderr)
        report, end = json.JSONDecoder().raw_decode(redirected.read_text())
        tail = redirected.read_text()[end:]
        assert report["probe_schema"] == 1 and report["fingerprint"].startswith("sha256:")
        assert tail == "\n" if where == "image" else tail.startswith(f"\nfingerprint {report['fingerprint']} ("), tail
    real = tmp_path / "real"
    real.mkdir()
    (real / "r.json").write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to("real/r.json")
    for command in commands.values():
        proc = subprocess.run([*command, str(link)], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert link.is_symlink() and json.loads((real / "r.json").read_text())["probe_schema"] == 1
        (real / "r.json").write_text("old\n")
