"""`envpin probe`, `diff` and `verify`: fingerprint a machine and compare fingerprints."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from envpin.cli.options import (
    Format,
    FormatOpt,
    Gpus,
    JsonOpt,
    QuickOpt,
    check_quick,
    command_app,
    output_file,
    value,
    wants_json,
)

probe_app = command_app()


@probe_app.command("probe")
def probe_cmd(
    out: Annotated[
        Path | None, typer.Option("--out", help="Write <hostname>-<UTC time>-<pid>.json and .md here.")
    ] = None,
    json_file: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", parser=output_file, metavar="FILE", help="Write the JSON report to FILE ('-': stdout)."
        ),
    ] = None,
    old_json: Annotated[
        Path | None,
        typer.Option(
            "--json", parser=output_file, metavar="FILE", help="Deprecated spelling of --output FILE.", hidden=True
        ),
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option(
            "--markdown", parser=output_file, metavar="FILE", help="Write the Markdown report to FILE ('-': stdout)."
        ),
    ] = None,
    with_tf: Annotated[
        bool, typer.Option("--with-tf", help="Import TensorFlow to read its runtime settings (slow).")
    ] = False,
    selftest: Annotated[
        bool | None,
        typer.Option(
            "--selftest/--no-selftest",
            help="The determinism self-test: opt-in on this machine; with --image it runs by "
            "default where the image has TensorFlow.",
        ),
    ] = None,
    quick: QuickOpt = False,
    anonymize: Annotated[
        bool, typer.Option("--anonymize", help="Replace host name, user name and home folder by placeholders.")
    ] = False,
    image: Annotated[
        str | None,
        typer.Option(
            "--image", metavar="IMAGE", help="Probe inside a container of IMAGE (reports to --out, default ./reports)."
        ),
    ] = None,
    gpus: Annotated[
        Gpus, typer.Option("--gpus", help="With --image: GPUs when the host has the NVIDIA runtime or CDI (auto).")
    ] = Gpus.auto,
    replicas: Annotated[
        int | None,
        typer.Option("--replicas", metavar="N", help="Self-test: also the multi-replica self-test over N devices."),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="Self-test: CPU seconds each child may use (default: ENVPIN_SELFTEST_TIMEOUT or 600; wall 4x).",
        ),
    ] = None,
    fmt: Annotated[
        Format | None,
        typer.Option(
            "--format",
            help="What stdout shows when no file is named: text (a summary) or json (the report); "
            "default: text on a terminal, json in a pipe or file.",
        ),
    ] = None,
    check_files: Annotated[
        bool,
        typer.Option(
            "--check-files",
            help="Hash every installed file against its RECORD (seconds with TensorFlow; --image always does).",
        ),
    ] = False,
) -> None:
    """Record everything on this machine that can change a training result: its JSON report on stdout in a
    pipe or file, a summary on a terminal (--format json for the report there).

    With --image, the probe runs inside a container of that image instead (any NGC image: nothing is
    installed), with GPUs when this host can give them; exit 1 when the probe fails in the container."""
    from envpin import api
    from envpin.errors import UsageError
    from envpin.views import console, probe

    if old_json is not None:
        if json_file is not None:
            raise UsageError(
                "--json FILE is the old spelling of --output FILE; give one of them", hint="use --output FILE (-o FILE)"
            )
        console.say(console.err(), "warning: --json FILE is deprecated; use --output FILE (-o FILE)")
        json_file = old_json
    if fmt is Format.json and image is None:
        if json_file is not None and str(json_file) != "-":
            raise UsageError(
                "--format json prints the JSON report on stdout, and --output FILE writes it to FILE",
                hint="give one of them (--output - is stdout too)",
            )
        json_file = Path("-")
    stdout_report = image is None and "-" in (str(json_file), str(markdown))
    if fmt is Format.text and stdout_report:
        raise UsageError(
            "--format text shows a summary on stdout, and '-' writes the report there",
            hint="write the report to a file, or drop --format text",
        )
    # A summary only where nothing else takes stdout: the report asked for in a file or folder leaves it the
    # lines that say where the report went.
    summary = fmt is Format.text or (fmt is None and console.stdout_is_terminal())
    # Progress around a container (pull, start) and around this machine's self-test, which ends it before the
    # report is written: a host probe alone takes a tenth of a second.
    request: api.HostProbeRequest | api.ImageProbeRequest
    if image is None:
        request = api.HostProbeRequest(
            out=out,
            json_file=json_file,
            markdown=markdown,
            with_tf=with_tf,
            selftest=bool(selftest),
            quick=quick,
            anonymize=anonymize,
            replicas=replicas,
            timeout=timeout,
            summary=summary,
            check_files=check_files,
        )
    elif json_file or markdown or with_tf or fmt is Format.json:
        raise UsageError(
            "--image writes both reports into --out; --output, --markdown, --format json and --with-tf are for "
            "probing this machine",
            hint="drop them, or give --out DIR",
        )
    else:
        check_quick(selftest, quick)
        request = api.ImageProbeRequest(
            image=image,
            out=out,
            gpus=str(value(gpus)),
            selftest=selftest,
            quick=quick,
            anonymize=anonymize,
            replicas=replicas,
            timeout=timeout,
        )
    title = f"probing {image}" if image else "probing this machine" if selftest else None
    with console.progress(title) if title else contextlib.nullcontext(None) as update:
        res = api.run_probe(request, progress=update)
    if isinstance(res, api.ProbeResult):
        probe.probed(res, console.out(), console.err())
        if res.exit_code == 2:
            raise _unfinished(res.selftest)
        raise typer.Exit(res.exit_code)
    probe.image_probed(res, console.out(), console.err())
    if res.timed_out:
        raise _unfinished(res.selftest)
    raise typer.Exit(0 if res.exit_code == 0 else 1)


def _unfinished(line: str | None) -> Exception:
    """A self-test that ran out of time: inconclusive, exit 2 (never a failed check)."""
    from envpin.errors import SelftestTimeout

    return SelftestTimeout(
        line or "self-test timed out (inconclusive)",
        hint="raise --timeout (CPU seconds per self-test child) or run on a less loaded machine",
    )


diff_app = command_app()


@diff_app.command("diff")
def diff_cmd(
    a: Annotated[Path, typer.Argument(help="First probe report (JSON).")],
    b: Annotated[Path, typer.Argument(help="Second probe report (JSON).")],
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """Classify every difference between two reports. Exit 0: none breaking; 1: some breaking."""
    from envpin import api
    from envpin.views import console, diff

    res = api.diff_files(a, b)
    diff.differences(res, wants_json(fmt, as_json), console.out())
    raise typer.Exit(res.exit_code)


verify_app = command_app()


@verify_app.command("verify")
def verify_cmd(
    lock: Annotated[
        Path | None,
        typer.Option(
            "--lock",
            help="The envpin.lock (or its folder); default: ./envpin.lock, else the only images/*/envpin.lock.",
        ),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Check this report instead of probing the lock's image.")
    ] = None,
    host: Annotated[
        bool, typer.Option("--host", help="Probe this machine instead of the lock's image, on purpose.")
    ] = False,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="Record the result as the reference (first time) and its golden hash; "
            "a report that contradicts the lock is refused.",
        ),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="With --record: record a report that contradicts the lock anyway.")
    ] = False,
) -> None:
    """Compare the lock's image (or a report, or this machine) with the lock's reference fingerprint and
    golden hashes.

    Without --report or --host the image built here from the lock is probed in a throwaway container.
    Exit 0: no breaking difference; 1: some breaking; 2: bad input."""
    from envpin import api
    from envpin.views import console, diff

    # the lock's image starts a container; the host's probe hashes every installed file (seconds)
    title = None if report is not None else "probing this machine" if host else "probing the lock's image"
    with console.progress(title) if title else contextlib.nullcontext(None) as update:
        res = api.verify_environment(lock, report, record, host=host, force=force, progress=update)
    diff.verification(res, wants_json(fmt, as_json), console.out(), console.err())
    raise typer.Exit(res.exit_code)
