"""The determinism self-test inside the Debian bullseye NGC stand-in (Python 3.9) with TensorFlow 2.7.4 and 2.5.3:
the versions before enable_op_determinism(), where TF_DETERMINISTIC_OPS set before import is the only switch.

The derived images (stand-in + tensorflow-cpu) are built once with the Docker SDK and cached by a tag that
hashes the Dockerfile and the stand-in's image id, so reruns start in seconds. envpin is copied in the way
images carry it (/opt/envpin on PYTHONPATH) and run by the image's own python3.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from envpin.environment.payload import IMAGE_PATH, PAYLOAD_NAME
from tests.engines import payload_tar

REPO = Path(__file__).resolve().parents[2]
STAND_IN = "127.0.0.1:5000/nvidia/tensorflow:21.06-tf2-py3"
# protobuf >= 3.20 breaks the generated code of these TF releases; numpy >= 1.24 removed aliases they use.
DOCKERFILE = """\
FROM {base}
RUN python3 -m pip install --no-cache-dir tensorflow-cpu=={tf} 'numpy<1.24' 'protobuf<3.20' \\
 && python3 -c "import tensorflow as tf; assert tf.__version__ == '{tf}', tf.__version__"
"""
SCHEMA = json.loads((REPO / "envpin" / "probe" / "selftest" / "selftest.schema.json").read_text())


@pytest.fixture(scope="module")
def engine(docker_client: Any) -> Any:
    """A client with a long read timeout (installing TensorFlow in a build step prints nothing for minutes);
    the shared docker_client fixture has already decided whether an engine answers."""
    import docker

    client = docker.from_env(timeout=900)
    yield client
    client.close()


def _stand_in(engine: Any) -> Any:
    import docker

    try:
        return engine.images.get(STAND_IN)
    except docker.errors.ImageNotFound:
        try:
            return engine.images.pull(STAND_IN)
        except docker.errors.APIError as exc:
            pytest.skip(
                f"stand-in image {STAND_IN} is not in the local registry ({exc.explanation or exc}); "
                "build it with scripts/services.sh base-images"
            )


def tf_image(engine: Any, version: str, tmp_path: Path) -> str:
    """The stand-in plus tensorflow-cpu==version, built once and reused by tag."""
    import docker

    base = _stand_in(engine)
    dockerfile = DOCKERFILE.format(base=STAND_IN, tf=version)
    key = hashlib.sha256((dockerfile + base.id).encode()).hexdigest()[:12]
    tag = f"envpin-test/selftest-tf:{version}-{key}"
    try:
        engine.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    (tmp_path / "Dockerfile").write_text(dockerfile)
    try:
        engine.images.build(path=str(tmp_path), tag=tag, rm=True, pull=False, network_mode="host")
    except docker.errors.BuildError as exc:
        log = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log)
        pytest.fail(f"building {tag} failed: {exc.msg}\n{log[-3000:]}")
    return tag


def run(engine: Any, image: str, command: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    container = engine.containers.create(
        image,
        command=command,
        environment={"PYTHONPATH": IMAGE_PATH, "PYTHONHASHSEED": "0", **env},
        network_disabled=True,
    )
    try:
        container.put_archive("/opt", payload_tar("envpin/" + PAYLOAD_NAME))
        container.start()
        status = container.wait(timeout=900)
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
        return status["StatusCode"], out, err
    finally:
        container.remove(force=True)


@pytest.mark.parametrize("version", ["2.7.4", "2.5.3"])
def test_selftest_in_bullseye_stand_in(engine: Any, version: str, tmp_path: Path) -> None:
    image = tf_image(engine, version, tmp_path)

    code, out, err = run(engine, image, ["python3", "-m", "envpin.probe.selftest", "--compare"], {})
    assert code in (0, 1) and out.strip(), err[-3000:]
    result = json.loads(out)
    jsonschema.validate(result, SCHEMA)
    assert "errors" not in result, result["errors"]
    assert result["tf_version"] == version
    assert result["python"].startswith("3.9.")
    det = result["determinism"]
    assert det["TF_DETERMINISTIC_OPS"] == "1"
    assert det["enable_op_determinism"].startswith(f"unavailable (TensorFlow {version} predates 2.8)")
    assert det["method"] == "TF_DETERMINISTIC_OPS=1 set before TensorFlow was imported"
    names = [c["name"] for c in result["checks"]]
    assert names == [c["name"] for c in result["without_determinism"]]
    # Every check has a code path that works on this TensorFlow, except bfloat16 kernels an older CPU build
    # does not have (2.5 and 2.7 refuse the bf16 Conv2D gradient): skipped inside the battery, with the reason.
    skipped = [
        c
        for c in result["checks"]
        if c["verdict"] == "skipped" and not ("bf16" in c["name"] and "bfloat16" in c.get("message", ""))
    ]
    assert not skipped, skipped
    assert result["golden"]["runs_equal"] is True, result["golden"]
    assert result["golden"]["device_class"].endswith("onednn=off")  # oneDNN is opt-in before TF 2.9
    hygiene = {h["check"]: h for h in result["hygiene"]}
    assert hygiene["PYTHONHASHSEED"]["status"] == "ok"
    assert hygiene["python-random"]["status"] == "ok"

    # Planted nondeterminism and a planted determinism exception, through the battery's own child.
    code, out, err = run(
        engine,
        image,
        [
            "python3",
            "-m",
            "envpin.probe.selftest",
            "--child",
            "--quick",
            "--rounds",
            "20",
            "--checks",
            "planted-urandom-sum,planted-raises-under-determinism",
        ],
        {"TF_DETERMINISTIC_OPS": "1"},
    )
    assert code == 0, err[-3000:]
    checks = json.loads(out)["checks"]
    planted = [c["verdict"] for c in checks if c["name"] == "planted-urandom-sum"]
    raising = [c for c in checks if c["name"] == "planted-raises-under-determinism"]
    assert planted == ["NONDETERMINISTIC"] * 20
    assert [c["verdict"] for c in raising] == ["raises-under-determinism"] * 20
    assert "PlantedOp" in raising[0]["message"]


def test_probe_image_runs_the_self_test_by_default_where_the_image_has_tensorflow(engine: Any, tmp_path: Path) -> None:
    """`envpin probe --image` on an image with TensorFlow: the report carries the self-test (quick battery
    and golden hash), its one-line outcome is printed, and the exit status follows it."""
    from envpin.probe.selftest import problems
    from tests.conftest import run_envpin

    image = tf_image(engine, "2.7.4", tmp_path)
    res = run_envpin("probe", "--image", image, "--gpus", "none", "--quick", "--out", str(tmp_path / "reports"))
    report_path = next((tmp_path / "reports").glob("*.json"))
    report = json.loads(report_path.read_text())
    result = report["selftest"]
    jsonschema.validate(result, SCHEMA)
    assert result["mode"] == "quick" and result["tf_version"] == "2.7.4"
    assert result["golden"]["hash"].startswith("sha256:")
    found = problems(result)
    assert res.code == (1 if found else 0), res.stderr
    assert ("self-test FAILED" if found else "self-test passed") in res.stderr
    assert report["probe"]["options"]["value"]["selftest"] == "auto"
