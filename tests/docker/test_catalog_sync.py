"""`envpin catalog sync` against the local registry: images whose config agrees or disagrees with the catalog.

Two images are built FROM the 20.02 stand-in with NGC 20.03's ENV (one with a wrong CUDA_VERSION) and pushed to a
repository of their own, envpin-sync-test/nvidia/tensorflow, so the shared stand-ins are never touched. The tf1 tag
is a two-platform index (linux/arm64 -> the disagreeing image, listed first; linux/amd64 -> the agreeing one), so
the platform choice and the index digest are checked on a real registry too.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envpin.knowledge import catalog, sync
from tests.conftest import Result, run_envpin
from tests.engines import MANIFEST_ACCEPT, push_with_env, registry_request

PREFIX = "envpin-sync-test"
REPO = f"{PREFIX}/nvidia/tensorflow"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"

#: What NGC 20.03's images declare (values agree with the catalog's 20.03 release notes; some are more precise).
NGC_20_03_ENV = {
    "CUDA_VERSION": "10.2.89",
    "CUDA_DRIVER_VERSION": "440.33.01",
    "CUBLAS_VERSION": "10.2.2.89",
    "CUDNN_VERSION": "7.6.5.32",
    "NCCL_VERSION": "2.6.3",
    "TENSORRT_VERSION": "7.0.0.11",
    "HOROVOD_VERSION": "0.19.0",
    "PYVER": "3.6",
    "NVIDIA_REQUIRE_CUDA": "cuda>=10.2 brand=tesla,driver>=384,driver<385 brand=tesla,driver>=396,driver<397 "
    "brand=tesla,driver>=410,driver<411 brand=tesla,driver>=418,driver<419",
}
IMAGES = {
    "20.03-tf1-py3": {
        **NGC_20_03_ENV,
        "TENSORFLOW_VERSION": "1.15.2",
        "NVIDIA_TENSORFLOW_VERSION": "20.03-tf1",
        "NVIDIA_BUILD_ID": "11111111",
    },
    "20.03-tf2-py3": {
        **NGC_20_03_ENV,
        "TENSORFLOW_VERSION": "2.1.0",
        "NVIDIA_TENSORFLOW_VERSION": "20.03-tf2",
        "NVIDIA_BUILD_ID": "22222222",
        "CUDA_VERSION": "10.1.243",  # the catalog (NVIDIA's 20.03 notes) says 10.2.89
    },
}

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _sync(*args: str, registry: str, catalog_file: Path | None = None) -> Result:
    env = {catalog.CATALOG_ENV: str(catalog_file) if catalog_file else ""}
    return run_envpin("catalog", "sync", "--registry", registry, *args, env=env)


def _manifest(reference: str) -> tuple[str, bytes, dict[str, Any]]:
    _, headers, body = registry_request(f"/v2/{REPO}/manifests/{reference}", accept=MANIFEST_ACCEPT)
    digest = {k.lower(): v for k, v in headers.items()}["docker-content-digest"]
    return digest, body, json.loads(body)


def _put_manifest(tag: str, body: bytes, media_type: str) -> str:
    req = urllib.request.Request(
        f"http://127.0.0.1:5000/v2/{REPO}/manifests/{tag}",
        data=body,
        method="PUT",
        headers={"Content-Type": media_type},
    )
    with _OPENER.open(req, timeout=10) as resp:
        return resp.headers["Docker-Content-Digest"]


@pytest.fixture(scope="module")
def pushed(docker_client: Any, stand_in_image: str) -> dict[str, Any]:
    """Push both images, then turn the tf1 tag into an index; returns digests as the registry reports them."""
    for tag, env in IMAGES.items():
        push_with_env(docker_client, stand_in_image, REPO, tag, env, "catalog-sync")
    amd64_digest, amd64_body, amd64 = _manifest("20.03-tf1-py3")
    other_digest, other_body, other = _manifest("20.03-tf2-py3")
    assert amd64["mediaType"] == DOCKER_MANIFEST and other["mediaType"] == DOCKER_MANIFEST
    index = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_LIST,
        "manifests": [
            {
                "mediaType": DOCKER_MANIFEST,
                "size": len(other_body),
                "digest": other_digest,
                "platform": {"architecture": "arm64", "os": "linux"},
            },
            {
                "mediaType": DOCKER_MANIFEST,
                "size": len(amd64_body),
                "digest": amd64_digest,
                "platform": {"architecture": "amd64", "os": "linux"},
            },
        ],
    }
    index_digest = _put_manifest("20.03-tf1-py3", json.dumps(index, indent=3).encode(), MANIFEST_LIST)
    return {
        "tf1_index": index_digest,
        "tf1_amd64": amd64_digest,
        "tf2": other_digest,
        "configs": {amd64["config"]["digest"], other["config"]["digest"]},
        "layers": {layer["digest"] for m in (amd64, other) for layer in m["layers"]},
    }


def test_disagreement_reported_and_refreshed_catalog_used(pushed: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "catalog.json"
    res = _sync("--release", "20.03", "--json", "--write", str(out), registry=f"127.0.0.1:5000/{PREFIX}")
    assert res.code == 1, res.stderr
    report = json.loads(res.stdout)
    assert report["repository"] == f"127.0.0.1:5000/{REPO}" and report["exit_code"] == 1
    tags = {t["tag"]: t for t in report["tags"]}
    assert list(tags) == ["20.03-tf1-py3", "20.03-tf2-py3"]
    tf1, tf2 = tags["20.03-tf1-py3"], tags["20.03-tf2-py3"]
    cat = catalog.load(str(catalog.shipped_catalog_path()), cache=False)
    notes = next(e for e in cat.entries() if e.tag == "20.03-tf2-py3")

    # tf2: CUDA_VERSION disagrees, and nothing else does.
    assert tf2["status"] == "disagrees" and tf2["image"]["digest"] == pushed["tf2"]
    disagreeing = {k: v for k, v in tf2["fields"].items() if v["status"] == "disagrees"}
    assert disagreeing == {
        "cuda": {"catalog": notes.value("cuda"), "image": "10.1.243", "status": "disagrees", "from": "ENV CUDA_VERSION"}
    }
    # tf1 (an index): the amd64 config was read, the digest recorded is the index's.
    assert tf1["status"] == "agrees" and tf1["image"]["digest"] == pushed["tf1_index"] != pushed["tf1_amd64"]
    statuses = {k: v["status"] for k, v in tf1["fields"].items()}
    assert {k for k, s in statuses.items() if s == "more precise"} == {"tf_version", "cudnn", "tensorrt"}
    assert {s for k, s in statuses.items() if k not in ("tf_version", "cudnn", "tensorrt")} == {"agrees"}
    assert tf1["image"]["declared"]["driver_compat"] == ["384", "396", "410", "418"]
    assert tf1["image"]["declared"]["cuda_min"] == "10.2" and tf1["image"]["declared"]["build_id"] == "11111111"
    assert tf1["image"]["created"] and tf1["image"]["source"] == "image config"
    # With --json, stderr carries only the summary and (for a mirror) what its facts do.
    assert "2 of 2 tags read (0 missing): 1 disagree" in res.stderr and "(grade mirror)" in res.stderr
    assert {t["grade"] for t in report["tags"]} == {"mirror"}

    # The written catalog: canonical, valid, release-notes values untouched, image facts beside them.
    written = json.loads(out.read_text(encoding="utf-8"))
    assert out.read_bytes() == sync.dump_catalog(written)
    catalog.validate(written)
    for flavor, digest in (("tf1", pushed["tf1_index"]), ("tf2", pushed["tf2"])):
        image = written["releases"]["20.03"]["flavors"][flavor].pop("image")
        assert image["digest"] == digest and image["registry"] == f"127.0.0.1:5000/{REPO}"
    assert written == cat.data

    # ENVPIN_CATALOG makes envpin use it.
    show = run_envpin("catalog", "show", "20.03", "--json", env={catalog.CATALOG_ENV: str(out)})
    assert show.code == 0, show.stderr
    shown = {e["tag"]: e for e in json.loads(show.stdout)}
    assert shown["20.03-tf2-py3"]["digest"] == pushed["tf2"]
    assert shown["20.03-tf1-py3"]["digest"] == pushed["tf1_index"]
    assert shown["20.03-tf2-py3"]["verified_from_image"]["declared"]["cuda"] == "10.1.243"
    # The image's value outranks the notes' in the refreshed catalog; the notes' value stays visible beside it.
    assert shown["20.03-tf2-py3"]["cuda"] == "10.1.243"
    assert shown["20.03-tf2-py3"]["provenance"]["cuda"]["kind"] == "image"
    assert shown["20.03-tf2-py3"]["provenance"]["cuda"]["outranks"]["value"] == notes.value("cuda")
    # The sync also kept the mirror's reads in the cache: the file records their digests, so they are the image.
    configs = shown["20.03-tf2-py3"]["image_configs"]
    assert [(c["grade"], c["kept_in"]) for c in configs] == [("image", "image-facts cache"), (None, "catalog file")]
    assert "(the same image)" in configs[1]["why"]
    assert "warning: 20.03-tf2-py3 cuda: the image config" in show.stderr and "envpin uses the image's" in show.stderr

    # Syncing again from the refreshed file also checks the recorded digests (same tags, same digests).
    again = _sync("--release", "20.03", "--json", registry=f"127.0.0.1:5000/{PREFIX}", catalog_file=out)
    assert again.code == 1, again.stderr
    for t in json.loads(again.stdout)["tags"]:
        assert t["fields"]["digest"]["status"] == "agrees"


def test_table_on_stdout(pushed: dict[str, Any]) -> None:
    res = _sync("--release", "20.03", registry=f"127.0.0.1:5000/{PREFIX}")
    assert res.code == 1 and res.stderr == "", res.stderr
    row = next(line for line in res.stdout.splitlines() if "10.1.243" in line)
    assert "20.03-tf2-py3" in row and "cuda" in row and "ENV CUDA_VERSION" in row and "disagrees" in row


def test_agreeing_tag_exits_0(pushed: dict[str, Any]) -> None:
    res = _sync("--release", "20.03-tf1-py3", registry=f"http://127.0.0.1:5000/{PREFIX}")
    assert res.code == 0, res.stderr
    assert res.stderr == ""  # the table and the summary are the result: stdout
    assert "more precise" in res.stdout and "1 of 1 tags read (0 missing): 0 disagree" in res.stdout


def test_missing_tags_are_reported_and_sync_goes_on(pushed: dict[str, Any]) -> None:
    res = _sync("--release", "20.06", "--release", "20.03", "--json", registry=f"127.0.0.1:5000/{PREFIX}")
    assert res.code == 1, res.stderr
    tags = {t["tag"]: t for t in json.loads(res.stdout)["tags"]}
    assert [t for t in tags] == ["20.03-tf1-py3", "20.03-tf2-py3", "20.06-tf1-py3", "20.06-tf2-py3"]
    for tag in ("20.06-tf1-py3", "20.06-tf2-py3"):
        assert tags[tag]["status"] == "missing" and f"has no tag or manifest '{tag}'" in tags[tag]["error"]
    assert tags["20.03-tf2-py3"]["status"] == "disagrees"


def test_a_registry_without_any_selected_tag_is_an_error(pushed: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "catalog.json"
    res = _sync("--release", "20.06", "--write", str(out), registry=f"127.0.0.1:5000/{PREFIX}")
    _one_line_error(res, f"127.0.0.1:5000/{REPO} holds none of the 2 selected tags")
    assert not out.exists()


def _one_line_error(res: Result, fragment: str) -> None:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2, res.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0] and "Traceback" not in res.stderr
    assert len(lines) == 2 and lines[1].startswith("hint: ") and res.stdout == ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_registry_stops_with_exit_2() -> None:
    port = _free_port()  # nothing listens there once the socket is closed
    res = _sync("--release", "20.03", "--json", registry=f"127.0.0.1:{port}")
    _one_line_error(res, f"registry 127.0.0.1:{port} is unreachable")


@pytest.fixture
def auth_registry(tmp_path: Path, local_registry: str) -> Iterator[str]:
    """A second, real docker-registry (CNCF distribution) on a free loopback port that demands htpasswd logins."""
    exe = "/usr/bin/docker-registry"
    if not os.access(exe, os.X_OK):
        pytest.skip(f"{exe} not found; run `sudo bash scripts/services.sh install` (Debian package docker-registry)")
    port = _free_port()
    (tmp_path / "htpasswd").write_text("", encoding="utf-8")  # no users: every request is refused
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: envpin-auth-test\n"
        f"auth:\n  htpasswd:\n    realm: envpin-auth-test\n    path: {tmp_path / 'htpasswd'}\n",
        encoding="utf-8",
    )
    with open(tmp_path / "registry.log", "wb") as log:
        proc = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                _OPENER.open(f"http://127.0.0.1:{port}/v2/", timeout=2).close()
                raise AssertionError("the htpasswd registry answered /v2/ without credentials")
            except urllib.error.HTTPError as exc:
                exc.close()
                assert exc.code == 401 and exc.headers["WWW-Authenticate"].startswith("Basic ")
                break
            except (urllib.error.URLError, OSError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"docker-registry did not start: {(tmp_path / 'registry.log').read_text()}")
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_registry_demanding_login_stops_with_exit_2(auth_registry: str) -> None:
    res = _sync("--release", "20.03", registry=auth_registry)
    _one_line_error(res, f"{auth_registry} requires a login")
    assert "docker login" in res.stderr


class _CountingProxy(http.server.ThreadingHTTPServer):
    """A pass-through to the local registry that records every request, to see what sync really fetches."""

    daemon_threads = True

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        super().__init__(("127.0.0.1", 0), _ProxyHandler)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    server: _CountingProxy

    def do_GET(self) -> None:
        self._forward()

    def do_HEAD(self) -> None:
        self._forward()

    def _forward(self) -> None:
        self.server.requests.append((self.command, self.path))
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "authorization", "user-agent")}
        req = urllib.request.Request(f"http://127.0.0.1:5000{self.path}", headers=headers, method=self.command)
        try:
            resp = _OPENER.open(req, timeout=20)
        except urllib.error.HTTPError as exc:
            resp = exc
        with resp:
            body = resp.read()
            self.send_response(resp.status)
            for name in (
                "Content-Type",
                "Docker-Content-Digest",
                "Docker-Distribution-Api-Version",
                "WWW-Authenticate",
            ):
                if resp.headers.get(name):
                    self.send_header(name, resp.headers[name])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def counting_proxy(local_registry: str) -> Iterator[_CountingProxy]:
    proxy = _CountingProxy()
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=10)


def test_only_manifests_and_config_blobs_are_fetched(pushed: dict[str, Any], counting_proxy: _CountingProxy) -> None:
    port = counting_proxy.server_address[1]
    res = _sync("--release", "20.03", "--json", registry=f"127.0.0.1:{port}/{PREFIX}")
    assert res.code == 1, res.stderr
    assert json.loads(res.stdout)["repository"] == f"127.0.0.1:{port}/{REPO}"
    blobs = {path.rsplit("/", 1)[1] for _, path in counting_proxy.requests if "/blobs/" in path}
    assert blobs == pushed["configs"] and not blobs & pushed["layers"]
    assert sorted(counting_proxy.requests) == sorted(
        [
            ("GET", f"/v2/{REPO}/manifests/20.03-tf1-py3"),  # the index
            ("GET", f"/v2/{REPO}/manifests/{pushed['tf1_amd64']}"),  # its linux/amd64 manifest
            ("GET", f"/v2/{REPO}/manifests/20.03-tf2-py3"),
            *(("GET", f"/v2/{REPO}/blobs/{digest}") for digest in pushed["configs"]),
        ]
    )
