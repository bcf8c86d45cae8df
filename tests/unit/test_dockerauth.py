"""Reading docker's stored logins: config.json layouts, helper routing, and what never gets printed. A real
credential helper program: tests/cli/test_dockerauth.py."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.errors import RegistryError
from envpin.registry import client as registry
from envpin.registry import logins
from envpin.registry.logins import Credentials
from tests.props import examples


def _auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    "key, registry_name",
    [
        ("127.0.0.1:5443", "127.0.0.1:5443"),
        ("https://127.0.0.1:5443", "127.0.0.1:5443"),
        ("https://127.0.0.1:5443/v1/", "127.0.0.1:5443"),
        ("http://mirror.example.com/v2/", "mirror.example.com"),
        ("https://index.docker.io/v1/", "docker.io"),
        ("docker.io", "docker.io"),
        ("registry-1.docker.io", "docker.io"),
    ],
)
def test_auths_keys_as_docker_writes_them(key: str, registry_name: str) -> None:
    config = {"auths": {key: {"auth": _auth("u", "p:with:colons")}}}
    creds = logins.lookup(registry_name, config)
    assert creds == Credentials("u", "p:with:colons")
    assert logins.lookup("other.example.com", config) is None


def test_entry_forms() -> None:
    assert logins.lookup(
        "r.example.com", {"auths": {"r.example.com": {"username": "a", "password": "b"}}}
    ) == Credentials("a", "b")
    token = logins.lookup("r.example.com", {"auths": {"r.example.com": {"identitytoken": "refresh-xyz"}}})
    assert token is not None and token.identity_token and token.secret == "refresh-xyz"
    assert logins.lookup("r.example.com", {"auths": {"r.example.com": {}}}) is None  # kept in a store
    assert logins.lookup("r.example.com", {"auths": []}) is None
    with pytest.raises(RegistryError, match="not base64"):
        logins.lookup("r.example.com", {"auths": {"r.example.com": {"auth": "%%%"}}})


def test_helper_routing_and_missing_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker-credential-* programs at all
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    config = {
        "credsStore": "nosuch",
        "credHelpers": {"r.example.com": "other"},
        "auths": {"plain.example.com": {"auth": _auth("u", "p")}},
    }
    with pytest.raises(RegistryError) as info:
        logins.lookup("r.example.com", config)  # the per-registry helper wins over credsStore
    assert "docker-credential-other is not on PATH" in info.value.message
    with pytest.raises(RegistryError, match="docker-credential-nosuch"):
        logins.lookup("plain.example.com", config)  # credsStore wins over auths, as in docker


def test_config_file_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert logins.load_config() == {}
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(RegistryError) as info:
        logins.load_config()
    assert str(tmp_path / "config.json") in info.value.message and info.value.hint
    (tmp_path / "config.json").write_text("[]")
    with pytest.raises(RegistryError, match="not a JSON object"):
        logins.load_config()


def test_secrets_are_never_shown() -> None:
    creds = Credentials("alice", "hunter2-secret")
    assert "hunter2" not in repr(creds) and "hunter2" not in str(creds)
    assert creds.basic() == "Basic " + _auth("alice", "hunter2-secret")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.dictionaries(st.sampled_from(["auths", "credHelpers", "credsStore", "x"]), _json, max_size=3),
    st.sampled_from(["docker.io", "r.example.com", "127.0.0.1:5000"]),
)
def test_any_config_gives_credentials_none_or_an_envpin_error(config: dict, name: str) -> None:
    try:
        got = logins.lookup(name, config)
    except RegistryError as exc:
        assert exc.message and exc.hint
    else:
        assert got is None or isinstance(got, Credentials)


_PLAIN_BODY = json.dumps({"schemaVersion": 2}).encode()
_PLAIN_DIGEST = "sha256:" + hashlib.sha256(_PLAIN_BODY).hexdigest()


class _Plain(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Docker-Content-Digest", _PLAIN_DIGEST)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        body = _PLAIN_BODY
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_loopback_http_only_when_it_answers_http() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host = f"127.0.0.1:{server.server_address[1]}"
        client = registry.RegistryClient(credentials=lambda name: None)
        assert client.resolve_digest(f"{host}/x/y:1") == _PLAIN_DIGEST
        assert client._schemes[host] == "http"
        # A host that is not loopback is never spoken to over plain HTTP.
        assert client._url(registry.parse_ref("10.0.0.1:5000/x:1"), "manifests/1").startswith("https://")
    finally:
        server.shutdown()
        server.server_close()
