"""The envpin probe: a complete, structured, comparable fingerprint of the environment a training runs in.

Standard library only, Python 3.6+ (NGC 19.xx-20.xx images ship 3.6): it is copied into every image built
by envpin and runs there as ``python3 -m envpin.probe``. TensorFlow, NVML and the CUDA libraries are
optional and loaded lazily; TensorFlow is imported only for the self-test or with ``--with-tf``.

    report = collect()                      # JSON-able dict, every field says how it was read
    fingerprint_fields(report)              # {"cpu.isa_level": "x86-64-v3", ...}: result-affecting only
    fingerprint(report)                     # "sha256:..." over exactly those fields
"""

from envpin.probe.fields import BREAKING, INFO, RISK, fingerprint, fingerprint_fields, flatten
from envpin.probe.report import (
    PROBE_SCHEMA,
    collect,
    load_schema,
    to_json,
    to_markdown,
    write_reports,
)

__all__ = [
    "BREAKING",
    "INFO",
    "PROBE_SCHEMA",
    "RISK",
    "collect",
    "fingerprint",
    "fingerprint_fields",
    "flatten",
    "load_schema",
    "to_json",
    "to_markdown",
    "write_reports",
]
