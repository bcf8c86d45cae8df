"""A resolved recipe's parts as the rules read them: typed records (envpin.knowledge.recipebook), made once.

Recipe.records makes the records anew at each access (about half a millisecond for a recipe's few dozen
entries), and the rules ask for them several times per script and per Dockerfile. `records` keeps them for the
recipes resolved last. A Recipe holds dicts and cannot be hashed: it is looked up by the three things that
resolve it and compared whole (its entries are the table's own dicts, so the comparison is one of identities).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.knowledge.reciperecords import RecipeRecords
    from envpin.knowledge.recipes import Recipe

#: (id, distribution, tf_version) -> the recipe and its records, oldest first.
_KEPT: dict[tuple[str, str, str], tuple[Recipe, RecipeRecords]] = {}
#: How many recipes are kept: an audit judges against a few TensorFlow versions, a library caller may ask for many.
_KEEP = 32


def records(recipe: Recipe) -> RecipeRecords:
    """`recipe.records`, the same objects each time for an equal recipe (a rule may key a cache on an entry)."""
    key = (recipe.id, recipe.distribution, recipe.tf_version)
    kept = _KEPT.get(key)
    if kept is None or kept[0] != recipe:
        if len(_KEPT) >= _KEEP:
            del _KEPT[next(iter(_KEPT))]
        kept = _KEPT[key] = (recipe, recipe.records)
    return kept[1]
