"""`envpin build` writes sbom.cdx.json, and `envpin sbom` gives CycloneDX 1.6 and SPDX 2.3 of the same image:
both validated with the formats' own libraries, both listing a dpkg package of the stand-in base, the package
requirements.lock installed, the base by digest and the GPU stack with its evidence. `envpin attest` signs the
provenance of that image and verifies it, and names what fails: another image under its name, an edited lock, a
wrong key (in-process, on the module's one built image)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from envpin.environment import lockfile
from envpin.evidence import cyclonedx, spdx
from tests.conftest import Result, run_envpin

STATE: dict[str, str] = {}


@pytest.fixture(scope="module")
def built(stand_in_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small envpin image of the stand-in with one locked requirement (tomli-w 1.0.0, from PyPI); its build
    record in a state folder of this module's own (STATE), which the tests hand `envpin sbom`."""
    folder = tmp_path_factory.mktemp("sbom")
    STATE["ENVPIN_STATE_DIR"] = str(tmp_path_factory.mktemp("sbom-state"))
    src = folder / "requirements.in"
    src.write_text("tomli-w==1.0.0\n")
    locked = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, env=STATE)
    assert locked.code == 0, locked.stderr
    out = folder / "env"
    res = run_envpin(
        "build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image,
        "--requirements", str(folder / "requirements.lock"), "--out", str(out), env=STATE,
    )  # fmt: skip
    assert res.code == 0, res.stderr
    assert f"wrote {out / 'sbom.cdx.json'}: CycloneDX 1.6" in res.stderr
    return out


def _props(component: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in component.get("properties", [])}


def test_build_writes_a_cyclonedx_sbom_that_validates_and_lists_the_image(built: Path) -> None:
    text = (built / "sbom.cdx.json").read_text()
    assert cyclonedx.problems(text) == []
    doc = json.loads(text)
    assert doc["specVersion"] == "1.6" and doc["bomFormat"] == "CycloneDX"
    by_name = {c["name"]: c for c in doc["components"]}
    # a dpkg package of the stand-in base (Debian bookworm), with its Debian purl
    assert by_name["dpkg"]["purl"].startswith("pkg:deb/debian/dpkg@") and "distro=debian-12" in by_name["dpkg"]["purl"]
    # the package requirements.lock installed, with the wheel hashes the lock allows and its RECORD hash
    tomli = by_name["tomli-w"]
    assert tomli["version"] == "1.0.0" and tomli["purl"] == "pkg:pypi/tomli-w@1.0.0"
    props = _props(tomli)
    assert re.fullmatch(r"requirements\.lock tomli[-_]w==1\.0\.0", props["envpin:locked"])
    assert props["envpin:locked-hash"].startswith("sha256:") and len(props["envpin:record-sha256"]) == 64
    # the base by digest, as envpin.lock pins it
    lock = lockfile.read(built / "envpin.lock")
    base = by_name["nvcr.io/nvidia/tensorflow"]
    assert lock.base.digest and base["purl"].startswith(f"pkg:docker/nvidia/tensorflow@{lock.base.digest}?")
    # the GPU stack: the stand-in declares NGC 20.02's variables, so the evidence is the image config
    assert by_name["CUDA"]["version"] == "10.2.89" and _props(by_name["CUDA"])["envpin:evidence-kind"] == "image"
    assert by_name["cuDNN"]["version"] == lock.base.declared["CUDNN_VERSION"]
    assert by_name["NVIDIA driver (minimum)"]["type"] == "device-driver"
    assert by_name["NGC TensorFlow container release"]["version"] == "20.02"
    assert by_name["CPython"]["version"].startswith("3.11.")
    assert doc["metadata"]["component"]["type"] == "container"


