"""CLI adapters for the probe: ``envpin probe``, ``envpin diff`` and ``envpin verify``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from envpin import diff as diffing
from envpin import probe
from envpin.console import err, print_json
from envpin.errors import UsageError


def _show(diffs: list[diffing.Difference], as_json: bool, a_label: str, b_label: str, **extra: Any) -> None:
    """Verdict line first (stderr), then the table (stderr) or the JSON document (stdout)."""
    err.print(diffing.verdict(diffs), markup=False, highlight=False, soft_wrap=True)
    if as_json:
        print_json(diffing.to_json(diffs, **extra))
    elif diffs:
        err.print(diffing.table(diffs, a_label, b_label))


def register(app: typer.Typer) -> None:
    """Add probe, diff and verify to the envpin application."""

    @app.command("probe")
    def probe_cmd(
        out: Annotated[
            Path | None, typer.Option("--out", help="Write <hostname>-<UTC time>-<pid>.json and .md here.")
        ] = None,
        json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON report to FILE.")] = None,
        markdown: Annotated[
            Path | None, typer.Option("--markdown", help="Write the Markdown report to FILE.")
        ] = None,
        with_tf: Annotated[
            bool, typer.Option("--with-tf", help="Import TensorFlow to read its runtime settings (slow).")
        ] = False,
        selftest: Annotated[
            bool, typer.Option("--selftest", help="Also run the determinism self-test (imports TensorFlow).")
        ] = False,
    ) -> None:
        """Record everything on this machine that can change a training result (JSON on stdout by default)."""
        report = probe.collect(selftest=selftest, with_tf=with_tf)
        try:
            written = probe.write_reports(
                report,
                out_dir=str(out) if out else None,
                json_path=str(json_file) if json_file else None,
                markdown_path=str(markdown) if markdown else None,
            )
        except OSError as exc:
            raise UsageError(f"cannot write the report: {exc}", hint="check the output path") from None
        errors = report["probe"]["errors"]["value"]
        err.print(
            f"fingerprint {report['fingerprint']} ({len(probe.fingerprint_fields(report))} fingerprinted "
            f"fields, {len(errors)} with errors)",
            markup=False,
            soft_wrap=True,
        )
        for path in written:
            err.print(f"wrote {path}", markup=False, soft_wrap=True)

    @app.command("diff")
    def diff_cmd(
        a: Annotated[Path, typer.Argument(help="First probe report (JSON).")],
        b: Annotated[Path, typer.Argument(help="Second probe report (JSON).")],
        as_json: Annotated[bool, typer.Option("--json", help="Print the differences as JSON on stdout.")] = False,
    ) -> None:
        """Classify every difference between two reports. Exit 0: none breaking; 1: some breaking."""
        ra, rb = diffing.load_report(a), diffing.load_report(b)
        diffs = diffing.diff_reports(ra, rb)
        _show(
            diffs, as_json, a.name, b.name,
            a=str(a), b=str(b), fingerprint={"a": ra.get("fingerprint"), "b": rb.get("fingerprint")},
        )
        raise typer.Exit(diffing.exit_code(diffs))

    @app.command("verify")
    def verify_cmd(
        lock: Annotated[Path, typer.Option("--lock", help="Lock file holding [expected].")] = Path("envpin.lock"),
        report: Annotated[
            Path | None, typer.Option("--report", help="Check this report instead of probing live.")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
        record: Annotated[
            bool,
            typer.Option("--record", help="Record this machine as the reference (first time) and its golden hash."),
        ] = False,
    ) -> None:
        """Compare this machine (or a report) with the lock's expected fingerprint. Exit 0: no breaking
        difference; 1: some breaking."""
        from envpin import lockfile

        actual = diffing.load_report(report) if report else probe.collect()
        if record:
            done = diffing.record(lock, actual)
            err.print("recorded: " + ("; ".join(done) if done else "nothing new (already in the lock)"))
            if not done:
                return
        expected_fp, expected_fields = diffing.read_lock_expected(lock)
        diffs = diffing.verify_report(expected_fp, expected_fields, actual)
        diffs += diffing.golden_differences(lockfile.read(lock), actual)
        _show(
            diffs, as_json, "expected (lock)", "actual",
            lock=str(lock), report=str(report) if report else "live probe",
            fingerprint={"expected": expected_fp, "actual": probe.fingerprint(actual)},
        )
        raise typer.Exit(diffing.exit_code(diffs))
