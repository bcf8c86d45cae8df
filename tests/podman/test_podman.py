"""Bit-identical images through podman: two copies of the repository, two fresh stores, one digest.

Each store is a real podman storage root chosen with CONTAINERS_STORAGE_CONF (podman's own mechanism), so
nothing is shared between the two builds except the stand-in base image in the local registry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from envpin.environment import lockfile
from tests.conftest import REPO, Result

EXAMPLE = "images/20.02-tf2"
#: Two real packages from PyPI, pinned by hash (pure-Python wheels that install on any Python 3.7+).
TWO_PACKAGES = (
    "tabulate==0.9.0 \\\n    --hash=sha256:024ca478df22e9340661486f85298cff5f6dcdba14f3813e8830015b9ed1948f\n"
    "tomli-w==1.0.0 \\\n    --hash=sha256:9f2a07e8be30a0729e533ec968016807069991ae2fd921a78d42f429ae5f4463\n"
)
#: This project's VMs refuse podman's default rlimits (nofile 1048576); ask for modest ones.
RUN_LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]


@pytest.fixture(scope="module")
def podman_bin() -> str:
    found = shutil.which("podman")
    if not found:
        pytest.skip("podman is not installed; run `sudo bash scripts/services.sh install`")
    return found


class Store:
    """A fresh podman storage root, selected for every command through CONTAINERS_STORAGE_CONF."""

    def __init__(self, podman: str, top: Path) -> None:
        self.podman = podman
        self.top = top
        top.mkdir(parents=True)
        conf = top / "storage.conf"
        conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{top}/root"\nrunroot = "{top}/run"\n')
        # podman 4.3's `run` refuses a DOCKER_CONFIG folder without config.json (the test session isolates
        # DOCKER_CONFIG in an empty folder): each store gets its own, with no logins.
        docker_config = top / "docker"
        docker_config.mkdir()
        (docker_config / "config.json").write_text("{}\n")
        self.env = {
            "CONTAINERS_STORAGE_CONF": str(conf),
            "ENVPIN_STATE_DIR": str(top / "state"),
            "DOCKER_CONFIG": str(docker_config),
        }

    def podman_json(self, *args: str) -> object:
        out = subprocess.run(
            [self.podman, *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return json.loads(out.stdout)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.podman, *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def reset(self) -> None:
        self.run("system", "reset", "--force")


@pytest.fixture
def stores(podman_bin: str, tmp_path: Path) -> Iterator[list[Store]]:
    made = [Store(podman_bin, tmp_path / f"store-{n}") for n in (1, 2)]
    yield made
    for store in made:
        store.reset()


def _copy_repository(dest: Path, umask: int, mtime: float) -> Path:
    """The files of this checkout git would commit (working-tree content), as another clone would have
    them: written under `umask`, stamped `mtime`."""
    git = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(git, cwd=REPO, capture_output=True, check=True).stdout
    old = os.umask(umask)
    try:
        for rel in filter(None, listed.decode().split("\0")):
            src = REPO / rel
            if not src.is_file():
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(src.read_bytes())
            os.utime(target, (mtime, mtime))
    finally:
        os.umask(old)
    return dest


def _envpin(checkout: Path, store: Store, *args: str) -> Result:
    """`python -m envpin` from that copy of the repository (its own code, templates and payload)."""
    env = {**os.environ, **store.env, "PYTHONPATH": str(checkout)}
    proc = subprocess.run(
        [sys.executable, "-m", "envpin", *args], cwd=checkout, env=env, capture_output=True, text=True, timeout=600
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _image_id(store: Store, tag: str) -> str:
    info = store.podman_json("image", "inspect", tag)
    assert isinstance(info, list)
    return "sha256:" + str(info[0]["Id"]).removeprefix("sha256:")


def test_two_checkouts_two_stores_one_digest_then_an_input_change(
    stores: list[Store], stand_in_image: str, tmp_path: Path
) -> None:
    a = _copy_repository(tmp_path / "alice", 0o022, time.time() - 400 * 86400)
    b = _copy_repository(tmp_path / "bob", 0o077, time.time())
    assert (b / EXAMPLE / "Dockerfile").stat().st_mode & 0o777 == 0o600  # the umask really differs
    probe = subprocess.run(
        [sys.executable, "-c", "import envpin; print(envpin.__file__)"],
        cwd=b,
        env={**os.environ, "PYTHONPATH": str(b)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.startswith(str(b)), "the copy's own envpin must run"
    for checkout in (a, b):
        (checkout / "requirements.lock").write_text(TWO_PACKAGES)
    alice, bob = stores

    # Alice renders the committed example with two packages, builds it with podman, commits the lock.
    args = [
        "build",
        "--ngc",
        "20.02",
        "--tf",
        "2.1",
        "--base-image",
        stand_in_image,
        "--requirements",
        "requirements.lock",
        "--out",
        EXAMPLE,
        "--engine",
        "podman",
    ]
    first = _envpin(a, alice, *args)
    assert first.code == 0, first.stderr
    assert "recorded image sha256:" in first.stderr
    lock = lockfile.read(a / EXAMPLE / "envpin.lock")
    assert lock.image is not None and lock.expected_image() == lock.image
    assert lock.image.engine.startswith("podman ") and lock.image.storage_driver == "overlay"
    tag = first.stdout.strip()
    assert _image_id(alice, tag) == lock.image.id
    assert len(lock.image.layers) == 6  # base, requirements.lock, pip install, payload, plan.json, check

    # Bob pulls her folder (his checkout: other umask, other mtimes) and builds from the lock alone.
    for f in sorted((a / EXAMPLE).iterdir()):
        old = os.umask(0o077)
        try:
            (b / EXAMPLE / f.name).write_bytes(f.read_bytes())
        finally:
            os.umask(old)
    second = _envpin(b, bob, "build", "--lock", f"{EXAMPLE}/envpin.lock", "--engine", "podman")
    assert second.code == 0, second.stderr
    assert f"reproduced {lock.image.id}" in second.stderr
    assert _image_id(bob, second.stdout.strip()) == lock.image.id
    assert (b / EXAMPLE / "envpin.lock").read_bytes() == (a / EXAMPLE / "envpin.lock").read_bytes()
    shown = bob.run("run", "--rm", *RUN_LIMITS, lock.image.id, "python3", "-m", "pip", "show", "tabulate", "tomli-w")
    assert shown.returncode == 0, shown.stderr
    assert "Version: 0.9.0" in shown.stdout and "Version: 1.0.0" in shown.stdout

    # --check rebuilds in a scratch store: the same digest again.
    checked = _envpin(b, bob, "build", "--lock", f"{EXAMPLE}/envpin.lock", "--engine", "podman", "--check")
    assert checked.code == 0, checked.stderr
    assert f"reproduced {lock.image.id} in a scratch store" in checked.stderr

    # One input changes (a package dropped): --check says the digest moved and where.
    (b / "requirements.lock").write_text(TWO_PACKAGES.split("tomli-w")[0])
    moved = _envpin(b, bob, *args, "--check")
    assert moved.code == 1, moved.stderr
    assert f"but envpin.lock records {lock.image.id[:19]}" in moved.stderr
    assert "layer 2 of 6 differs (COPY" in moved.stderr and "/opt/envpin/requirements.lock" in moved.stderr
    assert "the inputs changed since it was recorded" in moved.stderr
    assert lockfile.read(b / EXAMPLE / "envpin.lock").image == lock.image  # --check writes nothing

    # Building the new inputs records their image; it is another digest.
    rebuilt = _envpin(b, bob, *args)
    assert rebuilt.code == 0, rebuilt.stderr
    new = lockfile.read(b / EXAMPLE / "envpin.lock").image
    assert new is not None and new.id != lock.image.id and "recorded image" in rebuilt.stderr


def test_a_build_that_does_not_give_the_locked_image_fails_loudly(
    stores: list[Store], stand_in_image: str, tmp_path: Path
) -> None:
    store = stores[0]
    out = tmp_path / "env"
    args = ["build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, "--out", str(out), "--engine", "podman"]
    first = _envpin(REPO, store, *args)
    assert first.code == 0, first.stderr
    path = out / "envpin.lock"
    locked = lockfile.read(path)
    assert locked.image is not None
    # A lock recorded elsewhere with another engine set-up and another result (re-signed through the model).
    other = replace(locked.image, id="sha256:" + "0" * 64, storage_driver="vfs")
    replace(locked, image=other).write(path)
    again = _envpin(REPO, store, *args)
    assert again.code == 1, again.stderr
    assert "not reproduced: built " in again.stderr and "envpin.lock records sha256:000000000000" in again.stderr
    assert "every layer agrees" in again.stderr and "on vfs storage" in again.stderr


def test_check_needs_a_recorded_image(stores: list[Store], stand_in_image: str, tmp_path: Path) -> None:
    out = tmp_path / "env"
    rendered = _envpin(
        REPO, stores[0], "render", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, "--out", str(out)
    )
    assert rendered.code == 0, rendered.stderr
    res = _envpin(REPO, stores[0], "build", "--lock", str(out / "envpin.lock"), "--engine", "podman", "--check")
    assert res.code == 2
    assert res.stderr.splitlines()[-2:] == [
        f"error: {out / 'envpin.lock'} records no image to check against",
        "hint: build it once with `envpin build --engine podman` and commit the lock",
    ]


def test_probe_in_a_podman_container_names_podman(stores: list[Store], stand_in_image: str, tmp_path: Path) -> None:
    store = stores[0]
    out = tmp_path / "env"
    built = _envpin(
        REPO,
        store,
        "build",
        "--ngc",
        "20.02-tf2-py3",
        "--base-image",
        stand_in_image,
        "--out",
        str(out),
        "--engine",
        "podman",
    )
    assert built.code == 0, built.stderr
    probe = store.run("run", "--rm", *RUN_LIMITS, built.stdout.strip(), "python3", "-m", "envpin.probe", "--json", "-")
    assert probe.returncode == 0, probe.stderr
    container = json.loads(probe.stdout)["container"]
    assert container["in_container"]["value"] is True
    assert container["runtime"]["value"] == "podman"


def test_the_docker_engine_api_reads_podmans_socket(stores: list[Store], tmp_path: Path) -> None:
    """DOCKER_HOST at podman's Docker-compatible socket (`podman system service`): the image facts envpin's Docker
    engine reads over the API (what `envpin lock` keys its kept facts by) are podman's own."""
    from envpin.errors import EngineError
    from envpin.image.docker import DockerEngine, EngineAPI

    store = stores[0]
    context = tmp_path / "context"
    context.mkdir()
    (context / "Containerfile").write_text("FROM scratch\nCOPY x /x\n")
    (context / "x").write_text("x\n")
    built = store.run("build", "--quiet", "-t", "localhost/envpin-test/api-read:1", str(context))
    assert built.returncode == 0, built.stderr
    sock, log = tmp_path / "podman.sock", tmp_path / "service.log"
    with log.open("wb") as out:
        service = subprocess.Popen(
            [store.podman, "system", "service", "--time=0", f"unix://{sock}"],
            env={**os.environ, **store.env},
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    engine = DockerEngine(api=EngineAPI({"DOCKER_HOST": f"unix://{sock}"}, timeout=30))
    try:
        deadline = time.monotonic() + 30
        while service.poll() is None and time.monotonic() < deadline:  # until the service answers its ping
            try:
                if engine.api.get("/_ping")[0] == 200:
                    break
            except EngineError:
                time.sleep(0.05)
        assert service.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:] or "no answer in 30 s"
        facts = engine.inspect("localhost/envpin-test/api-read:1")
        assert facts.id == _image_id(store, "localhost/envpin-test/api-read:1") and len(facts.layers) == 1
        assert not engine.exists("localhost/envpin-test/not-there:1")
    finally:
        engine.close()
        service.terminate()
        service.wait(timeout=30)
