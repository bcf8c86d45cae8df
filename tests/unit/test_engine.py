"""The engine interface: both engines satisfy it, `auto` is decided in one place and never silently, and the
shared build log reports progress through a callback (the engines themselves: tests/docker)."""

from __future__ import annotations

import inspect
import re
from dataclasses import replace
from pathlib import Path

import pytest

from envpin.environment.lockfile import Image, Lock
from envpin.errors import EngineError, UsageError
from envpin.image import engine as engines
from envpin.image.build import require_bit_identical
from envpin.image.buildlog import BuildLog
from envpin.image.docker import DockerEngine
from envpin.image.engine import Engine, ReproducibleEngine, resolve_engine
from envpin.image.podman import PodmanEngine
from envpin.record import ProgressEvent

PROTOCOL_MEMBERS = ("build", "exists", "inspect", "close")
REPRODUCIBLE_MEMBERS = ("version", "storage_driver", "scratch")


class _Client:
    """Stands in for the SDK client: DockerEngine is built here without a daemon."""

    def close(self) -> None:
        pass


def _signature(fn: object) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("engine", [DockerEngine(_Client()), PodmanEngine()], ids=["docker", "podman"])  # type: ignore[arg-type]
def test_both_engines_satisfy_the_protocol(engine: Engine) -> None:
    assert isinstance(engine, Engine)
    assert isinstance(engine.name, str) and isinstance(engine.bit_identical, bool)
    for member in PROTOCOL_MEMBERS:  # same parameters, kinds and defaults as the interface declares
        assert _signature(getattr(engine, member)) == _signature(getattr(Engine, member))[1:], member


def test_only_podman_is_bit_identical_and_reproducible() -> None:
    docker, podman = DockerEngine(_Client()), PodmanEngine()  # type: ignore[arg-type]
    assert (docker.name, docker.bit_identical) == ("docker", False)
    assert (podman.name, podman.bit_identical) == ("podman", True)
    assert isinstance(podman, ReproducibleEngine) and not isinstance(docker, ReproducibleEngine)
    for member in REPRODUCIBLE_MEMBERS:
        assert _signature(getattr(podman, member)) == _signature(getattr(ReproducibleEngine, member))[1:], member
    assert require_bit_identical(podman) is podman
    with pytest.raises(UsageError, match="`check` rebuilds with podman") as refused:
        require_bit_identical(docker)
    assert refused.value.hint.startswith("add `engine` podman")


def test_the_registry_names_every_engine_once_in_auto_order() -> None:
    assert list(engines.ENGINES) == ["docker", "podman"]


class _Fake:
    def __init__(self, name: str, bit_identical: bool = False) -> None:
        self.name, self.bit_identical = name, bit_identical


def _opener(name: str, refuse: str | None = None):  # type: ignore[no-untyped-def]
    def open_it() -> Engine:
        if refuse:
            raise EngineError(refuse, hint="start it")
        return _Fake(name)  # type: ignore[return-value]

    return open_it


def test_auto_takes_docker_when_it_answers_and_says_nothing() -> None:
    chosen = resolve_engine("auto", environ={}, engines={"docker": _opener("docker"), "podman": _opener("podman")})
    assert chosen.engine.name == "docker" and chosen.fallback is None


def test_auto_with_docker_down_falls_back_to_podman_and_says_why() -> None:
    down = "the Docker engine is not reachable: cannot connect to /var/run/docker.sock: Connection refused"
    chosen = resolve_engine(None, environ={}, engines={"docker": _opener("docker", down), "podman": _opener("podman")})
    assert chosen.engine.name == "podman"
    assert chosen.fallback == f"engine auto chose podman, because docker: {down}"


def test_auto_with_no_engine_is_one_error_naming_the_first() -> None:
    with pytest.raises(EngineError) as failed:
        resolve_engine(
            "auto",
            environ={},
            engines={
                "docker": _opener("docker", "Docker is down"),
                "podman": _opener("podman", "podman is not installed"),
            },
        )
    assert failed.value.message == "no container engine answers: Docker is down"
    assert failed.value.hint == engines.NO_ENGINE_HINT


def test_a_named_engine_is_opened_alone_and_its_error_kept() -> None:
    tried: list[str] = []

    def docker() -> Engine:
        tried.append("docker")
        raise AssertionError("docker was not asked for")

    def podman() -> Engine:
        tried.append("podman")
        raise EngineError("podman is not installed (needed for --engine podman)", hint="install podman")

    with pytest.raises(EngineError, match=r"^podman is not installed"):
        resolve_engine("podman", environ={}, engines={"docker": docker, "podman": podman})
    assert tried == ["podman"]


