"""`envpin fleet`: probe many machines at once and compare them (`fleet probe --slurm`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Probe many machines at once and compare their fingerprints.", no_args_is_help=True)
    app.add_typer(group, name="fleet")

    @group.command("probe")
    def fleet_probe(
        slurm: Annotated[bool, typer.Option("--slurm", help="Reach the nodes through Slurm (salloc + srun).")] = False,
        nodes: Annotated[
            int | None, typer.Option("--nodes", metavar="N",
                                     help="Probe N nodes (default: every node of the partition).")
        ] = None,
        partition: Annotated[
            str | None, typer.Option("--partition", metavar="P", help="Slurm partition (default: the default one).")
        ] = None,
        image: Annotated[
            str | None, typer.Option("--image", metavar="IMAGE",
                                     help="Probe inside IMAGE on each node (see --runtime).")
        ] = None,
        runtime: Annotated[
            str | None, typer.Option("--runtime", metavar="apptainer|singularity|pyxis",
                                     help="How --image runs on the nodes (default apptainer).")
        ] = None,
        out: Annotated[
            Path | None, typer.Option("--out", metavar="DIR",
                                      help="Write DIR/<node>.json (or <node>.error.txt); default ./fleet-reports.")
        ] = None,
        timeout: Annotated[
            int | None, typer.Option("--timeout", metavar="SECONDS",
                                     help="Limit for the allocation and for each node's probe (default 300).")
        ] = None,
        slurm_arg: Annotated[
            list[str] | None, typer.Option("--slurm-arg", metavar="OPTION",
                                           help="Extra salloc option, repeatable: --slurm-arg=--account=ml.")
        ] = None,
    ) -> None:
        """Run the probe once on every node and collect one report per node.

        Exit 0: every node probed and all share one fingerprint; 1: a node failed or timed out, or nodes differ
        in a breaking field; 2: bad input or no Slurm."""
        from envpin import api
        from envpin.views import console
        from envpin.views import slurm as slurm_view

        res = api.probe_fleet(
            slurm=slurm, nodes=nodes, partition=partition, image=image, runtime=runtime, out=out, timeout=timeout,
            slurm_args=slurm_arg, progress=lambda text: console.say(console.err(), text),
        )
        slurm_view.probed(res, console.out(), console.err())
        raise typer.Exit(res.exit_code)
