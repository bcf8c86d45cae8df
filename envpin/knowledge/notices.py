"""Warnings the library finds on its way (a damaged image-facts cache, image facts that contradict the written
sources), kept as data until the command line prints them.

The library never prints, and the code that finds such a problem (loading the catalog) runs deep inside every
command, under api functions that return their own results. So instead of threading a list of warnings
through every return value, the finder posts one line here and the CLI's main() drains them once, at the end
of the command, as `warning:` lines on stderr (envpin.cli). The same line posted twice is kept once: a catalog
loaded ten times in one command warns once. Library users read the same lines from the objects that carry
them (Catalog.notices, Entry.notices) or call drain() themselves.

It lives in envpin.knowledge, the lowest layer that posts (tests/unit/test_layers.py keeps the package root to
entry points); every layer above may post too.
"""

from __future__ import annotations

_pending: dict[str, None] = {}  # insertion-ordered set


def post(*lines: str) -> None:
    """Keep each line for the end of the command (once, however often it is posted)."""
    for line in lines:
        _pending.setdefault(line, None)


def pending() -> list[str]:
    """The lines posted so far, in the order first posted (nothing is removed)."""
    return list(_pending)


def drain() -> list[str]:
    """The lines posted so far, which are then forgotten: each command reports its own."""
    lines = list(_pending)
    _pending.clear()
    return lines
