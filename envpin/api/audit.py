"""`envpin audit`: determinism and pinning findings in Dockerfiles, what they copy in, and training scripts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from envpin.errors import UsageError, param

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit import AuditRun, ScriptTarget


def audit_files(
    dockerfiles: list[Path],
    *,
    output: str = "tty",
    fail_on: str | None = None,
    build_args: list[str] | None = None,
    target: str | None = None,
    tf: str | None = None,
    fix: bool = False,
    fix_out: Path | None = None,
    in_place: bool = False,
    resolve: bool = True,
    use_config: bool = True,
    context: Path | None = None,
    read_context: bool = True,
    explain: bool = False,
) -> AuditRun:
    """`envpin audit`: findings for each Dockerfile and Python script (`.py`), and with fix=True the corrected
    files. The nearest pyproject.toml with [tool.envpin.audit] (from the working directory up) adds ignores and
    fail-on. Scripts are judged against the TensorFlow of a Dockerfile in the same run, else `tf`, else the lock
    (./envpin.lock or the only images/*/envpin.lock).

    `output` is the format the caller will show the result in (tty, json, sarif, gcc or github), kept in the
    result. `resolve` (asking registries for the digests FROM is pinned to) only matters with `fix`;
    `read_context=False` reads the Dockerfiles alone, so a `context` would go unread. A folder stands for the
    Python scripts under it, audited together (a script that trains through another's model or trainer is judged
    to train); `explain` keeps why each script is judged to train or not (AuditRun.explained). Every parameter is
    checked before any file is read."""
    from envpin import audit
    from envpin.audit import config as audit_config

    if not resolve and not fix:
        raise UsageError(f"{param('no_resolve')} only makes sense with {param('fix')}", hint=f"add {param('fix')}")
    if context is not None and not read_context:
        raise UsageError(f"{param('context')} and {param('no_context')} exclude each other", hint="choose one")
    audit.check_output(output)
    settings = audit_config.load(audit_config.find(Path.cwd())) if use_config else audit_config.AuditConfig()

    if tf is not None:
        from envpin.knowledge.versions import parse_tf_spec

        if len(parse_tf_spec(tf).parts) < 2:
            raise UsageError(
                f"{param('tf')} {tf} names no minor version; a recipe is chosen by MAJOR.MINOR",
                hint=f"e.g. {param('tf')} 2.1",
            )
    if context is not None and not context.is_dir():
        raise UsageError(
            f"{param('context')} {context} is not a directory", hint="give the folder `docker build` is given"
        )
    resolver: Callable[[str], str] | None = None
    if fix and resolve:
        from envpin.registry.client import RegistryClient, Unreachable

        client = RegistryClient()

        def pin(ref: str) -> str:
            """The digest FROM is pinned to; an unreachable registry names the way audit goes on without it."""
            try:
                return client.resolve_digest(ref)
            except Unreachable as exc:
                raise Unreachable(
                    exc.message,
                    hint=f"check the network or proxy, or add {param('no_resolve')}: {param('fix')} then comments "
                    "FROM instead of pinning it by digest",
                ) from None

        resolver = pin

    paths = [str(p) for p in dockerfiles]
    lock_target = _lock_target() if tf is None and any(audit.is_script(p) or Path(p).is_dir() for p in paths) else None
    return audit.run(
        paths,
        lock_target=lock_target,
        fail_on=fail_on or settings.fail_on or "warning",
        config=settings,
        context=context,
        read_context=read_context,
        build_args=audit.parse_build_args(build_args or []),
        target=target,
        tf=tf,
        do_fix=fix,
        fix_out=fix_out,
        in_place=in_place,
        resolve=resolver,
        output=output,
        explain=explain,
    )


def _lock_target() -> ScriptTarget | None:
    """The lock's TensorFlow, base (an NGC release or a stock TensorFlow image) and recipe ENV, for scripts; None
    without a (readable) lock."""
    from envpin.audit import target_for
    from envpin.environment import lockfile
    from envpin.environment.render import find_lock
    from envpin.errors import EnvpinError
    from envpin.knowledge.stock import is_stock_flavor

    try:
        path = find_lock()
        locked = lockfile.read(path)
    except (EnvpinError, OSError):
        return None
    inputs = locked.inputs
    if is_stock_flavor(inputs.flavor):
        return target_for(inputs.tf_version, "stock", None, f"{path}: stock {inputs.tag}", dict(locked.recipe.env))
    return target_for(inputs.tf_version, "ngc", inputs.release, f"{path}: NGC {inputs.tag}", dict(locked.recipe.env))
