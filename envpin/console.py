"""Rich consoles: human output goes to stderr so stdout stays clean for artifacts and JSON."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console


def _width() -> int | None:
    # A fixed width keeps output stable in tests and pipes; COLUMNS still wins when set.
    return None if os.environ.get("COLUMNS") else (120 if not sys.stderr.isatty() else None)


err = Console(stderr=True, highlight=False, width=_width())


def print_json(data: Any) -> None:
    """Canonical JSON on stdout: sorted keys, two-space indent, trailing newline."""
    sys.stdout.write(json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()
