"""The registry client against a hostile registry on loopback (tests/hostile_registry.py): content addressing
(digests checked, malformed ones refused), logins kept at their origin across redirects, a total deadline
per request, body and index limits; and the same end to end through the CLI: exit 2, one error, one hint,
nothing written."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envpin.errors import RegistryError
from envpin.registry import transport
from envpin.registry.client import Limits, RegistryClient
from envpin.registry.logins import Credentials
from tests.conftest import Result
from tests.hostile_registry import (
    INDEX,
    Answer,
    HostileRegistry,
    Image,
    digest,
    image_routes,
    image_with_config,
    make_image,
    manifest_answer,
    redirect,
)

REPO = "nvidia/tensorflow"
TAG = "20.02-tf2-py3"
BASE = f"/v2/{REPO}"
LOGIN = Credentials("alice", "pw-never-leaves-home")


@pytest.fixture
def reg() -> Iterator[HostileRegistry]:
    with HostileRegistry() as server:
        yield server


@pytest.fixture
def other() -> Iterator[HostileRegistry]:
    """A second server on another port: where hostile redirects lead."""
    with HostileRegistry() as server:
        yield server


def _client(**kwargs: object) -> RegistryClient:
    kwargs.setdefault("credentials", lambda name: None)
    return RegistryClient(**kwargs)  # type: ignore[arg-type]


def _ref(reg: HostileRegistry, tag: str = TAG) -> str:
    return f"{reg.host}/{REPO}:{tag}"


def _error(call) -> RegistryError:  # type: ignore[no-untyped-def]
    with pytest.raises(RegistryError) as info:
        call()
    err = info.value
    assert err.hint and "\n" not in err.message and "\n" not in err.hint
    return err


# -- an honest registry: the control -----------------------------------------------------------------------------
@pytest.mark.parametrize("header", ["computed", None])
@pytest.mark.parametrize("index", [False, True])
def test_an_honest_registry_is_read_and_verified(reg: HostileRegistry, index: bool, header: str | None) -> None:
    image = make_image({"TENSORFLOW_VERSION": "2.1.0"}, index=index, other_platforms=2)
    reg.routes.update(image_routes(REPO, TAG, image))
    reg.routes[f"{BASE}/manifests/{TAG}"] = manifest_answer(image.top, INDEX if index else "", header)
    top, config = _client().image_config(_ref(reg))
    assert top == digest(image.top) and config["config"]["Env"] == ["TENSORFLOW_VERSION=2.1.0"]
    assert _client().resolve_digest(_ref(reg)) == digest(image.top)
    assert _client().resolve_digest(f"{reg.host}/{REPO}@{digest(image.top)}") == digest(image.top)


# -- content addressing ------------------------------------------------------------------------------------------
def test_a_wrong_docker_content_digest_header_is_refused(reg: HostileRegistry) -> None:
    image = make_image()
    reg.routes.update(image_routes(REPO, TAG, image))
    lie = digest(b"some other manifest")
    reg.routes[f"{BASE}/manifests/{TAG}"] = manifest_answer(image.manifest, header=lie)
    for call in (lambda: _client().resolve_digest(_ref(reg)), lambda: _client().image_config(_ref(reg))):
        err = _error(call)
        assert _ref(reg) in err.message and "Docker-Content-Digest" in err.message
        assert f"expected {lie}, computed {digest(image.manifest)}" in err.message


def test_a_manifest_that_does_not_match_the_digest_asked_by(reg: HostileRegistry) -> None:
    """The index names the amd64 manifest by digest; the registry answers another body (with a header that
    repeats the digest asked for, as a lying mirror would)."""
    image = make_image(index=True)
    reg.routes.update(image_routes(REPO, TAG, image))
    wanted = digest(image.manifest)
    forged = image.manifest.replace(b'"layers": []', b'"layers": [] ')
    reg.routes[f"{BASE}/manifests/{wanted}"] = manifest_answer(forged, header=wanted)
    err = _error(lambda: _client().image_config(_ref(reg)))
    assert f"{reg.host}/{REPO}@{wanted}" in err.message
    assert f"expected {wanted}, computed {digest(forged)}" in err.message
    # Asked directly by digest, the same.
    err = _error(lambda: _client().resolve_digest(f"{reg.host}/{REPO}@{wanted}"))
    assert f"expected {wanted}, computed {digest(forged)}" in err.message


def test_a_config_blob_that_does_not_match_its_digest(reg: HostileRegistry) -> None:
    image = make_image({"CUDA_VERSION": "10.2.89"})
    reg.routes.update(image_routes(REPO, TAG, image))
    wanted = digest(image.config)
    forged = image.config.replace(b"10.2.89", b"10.1.24")
    reg.routes[f"{BASE}/blobs/{wanted}"] = Answer(200, forged)
    err = _error(lambda: _client().image_config(_ref(reg)))
    assert "image config" in err.message and f"expected {wanted}, computed {digest(forged)}" in err.message


def test_a_descriptor_size_that_disagrees_is_refused(reg: HostileRegistry) -> None:
    image = make_image()
    manifest = json.loads(image.manifest)
    manifest["config"]["size"] += 1
    body = json.dumps(manifest).encode()
    reg.routes.update(image_routes(REPO, TAG, Image(image.config, body)))
    err = _error(lambda: _client().image_config(_ref(reg)))
    assert "but its descriptor says" in err.message


MALFORMED = [
    "md5:" + "0" * 32,
    "sha256:zz/../../etc",
    "sha256:" + "A" * 64,
    "sha256:" + "a" * 63,
    "sha512:" + "a" * 64,
    "sha256:" + "a" * 64 + "/x",
    "SHA256:" + "a" * 64,
]


@pytest.mark.parametrize("bad", MALFORMED)
def test_malformed_digest_headers_are_refused(reg: HostileRegistry, bad: str) -> None:
    image = make_image()
    reg.routes.update(image_routes(REPO, TAG, image))
    reg.routes[f"{BASE}/manifests/{TAG}"] = manifest_answer(image.manifest, header=bad)
    err = _error(lambda: _client().resolve_digest(_ref(reg)))
    assert "Docker-Content-Digest header" in err.message and "is not a digest envpin accepts" in err.message


@pytest.mark.parametrize("bad", MALFORMED)
@pytest.mark.parametrize("where", ["index entry", "config descriptor"])
def test_malformed_digests_in_manifests_never_reach_a_url(reg: HostileRegistry, bad: str, where: str) -> None:
    image = make_image(index=where == "index entry")
    if where == "index entry":
        index = json.loads(image.index or b"")
        index["manifests"][-1]["digest"] = bad
        image = Image(image.config, image.manifest, json.dumps(index).encode())
    else:
        manifest = json.loads(image.manifest)
        manifest["config"]["digest"] = bad
        image = Image(image.config, json.dumps(manifest).encode())
    reg.routes.update(image_routes(REPO, TAG, image))
    err = _error(lambda: _client().image_config(_ref(reg)))
    assert "is not a digest envpin accepts" in err.message and _ref(reg) in err.message
    assert [s.path for s in reg.requests()] == [f"{BASE}/manifests/{TAG}"]  # nothing asked with the bad digest


@pytest.mark.parametrize("bad", MALFORMED)
def test_malformed_digests_from_the_user_are_refused_before_any_request(reg: HostileRegistry, bad: str) -> None:
    _error(lambda: _client().resolve_digest(f"{reg.host}/{REPO}@{bad}"))
    assert reg.requests() == []


def test_sha512_digests_are_verified_with_sha512(reg: HostileRegistry) -> None:
    import hashlib

    image = make_image()
    reg.routes.update(image_routes(REPO, TAG, image))
    right = "sha512:" + hashlib.sha512(image.manifest).hexdigest()
    reg.routes[f"{BASE}/manifests/{TAG}"] = manifest_answer(image.manifest, header=right)
    assert _client().resolve_digest(_ref(reg)) == right
    wrong = "sha512:" + hashlib.sha512(b"x").hexdigest()
    reg.routes[f"{BASE}/manifests/{TAG}"] = manifest_answer(image.manifest, header=wrong)
    assert f"expected {wrong}, computed {right}" in _error(lambda: _client().resolve_digest(_ref(reg))).message


# -- logins stay at their origin ---------------------------------------------------------------------------------
def _basic_protected(reg: HostileRegistry, answer_when_authorized: Answer) -> None:
    """Every path under /v2/ demands the Basic login, then answers `answer_when_authorized`."""

    def route(seen):  # type: ignore[no-untyped-def]
        if seen.headers.get("authorization") != LOGIN.basic():
            return Answer(401, headers={"WWW-Authenticate": 'Basic realm="hostile"'})
        return answer_when_authorized

    reg.routes[f"{BASE}/manifests/{TAG}"] = route


def test_a_redirect_to_another_port_never_carries_the_login(reg: HostileRegistry, other: HostileRegistry) -> None:
    image = make_image()
    other.routes.update(image_routes(REPO, TAG, image))
    _basic_protected(reg, redirect(other.url(f"{BASE}/manifests/{TAG}")))
    client = RegistryClient(credentials=lambda name: LOGIN)
    assert client.resolve_digest(_ref(reg)) == digest(image.manifest)
    assert reg.authorizations() == [LOGIN.basic()]  # the registry got its login
    assert other.requests() and other.authorizations() == []  # the other port never saw it


def test_a_redirect_on_the_same_origin_keeps_the_login(reg: HostileRegistry) -> None:
    image = make_image()
    reg.routes.update(image_routes(REPO, TAG, image))
    _basic_protected(reg, redirect(f"{BASE}/manifests/moved"))
    reg.routes[f"{BASE}/manifests/moved"] = lambda seen: (
        manifest_answer(image.manifest) if seen.headers.get("authorization") == LOGIN.basic() else Answer(401)
    )
    assert RegistryClient(credentials=lambda name: LOGIN).resolve_digest(_ref(reg)) == digest(image.manifest)
    assert reg.authorizations() == [LOGIN.basic(), LOGIN.basic()]


def test_bearer_tokens_stay_home_and_the_realm_gets_the_login_only_for_the_token(
    reg: HostileRegistry, other: HostileRegistry
) -> None:
    """As docker does: the Basic login goes to the token realm (here on another port) to get a token; the token
    goes to the registry; a blob redirect to a third origin (a CDN) gets neither."""
    image = make_image()
    with HostileRegistry() as realm:
        realm.routes["/token"] = Answer(200, b'{"token": "tok-123"}', {"Content-Type": "application/json"})
        routes = image_routes(REPO, TAG, image)
        other.routes.update(routes)
        challenge = f'Bearer realm="{realm.url("/token")}",service="hostile"'
        for path, answer in routes.items():
            if "/blobs/" in path:
                answer = redirect(other.url(path))
            reg.routes[path] = (
                lambda a: (
                    lambda seen: (
                        a
                        if seen.headers.get("authorization") == "Bearer tok-123"
                        else Answer(401, headers={"WWW-Authenticate": challenge})
                    )
                )
            )(answer)
        top, _ = RegistryClient(credentials=lambda name: LOGIN).image_config(_ref(reg))
        assert top == digest(image.manifest)
        assert realm.authorizations() == [LOGIN.basic()]
        assert set(reg.authorizations()) == {"Bearer tok-123"}
        assert other.requests() and other.authorizations() == []


def test_a_challenge_from_a_redirect_target_gets_no_login(reg: HostileRegistry, other: HostileRegistry) -> None:
    asked: list[str] = []
    reg.routes[f"{BASE}/manifests/{TAG}"] = redirect(other.url(f"{BASE}/manifests/{TAG}"))
    other.routes[f"{BASE}/manifests/{TAG}"] = Answer(
        401, headers={"WWW-Authenticate": f'Bearer realm="{other.url("/token")}",service="x"'}
    )
    client = RegistryClient(credentials=lambda name: asked.append(name) or LOGIN)  # type: ignore[func-returns-value]
    err = _error(lambda: client.resolve_digest(_ref(reg)))
    assert "which asks for a login" in err.message
    assert asked == [] and other.authorizations() == [] and "/token" not in [s.path for s in other.requests()]


def test_the_refresh_token_exchange_is_not_redirected(reg: HostileRegistry, other: HostileRegistry) -> None:
    reg.routes[f"{BASE}/manifests/{TAG}"] = Answer(
        401, headers={"WWW-Authenticate": f'Bearer realm="{reg.url("/token")}",service="x"'}
    )
    reg.routes["/token"] = redirect(other.url("/token"))
    client = RegistryClient(credentials=lambda name: Credentials("<token>", "refresh-secret"))
    err = _error(lambda: client.resolve_digest(_ref(reg)))
    assert "does not follow" in err.message and other.requests() == []


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("http://10.0.0.1:5000/v2/", "plain HTTP to a host that is not loopback"),
        ("ftp://127.0.0.1/x", "not an http(s) URL"),
        ("http://user:pw@127.0.0.1:5000/v2/", "a URL with a user name in it"),
        ("http://127.0.0.1:99999/v2/", "not a valid URL"),
        ("/v2/a b", "not a valid URL"),
        ("/v2/\u00e9", "not a valid URL"),
    ],
)
def test_redirect_targets_envpin_refuses(reg: HostileRegistry, target: str, problem: str) -> None:
    reg.routes[f"{BASE}/manifests/{TAG}"] = redirect(target)
    err = _error(lambda: _client().resolve_digest(_ref(reg)))
    assert problem in err.message and "pw" not in err.message


@pytest.mark.parametrize("token", ["tok\r\nX-Injected: 1", "tök", "two words", ""])
def test_tokens_that_cannot_be_a_header_are_refused(reg: HostileRegistry, token: str) -> None:
    reg.routes[f"{BASE}/manifests/{TAG}"] = Answer(
        401, headers={"WWW-Authenticate": f'Bearer realm="{reg.url("/token")}",service="x"'}
    )
    reg.routes["/token"] = Answer(200, json.dumps({"token": token}).encode())
    err = _error(lambda: _client().resolve_digest(_ref(reg)))
    assert "token" in err.message and len(reg.requests()) == 2  # the manifest, the token; nothing sent with it


def test_redirect_policy_in_isolation() -> None:
    follow = transport.Transport._redirect
    assert (
        follow("https://r.example.com/v2/x", "https://cdn.example.net/b?sig=1", "GET", "it")
        == "https://cdn.example.net/b?sig=1"
    )
    assert follow("http://127.0.0.1:5000/v2/x", "/v2/y", "GET", "it") == "http://127.0.0.1:5000/v2/y"
    with pytest.raises(RegistryError, match="plain HTTP after HTTPS"):
        follow("https://localhost:5000/v2/x", "http://localhost:5000/v2/y", "GET", "it")
    with pytest.raises(RegistryError, match="without a Location"):
        follow("https://r.example.com/v2/x", None, "GET", "it")
    assert transport.origin("https://R.example.com/v2/") == ("https", "r.example.com", 443)
    assert transport.origin("https://r.example.com:443/") == transport.origin("https://r.example.com/")
    assert transport.origin("http://127.0.0.1:5000/") != transport.origin("http://127.0.0.1:5001/")


def test_redirect_loops_end(reg: HostileRegistry) -> None:
    reg.routes[f"{BASE}/manifests/{TAG}"] = redirect(f"{BASE}/manifests/{TAG}")
    err = _error(lambda: _client().resolve_digest(_ref(reg)))
    assert f"more than {transport.MAX_REDIRECTS} times" in err.message
    assert len(reg.requests()) == transport.MAX_REDIRECTS + 1


# -- deadline and limits -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("body_only", [False, True])
def test_a_dripping_server_is_cut_off_at_the_deadline(reg: HostileRegistry, body_only: bool) -> None:
    image = make_image()
    answer = manifest_answer(image.manifest)
    answer.drip, answer.drip_body_only = 0.2, body_only  # ~600 bytes: two minutes without a deadline
    reg.routes[f"{BASE}/manifests/{TAG}"] = answer
    client = _client(deadline=1.0)
    started = time.monotonic()
    err = _error(lambda: client.resolve_digest(_ref(reg)))
    assert time.monotonic() - started < 5
    assert f"did not deliver the manifest of {_ref(reg)} within 1 s" in err.message


def test_an_oversized_manifest_is_refused_before_it_is_read(reg: HostileRegistry) -> None:
    big = b"{" + b" " * (4 << 20) + b"}"
    reg.routes[f"{BASE}/manifests/{TAG}"] = manifest_answer(big)
    err = _error(lambda: _client().resolve_digest(_ref(reg)))
    assert "larger than 4 MiB" in err.message and _ref(reg) in err.message


def test_an_oversized_body_without_length_is_cut_off_while_read(reg: HostileRegistry) -> None:
    image = make_image()
    reg.routes.update(image_routes(REPO, TAG, image))
    reg.routes[f"{BASE}/blobs/{digest(image.config)}"] = Answer(200, b"x" * 5000, no_length=True)
    err = _error(lambda: _client(limits=Limits(config_bytes=1024)).image_config(_ref(reg)))
    assert "image config" in err.message and "larger than 1,024 bytes" in err.message


def test_a_huge_index_is_refused(reg: HostileRegistry) -> None:
    image = make_image(index=True, other_platforms=Limits().index_entries)
    reg.routes.update(image_routes(REPO, TAG, image))
    err = _error(lambda: _client().image_config(_ref(reg)))
    assert f"lists 1,025 manifests, more than the {Limits().index_entries:,}" in err.message
    assert len(reg.requests()) == 1  # no entry was fetched


@pytest.mark.parametrize("raw", [b"HELLO\r\n\r\n", b"HTTP/1.0 200 OK\r\n" + b"X" * 70000 + b"\r\n\r\n"])
def test_answers_that_are_not_http(reg: HostileRegistry, raw: bytes) -> None:
    reg.routes[f"{BASE}/manifests/{TAG}"] = Answer(raw=raw)
    err = _error(lambda: _client().resolve_digest(_ref(reg)))
    assert reg.host in err.message


@pytest.mark.parametrize("body", [b"<html>proxy login</html>", b"[1, 2]", b"\xff\xfe", b"[" * 100 + b"]" * 100])
def test_manifests_that_are_not_json_objects(reg: HostileRegistry, body: bytes) -> None:
    reg.routes[f"{BASE}/manifests/{TAG}"] = manifest_answer(body)
    err = _error(lambda: _client().resolve_digest(_ref(reg)))
    assert _ref(reg) in err.message and "manifest" in err.message


# -- end to end through the CLI (its entry point, in this process) -------------------------------------------------
Cli = Callable[..., Result]


def _one_error(res: Result, *needles: str) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2, res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_catalog_sync_refuses_a_lying_registry_and_records_nothing(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, reg: HostileRegistry, tmp_path: Path
) -> None:
    image = make_image({"TENSORFLOW_VERSION": "1.15.2"})
    lie = digest(b"not what was sent")
    for tag in ("20.02-tf1-py3", "20.02-tf2-py3"):
        reg.routes.update(image_routes(REPO, tag, image))
        reg.routes[f"{BASE}/manifests/{tag}"] = manifest_answer(image.manifest, header=lie)
    out, cache = tmp_path / "catalog.json", tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    res = cli("catalog", "sync", "--registry", f"http://{reg.host}", "--release", "20.02", "--write", str(out))
    _one_error(res, lie, digest(image.manifest), f"{reg.host}/{REPO}:20.02-tf1-py3")
    assert res.stdout == "" and not out.exists() and not any(cache.rglob("*"))


def test_render_refuses_a_base_image_whose_config_does_not_match(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, reg: HostileRegistry, tmp_path: Path
) -> None:
    """23.02-tf2-py3: the catalog does not know its TensorFlow, so render reads the base image's config."""
    tag = "23.02-tf2-py3"
    image = make_image({"TENSORFLOW_VERSION": "2.11.0", "NVIDIA_TENSORFLOW_VERSION": "23.02-tf2"})
    reg.routes.update(image_routes(REPO, tag, image))
    forged = image.config.replace(b"2.11.0", b"2.99.0")
    reg.routes[f"{BASE}/blobs/{digest(image.config)}"] = Answer(200, forged)
    out = tmp_path / "env"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    res = cli("render", "--ngc", tag, "--base-image", f"{reg.host}/{REPO}:{tag}", "--out", str(out))
    _one_error(res, digest(image.config), digest(forged))
    assert not out.exists() and not any((tmp_path / "cache").rglob("*"))


