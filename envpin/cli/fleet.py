"""`envpin fleet report`, `fleet manifest`, `fleet probe --slurm` and `fleet selftest --slurm`: many machines
at once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envpin.cli import LazyGroup
from envpin.cli.options import (
    FleetSlurmOpt,
    Format,
    FormatOpt,
    JsonOpt,
    PartitionOpt,
    QuickOpt,
    SallocArgOpt,
    check_quick,
    command_app,
    output_file,
    wants_json,
)

fleet_app = command_app(
    name="fleet",
    cls=LazyGroup,
    help="Compare the probe reports of many machines; probe every GPU node of a cluster.",
    no_args_is_help=True,
)
report_app = command_app()
manifest_app = command_app()
probe_app = command_app()
selftest_app = command_app()


@fleet_app.callback()
def fleet() -> None:
    """The fleet commands (the group's help is fleet_app's)."""


@report_app.command("report")
def fleet_report(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="DIR|FILE...",
            help="Probe reports or folders of them (*.json, *.log, "
            "*.error.txt), 'kubectl logs --prefix' output, "
            "'kubectl get pods -o json'.",
        ),
    ],
    fmt: FormatOpt = Format.text,
    as_json: JsonOpt = False,
    html: Annotated[
        Path | None,
        typer.Option("--html", parser=output_file, metavar="FILE", help="Also write a self-contained HTML report."),
    ] = None,
    expect: Annotated[
        int | None,
        typer.Option("--expect", metavar="N", help="The fleet has N nodes: fewer (or more) found fails the report."),
    ] = None,
    expect_nodes: Annotated[
        Path | None,
        typer.Option(
            "--expect-nodes",
            metavar="FILE",
            help="The fleet's nodes, one name per line: a node listed there without a "
            "report or error file, or found but not listed, fails the report.",
        ),
    ] = None,
) -> None:
    """Group nodes into classes of identical result-affecting fields; show the fields that separate them,
    the outliers and the golden hashes per device class. Slurm's <node>.error.txt files count as failed
    or timed-out nodes.

    Exit 0: every node probed and consistent; 1: a breaking difference, or a node failed, timed out, is
    missing (--expect, --expect-nodes) or was not expected; 2: bad input."""
    from envpin import api
    from envpin.views import console, fleet

    chosen = "json" if wants_json(fmt, as_json) else "text"
    res = api.fleet_report(paths, html=html, expect=expect, expect_nodes=expect_nodes)
    if res.html is not None:  # the api checked the path; the view draws the page; written here, atomically
        from envpin.files.write import atomic_write

        atomic_write(res.html, fleet.html_page(res.result), make_parents=False)
    fleet.report(res, chosen, console.out(), console.err())
    raise typer.Exit(res.exit_code)


@manifest_app.command("manifest")
def fleet_manifest(
    kubernetes: Annotated[
        bool, typer.Option("--kubernetes", help="A DaemonSet that runs the probe on every NVIDIA GPU node.")
    ] = False,
    image: Annotated[
        str | None,
        typer.Option(
            "--image", metavar="IMAGE", help="Image to probe in, best pinned by digest (default: the newest NGC tf2)."
        ),
    ] = None,
    namespace: Annotated[str, typer.Option("--namespace", metavar="NS", help="Kubernetes namespace.")] = "default",
    out: Annotated[
        Path | None, typer.Option("--out", parser=output_file, metavar="FILE", help="Write here instead of stdout.")
    ] = None,
    selftest: Annotated[
        bool | None,
        typer.Option(
            "--selftest/--no-selftest",
            help="The determinism self-test runs by default where the image has TensorFlow "
            "(golden hashes); --selftest insists, --no-selftest leaves it out.",
        ),
    ] = None,
    quick: QuickOpt = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            metavar="N",
            help="Instead: the multi-worker self-test, an indexed Job of N MultiWorkerMirroredStrategy workers "
            "on N GPU nodes (TF_CONFIG from each pod's index).",
        ),
    ] = None,
    runs: Annotated[
        int | None, typer.Option("--runs", metavar="R", help="With --workers: runs of the workers (default 2).")
    ] = None,
) -> None:
    """Print (or write) the manifest that probes every GPU node, or with --workers the multi-worker
    self-test's; docs/fleet.md shows how to collect the output for `envpin fleet report`."""
    from envpin import api
    from envpin.views import console, fleet

    check_quick(selftest, quick)
    res = api.fleet_manifest(
        kubernetes=kubernetes,
        image=image,
        namespace=namespace,
        out=out,
        selftest=selftest,
        quick=quick,
        workers=workers,
        runs=runs,
    )
    fleet.manifest(res, console.out(), console.err())


