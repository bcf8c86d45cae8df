"""`envpin audit`: reproducibility hazards in existing Dockerfiles and Python training scripts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envpin.cli.options import Severity, command_app, output_file, value

audit_app = command_app()


@audit_app.command("audit")
def audit_cmd(
    dockerfiles: Annotated[
        list[Path], typer.Argument(help="Dockerfiles and Python training scripts (.py) to audit.", show_default=False)
    ],
    output: Annotated[
        str | None,
        typer.Option(
            "--format",
            metavar="tty|json|sarif|gcc|github",
            help="Output: one line per finding (tty, the default; gcc: path:line:col: level: message "
            "[rule]), GitHub workflow annotations, JSON, or SARIF 2.1.0 for code scanning.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    sarif: Annotated[bool, typer.Option("--sarif", help="Same as --format sarif.")] = False,
    fail_on: Annotated[
        Severity | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when a finding is at or above: error, warning (default) or "
            "info; default from [tool.envpin.audit] fail-on.",
        ),
    ] = None,
    context: Annotated[
        Path | None,
        typer.Option(
            "--context",
            metavar="DIR",
            help="Build context the requirement files are COPY'd from (default: each Dockerfile's folder).",
        ),
    ] = None,
    no_context: Annotated[
        bool, typer.Option("--no-context", help="Read the Dockerfiles only, not the files of the build context.")
    ] = False,
    no_config: Annotated[
        bool, typer.Option("--no-config", help="Ignore [tool.envpin.audit] in pyproject.toml.")
    ] = False,
    fix: Annotated[
        bool, typer.Option("--fix", help="Write a corrected file (<file>.envpin-fixed by default).")
    ] = False,
    fix_out: Annotated[
        Path | None,
        typer.Option("--fix-out", parser=output_file, metavar="FILE", help="Write the corrected file here."),
    ] = None,
    in_place: Annotated[bool, typer.Option("--in-place", help="With --fix: overwrite the input.")] = False,
    no_resolve: Annotated[
        bool, typer.Option("--no-resolve", help="With --fix: do not ask registries for digests; comment instead.")
    ] = False,
    build_args: Annotated[
        list[str] | None, typer.Option("--build-arg", help="NAME=VALUE, as given to docker build.")
    ] = None,
    target: Annotated[str | None, typer.Option("--target", help="Audit the image of this stage.")] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain", help="Also say, for each training script, why it was judged to train (the call and line)."
        ),
    ] = False,
    tf: Annotated[
        str | None,
        typer.Option(
            "--tf",
            help="TensorFlow MAJOR.MINOR for a base the catalog does not know, and "
            "for scripts when no Dockerfile of the run names one (before the lock's).",
        ),
    ] = None,
) -> None:
    """Report reproducibility hazards in Dockerfiles and training scripts with file:line, severity and the fix.

    Exit 0: nothing at or above --fail-on; 1: something is; 2: a file cannot be read or parsed.
    """
    # The parameters are envpin.api.audit_files's, which checks them; --json and --sarif are aliases of --format
    # (two different choices are an error only the command line can make), and each --no-X flag is the api's X.
    from envpin import api
    from envpin.errors import UsageError
    from envpin.views import audit, console

    chosen = {x for x in (output, "json" if as_json else None, "sarif" if sarif else None) if x is not None}
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(sorted(chosen))} output exclude each other", hint="choose one output format")
    res = api.audit_files(
        dockerfiles,
        output=chosen.pop() if chosen else "tty",
        fail_on=value(fail_on),
        build_args=build_args,
        target=target,
        tf=tf,
        fix=fix,
        fix_out=fix_out,
        in_place=in_place,
        resolve=not no_resolve,
        use_config=not no_config,
        context=context,
        read_context=not no_context,
        explain=explain,
    )
    audit.audited(res, fix, console.results(), console.notes())
    raise typer.Exit(res.exit_code)
