"""How many examples a property test draws. CI (`CI=true`) and `ENVPIN_TEST_EXAMPLES=full` draw each test's
full count; the inner loop draws a quarter of it (at least 25), so `pytest tests/unit` stays fast while every
property still runs on every change and CI keeps the whole search. Tests without a count of their own use the
profile registered here (Hypothesis' default of 100, or 25 in the inner loop)."""

from __future__ import annotations

import os

from hypothesis import settings

#: Every example, as CI draws them; ENVPIN_TEST_EXAMPLES=full asks for the same on a laptop.
FULL = os.environ.get("CI") == "true" or os.environ.get("ENVPIN_TEST_EXAMPLES") == "full"


def examples(full: int) -> int:
    """The number of examples to draw for a test whose full search is `full` examples."""
    return full if FULL else min(full, max(25, full // 4))


settings.register_profile("envpin", max_examples=examples(100))
settings.load_profile("envpin")
