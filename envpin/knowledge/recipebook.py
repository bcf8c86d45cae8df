"""The whole recipe table as typed records (`recipes.book()`): the settings every recipe shares, the rows, the op
entries of every version, the distributed recipe, and what the script audit reads. The records of entries a
resolved recipe holds too (variables, steps, notes, op entries, NGC overrides, advice, the distributed parts) are
envpin.knowledge.reciperecords'; the entries only the table holds (rows, overridden requests, built-on APIs) are
here, each made from its entry by `of()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envpin.knowledge.distributedrecords import DistributedRecords
from envpin.knowledge.reciperecords import Advice, NgcOverride, Note, OpEntry, Step, Variable
from envpin.portable.versions import major_minor
from envpin.probe import runtime
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

    from envpin.knowledge.reciperecords import Item


@dataclass(frozen=True, slots=True)
class Overridden(Value):
    """What op determinism overrides in a script's own request from TensorFlow `tf_min` on (tf.data's
    deterministic=False): `effect` says what happens instead, so a rule can tell a cost in speed from a change
    in results."""

    id: str
    what: str
    tf_min: str
    tf_max: str | None
    effect: str
    source: str
    range_source: str | None = None
    unverified: str | None = None

    @classmethod
    def of(cls, item: Item) -> Overridden:
        return cls(
            item["id"],
            item["what"],
            item["tf_min"],
            item["tf_max"],
            item["effect"],
            item["source"],
            item.get("range_source"),
            item.get("unverified"),
        )


@dataclass(frozen=True, slots=True)
class BuiltOn(Value):
    """Library APIs (`apis`) that run an op entry's API (`calls`) inside."""

    apis: tuple[str, ...]
    calls: str
    source: str
    keras_min: str | None = None
    keras_max: str | None = None
    #: When the APIs run `calls` only under a condition, and the arguments of a call that show it holds.
    condition: str | None = None
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, item: Item) -> BuiltOn:
        return cls(
            tuple(item["apis"]),
            item["calls"],
            item["source"],
            item.get("keras_min"),
            item.get("keras_max"),
            item.get("condition"),
            dict(item.get("arguments", {})),
        )


@dataclass(frozen=True, slots=True)
class RecipeRow(Value):
    """One row of the table: the recipe for `distribution`, TensorFlow `tf_min`..`tf_max` (and for NGC, releases
    `ngc_min`..`ngc_max`), before the shared settings are added (Recipe is the resolved form)."""

    id: str
    distribution: str
    tf_min: str | None
    tf_max: str | None
    ngc_min: str | None
    ngc_max: str | None
    summary: str
    env: tuple[Variable, ...]
    steps: tuple[Step, ...]
    caveats: tuple[Note, ...]

    @classmethod
    def of(cls, item: Item) -> RecipeRow:
        match = item["match"]
        return cls(
            id=item["id"],
            distribution=match["distribution"],
            tf_min=match["tf_min"],
            tf_max=match["tf_max"],
            ngc_min=match.get("ngc_min"),
            ngc_max=match.get("ngc_max"),
            summary=item["summary"],
            env=tuple(map(Variable.of, item["env"])),
            steps=tuple(map(Step.of, item["steps"])),
            caveats=tuple(map(Note.of, item["caveats"])),
        )


@dataclass(frozen=True, slots=True)
class RecipeBook(Value):
    """The whole table as typed records (`book()`): the settings every recipe shares (`env`, `unset`,
    `no_effect`, `caveats`), the rows, the op entries of every version, and what the script audit reads."""

    env: tuple[Variable, ...]
    unset: tuple[Variable, ...]
    no_effect: tuple[Variable, ...]
    caveats: tuple[Note, ...]
    rows: tuple[RecipeRow, ...]
    raises: tuple[OpEntry, ...]
    silent: tuple[OpEntry, ...]
    overridden: tuple[Overridden, ...]
    built_on: tuple[BuiltOn, ...]
    ngc_overrides: tuple[NgcOverride, ...]
    advice: tuple[Advice, ...]
    sources: dict[str, dict[str, str]]
    #: The distributed recipe, all versions (None for a table without one).
    distributed: DistributedRecords | None = None
    #: What tf.data keeps as it is whatever a script's request says (map then batch: fused, in order).
    kept_order: tuple[Overridden, ...] = ()

    @classmethod
    def of(cls, data: Item) -> RecipeBook:
        """The table (recipes.table(): validated) as records."""
        common = data["common"]
        return cls(
            env=tuple(map(Variable.of, common["env"])),
            unset=tuple(map(Variable.of, common["unset"])),
            no_effect=tuple(map(Variable.of, common["no_effect"])),
            caveats=tuple(map(Note.of, common["caveats"])),
            rows=tuple(map(RecipeRow.of, data["recipes"])),
            raises=tuple(OpEntry.of(e, raises=True) for e in data["raises_under_determinism"]),
            silent=tuple(OpEntry.of(e, raises=False) for e in data["nondeterministic_under_determinism"]),
            overridden=tuple(map(Overridden.of, data.get("overridden_under_determinism", ()))),
            built_on=tuple(map(BuiltOn.of, data.get("built_on", ()))),
            ngc_overrides=tuple(map(NgcOverride.of, data.get("ngc_overrides", ()))),
            advice=tuple(map(Advice.of, data.get("advice", ()))),
            sources=data["sources"],
            distributed=DistributedRecords.of(data["distributed"]) if "distributed" in data else None,
            kept_order=tuple(map(Overridden.of, data.get("kept_order", ()))),
        )

    def kept_order_on(self, tf_version: str) -> tuple[Overridden, ...]:
        """What tf.data keeps in order on TensorFlow `tf_version` whatever the script asks."""
        mm = major_minor(tf_version)
        return tuple(o for o in self.kept_order if mm is not None and runtime.within(mm, o.tf_min, o.tf_max))

    def overridden_on(self, tf_version: str) -> tuple[Overridden, ...]:
        """What op determinism overrides on TensorFlow `tf_version` (none for a version without a minor)."""
        mm = major_minor(tf_version)
        return tuple(o for o in self.overridden if mm is not None and runtime.within(mm, o.tf_min, o.tf_max))
