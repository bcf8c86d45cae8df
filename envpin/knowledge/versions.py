"""The two things users type, TensorFlow version specs and NGC release/tag specs, for the host side.

Parsing lives in envpin.portable.versions (standard library, also used inside images); this module turns its
SpecError into the CLI's UsageError, with the same message and hint. The truncation of a version to MAJOR.MINOR
is envpin.portable.versions.major_minor, imported from there by the host side and the probe alike.
"""

from __future__ import annotations

from envpin.errors import UsageError, param
from envpin.portable import versions as _v
from envpin.portable.versions import NGCSpec, SpecError, TFSpec

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    _T = TypeVar("_T")


def _as_usage_error(parse: Callable[[str], _T], text: str) -> _T:
    try:
        return parse(text)
    except SpecError as exc:
        raise UsageError(exc.message, hint=exc.hint_naming(param)) from None


def parse_tf_spec(text: str) -> TFSpec:
    """'2', '2.1' or '2.1.0': a prefix that catalog TF versions are matched against."""
    return _as_usage_error(_v.parse_tf_spec, text)


def parse_ngc_spec(text: str) -> NGCSpec:
    """'20.02', '20.02-tf2-py3' or 'nvcr.io/nvidia/tensorflow:20.02-tf2-py3'."""
    return _as_usage_error(_v.parse_ngc_spec, text)


def release_index(release: str) -> int:
    """Months since 2000-01 ('20.02' -> 241)."""
    return _as_usage_error(_v.release_index, release)