def test_the_environment_variable_chooses_when_no_engine_is_named() -> None:
    registry = {"docker": _opener("docker"), "podman": _opener("podman")}
    assert resolve_engine(None, environ={"ENVPIN_ENGINE": "podman"}, engines=registry).engine.name == "podman"
    assert resolve_engine("docker", environ={"ENVPIN_ENGINE": "podman"}, engines=registry).engine.name == "docker"


@pytest.mark.parametrize("name", ["kaniko", "Docker", "docker "])
def test_an_unknown_engine_is_a_usage_error(name: str) -> None:
    with pytest.raises(UsageError) as refused:
        resolve_engine(name, environ={})
    assert refused.value.message == f"unknown engine '{name}'"
    assert refused.value.hint == "use `engine` auto, docker or podman"
    with pytest.raises(UsageError, match="unknown engine 'rkt'"):
        resolve_engine(None, environ={"ENVPIN_ENGINE": "rkt"})


# --- a built lock keeps its engine (auto never switches for it) --------------------------------------------------


def _lock(digest: str | None, image_engine: str | None) -> Lock:
    """A lock as built: pinned (or not), with a podman image recorded (or not)."""
    from envpin.environment.plan import make_plan

    locked = Lock.from_plan(make_plan(ngc="20.02", tf="2.1"), {})
    image = None if image_engine is None else Image("sha256:" + "1" * 64, locked.inputs_hash, image_engine, "overlay")
    return replace(locked, base=replace(locked.base, digest=digest), image=image)


PINNED = "sha256:" + "2" * 64
BOTH = {"docker": _opener("docker"), "podman": _opener("podman")}
DOCKER_DOWN = {"docker": _opener("docker", "the Docker engine is not reachable"), "podman": _opener("podman")}
PODMAN_DOWN = {"docker": _opener("docker"), "podman": _opener("podman", "podman is not installed")}


def test_what_a_lock_says_about_its_engine() -> None:
    assert engines.lock_engine(None) is None
    assert engines.lock_engine(_lock(None, None)) is None  # rendered, never built: any engine builds it first
    docker = engines.lock_engine(_lock(PINNED, None), "images/x/envpin.lock")
    assert docker is not None and docker.name == "docker" and docker.why.startswith("images/x/envpin.lock pins its")
    podman = engines.lock_engine(_lock(PINNED, "podman 4.3.1"), "images/x/envpin.lock")
    assert podman == engines.LockedEngine("podman", "images/x/envpin.lock records an image built with podman 4.3.1")


def test_auto_keeps_podman_for_a_podman_lock_even_with_docker_up() -> None:
    locked = engines.lock_engine(_lock(PINNED, "podman 4.3.1"), "L")
    chosen = resolve_engine("auto", environ={}, engines=BOTH, locked=locked)
    assert chosen.engine.name == "podman"
    assert chosen.fallback == "engine auto chose podman, because L records an image built with podman 4.3.1"


def test_auto_refuses_to_leave_the_lock_s_engine() -> None:
    podman_lock = engines.lock_engine(_lock(PINNED, "podman 4.3.1"), "L")
    with pytest.raises(EngineError) as refused:
        resolve_engine("auto", environ={}, engines=PODMAN_DOWN, locked=podman_lock)
    assert refused.value.message == (
        "L records an image built with podman 4.3.1, and podman does not answer here: "
        "podman is not installed; auto does not switch engines for a built lock"
    )
    assert refused.value.hint == "start it; or build with another engine on purpose: `engine` docker"
    docker_lock = engines.lock_engine(_lock(PINNED, None), "L")  # and vice versa
    with pytest.raises(
        EngineError,
        match=r"^L pins its base and records no reproducible image .*, and docker does "
        r"not answer here: the Docker engine is not reachable; auto does not switch",
    ):
        resolve_engine(None, environ={}, engines=DOCKER_DOWN, locked=docker_lock)
    # Docker for a Docker lock says nothing; a named engine is the user's choice.
    assert resolve_engine("auto", environ={}, engines=BOTH, locked=docker_lock).fallback is None
    assert resolve_engine("docker", environ={}, engines=BOTH, locked=podman_lock).engine.name == "docker"
    # A lock no build completed yet: auto's usual order, the fallback said.
    chosen = resolve_engine("auto", environ={}, engines=DOCKER_DOWN, locked=engines.lock_engine(_lock(None, None)))
    assert chosen.engine.name == "podman" and chosen.fallback is not None


