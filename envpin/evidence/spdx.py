"""An Sbom (envpin.evidence.components) as SPDX 2.3 JSON, built with spdx-tools' model, written by its JSON
writer (which validates the document first); `problems` parses a document back and validates it with
spdx-tools' own validation."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envpin.evidence.components import Component, Sbom

MEDIA_TYPE = "application/spdx+json"
SPDX_VERSION = "SPDX-2.3"
#: CycloneDX component type -> SPDX primary package purpose.
PURPOSE = {
    "container": "CONTAINER",
    "operating-system": "OPERATING_SYSTEM",
    "library": "LIBRARY",
    "framework": "FRAMEWORK",
    "platform": "OTHER",
    "device-driver": "OTHER",
    "application": "APPLICATION",
}
_CHECKSUM = {"SHA-256": "SHA256", "SHA-1": "SHA1", "SHA-512": "SHA512", "MD5": "MD5"}


def spdx_id(ref: str) -> str:
    return "SPDXRef-" + re.sub(r"[^A-Za-z0-9.-]+", "-", ref)


def _package(part: Component) -> Any:
    from spdx_tools.spdx.model.actor import Actor, ActorType
    from spdx_tools.spdx.model.checksum import Checksum, ChecksumAlgorithm
    from spdx_tools.spdx.model.package import ExternalPackageRef, ExternalPackageRefCategory, Package, PackagePurpose
    from spdx_tools.spdx.model.spdx_no_assertion import SpdxNoAssertion

    refs = [ExternalPackageRef(ExternalPackageRefCategory.PACKAGE_MANAGER, "purl", part.purl)] if part.purl else []
    notes = [f"{name}={value}" for name, value in part.properties]
    return Package(
        spdx_id=spdx_id(part.ref),
        name=part.name,
        download_location=SpdxNoAssertion(),
        version=part.version,
        supplier=Actor(ActorType.ORGANIZATION, part.supplier) if part.supplier else SpdxNoAssertion(),
        files_analyzed=False,
        checksums=[
            Checksum(ChecksumAlgorithm[_CHECKSUM[alg]], value) for alg, value in part.hashes if alg in _CHECKSUM
        ],
        description=part.description,
        comment="; ".join(notes) or None,
        external_references=refs,
        primary_package_purpose=PackagePurpose[PURPOSE.get(part.kind, "OTHER")],
    )


def document(sbom: Sbom) -> Any:
    """The spdx-tools Document of `sbom`: it DESCRIBES the image, which CONTAINS every component it holds and
    DEPENDS_ON the driver it needs from the host."""
    from spdx_tools.spdx.model.actor import Actor, ActorType
    from spdx_tools.spdx.model.document import CreationInfo, Document
    from spdx_tools.spdx.model.relationship import Relationship, RelationshipType

    image = _package(sbom.subject)
    packages = [_package(c) for c in sbom.components]
    relationships = [Relationship("SPDXRef-DOCUMENT", RelationshipType.DESCRIBES, image.spdx_id)]
    relationships += [
        Relationship(
            image.spdx_id, RelationshipType.CONTAINS if c.contained else RelationshipType.DEPENDS_ON, p.spdx_id
        )
        for c, p in zip(sbom.components, packages, strict=True)
    ]
    info = CreationInfo(
        spdx_version=SPDX_VERSION,
        spdx_id="SPDXRef-DOCUMENT",
        name=f"{sbom.subject.name}:{sbom.subject.version}" if sbom.subject.version else sbom.subject.name,
        document_namespace=f"urn:uuid:{sbom.serial}",
        creators=[Actor(ActorType.TOOL, f"envpin-{sbom.tool_version}")],
        created=sbom.created.replace(tzinfo=None),
        creator_comment="the image as built; see docs/evidence.md for what this document proves and does not",
    )
    return Document(info, packages=[image, *packages], relationships=relationships)


def dumps(sbom: Sbom) -> str:
    """The SPDX 2.3 JSON document of `sbom` (spdx-tools validates it before writing: a ValueError otherwise)."""
    import io

    from spdx_tools.spdx.writer.json.json_writer import write_document_to_stream

    stream = io.StringIO()
    write_document_to_stream(document(sbom), stream, validate=True)
    return stream.getvalue() + "\n"


def problems(text: str) -> list[str]:
    """What spdx-tools finds wrong with the SPDX 2.3 JSON `text`, parsed back with its JSON parser (empty: valid)."""
    import json

    from spdx_tools.spdx.parser.error import SPDXParsingError
    from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
    from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

    try:
        doc = JsonLikeDictParser().parse(json.loads(text))  # type: ignore[no-untyped-call]
    except SPDXParsingError as exc:
        return [str(m) for m in exc.messages]
    return [m.validation_message for m in validate_full_spdx_document(doc, SPDX_VERSION)]
