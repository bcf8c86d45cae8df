"""`envpin lock` for a Python 3.6 image, end to end: the host resolution, then the build that installs the
lock with the image's own pip 18.1 and --require-hashes.

No NGC 19.07-20.xx image can be pulled here, so the base is a stand-in that carries what matters for the
lock: the bookworm stand-in with this machine's CPython 3.6.15 (pyenv, pip 18.1, setuptools 40.6) as its
`python3`, six 1.14.0 installed for it, and an installed `tensorflow 2.1.0+nv20.2` distribution record
(metadata only: the lock needs its name and NVIDIA's local version, not TensorFlow)."""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from pathlib import Path

import pytest

from envpin.environment.requirements import read_lock
from tests.conftest import run_envpin

PY36 = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions" / "3.6.15"
# Left out of the image: the test suite, caches, and .pth hooks this machine's interpreter may carry.
_SKIP = re.compile(r"(^|/)(test|__pycache__|idlelib|tkinter)(/|$)|\.pth$")
DOCKERFILE = f"""\
ARG BASE
FROM ${{BASE}}
COPY python3.6 {PY36}
COPY tensorflow-2.1.0+nv20.2.dist-info {PY36}/lib/python3.6/site-packages/tensorflow-2.1.0+nv20.2.dist-info
# The image's python3 is 3.6, as in NVIDIA's 19.07-20.xx images; pip uses the system trust store.
ENV PATH={PY36}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m pip install --no-cache-dir six==1.14.0 && python3 -c "import sys; assert sys.version_info[:2] == (3, 6)"
"""


def _context() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            return None if _SKIP.search(info.name[len("python3.6") :]) else info

        tar.add(str(PY36), arcname="python3.6", filter=keep)
        meta = b"Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.1.0+nv20.2\n"
        for name, data in (("METADATA", meta), ("INSTALLER", b"pip\n"), ("RECORD", b"")):
            info = tarfile.TarInfo(f"tensorflow-2.1.0+nv20.2.dist-info/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        data = DOCKERFILE.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture(scope="module")
def py36_base(docker_client, local_registry: str, stand_in_image: str) -> str:  # type: ignore[no-untyped-def]
    if not (PY36 / "bin" / "python3.6").exists():
        pytest.skip(f"no CPython 3.6 at {PY36} (pyenv) to make the Python 3.6 stand-in from")
    ref = f"{local_registry}/envpin-test/python36-base:1"
    docker_client.images.build(
        fileobj=io.BytesIO(_context()), custom_context=True, tag=ref, rm=True, buildargs={"BASE": stand_in_image}
    )
    for event in docker_client.images.push(
        f"{local_registry}/envpin-test/python36-base", tag="1", stream=True, decode=True
    ):
        assert "error" not in event, event
    return ref


def test_a_python_3_6_image_is_locked_on_the_host_and_installs_with_hashes(
    docker_client, py36_base: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """auto picks the host for Python 3.6; the lock follows 3.6 markers (importlib-metadata needs
    typing-extensions below 3.8), keeps six and NVIDIA's tensorflow, hashes only files pip 18.1 accepts
    (manylinux1 at the newest), and the build installs it with the image's pip and --require-hashes."""
    src = tmp_path / "requirements.in"
    src.write_text("tensorflow\nimportlib-metadata\nPyYAML==5.4.1\nsix\n")
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", py36_base)
    assert res.code == 0, res.stderr
    assert "for Python 3.6.15" in res.stderr and "resolved on the host with uv" in res.stderr
    reqs = {r.key: r for r in read_lock(tmp_path / "requirements.lock")}
    assert {"importlib-metadata", "typing-extensions", "zipp", "pyyaml"} <= set(reqs)
    assert not {"tensorflow", "six"} & set(reqs)
    assert reqs["importlib-metadata"].version == "4.8.3"  # its last release for Python 3.6
    assert len(reqs["pyyaml"].hashes) == 1  # the cp36m manylinux1 wheel: pip 18.1 knows no later manylinux

    out = tmp_path / "env"
    built = run_envpin(
        "build",
        "--ngc",
        "20.02-tf2-py3",
        "--base-image",
        py36_base,
        "--requirements",
        str(tmp_path / "requirements.lock"),
        "--out",
        str(out),
    )
    assert built.code == 0, built.stderr
    assert "--require-hashes --no-deps" in (out / "Dockerfile").read_text()
    script = (
        "import json, sys, yaml, importlib_metadata as m; print(json.dumps({'python': sys.version_info[:2], "
        "'yaml': yaml.__version__, 'tf': m.version('tensorflow'), 'six': m.version('six'), "
        "'te': m.version('typing-extensions')}))"
    )
    shown = json.loads(
        docker_client.containers.run(built.stdout.strip(), ["python3", "-c", script], remove=True).decode()
    )
    assert shown == {
        "python": [3, 6],
        "yaml": "5.4.1",
        "tf": "2.1.0+nv20.2",
        "six": "1.14.0",
        "te": reqs["typing-extensions"].version,
    }


def test_a_python_3_6_image_cannot_resolve_inside_itself(py36_base: str, tmp_path: Path) -> None:
    src = tmp_path / "requirements.in"
    src.write_text("six\n")
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", py36_base, "--resolver", "image")
    assert res.code == 2 and "pip>=23.1 needs Python 3.7" in res.stderr and "hint: use --resolver host" in res.stderr
    assert not (tmp_path / "requirements.lock").exists()
