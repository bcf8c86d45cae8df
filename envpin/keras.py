"""``envpin.keras.EnvpinCallback``: a Keras callback that tracks a run (envpin.probe.track) during ``model.fit``.

Standard library only until the callback is made (Python 3.6+; it travels into images in envpin.pyz): the
class is combined with Keras's own ``Callback`` (``tf.keras``, else ``keras``) when it is first instantiated,
so importing this module imports neither TensorFlow nor Keras.

    model.fit(x, y, callbacks=[EnvpinCallback(seed=42, mlflow=True, tensorboard="logs/run1")])

At ``on_train_begin`` the start record is logged (and in strict mode a drifted environment raises
envpin.probe.track.DriftError before the first step); at ``on_train_end`` the hash of the final weights.
"""

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, Dict, Optional

    from envpin.probe.track import Run

_BOUND: "Dict[type, type]" = {}


def _keras_callback() -> type:
    """Keras's Callback base class: tf.keras's where TensorFlow is installed (what model.fit of tf.keras
    expects), else standalone Keras's."""
    try:
        import tensorflow as tf

        base = tf.keras.callbacks.Callback  # type: type
    except ImportError:
        import keras

        base = keras.callbacks.Callback
    return base


class EnvpinCallback(object):
    """Tracks the run of a ``model.fit``: the arguments are those of ``envpin.track``."""

    run: "Optional[Run]" = None

    def __new__(cls, *args: "Any", **kwargs: "Any") -> "EnvpinCallback":
        if cls in _BOUND.values():  # the combined class itself (copy.copy, pickling)
            made = object.__new__(cls)  # type: EnvpinCallback
            return made
        if cls not in _BOUND:
            _BOUND[cls] = type(cls.__name__, (cls, _keras_callback()), {"__module__": cls.__module__})
        instance = object.__new__(_BOUND[cls])  # type: EnvpinCallback
        return instance

    def __init__(
        self,
        seed: "Optional[int]" = None,
        *,
        strict: "Optional[bool]" = None,
        lock: "Optional[str]" = None,
        report: "Optional[str]" = None,
        mlflow: "Any" = None,
        tensorboard: "Optional[str]" = None,
        wandb: "Any" = None,
    ) -> None:
        super(EnvpinCallback, self).__init__()  # Keras's Callback (the class __new__ made)
        self._track = {
            "seed": seed,
            "strict": strict,
            "lock": lock,
            "report": report,
            "mlflow": mlflow,
            "tensorboard": tensorboard,
            "wandb": wandb,
        }  # type: Dict[str, Any]
        self.run = None

    def on_train_begin(self, logs: "Any" = None) -> None:
        from envpin import track

        self.run = track(**self._track)

    def on_train_end(self, logs: "Any" = None) -> None:
        if self.run is not None:
            self.run.finish(model=getattr(self, "model", None))
