"""Public names of a package, each imported from its submodule on first use (standard library only, 3.6+).

A package declares its lazy names once, in its ``if TYPE_CHECKING:`` block, each imported as itself::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from envpin.api.audit import audit_files as audit_files

    lazy_exports(__name__)

Type checkers read that block (``name as name`` is their explicit re-export); at run time
:func:`lazy_exports` reads the same lines from the package's source, so `import package` imports none of
those submodules and `package.name` imports its one submodule when first asked for. An import in the block
that is not ``name as name`` (``from typing import Any``) is for type checkers only and is not exported.
``__all__`` is the lazy names unless the package sets its own.

Module-level ``__getattr__`` (PEP 562) needs Python 3.7; the package object becomes an instance of a module
subclass that has one instead (assigning ``__class__`` works from 3.5), so the probe, which runs on an
image's own Python 3.6, can use it too.
"""

import sys

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Dict, List, Optional

#: Where a package's declared names are kept once its source has been read: name -> module that defines it.
_HOMES = "_lazy_homes"


class LazyModule(type(sys)):  # type: ignore[misc]  # types.ModuleType, without importing types (start-up)
    """A package whose declared names are imported from their modules on first access, then kept."""

    def __getattr__(self, name: str) -> object:
        homes = declared(self)
        if name == "__all__":
            value: object = sorted(homes)
        elif name in homes:
            import importlib

            home = importlib.import_module(homes[name])
            try:
                value = getattr(home, name)
            except AttributeError:  # `from package import submodule as submodule`: not imported yet
                value = importlib.import_module(homes[name] + "." + name)
        else:
            raise AttributeError("module {!r} has no attribute {!r}".format(self.__name__, name))
        setattr(self, name, value)
        return value

    def __dir__(self) -> "List[str]":
        return sorted(set(super().__dir__()) | set(declared(self)))


def lazy_exports(name: str) -> None:
    """Make the package `name` (call it as ``lazy_exports(__name__)`` at the end of its ``__init__``) load the
    names its ``TYPE_CHECKING`` block declares on first use. Nothing is read until a name is asked for."""
    sys.modules[name].__class__ = LazyModule


def declared(module: "ModuleType") -> "Dict[str, str]":
    """The names `module` declares lazily, and the module defining each (read from its source once)."""
    homes = module.__dict__.get(_HOMES)
    if homes is None:
        homes = parse_declarations(_source(module), module.__name__)
        setattr(module, _HOMES, homes)
    return homes


def _source(module: "ModuleType") -> str:
    """The module's source: its file, or what its loader holds (a module imported from a zip archive)."""
    path = getattr(module, "__file__", None)
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except OSError:
            pass
    get_source = getattr(getattr(module.__spec__, "loader", None), "get_source", None)
    source: "Optional[str]" = get_source(module.__name__) if get_source is not None else None
    if source is None:
        raise ImportError("the source of {} is needed for its lazy names, and it is not there".format(module.__name__))
    return source


def parse_declarations(source: str, package: str) -> "Dict[str, str]":
    """name -> module for every ``from MODULE import name as name`` in the first top-level ``if TYPE_CHECKING:``
    block of `source` (relative modules resolved against `package`); the block ends at the next line that
    starts in the first column."""
    homes: "Dict[str, str]" = {}
    inside = False
    statement = ""
    for line in source.splitlines():
        if not inside:
            inside = line.startswith("if TYPE_CHECKING:")
            continue
        if line[:1] not in ("", " ", "\t", "#"):
            break
        statement += " " + line.split("#", 1)[0].strip()
        if statement.count("(") > statement.count(")"):
            continue  # a parenthesised list of names goes on
        words = statement.replace("(", " ").replace(")", " ").replace(",", " , ").split()
        statement = ""
        if len(words) < 4 or words[0] != "from" or words[2] != "import":
            continue
        home = _absolute(words[1], package)
        for item in " ".join(words[3:]).split(","):
            parts = item.split()
            if len(parts) == 3 and parts[1] == "as" and parts[0] == parts[2]:
                homes[parts[0]] = home
    return homes


def _absolute(module: str, package: str) -> str:
    """`module` of a ``from`` import inside `package`, with leading dots resolved."""
    dots = len(module) - len(module.lstrip("."))
    if not dots:
        return module
    base = package.split(".")
    base = base[: len(base) - dots + 1]
    rest = module[dots:]
    return ".".join(base + ([rest] if rest else []))
