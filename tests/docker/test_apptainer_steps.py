"""The Apptainer definition's steps in a real image, in the order Apptainer's documentation gives them.

Apptainer cannot be installed here (Debian 12 has no package for it and it is not on PyPI), so a container of
the stand-in base plays the part: the %files sources are copied to their destinations, %post runs as Apptainer
runs it (`/bin/sh -ex`, the base image's environment only: the build's is not passed in), and at run time
%environment is sourced over the host's variables before %runscript or %test runs. This checks the definition's
shell, paths, pip install and environment against a real Debian 12 / Python 3.11 image, not Apptainer itself.
"""

from __future__ import annotations

import io
import tarfile
import uuid
from pathlib import Path
from typing import Any

from envpin.environment.plan import make_plan
from envpin.environment.render import DEF_NAME, render
from tests.conftest import run_envpin
from tests.engines import push_with_env
from tests.unit.test_apptainer_def import parse_definition

PREFIX = "envpin-apptainer-steps"


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Emulated:
    """A container of the base with the definition's %files, %post, and run-time scripts in Apptainer's places."""

    def __init__(self, client: Any, image: str, files: dict[str, bytes]) -> None:
        d = parse_definition(files[DEF_NAME].decode())
        self.container = client.containers.run(
            image, ["sleep", "900"], entrypoint=[], detach=True, name=f"{PREFIX}-{uuid.uuid4().hex[:10]}"
        )
        copies = {dst: files[src] for src, dst in (ln.split() for ln in d.section("files").lines)}
        scripts = {
            "/.post.script": d.section("post").script.encode(),
            # What Apptainer writes at build time: the shebang it adds, then the section.
            "/.singularity.d/env/90-environment.sh": b"#!/bin/sh\n\n" + d.section("environment").script.encode(),
            "/.singularity.d/runscript": b"#!/bin/sh\n\n" + d.section("runscript").script.encode(),
            "/.singularity.d/test": b"#!/bin/sh\n\n" + d.section("test").script.encode(),
        }
        self.container.put_archive("/", _tar({**copies, **scripts}))

    def post(self) -> tuple[int, str]:
        code, out = self.container.exec_run(["/bin/sh", "-ex", "/.post.script"])
        return code, out.decode("utf-8", "replace")

    def run(self, script: str, *args: str, host: dict[str, str] | None = None) -> tuple[int, str]:
        """At run time: the host's variables (passed in by default), the image's environment sourced over them."""
        cmd = ["/bin/sh", "-c", f'. /.singularity.d/env/90-environment.sh && exec {script} "$@"', "sh", *args]
        code, out = self.container.exec_run(cmd, environment=host or {})
        return code, out.decode("utf-8", "replace")

    def remove(self) -> None:
        self.container.remove(force=True)


_SHOW = (
    "import os, envpin; print(os.environ.get('TF_CUDNN_USE_AUTOTUNE'), os.environ['PYTHONHASHSEED'], "
    "os.environ['PYTHONPATH'], envpin.__version__)"
)


def test_definition_steps_in_the_stand_in_base(docker_client: Any, stand_in_image: str) -> None:
    plan = make_plan(ngc="20.02-tf2-py3", base_image=stand_in_image)
    box = Emulated(docker_client, stand_in_image, render(plan, ("apptainer",)))
    try:
        code, out = box.post()
        assert code == 0, out
        assert "envpin: TensorFlow not found; nothing to check" in out  # the stand-in has no TensorFlow
        # A host that sets a variable the recipe forbids and another hash seed: the image's value wins, and
        # the runscript removes the forbidden one before the command runs.
        host = {"TF_CUDNN_USE_AUTOTUNE": "0", "PYTHONHASHSEED": "7", "PYTHONPATH": "/home/me/lib"}
        code, out = box.run("/.singularity.d/runscript", "python3", "-c", _SHOW, host=host)
        assert code == 0, out
        assert out.split() == [
            "None",
            "0",
            "/opt/envpin/lib:/opt/envpin/envpin.pyz:/home/me/lib",
            plan.to_dict()["envpin_version"],
        ]
        # %post compiled the payload with the image's Python: imports load that bytecode, not the archive's source.
        code, out = box.run("/.singularity.d/runscript", "python3", "-v", "-c", "import envpin.probe.report")
        assert code == 0, out
        assert "code object from '/opt/envpin/lib/envpin/probe/__pycache__/report." in out, out[-3000:]
        code, out = box.run("/.singularity.d/runscript")  # no command: the recipe check
        assert code == 0 and "envpin: TensorFlow not found" in out, out
        code, out = box.run("/.singularity.d/test")  # the self-test needs TensorFlow: exit 2, and says why
        assert code == 2 and "tensorflow" in out.lower(), out
    finally:
        box.remove()


def test_post_installs_locked_requirements_on_an_externally_managed_base(
    docker_client: Any, stand_in_image: str, tmp_path: Path
) -> None:
    base = push_with_env(
        docker_client,
        stand_in_image,
        f"{PREFIX}/nvidia/tensorflow",
        "20.02-tf2-py3",
        {"PIP_BREAK_SYSTEM_PACKAGES": ""},
        "apptainer-steps",
    )
    src = tmp_path / "requirements.in"
    src.write_text("six==1.16.0\n")
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", base)
    assert res.code == 0, res.stderr
    plan = make_plan(ngc="20.02-tf2-py3", base_image=base, requirements=tmp_path / "requirements.lock")
    box = Emulated(docker_client, base, render(plan, ("apptainer",)))
    try:
        code, out = box.post()
        assert code == 0, out
        assert "--break-system-packages" in out and "Successfully installed six-1.16.0" in out
        code, out = box.run("python3", "-c", "import six; print(six.__version__)")
        assert code == 0 and out.strip() == "1.16.0", out
    finally:
        box.remove()


def test_build_pins_the_definition_to_the_digest_it_resolves(
    docker_client: Any, stand_in_image: str, tmp_path: Path
) -> None:
    """A folder rendered for Apptainer and then built: the Dockerfile joins it, and both name the digest."""
    from envpin.environment import lockfile

    out = tmp_path / "env"
    common = ("--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, "--out", str(out), "--name", PREFIX)
    res = run_envpin("render", *common, "--format", "apptainer")
    assert res.code == 0, res.stderr
    assert f"{DEF_NAME}: {stand_in_image} is not pinned by digest" in res.stderr
    res = run_envpin("build", *common, "--engine", "docker")
    assert res.code == 0, res.stderr
    docker_client.images.remove(res.stdout.strip(), force=True)  # envpin/envpin-apptainer-steps:<hash>
    digest = lockfile.read(out / "envpin.lock").base.digest
    assert digest and digest.startswith("sha256:")
    name = stand_in_image.rsplit(":", 1)[0]
    assert f"From: {name}@{digest}\n" in (out / DEF_NAME).read_text()
    assert f"FROM {stand_in_image}@{digest}\n" in (out / "Dockerfile").read_text()
    assert sorted(lockfile.read(out / "envpin.lock").files) == [
        ".dockerignore",
        "Dockerfile",
        DEF_NAME,
        "envpin.pyz",
        "plan.json",
    ]
    assert run_envpin("lock", "--check", "--lock", str(out / "envpin.lock")).code == 0
