"""Building through Debian's daemonless podman/buildah, the engine that can give bit-identical images.

Docker 20.10's classic builder stamps the build time into every layer and the config; buildah's
``--timestamp`` fixes both (and every file's mtime in the layers), so the same context on the same base
gives the same image ID on every machine. What still varies is named in docs/reproducible.md: the engine
version (buildah writes ``io.buildah.version`` into the config) and the storage driver (overlay records
``/run`` in RUN layers, vfs does not). The lock records both beside the image ID.

The podman CLI is the interface (no Python binding ships with Debian's podman 4.3).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envpin.errors import EngineError, param
from envpin.image.buildlog import BuildLog
from envpin.image.model import BuildContext, BuildOutcome, ImageFacts
from envpin.record import ProgressCallback, Value

_STEP = re.compile(r"^STEP (\d+)/(\d+): (.*)$")
#: Mode and owner every build-context file gets, whatever the checkout's umask or the user.
CONTEXT_FILE_MODE = 0o644
CONTEXT_DIR_MODE = 0o755
FIX_PODMAN = "install podman (`apt-get install podman buildah`, or `bash scripts/services.sh install`)"


@dataclass(frozen=True, slots=True)
class Store(Value):
    """A podman storage root; None fields mean podman's configured default store."""

    root: Path | None = None
    runroot: Path | None = None
    driver: str | None = None

    def args(self) -> list[str]:
        out: list[str] = []
        if self.root is not None:
            out += ["--root", str(self.root)]
        if self.runroot is not None:
            out += ["--runroot", str(self.runroot)]
        if self.driver:
            out += ["--storage-driver", self.driver]
        return out


DEFAULT_STORE = Store()


def binary() -> str:
    """The podman executable, or EngineError saying how to get it."""
    found = shutil.which("podman")
    if not found:
        raise EngineError(f"podman is not installed (needed for {param('engine')} podman)", hint=FIX_PODMAN)
    return found


def _run(args: list[str], store: Store = DEFAULT_STORE, timeout: float = 120) -> str:
    cmd = [binary(), *store.args(), *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"podman {args[0]} failed: {exc}", hint=FIX_PODMAN) from exc
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineError(
            f"podman {' '.join(args[:2])} failed: {detail}",
            hint="run `podman info` to see what podman cannot do on this machine",
        )
    return done.stdout


def version() -> str:
    """'podman 4.3.1': recorded in the lock, because buildah stamps its own version into the image."""
    return "podman " + _run(["version", "--format", "{{.Client.Version}}"]).strip()


def storage_driver(store: Store = DEFAULT_STORE) -> str:
    """The storage driver of `store` ('overlay', 'vfs', ...): RUN layers differ between drivers."""
    return store.driver or _run(["info", "--format", "{{.Store.GraphDriverName}}"], store).strip()


def image_exists(image: str, store: Store = DEFAULT_STORE) -> bool:
    try:
        cmd = [binary(), *store.args(), "image", "exists", image]
        return subprocess.run(cmd, capture_output=True, timeout=60, check=False).returncode == 0
    except (EngineError, OSError, subprocess.TimeoutExpired):
        return False


def inspect(image: str, store: Store = DEFAULT_STORE) -> ImageFacts:
    """Image ID, layer digests (uncompressed, as the config names them) and the step behind each layer."""
    data: list[dict[str, Any]] = json.loads(_run(["image", "inspect", image], store))
    info = data[0]
    layers = tuple(info.get("RootFS", {}).get("Layers") or ())
    history = [h for h in info.get("History") or [] if not h.get("empty_layer")]
    steps = [_step_text(h) for h in history]
    # Layers a history does not describe (an imported base has no history) belong to the base.
    steps = ["base image"] * (len(layers) - len(steps)) + steps[-len(layers) :] if layers else []
    image_id = info["Id"] if info["Id"].startswith("sha256:") else "sha256:" + info["Id"]
    return ImageFacts(image_id, layers, tuple(steps))


def _step_text(entry: dict[str, Any]) -> str:
    text = str(entry.get("created_by") or entry.get("comment") or "base image")
    text = text.replace("/bin/sh -c #(nop) ", "").replace("/bin/sh -c ", "RUN ")
    return re.sub(r"\s+", " ", text).strip()[:120]


def write_context(files: dict[str, bytes], dest: Path, epoch: int) -> None:
    """The build context from rendered bytes, not from the checkout: fixed modes and mtimes, no stray files.

    A checkout made with umask 077 has 0600 files, and COPY keeps modes; a file the .dockerignore would
    drop never reaches the context at all."""
    for rel, data in sorted(files.items()):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, CONTEXT_FILE_MODE)
        os.utime(path, (epoch, epoch))
    for folder in sorted({p for rel in files for p in (dest / rel).parents if dest in p.parents or p == dest}):
        os.chmod(folder, CONTEXT_DIR_MODE)
        os.utime(folder, (epoch, epoch))