def test_the_build_log_reports_steps_keeps_the_tail_and_writes_the_file(tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    log_path = tmp_path / "builds" / "x.log"
    step = re.compile(r"^STEP (\d+)/(\d+): (.*)$")
    with BuildLog(log_path, "building t:1", step, events.append) as log:
        log.add("STEP 1/3: FROM base\n")
        log.add("STEP 2/3: COPY requirements.lock /opt/envpin/requirements.lock\n--> Using cache abc\n")
        for n in range(30):
            log.add(f"line {n}")
        error = log.failure("the podman build failed", "boom")
    # "STEP 2/3" begins the second step: one of three done
    assert [(e.step, e.completed, e.total, e.done) for e in events] == [
        (None, None, None, False),
        ("FROM base", 0, 3, False),
        ("COPY requirements.lock /opt/envpin/requirements.lock", 1, 3, False),
        (None, None, None, True),
    ]
    assert {e.unit for e in events if e.total} == {"steps"}
    assert log.current == "step 2/3 (COPY requirements.lock /opt/envpin/requirements.lock)"  # as errors name it
    assert {e.title for e in events} == {"building t:1"}
    assert error.message.startswith("the podman build failed at step 2/3 (COPY requirements.lock")
    assert error.message.splitlines()[1:] == [f"  | line {n}" for n in range(10, 30)]
    assert error.hint == f"full log: {log_path}"
    text = log_path.read_text()
    assert text.startswith("STEP 1/3: FROM base\n") and text.endswith("line 29\n")
    outcome = log.outcome("sha256:abc", "t:1")
    assert outcome.cached and outcome.log == log_path and outcome.log_tail[-1] == "line 29"


def test_a_library_build_log_without_a_callback_reports_to_nobody(tmp_path: Path) -> None:
    with BuildLog(tmp_path / "x.log", "building t:1", re.compile(r"^Step (\d+)/(\d+) : (.*)$")) as log:
        log.add("Step 1/2 : FROM base")
        log.add("Step 2/2 : RUN true")
    assert log.current == "step 2/2 (RUN true)"
    assert not log.outcome("sha256:abc", "t:1").cached


def test_progress_feed_opens_one_display_per_operation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI side: events become Progress displays (plain lines when stderr is no terminal; with -v every
    change, not only a unit of work that ended)."""
    from envpin.views import console

    seen: list[str] = []
    monkeypatch.setattr(console, "say", lambda _console, text: seen.append(text))
    monkeypatch.setitem(console.settings, "verbose", True)
    with console.progress_feed() as progress:
        progress(ProgressEvent("building a"))
        progress(ProgressEvent("building a", "FROM x", completed=0, total=2, unit="steps"))
        progress(ProgressEvent("building a", done=True))
        progress(ProgressEvent("building b", "pulling"))
    assert seen == ["building a: 0/2 steps; FROM x; 0 s elapsed", "building b: pulling; 0 s elapsed"]


def test_build_prints_its_tag_or_with_format_json_what_it_did(capsys: pytest.CaptureFixture[str]) -> None:
    """`envpin build`: the tag on stdout (what a script takes), or with --format json the image, the engine,
    the lock and what to know; the summary line stays on stderr either way."""
    import io
    import json

    from rich.console import Console

    from envpin.environment.plan import make_plan
    from envpin.image.build import BuildResult, image_tag
    from envpin.views import environment

    plan = make_plan(ngc="20.02-tf2-py3", base_digest="sha256:" + "2" * 64)
    res = BuildResult(
        plan, Path("images/x"), "sha256:" + "3" * 64, image_tag(plan), False, 12.34, "podman", warnings=("w",)
    )
    for as_json in (False, True):
        out, err = io.StringIO(), io.StringIO()
        environment.build_outcome(res, as_json, Console(file=out), Console(file=err, width=200))
        assert err.getvalue().startswith(f"built with podman: {res.tag} (sha256:333333333333) in 12.3 s;")
        assert "warning: w" in err.getvalue()
        printed = out.getvalue() + capsys.readouterr().out  # the JSON is written on stdout itself
        if not as_json:
            assert printed == res.tag + "\n"
            continue
        data = json.loads(printed)
        assert (data["tag"], data["engine"], data["lock"], data["up_to_date"]) == (
            res.tag, "podman", "images/x/envpin.lock", False
        )  # fmt: skip
        assert data["from"].endswith("@sha256:" + "2" * 64) and data["inputs_hash"] == plan.inputs_hash
        assert (data["seconds"], data["warnings"], data["problem"]) == (12.3, ["w"], None)
