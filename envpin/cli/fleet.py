"""`envpin fleet report` and `fleet manifest`: many machines at once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Compare the probe reports of many machines; probe every GPU node of a cluster.",
                        no_args_is_help=True)
    app.add_typer(group, name="fleet")

    @group.command("report")
    def fleet_report(
        paths: Annotated[
            list[Path],
            typer.Argument(metavar="DIR|FILE...", help="Probe reports or folders of them (*.json, *.log), "
                                                       "'kubectl logs --prefix' output, 'kubectl get pods -o json'."),
        ],
        fmt: Annotated[str, typer.Option("--format", metavar="text|json", help="What goes to stdout.")] = "text",
        html: Annotated[
            Path | None, typer.Option("--html", metavar="FILE", help="Also write a self-contained HTML report.")
        ] = None,
    ) -> None:
        """Group nodes into classes of identical result-affecting fields; show the fields that separate them,
        the outliers and the golden hashes per device class.

        Exit 0: all nodes consistent; 1: a breaking difference, or a node failed or timed out; 2: bad input."""
        from envpin import api
        from envpin.views import console, fleet

        chosen = fleet.output_format(fmt)
        res = api.fleet_report(paths, html=html)
        fleet.report(res, chosen, console.out(), console.err())
        raise typer.Exit(res.exit_code)

    @group.command("manifest")
    def fleet_manifest(
        kubernetes: Annotated[
            bool, typer.Option("--kubernetes", help="A DaemonSet that runs the probe on every NVIDIA GPU node.")
        ] = False,
        image: Annotated[
            str | None, typer.Option("--image", metavar="IMAGE",
                                     help="Image to probe in, best pinned by digest (default: the newest NGC tf2).")
        ] = None,
        namespace: Annotated[str, typer.Option("--namespace", metavar="NS", help="Kubernetes namespace.")] = "default",
        out: Annotated[Path | None, typer.Option("--out", metavar="FILE", help="Write here instead of stdout.")] = None,
        selftest: Annotated[
            bool | None,
            typer.Option("--selftest/--no-selftest",
                         help="The determinism self-test runs by default where the image has TensorFlow "
                              "(golden hashes); --selftest insists, --no-selftest leaves it out."),
        ] = None,
        quick: Annotated[bool, typer.Option("--quick", help="The short self-test battery.")] = False,
    ) -> None:
        """Print (or write) the manifest that probes every GPU node; docs/fleet.md shows how to collect the
        reports for `envpin fleet report`."""
        from envpin import api
        from envpin.views import console, fleet

        res = api.fleet_manifest(kubernetes=kubernetes, image=image, namespace=namespace, out=out, selftest=selftest,
                                 quick=quick)
        fleet.manifest(res, console.out(), console.err())
