"""Which TensorFlow a base image implies: NGC tag -> envpin catalog -> recipe, or a stock tag.

Mirrors of NGC (any registry whose repository ends in nvidia/tensorflow) count as NGC. When the catalog
has no TensorFlow version for a tag the answer is "unknown, and why", never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envpin.audit import facts
from envpin.audit.parser import Dockerfile, Stage
from envpin.errors import EnvpinError
from envpin.knowledge import catalog, recipes
from envpin.knowledge.recipes import Recipe
from envpin.knowledge.versions import parse_ngc_spec
from envpin.portable import imageref
from envpin.portable.versions import is_ngc_repository
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.knowledge.reciperecords import RecipeRecords

_STOCK_TAG = re.compile(r"([0-9]+\.[0-9]+)(?:\.[0-9]+)?(?:rc[0-9]+)?(?:-.*)?\Z")


@dataclass(frozen=True, slots=True)
class BaseInfo(Value):
    """The produced image's base: its TensorFlow and recipe, or why they are unknown."""

    #: What the messages call the base (e.g. "NGC 22.03-tf2-py3").
    label: str
    #: The external image the target stage starts from.
    image: str
    tf_version: str | None = None
    recipe: Recipe | None = None
    #: Why the TensorFlow version or recipe is unknown.
    reason: str | None = None
    release: str | None = None
    distribution: str | None = None

    @property
    def records(self) -> RecipeRecords | None:
        """The recipe's parts as typed records (envpin.audit.facts), None without a recipe."""
        return None if self.recipe is None else facts.records(self.recipe)


def root_stage(df: Dockerfile, stage: Stage) -> Stage:
    return df.chain(stage)[0]


def identify(df: Dockerfile, stage: Stage, tf: str | None = None) -> BaseInfo:
    """Resolve the produced image's base to a TensorFlow version and recipe (or say why not)."""
    root = root_stage(df, stage)
    image = root.image
    via = "" if root is stage else f" (through stage {root.label})"
    if root.unresolved:
        return BaseInfo(
            image,
            image,
            reason=f"the base {root.image_raw}{via} depends on build argument "
            f"{', '.join(root.unresolved)}, which has no value; determinism env not checked",
        )
    name, tag, _digest = imageref.split(image)
    path = name.split("/")
    if is_ngc_repository(name):
        return _ngc(image, tag, tf, via)
    if path[-2:] == ["tensorflow", "tensorflow"] and len(path) <= 3:
        return _stock(image, tag, tf, via)
    label = f"{image}{via}"
    if tf:
        return _with_recipe(BaseInfo(label, image, tf, distribution="stock"), tf, "stock", None)
    return BaseInfo(
        label,
        image,
        reason=f"the base {label} is not an NGC or tensorflow/tensorflow image, so "
        "the audit cannot tell which TensorFlow it holds; determinism env not checked",
    )


def _ngc(image: str, tag: str | None, tf: str | None, via: str) -> BaseInfo:
    label = f"NGC {tag}{via}" if tag else f"{image}{via}"
    unknown = "determinism env not checked"
    if tag is None:
        return BaseInfo(label, image, reason=f"{image}{via} names no tag, so its TensorFlow is unknown; {unknown}")
    try:
        spec = parse_ngc_spec(tag)
        if spec.flavor is None:  # a bare release is not a tag NVIDIA publishes
            tags = ", ".join(e.tag for e in catalog.load().select(spec))
            return BaseInfo(label, image, reason=f"NGC {spec.release} has no tag {tag} (it has {tags}); {unknown}")
        (entry,) = catalog.load().select(spec, single=True)
    except EnvpinError as exc:
        return BaseInfo(label, image, reason=f"{image}{via}: {exc.message}; {unknown}")
    version = entry.tf_version or tf
    if version is None:
        why = entry.facts["tf_version"].reason or "no source gives it"
        return BaseInfo(
            label,
            image,
            reason=f"the catalog does not know which TensorFlow {entry.tag} contains ({why}); {unknown}",
            release=entry.release,
            distribution="ngc",
        )
    info = BaseInfo(label, image, version, release=entry.release, distribution="ngc")
    return _with_recipe(info, version, "ngc", entry.release)


def _stock(image: str, tag: str | None, tf: str | None, via: str) -> BaseInfo:
    label = f"{image}{via}"
    m = _STOCK_TAG.match(tag or "")
    version = m.group(1) if m else tf
    if version is None:
        return BaseInfo(
            label, image, reason=f"the tag of {label} does not name a TensorFlow version; determinism env not checked"
        )
    return _with_recipe(BaseInfo(label, image, version, distribution="stock"), version, "stock", None)


def _with_recipe(info: BaseInfo, version: str, distribution: str, release: str | None) -> BaseInfo:
    try:
        recipe = recipes.select(version, distribution, release)
    except EnvpinError as exc:
        return BaseInfo(
            info.label,
            info.image,
            version,
            reason=f"{info.label}: {exc.message}",
            release=release,
            distribution=distribution,
        )
    return BaseInfo(info.label, info.image, version, recipe, release=release, distribution=distribution)
