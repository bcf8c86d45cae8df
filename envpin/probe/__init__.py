"""The envpin probe: a complete, structured, comparable fingerprint of the environment a training runs in.

Standard library only, Python 3.6+ (NGC 19.xx-20.xx images ship 3.6): it is copied into every image built
by envpin and runs there as ``python3 -m envpin.probe``. TensorFlow, NVML and the CUDA libraries are
optional and loaded lazily; TensorFlow is imported only for the self-test or with ``--with-tf``.

    report = collect()                      # JSON-able dict, every field says how it was read
    fingerprint_fields(report)              # {"cpu.isa_level": "x86-64-v3", ...}: result-affecting only
    fingerprint(report)                     # "sha256:..." over exactly those fields

The names below are loaded on first use, not when the package is imported: `envpin.probe.runtime` (inside
every training script) and `envpin.probe.ngc` users would otherwise pay for the report, field, CUDA-library
and env-var modules they never call. Module-level ``__getattr__`` (PEP 562) needs Python 3.7, so the package
object becomes an instance of a module subclass that has one (assigning ``__class__`` works from 3.5).
"""

import sys
import types

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, List

#: Public name -> the submodule that defines it.
_HOMES = {
    "BREAKING": "fields",
    "INFO": "fields",
    "RISK": "fields",
    "fingerprint": "fields",
    "fingerprint_fields": "fields",
    "flatten": "fields",
    "PROBE_SCHEMA": "report",
    "collect": "report",
    "load_schema": "report",
    "to_json": "report",
    "to_markdown": "report",
    "write_reports": "report",
}

__all__ = sorted(_HOMES)


class LazyPackage(types.ModuleType):
    """A package whose public names (its module-level `_HOMES`: name -> submodule) are imported from their
    submodule on first access, then kept; envpin.probe and envpin.probe.selftest are both one."""

    def __getattr__(self, name: str) -> "Any":
        home = self.__dict__.get("_HOMES", {}).get(name)
        if home is None:
            raise AttributeError("module {!r} has no attribute {!r}".format(self.__name__, name))
        import importlib

        value = getattr(importlib.import_module(self.__name__ + "." + home), name)
        setattr(self, name, value)
        return value

    def __dir__(self) -> "List[str]":
        return sorted(set(super().__dir__()) | set(self.__dict__.get("_HOMES", ())))


sys.modules[__name__].__class__ = LazyPackage
