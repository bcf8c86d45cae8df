"""The two things users type, TensorFlow version specs and NGC release/tag specs, for the host side.

Parsing lives in envpin.probe.versions (standard library, also used inside images); this module only turns
its SpecError into the CLI's UsageError, with the same message and hint.
"""

from __future__ import annotations

from envpin.errors import UsageError
from envpin.probe import versions as _v
from envpin.probe.versions import NGCSpec, TFSpec, parse_version

__all__ = ["NGCSpec", "TFSpec", "parse_ngc_spec", "parse_tf_spec", "parse_version", "release_index", "tf_tuple"]


def parse_tf_spec(text: str) -> TFSpec:
    try:
        return _v.parse_tf_spec(text)
    except _v.SpecError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None


def parse_ngc_spec(text: str) -> NGCSpec:
    try:
        return _v.parse_ngc_spec(text)
    except _v.SpecError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None


def release_index(release: str) -> int:
    try:
        return _v.release_index(release)
    except _v.SpecError as exc:
        raise UsageError(exc.message, hint=exc.hint or "give YY.MM, e.g. 20.02") from None


def tf_tuple(version: str | None) -> tuple[int, ...] | None:
    """Numeric components of a catalog TF version ('1.15.5+nv22.12' -> (1, 15, 5)); None if unknown."""
    return parse_version(version)
