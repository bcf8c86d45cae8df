"""Versions and NGC release specs, parsed in one place (standard library only, Python 3.6+).

The probe, the runtime helper inside images and the host side all compare TensorFlow, driver and
release versions; they all use these functions, so '2.1' means the same everywhere. Only ASCII digits
count (str.isdigit() would accept '٢'), and patterns are anchored with \\Z so a trailing newline is
never accepted.
"""

import re
from typing import NamedTuple, Optional, Tuple

from envpin.portable import imageref

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, Callable, List

# Greedy runs of ASCII digits: '1234567890' is one number, never cut to (123456789,). Input is at most
# _MAX_TEXT characters, far below int()'s 4,300-digit limit.
_VERSION = re.compile(r"([0-9]+)((?:\.[0-9]+)*)")
_TF_SPEC = re.compile(r"([0-9]{1,9})(?:\.([0-9]{1,9}))?(?:\.([0-9]{1,9}))?\Z")
_NGC_SPEC = re.compile(r"([0-9]{2})\.([0-9]{2})(?:-(py2|py3|tf1-py3|tf1-py2|tf2-py3))?\Z")
_RELEASE = re.compile(r"([0-9]{2})\.(0[1-9]|1[0-2])\Z")
_SUFFIX_FLAVOR = {"py2": "py2", "py3": "py3", "tf1-py3": "tf1", "tf1-py2": "tf1-py2", "tf2-py3": "tf2"}
#: The repository NGC TensorFlow images live in; a mirror keeps it as the end of its own path.
NGC_REPOSITORY = "nvidia/tensorflow"
_MAX_TEXT = 200  # nothing a user types here is longer; longer input is refused, never parsed


#: A parameter a hint speaks of: {tf} (the caller's `tf`), {tf of catalog} (the `tf` of another command).
_PARAM = re.compile(r"\{([a-z_]+)(?: of ([a-z]+))?\}")


def python_name(name: str, command: "Optional[str]" = None) -> str:
    """How a parameter reads to a Python caller (envpin.errors.param's own default): `tf`, `tf` of catalog."""
    return "`%s`" % name if command is None else "`%s` of %s" % (name, command)


class SpecError(ValueError):
    """Text that is not a version or release spec; `hint` says what is accepted.

    This layer knows no command line: a hint that names a parameter (the `tf` or `ngc` the spec was given as)
    keeps it as a field, {tf} or {tf of catalog}, in `template`; `hint` names it as a Python caller would,
    and the host side names it as its caller knows it with `hint_naming(envpin.errors.param)`."""

    def __init__(self, message: str, hint: "Optional[str]" = None) -> None:
        ValueError.__init__(self, message)
        self.message = message
        self.template = hint
        self.hint = self.hint_naming(python_name)

    def hint_naming(self, name: "Callable[[str, Optional[str]], str]") -> "Optional[str]":
        """The hint with each parameter it speaks of named by `name(parameter, command or None)`."""
        if self.template is None:
            return None
        return _PARAM.sub(lambda m: name(m.group(1), m.group(2)), self.template)


def parse_version(text: "Optional[str]", exact: bool = False) -> "Optional[Tuple[int, ...]]":
    """Numeric components at the start of a version: '2.1.0' -> (2, 1, 0), '1.15.5+nv22.12' -> (1, 15, 5),
    '535.104.05' -> (535, 104, 5), '2.21.0rc1' -> (2, 21, 0); None when it does not start with a number.
    With exact=True the whole text must be dotted numbers ('535.104.05', not '535.104.05-beta')."""
    if not isinstance(text, str) or len(text) > _MAX_TEXT:
        return None
    text = text.strip()
    m = _VERSION.match(text)
    if not m or (exact and m.end() != len(text)):
        return None
    parts = [m.group(1)] + [p for p in m.group(2).split(".") if p]
    return tuple(int(p) for p in parts)


def major_minor(version: "Optional[str]") -> "Optional[Tuple[int, int]]":
    """'2.1.0' -> (2, 1), '3.6.9' -> (3, 6), '1.15.5+nv22.12' -> (1, 15): the leading MAJOR.MINOR of a version,
    or None when it has no minor ('2', 'latest', None). The one truncation of a version to the unit recipes,
    advice and the image's Python are chosen by, on the host and in images alike."""
    parts = parse_version(version)
    return (parts[0], parts[1]) if parts is not None and len(parts) >= 2 else None


def components(text: str) -> "List[str]":
    """A version as comparable text components: '1.15.5+nv21.06' -> ['1', '15', '5', 'nv21', '6'] (split at
    '.' and '+', numbers without leading zeros), for lenient comparisons of versions that carry suffixes."""
    parts = [p for p in re.split(r"[.+]", str(text).strip().lower()) if p]
    return [str(int(p)) if re.match(r"[0-9]{1,9}\Z", p) else p for p in parts]


