"""One exception hierarchy; the CLI translates it to a one-line message and an exit code in one place."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence


def shown(text: object, limit: int = 100) -> str:
    """User input quoted in a one-line message: control characters escaped, long input shortened."""
    s = repr(str(text))[1:-1]
    return s if len(s) <= limit else s[: limit - 3] + "..."


#: Who names parameters in messages and hints (`param`): envpin.cli installs its options' names while a
#: command runs (`speaking`); otherwise, for a Python caller, the names of envpin.api's parameters.
_speakers: list[Callable[[str, str | None, Sequence[str]], str]] = []


def param(name: str, command: str | None = None, values: Sequence[str] = ()) -> str:
    """A parameter of the envpin.api function at work (or of the function behind another `command`), as a message
    or a hint names it, with the `values` to give it if any: `name` in backticks for a Python caller, the option
    (repeated once per value) for a command-line user. The library names parameters only through here, so no
    layer below envpin.cli spells an option."""
    if _speakers:
        return _speakers[-1](name, command, values)
    given = f" ({', '.join(values)})" if values else ""
    return f"`{name}`{given}" if command is None else f"`{name}`{given} of {command}"


@contextlib.contextmanager
def speaking(names: Callable[[str, str | None, Sequence[str]], str]) -> Iterator[None]:
    """While the block runs, `param` names parameters through `names` (name, command or None, values -> text)."""
    _speakers.append(names)
    try:
        yield
    finally:
        _speakers.pop()


class EnvpinError(Exception):
    """An expected failure: bad input or an unusable environment. Exit code 2 unless a subclass says otherwise."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class SelftestTimeout(EnvpinError):
    """The self-test did not finish within its time limit: inconclusive, never a failed check (exit 2)."""


class UsageError(EnvpinError):
    """The user's arguments cannot be honoured (malformed version, unknown release, bad name...)."""


class CatalogError(EnvpinError):
    """The catalog data is missing, malformed, or does not contain what was asked for."""


class RecipeError(EnvpinError):
    """No determinism recipe applies, or the recipe table is malformed."""


class RenderError(EnvpinError):
    """Rendering or writing the environment folder failed (e.g. it holds hand-edited files)."""


class RequirementsError(EnvpinError):
    """A requirements file is unreadable or not fully pinned with hashes."""


class LockError(EnvpinError):
    """envpin.lock is missing, malformed, from another schema, or was edited by hand."""


class EngineError(EnvpinError):
    """The Docker engine is unreachable or a build failed."""


class RegistryError(EnvpinError):
    """A registry could not be reached, refused access, or does not hold the tag."""


class ReportError(EnvpinError):
    """A probe report could not be read or does not follow the report schema."""


class SlurmError(EnvpinError):
    """A Slurm client command failed: no controller answers, or the allocation was refused or timed out."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be (envpin.cli's handler), so that the same clean-up runs: the runs
    under way stopped with their process trees, work folders removed; the exit status is 143, not 130."""


def interrupted(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM (Terminated) that `exc` is or came from, else None: Python wraps an exception
    raised while a class is created (a KeyboardInterrupt inside ``__set_name__``, e.g. while ipaddress is
    imported) in a RuntimeError, and click an interrupt in Abort."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 16:
        if isinstance(current, KeyboardInterrupt):
            return current
        current = current.__cause__ or current.__context__
        seen += 1
    return None
