"""`envpin sbom` and `envpin attest`: the software bill of materials and the signed provenance of the image built
from a lock (docs/evidence.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envpin.errors import UsageError, param
from envpin.record import Value

if TYPE_CHECKING:
    from envpin.evidence.provenance import Check


@dataclass(frozen=True, slots=True)
class SbomResult(Value):
    """The document (`text`, written to `output` when one was given), what it describes and what it could not
    list (`notes`, one line each)."""

    text: str
    format: str
    image_id: str
    tag: str
    components: int
    output: Path | None = None
    notes: tuple[str, ...] = ()


def image_sbom(
    lock: Path | None = None,
    *,
    fmt: str = "cyclonedx",
    output: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> SbomResult:
    """The SBOM (`fmt` "cyclonedx": CycloneDX 1.6 JSON; "spdx": SPDX 2.3 JSON) of the image this machine built
    from the lock (found as every command finds it), from the lock, the catalog entry of its base, the image's
    config and a reading inside the image (its dpkg database and Python distributions). Written atomically to
    `output` when given, else returned for stdout. UsageError for an unknown format, an output that cannot be
    written, a lock with no image built here, or missing libraries (the `evidence` extra)."""
    from envpin.environment.render import checked_lock, find_lock
    from envpin.evidence.write import check_format, dumps, read_sbom, require_libraries
    from envpin.files.write import atomic_write, check_output_file
    from envpin.image import probing
    from envpin.image.docker import docker_client

    check_format(fmt)
    if output is not None:
        check_output_file(output, "output")
    require_libraries()
    path = find_lock(lock)
    locked, plan = checked_lock(path)
    try:
        image = probing.lock_image(locked, path, docker_client)
    except UsageError as exc:  # the hint `verify` gives also offers reports, which an SBOM cannot be made of
        raise UsageError(exc.message, hint=f"build it with `{param('lock', command='build')} {path}`") from None
    try:
        sbom = read_sbom(locked, plan, image.client, image.id, image.tag, progress)
    finally:
        image.client.close()
    text = dumps(sbom, fmt)
    if output is not None:
        atomic_write(output, text.encode("utf-8"), make_parents=False)
    return SbomResult(text, fmt, image.id, image.tag, len(sbom.components), output, sbom.notes)


# --- signed provenance: `envpin attest keygen | sign | verify` ----------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyPair(Value):
    """The key files `attest_keygen` wrote: the private key (mode 0600) and the public key beside it."""

    private: Path
    public: Path
    keyid: str
    algorithm: str = "ed25519"


@dataclass(frozen=True, slots=True)
class Attestation(Value):
    """The DSSE envelope `attest_sign` made (`text`, written to `output` when one was given): who signed it
    (`keyid`), of which image (`tag`, `image_id`), from which lock, with how many dependencies."""

    text: str
    keyid: str
    tag: str
    image_id: str
    lock: Path
    dependencies: int
    sbom: bool
    output: Path | None = None


@dataclass(frozen=True, slots=True)
class AttestVerification(Value):
    """What `attest_verify` checked (signature, subject, inputs, and the SBOM when both sides have one), each with
    what it found, and the builder the statement names (reported, not checked)."""

    envelope: Path
    lock: Path
    keyid: str
    checks: tuple[Check, ...]
    subject: str | None = None
    builder: str | None = None
    builder_versions: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.status == "ok" for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def attest_keygen(path: Path) -> KeyPair:
    """A new Ed25519 key pair for `attest_sign`: the private key at `path` (PEM, PKCS#8, mode 0600) and the
    public key at `path`.pub (PEM, SubjectPublicKeyInfo) for whoever verifies. Both written at once, or neither;
    an existing file at either path is never overwritten (UsageError)."""
    from envpin.evidence.signing import new_key
    from envpin.evidence.write import ATTEST_LIBRARIES, require_libraries
    from envpin.files.write import atomic_write_many, check_output_file

    require_libraries(ATTEST_LIBRARIES, "making a signing key")
    public = path.with_name(path.name + ".pub")
    for target in (path, public):
        if target.exists() or target.is_symlink():
            raise UsageError(
                f"{target} already exists, and envpin never overwrites a key file",
                hint=f"choose another {param('path')}, or move the old key pair away first",
            )
        check_output_file(target, "path")
    private_pem, public_pem, keyid = new_key()
    atomic_write_many({path: private_pem, public: public_pem}, {path: 0o600, public: 0o644}, make_parents=False)
    return KeyPair(path, public, keyid)


def attest_sign(
    key: Path,
    lock: Path | None = None,
    *,
    output: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Attestation:
    """The signed provenance of the image this machine built from the lock (found as every command finds it): an
    in-toto Statement v1 with a SLSA Provenance v1 predicate, in a DSSE envelope signed with the PEM private key
    `key` (docs/evidence.md). Written atomically to `output` when given, else returned for stdout. UsageError for
    a key file that is missing or no private key, an output that cannot be written, a lock with no image built
    here, or missing libraries (the `evidence` extra)."""
    from envpin.environment import lockfile
    from envpin.environment.render import checked_lock, find_lock
    from envpin.evidence import provenance
    from envpin.evidence.signing import load_signer, sign
    from envpin.evidence.write import ATTEST_LIBRARIES, require_libraries
    from envpin.files.read import sha256_file
    from envpin.files.write import atomic_write, check_output_file
    from envpin.image import probing
    from envpin.image.docker import docker_client

    require_libraries(ATTEST_LIBRARIES, "signing provenance")
    if output is not None:
        check_output_file(output, "output")
    signer = load_signer(key)
    path = find_lock(lock)
    locked, plan = checked_lock(path)
    if progress is not None:
        progress("finding the image built from the lock")
    try:
        image = probing.lock_image(locked, path, docker_client)
    except UsageError as exc:  # `verify`'s hint also offers reports, which provenance cannot be made of
        raise UsageError(exc.message, hint=f"build it with `{param('lock', command='build')} {path}`") from None
    try:
        attrs = image.client.images.get(image.id).attrs
        engine_version = str(image.client.version().get("Version") or "") or None
    finally:
        image.client.close()
    sbom_path = path.parent / lockfile.SBOM_NAME
    sbom = sha256_file(sbom_path) if sbom_path.is_file() and not sbom_path.is_symlink() else None
    made = provenance.statement(
        locked, plan, provenance.AttestedImage.from_attrs(attrs, image.tag, engine_version), sbom
    )
    envelope = sign(provenance.payload(made), provenance.PAYLOAD_TYPE, signer)
    if output is not None:
        atomic_write(output, envelope, make_parents=False)
    dependencies = len(made["predicate"]["buildDefinition"]["resolvedDependencies"])
    return Attestation(
        envelope.decode("utf-8"),
        signer.public_key.keyid,
        image.tag,
        image.id,
        path,
        dependencies,
        sbom is not None,
        output,
    )


def attest_verify(
    envelope: Path,
    key: Path,
    lock: Path | None = None,
    *,
    image: str | None = None,
) -> AttestVerification:
    """Check a provenance envelope: its signature with the public key `key` (PEM; a private key's public half
    works too), its subject against the image under the subject's name in Docker (or `image`), and its inputs
    against the lock (found as every command finds it) and the files beside it. Each check is "ok", "failed" or
    "not checked" (nothing after a failed signature is: the payload is not authenticated); `exit_code` is 1 when
    one is not ok. UsageError for an envelope or key that cannot be read, a payload that is no SLSA provenance,
    a lock that cannot be read, no image by that name, or missing libraries."""
    from envpin.environment import lockfile
    from envpin.environment.render import find_lock
    from envpin.evidence import provenance
    from envpin.evidence.provenance import Check
    from envpin.evidence.signing import keyids, load_public_key, read_envelope, signed_by
    from envpin.evidence.write import ATTEST_LIBRARIES, require_libraries

    require_libraries(ATTEST_LIBRARIES, "verifying provenance")
    sealed = read_envelope(envelope)
    public = load_public_key(key)
    path = find_lock(lock)
    locked = lockfile.read(path)  # as it is: a re-signed edit is compared, and named, not refused
    plan = lockfile.plan_of(locked, path.parent)
    result = AttestVerification(envelope, path, public.keyid, ())
    if not signed_by(sealed, public):
        named = ", ".join(k[:16] + "…" if k else "(no keyid)" for k in keyids(sealed))
        return result.replace(
            checks=(
                Check(
                    "signature",
                    "failed",
                    (
                        f"no signature verifies with key {public.keyid[:16]}… ({public.keytype}); the envelope's "
                        f"signatures name {named}",
                    ),
                ),
                *(Check(name, "not checked", ("the payload is not authenticated",)) for name in ("subject", "inputs")),
            )
        )
    checks = [Check("signature", "ok", (f"signed by key {public.keyid[:16]}… ({public.keytype})",))]
    hint = f"give the envelope `{param('output', command='attest sign')}` wrote"
    if sealed.payload_type not in (provenance.PAYLOAD_TYPE, "application/vnd.in-toto.provenance+json"):
        raise UsageError(
            f"envelope {envelope} holds a {sealed.payload_type!r} payload, not an in-toto statement", hint=hint
        )
    made, why = provenance.read(sealed.payload)
    if made is None:
        raise UsageError(f"envelope {envelope}: {why}", hint=hint)
    named_subjects = provenance.subjects(made)
    if not named_subjects:
        raise UsageError(f"envelope {envelope}: its statement names no sha256 subject", hint=hint)
    subject = named_subjects[0][0]
    checks.append(provenance.check_subject(made, subject, image or subject, _image_id(image or subject, subject, path)))
    checks.append(provenance.compare(made, locked, plan))
    sbom = _sbom_check(made, path.parent / lockfile.SBOM_NAME)
    if sbom is not None:
        checks.append(sbom)
    builder, versions = provenance.builder(made)
    return result.replace(checks=tuple(checks), subject=subject, builder=builder, builder_versions=versions)


def _image_id(ref: str, subject: str, lock_path: Path) -> str:
    """The ID of the image Docker has under `ref`; UsageError when it has none (nothing to compare with)."""
    from envpin.image.docker import docker_client

    client = docker_client()
    try:
        return str(client.images.get(ref).attrs["Id"])
    except Exception:  # docker.errors.ImageNotFound, APIError (an invalid reference): no image to compare with
        raise UsageError(
            f"Docker has no image {ref}" + (", the attestation's subject" if ref == subject else ""),
            hint=f"build it with `{param('lock', command='build')} {lock_path}`, or name the image with "
            f"{param('image')}",
        ) from None
    finally:
        client.close()


def _sbom_check(made: dict[str, Any], here: Path) -> Check | None:
    """The SBOM the statement lists as a byproduct against the one beside the lock; None when it lists none."""
    from envpin.environment.lockfile import SBOM_NAME
    from envpin.evidence import provenance
    from envpin.evidence.provenance import Check
    from envpin.files.read import sha256_file

    attested = provenance.byproduct(made, SBOM_NAME)
    if attested is None:
        return None
    if not here.is_file() or here.is_symlink():
        return Check("sbom", "not checked", (f"no {here} to compare with the attested one ({attested[:19]}…)",))
    found = sha256_file(here)
    if found != attested:
        return Check("sbom", "failed", (f"{here} is {found[:19]}…, the attested SBOM {attested[:19]}…",))
    return Check("sbom", "ok", (f"{here} is the SBOM attested",))