def version_text(parts: "Tuple[int, ...]") -> str:
    return ".".join(str(p) for p in parts)


def matches(prefix: "Tuple[int, ...]", version: "Optional[str]") -> bool:
    """True when `version` agrees with every component both give: a catalog value known only to
    MAJOR.MINOR ('2.1') matches a spec of '2.1.0', since the source is not precise enough to contradict it."""
    parsed = parse_version(version)
    if parsed is None:
        return False
    n = min(len(parsed), len(prefix))
    return parsed[:n] == prefix[:n]


class TFSpec(NamedTuple):
    """A TensorFlow version as the user typed it: '2', '2.1' or '2.1.0' (a prefix to match). A typing.NamedTuple
    with `.replace()`, as envpin.portable.imageref.ImageRef."""

    parts: Tuple[int, ...]

    def replace(self, **changes: "Any") -> "TFSpec":
        """A copy with `changes` applied (namedtuple's _replace)."""
        return self._replace(**changes)

    @property
    def text(self) -> str:
        return version_text(self.parts)

    @property
    def major(self) -> int:
        return self.parts[0]

    def matches(self, version: "Optional[str]") -> bool:
        return matches(self.parts, version)


def parse_tf_spec(text: str) -> TFSpec:
    m = _TF_SPEC.match(text.strip()) if isinstance(text, str) and len(text) <= _MAX_TEXT else None
    if not m:
        raise SpecError(
            "'%s' is not a TensorFlow version" % _shown(text),
            hint="give MAJOR, MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. {tf} 2.1 or {tf} 1.15.2",
        )
    return TFSpec(tuple(int(g) for g in m.groups() if g is not None))


class NGCSpec(NamedTuple):
    """An NGC release ('20.02') optionally narrowed to one tag's flavor ('20.02-tf2-py3' -> tf2). A
    typing.NamedTuple with `.replace()`, as envpin.portable.imageref.ImageRef."""

    release: str
    flavor: Optional[str]

    def replace(self, **changes: "Any") -> "NGCSpec":
        """A copy with `changes` applied (namedtuple's _replace)."""
        return self._replace(**changes)

    @property
    def text(self) -> str:
        return self.release if self.flavor is None else "%s (%s)" % (self.release, self.flavor)


def parse_ngc_spec(text: str) -> NGCSpec:
    """'20.02', '20.02-tf2-py3' or a full reference 'nvcr.io/nvidia/tensorflow:20.02-tf2-py3' (a mirror's too:
    any repository ending in nvidia/tensorflow, parsed by envpin.portable.imageref; no digest, the tag decides)."""
    raw = text.strip() if isinstance(text, str) and len(text) <= _MAX_TEXT else ""
    if "/" in raw or ":" in raw or "@" in raw:
        raw = _ngc_tag(raw)
    m = _NGC_SPEC.match(raw)
    if not m:
        raise SpecError(
            "'%s' is not an NGC TensorFlow release" % _shown(text),
            hint="give YY.MM or a tag, e.g. {ngc} 20.02 or {ngc} 20.02-tf2-py3",
        )
    yy, mm, suffix = m.groups()
    if not 1 <= int(mm) <= 12:
        raise SpecError("'%s' has month %s, which does not exist" % (_shown(text), mm), hint="months run from 01 to 12")
    return NGCSpec("%s.%s" % (yy, mm), _SUFFIX_FLAVOR[suffix] if suffix else None)


def _ngc_tag(text: str) -> str:
    """The tag of a full NGC TensorFlow reference, or '' when `text` is not one (the caller reports it)."""
    try:
        ref = imageref.parse(text)
    except imageref.RefError:
        return ""
    return ref.tag if is_ngc_repository(ref.repository) and ref.tag and not ref.digest else ""


def is_ngc_repository(repository: str) -> bool:
    """nvidia/tensorflow itself, or a mirror's copy under its own prefix ('mirror/nvidia/tensorflow')."""
    return repository == NGC_REPOSITORY or repository.endswith("/" + NGC_REPOSITORY)


def release_index(release: str) -> int:
    """Months since 2000-01 ('20.02' -> 241), so releases can be compared and distances measured."""
    m = _RELEASE.match(release) if isinstance(release, str) else None
    if not m:
        raise SpecError("'%s' is not an NGC release (YY.MM)" % _shown(release), hint="give YY.MM, e.g. 20.02")
    return int(m.group(1)) * 12 + int(m.group(2)) - 1


def _shown(text: object) -> str:
    """User input quoted in a message: one line, control characters escaped, and not a whole page of it."""
    return imageref._shown(text, 80)
