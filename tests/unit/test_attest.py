"""Signed provenance (envpin.evidence.provenance, envpin.evidence.signing) on a lock and a plan made here and keys
generated here: the statement the in-toto models accept, signatures that verify with the right key only, and the
comparison that names what differs from a lock. The commands' bad input, in-process; the docker tier signs and
verifies a real image (tests/docker/test_sbom.py)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from envpin.environment.lockfile import Lock
from envpin.environment.plan import BuildPlan, make_plan
from envpin.environment.render import render
from envpin.evidence import provenance, signing
from envpin.evidence.provenance import AttestedImage

DIGEST = "sha256:" + "ab" * 32
IMAGE_ID = "sha256:" + "cd" * 32
HASH_A, HASH_B = "sha256:" + "12" * 32, "sha256:" + "34" * 32
ATTRS = {"Id": IMAGE_ID, "Created": "2026-03-01T10:20:30.123456789Z"}


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lock, BuildPlan]:
    folder = tmp_path_factory.mktemp("attest-unit")
    (folder / "requirements.lock").write_text(f"tomli_w==1.0.0 \\\n    --hash={HASH_A} \\\n    --hash={HASH_B}\n")
    plan = make_plan(ngc="20.02-tf2-py3", requirements=folder / "requirements.lock", base_digest=DIGEST)
    return Lock.from_plan(plan, render(plan)), plan


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two key pairs made as `attest keygen` makes them: the signer's and someone else's."""
    folder = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("mine", "other"):
        private, public, _ = signing.new_key()
        (folder / name).write_bytes(private)
        (folder / f"{name}.pub").write_bytes(public)
        out[name], out[f"{name}.pub"] = folder / name, folder / f"{name}.pub"
    return out


def _image() -> AttestedImage:
    return AttestedImage.from_attrs(ATTRS, "envpin/20.02-tf2:0123456789ab", "20.10.24")


def _statement(planned: tuple[Lock, BuildPlan], sbom: str | None = None) -> dict[str, Any]:
    return provenance.statement(*planned, _image(), sbom)


def test_the_statement_is_slsa_provenance_v1_that_the_in_toto_models_accept_strictly(
    planned: tuple[Lock, BuildPlan],
) -> None:
    from google.protobuf import json_format
    from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement

    locked, _ = planned
    made = _statement(planned, "sha256:" + "ee" * 32)
    # every field one the specifications define: strict parsing (no unknown field) of statement and predicate
    Statement.copy_from_pb(json_format.ParseDict(made, statement_pb2.Statement())).validate()
    json_format.ParseDict(made["predicate"], provenance_pb2.Provenance())
    assert made["_type"] == "https://in-toto.io/Statement/v1"
    assert made["predicateType"] == "https://slsa.dev/provenance/v1"
    assert made["subject"] == [{"name": "envpin/20.02-tf2:0123456789ab", "digest": {"sha256": "cd" * 32}}]
    definition = made["predicate"]["buildDefinition"]
    assert definition["externalParameters"]["inputsHash"] == locked.inputs_hash
    assert definition["externalParameters"]["tag"] == "20.02-tf2-py3"
    deps = {(d["name"], d["digest"]["sha256"]) for d in definition["resolvedDependencies"]}
    assert ("base", "ab" * 32) in deps
    assert {("pypi:tomli-w", "12" * 32), ("pypi:tomli-w", "34" * 32)} <= deps  # one per allowed wheel
    assert {name for name, _ in deps} >= {"Dockerfile", "plan.json", "envpin.pyz", "requirements.lock"}
    base = next(d for d in definition["resolvedDependencies"] if d["name"] == "base")
    assert base["uri"].startswith("pkg:docker/nvidia/tensorflow@sha256:") and "repository_url=nvcr.io" in base["uri"]
    run = made["predicate"]["runDetails"]
    assert run["builder"]["version"]["docker"] == "20.10.24" and "envpin" in run["builder"]["version"]
    assert run["metadata"] == {"finishedOn": "2026-03-01T10:20:30Z"}  # Docker's nanoseconds cut to seconds
    assert run["byproducts"][0]["name"] == "sbom.cdx.json"
    assert provenance.read(provenance.payload(made)) == (made, None)


