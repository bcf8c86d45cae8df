"""NGC-spec selection: from '20.02', '20.02-tf2-py3' or a full reference (plus an optional TensorFlow
spec) to the catalog's tags, with every dead end explained. Standard library only, Python 3.6+.

It works on any entries that have ``release``, ``flavor``, ``tag`` and ``tf_version`` attributes, so the
host's catalog (envpin.knowledge.catalog.Catalog.select) and anything running inside an image use the same rules.
"""

from envpin.portable.versions import NGCSpec, SpecError, TFSpec, parse_ngc_spec, release_index

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

FLAVOR_SUFFIX = {"py2": "py2", "py3": "py3", "tf1": "tf1-py3", "tf1-py2": "tf1-py2", "tf2": "tf2-py3"}
#: Flavors whose images hold Python 2 (19.11 and 19.12 still shipped a TF1 image for it).
PY2_FLAVORS = frozenset(["py2", "tf1-py2"])
#: tf1 images ended with this release.
LAST_TF1_RELEASE = "23.03"
_FLAVOR_MAJOR = {"tf1": 1, "tf1-py2": 1, "tf2": 2}


def _check_flavor(flavor: str) -> None:
    if flavor not in FLAVOR_SUFFIX:
        raise SpecError("unknown flavor '%s'" % flavor, hint="use one of: py2, py3, tf1, tf1-py2, tf2")


def nearest_releases(anchor: str, candidates: "Iterable[str]", limit: int) -> "List[str]":
    """Candidates ordered by distance in months from `anchor` (later first on ties)."""
    a = release_index(anchor)
    ranked = sorted(candidates, key=lambda r: (abs(release_index(r) - a), -release_index(r)))
    return ranked[:limit]


class Selector(object):
    """The selection rules over one catalog's entries (in catalog order) and its release-less months."""

    def __init__(self, entries: "Sequence[Any]", missing: "Dict[str, Dict[str, Any]]") -> None:
        self.entries = list(entries)
        self.missing = missing
        self.releases = sorted(set(e.release for e in self.entries), key=release_index)

    def release_entries(self, release: str) -> "List[Any]":
        """All tags of one release, or a clear error for unknown and release-less months."""
        found = [e for e in self.entries if e.release == release]
        if found:
            return found
        if release in self.missing:
            near = nearest_releases(release, self.releases, 2)
            raise SpecError(
                "NVIDIA published no TensorFlow container in %s: %s" % (release, self.missing[release]["reason"]),
                hint="nearest releases: " + ", ".join(near),
            )
        first, last = self.releases[0], self.releases[-1]
        if release_index(release) < release_index(first) or release_index(release) > release_index(last):
            raise SpecError(
                "release %s is outside the catalog, which covers %s to %s" % (release, first, last),
                hint="%s was the last NGC TensorFlow release; see 'envpin catalog'" % last,
            )
        raise SpecError("release %s is not in the catalog" % release, hint="see 'envpin catalog'")

    def filter(self, tf: "Optional[TFSpec]" = None, flavor: "Optional[str]" = None) -> "List[Any]":
        """Entries of every release with this flavor and TensorFlow version; empty when none has them."""
        out = self.entries
        if flavor:
            _check_flavor(flavor)
            out = [e for e in out if e.flavor == flavor]
        if tf is not None:
            out = [e for e in out if tf.matches(e.tf_version)]
        return list(out)

    def select(
        self,
        ngc: "Union[NGCSpec, str, None]",
        tf: "Optional[TFSpec]" = None,
        flavor: "Optional[str]" = None,
        single: bool = False,
    ) -> "List[Any]":
        """The release's tags, narrowed by the spec's flavor (or `flavor`) and by `tf`; with single=True exactly
        one. Without a spec, every release's tags that fit `tf` and `flavor` (possibly none)."""
        if ngc is None:
            if single:
                raise ValueError("single=True needs an NGC spec")
            return self.filter(tf, flavor)
        if isinstance(ngc, str):
            ngc = parse_ngc_spec(ngc)
        if flavor:
            _check_flavor(flavor)
            if ngc.flavor not in (None, flavor):
                raise SpecError(
                    "NGC %s-%s is the %s image, not %s" % (ngc.release, FLAVOR_SUFFIX[ngc.flavor], ngc.flavor, flavor),
                    hint="name the tag or the flavor, not both",
                )
            ngc = NGCSpec(ngc.release, flavor)
        entries = self.release_entries(ngc.release)
        if ngc.flavor:
            tagged = [e for e in entries if e.flavor == ngc.flavor]
            if not tagged:
                raise SpecError(
                    "NGC %s has no %s image; it was published as %s"
                    % (ngc.release, FLAVOR_SUFFIX[ngc.flavor], ", ".join(e.tag for e in entries)),
                    hint=self.tf1_hint(ngc.release)
                    if ngc.flavor == "tf1"
                    else "see 'envpin catalog show %s'" % ngc.release,
                )
            entries = tagged
        if tf is not None:
            entries = self._with_tf(ngc.release, entries, tf)
        if single and len(entries) > 1:
            # A Python 2 image is chosen only by its tag: envpin's in-image code needs Python 3.
            entries = [e for e in entries if e.flavor not in PY2_FLAVORS] or entries
        if single and len(entries) > 1:
            raise SpecError(
                "NGC %s has %d images: %s"
                % (
                    ngc.release,
                    len(entries),
                    ", ".join("%s (TF %s)" % (e.tag, e.tf_version or "unknown") for e in entries),
                ),
                hint="add {tf}, or name the tag, e.g. {ngc} %s" % entries[-1].tag,
            )
        return entries

    def _with_tf(self, release: str, entries: "List[Any]", tf: TFSpec) -> "List[Any]":
        matching = [e for e in entries if tf.matches(e.tf_version)]
        if matching:
            return matching
        unknown = [e for e in entries if e.tf_version is None and _FLAVOR_MAJOR.get(e.flavor) in (None, tf.major)]
        if unknown and len(tf.parts) >= 2:
            # The catalog does not know this tag's TF version: the user's `tf` is taken as their claim.
            return unknown
        if tf.major == 1 and all(e.flavor == "tf2" for e in entries):
            raise SpecError(
                "NGC %s ships only TensorFlow 2 (%s); TensorFlow %s is not in it" % (release, entries[0].tag, tf.text),
                hint=self.tf1_hint(release),
            )
        held = ", ".join("TF %s (%s)" % (e.tf_version or "unknown version", e.flavor) for e in entries)
        raise SpecError(
            "NGC %s contains %s, not TensorFlow %s" % (release, held, tf.text), hint=self.where_is(tf, release)
        )

    def where_is(self, tf: TFSpec, near: str) -> str:
        """Where TensorFlow `tf` is, nearest `near` first: a SpecError hint (its {tf of catalog} a field)."""
        have = sorted(set(e.release for e in self.entries if tf.matches(e.tf_version)), key=release_index)
        if not have:
            return "no NGC release in the catalog is known to contain TensorFlow %s; see 'envpin catalog'" % tf.text
        ordered = nearest_releases(near, have, 6)
        more = "" if len(have) <= 6 else " (and %d more: {tf of catalog} %s)" % (len(have) - 6, tf.text)
        return "TensorFlow %s is in NGC %s%s" % (tf.text, ", ".join(ordered), more)

    def tf1_hint(self, release: str) -> str:
        have = sorted(set(e.release for e in self.entries if e.flavor == "tf1"), key=release_index)
        return "tf1 images ended with %s; TF 1.15 is in %s" % (
            LAST_TF1_RELEASE,
            ", ".join(nearest_releases(release, have, 3)),
        )
