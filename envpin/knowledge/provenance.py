"""Facts with provenance: the one check of a value against its source, reason, `also` and `conflicts`, for every
table whose values cite sources (the NGC catalog, envpin.knowledge.catalogcheck, and the stock images,
envpin.knowledge.stock).

A fact is ``{"value", "source", "reason", "also", "conflicts"}``; its JSON shape is the schema's
(``catalog.schema.json#/$defs/textFact``, which the stock table's schema uses too), so the rules here are
those between its parts and the table's sources: a value is backed by a known source that may give that field,
a null says why, `also` lists further sources of the same value, and each conflict is a weaker source giving
another value (or, for a null, the candidates of one grade that disagree).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

#: The kind of a source that only shows a tag was published: it backs no value.
USAGE = "usage"


@dataclass(frozen=True, slots=True)
class Grades(Value):
    """A table's kinds of evidence, strongest first, and the fields a restricted kind may give, each with the
    words that say which (kinds not listed may give any field)."""

    kinds: tuple[str, ...]
    only: Mapping[str, tuple[frozenset[str], str]] = field(default_factory=dict)

    def rank(self, sources: Mapping[str, Any], sid: Any) -> int:
        """The strength of source `sid`: its kind's place in `kinds`, after every kind when unknown."""
        kind = sources.get(sid, {}).get("kind") if isinstance(sid, str) else None
        return self.kinds.index(kind) if kind in self.kinds else len(self.kinds)


def fact_problems(name: str, fact: dict[str, Any], sources: Mapping[str, Any], grades: Grades) -> Iterator[str]:
    """What is wrong between field `name`'s fact (of the schema's shape) and the table's sources."""
    value, source = fact["value"], fact.get("source")
    also: list[str] = fact.get("also", [])
    if value is None:
        if not fact.get("reason"):
            yield "null without a reason"
        if also:
            yield "'also' needs a value: it lists further sources giving the same value"
        if source is not None and source not in sources:
            yield f"source {source!r} is not a known source"
    else:
        yield from backing_problems(name, source, sources, grades, "source")
    if source is not None and source in also:
        yield "'also' repeats a source"
    for sid in also:
        yield from backing_problems(name, sid, sources, grades, "also")
    yield from _conflict_problems(name, fact, sources, grades)


def backing_problems(name: str, sid: Any, sources: Mapping[str, Any], grades: Grades, role: str) -> Iterator[str]:
    """A source id that backs a value: known, able to back a value, allowed to give this field."""
    if sid not in sources:
        yield f"{role} {sid!r} is not a known source"
        return
    kind = sources[sid]["kind"]
    if kind == USAGE:
        yield f"{role} {sid!r} shows only that a tag was published; it backs no value"
    elif kind in grades.only and name not in grades.only[kind][0]:
        yield f"{kind} evidence gives {grades.only[kind][1]} only, not {name} ({role} {sid!r})"


def _conflict_problems(name: str, fact: dict[str, Any], sources: Mapping[str, Any], grades: Grades) -> Iterator[str]:
    """Conflicts: sources giving another value. With a value, each is weaker than the value's source; with
    null, they are the disagreeing candidates of one grade (at least two values)."""
    conflicts: list[dict[str, Any]] = fact.get("conflicts", [])
    value = fact["value"]
    for c in conflicts:
        yield from backing_problems(name, c["source"], sources, grades, "conflict")
        if value is not None and c["value"] == value:
            yield f"conflict {c['source']!r} gives the same value {value!r}: list it under 'also'"
        if value is not None and grades.rank(sources, c["source"]) <= grades.rank(sources, fact.get("source")):
            yield (
                f"conflict {c['source']!r} is not weaker than the value's source {fact.get('source')!r}: "
                "where sources of the same grade disagree the value stays null"
            )
    if value is None and conflicts:
        if len({repr(c["value"]) for c in conflicts}) < 2:
            yield "a null with conflicts needs at least two different candidate values"
        if len({grades.rank(sources, c["source"]) for c in conflicts}) > 1:
            yield "the candidates of a null are of different grades: the strongest one gives the value"
