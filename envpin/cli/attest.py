"""`envpin attest keygen`, `attest sign` and `attest verify`: signed provenance of an image built here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envpin.cli import LazyGroup
from envpin.cli.options import Format, FormatOpt, JsonOpt, command_app, output_file, wants_json

attest_app = command_app(
    name="attest",
    cls=LazyGroup,
    help="Signed provenance (in-toto, SLSA v1, DSSE) of an image built here from a lock: sign it, verify it.",
    no_args_is_help=True,
)
keygen_app = command_app()
sign_app = command_app()
verify_app = command_app()

LockOpt = Annotated[
    Path | None,
    typer.Option(
        "--lock", help="The envpin.lock (or its folder); default: ./envpin.lock, else the only images/*/envpin.lock."
    ),
]


@attest_app.callback()
def attest() -> None:
    """The attest commands (the group's help is attest_app's)."""


@keygen_app.command("keygen")
def attest_keygen(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="KEYFILE",
            parser=output_file,
            help="Where the private key goes; the public key is written beside it as KEYFILE.pub.",
        ),
    ],
) -> None:
    """Make an Ed25519 key pair to sign provenance with: KEYFILE (PEM, PKCS#8, mode 0600) and KEYFILE.pub.

    Exit 0: written; 2: either file exists (never overwritten), or it cannot be written."""
    from envpin import api
    from envpin.views import evidence

    evidence.keygen(api.attest_keygen(path))


@sign_app.command("sign")
def attest_sign(
    key: Annotated[Path, typer.Option("--key", metavar="KEYFILE", help="The PEM private key to sign with.")],
    lock: LockOpt = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", parser=output_file, metavar="FILE", help="Write the envelope here instead of stdout."
        ),
    ] = None,
) -> None:
    """Sign the provenance of the image built here from the lock: an in-toto Statement v1 with a SLSA Provenance
    v1 predicate (the image by ID; the lock's inputs, the base by digest, every file and wheel hash) in a DSSE
    envelope.

    Exit 0: written; 2: bad input (key, lock, output), no image built from the lock, or the evidence extra missing."""
    from envpin import api
    from envpin.views import console, evidence

    with console.progress("signing the provenance") as update:
        res = api.attest_sign(key, lock, output=output, progress=update)
    evidence.signed(res)


@verify_app.command("verify")
def attest_verify(
    envelope: Annotated[Path, typer.Argument(metavar="ENVELOPE", help="The DSSE envelope `attest sign` wrote.")],
    key: Annotated[
        Path, typer.Option("--key", metavar="PUBKEY", help="The signer's PEM public key (KEYFILE.pub of keygen).")
    ],
    lock: LockOpt = None,
    image: Annotated[
        str | None,
        typer.Option("--image", help="Compare with this image instead of the one under the subject's name."),
    ] = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """Check a provenance envelope: the signature with the key, the subject against the image in Docker, and the
    inputs against the lock and the files beside it (and the SBOM, when both list one).

    Exit 0: every check passed; 1: one failed (each named); 2: bad input (envelope, key, lock), or no image."""
    from envpin import api
    from envpin.views import evidence

    res = api.attest_verify(envelope, key, lock, image=image)
    evidence.verified(res, wants_json(fmt, as_json))
    raise typer.Exit(res.exit_code)
