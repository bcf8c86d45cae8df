"""A stock TensorFlow GPU image as the base, end to end: `envpin render --tf 2.20` then `envpin build` from the
stand-in for docker.io/tensorflow/tensorflow:2.20.0-gpu in the local registry (real engine, real registry)."""

from __future__ import annotations

import shutil
import urllib.request
from pathlib import Path

import pytest

from envpin.environment import lockfile
from envpin.image import buildstate
from tests.conftest import run_envpin
from tests.engines import MANIFEST_ACCEPT, REGISTRY, STOCK_REPO


def _digest(tag: str) -> str:
    req = urllib.request.Request(
        f"http://{REGISTRY}/v2/{STOCK_REPO}/manifests/{tag}", method="HEAD", headers={"Accept": MANIFEST_ACCEPT}
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10) as resp:
        return resp.headers["Docker-Content-Digest"]


def test_render_then_build_from_the_stock_stand_in(docker_client, stock_stand_in_image: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    rendered = run_envpin("render", "--tf", "2.20", "--base-image", stock_stand_in_image, "--out", str(out))
    assert rendered.code == 0, rendered.stderr
    assert rendered.stderr.count("notice: ") == 1  # the plan rests on third-party Python and Ubuntu values
    assert f"\nFROM {stock_stand_in_image}\n" in (out / "Dockerfile").read_text()  # no digest known offline

    built = run_envpin("build", "--lock", str(out / "envpin.lock"), "--update")
    assert built.code == 0, built.stderr
    digest = _digest("2.20.0-gpu")
    lock = lockfile.read(out / "envpin.lock")
    assert (lock.base.image, lock.base.digest) == ("tensorflow/tensorflow:2.20.0-gpu", digest)
    assert (lock.inputs.tag, lock.inputs.flavor, lock.inputs.build_from) == ("2.20.0-gpu", "gpu", stock_stand_in_image)
    assert lock.recipe.id.startswith("stock-")
    assert f"\nFROM {stock_stand_in_image}@{digest}\n" in (out / "Dockerfile").read_text()

    tag = built.stdout.strip()
    image = docker_client.images.get(tag)
    labels = image.labels
    assert labels["org.opencontainers.image.base.name"] == "tensorflow/tensorflow:2.20.0-gpu"
    assert labels["org.opencontainers.image.base.digest"] == digest
    assert labels["io.envpin.recipe"] == lock.recipe.id and labels["io.envpin.cuda"] == "12.5"
    state = buildstate.load(lock.inputs_hash)
    assert state is not None and state.image_id == image.id
    # Inside the image the runtime helper picks the stock recipe by itself (no NVIDIA_TENSORFLOW_VERSION).
    env = dict(e.split("=", 1) for e in image.attrs["Config"]["Env"])
    assert env["ENVPIN_RECIPE"] == lock.recipe.id and "NVIDIA_TENSORFLOW_VERSION" not in env
    logs = docker_client.containers.run(
        image.id, ["python3", "-c", "import envpin.probe.runtime as r; print(r.ngc_release())"], remove=True
    )
    assert logs.decode().strip() == "None"

    again = run_envpin("build", "--lock", str(out / "envpin.lock"))
    assert again.code == 0 and again.stderr.startswith("up to date"), again.stderr
    assert run_envpin("lock", "--check", "--lock", str(out / "envpin.lock")).code == 0


@pytest.mark.podman
def test_a_stock_environment_builds_bit_identically_with_podman(stock_stand_in_image: str, tmp_path: Path) -> None:
    """The stock table's fixed SOURCE_DATE_EPOCH makes a stock image reproducible like an NGC one: the first
    podman build records the image ID, a rebuild in a scratch store (--check) gives the same one."""
    from tests.podman.test_podman import Store

    podman = shutil.which("podman")
    if podman is None:
        pytest.skip("podman is not installed; run `sudo bash scripts/services.sh install`")
    store = Store(podman, tmp_path / "store")
    try:
        out = tmp_path / "env"
        first = run_envpin(
            "build",
            "--stock",
            "2.20",
            "--base-image",
            stock_stand_in_image,
            "--out",
            str(out),
            "--engine",
            "podman",
            env=store.env,
        )
        assert first.code == 0, first.stderr
        lock = lockfile.read(out / "envpin.lock")
        assert lock.image is not None and lock.image.engine.startswith("podman ")
        check = run_envpin("build", "--lock", str(out / "envpin.lock"), "--check", env=store.env)
        assert check.code == 0, check.stderr
        assert f"reproduced {lock.image.id} in a scratch store" in check.stderr
    finally:
        store.reset()
