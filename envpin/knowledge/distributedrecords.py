"""The distributed recipe's parts as typed records (`Distributed.records`): what a distributed training script
sets itself (`Guarded` code settings), its hazards, the costs and the caveats, with the variables it bakes in
(envpin.knowledge.reciperecords.Variable). A module of its own so that only code that reads the distributed
recipe creates these four dataclasses (envpin.knowledge.reciperecords says why that matters).
"""

from __future__ import annotations

from dataclasses import dataclass

from envpin.knowledge.reciperecords import Variable
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from envpin.knowledge.reciperecords import Item


@dataclass(frozen=True, slots=True)
class Guarded(Value):
    """A setting a distributed training script makes itself (`code`: a strategy's argument), or a pattern of one that
    breaks or narrows determinism (`hazards`), for TensorFlow `tf_min`..`tf_max`: `apis` are the calls it is about,
    `text` what to do or what happens."""

    id: str
    what: str
    text: str
    apis: tuple[str, ...]
    tf_min: str | None
    tf_max: str | None
    source: str
    range_source: str | None = None
    unverified: str | None = None

    @classmethod
    def of(cls, item: Item) -> Guarded:
        return cls(
            item["id"],
            item["what"],
            item["text"],
            tuple(item["apis"]),
            item["tf_min"],
            item["tf_max"],
            item["source"],
            item.get("range_source"),
            item.get("unverified"),
        )

    def applies_to(self, tf_version: str | None) -> bool:
        """Whether it is about TensorFlow `tf_version` (False for no version, or one without a minor)."""
        from envpin.portable.versions import major_minor
        from envpin.probe import runtime

        mm = major_minor(tf_version) if tf_version else None
        return mm is not None and runtime.within(mm, self.tf_min, self.tf_max)


@dataclass(frozen=True, slots=True)
class Cost(Value):
    """What a distributed setting (`about`: a variable of env or an id of code) costs or gives up."""

    about: str
    text: str
    source: str
    unverified: str | None = None

    @classmethod
    def of(cls, item: Item) -> Cost:
        return cls(item["about"], item["text"], item["source"], item.get("unverified"))


@dataclass(frozen=True, slots=True)
class Caveat(Value):
    """A sentence of the distributed recipe with its source, and what is not settled about it."""

    text: str
    source: str
    unverified: str | None = None

    @classmethod
    def of(cls, item: Item) -> Caveat:
        return cls(item["text"], item["source"], item.get("unverified"))


@dataclass(frozen=True, slots=True)
class DistributedRecords(Value):
    """The distributed recipe as typed records: the variables baked into the image (`env`), the shared ones it
    relies on (`uses_common`: names of the base recipe's common env), what a script sets itself (`code`), the
    hazards of distributed scripts, the costs and the caveats. The whole table's (recipes.book().distributed)
    or one TensorFlow version's (Distributed.records)."""

    summary: str
    env: tuple[Variable, ...]
    uses_common: tuple[str, ...]
    code: tuple[Guarded, ...]
    hazards: tuple[Guarded, ...]
    cost: tuple[Cost, ...]
    caveats: tuple[Caveat, ...]

    @classmethod
    def of(cls, item: Item) -> DistributedRecords:
        return cls(
            summary=item["summary"],
            env=tuple(map(Variable.of, item["env"])),
            uses_common=tuple(item["uses_common"]),
            code=tuple(map(Guarded.of, item["code"])),
            hazards=tuple(map(Guarded.of, item["hazards"])),
            cost=tuple(map(Cost.of, item["cost"])),
            caveats=tuple(map(Caveat.of, item["caveats"])),
        )

    def hazard(self, hid: str) -> Guarded | None:
        """The hazard `hid` (the script rules look theirs up by id)."""
        return next((h for h in self.hazards if h.id == hid), None)

    def setting(self, sid: str) -> Guarded | None:
        """The code setting `sid`."""
        return next((c for c in self.code if c.id == sid), None)