def test_the_same_image_and_lock_give_the_same_envelope(planned: tuple[Lock, BuildPlan], keys: dict[str, Path]) -> None:
    signer = signing.load_signer(keys["mine"])
    first = signing.sign(provenance.payload(_statement(planned)), provenance.PAYLOAD_TYPE, signer)
    again = signing.sign(provenance.payload(_statement(planned)), provenance.PAYLOAD_TYPE, signer)
    assert first == again  # Ed25519 is deterministic, and nothing in the statement comes from the clock


def _signed(planned: tuple[Lock, BuildPlan], keys: dict[str, Path], tmp_path: Path) -> Path:
    signer = signing.load_signer(keys["mine"])
    envelope = tmp_path / "provenance.json"
    envelope.write_bytes(signing.sign(provenance.payload(_statement(planned)), provenance.PAYLOAD_TYPE, signer))
    return envelope


def test_only_the_signers_key_verifies_and_an_edited_payload_does_not(
    planned: tuple[Lock, BuildPlan], keys: dict[str, Path], tmp_path: Path
) -> None:
    path = _signed(planned, keys, tmp_path)
    envelope = signing.read_envelope(path)
    assert signing.signed_by(envelope, signing.load_public_key(keys["mine.pub"]))
    assert signing.signed_by(envelope, signing.load_public_key(keys["mine"]))  # a private key's public half
    assert not signing.signed_by(envelope, signing.load_public_key(keys["other.pub"]))
    # another subject digest, the signature kept: the signature no longer verifies
    data = json.loads(path.read_text())
    body = base64.b64decode(data["payload"]).replace(b"cd" * 32, b"ef" * 32)
    data["payload"] = base64.b64encode(body).decode()
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    assert not signing.signed_by(signing.read_envelope(edited), signing.load_public_key(keys["mine.pub"]))


def test_a_url_safe_envelope_without_keyid_verifies(
    planned: tuple[Lock, BuildPlan], keys: dict[str, Path], tmp_path: Path
) -> None:
    """DSSE v1.0.2, protocol.md: verifiers "MUST accept either" base64 alphabet; envelope.md: keyid is optional."""
    data = json.loads(_signed(planned, keys, tmp_path).read_text())
    data["payload"] = base64.urlsafe_b64encode(base64.b64decode(data["payload"])).decode()
    data["signatures"] = [{"sig": base64.urlsafe_b64encode(base64.b64decode(data["signatures"][0]["sig"])).decode()}]
    path = tmp_path / "url-safe.json"
    path.write_text(json.dumps(data))
    assert signing.signed_by(signing.read_envelope(path), signing.load_public_key(keys["mine.pub"]))


