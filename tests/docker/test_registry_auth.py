"""Registry authentication: a real registry (CNCF distribution) that demands a bearer token."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envpin.errors import RegistryError
from envpin.registry.client import RegistryClient
from tests.conftest import run_envpin


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _serve_registry(folder: Path, *, storage: str, http: str = "", auth: str) -> Iterator[str]:
    """A real `docker-registry` (CNCF distribution) on a free loopback port with the given storage, extra
    `http` settings and `auth` section (YAML flow mappings, where $HOST stands for the registry's own
    HOST:PORT); yields HOST:PORT once it accepts connections."""
    exe = shutil.which("docker-registry")
    if exe is None:
        pytest.skip("docker-registry is not installed; run `sudo bash scripts/services.sh install`")
    port = _free_port()
    config = folder / "registry.yml"
    config.write_text(
        "version: 0.1\nlog: {level: error}\n"
        f"storage: {storage}\n"
        f"http: {{addr: '127.0.0.1:{port}', secret: envpin-test{', ' + http if http else ''}}}\n"
        f"auth: {auth.replace('$HOST', f'127.0.0.1:{port}')}\n"
    )
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):  # at most 10 s
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def token_registry(tmp_path: Path):  # type: ignore[no-untyped-def]
    """distribution's 'silly' auth: every anonymous request gets 401 + a Bearer challenge whose token
    realm (here: a path on the registry itself) hands out no token, as a private registry would."""
    with _serve_registry(
        tmp_path, storage="{inmemory: {}}", auth="{silly: {realm: 'http://$HOST/token', service: envpin-test}}"
    ) as host:
        yield host


def test_bearer_challenge_without_token_says_docker_login(token_registry: str) -> None:
    with pytest.raises(RegistryError) as info:
        RegistryClient().resolve_digest(f"{token_registry}/nvidia/tensorflow:20.02-tf2-py3")
    assert "refused an anonymous token" in info.value.message
    assert info.value.hint == f"run `docker login {token_registry}` and retry"


def test_cli_auth_error_is_one_line(token_registry: str, tmp_path: Path) -> None:
    ref = f"{token_registry}/nvidia/tensorflow:20.02-tf2-py3"
    res = run_envpin("build", "--ngc", "20.02-tf2-py3", "--base-image", ref, "--out", str(tmp_path / "e"))
    assert res.code == 2 and "docker login" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "e").exists()


# --------------------------------------------------------------------------------------------------
# A login-protected registry over TLS with a self-signed CA, logged into with the real `docker login`.
# --------------------------------------------------------------------------------------------------

USER, PASSWORD = "envpin-user", "pw-correct-horse-4f1c"
DOCKER_CLI = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else "docker"


def _sh(*cmd: str, input: str | None = None, env: dict[str, str] | None = None) -> str:
    import os

    proc = subprocess.run(
        cmd, input=input, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )
    assert proc.returncode == 0, f"{cmd}: {proc.stderr}"
    return proc.stdout


class LoginRegistry:
    """HOST:PORT of the registry, its CA, and the scratch folders a login and its secret store live in."""

    def __init__(self, root: Path, host: str) -> None:
        self.root, self.host = root, host
        self.ca = root / "ca.pem"
        self.ref = f"{host}/nvidia/tensorflow:20.02-tf2-py3"
        #: The pass store behind docker-credential-pass (gpg key without a passphrase).
        self.store_env = {"GNUPGHOME": str(root / "gnupg"), "PASSWORD_STORE_DIR": str(root / "pass")}

    def env(self, config: Path) -> dict[str, str]:
        return {"DOCKER_CONFIG": str(config), **self.store_env}


def _docker_without_helpers(folder: Path) -> tuple[str, dict[str, str]]:
    """(docker CLI, env) with no credential helper on PATH. docker picks docker-credential-pass whenever it
    is on PATH; without one, it stores the login in config.json itself (base64 user:password), the layout
    of most CI runners."""
    bindir = folder / "bin"
    bindir.mkdir()
    (bindir / "docker").symlink_to(Path(shutil.which(DOCKER_CLI) or DOCKER_CLI).resolve())
    return str(bindir / "docker"), {"PATH": str(bindir)}


def _certificates(root: Path) -> None:
    """A CA and a server certificate for 127.0.0.1 signed by it, as an internal registry would have."""
    _sh(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(root / "ca.key"),
        "-out",
        str(root / "ca.pem"),
        "-days",
        "2",
        "-subj",
        "/CN=envpin test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    _sh(
        "openssl",
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(root / "server.key"),
        "-out",
        str(root / "server.csr"),
        "-subj",
        "/CN=127.0.0.1",
    )
    (root / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    _sh(
        "openssl",
        "x509",
        "-req",
        "-in",
        str(root / "server.csr"),
        "-CA",
        str(root / "ca.pem"),
        "-CAkey",
        str(root / "ca.key"),
        "-CAcreateserial",
        "-out",
        str(root / "server.pem"),
        "-days",
        "2",
        "-extfile",
        str(root / "ext.cnf"),
    )


@pytest.fixture(scope="module")
def login_registry(tmp_path_factory: pytest.TempPathFactory, stand_in_image: str, docker_client):  # type: ignore[no-untyped-def]
    """docker-registry with htpasswd auth and TLS; the stand-in pushed to it after a real `docker login`
    whose secret docker keeps in docker-credential-pass (a gpg-encrypted pass store)."""
    missing = [
        t
        for t in ("docker-registry", "htpasswd", "openssl", "docker-credential-pass", "pass", "gpg")
        if shutil.which(t) is None
    ]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed; run `sudo bash scripts/services.sh install`")
    root = tmp_path_factory.mktemp("login-registry")
    _certificates(root)
    (root / "htpasswd").write_text(_sh("htpasswd", "-Bbn", USER, PASSWORD))
    storage = f"{{filesystem: {{rootdirectory: '{root / 'data'}'}}}}"
    tls = f"tls: {{certificate: '{root / 'server.pem'}', key: '{root / 'server.key'}'}}"
    auth = f"{{htpasswd: {{realm: envpin-test, path: '{root / 'htpasswd'}'}}}}"
    with _serve_registry(root, storage=storage, http=tls, auth=auth) as host:
        reg = LoginRegistry(root, host)
        (root / "gnupg").mkdir(mode=0o700)
        _sh(
            "gpg",
            "--batch",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--quick-gen-key",
            "envpin test <test@envpin.invalid>",
            "default",
            "default",
            "never",
            env=reg.store_env,
        )
        fpr = next(
            line.split(":")[9]
            for line in _sh("gpg", "--list-keys", "--with-colons", env=reg.store_env).splitlines()
            if line.startswith("fpr")
        )
        _sh("pass", "init", fpr, env=reg.store_env)
        login = root / "docker-pass"
        login.mkdir()
        (login / "config.json").write_text('{"credsStore": "pass"}\n')
        _sh(
            DOCKER_CLI,
            "--config",
            str(login),
            "login",
            reg.host,
            "-u",
            USER,
            "--password-stdin",
            input=PASSWORD,
            env=reg.store_env,
        )
        docker_client.images.get(stand_in_image).tag(reg.ref)
        try:
            _sh(DOCKER_CLI, "--config", str(login), "push", "-q", reg.ref, env=reg.store_env)
            yield reg
        finally:
            with contextlib.suppress(Exception):
                docker_client.images.remove(reg.ref)


def _no_secret(*texts: str) -> None:
    import base64

    for text in texts:
        assert "pw-correct-horse" not in text and base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode() not in text


def test_sync_through_the_credential_store(login_registry: LoginRegistry, stand_in_image: str) -> None:
    """credsStore: the login docker put into docker-credential-pass, read through the helper protocol."""
    reg = login_registry
    res = run_envpin(
        "catalog",
        "sync",
        "--registry",
        f"{reg.host}/nvidia/tensorflow",
        "--release",
        "20.02",
        "--ca-bundle",
        str(reg.ca),
        "--no-save",
        "--json",
        env=reg.env(reg.root / "docker-pass"),
    )
    # Exit 1: the stand-in's declared versions disagree with NVIDIA's notes (it is not NGC's image).
    assert res.code == 1 and "1 of 2 tags read (1 missing)" in res.stderr, res.stderr
    tags = {t["tag"]: t for t in json.loads(res.stdout)["tags"]}
    assert tags["20.02-tf2-py3"]["status"] != "missing", tags
    assert "sha256:" in json.dumps(tags["20.02-tf2-py3"])
    _no_secret(res.stdout, res.stderr)


def test_cred_helpers_entry_and_plain_auths(login_registry: LoginRegistry, tmp_path: Path) -> None:
    """credHelpers (per registry) and a plain `auths` login, as `docker login` writes without a store."""
    reg = login_registry
    helpers = tmp_path / "helpers"
    helpers.mkdir()
    (helpers / "config.json").write_text(json.dumps({"credHelpers": {reg.host: "pass"}}))
    plain = tmp_path / "plain"
    plain.mkdir()
    docker, path = _docker_without_helpers(tmp_path)
    _sh(docker, "--config", str(plain), "login", reg.host, "-u", USER, "--password-stdin", input=PASSWORD, env=path)
    assert '"auth"' in (plain / "config.json").read_text()
    for config in (helpers, plain):
        client = RegistryClient(ca_file=str(reg.ca))
        import os

        saved = {k: os.environ.get(k) for k in reg.env(config)}
        os.environ.update(reg.env(config))
        try:
            digest = client.resolve_digest(reg.ref)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        assert digest.startswith("sha256:"), config


@pytest.mark.parametrize("case", ["wrong password", "no login", "untrusted certificate"])
def test_login_errors_are_one_line(login_registry: LoginRegistry, tmp_path: Path, case: str) -> None:
    import base64

    reg = login_registry
    config = tmp_path / "docker"
    config.mkdir()
    if case == "wrong password":  # a login stored before the password was rotated
        stale = base64.b64encode(f"{USER}:not-{PASSWORD}".encode()).decode()
        (config / "config.json").write_text(json.dumps({"auths": {reg.host: {"auth": stale}}}))
    ca = [] if case == "untrusted certificate" else ["--ca-bundle", str(reg.ca)]
    res = run_envpin(
        "catalog",
        "sync",
        "--registry",
        f"{reg.host}/nvidia/tensorflow",
        "--release",
        "20.02",
        *ca,
        "--no-save",
        env=reg.env(config),
    )
    assert res.code == 2 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and lines[-1].startswith("hint:"), res.stderr
    expected = {
        "wrong password": f"refused the login of user '{USER}'",
        "no login": "requires a login",
        "untrusted certificate": "TLS certificate is not trusted",
    }[case]
    assert expected in errors[0], res.stderr
    assert ("--ca-bundle" if case == "untrusted certificate" else f"docker login {reg.host}") in lines[-1]
    _no_secret(res.stdout, res.stderr)


def test_build_from_the_login_protected_mirror(login_registry: LoginRegistry, tmp_path: Path) -> None:
    """The whole path: digest and config read with the stored login, the engine pulls with it, and the
    CA given with --ca-bundle joins the image's trust store; no secret reaches the folder or the log."""
    reg = login_registry
    out = tmp_path / "env"
    res = run_envpin(
        "build",
        "--ngc",
        "20.02-tf2-py3",
        "--base-image",
        reg.ref,
        "--ca-bundle",
        str(reg.ca),
        "--out",
        str(out),
        "--engine",
        "docker",
        "--pull",
        env=reg.env(reg.root / "docker-pass"),
    )
    assert res.code == 0, res.stderr
    from envpin.environment import lockfile
    from envpin.image import buildstate

    lock = lockfile.read(out / "envpin.lock")
    assert lock.inputs.build_from == reg.ref and lock.base.digest.startswith("sha256:")
    record = buildstate.load(lock.inputs_hash)
    assert record is not None
    bundle = _sh(
        DOCKER_CLI, "run", "--rm", "--entrypoint", "cat", record.image_id, "/etc/ssl/certs/ca-certificates.crt"
    )
    ca_body = "".join(reg.ca.read_text().split("\n")[1:-2])
    assert ca_body[:64] in bundle.replace("\n", "")
    assert bundle.count("BEGIN CERTIFICATE") > 100  # the public CAs are still there
    texts = [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and p.suffix != ".pyz"]
    _no_secret(res.stdout, res.stderr, buildstate.log_path(lock.inputs_hash).read_text(), *texts)


