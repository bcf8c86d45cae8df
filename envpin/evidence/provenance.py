"""The provenance of an image envpin built, as an in-toto Statement v1 whose predicate is SLSA Provenance v1, and
the comparison of one with a lock: pure functions, no I/O (docs/evidence.md, "Signed provenance").

The statement says: the image with this ID (the subject, by the digest Docker gives its config) was built by
envpin from these inputs (buildDefinition: the lock's inputs as externalParameters; the base image by digest,
every file the lock hashes and every wheel hash requirements.lock allows as resolvedDependencies), by this
envpin and engine (runDetails.builder). Both the Statement and the predicate are built and checked with the in-toto
project's own models (in-toto-attestation: the Statement wrapper and the generated SLSA Provenance v1 protobuf
message), never assembled as free-form JSON: a field the specifications do not define cannot be written.

Which fields are compared with a lock, and which are only reported, is `compare`'s docstring and the docs' table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envpin import __version__
from envpin.record import Value

if TYPE_CHECKING:
    from envpin.environment.lockfile import Lock
    from envpin.environment.plan import BuildPlan

#: in-toto Attestation Framework spec v1, spec/v1/statement.md: "Always https://in-toto.io/Statement/v1".
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
#: SLSA v1.2, spec/build-provenance.md: the predicateType of SLSA Provenance v1 (the same for every v1.x).
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
#: in-toto spec/v1/envelope.md: a DSSE payloadType "MUST be set to application/vnd.in-toto.<predicate>+json or to
#: application/vnd.in-toto+json"; the generic one, so a consumer reads the predicate type from the Statement.
PAYLOAD_TYPE = "application/vnd.in-toto+json"
_DOCS = "https://github.com/envpin/envpin/blob/main/docs/evidence.md"
#: SLSA: buildType "SHOULD resolve to a human-readable specification"; it is the docs' section that says what
#: each parameter and dependency means and how to rebuild from them.
BUILD_TYPE = f"{_DOCS}#the-build-type"
#: SLSA: builder.id is "URI indicating the transitive closure of the trusted build platform"; the docs' section
#: says what that is for envpin (the machine that ran `envpin build` and signed) and what is not claimed.
BUILDER_ID = f"{_DOCS}#the-builder"
#: CycloneDX's registered media type for its JSON documents (the SBOM beside the lock, a byproduct).
SBOM_MEDIA_TYPE = "application/vnd.cyclonedx+json"
_CREATED = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z\Z")


@dataclass(frozen=True, slots=True)
class AttestedImage(Value):
    """What the engine says of the image being attested: its ID (`sha256:…`, the digest of its config), the tag
    envpin gave it, when the engine created it (RFC 3339 UTC, seconds), and the engine and its version."""

    id: str
    tag: str
    created: str | None = None
    engine: str = "docker"
    engine_version: str | None = None

    @staticmethod
    def from_attrs(attrs: dict[str, Any], tag: str, engine_version: str | None) -> AttestedImage:
        """From `docker image inspect` (the SDK's attrs); Docker's nanosecond creation time cut to seconds, the
        form the in-toto Timestamp field type gives (spec/v1/field_types.md)."""
        created = _CREATED.match(str(attrs.get("Created") or ""))
        return AttestedImage(
            str(attrs["Id"]), tag, f"{created.group(1)}Z" if created else None, "docker", engine_version
        )


@dataclass(frozen=True, slots=True)
class Check(Value):
    """One thing `attest verify` checks: `status` is "ok", "failed" or "not checked"; `lines` say what was found
    (for "ok" what passed, else each problem)."""

    name: str
    status: str
    lines: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _digest(value: str) -> dict[str, str]:
    """`sha256:ab…` -> {"sha256": "ab…"}: the in-toto DigestSet (spec/v1/digest_set.md), algorithm -> lowercase hex."""
    algorithm, _, hexdigest = value.partition(":")
    return {algorithm.lower(): hexdigest.lower()}


def _said(digests: list[str]) -> str:
    return ", ".join(d[:19] + "…" for d in digests) if digests else "none"


# --- building ------------------------------------------------------------------------------------------------


def external_parameters(locked: Lock) -> dict[str, str]:
    """The lock's inputs, as strings (SLSA: "RECOMMENDED to keep the structure simple with string values"): what a
    user chose (release, flavor, tag, TensorFlow, name, mirror, distributed recipe) and what they resolve to in
    envpin's terms (inputs hash, recipe, the envpin that wrote the lock). Digests of artifacts go in
    resolvedDependencies, as SLSA asks."""
    inp = locked.inputs
    params = {
        "inputsHash": locked.inputs_hash,
        "envpinVersion": locked.envpin_version,
        "name": inp.name,
        "release": inp.release,
        "flavor": inp.flavor,
        "tag": inp.tag,
        "tfVersion": inp.tf_version,
        "tfVersionSource": inp.tf_version_source,
        "recipe": f"{locked.recipe.id} {locked.recipe.hash}",
    }
    if inp.build_from:
        params["buildFrom"] = inp.build_from
    if locked.distributed is not None:
        params["distributed"] = locked.distributed.hash
    return params


def resolved_dependencies(locked: Lock, plan: BuildPlan) -> list[dict[str, Any]]:
    """What the build fetched or copied in, each by digest: the base image (its purl, as the SBOM names it), every
    file the lock's [files] hashes (the Dockerfile, plan.json, envpin.pyz, requirements.lock, ...), and each wheel
    file requirements.lock allows (one descriptor per allowed hash: pip installs one of them with
    --require-hashes, and which one depends on the image's platform)."""
    from packageurl import PackageURL

    from envpin.evidence.components import base

    out: list[dict[str, Any]] = []
    if locked.base.digest:
        out.append(
            {
                "name": "base",
                "uri": base(locked, plan)[0].purl,
                "digest": _digest(locked.base.digest),
                "annotations": {"image": locked.base.image},
            }
        )
    out += [{"name": rel, "digest": _digest(value)} for rel, value in sorted(locked.files.items())]
    for req in sorted(plan.requirements, key=lambda r: r.key):
        uri = str(PackageURL(type="pypi", name=req.key, version=req.version))
        out += [{"name": f"pypi:{req.key}", "uri": uri, "digest": _digest(h)} for h in sorted(req.hashes)]
    return out


def statement(locked: Lock, plan: BuildPlan, image: AttestedImage, sbom_sha256: str | None = None) -> dict[str, Any]:
    """The in-toto Statement v1 (SLSA Provenance v1 predicate) of `image`, built from `locked` and its plan, as the
    in-toto models serialise it; `sbom_sha256` (`sha256:…` of the sbom.cdx.json beside the lock) is listed as a
    byproduct. Nothing in it comes from the clock: the same image and lock give the same statement."""
    from google.protobuf import json_format
    from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
    from in_toto_attestation.v1.statement import Statement

    builder: dict[str, Any] = {"id": BUILDER_ID, "version": {"envpin": __version__}}
    if image.engine_version:
        builder["version"][image.engine] = image.engine_version
    run: dict[str, Any] = {"builder": builder}
    if image.created:
        run["metadata"] = {"finishedOn": image.created}
    if sbom_sha256:
        run["byproducts"] = [{"name": "sbom.cdx.json", "digest": _digest(sbom_sha256), "mediaType": SBOM_MEDIA_TYPE}]
    predicate = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": external_parameters(locked),
            "internalParameters": {"sourceDateEpoch": str(plan.source_date_epoch), "engine": image.engine},
            "resolvedDependencies": resolved_dependencies(locked, plan),
        },
        "runDetails": run,
    }
    # The predicate through SLSA's message, strictly: a misspelt or undefined field is a ParseError here.
    checked = json_format.MessageToDict(json_format.ParseDict(predicate, provenance_pb2.Provenance()))
    subject = ResourceDescriptor(name=image.tag, digest=_digest(image.id)).pb
    made = Statement([subject], PREDICATE_TYPE, checked)
    made.validate()
    result: dict[str, Any] = json_format.MessageToDict(made.pb)
    return result


