"""Where a tracked run goes, and where `envpin runs` reads it back: MLflow, TensorBoard and Weights & Biases.

Standard library only at import time (Python 3.6+); each writer imports its tracker's library when it is made,
so envpin depends on none of them (the `track` extra installs all three). What each one keeps:

* MLflow: the start record as parameters ``envpin.*`` and tags (the fingerprint, the lock's verdict, at the end
  the weights hash), the probe report and the run record as artifacts under ``envpin/``.
* TensorBoard: an event file with text summaries (``envpin/params`` as a Markdown table, ``envpin/report`` and
  ``envpin/run`` as JSON) and an hparams summary of the parameters.
* W&B: the parameters in the run's config, the report and the record as files of the run and as an artifact
  of type ``environment`` (offline mode where there is no server: everything stays in the run's folder).
"""

import json
import os
import tempfile

from envpin.probe.track import PREFIX, RECORD_NAME, REPORT_NAME

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

    from envpin.probe.track import Run

#: Tags MLflow keeps besides the parameters (searchable, and changeable at the end of the run).
TAGS = ("fingerprint", "verify", "device_class")
ARTIFACT_DIR = "envpin"
TEXT_TAGS = ("envpin/params", "envpin/report", "envpin/run")


def _dump(data: "Any") -> str:
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def available(name: str) -> bool:
    """Whether the tracker library `name` (mlflow, tensorboard, wandb) can be imported, without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class MLflowWriter(object):
    """Logs to MLflow run `run_id`, else the active run, else a run it starts (and ends with the training)."""

    def __init__(self, run_id: "Optional[str]" = None, tracking_uri: "Optional[str]" = None) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        self._mlflow = mlflow
        self.client = MlflowClient(tracking_uri)
        self.run_id = run_id
        self._own = False

    def start(self, run: "Run") -> None:
        from mlflow.entities import Param, RunTag

        if self.run_id is None:
            active = self._mlflow.active_run()
            if active is None:
                active = self._mlflow.start_run()
                self._own = True
            self.run_id = active.info.run_id
        params = run.params
        tags = [RunTag(PREFIX + t, params[PREFIX + t]) for t in TAGS if PREFIX + t in params]
        self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in params.items()], tags=tags)
        self.client.log_text(self.run_id, _dump(run.report), ARTIFACT_DIR + "/" + REPORT_NAME)
        self.client.log_text(self.run_id, _dump(run.record), ARTIFACT_DIR + "/" + RECORD_NAME)

    def end(self, run: "Run") -> None:
        assert self.run_id is not None, "end() after start()"
        digest = run.record["end"]["weights_hash"]
        if digest:
            self.client.set_tag(self.run_id, PREFIX + "weights_hash", digest)
        self.client.log_text(self.run_id, _dump(run.record), ARTIFACT_DIR + "/" + RECORD_NAME)
        if self._own:
            self._mlflow.end_run()


class TensorBoardWriter(object):
    """Writes an event file into `logdir` with TensorBoard's own writer (no TensorFlow needed)."""

    def __init__(self, logdir: str) -> None:
        # Loaded before the run's probe: TensorBoard's writer loads TensorFlow where it is installed (lazily, on
        # first use), and importing TensorFlow sets OpenMP variables (KMP_*) that the probe records.
        from tensorboard.compat import tf

        getattr(tf, "io")  # noqa: B009 (the attribute access is what loads it)

        self.logdir = str(logdir)
        self._writer = None  # type: Any

    def _add(self, summary: "Any", step: int) -> None:
        import time

        from tensorboard.compat.proto import event_pb2

        self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def start(self, run: "Run") -> None:
        from tensorboard.plugins.hparams.summary_v2 import hparams_pb
        from tensorboard.plugins.text.summary_v2 import text_pb
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._writer = EventFileWriter(self.logdir, filename_suffix=".envpin")
        params = run.params
        table = "| parameter | value |\n| --- | --- |\n" + "".join(
            "| %s | `%s` |\n" % (k, v.replace("|", "\\|")) for k, v in params.items()
        )
        self._add(text_pb("envpin/params", table), 0)
        self._add(text_pb("envpin/report", _dump(run.report)), 0)
        self._add(text_pb("envpin/run", _dump(run.record)), 0)
        self._add(hparams_pb(params, trial_id=run.record["fingerprint"]), 0)
        self._writer.flush()

    def end(self, run: "Run") -> None:
        from tensorboard.plugins.text.summary_v2 import text_pb

        self._add(text_pb("envpin/run", _dump(run.record)), 1)
        self._writer.close()


