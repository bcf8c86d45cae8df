"""The one home for imports that differ between the Python versions envpin's host side runs on (3.10 to
3.13): every module takes them from here, so a new version difference is handled in one place.

The probe and envpin.portable are not covered: they run on the image's Python (3.6 and later) and use
only what 3.6 has.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised by the 3.10 test run in CI (scripts/pythons.sh)
    import tomli as tomllib

__all__ = ["tomllib"]