# --------------------------------------------------------------------------------------------------
# Bearer tokens with a login: distribution's `token` auth, which verifies RS256 JWTs against a root
# certificate, and a token service (the distribution token protocol) that checks the Basic login.
# --------------------------------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class _TokenService:
    """Issues a signed JWT for the requested scope to USER/PASSWORD, 401 to anyone else; counts requests."""

    def __init__(self, root: Path, service: str, issuer: str) -> None:
        self.root, self.service, self.issuer = root, service, issuer
        self.logins: list[str] = []
        import base64

        der = subprocess.run(
            ["openssl", "x509", "-in", str(root / "token.pem"), "-outform", "DER"], capture_output=True, check=True
        ).stdout
        self.x5c = base64.b64encode(der).decode()

    def token(self, scope: str) -> str:
        now = int(time.time())
        access = []
        if scope:
            kind, name, actions = scope.split(":", 2)
            access = [{"type": kind, "name": name, "actions": actions.split(",")}]
        header = {"alg": "RS256", "typ": "JWT", "x5c": [self.x5c]}
        claims = {
            "iss": self.issuer,
            "sub": USER,
            "aud": self.service,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": str(now),
            "access": access,
        }
        signing = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        sig = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(self.root / "token.key")],
            input=signing.encode(),
            capture_output=True,
            check=True,
        ).stdout
        return f"{signing}.{_b64url(sig)}"


