"""A resolved recipe's parts as typed records (`Recipe.records`): what every module but envpin.knowledge.recipes
reads instead of the table's dicts. Each record is made from its table entry by `of()`, so a key of an entry of
recipes.json is spelled in one class alone (the schema, data/recipes.schema.json, says which keys there are); the
whole table's records (`recipes.book()`) are envpin.knowledge.recipebook, made of these.

Kept apart from envpin.knowledge.recipes, which every recipe, render and audit imports, and from the book: each
frozen, slotted dataclass costs about 1 ms to create (dataclasses compile its methods when the class is made),
paid only by code that reads records. The distributed recipe's records (`Distributed.records`) are
envpin.knowledge.distributedrecords, so a recipe without --distributed and a Dockerfile audit do not create
their four classes (about 1.4 ms of a 0.1 s start-up; docs/cli.md, "Start-up").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

    #: A table entry as recipes.json holds it (the schema gives its keys).
    Item = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Variable(Value):
    """An environment variable a recipe speaks of: one to set (`value`; env), one that must not be set (unset,
    no `value`), or one TensorFlow never reads (no_effect: `instead` names the one it reads)."""

    name: str
    why: str
    source: str
    value: str | None = None
    instead: str | None = None
    #: What is not settled yet about it (a source not read).
    unverified: str | None = None
    #: A distributed variable's reader (nccl, horovod) and the versions of it that read the variable (None: open).
    library: str | None = None
    library_min: str | None = None
    library_max: str | None = None
    #: The source of the version range, where another than `source` settles it.
    range_source: str | None = None
    #: Of a variable that must not be set: the values that do harm (lower case; empty: any), the default.
    harmful: tuple[str, ...] = ()
    default: str | None = None

    @classmethod
    def of(cls, item: Item) -> Variable:
        return cls(
            item["name"],
            item["why"],
            item["source"],
            item.get("value"),
            item.get("instead"),
            item.get("unverified"),
            item.get("library"),
            item.get("library_min"),
            item.get("library_max"),
            item.get("range_source"),
            tuple(item.get("harmful", ())),
            item.get("default"),
        )

    def rule(self) -> str:
        """What a recipe table says of a variable that must not be set: "must NOT be set", or the values that
        do harm and the default ("not 0 or false (default 1)")."""
        if not self.harmful:
            return "must NOT be set"
        return f"not {' or '.join(self.harmful)}" + (f" (default {self.default})" if self.default else "")

    def harms(self, value: str | None) -> bool:
        """Whether setting the variable to `value` does harm (None: a value the script computes, taken to)."""
        return not self.harmful or value is None or value.strip().lower() in self.harmful

    def readers(self) -> str | None:
        """Which versions of `library` read the variable, in words ("NCCL 2.5 and later", "NCCL 2.4"), None for a
        variable of no library."""
        if self.library is None:
            return None
        name = {"nccl": "NCCL", "horovod": "Horovod"}.get(self.library, self.library)
        lo, hi = self.library_min, self.library_max
        if lo is None and hi is None:
            return name
        if lo == hi:
            return f"{name} {lo}"
        if hi is None:
            return f"{name} {lo} and later"
        return f"{name} up to {hi}" if lo is None else f"{name} {lo} to {hi}"

    def reading(self, version: str | None) -> str:
        """Who reads the variable and whether the image's `library` at `version` does, in words ("read by NCCL
        2.5 and later; not read by this image's NCCL 2.4.8"); "" for a variable of no library."""
        readers = self.readers()
        if readers is None:
            return ""
        reads = self.read_by(version)
        name = readers.split(" ", 1)[0]
        if reads is None or (self.library_min is None and self.library_max is None):
            return f"read by {readers}"
        return f"read by {readers}; {'read' if reads else 'not read'} by this image's {name} {version}"

    def read_by(self, version: str | None) -> bool | None:
        """Whether `library` at `version` (MAJOR.MINOR...) reads the variable; None when that is not known (no
        version, no library, or a version that is no version)."""
        from envpin.portable.versions import major_minor
        from envpin.probe import runtime

        mm = major_minor(version) if version else None
        if self.library is None or mm is None:
            return None
        return runtime.within(mm, self.library_min, self.library_max)


@dataclass(frozen=True, slots=True)
class Step(Value):
    """A Python-side step the runtime helper performs (envpin.probe.runtime), e.g. seed_tf."""

    step: str
    why: str
    source: str

    @classmethod
    def of(cls, item: Item) -> Step:
        return cls(item["step"], item["why"], item["source"])


@dataclass(frozen=True, slots=True)
class Note(Value):
    """A sentence with its source: a caveat (optionally about some APIs, in a context) or a work-around."""

    text: str
    source: str
    apis: tuple[str, ...] = ()
    #: Where it applies other than at any call of `apis` (the schema's contexts): no_global_seed, parallel_map.
    context: str | None = None

    @classmethod
    def of(cls, item: Item) -> Note:
        return cls(item["text"], item["source"], tuple(item.get("apis", ())), item.get("context"))


@dataclass(frozen=True, slots=True)
class Hatch(Value):
    """The environment variable that turns an op's determinism exception off, and what happens then."""

    name: str
    value: str
    effect: str
    source: str

    @classmethod
    def of(cls, item: Item) -> Hatch:
        return cls(item["name"], item["value"], item["effect"], item["source"])