def payload(made: dict[str, Any]) -> bytes:
    """The serialised body DSSE signs: compact JSON with sorted keys, so the same statement gives the same bytes
    (DSSE needs no canonical form; envpin wants deterministic files)."""
    return json.dumps(made, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# --- reading -------------------------------------------------------------------------------------------------


def read(body: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(the statement, None) when `body` is an in-toto Statement v1 with a SLSA Provenance v1 predicate, else
    (None, why not). Parsed with the in-toto models; fields they do not know are ignored, as both specifications'
    parsing rules require of a consumer."""
    from google.protobuf import json_format
    from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement

    from envpin.errors import EnvpinError
    from envpin.files.read import parse_json

    try:
        data = parse_json(body.decode("utf-8"), "the payload", EnvpinError)
    except (UnicodeDecodeError, EnvpinError) as exc:
        return None, f"the payload is not JSON text ({exc})"
    if not isinstance(data, dict):
        return None, "the payload is not a JSON object"
    try:
        parsed = Statement.copy_from_pb(
            json_format.ParseDict(data, statement_pb2.Statement(), ignore_unknown_fields=True)
        )
        parsed.validate()
        if parsed.pb.predicate_type != PREDICATE_TYPE:
            return None, f"its predicateType is {parsed.pb.predicate_type!r}, not SLSA Provenance v1 ({PREDICATE_TYPE})"
        json_format.ParseDict(data.get("predicate"), provenance_pb2.Provenance(), ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        return (
            None,
            f"it is not an in-toto Statement v1 with a SLSA Provenance v1 predicate ({str(exc).splitlines()[0]})",
        )
    return data, None


def subjects(made: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, `sha256:…`) of each subject that names its sha256."""
    return [
        (str(s.get("name") or ""), f"sha256:{s['digest']['sha256']}")
        for s in made.get("subject") or ()
        if isinstance(s, dict) and isinstance(s.get("digest"), dict) and "sha256" in s["digest"]
    ]


def _dependencies(entries: Any) -> dict[str, list[str]]:
    """name -> its sorted digests (`alg:hex`), of a resolvedDependencies list."""
    out: dict[str, list[str]] = {}
    for entry in entries or ():
        if isinstance(entry, dict):
            found = entry.get("digest")
            digests: dict[str, Any] = found if isinstance(found, dict) else {}
            out.setdefault(str(entry.get("name") or entry.get("uri") or "?"), []).extend(
                f"{alg}:{value}" for alg, value in sorted(digests.items())
            )
    return {name: sorted(values) for name, values in out.items()}


def compare(made: dict[str, Any], locked: Lock, plan: BuildPlan) -> Check:
    """The statement's inputs against the lock's: buildType (envpin's), every externalParameter (one the lock does
    not give is a problem too: SLSA's verifiers "SHOULD reject unrecognized or unexpected fields"), and every
    resolvedDependency by name and digest. internalParameters and runDetails are reported, not compared: SLSA
    needs no verification of the first, and the builder's versions may differ from the verifying envpin's."""
    definition = (made.get("predicate") or {}).get("buildDefinition") or {}
    problems: list[str] = []
    if definition.get("buildType") != BUILD_TYPE:
        problems.append(f"buildType is {definition.get('buildType')!r}, not envpin's ({BUILD_TYPE})")
    attested = definition.get("externalParameters") or {}
    expected = external_parameters(locked)
    for key in sorted({*attested, *expected}):
        have, want = attested.get(key), expected.get(key)
        if have != want:
            problems.append(
                f"externalParameters.{key}: the lock gives {'nothing' if want is None else repr(want)}, "
                f"the attestation {'nothing' if have is None else repr(have)}"
            )
    theirs = _dependencies(definition.get("resolvedDependencies"))
    ours = _dependencies(resolved_dependencies(locked, plan))
    for name in sorted({*theirs, *ours}):
        if theirs.get(name) != ours.get(name):
            problems.append(
                f"resolvedDependencies {name}: the lock gives {_said(ours.get(name, []))}, "
                f"the attestation {_said(theirs.get(name, []))}"
            )
    if problems:
        return Check("inputs", "failed", tuple(problems))
    return Check(
        "inputs",
        "ok",
        (
            f"the lock's inputs {locked.inputs_hash[:19]}…: {len(expected)} parameters and "
            f"{sum(len(v) for v in ours.values())} dependencies as attested",
        ),
    )


def check_subject(made: dict[str, Any], name: str, ref: str, image_id: str) -> Check:
    """The subject called `name` against the image Docker has under `ref` (the subject's name, unless the user
    named another image), whose ID is `image_id`."""
    digest = dict(subjects(made)).get(name)
    if digest is None:
        return Check("subject", "failed", (f"the attestation has no subject named {name}",))
    if image_id != digest:
        return Check(
            "subject",
            "failed",
            (f"{ref} is {image_id[:19]}… here, the attestation is of {digest[:19]}… (another image under that name)",),
        )
    attested = "the image attested" + ("" if ref == name else f" as {name}")
    return Check("subject", "ok", (f"{ref} is {image_id[:19]}…, {attested}",))


def byproduct(made: dict[str, Any], name: str) -> str | None:
    """`alg:hex` of the byproduct called `name`, when the statement lists one."""
    run = (made.get("predicate") or {}).get("runDetails") or {}
    for entry in run.get("byproducts") or ():
        if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get("digest"), dict):
            return next((f"{alg}:{value}" for alg, value in sorted(entry["digest"].items())), None)
    return None


def builder(made: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """runDetails.builder: its id and versions, as the statement gives them (reported, not compared)."""
    found = ((made.get("predicate") or {}).get("runDetails") or {}).get("builder") or {}
    given = found.get("version")
    versions: dict[str, Any] = given if isinstance(given, dict) else {}
    return str(found.get("id") or ""), {str(k): str(v) for k, v in sorted(versions.items())}
