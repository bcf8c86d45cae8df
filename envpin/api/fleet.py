"""`envpin fleet report`, `fleet manifest`, `fleet probe`: many machines' reports, collected and compared."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envpin.errors import UsageError, param
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.fleet.aggregate import FleetResult
    from envpin.fleet.multiworker import MultiWorker
    from envpin.fleet.slurm import NodeOutcome
    from envpin.record import ProgressCallback


@dataclass(frozen=True, slots=True)
class FleetReport(Value):
    """`envpin fleet report`: the fleet comparison, and where its HTML page goes (`html`, checked; the caller
    writes envpin.views.fleet.html_page(result) there)."""

    result: FleetResult
    html: Path | None

    @property
    def exit_code(self) -> int:
        return int(self.result.exit_code)


def fleet_report(
    paths: list[Path], html: Path | None = None, *, expect: int | None = None, expect_nodes: Path | None = None
) -> FleetReport:
    """`envpin fleet report`: every node's report (files, folders, Slurm error files, collected Kubernetes
    output) compared at once, with the verdict of any multi-worker self-test among them (`fleet selftest`).

    `html` is where the caller will write the HTML page (the library returns data; envpin.views.fleet draws
    the page): it is checked here, before any report is read, so a path that cannot take the page, or one
    that is among the inputs, fails at once. `expect` (a node count) or `expect_nodes` (a file naming one
    node per line) says which fleet the inputs should cover: a node that left no file at all is then
    missing, and the verdict failed, rather than never heard of. UsageError when both are given or `expect`
    is below 1."""
    from envpin.files.write import check_output_file
    from envpin.fleet import aggregate, inputs

    if expect is not None and expect_nodes is not None:
        raise UsageError(
            f"{param('expect')} and {param('expect_nodes')} exclude each other",
            hint=f"{param('expect')} N counts the nodes, {param('expect_nodes')} FILE names them: give one",
        )
    if expect is not None and expect < 1:
        raise UsageError(
            f"{param('expect')} must be at least 1, not {expect}",
            hint=f"give the number of nodes the fleet has, e.g. {param('expect')} 64",
        )
    if html is not None:
        check_output_file(html, "html")
        clash = inputs.output_clash(paths, html)
        if clash is not None:
            raise UsageError(f"{param('html')} {html} {clash}", hint="write the page elsewhere, or name it *.html")
    expected = None
    if expect_nodes is not None:
        expected = aggregate.Expected.nodes(inputs.read_node_list(expect_nodes), str(expect_nodes))
    elif expect is not None:
        expected = aggregate.Expected(expect)
    selftests: list[MultiWorker] = []
    entries = inputs.read(paths, aggregate.Reducer(), selftests)  # each report reduced as read (bounded memory)
    result = aggregate.aggregate(
        [(e.name, e.item) for e in entries], [e.source for e in entries], expected, multiworker=selftests
    )
    return FleetReport(result, html)


@dataclass(frozen=True, slots=True)
class FleetManifest(Value):
    text: str
    written: Path | None
    warnings: list[str]


def fleet_manifest(
    *,
    kubernetes: bool,
    image: str | None = None,
    namespace: str = "default",
    out: Path | None = None,
    selftest: bool | None = None,
    quick: bool = False,
    workers: int | None = None,
    runs: int | None = None,
) -> FleetManifest:
    """`envpin fleet manifest --kubernetes`: the DaemonSet (and its payload ConfigMap) that probes every GPU
    node, or with `workers` the multi-worker self-test's indexed Job (and its headless Service) over that many
    GPU nodes; written atomically to `out`, else returned for stdout. Warnings: an image not pinned by digest."""
    from envpin.environment.payload import payload
    from envpin.files.write import atomic_write, check_output_file
    from envpin.fleet import kubernetes as kube
    from envpin.fleet import multiworker

    if not kubernetes:
        raise UsageError(
            f"say which manifest to write: {param('kubernetes')}",
            hint=f"{param('kubernetes', command='fleet manifest')} {param('image')} REGISTRY/REPOSITORY:TAG@sha256:...",
        )
    if workers is None and runs is not None:
        raise UsageError(f"{param('runs')} counts the runs of {param('workers')}", hint=f"add {param('workers')} N")
    if workers is not None:
        if workers < 2:
            raise UsageError(
                f"{param('workers')} must be at least 2, not {workers}",
                hint="one node's own determinism is the probe's self-test (leave the option out)",
            )
        if selftest is not None or quick:
            raise UsageError(
                f"{param('workers')} writes the multi-worker self-test, whose pods probe without the self-test",
                hint=f"drop {param('selftest')}/{param('quick')}",
            )
        if runs is not None and not 1 <= runs <= multiworker.MAX_RUNS:
            raise UsageError(
                f"{param('runs')} must be from 1 to {multiworker.MAX_RUNS}, not {runs}", hint="the default is 2"
            )
    if out is not None:
        check_output_file(out, "out")
    warnings = []
    if image is None:
        image = _newest_ngc_image()
        warnings.append(f"no {param('image')} given: using {image}, the newest NGC TensorFlow image in the catalog")
    if workers is not None:
        manifest = kube.render_selftest(
            image, namespace, payload(), workers, multiworker.DEFAULT_RUNS if runs is None else runs
        )
    else:
        manifest = kube.render(image, namespace, payload(), selftest=selftest, quick=quick)
    if not manifest.pinned:
        warnings.append(
            f"{image} is not pinned by digest: nodes that pull it at different times may run "
            "different images (add @sha256:..., e.g. from 'docker buildx imagetools inspect')"
        )
    if out is not None:
        atomic_write(out, manifest.text.encode("utf-8"), make_parents=False)
    return FleetManifest(manifest.text, out, warnings)


def _newest_ngc_image() -> str:
    """The newest tf2 image of the catalog, by digest when the catalog file records the one nvcr.io serves."""
    from envpin.environment.plan import _known_digest
    from envpin.knowledge import catalog

    entry = max((e for e in catalog.load().entries() if e.flavor.startswith("tf2")), key=lambda e: e.release)
    digest = _known_digest(entry, None)
    return f"{entry.image}@{digest}" if digest else entry.image


@dataclass(frozen=True, slots=True)
class FleetProbe(Value):
    """`envpin fleet probe --slurm`: where each node's report (or error) went, and the fleet comparison of
    them all (envpin.fleet.aggregate: the same classes, outliers and golden hashes as `fleet report`)."""

    job_id: str | None
    partition: str
    out: Path
    outcomes: list[NodeOutcome]  # one per node, none dropped
    result: FleetResult

    @property
    def exit_code(self) -> int:
        """0: every node probed and consistent; 1: a node failed or timed out, or a breaking difference."""
        return int(self.result.exit_code)

    def to_json(self) -> dict[str, object]:
        """What `fleet probe --format json` prints: the job, where each node's report or error went, and the
        fleet result `fleet report --format json` gives for the folder (under "fleet")."""
        return _launched_json(self.job_id, self.partition, self.out, self.outcomes, self.result)


def _launched_json(
    job_id: str | None, partition: str, out: Path, outcomes: list[NodeOutcome], result: FleetResult
) -> dict[str, object]:
    return {
        "job_id": job_id,
        "partition": partition,
        "out": str(out),
        "nodes": [
            {
                "node": o.node,
                "status": o.status,
                "report": None if o.report is None else str(o.report),
                "error": o.error,
            }
            for o in outcomes
        ],
        "fleet": result.to_json(),
    }


def probe_fleet(
    *,
    slurm: bool = False,
    nodes: int | None = None,
    partition: str | None = None,
    image: str | None = None,
    runtime: str | None = None,
    out: Path | None = None,
    timeout: int | None = None,
    slurm_args: list[str] | None = None,
    progress: ProgressCallback | None = None,
    selftest: bool | None = None,
    quick: bool = False,
) -> FleetProbe:
    """`envpin fleet probe --slurm`: the probe on every node (or `nodes` of them) of a Slurm partition,
    one report per node in `out` (./fleet-reports), compared by fingerprint."""
    from envpin.fleet import slurm as slurm_backend

    if not slurm:
        raise UsageError("fleet probe needs to know how to reach the nodes", hint=f"add {param('slurm')}")
    if runtime is not None and image is None:
        runtime_, image_ = param("runtime"), param("image")
        raise UsageError(f"{runtime_} chooses how {image_} runs", hint=f"add {image_} IMAGE, or drop {runtime_}")
    target = out or Path("fleet-reports")
    job_id, used, outcomes = slurm_backend.probe(
        target,
        nodes=nodes,
        partition=partition,
        image=image,
        runtime=runtime or "apptainer",
        timeout=slurm_backend.DEFAULT_TIMEOUT_S if timeout is None else timeout,
        slurm_args=slurm_args or (),
        progress=progress,
        probe_args=_probe_args(selftest, quick),
    )
    return FleetProbe(job_id, used, target, list(outcomes), slurm_backend.fleet_result(outcomes))


def _probe_args(selftest: bool | None, quick: bool) -> list[str]:
    """The probe's own command line on each node (envpin.pyz's options, not envpin's): the self-test where
    the nodes' Python has TensorFlow unless `selftest` says otherwise."""
    chosen = [] if selftest is None else ["--selftest"] if selftest else ["--no-selftest"]
    return chosen + (["--quick"] if quick else [])