def test_sbom_command_writes_both_formats_of_the_same_image(built: Path, tmp_path: Path) -> None:
    cdx, spdx_file = tmp_path / "image.cdx.json", tmp_path / "image.spdx.json"
    first = run_envpin("sbom", "--lock", str(built), "--output", str(cdx), env=STATE)
    assert first.code == 0, first.stderr
    assert cdx.read_bytes() == (built / "sbom.cdx.json").read_bytes(), "one image, one document"
    second = run_envpin("sbom", "--lock", str(built), "--format", "spdx", "-o", str(spdx_file), env=STATE)
    assert second.code == 0, second.stderr
    text = spdx_file.read_text()
    assert spdx.problems(text) == []
    doc = json.loads(text)
    assert doc["spdxVersion"] == "SPDX-2.3"
    names = {p["name"]: p for p in doc["packages"]}
    assert "dpkg" in names and names["tomli-w"]["versionInfo"] == "1.0.0"
    purls = {r["referenceLocator"] for p in doc["packages"] for r in p.get("externalRefs", [])}
    assert "pkg:pypi/tomli-w@1.0.0" in purls
    described = [r for r in doc["relationships"] if r["relationshipType"] == "DESCRIBES"]
    assert len(described) == 1


def test_a_bad_format_or_output_writes_nothing(built: Path, tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    res = run_envpin("sbom", "--lock", str(built), "--output", str(folder), env=STATE)
    assert res.code == 2 and res.stderr.count("error:") == 1 and "hint:" in res.stderr
    missing = run_envpin("sbom", "--lock", str(built), "--output", str(tmp_path / "no" / "sbom.json"), env=STATE)
    assert missing.code == 2 and not (tmp_path / "no").exists()


def test_attest_signs_the_image_and_verify_names_what_fails(
    built: Path, tmp_path: Path, cli: Any, docker_client: Any, stand_in_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVPIN_STATE_DIR", STATE["ENVPIN_STATE_DIR"])
    key, other, envelope = tmp_path / "key", tmp_path / "other", tmp_path / "provenance.json"
    assert cli("attest", "keygen", str(key)).code == 0 and cli("attest", "keygen", str(other)).code == 0
    signed = cli("attest", "sign", "--key", str(key), "--lock", str(built), "-o", str(envelope))
    assert signed.code == 0, signed.stderr
    assert "the SBOM beside the lock, signed by key" in signed.stderr

    def verify(*extra: str, lock: Path = built) -> Result:
        return cli("attest", "verify", str(envelope), "--key", f"{key}.pub", "--lock", str(lock), *extra)

    passed = verify("--format", "json")
    assert passed.code == 0, passed.stdout + passed.stderr
    report = json.loads(passed.stdout)
    assert [(c["name"], c["status"]) for c in report["checks"]] == [
        ("signature", "ok"), ("subject", "ok"), ("inputs", "ok"), ("sbom", "ok"),
    ]  # fmt: skip
    subject = report["subject"]
    assert subject.startswith("envpin/") and report["builder"]["version"]["docker"]

    wrong_key = cli("attest", "verify", str(envelope), "--key", f"{other}.pub", "--lock", str(built))
    assert wrong_key.code == 1 and wrong_key.stdout.startswith("FAILED       signature  no signature verifies")

    # an edited lock (a re-signed edit: another base digest, its self-hash recomputed) beside the same files
    edited = tmp_path / "edited"
    edited.mkdir()
    for name in ("requirements.lock", "sbom.cdx.json", "envpin.lock"):
        (edited / name).write_bytes((built / name).read_bytes())
    lock = lockfile.read(edited / "envpin.lock")
    lock.replace(base=lock.base.replace(digest="sha256:" + "0" * 64)).write(edited / "envpin.lock")
    moved = verify(lock=edited)
    assert moved.code == 1, moved.stderr
    assert "FAILED       inputs     resolvedDependencies base: the lock gives sha256:000000000000…" in moved.stdout
    assert moved.stdout.splitlines()[-1] == "verdict: FAILED: inputs"

    # another image under the subject's name (the stand-in base re-tagged), then the built one put back
    repository, _, tag = subject.rpartition(":")
    original = docker_client.images.get(subject)
    docker_client.images.get(stand_in_image).tag(repository, tag)
    try:
        swapped = verify()
    finally:
        original.tag(repository, tag)
    assert swapped.code == 1, swapped.stderr
    assert "another image under that name" in swapped.stdout and "verdict: FAILED: subject" in swapped.stdout
    assert verify().code == 0
