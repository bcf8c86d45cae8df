"""The envpin probe: a complete, structured, comparable fingerprint of the environment a training runs in.

Standard library only, Python 3.6+ (NGC 19.xx-20.xx images ship 3.6): it is copied into every image built
by envpin and runs there as ``python3 -m envpin.probe``. TensorFlow, NVML and the CUDA libraries are
optional and loaded lazily; TensorFlow is imported only for the self-test or with ``--with-tf``.

    report = collect()                      # JSON-able dict, every field says how it was read
    fingerprint_fields(report)              # {"cpu.isa_level": "x86-64-v3", ...}: result-affecting only
    fingerprint(report)                     # "sha256:..." over exactly those fields

The names below are loaded on first use, not when the package is imported (envpin.portable.lazy reads the
block): `envpin.probe.runtime` (inside every training script) and `envpin.probe.ngc` users would otherwise pay
for the report, field, CUDA-library and env-var modules they never call.
"""

from envpin.portable.lazy import lazy_exports

TYPE_CHECKING = False  # typing's without importing it
if TYPE_CHECKING:  # the one declaration of the public names: `name as name` exports it
    from envpin.probe.fields import BREAKING as BREAKING
    from envpin.probe.fields import INFO as INFO
    from envpin.probe.fields import RISK as RISK
    from envpin.probe.fields import fingerprint as fingerprint
    from envpin.probe.fields import fingerprint_fields as fingerprint_fields
    from envpin.probe.fields import flatten as flatten
    from envpin.probe.report import PROBE_SCHEMA as PROBE_SCHEMA
    from envpin.probe.report import collect as collect
    from envpin.probe.report import load_schema as load_schema
    from envpin.probe.report import to_json as to_json
    from envpin.probe.report import to_markdown as to_markdown
    from envpin.probe.report import write_reports as write_reports

lazy_exports(__name__)
