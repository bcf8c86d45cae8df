"""Local keys and DSSE envelopes (DSSE v1.0.2, secure-systems-lab/dsse): the envelope, its pre-authentication
encoding and the signature checks are securesystemslib's (dsse.Envelope, CryptoSigner, SSlibKey), the key files
are pyca/cryptography's PEM (PKCS#8 private keys, SubjectPublicKeyInfo public keys), so `openssl` and other DSSE
tools read them too. Nothing here reaches a network: keyless signing (Sigstore's Fulcio certificates and Rekor
log) needs one, and docs/evidence.md says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envpin.errors import UsageError, param

if TYPE_CHECKING:
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner, SSlibKey

#: The largest key file or envelope read: a PEM key is under 4 KiB, an envelope of one image under 64 KiB.
MAX_KEY_BYTES = 64 * 1024
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024


#: Where the public key a verifier needs comes from.
PUBLIC_HINT = "give the signer's public key: the KEYFILE.pub `attest keygen` wrote beside the private key (PEM)"


def _keygen_hint() -> str:
    return f"make a key pair with `{param('path', command='attest keygen')}`"


def new_key() -> tuple[bytes, bytes, str]:
    """A new Ed25519 key pair: (private key PEM, PKCS#8 unencrypted; public key PEM; its keyid). The keyid is
    securesystemslib's default: the SHA-256 of the canonical JSON of the public key's type, scheme and value."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        PublicFormat,
    )
    from securesystemslib.signer import SSlibKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    return private, public, SSlibKey.from_crypto(key.public_key()).keyid


def _key_bytes(path: Path, what: str, missing_hint: str) -> bytes:
    from envpin.files.read import read_user_text

    return read_user_text(path, what, UsageError, missing_hint=missing_hint, limit=MAX_KEY_BYTES).encode("utf-8")


def load_signer(path: Path) -> CryptoSigner:
    """The signer of a PEM private key file (Ed25519, ECDSA P-256/384/521 or RSA, unencrypted PKCS#8 or the
    traditional forms pyca/cryptography reads); one UsageError saying why a file is not one."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.signer import CryptoSigner

    data = _key_bytes(path, "key file", _keygen_hint())
    try:
        key = load_pem_private_key(data, password=None)
        return CryptoSigner(key)  # a key type it does not sign with is a ValueError
    except TypeError as exc:  # encrypted: a password would be needed
        raise UsageError(
            f"key file {path} is encrypted ({exc})",
            hint=f"give an unencrypted PEM private key, or {_keygen_hint()}",
        ) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        if b"PUBLIC KEY-----" in data:
            raise UsageError(
                f"key file {path} is a public key",
                hint="sign with the private key (the public one, KEYFILE.pub, is for verifying)",
            ) from None
        raise UsageError(
            f"key file {path} is not a PEM private key envpin can sign with "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})",
            hint=f"give an Ed25519, ECDSA or RSA private key in PEM, or {_keygen_hint()}",
        ) from None


def load_public_key(path: Path) -> SSlibKey:
    """The public key of a PEM file: a public key (SubjectPublicKeyInfo), or a private key, whose public half is
    used. One UsageError for anything else."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
    from securesystemslib.signer import SSlibKey

    data = _key_bytes(path, "public key file", PUBLIC_HINT)
    try:
        if b"PRIVATE KEY-----" in data:
            return SSlibKey.from_crypto(load_pem_private_key(data, password=None).public_key())
        return SSlibKey.from_crypto(load_pem_public_key(data))
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise UsageError(
            f"public key file {path} is not a PEM key envpin can verify with "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})",
            hint=PUBLIC_HINT,
        ) from None


def sign(body: bytes, payload_type: str, signer: CryptoSigner) -> bytes:
    """The DSSE JSON envelope of `body`, signed over PAE(payload_type, body) by `signer`, with its keyid.
    Ed25519 signatures are deterministic, so the same body and key give the same file."""
    from securesystemslib.dsse import Envelope

    envelope = Envelope(body, payload_type, {})
    envelope.sign(signer)
    return (json.dumps(envelope.to_dict(), sort_keys=True, indent=2) + "\n").encode("utf-8")


def read_envelope(path: Path) -> Envelope:
    """A DSSE JSON envelope from a file (envelope.md: payload, payloadType and signatures[].sig set, keyid
    optional, standard or URL-safe base64); one UsageError naming what is wrong."""
    from securesystemslib.dsse import Envelope

    from envpin.files.read import parse_json, read_user_text

    hint = f"give the envelope `{param('output', command='attest sign')}` wrote"
    text = read_user_text(path, "envelope", UsageError, missing_hint=hint, limit=MAX_ENVELOPE_BYTES)
    data: Any = parse_json(text, f"envelope {path}", UsageError, hint)
    problem = _shape(data)
    if problem:
        raise UsageError(f"envelope {path} is not a DSSE envelope: {problem}", hint=hint)
    for signature in data["signatures"]:
        signature.setdefault("keyid", "")  # DSSE: "An unset field MUST be treated the same as set-but-empty"
    try:
        return Envelope.from_dict(data)
    except (ValueError, KeyError, TypeError) as exc:  # binascii.Error is a ValueError
        raise UsageError(f"envelope {path} is not a DSSE envelope: {exc}", hint=hint) from None


def _shape(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "not a JSON object"
    for field in ("payload", "payloadType"):
        if not isinstance(data.get(field), str):
            return f"no {field} string"
    signatures = data.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        return "no signatures"
    for n, signature in enumerate(signatures):
        if not isinstance(signature, dict) or not isinstance(signature.get("sig"), str):
            return f"signature {n + 1} has no sig string"
        if not isinstance(signature.get("keyid", ""), str):
            return f"signature {n + 1} has a keyid that is not a string"
    return None


def signed_by(envelope: Envelope, key: SSlibKey) -> bool:
    """Whether one of the envelope's signatures verifies with `key` over PAE(payloadType, payload). Every
    signature is tried: DSSE's keyid "MUST NOT be used for security decisions", so a signature is not skipped
    for carrying another keyid (securesystemslib's Envelope.verify would skip it)."""
    from securesystemslib.exceptions import UnverifiedSignatureError, VerificationError
    from securesystemslib.signer import Signature

    pae = envelope.pae()
    for signature in envelope.signatures.values():
        try:
            key.verify_signature(Signature(key.keyid, signature.signature), pae)
        except (UnverifiedSignatureError, VerificationError):
            continue
        return True
    return False


def keyids(envelope: Envelope) -> list[str]:
    """The keyids the envelope's signatures name (hints only), in order."""
    return [sig.keyid for sig in envelope.signatures.values()]
