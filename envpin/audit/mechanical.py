"""The rules --fix handles without a comment (Rule.fixable; FROM rules only when the digest can be resolved):
envpin.audit.MECHANICAL. A module of its own, imported when the set is first asked for: it reads every family's
rules, the script families' too, which a Dockerfile-only audit never loads."""

from __future__ import annotations

from envpin.audit.rules import RULES

MECHANICAL: frozenset[str] = frozenset(r.id for r in RULES.values() if r.fixable)
