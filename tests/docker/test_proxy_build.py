"""Building behind a real TLS-intercepting proxy (mitmproxy): pip reaches PyPI only through it, and only
because the proxy's CA was given with --ca-bundle and added to the image's trust store."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_envpin

TOOLS = Path(os.environ.get("ENVPIN_TOOLS_DIR", "/opt/envpin-tools"))
# six 1.16.0's wheel, hashed: pip installs it with --require-hashes through the proxy.
SIX = "six==1.16.0 \\\n    --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254\n"


def _mitmdump() -> str:
    found = TOOLS / "mitmproxy" / "bin" / "mitmdump"
    exe = str(found) if found.exists() else shutil.which("mitmdump")
    if exe is None:
        pytest.skip("mitmproxy is not installed; run `sudo bash scripts/services.sh install`")
    return exe


class Proxy:
    def __init__(self, url: str, ca: Path, log: Path) -> None:
        self.url, self.ca, self.log = url, ca, log

    def docker_config(self, folder: Path) -> Path:
        """A DOCKER_CONFIG whose `proxies` the engine turns into the build's HTTP(S)_PROXY arguments."""
        folder.mkdir()
        proxies = {"default": {"httpProxy": self.url, "httpsProxy": self.url}}
        (folder / "config.json").write_text(json.dumps({"proxies": proxies}))
        return folder


def _bridge_gateway(docker_client: Any) -> str:
    """The host's address on Docker's default bridge: IPAM's Gateway where the engine records it (it does
    not for a default bridge on engine 20.10), else the bridge interface's own IPv4 address."""
    attrs = docker_client.networks.get("bridge").attrs
    for config in attrs["IPAM"].get("Config") or ():
        if config.get("Gateway"):
            return str(config["Gateway"])
    name = attrs["Options"].get("com.docker.network.bridge.name", "docker0")
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "dev", name], capture_output=True, text=True, check=True
    ).stdout.split()
    return out[out.index("inet") + 1].split("/")[0]


@pytest.fixture(scope="module")
def mitm(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Iterator[Proxy]:
    """mitmdump on the bridge gateway, where build containers reach it; it trusts the host's CAs upstream."""
    exe = _mitmdump()
    gateway = _bridge_gateway(docker_client)
    with socket.socket() as s:
        s.bind((gateway, 0))
        port = s.getsockname()[1]
    root = tmp_path_factory.mktemp("mitm")
    log = root / "flows.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [
                exe,
                "--listen-host",
                gateway,
                "--listen-port",
                str(port),
                "--set",
                f"confdir={root / 'conf'}",
                "--set",
                "ssl_verify_upstream_trusted_ca=/etc/ssl/certs/ca-certificates.crt",
                "--flow-detail",
                "1",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        ca = root / "conf" / "mitmproxy-ca-cert.pem"
        for _ in range(150):
            if ca.exists() and "proxy listening" in log.read_text():
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"mitmdump did not start: {log.read_text()[-2000:]}")
        yield Proxy(f"http://{gateway}:{port}", ca, log)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _build(stand_in_image: str, tmp_path: Path, proxy: Proxy, *extra: str) -> Any:
    req = tmp_path / "requirements.lock"
    req.write_text(SIX)
    return run_envpin(
        "build",
        "--ngc",
        "20.02-tf2-py3",
        "--base-image",
        stand_in_image,
        "--requirements",
        str(req),
        "--out",
        str(tmp_path / "env"),
        "--engine",
        "docker",
        "--no-cache",
        *extra,
        env={"DOCKER_CONFIG": str(proxy.docker_config(tmp_path / "docker"))},
    )


def test_without_the_proxy_ca_pip_cannot_install(mitm: Proxy, stand_in_image: str, tmp_path: Path) -> None:
    """The control: the proxy really intercepts, so an image that does not trust its CA cannot reach PyPI."""
    res = _build(stand_in_image, tmp_path, mitm)
    assert res.code == 2 and "the build failed" in res.stderr, res.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in res.stderr or "SSLError" in res.stderr or "certificate" in res.stderr


def test_build_through_the_intercepting_proxy(
    mitm: Proxy, stand_in_image: str, tmp_path: Path, docker_client: Any
) -> None:
    before = mitm.log.read_text().count("files.pythonhosted.org")
    res = _build(stand_in_image, tmp_path, mitm, "--ca-bundle", str(mitm.ca))
    assert res.code == 0, res.stderr
    # pip fetched the hashed wheel through mitmproxy (which logs every intercepted request).
    assert mitm.log.read_text().count("files.pythonhosted.org") > before
    from envpin.environment import lockfile
    from envpin.image import buildstate

    record = buildstate.load(lockfile.read(tmp_path / "env" / "envpin.lock").inputs_hash)
    assert record is not None
    check = (
        "import six, ssl, sys; ctx = ssl.create_default_context();"
        "ders = {c['subject'] for c in ctx.get_ca_certs()};"
        "names = [dict(x[0] for x in s).get('commonName', '') for s in ders];"
        "print(six.__version__, len(names), any('mitmproxy' in n for n in names),"
        " any(n == 'ISRG Root X1' for n in names))"
    )
    out = docker_client.containers.run(record.image_id, ["python3", "-c", check], remove=True, entrypoint=[])
    version, count, has_proxy_ca, has_public_ca = out.decode().split()
    # The proxy's CA was added to the system store: the public CAs are all still there.
    assert (version, has_proxy_ca, has_public_ca) == ("1.16.0", "True", "True") and int(count) > 100
