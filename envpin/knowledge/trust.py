"""Which image configs speak for a catalog tag, and where what they declare contradicts a written value.

An image config says what that image is, wherever it was read; the tag is only a name a registry gives it,
and a mirror (or a local stand-in) may give the name to anything. So image facts are keyed by the repository
and digest they were read from (envpin.knowledge.facts), and one rule here decides what each may do for a tag:

- read from the catalog's own repository (nvcr.io/nvidia/tensorflow), or under a digest the catalog records
  for the tag (the catalog file's image object, or what this user read from nvcr.io): grade "image", its
  values outrank every written source (the same digest is the same image);
- read from another registry under another digest: grade "mirror", it fills only values nothing else gives.

Where either declares a value that contradicts a written one (the rule `catalog sync` reports as "disagrees"),
the entry carries one line naming the tag, the field, both values and both sources, and which one envpin
uses, so no command silently prefers one of the two. Kept apart from catalog.py (schema, look-ups), which
builds its entries with it; plain data in, plain data out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from envpin.knowledge.fields import FIELDS
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

IMAGE_KIND, MIRROR_KIND = "image", "mirror"


@dataclass(frozen=True, slots=True)
class ImageUse(Value):
    """One image config read for a tag (recorded in the catalog file, or kept in this user's cache) and what
    the catalog does with it: `grade` IMAGE_KIND (its values outrank the written ones), MIRROR_KIND (it fills
    only values nothing else gives) or None (another config of the same tag speaks for it), and why."""

    image: dict[str, Any]
    cached: bool
    grade: str | None
    why: str

    @property
    def read_from(self) -> str:
        """REPOSITORY@DIGEST: where the config was read and what it is."""
        return f"{self.image['registry']}@{self.image['digest']}"

    def to_json(self) -> dict[str, Any]:
        return {
            "read_from": self.read_from,
            "registry": self.image["registry"],
            "digest": self.image["digest"],
            "created": self.image["created"],
            "declared": self.image["declared"],
            "grade": self.grade,
            "why": self.why,
            "kept_in": "image-facts cache" if self.cached else "catalog file",
        }


def images_for(
    repository: str, tag: str, recorded: dict[str, Any] | None, cached: list[dict[str, Any]]
) -> list[ImageUse]:
    """The image configs of `tag` with what each may do, the one that applies first.

    `repository` is the catalog's own, `recorded` the catalog file's image object for the tag, `cached` the
    image objects this user's cache holds for it (one per repository). One config applies at the image grade:
    the cache's read from the catalog's repository (the newest look), else a cached copy of a recorded digest,
    else the catalog file's own object (a file the team chose with ENVPIN_CATALOG)."""
    own = next((c for c in cached if c["registry"] == repository), None)
    known = {img["digest"] for img in (recorded, own) if img}  # the digests the catalog records for the tag
    confirmed = [c for c in cached if c is not own and c["digest"] in known]
    applied = own or (confirmed[0] if confirmed else None) or recorded
    uses: list[ImageUse] = []
    for image, cache in [(own, True)] + [(c, True) for c in confirmed] + [(recorded, False)]:
        if image is None:
            continue
        if image is applied:
            why = (
                f"read from the catalog's repository {repository}"
                if image is own
                else "recorded in the catalog file"
                if image is recorded
                else f"its digest is the one the catalog file records for {tag}"
            )
            uses.append(ImageUse(image, cache, IMAGE_KIND, why))
        else:
            assert applied is not None
            same = " (the same image)" if image["digest"] == applied["digest"] else ""
            uses.append(
                ImageUse(image, cache, None, f"{applied['registry']}@{applied['digest']} speaks for {tag}{same}")
            )
    uses += [
        ImageUse(
            c,
            True,
            MIRROR_KIND,
            f"read from {c['registry']}, not the catalog's repository "
            f"{repository}, under a digest the catalog does not record for {tag}: "
            "it fills only values that nothing else gives",
        )
        for c in cached
        if c is not own and c["digest"] not in known
    ]
    return uses


def disagrees(name: str, written: Any, declared: Any, driver_min: str | None = None) -> bool:
    """Both known and contradicting, by the rule `catalog sync` reports as "disagrees" (a prefix either way
    is no contradiction: '2.1' / '2.1.9' only refines; driver branches compare below driver_min's branch)."""
    if written is None or declared is None:
        return False
    from envpin.knowledge import imageconfig  # only where an image's facts are known: no audit or recipe needs it

    if name == "driver_compat":
        return imageconfig.compare_branches(written, driver_min, declared) == imageconfig.DISAGREES
    return imageconfig.compare_version(written, declared) == imageconfig.DISAGREES


def contradictions(
    repository: str, tag: str, written: Mapping[str, tuple[Any, dict[str, str] | None]], uses: list[ImageUse]
) -> Iterator[str]:
    """One line per value a config of grade image or mirror declares against a known written value.
    `written` maps each field to (value, its source's catalog record {"kind", "url", ...} or None)."""
    for use in uses:
        if use.grade is None:
            continue  # another config of the tag speaks for it
        declared = use.image["declared"]
        driver_min = written["driver_min"][0] or declared.get("driver_min")
        for name in FIELDS:
            value, source = written[name]
            if name not in declared or source is None or not disagrees(name, value, declared[name], driver_min):
                continue
            said = (
                f"{tag} {name}: the image config {use.read_from} declares {_text(declared[name])}, but the "
                f"{source['kind']} source {source['url']} says {_text(value)}"
            )
            if use.grade == IMAGE_KIND:
                yield f"{said}; envpin uses the image's {_text(declared[name])} (`envpin catalog show {tag}`)"
            else:
                yield (
                    f"{said}; envpin keeps {_text(value)}, because {use.image['registry']} is not the catalog's "
                    f"{repository} and that digest is not one the catalog records for {tag} "
                    "(docs/catalog-sync.md)"
                )


def _text(value: Any) -> str:
    """A value in a notice: lists joined."""
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)
