"""The SBOM of the image a lock describes, from the engine and an in-image reading: what `envpin sbom` and
`envpin build` (sbom.cdx.json beside the lock) both call."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from envpin.environment.lockfile import SBOM_NAME
from envpin.errors import UsageError, param

if TYPE_CHECKING:
    from envpin.environment.lockfile import Lock
    from envpin.environment.plan import BuildPlan
    from envpin.evidence.components import Sbom
    from envpin.image.build import BuildResult
    from envpin.image.engine import Engine

#: --format -> (module under envpin.evidence, what the document is called)
FORMATS = {"cyclonedx": ("cyclonedx", "CycloneDX 1.6 JSON"), "spdx": ("spdx", "SPDX 2.3 JSON")}
#: What `envpin build` writes beside envpin.lock (the name's home is the lock's model, which lets it stand there).
BUILD_SBOM_NAME = SBOM_NAME
EXTRA_HINT = "install the evidence extra: pip install 'envpin[evidence]'"


#: What each piece of evidence is made with: module -> the distribution that provides it (the `evidence` extra).
SBOM_LIBRARIES = (("cyclonedx", "cyclonedx-python-lib"), ("spdx_tools", "spdx-tools"), ("debian", "python-debian"))
ATTEST_LIBRARIES = (
    ("in_toto_attestation", "in-toto-attestation"),
    ("securesystemslib", "securesystemslib"),
    ("cryptography", "cryptography"),
    ("packageurl", "packageurl-python"),
)


def require_libraries(libraries: tuple[tuple[str, str], ...] = SBOM_LIBRARIES, what: str = "writing an SBOM") -> None:
    """A UsageError naming the extra when a library of `libraries` (the SBOM's by default) is missing."""
    import importlib.util

    missing = [dist for module, dist in libraries if importlib.util.find_spec(module) is None]
    if missing:
        raise UsageError(f"{what} needs {', '.join(missing)}, which is not installed", hint=EXTRA_HINT)


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UsageError(
            f"{param('fmt')} {fmt!r} is not an SBOM format",
            hint=f"use {param('fmt')} cyclonedx (CycloneDX 1.6) or spdx (SPDX 2.3)",
        )
    return fmt


def read_sbom(
    locked: Lock, plan: BuildPlan, client: Any, image_id: str, tag: str, progress: Callable[[str], None] | None = None
) -> Sbom:
    """The Sbom of the image `image_id`: its config from the engine, its packages read inside it."""
    from envpin.evidence.components import BuiltImage, sbom
    from envpin.image.probing import read_inventory

    attrs = client.images.get(image_id).attrs
    inventory = read_inventory(client, image_id, progress)
    return sbom(locked, plan, BuiltImage.from_attrs(attrs, tag), inventory)


def dumps(sbom: Sbom, fmt: str) -> str:
    import importlib

    module = importlib.import_module(f"envpin.evidence.{FORMATS[check_format(fmt)][0]}")
    text: str = module.dumps(sbom)
    return text


def after_build(result: BuildResult, engine: Engine) -> BuildResult:
    """`envpin build`'s SBOM: sbom.cdx.json (CycloneDX 1.6) beside the lock, of the image just built, with a
    note saying so. A build that was up to date keeps the one already there (the same image gives the same
    document); a podman image, missing libraries or a failed reading leave the build as it is, with a warning
    that says why and how to get the SBOM."""
    from envpin.environment import lockfile
    from envpin.environment.render import checked_lock
    from envpin.errors import EnvpinError
    from envpin.files.write import atomic_write

    target = result.out / BUILD_SBOM_NAME
    if result.problem or (result.up_to_date and target.is_file()):
        return result
    client = getattr(engine, "client", None)
    if engine.name != "docker" or client is None:
        why = (
            f"{BUILD_SBOM_NAME} not written: `envpin sbom` reads images through Docker, and this one was built "
            f"with {engine.name}"
        )
        return result.replace(warnings=(*result.warnings, why))
    try:
        require_libraries()
        locked, plan = checked_lock(result.out / lockfile.LOCK_NAME)
        sbom = read_sbom(locked, plan, client, result.image_id, result.tag)
        atomic_write(target, dumps(sbom, "cyclonedx").encode("utf-8"), make_parents=False)
    except EnvpinError as exc:
        why = f"{BUILD_SBOM_NAME} not written: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
        return result.replace(warnings=(*result.warnings, why))
    line = f"wrote {target}: CycloneDX 1.6, {len(sbom.components)} components (docs/evidence.md)"
    return result.replace(notes=(*result.notes, line))
