"""`envpin lock --exclude-newer` and `--pylock` against a package index on this machine that gains a newer
version between two locks (a PEP 691 JSON index with upload times, served on loopback), and against PyPI
for the resolver inside the image."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from envpin._compat import tomllib
from envpin.environment.requirements import read_lock
from envpin.environment.resolve import stub_wheel, uv_binary
from tests.conftest import run_envpin

NGC = "20.02-tf2-py3"
PROJECT = "envpin-toy"
CUT = "2024-03-01"


class Index:
    """A simple-repository index (PEP 691 JSON, with PEP 700 upload times) of one project whose files can
    be added while it runs."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: list[dict[str, object]] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.reply(head=False)

            def do_HEAD(self) -> None:  # uv asks first whether it can read a wheel's metadata by ranges
                self.reply(head=True)

            def reply(self, head: bool) -> None:
                path = self.path.split("?", 1)[0]
                if path.rstrip("/") == f"/simple/{PROJECT}":
                    body = json.dumps(
                        {"meta": {"api-version": "1.1"}, "name": PROJECT, "files": index.files, "versions": []}
                    ).encode()
                    kind = "application/vnd.pypi.simple.v1+json"
                elif path.startswith("/files/") and (index.folder / path[7:]).is_file():
                    body, kind = (index.folder / path[7:]).read_bytes(), "application/octet-stream"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, version: str, uploaded: str) -> str:
        wheel = stub_wheel(self.folder, PROJECT, version)
        assert wheel is not None
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        self.files.append(
            {
                "filename": wheel.name,
                "url": f"{self.url}/files/{wheel.name}",
                "hashes": {"sha256": digest},
                "upload-time": uploaded,
            }
        )
        return f"sha256:{digest}"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    (tmp_path / "index").mkdir()
    served = Index(tmp_path / "index")
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.server.shutdown()
        served.server.server_close()
        thread.join(timeout=10)


def _env(index: Index, tmp_path: Path) -> dict[str, str]:
    """uv on this index only, with its own cache (no answers from an earlier test's copy of the index)."""
    return {"UV_DEFAULT_INDEX": f"{index.url}/simple", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}


def test_a_cutoff_lock_relocks_byte_identically_after_the_index_gains_a_version(
    index: Index, stand_in_image: str, tmp_path: Path
) -> None:
    old = index.add("1.0", "2024-01-10T09:00:00Z")
    src = tmp_path / "requirements.in"
    src.write_text(f"{PROJECT}>=1.0\n")
    args = ("lock", str(src), "--ngc", NGC, "--base-image", stand_in_image, "--resolver", "host")
    env = _env(index, tmp_path)
    first = run_envpin(*args, "--exclude-newer", CUT, "--pylock", env=env)
    assert first.code == 0, first.stderr
    assert "cut-off: only files uploaded before 2024-03-01T00:00:00Z (recorded in the lock)" in first.stderr
    lock = tmp_path / "requirements.lock"
    before = lock.read_bytes()
    assert b"# exclude-newer: 2024-03-01T00:00:00Z" in before
    assert [(r.version, r.hashes) for r in read_lock(lock)] == [("1.0", (old,))]

    index.add("1.1", "2024-05-10T09:00:00Z")  # the index gains a newer version
    again = run_envpin(*args, "--exclude-newer", CUT, env=env)
    assert again.code == 0, again.stderr
    assert lock.read_bytes() == before, "the same inputs and cut-off must re-lock byte-identically"
    kept = run_envpin(*args, env=env)  # no option: the re-lock keeps the cut-off the lock records
    assert kept.code == 0 and "kept from the lock it rewrote" in kept.stderr, kept.stderr
    assert lock.read_bytes() == before

    check = run_envpin("lock", "--check", "--lock", str(lock), env=env)
    assert check.code == 0, check.stderr
    assert f"a re-lock without its cut-off 2024-03-01T00:00:00Z would change 1: {PROJECT} 1.0 -> 1.1" in check.stdout

    dropped = run_envpin(*args, "--exclude-newer", "none", env=env)
    assert dropped.code == 0, dropped.stderr
    assert [r.version for r in read_lock(lock)] == ["1.1"] and b"exclude-newer" not in lock.read_bytes()
    quiet = run_envpin("lock", "--check", "--lock", str(lock), env=env)
    assert quiet.code == 0 and "note:" not in quiet.stdout, quiet.stdout


def test_pylock_installs_the_same_versions_and_hashes(index: Index, stand_in_image: str, tmp_path: Path) -> None:
    """pylock.toml beside requirements.lock installs into a fresh virtual environment with uv (which reads
    PEP 751 files): the same versions, from files with the hashes requirements.lock lists."""
    index.add("1.0", "2024-01-10T09:00:00Z")
    src = tmp_path / "requirements.in"
    src.write_text(f"{PROJECT}\n")
    env = _env(index, tmp_path)
    res = run_envpin(
        "lock", str(src), "--ngc", NGC, "--base-image", stand_in_image, "--resolver", "host", "--pylock", env=env
    )
    assert res.code == 0, res.stderr
    pylock = tmp_path / "pylock.toml"
    assert res.stdout.splitlines() == [str(tmp_path / "requirements.lock"), str(pylock)]
    locked = {r.key: r for r in read_lock(tmp_path / "requirements.lock")}
    data = tomllib.loads(pylock.read_text())
    assert {
        p["name"]: (p["version"], tuple(f"sha256:{w['hashes']['sha256']}" for w in p["wheels"]))
        for p in data["packages"]
    } == {k: (r.version, r.hashes) for k, r in locked.items()}
    venv = tmp_path / "venv"
    uv = uv_binary()
    run_env = {**os.environ, **env}
    subprocess.run([uv, "venv", "-q", str(venv)], check=True, env=run_env, timeout=120)
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "-r", str(pylock)],
        check=True, env=run_env, timeout=120,
    )  # fmt: skip
    listed = subprocess.run(
        [uv, "pip", "list", "--format", "json", "--python", str(venv / "bin" / "python")],
        check=True, env=run_env, timeout=120, capture_output=True, text=True,
    ).stdout  # fmt: skip
    versions = {re.sub(r"[-_.]+", "-", d["name"]).lower(): d["version"] for d in json.loads(listed)}
    assert versions == {k: r.version for k, r in locked.items()}


def test_both_resolvers_honour_the_same_cutoff(stand_in_image: str, tmp_path: Path) -> None:
    """Inside the image (pip --uploaded-prior-to) and on the host (uv --exclude-newer), against PyPI: the
    same cut-off gives the same pins, older than the pins without it."""
    src = tmp_path / "requirements.in"
    src.write_text("python-dateutil\n")
    base = ("lock", str(src), "--ngc", NGC, "--base-image", stand_in_image)
    pins = {}
    for resolver in ("image", "host"):
        out = tmp_path / f"{resolver}.lock"
        res = run_envpin(*base, "--resolver", resolver, "--exclude-newer", "2021-01-01", "--out", str(out))
        if res.code != 0 and "PyPI" in res.stderr + res.stdout:
            pytest.skip(f"PyPI not reachable: {res.stderr}")
        assert res.code == 0, res.stderr
        pins[resolver] = {r.key: r.version for r in read_lock(out)}
    latest = run_envpin(*base, "--resolver", "host", "--out", str(tmp_path / "latest.lock"))
    assert latest.code == 0, latest.stderr
    assert pins["image"] == pins["host"]
    assert (
        pins["host"]["python-dateutil"]
        != {r.key: r.version for r in read_lock(tmp_path / "latest.lock")}["python-dateutil"]
    )
