"""Evidence a second party can check about an image envpin built (docs/evidence.md).

envpin.evidence.components maps what is known of a built image (its lock, the catalog entry of its base, its
config and what envpin.probe.inventory read inside it) to one list of components, with no I/O;
envpin.evidence.cyclonedx and envpin.evidence.spdx write that list as CycloneDX 1.6 and SPDX 2.3 JSON with the
maintained libraries of those formats (the `evidence` extra), and check what they wrote with the libraries'
own validators.
"""
