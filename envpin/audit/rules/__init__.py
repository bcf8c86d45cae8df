"""The audit rules, one module per family, and the registry that looks them up by id.

Each family module defines its rules as `Rule` constants next to the checks that report them, and lists them:

    RULES      the family's rules (each defined once, in this module)
    CHECKS     checks that read the whole Dockerfile (called with the Context, in order)
    RUN_RULES  RunRule classes fed by the one walk over every RUN's commands

The engine (envpin.audit.engine) runs the families' checks; the configuration, SARIF, --fix and the docs
generator look rules up here. Nothing in this package imports the engine, so there is no cycle.
"""

from __future__ import annotations

from types import ModuleType

from envpin.audit.python import rules as python
from envpin.audit.rule import SEVERITIES, Rule
from envpin.audit.rules import apt, base_image, determinism, downloads, git, horovod, pip, syntax

# seed_ok lived in the single rules module: kept importable from here for the code that used it there.
from envpin.audit.rules.determinism import seed_ok

__all__ = ["FAMILIES", "RULES", "SEVERITIES", "Rule", "seed_ok"]

#: The families in the order their checks run (the order findings are merged in; they are sorted afterwards).
FAMILIES: tuple[ModuleType, ...] = (base_image, determinism, horovod, pip, apt, downloads, git, syntax, python)


def _registry(families: tuple[ModuleType, ...]) -> dict[str, Rule]:
    """Every family's rules by id; two rules with one id are an import error, not a silent overwrite."""
    out: dict[str, Rule] = {}
    for family in families:
        for r in family.RULES:
            if r.id in out:
                raise ValueError(f"rule id {r.id!r} is defined twice ({family.__name__})")
            out[r.id] = r
    return out


#: Every rule by id: what ignore lists, inline suppressions, SARIF and the CLI look rules up in.
RULES: dict[str, Rule] = _registry(FAMILIES)
