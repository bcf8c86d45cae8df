"""A probe report in --out is never replaced by another probe's: two reports of one host in one second as
the same pid (containers that share the host's name run the probe as pid 1) get -2, -3, not one name."""

from __future__ import annotations

from pathlib import Path

from envpin.probe.report import report_basename, write_reports


def _report(pid: int = 1) -> dict:
    return {
        "host": {
            "hostname": {"value": "gpu-a01"},
            "time_utc": {"value": "2026-12-04T20:00:00Z"},
            "pid": {"value": pid},
        },
        "fingerprint": "sha256:" + "0" * 64,
    }


def test_a_second_report_of_the_same_name_takes_the_next_free_one(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    stem = report_basename(_report())
    assert stem == "gpu-a01-20261204T200000Z-1"
    first = write_reports(_report(), out_dir=str(out))
    second = write_reports(_report(), out_dir=str(out))
    third = write_reports(_report(), out_dir=str(out))
    assert [Path(p).name for p in first] == [f"{stem}.json", f"{stem}.md"]
    assert [Path(p).name for p in second] == [f"{stem}-2.json", f"{stem}-2.md"]
    assert [Path(p).name for p in third] == [f"{stem}-3.json", f"{stem}-3.md"]
    assert len(list(out.iterdir())) == 6
    other = write_reports(_report(pid=7), out_dir=str(out))  # another process: its own name, no suffix
    assert [Path(p).name for p in other] == [
        f"{report_basename(_report(pid=7))}.json",
        f"{report_basename(_report(pid=7))}.md",
    ]
