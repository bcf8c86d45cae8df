"""docker's credential helpers are programs: envpin runs one (`get`, the server on stdin, JSON out) as the
docker CLI does. The rest of reading stored logins is tests/unit/test_dockerauth.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.errors import RegistryError
from envpin.registry import logins
from envpin.registry.logins import Credentials


def test_helper_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper is a program: `get`, the server on stdin, JSON out; 'not found' is no login, not an error."""
    helper = tmp_path / "docker-credential-envpintest"
    helper.write_text(
        "#!/bin/sh\nread server\n"
        'case "$server" in\n'
        '  r.example.com) echo \'{"ServerURL":"r.example.com","Username":"alice","Secret":"s3"}\';;\n'
        '  https://index.docker.io/v1/) echo \'{"ServerURL":"hub","Username":"<token>","Secret":"rt"}\';;\n'
        '  broken.example.com) echo "not json";;\n'
        '  *) echo "credentials not found in native keychain"; exit 1;;\n'
        "esac\n"
    )
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    config = {"credsStore": "envpintest"}
    assert logins.lookup("r.example.com", config) == Credentials("alice", "s3", 'credential helper "envpintest"')
    hub = logins.lookup("docker.io", config)
    assert hub is not None and hub.identity_token
    assert logins.lookup("none.example.com", config) is None
    with pytest.raises(RegistryError, match="not its JSON"):
        logins.lookup("broken.example.com", config)