def _token_handler(svc: _TokenService):  # type: ignore[no-untyped-def]
    import base64
    import http.server
    import urllib.parse

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            auth = self.headers.get("Authorization", "")
            login = base64.b64decode(auth[6:]).decode() if auth.startswith("Basic ") else ""
            svc.logins.append(login.split(":")[0])
            if login != f"{USER}:{PASSWORD}":
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"token": svc.token(query.get("scope", [""])[0])}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture(scope="module")
def bearer_registry(tmp_path_factory: pytest.TempPathFactory, stand_in_image: str, docker_client):  # type: ignore[no-untyped-def]
    import http.server
    import threading

    if shutil.which("docker-registry") is None or shutil.which("openssl") is None:
        pytest.skip("docker-registry or openssl not installed; run `sudo bash scripts/services.sh install`")
    root = tmp_path_factory.mktemp("bearer-registry")
    _sh(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(root / "token.key"),
        "-out",
        str(root / "token.pem"),
        "-days",
        "2",
        "-subj",
        "/CN=envpin token issuer",
    )
    svc = _TokenService(root, "envpin-bearer", "envpin-issuer")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _token_handler(svc))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    auth = (
        f"{{token: {{realm: 'http://127.0.0.1:{server.server_address[1]}/token', service: envpin-bearer, "
        f"issuer: envpin-issuer, rootcertbundle: '{root / 'token.pem'}'}}}}"
    )
    try:
        with _serve_registry(root, storage=f"{{filesystem: {{rootdirectory: '{root / 'data'}'}}}}", auth=auth) as host:
            config = root / "docker"
            docker, path = _docker_without_helpers(root)
            _sh(
                docker, "--config", str(config), "login", host, "-u", USER, "--password-stdin", input=PASSWORD, env=path
            )
            ref = f"{host}/nvidia/tensorflow:20.02-tf2-py3"
            docker_client.images.get(stand_in_image).tag(ref)
            try:
                _sh(docker, "--config", str(config), "push", "-q", ref, env=path)
                yield host, ref, config, svc
            finally:
                with contextlib.suppress(Exception):
                    docker_client.images.remove(ref)
    finally:
        server.shutdown()
        server.server_close()


