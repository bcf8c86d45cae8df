"""Machine-local build results: the image a build produced here, kept out of the committed folder.

The classic builder gives each machine its own image ID, so recording it in envpin.lock would make
every teammate's build rewrite a committed file. Results live under the user's state directory
instead, keyed by the inputs hash: the same inputs find their image again, other inputs never do.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from envpin.errors import EnvpinError
from envpin.files.read import parse_json, read_regular
from envpin.files.write import atomic_write
from envpin.record import Value

#: Overrides the state directory (tests, CI, shared build hosts).
STATE_ENV = "ENVPIN_STATE_DIR"


def state_dir() -> Path:
    """$ENVPIN_STATE_DIR, else $XDG_STATE_HOME/envpin, else ~/.local/state/envpin."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "envpin"


def _key(inputs_hash: str, engine: str = "docker") -> str:
    """Docker and podman keep separate image stores, so each engine has its own record."""
    key = inputs_hash.split(":", 1)[-1][:32]
    return key if engine == "docker" else f"{key}.{engine}"


def log_path(inputs_hash: str, engine: str = "docker") -> Path:
    """Where the build log for these inputs goes (the last build's log is kept)."""
    return state_dir() / "builds" / f"{_key(inputs_hash, engine)}.log"


@dataclass(frozen=True, slots=True)
class BuildRecord(Value):
    """What building these inputs produced on this machine."""

    inputs_hash: str
    image_id: str
    tag: str
    built_from: str
    engine: str = "docker"


def load(inputs_hash: str, engine: str = "docker") -> BuildRecord | None:
    """The record for these inputs and engine, or None (never built here, or the record is unreadable)."""
    path = state_dir() / "builds" / f"{_key(inputs_hash, engine)}.json"
    try:
        data = parse_json(read_regular(path).decode("utf-8"), str(path), EnvpinError)
        data.setdefault("engine", "docker")  # records written before podman builds existed
        record = BuildRecord(**{k: str(data[k]) for k in BuildRecord.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EnvpinError):
        return None
    return record if record.inputs_hash == inputs_hash and record.engine == engine else None


def save(record: BuildRecord) -> Path:
    path = state_dir() / "builds" / f"{_key(record.inputs_hash, record.engine)}.json"
    atomic_write(path, (json.dumps(asdict(record), sort_keys=True, indent=2) + "\n").encode())
    return path
