"""The SBOM mapping (envpin.evidence.components) on a lock, a catalog entry, an image config and an in-image
reading made here: which components, which purls, which evidence, and both documents valid by the formats'
own validators."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envpin.environment.lockfile import Lock
from envpin.environment.plan import BuildPlan, make_plan
from envpin.environment.render import render
from envpin.evidence import components, cyclonedx, spdx
from envpin.evidence.components import BuiltImage

DIGEST = "sha256:" + "ab" * 32
IMAGE_ID = "sha256:" + "cd" * 32
HASH = "sha256:" + "12" * 32
DPKG = """Package: base-files
Status: install ok installed
Priority: required
Architecture: amd64
Version: 12.4+deb12u15
Maintainer: Santiago Vila <sanvila@debian.org>
Description: Debian base system miscellaneous files

Package: libc6
Status: install ok installed
Architecture: amd64
Source: glibc
Version: 2.36-9+deb12u13
Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.

Package: gone
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
Description: removed, its configuration kept
"""


def _inventory() -> dict[str, Any]:
    return {
        "schema": 1,
        "os_release": {"id": "debian", "version_id": "12", "pretty_name": "Debian GNU/Linux 12 (bookworm)"},
        "machine": "x86_64",
        "dpkg": {"path": "/var/lib/dpkg/status", "text": DPKG, "sha256": "ee" * 32},
        "python": {
            "version": "3.11.2",
            "executable": "/usr/bin/python3",
            "distributions": [
                {
                    "name": "pip",
                    "version": "23.0.1",
                    "record": "/x/pip-23.0.1.dist-info/RECORD",
                    "record_sha256": "0" * 64,
                },
                {"name": "tomli-w", "version": "1.0.0", "record": "/x/RECORD", "record_sha256": "1" * 64},
            ],
        },
    }


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lock, BuildPlan]:
    folder = tmp_path_factory.mktemp("sbom-unit")
    (folder / "requirements.lock").write_text(
        f"tomli_w==1.0.0 \\\n    --hash={HASH}\nsix==1.16.0 \\\n    --hash={HASH}\n"
    )
    plan = make_plan(ngc="20.02-tf2-py3", requirements=folder / "requirements.lock", base_digest=DIGEST)
    return Lock.from_plan(plan, render(plan)), plan


def _image(env: tuple[str, ...] = ("CUDA_VERSION=10.2.89", "PATH=/usr/bin")) -> BuiltImage:
    return BuiltImage(IMAGE_ID, "envpin/20.02-tf2:0123456789ab", env)


def test_components_carry_purls_versions_and_evidence(planned: tuple[Lock, BuildPlan]) -> None:
    locked, plan = planned
    sbom = components.sbom(locked, plan, _image(), _inventory())
    by_name = {c.name: c for c in sbom.components}
    assert by_name["libc6"].purl == "pkg:deb/debian/libc6@2.36-9%2Bdeb12u13?arch=amd64&distro=debian-12"
    assert ("envpin:deb-source", "glibc") in by_name["libc6"].properties
    assert "gone" not in by_name, "a package dpkg lists as removed is not in the image"
    assert by_name["tomli-w"].purl == "pkg:pypi/tomli-w@1.0.0"
    assert ("envpin:locked-hash", HASH) in by_name["tomli-w"].properties
    assert ("envpin:record-sha256", "1" * 64) in by_name["tomli-w"].properties
    base = by_name["nvcr.io/nvidia/tensorflow"]
    assert base.purl == f"pkg:docker/nvidia/tensorflow@{DIGEST}?repository_url=nvcr.io&tag=20.02-tf2-py3"
    # CUDA: the image config declares it; cuDNN: only the catalog, with the kind and source it records
    assert ("envpin:evidence-kind", "image") in by_name["CUDA"].properties
    fact = plan.entry.facts["cudnn"]
    assert by_name["cuDNN"].version == fact.value
    assert ("envpin:evidence-kind", fact.kind) in by_name["cuDNN"].properties
    assert ("envpin:source", plan.entry.source_url("cudnn")) in by_name["cuDNN"].properties
    assert not by_name["NVIDIA driver (minimum)"].contained
    assert by_name["NGC TensorFlow container release"].version == "20.02"
    # nothing machine-local: not the image ID, not the clock (the build's one timestamp, the release month)
    assert IMAGE_ID not in repr(sbom.subject) and sbom.created.isoformat() == "2020-02-01T00:00:00+00:00"
    assert sbom.notes == ("requirements.lock pins six==1.16.0, which the image does not have",)


def test_a_value_the_image_declares_wins_and_names_the_catalog_one(planned: tuple[Lock, BuildPlan]) -> None:
    locked, plan = planned
    sbom = components.sbom(locked, plan, _image(("CUDNN_VERSION=9.9.9",)), _inventory())
    cudnn = next(c for c in sbom.components if c.name == "cuDNN")
    assert cudnn.version == "9.9.9"
    assert dict(cudnn.properties)["envpin:catalog-value"].startswith(str(plan.entry.facts["cudnn"].value))


def test_the_same_contents_give_the_same_document_on_every_machine(planned: tuple[Lock, BuildPlan]) -> None:
    locked, plan = planned
    first = cyclonedx.dumps(components.sbom(locked, plan, _image(), _inventory()))
    elsewhere = _image().replace(id="sha256:" + "ef" * 32)  # another machine's Docker image ID
    assert first == cyclonedx.dumps(components.sbom(locked, plan, elsewhere, _inventory()))
    changed = _inventory()
    changed["python"]["distributions"][1]["version"] = "1.0.1"
    other = cyclonedx.dumps(components.sbom(locked, plan, _image(), changed))
    assert json.loads(first)["serialNumber"] != json.loads(other)["serialNumber"]


def test_both_formats_validate(planned: tuple[Lock, BuildPlan]) -> None:
    locked, plan = planned
    sbom = components.sbom(locked, plan, _image(), _inventory())
    cdx = cyclonedx.dumps(sbom)
    assert cyclonedx.problems(cdx) == []
    doc = json.loads(cdx)
    assert doc["specVersion"] == "1.6" and doc["metadata"]["component"]["bom-ref"] == sbom.subject.ref
    assert len(doc["components"]) == len(sbom.components)
    spdx_text = spdx.dumps(sbom)
    assert spdx.problems(spdx_text) == []
    packages = json.loads(spdx_text)["packages"]
    assert len(packages) == len(sbom.components) + 1
    # and the validators do find a broken document
    broken = json.loads(cdx)
    broken["components"][0]["type"] = "not-a-type"
    assert cyclonedx.problems(json.dumps(broken))
    assert spdx.problems(spdx_text.replace('"SPDX-2.3"', '"SPDX-9.9"'))


def test_an_image_without_dpkg_says_so(planned: tuple[Lock, BuildPlan], tmp_path: Path) -> None:
    locked, plan = planned
    reading = {**_inventory(), "dpkg": {"path": "/var/lib/dpkg/status", "text": None, "reason": "FileNotFoundError"}}
    sbom = components.sbom(locked, plan, _image(), reading)
    assert not any(c.purl and c.purl.startswith("pkg:deb/") for c in sbom.components)
    assert any("no dpkg status database" in n for n in sbom.notes)