def test_bearer_token_fetched_with_the_stored_login(bearer_registry, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    host, ref, config, svc = bearer_registry
    with pytest.raises(RegistryError, match="refused an anonymous token"):  # the control: a login is needed
        RegistryClient(credentials=lambda name: None).resolve_digest(ref)
    before = len(svc.logins)
    res = run_envpin(
        "catalog",
        "sync",
        "--registry",
        f"{host}/nvidia/tensorflow",
        "--release",
        "20.02",
        "--no-save",
        "--json",
        env={"DOCKER_CONFIG": str(config)},
    )
    assert res.code == 1 and "1 of 2 tags read (1 missing)" in res.stderr, res.stderr
    assert svc.logins[before:] and set(svc.logins[before:]) == {USER}  # the token was asked for with the login
    _no_secret(res.stdout, res.stderr)
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "config.json").write_text(json.dumps({"auths": {host: {"username": USER, "password": "rotated"}}}))
    res = run_envpin(
        "catalog",
        "sync",
        "--registry",
        f"{host}/nvidia/tensorflow",
        "--release",
        "20.02",
        "--no-save",
        env={"DOCKER_CONFIG": str(stale)},
    )
    assert res.code == 2 and f"refused the login of user '{USER}'" in res.stderr and "rotated" not in res.stderr