@dataclass(frozen=True, slots=True)
class FleetSelftest(Value):
    """`envpin fleet selftest --slurm`: each node's probe report (or error) and its MultiWorkerMirroredStrategy
    worker, the verdict across the workers (`selftest`, also written to out/_fleet-selftest.json), and the
    fleet comparison of the nodes with it (what `envpin fleet report out` shows again)."""

    job_id: str | None
    partition: str
    out: Path
    outcomes: list[NodeOutcome]
    selftest: MultiWorker
    result: FleetResult

    @property
    def exit_code(self) -> int:
        """0: every worker ran, all agree and repeat, and the nodes are consistent; 1: otherwise."""
        return int(self.result.exit_code)

    def to_json(self) -> dict[str, object]:
        """What `fleet selftest --format json` prints: as `fleet probe`'s, the workers' verdict in the fleet
        result's "multiworker"."""
        return _launched_json(self.job_id, self.partition, self.out, self.outcomes, self.result)


def fleet_selftest(
    *,
    slurm: bool = False,
    nodes: int | None = None,
    partition: str | None = None,
    python: str | None = None,
    runs: int | None = None,
    steps: int | None = None,
    port_base: int | None = None,
    out: Path | None = None,
    timeout: int | None = None,
    slurm_args: list[str] | None = None,
    progress: ProgressCallback | None = None,
) -> FleetSelftest:
    """`envpin fleet selftest --slurm`: the multi-worker self-test (MultiWorkerMirroredStrategy, RING) across
    `nodes` (2) nodes of a Slurm partition, one worker per node, `runs` (2) times; each node is probed too.
    `python` is the interpreter with TensorFlow on the nodes (python3 from their PATH). Writes `out`
    (./fleet-selftest): <node>.json or <node>.error.txt and _fleet-selftest.json."""
    from envpin.fleet import multiworker
    from envpin.fleet import slurm as slurm_backend

    if not slurm:
        raise UsageError(
            "fleet selftest needs to know how to reach the nodes",
            hint=f"add {param('slurm')}; on Kubernetes it is an indexed Job: "
            f"{param('workers', command='fleet manifest')} N",
        )
    target = out or Path("fleet-selftest")
    job_id, used, outcomes, verdict = slurm_backend.selftest(
        target,
        nodes=slurm_backend.SELFTEST_NODES if nodes is None else nodes,
        partition=partition,
        python=python or "python3",
        runs=multiworker.DEFAULT_RUNS if runs is None else runs,
        steps=steps,
        port_base=port_base,
        timeout=slurm_backend.SELFTEST_TIMEOUT_S if timeout is None else timeout,
        slurm_args=slurm_args or (),
        progress=progress,
    )
    fleet = slurm_backend.fleet_result(outcomes, multiworker=(verdict,))
    return FleetSelftest(job_id, used, target, list(outcomes), verdict, fleet)
