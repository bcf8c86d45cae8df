"""`envpin probe` on a host: the same collector as in images, files or stdout, the one-line error contract."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import envpin.probe as probe_package
from envpin import api
from envpin.errors import EnvpinError
from envpin.probe import fingerprint, load_schema


def test_probe_writes_out_dir_and_markdown(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("probe", "--out", str(tmp_path / "reports"), "--markdown", str(tmp_path / "r.md"))
    assert res.code == 0, res.stderr
    assert res.stderr == ""  # the reports went to files: the summary is the result
    files = sorted((tmp_path / "reports").iterdir())
    assert [p.suffix for p in files] == [".json", ".md"]
    report = json.loads(files[0].read_text())
    jsonschema.validate(report, load_schema())
    assert report["fingerprint"] == fingerprint(report)
    assert res.stdout.splitlines()[0].startswith(f"fingerprint {report['fingerprint']} (")
    md = (tmp_path / "r.md").read_text()
    assert f"- fingerprint: `{report['fingerprint']}`" in md
    for section in ("cpu", "gpu", "env", "packages", "tensorflow", "cuda"):
        assert f"\n## {section}\n" in md


def test_probe_json_on_stdout(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("probe")
    assert res.code == 0, res.stderr
    jsonschema.validate(json.loads(res.stdout), load_schema())


def test_probe_unwritable_output(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("probe", "-o", "/proc/envpin-report.json")  # a folder that exists and takes no new files, even for root
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2 and lines[0].startswith("error: cannot write the report")
    assert len(lines) == 2 and lines[1].startswith("hint: ") and res.stdout == ""


def test_host_probe_leaves_the_self_test_out_unless_asked(cli) -> None:  # type: ignore[no-untyped-def]
    """On this machine the self-test is opt-in (it is the default only inside images)."""
    res = cli("probe")
    assert res.code == 0 and "selftest" not in json.loads(res.stdout)
    quick_alone = cli("probe", "--quick")
    assert quick_alone.code == 2 and quick_alone.stdout == ""
    assert quick_alone.stderr.splitlines() == [
        "error: --quick shortens the self-test, which runs on this machine only with --selftest",
        "hint: add --selftest, or drop --quick",
    ]


def test_probe_out_that_is_a_file_is_refused_before_the_probe_runs(
    cli,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--out names a folder: a file (or a device) there is refused up front, as `probe --image --out` does,
    not after the probe (and a self-test) has run."""
    (tmp_path / "taken").write_text("mine\n")
    for target in (tmp_path / "taken", Path("/dev/null")):
        res = cli("probe", "--no-selftest", "--out", str(target))
        assert res.code == 2 and res.stdout == "", res
        assert res.stderr.splitlines() == [
            f"error: --out: {target} exists and is not a folder",
            "hint: choose another --out",
        ]
    assert (tmp_path / "taken").read_text() == "mine\n"
    called: list[dict[str, object]] = []
    monkeypatch.setattr(probe_package, "collect", lambda **kw: called.append(kw))
    with pytest.raises(EnvpinError, match="exists and is not a folder"):
        api.probe_machine(out=tmp_path / "taken")
    assert called == []  # refused before the collector ran


@pytest.mark.parametrize("same", [("r.out", "r.out"), ("r.out", "./r.out"), ("-", "-")])
def test_output_and_markdown_naming_one_file_are_refused_before_the_probe_runs(
    cli,  # type: ignore[no-untyped-def]
    same: tuple[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both reports into one file (or both to stdout) would leave only the Markdown: refused up front, on the
    host and by the probe inside images (its program's main, in-process), and nothing is written."""
    res = cli("probe", "--no-selftest", "-o", same[0], "--markdown", same[1], cwd=tmp_path)
    assert res.code == 2 and res.stdout == "", res
    where = "stdout" if same[0] == "-" else same[0]
    assert res.stderr.splitlines() == [
        f"error: --output and --markdown both name {where}: one report would replace the other",
        "hint: give each report its own file",
    ]
    from envpin.probe.__main__ import main as probe_main

    code = probe_main(["--no-selftest", "--json", same[0], "--markdown", same[1]])  # the cli fixture chdir'd
    inner = capsys.readouterr()
    assert code == 2 and inner.out == "", inner
    assert inner.err.splitlines() == [
        f"error: --json and --markdown both name {where}: one report would replace the other",
        "hint: give each report its own file",
    ]
    assert list(tmp_path.iterdir()) == []
