"""How `envpin sbom` and `envpin attest` show their results: a document (the SBOM, the signed envelope) on stdout
(so `> file` and `| tool` work), or one line naming the file written; notes on stderr; `attest verify` one line
per check and the verdict on stdout."""

from __future__ import annotations

import sys

from envpin.views.console import note, print_json

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.api import Attestation, AttestVerification, KeyPair, SbomResult


def sbom(res: SbomResult) -> None:
    for line in res.notes:
        note(f"note: {line}")
    if res.output is not None:
        note(f"wrote {res.output}: {res.format}, {res.components} components of {res.tag} ({res.image_id[:19]}…)")
        return
    sys.stdout.write(res.text)
    sys.stdout.flush()


def keygen(res: KeyPair) -> None:
    sys.stdout.write(
        f"private key: {res.private} ({res.algorithm}, mode 0600: keep it secret, sign with it)\n"
        f"public key:  {res.public} (give it to whoever verifies)\n"
        f"keyid:       {res.keyid}\n"
    )
    sys.stdout.flush()


def signed(res: Attestation) -> None:
    what = (
        f"provenance of {res.tag} ({res.image_id[:19]}…) from {res.lock}: {res.dependencies} dependencies"
        f"{', the SBOM beside the lock' if res.sbom else ''}, signed by key {res.keyid[:16]}…"
    )
    if res.output is not None:
        note(f"wrote {res.output}: {what}")
        return
    note(what)
    sys.stdout.write(res.text)
    sys.stdout.flush()


#: How a check's status is written in the text form, padded to one width.
_STATUS = {"ok": "ok", "failed": "FAILED", "not checked": "not checked"}


def verified(res: AttestVerification, as_json: bool) -> None:
    """What was checked with what first (stderr), then one line per check, the builder and the verdict."""
    failed = [c.name for c in res.checks if c.status == "failed"]
    unchecked = [c.name for c in res.checks if c.status == "not checked"]
    verdict = "verified" if res.ok else "FAILED: " + ", ".join(failed) if failed else "not verified"
    if unchecked and not res.ok:
        verdict += f" ({', '.join(unchecked)} not checked)"
    if as_json:
        print_json(
            {
                "envelope": str(res.envelope),
                "lock": str(res.lock),
                "keyid": res.keyid,
                "subject": res.subject,
                "builder": {"id": res.builder, "version": res.builder_versions} if res.builder else None,
                "checks": [{"name": c.name, "status": c.status, "lines": list(c.lines)} for c in res.checks],
                "verdict": "verified" if res.ok else "failed",
            }
        )
        return
    note(f"attest verify: {res.envelope} with key {res.keyid[:16]}… against {res.lock}")
    width = max(len(s) for s in _STATUS.values())
    name_width = max((len(c.name) for c in res.checks), default=0)
    lines = []
    for check in res.checks:
        for n, line in enumerate(check.lines):
            head = (
                f"{_STATUS[check.status]:<{width}}  {check.name:<{name_width}}"
                if n == 0
                else " " * (width + 2 + name_width)
            )
            lines.append(f"{head}  {line}")
    if res.builder:
        versions = ", ".join(f"{k} {v}" for k, v in res.builder_versions.items())
        lines.append(f"builder: {res.builder}" + (f" ({versions})" if versions else ""))
    lines.append(f"verdict: {verdict}")
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
