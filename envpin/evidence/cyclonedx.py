"""An Sbom (envpin.evidence.components) as CycloneDX 1.6 JSON, built with cyclonedx-python-lib's model and
serialised by its JSON outputter; `problems` checks a document with the library's strict JSON validator (the
official 1.6 schema it ships, no unknown properties)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envpin.evidence.components import Component, Sbom

MEDIA_TYPE = "application/vnd.cyclonedx+json"
SPEC_VERSION = "1.6"


def _component(part: Component) -> Any:
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.component import Component as CdxComponent
    from cyclonedx.model.component import ComponentType
    from cyclonedx.model.contact import OrganizationalEntity
    from packageurl import PackageURL

    return CdxComponent(
        bom_ref=part.ref,
        type=ComponentType(part.kind),
        name=part.name,
        version=part.version,
        description=part.description,
        supplier=OrganizationalEntity(name=part.supplier) if part.supplier else None,
        purl=PackageURL.from_string(part.purl) if part.purl else None,
        hashes=[HashType(alg=HashAlgorithm(alg), content=hexdigest) for alg, hexdigest in part.hashes],
        properties=[Property(name=name, value=value) for name, value in part.properties],
    )


def dumps(sbom: Sbom) -> str:
    """The CycloneDX 1.6 JSON document of `sbom`: metadata.component is the image, every other component is
    listed once, and the image depends on each (the driver minimum included: the host provides it)."""
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component as CdxComponent
    from cyclonedx.model.component import ComponentType
    from cyclonedx.model.lifecycle import LifecyclePhase, PredefinedLifecycle
    from cyclonedx.model.tool import ToolRepository
    from cyclonedx.output.json import JsonV1Dot6

    image = _component(sbom.subject)
    parts = [_component(c) for c in sbom.components]
    tool = CdxComponent(type=ComponentType.APPLICATION, name="envpin", version=sbom.tool_version)
    bom = Bom(
        serial_number=sbom.serial,
        metadata=BomMetaData(
            timestamp=sbom.created,
            component=image,
            tools=ToolRepository(components=[tool]),
            lifecycles=[PredefinedLifecycle(LifecyclePhase.POST_BUILD)],
        ),
        components=parts,
    )
    bom.register_dependency(image, parts)
    for part in parts:
        bom.register_dependency(part)
    return JsonV1Dot6(bom).output_as_string(indent=2) + "\n"


def problems(text: str) -> list[str]:
    """What the strict CycloneDX 1.6 JSON schema finds wrong with `text` (empty: it validates)."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    found = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text, all_errors=True)
    return [str(error) for error in found or ()]