def test_the_signature_covers_dsses_pre_authentication_encoding() -> None:
    """The test vector of DSSE v1.0.2 protocol.md: PAE("http://example.com/HelloWorld", "hello world")."""
    from securesystemslib.dsse import Envelope

    pae = Envelope(b"hello world", "http://example.com/HelloWorld", {}).pae()
    assert pae == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_an_ecdsa_key_of_another_tool_signs_too(planned: tuple[Lock, BuildPlan], tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

    key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "p256").write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL, NoEncryption()))
    (tmp_path / "p256.pub").write_bytes(key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    body = provenance.payload(_statement(planned))
    (tmp_path / "env.json").write_bytes(
        signing.sign(body, provenance.PAYLOAD_TYPE, signing.load_signer(tmp_path / "p256"))
    )
    envelope = signing.read_envelope(tmp_path / "env.json")
    assert signing.signed_by(envelope, signing.load_public_key(tmp_path / "p256.pub"))


def test_the_same_lock_verifies_and_each_edit_is_named(planned: tuple[Lock, BuildPlan], tmp_path: Path) -> None:
    locked, plan = planned
    made = _statement(planned)
    assert provenance.compare(made, locked, plan).status == "ok"
    # the base pinned to another digest (a re-signed edit of the lock)
    moved = locked.replace(base=locked.base.replace(digest="sha256:" + "00" * 32))
    check = provenance.compare(made, moved, plan)
    assert check.status == "failed" and len(check.lines) == 1
    assert check.lines[0].startswith("resolvedDependencies base: the lock gives sha256:000000000000…")
    # a wheel hash requirements.lock no longer allows, and another release
    (tmp_path / "requirements.lock").write_text(f"tomli_w==1.0.0 \\\n    --hash={HASH_A}\n")
    fewer = make_plan(ngc="20.02-tf2-py3", requirements=tmp_path / "requirements.lock", base_digest=DIGEST)
    lines = provenance.compare(made, locked.replace(inputs=locked.inputs.replace(release="20.03")), fewer).lines
    assert any(
        line.startswith("externalParameters.release: the lock gives '20.03', the attestation '20.02'") for line in lines
    )
    assert any(line.startswith("resolvedDependencies pypi:tomli-w:") for line in lines)
    # a parameter the lock does not give (SLSA: verifiers SHOULD reject unexpected fields)
    extra = json.loads(json.dumps(made))
    extra["predicate"]["buildDefinition"]["externalParameters"]["network"] = "on"
    assert provenance.compare(extra, locked, plan).lines == (
        "externalParameters.network: the lock gives nothing, the attestation 'on'",
    )


def test_the_subject_must_be_the_image_under_its_name(planned: tuple[Lock, BuildPlan]) -> None:
    made = _statement(planned)
    name = "envpin/20.02-tf2:0123456789ab"
    assert provenance.check_subject(made, name, name, IMAGE_ID).status == "ok"
    other = provenance.check_subject(made, name, name, "sha256:" + "99" * 32)
    assert other.status == "failed" and "another image under that name" in other.lines[0]


def test_a_payload_that_is_no_provenance_is_said(planned: tuple[Lock, BuildPlan]) -> None:
    made = _statement(planned)
    assert provenance.read(b"[]")[1] == "the payload is not a JSON object"
    wrong = {**made, "predicateType": "https://spdx.dev/Document"}
    assert "not SLSA Provenance v1" in str(provenance.read(provenance.payload(wrong))[1])
    assert "not an in-toto Statement v1" in str(provenance.read(json.dumps({**made, "subject": []}).encode())[1])


def _one_line_error(res: Any, fragment: str) -> None:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2 and fragment in res.stderr, res.stderr
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), res.stderr


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(cli: Any, tmp_path: Path) -> None:
    res = cli("attest", "keygen", str(tmp_path / "key"))
    assert res.code == 0, res.stderr
    assert os.stat(tmp_path / "key").st_mode & 0o777 == 0o600
    assert (tmp_path / "key.pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")
    keyid = signing.load_public_key(tmp_path / "key.pub").keyid
    assert f"keyid:       {keyid}" in res.stdout
    before = (tmp_path / "key").read_bytes()
    _one_line_error(cli("attest", "keygen", str(tmp_path / "key")), "never overwrites a key file")
    assert (tmp_path / "key").read_bytes() == before


def test_bad_input_is_one_error_and_one_hint(
    cli: Any, planned: tuple[Lock, BuildPlan], keys: dict[str, Path], tmp_path: Path
) -> None:
    locked, _ = planned
    folder = tmp_path / "env"
    folder.mkdir()
    locked.write(folder / "envpin.lock")
    (folder / "requirements.lock").write_text(f"tomli_w==1.0.0 \\\n    --hash={HASH_A} \\\n    --hash={HASH_B}\n")
    envelope = _signed(planned, keys, tmp_path)
    lock = ("--lock", str(folder))
    _one_line_error(cli("attest", "sign", "--key", str(tmp_path / "missing"), *lock), "key file")
    _one_line_error(cli("attest", "sign", "--key", str(keys["mine.pub"]), *lock), "is a public key")
    _one_line_error(
        cli("attest", "verify", str(envelope), "--key", str(tmp_path / "nope.pub"), *lock), "does not exist"
    )
    (tmp_path / "broken.json").write_text('{"payload": "e30=", "signatures": []')
    _one_line_error(
        cli("attest", "verify", str(tmp_path / "broken.json"), "--key", str(keys["mine.pub"]), *lock), "JSON"
    )
    (tmp_path / "unsigned.json").write_text('{"payload": "e30=", "payloadType": "x", "signatures": []}')
    _one_line_error(
        cli("attest", "verify", str(tmp_path / "unsigned.json"), "--key", str(keys["mine.pub"]), *lock), "no signatures"
    )
    # a wrong key is a failed check, not bad input: exit 1, and nothing after it is checked
    res = cli("attest", "verify", str(envelope), "--key", str(keys["other.pub"]), *lock)
    assert res.code == 1, res.stderr
    assert res.stdout.splitlines()[0].startswith("FAILED       signature  no signature verifies with key")
    assert res.stdout.splitlines()[-1] == "verdict: FAILED: signature (subject, inputs not checked)"
