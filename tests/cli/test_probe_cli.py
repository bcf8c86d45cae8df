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


def test_on_a_terminal_probe_sums_the_report_up_and_gives_json_elsewhere(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """stdout a terminal (a pseudo-terminal here): a summary of a dozen lines, not the report's hundreds of
    lines of JSON, and stderr says how to get it; a pipe, a file or --format json get the JSON."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("envpin")), "probe"], stdout=follower, stderr=subprocess.PIPE, text=True
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    _, stderr = proc.communicate(timeout=120)
    lines = shown.decode().splitlines()
    assert proc.returncode == 0 and lines[0].startswith("fingerprint sha256:") and len(lines) < 20, lines
    assert any(line.startswith("  python:") for line in lines) and '"probe_schema"' not in shown.decode()
    assert "the whole report: --format json" in stderr
    as_json = cli("probe", "--format", "json")  # and what a pipe gets without asking (test_cli_conventions)
    assert as_json.code == 0 and json.loads(as_json.stdout)["probe_schema"] == 1
    as_text = cli("probe", "--format", "text")
    assert as_text.code == 0 and as_text.stdout.startswith("fingerprint sha256:") and "  os:" in as_text.stdout
    both = cli("probe", "--format", "json", "-o", str(tmp_path / "r.json"))
    assert both.code == 2 and "--format json prints the JSON report on stdout" in both.stderr
    assert not (tmp_path / "r.json").exists()
