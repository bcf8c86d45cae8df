"""The Typer layer: each command parses options and calls one library function. No logic lives here."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from envpin import __version__
from envpin.console import err
from envpin.errors import EnvpinError

app = typer.Typer(
    name="envpin",
    help="Pin, build, verify and share bit-reproducible TensorFlow environments on NVIDIA NGC images.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"envpin {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    _state["debug"] = debug


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: the one place where errors become messages and exit codes."""
    args = list(sys.argv[1:] if argv is None else argv)
    _state["debug"] = "--debug" in args
    command = typer.main.get_command(app)
    try:
        rc = command.main(args=args, prog_name="envpin", standalone_mode=False)
    except EnvpinError as exc:
        if _state["debug"]:
            traceback.print_exc()
        # Messages quote user input and file contents: never interpret them as rich markup.
        err.print(f"[bold red]error:[/] {escape(exc.message)}", markup=True, soft_wrap=True)
        if exc.hint:
            err.print(f"[dim]hint:[/] {escape(exc.hint)}", markup=True, soft_wrap=True)
        sys.exit(exc.exit_code)
    except Exception as exc:
        if _is_abort(exc):
            err.print("interrupted", soft_wrap=True)
            sys.exit(130)
        if not _is_usage_error(exc):
            return _internal_error(exc)
        # Option-parsing errors: one line and a hint, exit 2, like every other bad input.
        err.print(f"error: {exc.format_message()}", markup=False, soft_wrap=True)
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            err.print(f"hint: see '{ctx.command_path} --help'", markup=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted", soft_wrap=True)
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)


def _is_usage_error(exc: BaseException) -> bool:
    # click.ClickException, or Typer's vendored copy of it (Typer >= 0.2x no longer depends on click).
    return hasattr(exc, "format_message") and hasattr(exc, "exit_code") and not isinstance(exc, EnvpinError)


def _is_abort(exc: BaseException) -> bool:
    return type(exc).__name__ == "Abort"


def _internal_error(exc: BaseException) -> None:
    """Last resort: never show a traceback unless --debug asked for one."""
    if _state["debug"]:
        raise exc
    err.print(f"error: internal error: {type(exc).__name__}: {exc}", markup=False, soft_wrap=True)
    err.print("hint: re-run with --debug and report the traceback", markup=False, soft_wrap=True)
    sys.exit(2)


# ---------------------------------------------------------------------------------------------------
# catalog
catalog_app = typer.Typer(help="Every NGC TensorFlow release with its versions and sources.", no_args_is_help=False)
app.add_typer(catalog_app, name="catalog")

TfOpt = Annotated[str | None, typer.Option("--tf", help="TensorFlow version: 2, 2.1 or 2.1.0.")]
NgcOpt = Annotated[str, typer.Option("--ngc", help="NGC release or tag: 20.02 or 20.02-tf2-py3.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")]


