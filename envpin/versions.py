"""Parsing of the two things users type: TensorFlow version specs and NGC release/tag specs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from envpin.errors import UsageError

_TF_SPEC = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?$")
_TF_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")
_NGC_SPEC = re.compile(r"^(\d{2})\.(\d{2})(?:-(py2|py3|tf1-py3|tf2-py3))?$")
_SUFFIX_FLAVOR = {"py2": "py2", "py3": "py3", "tf1-py3": "tf1", "tf2-py3": "tf2"}


@dataclass(frozen=True)
class TFSpec:
    """A TensorFlow version as the user typed it: '2', '2.1' or '2.1.0' (a prefix to match)."""

    parts: tuple[int, ...]

    @property
    def text(self) -> str:
        return ".".join(str(p) for p in self.parts)

    @property
    def major(self) -> int:
        return self.parts[0]

    def matches(self, version: str | None) -> bool:
        """True when `version` (e.g. '2.1.0', '1.15.5+nv22.12') agrees with every component both give.

        A catalog value known only to MAJOR.MINOR ('2.1') matches '2.1.0': the source is not precise
        enough to contradict it.
        """
        parsed = tf_tuple(version)
        if parsed is None:
            return False
        n = min(len(parsed), len(self.parts))
        return parsed[:n] == self.parts[:n]


def parse_tf_spec(text: str) -> TFSpec:
    m = _TF_SPEC.match(text.strip())
    if not m:
        raise UsageError(
            f"'{text}' is not a TensorFlow version",
            hint="give MAJOR, MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. --tf 2.1 or --tf 1.15.2",
        )
    return TFSpec(tuple(int(g) for g in m.groups() if g is not None))


def tf_tuple(version: str | None) -> tuple[int, ...] | None:
    """Numeric components of a catalog TF version ('1.15.5+nv22.12' -> (1, 15, 5)); None if unknown."""
    if not version:
        return None
    m = _TF_VERSION.match(version)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


@dataclass(frozen=True)
class NGCSpec:
    """An NGC release ('20.02') optionally narrowed to one tag ('20.02-tf2-py3')."""

    release: str
    flavor: str | None

    @property
    def text(self) -> str:
        return self.release if self.flavor is None else f"{self.release} ({self.flavor})"


def parse_ngc_spec(text: str) -> NGCSpec:
    raw = text.strip()
    # Accept a full image reference too: nvcr.io/nvidia/tensorflow:20.02-tf2-py3
    if ":" in raw and "/" in raw:
        raw = raw.rsplit(":", 1)[1]
    m = _NGC_SPEC.match(raw)
    if not m:
        raise UsageError(
            f"'{text}' is not an NGC TensorFlow release",
            hint="give YY.MM or a tag, e.g. --ngc 20.02 or --ngc 20.02-tf2-py3",
        )
    yy, mm, suffix = m.groups()
    if not 1 <= int(mm) <= 12:
        raise UsageError(f"'{text}' has month {mm}, which does not exist", hint="months run from 01 to 12")
    return NGCSpec(f"{yy}.{mm}", _SUFFIX_FLAVOR[suffix] if suffix else None)


def release_index(release: str) -> int:
    """Months since 2000-01, so releases can be compared and distances measured."""
    yy, mm = release.split(".")
    return int(yy) * 12 + int(mm) - 1