class WandbWriter(object):
    """Logs to W&B run `run`, else the active run, else an offline run it starts (and finishes)."""

    def __init__(self, run: "Any" = None, **init: "Any") -> None:
        import wandb

        self._wandb = wandb
        self.run = run
        self._init = init
        self._own = False

    def _files(self, run: "Run") -> "List[str]":
        paths = []
        for name, data in ((REPORT_NAME, run.report), (RECORD_NAME, run.record)):
            path = os.path.join(self.run.dir, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(_dump(data))
            paths.append(path)
        return paths

    def start(self, run: "Run") -> None:
        if self.run is None:
            self.run = self._wandb.run
        if self.run is None:
            self.run = self._wandb.init(**dict({"mode": "offline"}, **self._init))
            self._own = True
        self.run.config.update(run.params, allow_val_change=True)
        paths = self._files(run)
        artifact = self._wandb.Artifact("envpin-environment", type="environment")
        for path in paths:
            artifact.add_file(path)
        self.run.log_artifact(artifact)

    def end(self, run: "Run") -> None:
        digest = run.record["end"]["weights_hash"]
        if digest:
            self.run.summary[PREFIX + "weights_hash"] = digest
        self._files(run)
        if self._own:
            self.run.finish()


def writers_for(
    mlflow: "Any" = None, tensorboard: "Optional[str]" = None, wandb: "Any" = None
) -> "Tuple[List[Any], List[str]]":
    """The writers a run asked for, and why any was left out. mlflow: True (active run), a run id, or a
    writer; None: the active MLflow run if the script imported mlflow and has one. tensorboard: a log folder.
    wandb: True, a wandb run, or a writer; None: the active W&B run if the script has one."""
    import sys

    out, skipped = [], []  # type: Tuple[List[Any], List[str]]
    if mlflow is None and "mlflow" in sys.modules and sys.modules["mlflow"].active_run() is not None:
        mlflow = True
    if mlflow is not None and mlflow is not False:
        if not isinstance(mlflow, (bool, str)):
            out.append(mlflow)
        elif available("mlflow"):
            out.append(MLflowWriter(mlflow if isinstance(mlflow, str) else None))
        else:
            skipped.append("mlflow: not installed (pip install 'envpin[track]')")
    if tensorboard:
        if available("tensorboard"):
            out.append(TensorBoardWriter(tensorboard))
        else:
            skipped.append("tensorboard: not installed (pip install 'envpin[track]')")
    if wandb is None and "wandb" in sys.modules and getattr(sys.modules["wandb"], "run", None) is not None:
        wandb = True
    if wandb is not None and wandb is not False:
        if isinstance(wandb, WandbWriter):
            out.append(wandb)
        elif available("wandb"):
            out.append(WandbWriter(None if wandb is True else wandb))
        else:
            skipped.append("wandb: not installed (pip install 'envpin[track]')")
    return out, skipped


# --------------------------------------------------------------------------------------- reading back


def read_mlflow(run_id: str, tracking_uri: "Optional[str]" = None) -> "Tuple[Dict[str, Any], Dict[str, Any]]":
    """(run record, probe report) of an MLflow run, downloaded through the MLflow client."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    with tempfile.TemporaryDirectory(prefix="envpin-runs-") as tmp:
        folder = client.download_artifacts(run_id, ARTIFACT_DIR, tmp)
        return _load(os.path.join(folder, RECORD_NAME)), _load(os.path.join(folder, REPORT_NAME))


def is_tensorboard(folder: str) -> bool:
    return os.path.isdir(folder) and any(n.startswith("events.out.tfevents.") for n in os.listdir(folder))


def read_tensorboard(logdir: str) -> "Tuple[Dict[str, Any], Dict[str, Any]]":
    """(run record, probe report) from the text summaries in `logdir`, read with TensorBoard's EventAccumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(logdir, size_guidance={"tensors": 0})
    acc.Reload()
    found = set(acc.Tags().get("tensors", ()))
    texts = {}
    for tag in ("envpin/run", "envpin/report"):
        if tag not in found:
            raise ValueError(
                "%s holds no %s text summary (was the run tracked with tensorboard=%r?)" % (logdir, tag, logdir)
            )
        last = acc.Tensors(tag)[-1]
        value = tensor_util.make_ndarray(last.tensor_proto).reshape(-1)[0]
        texts[tag] = json.loads(value.decode("utf-8") if isinstance(value, bytes) else str(value))
    return texts["envpin/run"], texts["envpin/report"]


def wandb_files(folder: str) -> "Optional[str]":
    """The files folder of a W&B run folder (an offline-run-* folder or its files/ folder), or None."""
    for candidate in (os.path.join(folder, "files"), folder):
        if os.path.isfile(os.path.join(candidate, REPORT_NAME)):
            return candidate
    return None


def read_wandb(folder: str) -> "Tuple[Dict[str, Any], Dict[str, Any]]":
    """(run record, probe report) from a W&B run folder (offline mode keeps the run's files there)."""
    files = wandb_files(folder)
    if files is None:
        raise ValueError("%s holds no %s (was the run tracked with envpin?)" % (folder, REPORT_NAME))
    return _load(os.path.join(files, RECORD_NAME)), _load(os.path.join(files, REPORT_NAME))


def _load(path: str) -> "Dict[str, Any]":
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise ValueError("%s is not a JSON object" % path)
    return data
