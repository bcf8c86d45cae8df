"""The two things users type, TensorFlow version specs and NGC release/tag specs, for the host side.

Parsing lives in envpin.portable.versions (standard library, also used inside images); this module turns its
SpecError into the CLI's UsageError, with the same message and hint, and holds `major_minor`, the one
truncation of a version to the unit recipes are chosen by (the probe keeps its own until it moves to
envpin.portable.versions).
"""

from __future__ import annotations

from envpin.errors import UsageError, param
from envpin.portable import versions as _v
from envpin.portable.versions import NGCSpec, SpecError, TFSpec, parse_version

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


def major_minor(version: str | None) -> tuple[int, int] | None:
    """'2.1.0' -> (2, 1), '3.6.9' -> (3, 6), '1.15.5+nv22.12' -> (1, 15): the leading MAJOR.MINOR of a version,
    or None when it has no minor ('2', 'latest', None). Recipes, advice and the image's Python are chosen by it."""
    parts = parse_version(version)
    return (parts[0], parts[1]) if parts is not None and len(parts) >= 2 else None