@contextlib.contextmanager
def staged_context(files: dict[str, bytes], epoch: int, under: Path) -> Iterator[Path]:
    """A normalised build context in a temporary folder under `under`, removed afterwards."""
    under.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="context-", dir=under) as tmp:
        dest = Path(tmp) / "context"
        dest.mkdir()
        write_context(files, dest, epoch)
        yield dest


@contextlib.contextmanager
def scratch_store(under: Path) -> Iterator[Store]:
    """A fresh, empty storage root (same driver as the default store) for `build --check`."""
    driver = storage_driver()
    under.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="scratch-store-", dir=under))
    run = Path(tempfile.mkdtemp(prefix="envpin-run-"))  # podman refuses a runroot over 50 characters
    store = Store(tmp / "root", run, driver)
    try:
        yield store
    finally:
        with contextlib.suppress(EngineError, OSError, subprocess.SubprocessError):
            subprocess.run(
                [binary(), *store.args(), "system", "reset", "--force"], capture_output=True, timeout=300, check=False
            )
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)


def _build(
    context: Path,
    tag: str,
    log_path: Path,
    *,
    epoch: int,
    store: Store = DEFAULT_STORE,
    no_cache: bool = False,
    pull: bool = False,
    progress: ProgressCallback | None = None,
) -> BuildOutcome:
    """Run `podman build` on a staged context with the fixed timestamp, streaming its log."""
    iid = context.parent / "iid"
    cmd = [
        binary(),
        *store.args(),
        "build",
        "--timestamp",
        str(epoch),  # config, history and every file in the layers
        "--format",
        "oci",  # not whatever containers.conf prefers
        "--layers",
        "--pull=always" if pull else "--pull=missing",
        "--iidfile",
        str(iid),
        "--tag",
        tag,
        "--file",
        str(context / "Dockerfile"),
    ]
    if no_cache:
        cmd.append("--no-cache")
    cmd.append(str(context))
    with BuildLog(log_path, f"building {tag} (podman)", _STEP, progress) as log:
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
            assert proc.stdout is not None
            with proc.stdout:
                for line in proc.stdout:
                    log.add(line)
            rc = proc.wait()
        except KeyboardInterrupt:
            log.save("interrupted\n")
            raise
        except OSError as exc:
            raise EngineError(f"could not start podman: {exc}", hint=FIX_PODMAN) from exc
        if rc != 0:
            raise log.failure("the podman build failed", log.tail[-1] if log.tail else f"exit {rc}")
        log.save()
    image_id = iid.read_text().strip()
    return log.outcome(image_id if image_id.startswith("sha256:") else "sha256:" + image_id, tag)


class PodmanEngine:
    """envpin.image.engine.ReproducibleEngine over one podman store (the configured default, or a scratch one).

    Builds stage the rendered files under `work` (default <state>/podman), never the checkout itself."""

    name = "podman"
    bit_identical = True

    def __init__(self, store: Store = DEFAULT_STORE, work: Path | None = None) -> None:
        self.store = store
        self.work = work
        self._version: str | None = None

    @classmethod
    def open(cls) -> PodmanEngine:
        """podman installed and answering (no daemon to start); EngineError saying how to get it otherwise."""
        engine = cls()
        engine.version()
        return engine

    def close(self) -> None:
        """Nothing to release: every command is its own process."""

    def version(self) -> str:
        if self._version is None:
            self._version = version()
        return self._version

    def storage_driver(self) -> str:
        return storage_driver(self.store)

    def _work(self) -> Path:
        from envpin.image import buildstate

        return self.work if self.work is not None else buildstate.state_dir() / "podman"

    def build(
        self,
        context: BuildContext,
        tag: str,
        log_path: Path,
        *,
        no_cache: bool = False,
        pull: bool = False,
        progress: ProgressCallback | None = None,
    ) -> BuildOutcome:
        """Build from the rendered bytes, staged with fixed modes and mtimes, with the plan's timestamp."""
        with staged_context(context.files, context.epoch, self._work()) as staged:
            return _build(
                staged,
                tag,
                log_path,
                epoch=context.epoch,
                store=self.store,
                no_cache=no_cache,
                pull=pull,
                progress=progress,
            )

    def exists(self, image: str) -> bool:
        return image_exists(image, self.store)

    def inspect(self, image: str) -> ImageFacts:
        return inspect(image, self.store)

    @contextlib.contextmanager
    def scratch(self, under: Path) -> Iterator[PodmanEngine]:
        """This engine over a fresh, empty store (`build --check`), reset and removed afterwards."""
        with scratch_store(under) as store:
            engine = PodmanEngine(store, under)
            engine._version = self._version
            yield engine
