"""CLI adapter for ``envpin audit``: reproducibility hazards in existing Dockerfiles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envpin.console import err, print_json
from envpin.errors import UsageError


def register(app: typer.Typer) -> None:
    """Add `audit` to the envpin application."""

    @app.command("audit")
    def audit_cmd(
        dockerfiles: Annotated[list[Path], typer.Argument(help="Dockerfiles to audit.", show_default=False)],
        as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON on stdout.")] = False,
        sarif: Annotated[bool, typer.Option("--sarif", help="Print SARIF 2.1.0 on stdout (code scanning).")] = False,
        fail_on: Annotated[
            str, typer.Option("--fail-on", help="Exit 1 when a finding is at or above: error, warning or info.")
        ] = "warning",
        fix: Annotated[
            bool, typer.Option("--fix", help="Write a corrected Dockerfile (<file>.envpin-fixed by default).")
        ] = False,
        fix_out: Annotated[Path | None, typer.Option("--fix-out", help="Write the corrected file here.")] = None,
        in_place: Annotated[bool, typer.Option("--in-place", help="With --fix: overwrite the input.")] = False,
        no_resolve: Annotated[
            bool, typer.Option("--no-resolve", help="With --fix: do not ask registries for digests; comment instead.")
        ] = False,
        build_arg: Annotated[
            list[str] | None, typer.Option("--build-arg", help="NAME=VALUE, as given to docker build.")
        ] = None,
        target: Annotated[str | None, typer.Option("--target", help="Audit the image of this stage.")] = None,
        tf: Annotated[
            str | None, typer.Option("--tf", help="TensorFlow MAJOR.MINOR for a base the catalog does not know.")
        ] = None,
    ) -> None:
        """Report reproducibility hazards in Dockerfiles with file:line, severity and the fix.

        Exit 0: nothing at or above --fail-on; 1: something is; 2: a file cannot be read or parsed.
        """
        from envpin import audit
        from envpin.audit import report

        if as_json and sarif:
            raise UsageError("--json and --sarif exclude each other", hint="choose one output format")
        if no_resolve and not fix:
            raise UsageError("--no-resolve only makes sense with --fix", hint="add --fix")
        resolve = None
        if fix and not no_resolve:
            from envpin.registry import RegistryClient

            resolve = RegistryClient().resolve_digest
        result = audit.run(
            [str(p) for p in dockerfiles],
            fail_on=fail_on,
            build_args=audit.parse_build_args(build_arg or []),
            target=target,
            tf=tf,
            do_fix=fix,
            fix_out=fix_out,
            in_place=in_place,
            resolve=resolve,
        )
        for done in result.fixed:
            o = done.outcome
            err.print(
                f"{done.source}: fixed {len(o.fixed)} finding(s), commented {len(o.commented)}; wrote {done.output}",
                markup=False, highlight=False, soft_wrap=True,
            )
            for action in o.actions:
                err.print(f"  {action}", markup=False, highlight=False, soft_wrap=True)
        if sarif:
            print_json(report.to_sarif(result.findings))
        elif as_json:
            fixed = [
                {"source": d.source, "output": d.output, "fixed": [f.to_json() for f in d.outcome.fixed],
                 "commented": [f.to_json() for f in d.outcome.commented], "actions": d.outcome.actions}
                for d in result.fixed
            ] if fix else None
            print_json(report.to_json(result.findings, result.files, fail_on, result.exit_code, fixed))
        elif result.findings:
            err.print(report.table(result.findings))
        prefix = "left in the fixed files: " if fix else ""
        err.print(prefix + report.summary_line(result.findings, len(result.files)),
                  markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(result.exit_code)