@dataclass(frozen=True, slots=True)
class OpEntry(Value):
    """An op that raises once op determinism is on (`raises`: `exception`, `message`), or one that stays
    nondeterministic without an exception (`why`), for TensorFlow `tf_min`..`tf_max` (None: open) on `devices`
    (gpu, cpu, any). The optional parts narrow it: a Keras range, one platform, a condition on the call or on
    the build, XLA-compiled code only, a context (Note.context)."""

    op: str
    apis: tuple[str, ...]
    tf_min: str | None
    tf_max: str | None
    devices: str
    #: Ids of the self-test checks that exercise it.
    checks: tuple[str, ...]
    source: str
    raises: bool
    exception: str | None = None
    message: str | None = None
    why: str | None = None
    keras_min: str | None = None
    keras_max: str | None = None
    platform: str | None = None
    unverified: str | None = None
    condition: str | None = None
    build_condition: str | None = None
    xla: bool = False
    context: str | None = None
    #: The source of the version range, where another than `source` settles it.
    range_source: str | None = None
    #: Some of `apis`, each with the condition under which a call of it is meant.
    api_conditions: dict[str, str] = field(default_factory=dict)
    escape_hatch: Hatch | None = None
    work_around: Note | None = None
    #: Conditions on a call's arguments (name -> {given, in, default, position}): all must hold.
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Conditions on the arguments the layer the API makes is called with; the entry needs such a call.
    layer_call: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Method names whose calls the entry is about, each with conditions on its arguments.
    methods: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: Calls (dotted names) that, made by the script, take the entry away (a patch).
    unless_called: tuple[str, ...] = ()
    #: The one distribution (stock, ngc) the entry is about; None: both.
    distribution: str | None = None

    @classmethod
    def of(cls, item: Item, raises: bool) -> OpEntry:
        hatch, work = item.get("escape_hatch"), item.get("work_around")
        return cls(
            op=item["op"],
            apis=tuple(item["apis"]),
            tf_min=item["tf_min"],
            tf_max=item["tf_max"],
            devices=item["devices"],
            checks=tuple(item["checks"]),
            source=item["source"],
            raises=raises,
            exception=item.get("exception"),
            message=item.get("message"),
            why=item.get("why"),
            keras_min=item.get("keras_min"),
            keras_max=item.get("keras_max"),
            platform=item.get("platform"),
            unverified=item.get("unverified"),
            condition=item.get("condition"),
            build_condition=item.get("build_condition"),
            xla=bool(item.get("xla", False)),
            context=item.get("context"),
            range_source=item.get("range_source"),
            api_conditions=dict(item.get("api_conditions", {})),
            escape_hatch=Hatch.of(hatch) if hatch is not None else None,
            work_around=Note.of(work) if work is not None else None,
            arguments=dict(item.get("arguments", {})),
            layer_call=dict(item.get("layer_call", {})),
            methods=dict(item.get("methods", {})),
            unless_called=tuple(item.get("unless_called", ())),
            distribution=item.get("distribution"),
        )


@dataclass(frozen=True, slots=True)
class NgcOverride(Value):
    """Where NVIDIA's NGC build (releases `ngc_min`..`ngc_max`) behaves otherwise than stock TensorFlow."""

    op: str
    ngc_min: str | None
    ngc_max: str | None
    tf_min: str | None
    tf_max: str | None
    devices: str
    #: deterministic, nondeterministic or raises.
    verdict: str
    why: str
    checks: tuple[str, ...]
    source: str

    @classmethod
    def of(cls, item: Item) -> NgcOverride:
        return cls(
            item["op"],
            item["ngc_min"],
            item["ngc_max"],
            item["tf_min"],
            item["tf_max"],
            item["devices"],
            item["verdict"],
            item["why"],
            tuple(item["checks"]),
            item["source"],
        )


@dataclass(frozen=True, slots=True)
class Advice(Value):
    """Popular advice that is wrong for TensorFlow `tf_min`..`tf_max`, with the docs page (`doc`) that says why."""

    id: str
    tf_min: str | None
    tf_max: str | None
    text: str
    doc: str
    source: str

    @classmethod
    def of(cls, item: Item) -> Advice:
        return cls(item["id"], item["tf_min"], item["tf_max"], item["text"], item["doc"], item["source"])


@dataclass(frozen=True, slots=True)
class RecipeRecords(Value):
    """A Recipe's parts as typed records (Recipe.records), field for field."""

    env: tuple[Variable, ...]
    unset: tuple[Variable, ...]
    no_effect: tuple[Variable, ...]
    steps: tuple[Step, ...]
    caveats: tuple[Note, ...]
    raises: tuple[OpEntry, ...]
    silent: tuple[OpEntry, ...]
    ngc_overrides: tuple[NgcOverride, ...]
    advice: tuple[Advice, ...]

    @classmethod
    def of(cls, resolved: Item) -> RecipeRecords:
        """A resolved recipe as `envpin recipe --json` holds it (Recipe.to_dict) as records."""
        return cls(
            env=tuple(map(Variable.of, resolved["env"])),
            unset=tuple(map(Variable.of, resolved["unset"])),
            no_effect=tuple(map(Variable.of, resolved["no_effect"])),
            steps=tuple(map(Step.of, resolved["steps"])),
            caveats=tuple(map(Note.of, resolved["caveats"])),
            raises=tuple(OpEntry.of(e, raises=True) for e in resolved["raises_under_determinism"]),
            silent=tuple(OpEntry.of(e, raises=False) for e in resolved["nondeterministic_under_determinism"]),
            ngc_overrides=tuple(map(NgcOverride.of, resolved["ngc_overrides"])),
            advice=tuple(map(Advice.of, resolved["advice"])),
        )