@catalog_app.callback(invoke_without_command=True)
def catalog_list(
    ctx: typer.Context,
    tf: TfOpt = None,
    flavor: Annotated[str | None, typer.Option("--flavor", help="py2, py3, tf1 or tf2.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the catalog (filter with --tf and --flavor)."""
    if ctx.invoked_subcommand is not None:
        return
    from envpin import api, views
    from envpin.console import print_json

    entries = api.catalog_entries(tf=tf, flavor=flavor)
    if as_json:
        print_json([e.to_json() for e in entries])
    else:
        views.catalog_table(entries)


@catalog_app.command("show")
def catalog_show(
    release: Annotated[str, typer.Argument(help="Release or tag, e.g. 20.02 or 20.02-tf2-py3.")],
    as_json: JsonOpt = False,
) -> None:
    """Show one release: every field with its source, or why it is unknown."""
    from envpin import api, views
    from envpin.console import print_json

    entries = api.catalog_release(release)
    if as_json:
        print_json([e.to_json() for e in entries])
    else:
        views.catalog_detail(entries)


# ---------------------------------------------------------------------------------------------------
# recipe / render / build
@app.command("recipe")
def recipe_cmd(ngc: NgcOpt, tf: TfOpt = None, as_json: JsonOpt = False) -> None:
    """Show the determinism recipe an image gets: env vars, Python steps, caveats, sources."""
    from envpin import api, views
    from envpin.console import print_json

    entry, recipe = api.recipe_for(ngc, tf)
    if as_json:
        print_json({"tag": entry.tag, "hash": recipe.hash, **recipe.to_dict()})
    else:
        views.recipe_detail(entry.tag, recipe)


ReqOpt = Annotated[
    Path | None, typer.Option("--requirements", help="Locked requirements (== pins and --hash) to install.")
]
BaseOpt = Annotated[
    str | None, typer.Option("--base-image", help="Build FROM this mirror of the NGC image (lock keeps nvcr.io).")
]
CaOpt = Annotated[Path | None, typer.Option("--ca-bundle", help="PEM CA bundle to trust inside the image.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Environment folder (default images/<name>).")]
NameOpt = Annotated[str | None, typer.Option("--name", help="Environment name (default <release>-<flavor>).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite files that were edited by hand.")]


@app.command("render")
def render_cmd(
    ngc: NgcOpt,
    tf: TfOpt = None,
    requirements: ReqOpt = None,
    base_image: BaseOpt = None,
    ca_bundle: CaOpt = None,
    name: NameOpt = None,
    out: OutOpt = None,
    force: ForceOpt = False,
) -> None:
    """Write the environment folder: Dockerfile, plan.json, envpin.lock, requirement lock, probe."""
    from envpin import api

    res = api.render_environment(
        ngc=ngc,
        tf=tf,
        requirements=requirements,
        base_image=base_image,
        ca_bundle=ca_bundle,
        name=name,
        out=out,
        force=force,
    )
    err.print(
        f"rendered {res.plan.entry.tag} (TensorFlow {res.plan.tf_version}, recipe {res.plan.recipe.id}) "
        f"into {res.out}/",
        soft_wrap=True,
    )
    sys.stdout.write(f"{res.out}\n")


@app.command("build")
def build_cmd(
    ngc: Annotated[
        str | None, typer.Option("--ngc", help="NGC release or tag; omit to build everything from the lock.")
    ] = None,
    tf: TfOpt = None,
    lock: Annotated[Path | None, typer.Option("--lock", help="Build from this envpin.lock (no --ngc).")] = None,
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
) -> None:
    """Render the environment, pin the base by digest, and build it with Docker."""
    from envpin import api
    from envpin.console import print_json

    if ngc is None and dry_run:
        plan, folder = api.plan_from_lock(api.find_lock(lock))
        print_json({**plan.to_dict(), "inputs_hash": plan.inputs_hash, "out": str(folder)})
        err.print(f"dry run: would build {plan.entry.tag} from {folder}/ (nothing written)")
        return
    if dry_run:
        res = api.render_environment(
            ngc=ngc, tf=tf, requirements=requirements, base_image=base_image, ca_bundle=ca_bundle,
            name=name, out=out, force=force, write=False,
        )
        plan = res.plan.to_dict()
        plan["inputs_hash"] = res.plan.inputs_hash
        plan["out"] = str(res.out)
        plan["files"] = sorted(res.files)
        print_json(plan)
        err.print(f"dry run: would build {res.plan.entry.tag} from {res.out}/ (nothing written)")
        return
    built = api.build_environment(
        ngc=ngc, tf=tf, lock=lock, requirements=requirements, base_image=base_image, ca_bundle=ca_bundle,
        name=name, out=out, force=force, no_cache=no_cache, pull=pull, update=update,
    )
    state = "up to date" if built.up_to_date else "built"
    err.print(f"{state}: {built.tag} ({built.image_id[:19]}) in {built.seconds:.1f} s; lock: {built.out}/envpin.lock")
    sys.stdout.write(f"{built.tag}\n")


@app.command("lock")
def lock_cmd(
    requirements_in: Annotated[
        Path | None, typer.Argument(help="requirements.in: the packages you want, loosely pinned.")
    ] = None,
    ngc: Annotated[str | None, typer.Option("--ngc", help="NGC release or tag of the target image.")] = None,
    tf: TfOpt = None,
    base_image: BaseOpt = None,
    out: Annotated[Path | None, typer.Option("--out", help="Lock file (default requirements.lock beside it).")] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 if envpin.lock is stale against its inputs (for CI).")
    ] = False,
    lock: Annotated[Path | None, typer.Option("--lock", help="envpin.lock to check (with --check).")] = None,
) -> None:
    """Lock requirements.in inside the target image; or, with --check, test envpin.lock for staleness."""
    from envpin import api
    from envpin.errors import UsageError

    if check:
        path = api.find_lock(lock)
        problems = api.check_lock(path)
        if problems:
            err.print(f"{path} is stale ({len(problems)} problems):", soft_wrap=True)
            for p in problems:
                err.print(f"  {p}", soft_wrap=True, markup=False)
            err.print("hint: re-run `envpin render` (or `envpin build`) with the same inputs and commit the result")
            raise typer.Exit(1)
        err.print(f"{path} is up to date with its inputs", soft_wrap=True)
        return
    if requirements_in is None or ngc is None:
        raise UsageError("lock needs REQUIREMENTS_IN and --ngc", hint="e.g. envpin lock requirements.in --ngc 20.02")
    res = api.lock_requirements(requirements_in, ngc=ngc, tf=tf, base_image=base_image, out=out)
    err.print(
        f"locked {len(res.locked)} packages for Python {res.python} in {res.image} "
        f"({res.base_count} packages of the base kept as they are) -> {res.out}",
        soft_wrap=True,
    )
    sys.stdout.write(f"{res.out}\n")


# room commands
from envpin import cli_probe  # noqa: E402  (probe, diff, verify)

cli_probe.register(app)
from envpin import cli_selftest  # noqa: E402  (selftest)

cli_selftest.register(app)
from envpin import cli_sync  # noqa: E402  (catalog sync)

cli_sync.register(app)
from envpin import cli_doctor  # noqa: E402  (doctor)

cli_doctor.register(app)
from envpin import cli_audit  # noqa: E402  (audit)

cli_audit.register(app)