# -- answers cut short, encoded, or of the wrong shape ------------------------------------------------------------
def test_a_body_shorter_than_its_content_length_is_refused(reg: HostileRegistry) -> None:
    reg.routes[f"{BASE}/manifests/{TAG}"] = Answer(raw=b"HTTP/1.0 200 OK\r\nContent-Length: 500\r\n\r\n{}")
    err = _error(lambda: _client().resolve_digest(_ref(reg)))
    assert "cut the manifest" in err.message and "2 of the 500 bytes" in err.message


def test_a_compressed_body_is_refused_before_it_is_hashed(reg: HostileRegistry) -> None:
    import gzip

    image = make_image()
    reg.routes[f"{BASE}/manifests/{TAG}"] = Answer(200, gzip.compress(image.manifest), {"Content-Encoding": "gzip"})
    err = _error(lambda: _client().resolve_digest(_ref(reg)))
    assert "encoded as 'gzip'" in err.message


def test_render_refuses_a_base_image_config_of_the_wrong_shape(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, reg: HostileRegistry, tmp_path: Path
) -> None:
    """23.02-tf2-py3: render reads the base image's config, whose Env is a string here."""
    tag = "23.02-tf2-py3"
    reg.routes.update(image_routes(REPO, tag, image_with_config({"config": {"Env": "TENSORFLOW_VERSION=2.11.0"}})))
    out = tmp_path / "env"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    res = cli("render", "--ngc", tag, "--base-image", f"{reg.host}/{REPO}:{tag}", "--out", str(out))
    _one_error(res, "'config.Env' is not a list of strings")
    assert not out.exists()