@probe_app.command("probe")
def fleet_probe(
    slurm: FleetSlurmOpt = False,
    nodes: Annotated[
        int | None, typer.Option("--nodes", metavar="N", help="Probe N nodes (default: every node of the partition).")
    ] = None,
    partition: PartitionOpt = None,
    image: Annotated[
        str | None, typer.Option("--image", metavar="IMAGE", help="Probe inside IMAGE on each node (see --runtime).")
    ] = None,
    runtime: Annotated[
        str | None,
        typer.Option(
            "--runtime",
            metavar="apptainer|singularity|pyxis",
            help="How --image runs on the nodes (default apptainer).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", metavar="DIR", help="Write DIR/<node>.json (or <node>.error.txt); default ./fleet-reports."
        ),
    ] = None,
    timeout: Annotated[
        int | None,
        typer.Option(
            "--timeout", metavar="SECONDS", help="Limit for the allocation and for each node's probe (default 300)."
        ),
    ] = None,
    slurm_args: SallocArgOpt = None,
    selftest: Annotated[
        bool | None,
        typer.Option(
            "--selftest/--no-selftest",
            help="The determinism self-test runs by default where the nodes' Python has "
            "TensorFlow; --selftest insists, --no-selftest leaves it out.",
        ),
    ] = None,
    quick: QuickOpt = False,
    fmt: FormatOpt = Format.text,
    as_json: JsonOpt = False,
) -> None:
    """Run the probe once on every node and collect one report per node.

    Exit 0: every node probed and all share one fingerprint; 1: a node failed or timed out, or nodes differ
    in a breaking field; 2: bad input or no Slurm."""
    from envpin import api
    from envpin.views import console
    from envpin.views import slurm as slurm_view

    check_quick(selftest, quick)
    with console.progress("fleet probe") as update:
        res = api.probe_fleet(
            slurm=slurm,
            nodes=nodes,
            partition=partition,
            image=image,
            runtime=runtime,
            out=out,
            timeout=timeout,
            slurm_args=slurm_args,
            progress=update,
            selftest=selftest,
            quick=quick,
        )
    slurm_view.probed(res, wants_json(fmt, as_json), console.out(), console.err())
    raise typer.Exit(res.exit_code)


@selftest_app.command("selftest")
def fleet_selftest(
    slurm: FleetSlurmOpt = False,
    nodes: Annotated[
        int | None, typer.Option("--nodes", metavar="N", help="Workers, one per node (default 2).")
    ] = None,
    partition: PartitionOpt = None,
    python: Annotated[
        str | None,
        typer.Option(
            "--python", metavar="PATH", help="The nodes' interpreter with TensorFlow (default: python3 on their PATH)."
        ),
    ] = None,
    runs: Annotated[
        int | None, typer.Option("--runs", metavar="R", help="Runs of the workers, one after another (default 2).")
    ] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", metavar="S", help="Training steps per run (default: the self-test's).")
    ] = None,
    port_base: Annotated[
        int | None,
        typer.Option(
            "--port-base", metavar="PORT", help="Run k listens on PORT+k on every node (default: from the job id)."
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Write DIR/<node>.json (or .error.txt) and DIR/_fleet-selftest.json; default ./fleet-selftest.",
        ),
    ] = None,
    timeout: Annotated[
        int | None,
        typer.Option(
            "--timeout", metavar="SECONDS", help="Limit for the allocation and for each node's task (default 600)."
        ),
    ] = None,
    slurm_args: SallocArgOpt = None,
    fmt: FormatOpt = Format.text,
    as_json: JsonOpt = False,
) -> None:
    """Run the multi-worker self-test across nodes: one MultiWorkerMirroredStrategy worker per node (RING
    collectives, the cluster from SlurmClusterResolver), trained twice; each node is probed as well. Says per
    node whether its worker ran and repeated itself, and across nodes whether every worker holds the same
    weights, naming the first collective that differs. `envpin fleet report DIR` reads the folder back.
    On Kubernetes: `envpin fleet manifest --kubernetes --workers N` (an indexed Job).

    Exit 0: every worker ran, all agree and repeat, and the nodes are consistent; 1: a worker failed or
    workers differ, or the nodes differ in a breaking field; 2: bad input or no Slurm."""
    from envpin import api
    from envpin.views import console
    from envpin.views import slurm as slurm_view

    with console.progress("fleet selftest") as update:
        res = api.fleet_selftest(
            slurm=slurm,
            nodes=nodes,
            partition=partition,
            python=python,
            runs=runs,
            steps=steps,
            port_base=port_base,
            out=out,
            timeout=timeout,
            slurm_args=slurm_args,
            progress=update,
        )
    slurm_view.selftested(res, wants_json(fmt, as_json), console.out(), console.err())
    raise typer.Exit(res.exit_code)
