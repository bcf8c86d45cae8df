"""`envpin recipe`, `render`, `build` and `lock`: from an NGC release, or a stock TensorFlow GPU image, to a
pinned, built environment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envpin.cli.options import (
    BaseOpt,
    CaOpt,
    Engine,
    ForceOpt,
    Format,
    FormatOpt,
    JsonOpt,
    LockOpt,
    NameOpt,
    OutOpt,
    ReqOpt,
    Resolver,
    TfOpt,
    command_app,
    output_file,
    value,
    wants_json,
)

#: --ngc where a stock image is the alternative: without it, --stock or --tf alone picks the stock image.
OptNgcOpt = Annotated[
    str | None, typer.Option("--ngc", help="NGC release or tag: 20.02 or 20.02-tf2-py3 (omit for a stock image).")
]
StockOpt = Annotated[
    str | None,
    typer.Option(
        "--stock",
        metavar="TAG",
        help="Docker Hub's stock TensorFlow GPU image: 2.20, 2.20.0 or "
        "2.20.0-gpu (tensorflow/tensorflow:X.Y.Z-gpu; `envpin catalog --stock`). --tf without --ngc "
        "picks one too.",
    ),
]

DistributedOpt = Annotated[
    bool,
    typer.Option(
        "--distributed",
        help="Add the distributed recipe: NCCL pinned to Ring with NVLS off, Horovod autotuning off, and what a "
        "tf.distribute script must set itself (with sources, versions and costs).",
    ),
]
#: render and build --ngc: bake the distributed recipe in, or not; unsaid, a re-render keeps what the folder holds.
BakeDistributedOpt = Annotated[
    bool | None,
    typer.Option(
        "--distributed/--no-distributed",
        help="Bake the distributed recipe's NCCL and Horovod settings into the image (envpin recipe --distributed "
        "lists them). Default: what the folder's lock records, else not.",
        show_default=False,
    ),
]


recipe_app = command_app()


@recipe_app.command("recipe")
def recipe_cmd(
    ngc: OptNgcOpt = None,
    tf: TfOpt = None,
    stock: StockOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
    distributed: DistributedOpt = False,
) -> None:
    """Show the determinism recipe an image gets: env vars, Python steps, caveats, sources."""
    from envpin import api
    from envpin.views import console, environment

    res = api.recipe_for(ngc, tf, stock, distributed=distributed)
    if wants_json(fmt, as_json):
        console.print_json(res.to_json())
    else:
        environment.recipe_result(res, console.results())


render_app = command_app()


@render_app.command("render")
def render_cmd(
    ngc: OptNgcOpt = None,
    tf: TfOpt = None,
    stock: StockOpt = None,
    requirements: ReqOpt = None,
    base_image: BaseOpt = None,
    ca_bundle: CaOpt = None,
    name: NameOpt = None,
    out: OutOpt = None,
    force: ForceOpt = False,
    formats: Annotated[
        list[str] | None,
        typer.Option(
            "--format",
            metavar="docker|apptainer",
            help="Output: a Dockerfile, an Apptainer definition (envpin.def), or both (repeat it). "
            "Default: what the folder holds, else docker.",
        ),
    ] = None,
    distributed: BakeDistributedOpt = None,
) -> None:
    """Write the environment folder: Dockerfile or Apptainer definition, plan.json, envpin.lock, envpin.pyz."""
    from envpin import api
    from envpin.views import console, environment

    res = api.render_environment(
        ngc=ngc,
        tf=tf,
        stock=stock,
        requirements=requirements,
        base_image=base_image,
        ca_bundle=ca_bundle,
        name=name,
        out=out,
        force=force,
        formats=tuple(formats) if formats else None,
        distributed=distributed,
    )
    environment.rendered(res, console.results(), console.notes())


build_app = command_app()


@build_app.command("build")
def build_cmd(
    ngc: Annotated[
        str | None,
        typer.Option(
            "--ngc", help="NGC release or tag; omit (with --stock and --tf) to build everything from the lock."
        ),
    ] = None,
    tf: TfOpt = None,
    stock: StockOpt = None,
    lock: Annotated[
        Path | None, typer.Option("--lock", help="Build from this envpin.lock (no --ngc, --stock or --tf).")
    ] = None,
    requirements: ReqOpt = None,
    base_image: BaseOpt = None,
    ca_bundle: CaOpt = None,
    name: NameOpt = None,
    out: OutOpt = None,
    force: ForceOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Render and print the plan; build nothing.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild every layer.")] = False,
    pull: Annotated[bool, typer.Option("--pull", help="Pull the base image again even if present.")] = False,
    update: Annotated[bool, typer.Option("--update", help="Accept a base tag that now points elsewhere.")] = False,
    engine: Annotated[
        Engine | None,
        typer.Option(
            "--engine",
            envvar="ENVPIN_ENGINE",
            help="auto: Docker when its daemon answers, else podman (reproducible images).",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Rebuild with podman in a scratch store; exit 1 unless it gives the image envpin.lock records.",
        ),
    ] = False,
    distributed: BakeDistributedOpt = None,
    fmt: FormatOpt = Format.text,
    as_json: JsonOpt = False,
) -> None:
    """Render the environment, pin the base by digest, and build it (Docker, or podman for bit-identical images).
    Prints the tag it built (--format json: what the build did, as JSON; --dry-run: the plan as JSON)."""
    from envpin import api
    from envpin.errors import UsageError
    from envpin.views import console, environment

    if check and engine is Engine.docker and not dry_run:
        raise UsageError(
            "--check rebuilds with podman, the engine whose images are reproducible",
            hint="add --engine podman (Docker 20.10's classic builder stamps build times)",
        )
    inputs = api.EnvironmentInputs(
        ngc=ngc,
        tf=tf,
        stock=stock,
        requirements=requirements,
        base_image=base_image,
        ca_bundle=ca_bundle,
        name=name,
        out=out,
        lock=lock,
        distributed=distributed,
    )
    request = (
        api.DryRunRequest(inputs)
        if dry_run
        else api.BuildRequest(
            inputs, force=force, no_cache=no_cache, pull=pull, update=update, engine=value(engine), check=check
        )
    )
    with console.progress_feed() as progress:
        built = api.build_or_plan(request, progress)
    environment.build_outcome(built, wants_json(fmt, as_json), console.out(), console.err())
    raise typer.Exit(built.exit_code)


lock_app = command_app()


@lock_app.command("lock")
def lock_cmd(
    requirements_in: Annotated[
        Path | None, typer.Argument(help="requirements.in: the packages you want, loosely pinned.")
    ] = None,
    ngc: Annotated[str | None, typer.Option("--ngc", help="NGC release or tag of the target image.")] = None,
    tf: TfOpt = None,
    stock: StockOpt = None,
    base_image: BaseOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", parser=output_file, metavar="FILE", help="Lock file (default requirements.lock beside it)."
        ),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 if envpin.lock is stale against its inputs (for CI).")
    ] = False,
    lock: LockOpt = None,
    resolver: Annotated[
        Resolver,
        typer.Option(
            "--resolver",
            help="Where to resolve: inside the image (needs its Python 3.7+), "
            "on the host with uv for the image's Python and platform, or auto (the image "
            "when it can, else the host: the Python 3.6 images).",
        ),
    ] = Resolver.auto,
    exclude_newer: Annotated[
        str | None,
        typer.Option(
            "--exclude-newer",
            metavar="DATE",
            help="Only files uploaded before DATE (2024-03-01: 00:00 UTC; or a UTC time) are candidates; "
            "recorded in the lock, and kept by a re-lock without this option; none drops it. For an NGC base, "
            "the first day of the month after its release (docs/lock.md).",
        ),
    ] = None,
    pylock: Annotated[
        bool, typer.Option("--pylock", help="Write pylock.toml (PEP 751) beside the lock, with the same files.")
    ] = False,
) -> None:
    """Lock requirements.in for the target image; or, with --check, test envpin.lock for staleness."""
    from envpin import api
    from envpin.errors import UsageError
    from envpin.views import console, environment

    request: api.LockRequest | api.LockCheckRequest
    if check:
        given = {
            "REQUIREMENTS_IN": requirements_in,
            "--ngc": ngc,
            "--stock": stock,
            "--tf": tf,
            "--base-image": base_image,
            "--out": out,
            "--exclude-newer": exclude_newer,
            "--pylock": True if pylock else None,
        }
        ignored = next((name for name, v in given.items() if v is not None), None)
        if ignored is not None:  # what it names would be ignored: the check reads everything from the lock
            raise UsageError(
                f"--check tests the envpin.lock there is; {ignored} names what a new lock is made "
                "from, so the two do not go together",
                hint="envpin lock --check [--lock F], or envpin lock REQUIREMENTS_IN --ngc ... without --check",
            )
        request = api.LockCheckRequest(lock)
    elif lock is not None:  # a new requirements lock is made from the image named, never from envpin.lock
        raise UsageError(
            "--lock names the envpin.lock that --check tests; locking requirements does not read it",
            hint="envpin lock --check --lock F, or envpin lock REQUIREMENTS_IN --ngc ... without --lock",
        )
    elif requirements_in is None or (ngc is None and stock is None and tf is None):
        raise UsageError(
            "lock needs REQUIREMENTS_IN and --ngc (or --stock / --tf for a stock image)",
            hint="e.g. envpin lock requirements.in --ngc 20.02",
        )
    else:
        request = api.LockRequest(
            requirements_in,
            ngc,
            tf=tf,
            base_image=base_image,
            out=out,
            resolver=str(value(resolver)),
            stock=stock,
            exclude_newer=exclude_newer,
            pylock=pylock,
        )
    with console.progress("envpin lock") as update:
        update("checking" if check else f"resolving for the {ngc or stock or tf} image")
        res = api.lock_or_check(request)
    environment.lock_outcome(res, console.results(), console.notes())
    raise typer.Exit(res.exit_code)
