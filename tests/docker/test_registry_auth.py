"""Registry authentication: a real registry (CNCF distribution) that demands a bearer token."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from envpin.errors import RegistryError
from envpin.registry import RegistryClient
from tests.conftest import run_envpin

pytestmark = pytest.mark.docker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def token_registry(tmp_path: Path):  # type: ignore[no-untyped-def]
    """distribution's 'silly' auth: every anonymous request gets 401 + a Bearer challenge whose token
    realm (here: a path on the registry itself) hands out no token, as a private registry would."""
    exe = shutil.which("docker-registry")
    if exe is None:
        pytest.skip("docker-registry is not installed (bash scripts/services.sh install)")
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error}\n"
        "storage: {inmemory: {}}\n"
        f"http: {{addr: '127.0.0.1:{port}', secret: envpin-test}}\n"
        f"auth: {{silly: {{realm: 'http://127.0.0.1:{port}/token', service: envpin-test}}}}\n"
    )
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


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

    proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})
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


def _certificates(root: Path) -> None:
    """A CA and a server certificate for 127.0.0.1 signed by it, as an internal registry would have."""
    _sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(root / "ca.key"), "-out",
        str(root / "ca.pem"), "-days", "2", "-subj", "/CN=envpin test CA", "-addext",
        "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(root / "server.key"), "-out",
        str(root / "server.csr"), "-subj", "/CN=127.0.0.1")
    (root / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                                  "extendedKeyUsage=serverAuth\n")
    _sh("openssl", "x509", "-req", "-in", str(root / "server.csr"), "-CA", str(root / "ca.pem"), "-CAkey",
        str(root / "ca.key"), "-CAcreateserial", "-out", str(root / "server.pem"), "-days", "2", "-extfile",
        str(root / "ext.cnf"))


@pytest.fixture(scope="module")
def login_registry(tmp_path_factory: pytest.TempPathFactory, stand_in_image: str, docker_client):  # type: ignore[no-untyped-def]
    """docker-registry with htpasswd auth and TLS; the stand-in pushed to it after a real `docker login`
    whose secret docker keeps in docker-credential-pass (a gpg-encrypted pass store)."""
    missing = [t for t in ("docker-registry", "htpasswd", "openssl", "docker-credential-pass", "pass", "gpg")
               if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed; run `sudo bash scripts/services.sh install`")
    root = tmp_path_factory.mktemp("login-registry")
    _certificates(root)
    (root / "htpasswd").write_text(_sh("htpasswd", "-Bbn", USER, PASSWORD))
    port = _free_port()
    (root / "registry.yml").write_text(
        "version: 0.1\nlog: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: '{root / 'data'}'}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}', secret: envpin-test, "
        f"tls: {{certificate: '{root / 'server.pem'}', key: '{root / 'server.key'}'}}}}\n"
        f"auth: {{htpasswd: {{realm: envpin-test, path: '{root / 'htpasswd'}'}}}}\n"
    )
    proc = subprocess.Popen([shutil.which("docker-registry") or "", "serve", str(root / "registry.yml")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        reg = LoginRegistry(root, f"127.0.0.1:{port}")
        (root / "gnupg").mkdir(mode=0o700)
        _sh("gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
            "envpin test <test@envpin.invalid>", "default", "default", "never", env=reg.store_env)
        fpr = next(line.split(":")[9] for line in _sh("gpg", "--list-keys", "--with-colons",
                                                       env=reg.store_env).splitlines() if line.startswith("fpr"))
        _sh("pass", "init", fpr, env=reg.store_env)
        login = root / "docker-pass"
        login.mkdir()
        (login / "config.json").write_text('{"credsStore": "pass"}\n')
        _sh(DOCKER_CLI, "--config", str(login), "login", reg.host, "-u", USER, "--password-stdin",
            input=PASSWORD, env=reg.store_env)
        docker_client.images.get(stand_in_image).tag(reg.ref)
        _sh(DOCKER_CLI, "--config", str(login), "push", "-q", reg.ref, env=reg.store_env)
        yield reg
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        with contextlib.suppress(Exception):
            docker_client.images.remove(f"127.0.0.1:{port}/nvidia/tensorflow:20.02-tf2-py3")


def _no_secret(*texts: str) -> None:
    import base64

    for text in texts:
        assert "pw-correct-horse" not in text and base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode() not in text


def test_sync_through_the_credential_store(login_registry: LoginRegistry, stand_in_image: str) -> None:
    """credsStore: the login docker put into docker-credential-pass, read through the helper protocol."""
    reg = login_registry
    res = run_envpin("catalog", "sync", "--registry", f"{reg.host}/nvidia/tensorflow", "--release", "20.02",
                     "--ca-bundle", str(reg.ca), "--no-save", "--json", env=reg.env(reg.root / "docker-pass"))
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
    # docker picks docker-credential-pass whenever it is on PATH; without it on PATH, docker stores the
    # login in config.json itself (base64 user:password), the layout of most CI runners.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "docker").symlink_to(Path(shutil.which(DOCKER_CLI) or DOCKER_CLI).resolve())
    _sh(str(bindir / "docker"), "--config", str(plain), "login", reg.host, "-u", USER, "--password-stdin",
        input=PASSWORD, env={"PATH": str(bindir)})
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
    res = run_envpin("catalog", "sync", "--registry", f"{reg.host}/nvidia/tensorflow", "--release", "20.02",
                     *ca, "--no-save", env=reg.env(config))
    assert res.code == 2 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and lines[-1].startswith("hint:"), res.stderr
    expected = {"wrong password": f"refused the login of user '{USER}'", "no login": "requires a login",
                "untrusted certificate": "TLS certificate is not trusted"}[case]
    assert expected in errors[0], res.stderr
    assert ("--ca-bundle" if case == "untrusted certificate" else f"docker login {reg.host}") in lines[-1]
    _no_secret(res.stdout, res.stderr)


def test_build_from_the_login_protected_mirror(login_registry: LoginRegistry, tmp_path: Path) -> None:
    """The whole path: digest and config read with the stored login, the engine pulls with it, and the
    CA given with --ca-bundle joins the image's trust store; no secret reaches the folder or the log."""
    reg = login_registry
    out = tmp_path / "env"
    res = run_envpin("build", "--ngc", "20.02-tf2-py3", "--base-image", reg.ref, "--ca-bundle", str(reg.ca),
                     "--out", str(out), "--engine", "docker", "--pull", env=reg.env(reg.root / "docker-pass"))
    assert res.code == 0, res.stderr
    from envpin import lock as lockmod
    from envpin import state

    lock = lockmod.read(out / "envpin.lock")
    assert lock.inputs.build_from == reg.ref and lock.base.digest.startswith("sha256:")
    record = state.load(lock.inputs_hash)
    assert record is not None
    bundle = _sh(DOCKER_CLI, "run", "--rm", "--entrypoint", "cat", record.image_id,
                 "/etc/ssl/certs/ca-certificates.crt")
    ca_body = "".join(reg.ca.read_text().split("\n")[1:-2])
    assert ca_body[:64] in bundle.replace("\n", "")
    assert bundle.count("BEGIN CERTIFICATE") > 100  # the public CAs are still there
    texts = [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and p.suffix != ".pyz"]
    _no_secret(res.stdout, res.stderr, state.log_path(lock.inputs_hash).read_text(), *texts)
