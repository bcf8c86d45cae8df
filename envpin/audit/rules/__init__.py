"""The audit rules, one module per family, and the registry that looks them up by id.

Each family module defines its rules as `Rule` constants next to the checks that report them, and lists them.
A Dockerfile family (this package) lists:

    RULES      the family's rules (each defined once, in this module)
    CHECKS     checks that read the whole Dockerfile (called with the Context, in order)
    RUN_RULES  RunRule classes fed by the one walk over every RUN's commands

A family of the training-script audit (envpin/audit/python/, see script_families) lists:

    RULES       the family's rules
    CHECKS      checks of one walked script (called with the Script, in order)
    FIXES       rule id -> the mechanical fix of one of its findings (True: fixed; else it is commented)
    FOLLOW_UPS  rule id -> a fix another finding's fix made, asked after every finding had its own
    STARTUP     rule id -> the family's part of the start-up block --fix inserts after the TensorFlow import

The engines (envpin.audit.engine, envpin.audit.python.audit) run the families' checks; the configuration,
SARIF, --fix and the docs generator look rules up here. Nothing a family imports imports this registry, so
there is no cycle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import ModuleType

from envpin.audit.rule import Rule
from envpin.audit.rules import apt, base_image, determinism, downloads, git, horovod, pip, syntax

__all__ = ["DOCKERFILE_FAMILIES", "RULES", "families", "script_families"]

#: The Dockerfile families in the order their checks run (the order findings are merged in; they are sorted
#: afterwards).
DOCKERFILE_FAMILIES: tuple[ModuleType, ...] = (base_image, determinism, horovod, pip, apt, downloads, git, syntax)


def script_families() -> tuple[ModuleType, ...]:
    """The families of the training-script audit, in their rules' order (the reference's): ops the recipe table
    lists as raising or nondeterministic, the determinism switch, seeds, the input pipeline, XLA, environment
    variables, Horovod, tf.distribute. Imported when first asked for: an audit of Dockerfiles alone loads none of
    them."""
    from envpin.audit.python import data, distributed, environment, horovod, ops, seeding, switch, xla

    return (ops, switch, seeding, data, xla, environment, horovod, distributed)


def families() -> tuple[ModuleType, ...]:
    """Every family, the Dockerfile families first: the order of RULES and of docs/audit.md's reference."""
    return DOCKERFILE_FAMILIES + script_families()


def _add(rules: dict[str, Rule], families: tuple[ModuleType, ...]) -> dict[str, Rule]:
    """`families`' rules added by id; two rules with one id are an error, not a silent overwrite."""
    for family in families:
        for r in family.RULES:
            if r.id in rules:
                raise ValueError(f"rule id {r.id!r} is defined twice ({family.__name__})")
            rules[r.id] = r
    return rules


class _Registry(Mapping[str, Rule]):
    """Every rule by id, in the families' order. The Dockerfile families' rules are in from the start; the script
    families' are added the first time a rule not among those is asked for, or the whole registry is read (a
    configuration naming a py- rule, SARIF's rule list): a Dockerfile-only audit never loads the script audit."""

    __slots__ = ("_complete", "_rules")

    def __init__(self) -> None:
        self._rules = _add({}, DOCKERFILE_FAMILIES)
        self._complete = False

    def _all(self) -> dict[str, Rule]:
        if not self._complete:
            _add(self._rules, script_families())
            self._complete = True
        return self._rules

    def __getitem__(self, rid: str) -> Rule:
        found = self._rules.get(rid)
        return found if found is not None else self._all()[rid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"RULES({', '.join(self._all())})"


#: Every rule by id: what ignore lists, inline suppressions, SARIF and the CLI look rules up in.
RULES: Mapping[str, Rule] = _Registry()
