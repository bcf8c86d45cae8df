"""Tracked runs in the real trackers: MLflow's tracking server (scripts/services.sh mlflow, sqlite backend) through
the MLflow client, TensorBoard event files read with TensorBoard's own EventAccumulator, W&B in offline mode
read from its run folder; `envpin runs` names an environment change planted between two of them."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import envpin
from envpin.probe import track

MLFLOW_URI = os.environ.get("ENVPIN_MLFLOW_URI", "http://127.0.0.1:5050")


def _need(library: str) -> Any:
    return pytest.importorskip(library, reason=f"{library} is not installed (pip install -e '.[track]')")


@pytest.fixture
def mlflow_uri(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    mlflow = _need("mlflow")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        opener.open(MLFLOW_URI + "/health", timeout=5).read()
    except OSError as exc:
        pytest.skip(f"no MLflow tracking server at {MLFLOW_URI} ({exc}); start it: bash scripts/services.sh mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", MLFLOW_URI)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.chdir(tmp_path)  # nothing lands in the working tree
    mlflow.set_tracking_uri(MLFLOW_URI)
    mlflow.set_experiment("envpin-tests")
    return MLFLOW_URI


def _weights() -> list[Any]:
    np = _need("numpy")
    return [np.linspace(0, 1, 12, dtype="float32").reshape(3, 4)]


def test_a_keras_fit_logs_to_the_mlflow_server(mlflow_uri: str) -> None:
    mlflow = _need("mlflow")
    tf = _need("tensorflow")
    np = _need("numpy")
    from mlflow.tracking import MlflowClient

    from envpin.keras import EnvpinCallback

    x = np.random.RandomState(0).rand(64, 4).astype("float32")
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    callback = EnvpinCallback(seed=5, mlflow=True)
    with mlflow.start_run() as active:
        model.fit(x, x.sum(1), epochs=1, verbose=0, callbacks=[callback])
    assert callback.run is not None
    got = MlflowClient(mlflow_uri).get_run(active.info.run_id)
    assert got.data.params["envpin.fingerprint"] == callback.run.record["fingerprint"]
    assert got.data.params["envpin.seed"] == "5"
    assert got.data.params["envpin.device_class"] == callback.run.record["device_class"]
    assert got.data.tags["envpin.fingerprint"] == callback.run.record["fingerprint"]
    from envpin.probe.golden import weights_digest

    assert got.data.tags["envpin.weights_hash"] == weights_digest(model.get_weights())
    from envpin.probe.trackers import read_mlflow

    record, report = read_mlflow(active.info.run_id, mlflow_uri)
    assert report["fingerprint"] == callback.run.record["fingerprint"]
    # The run's own TensorFlow and Keras settings, read in its process: TF32 and the precision policy.
    runtime = report["tensorflow"]["runtime"]["value"]
    assert runtime["tf32"] == "on" and runtime["keras_precision_policy"] == "float32"
    assert record["end"]["weights_hash"] == got.data.tags["envpin.weights_hash"]


def test_runs_names_a_planted_change_between_two_mlflow_runs(  # type: ignore[no-untyped-def]
    cli, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mlflow = _need("mlflow")
    ids = []
    for threads in (None, "3"):
        if threads:
            monkeypatch.setenv("OMP_NUM_THREADS", threads)
        with mlflow.start_run() as active:
            envpin.track(seed=1, mlflow=True).finish(weights=_weights())
        ids.append(active.info.run_id)
    res = cli("runs", ids[0], ids[1], "--tracking-uri", mlflow_uri, "--format", "json")
    assert res.code == 1, res.stderr
    import json

    out = json.loads(res.stdout)
    assert out["verdict"] == "1 breaking difference"
    [breaking] = [d for d in out["differences"] if d["severity"] == "breaking"]
    assert breaking["key"] == "env.OMP_NUM_THREADS" and breaking["b"] == "3"
    assert out["a"]["tracker"] == "mlflow" and out["weights_hash"]["a"] == out["weights_hash"]["b"]


def test_runs_names_a_mixed_precision_policy_the_script_set(cli, mlflow_uri: str) -> None:  # type: ignore[no-untyped-def]
    """A script that sets Keras's global policy to mixed_float16 computes in half precision: between two tracked
    runs that differ only in it, `envpin runs` names the policy, breaking."""
    mlflow = _need("mlflow")
    keras = _need("keras")
    ids, before = [], keras.mixed_precision.global_policy().name
    try:
        for policy in ("float32", "mixed_float16"):
            keras.mixed_precision.set_global_policy(policy)
            with mlflow.start_run() as active:
                envpin.track(seed=1, mlflow=True).finish(weights=_weights())
            ids.append(active.info.run_id)
    finally:
        keras.mixed_precision.set_global_policy(before)
    res = cli("runs", ids[0], ids[1], "--tracking-uri", mlflow_uri, "--format", "json")
    assert res.code == 1, res.stderr
    import json

    [breaking] = [d for d in json.loads(res.stdout)["differences"] if d["severity"] == "breaking"]
    assert breaking["key"] == "tensorflow.runtime.keras_precision_policy"
    assert (breaking["a"], breaking["b"]) == ("float32", "mixed_float16")


def test_tensorboard_text_and_hparams_read_back_with_tensorboards_reader(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _need("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.backend.event_processing.plugin_event_accumulator import (
        EventAccumulator as PluginAccumulator,
    )

    first = envpin.track(tensorboard=str(tmp_path / "a"))
    first.finish(weights=_weights())
    acc = EventAccumulator(str(tmp_path / "a"), size_guidance={"tensors": 0})
    acc.Reload()
    assert {"envpin/params", "envpin/report", "envpin/run"} <= set(acc.Tags()["tensors"])
    plugins = PluginAccumulator(str(tmp_path / "a"))
    plugins.Reload()
    assert "hparams" in plugins.PluginTagToContent("hparams") or plugins.PluginTagToContent("hparams")

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    envpin.track(tensorboard=str(tmp_path / "b")).finish(weights=_weights())
    res = cli("runs", str(tmp_path / "a"), str(tmp_path / "b"))
    assert res.code == 1, res.stderr
    assert res.stdout.splitlines()[0] == "1 breaking difference"
    assert "env.OMP_NUM_THREADS" in res.stdout and "final weights: identical" in res.stdout
    same = cli("runs", str(tmp_path / "a"), str(tmp_path / "a"))
    assert same.code == 0 and same.stdout.splitlines()[0] == "identical", same.stdout


def test_wandb_offline_config_files_and_artifact(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _need("wandb")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "data"))
    runs = []
    for threads in (None, "3"):
        if threads:
            monkeypatch.setenv("OMP_NUM_THREADS", threads)
        run = envpin.track(seed=2, wandb=True)
        run.finish(weights=_weights())
        runs.append(run)
    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(folders) == 2, list((tmp_path / "wandb").iterdir())
    # W&B 0.31 keeps an offline run's config and artifacts in its transaction log (run-*.wandb, protobuf
    # records that `wandb sync` uploads; no Python reader ships), the files in files/.
    [log] = folders[0].glob("run-*.wandb")
    data = log.read_bytes()
    fingerprints = {r.record["fingerprint"] for r in runs}
    assert b"envpin.fingerprint" in data and any(fp.encode() in data for fp in fingerprints)
    assert b"envpin-environment" in data, "the artifact of type environment"
    from envpin.probe.trackers import read_wandb

    record, _ = read_wandb(str(folders[0]))
    assert record["fingerprint"] in fingerprints and record["end"]["weights_hash"]
    res = cli("runs", str(folders[0]), str(folders[1]))
    assert res.code == 1 and "env.OMP_NUM_THREADS" in res.stdout, res.stdout + res.stderr


def test_runs_refuses_what_is_no_tracked_run(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("runs", str(tmp_path), "not-a-run")
    lines = res.stderr.splitlines()
    assert res.code == 2 and len(lines) == 2 and res.stdout == ""
    assert lines[0].startswith(f"error: {tmp_path} is neither a TensorBoard log folder")
    assert lines[1].startswith("hint: ")


def test_a_requested_tracker_that_is_missing_is_recorded_not_raised() -> None:
    run = track.start(writers=(), skipped=["mlflow: not installed"])
    assert run.record["writers_skipped"] == ["mlflow: not installed"] and run.record["writers"] == []
