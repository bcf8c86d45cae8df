"""Registry credentials exactly where `docker login` keeps them, read the way the docker CLI reads them.

`$DOCKER_CONFIG/config.json` (default `~/.docker/config.json`): a per-registry `credHelpers` entry wins,
then the global `credsStore`, then the `auths` entry (base64 `user:password`, or `identitytoken` for an
OAuth2 refresh token). Helpers are the `docker-credential-NAME` programs, spoken to with their documented
protocol (`get`, the server URL on stdin, JSON on stdout). Secrets live only in memory: `Credentials` never
prints them, and no message built here contains one.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envpin.errors import RegistryError, shown
from envpin.files.read import parse_json, read_regular
from envpin.portable.imageref import DOCKER_HUB
from envpin.record import Value

#: The key docker uses for Docker Hub in config.json and with credential helpers.
HUB_KEY = "https://index.docker.io/v1/"
#: What a credential helper answers when it has nothing for a server.
_NOT_FOUND = "credentials not found in native keychain"
_HELPER_TIMEOUT = 60


@dataclass(frozen=True, slots=True)
class Credentials(Value):
    """A user name and its secret (a password, a token, or an OAuth2 refresh token), never shown."""

    username: str
    secret: str = field(repr=False)
    #: Where they came from, for messages: 'config.json', 'credential helper "pass"'.
    origin: str = "config.json"

    @property
    def identity_token(self) -> bool:
        """docker stores an OAuth2 refresh token with the user name '<token>' (helpers) or as identitytoken."""
        return self.username == "<token>"

    def basic(self) -> str:
        """The HTTP Basic header value."""
        return "Basic " + base64.b64encode(f"{self.username}:{self.secret}".encode()).decode()


def config_dir() -> Path:
    """DOCKER_CONFIG, else ~/.docker: the folder `docker login` writes to."""
    env = os.environ.get("DOCKER_CONFIG")
    return Path(env) if env else Path.home() / ".docker"


def server_key(registry: str) -> str:
    """The name docker files a registry's credentials under: Docker Hub's v1 URL, else HOST[:PORT]."""
    return HUB_KEY if registry == DOCKER_HUB else registry


def _hostname(key: str) -> str:
    """docker's ConvertToHostname: 'https://host:5000/v1/' -> 'host:5000'."""
    for prefix in ("https://", "http://"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return key.split("/", 1)[0]


def _same_server(key: str, registry: str) -> bool:
    host = _hostname(key)
    if registry == DOCKER_HUB:
        return host in ("index.docker.io", "docker.io", "registry-1.docker.io")
    return host == registry


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The parsed config.json, {} when there is none; a broken one is an error that names the file."""
    path = path or config_dir() / "config.json"
    try:
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(
            f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
            hint="fix its permissions, or point DOCKER_CONFIG at another folder",
        ) from exc
    data = parse_json(text, str(path), RegistryError, hint="repair it, or remove it and run `docker login` again")
    if not isinstance(data, dict):
        raise RegistryError(f"{path} is not a JSON object", hint="remove it and run `docker login` again")
    return data


def lookup(registry: str, config: dict[str, Any] | None = None) -> Credentials | None:
    """The credentials docker would send to `registry` (canonical name, 'docker.io' for the Hub), or None."""
    data = load_config() if config is None else config
    key = server_key(registry)
    helpers = data.get("credHelpers")
    helper = None
    if isinstance(helpers, dict):
        helper = next((v for k, v in helpers.items() if _same_server(k, registry)), None)
    if helper is None and isinstance(data.get("credsStore"), str) and data["credsStore"]:
        helper = data["credsStore"]
    if isinstance(helper, str) and helper:
        return from_helper(helper, key)
    auths = data.get("auths")
    if not isinstance(auths, dict):
        return None
    entry = auths.get(key)
    if entry is None:
        entry = next((v for k, v in auths.items() if _same_server(k, registry)), None)
    return _from_entry(entry, registry) if isinstance(entry, dict) else None


def _from_entry(entry: dict[str, Any], registry: str) -> Credentials | None:
    token = entry.get("identitytoken")
    user, password = entry.get("username"), entry.get("password")
    encoded = entry.get("auth")
    if isinstance(encoded, str) and encoded:
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise RegistryError(
                f"the stored login for {registry} in {config_dir() / 'config.json'} is not base64 'user:password'",
                hint=f"run `docker login {registry}` again",
            ) from None
    if isinstance(token, str) and token:
        return Credentials("<token>", token)
    if isinstance(user, str) and user and isinstance(password, str):
        return Credentials(user, password)
    return None


def from_helper(name: str, server: str) -> Credentials | None:
    """Ask `docker-credential-NAME get` for `server`; None when it holds nothing for it."""
    program = f"docker-credential-{name}"
    exe = shutil.which(program)
    if exe is None:
        raise RegistryError(
            f"{config_dir() / 'config.json'} names the credential helper '{shown(name)}', but {program} is not on PATH",
            hint=f"install {program}, or remove the helper from config.json and `docker login` again",
        )
    origin = f'credential helper "{name}"'
    try:
        proc = subprocess.run(
            [exe, "get"], input=server, capture_output=True, text=True, timeout=_HELPER_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RegistryError(f"{program} could not be run: {exc}", hint=f"check `{program} list`") from None
    out = proc.stdout.strip()
    if proc.returncode != 0:
        if _NOT_FOUND in out or _NOT_FOUND in proc.stderr:
            return None
        first = (proc.stderr.strip() or out).splitlines()[:1]
        raise RegistryError(
            f"{program} failed for {server}: {shown(first[0] if first else 'no message')}",
            hint=f"check the helper (`echo {server} | {program} get`), or `docker login` again",
        )
    try:  # an external answer: parsed as all of them are (nesting and number limits)
        data = parse_json(out, f"{program}'s answer", RegistryError)
        user, secret = data["Username"], data["Secret"]
        if not isinstance(user, str) or not isinstance(secret, str):
            raise TypeError
    except (RegistryError, KeyError, TypeError):
        raise RegistryError(
            f"{program} answered something that is not its JSON for {server}",
            hint=f"check the helper with `echo {server} | {program} get`",
        ) from None
    return Credentials(user, secret, origin) if secret else None
