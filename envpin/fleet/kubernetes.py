"""The Kubernetes manifests: the DaemonSet that probes every GPU node (``envpin fleet manifest --kubernetes``)
and the indexed Job of the multi-worker self-test (``--workers N``, render_selftest below).

A DaemonSet, not an Indexed Job: the DaemonSet controller places exactly one pod on every node that
matches, including GPU nodes added later, while a Job's pods land wherever the scheduler puts them (two on
one node, none on another) unless the node count is known up front. The probe runs as the pod's init
container, once; an idle container keeps the pod, and so the probe's log, until the DaemonSet is deleted.

The payload travels in a ConfigMap (binaryData, mounted at /opt/envpin/envpin.pyz), so a plain NGC image
works unchanged, as the compose probe service mounts it; the manifest is a Jinja2 template
(envpin/fleet/templates/kubernetes-probe.yaml.j2) rendered with StrictUndefined and every value quoted as a JSON string,
which YAML reads as a double-quoted scalar.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envpin.errors import UsageError, shown
from envpin.fleet.aggregate import NODE_NAME_ENV
from envpin.fleet.inputs import PROBE_CONTAINER, WORKER_CONTAINER
from envpin.record import Value

if TYPE_CHECKING:
    from envpin.portable.imageref import ImageRef

NAME = "envpin-probe"
SELECTOR_KEY = "app.kubernetes.io/name"
LABELS = {SELECTOR_KEY: NAME, "app.kubernetes.io/part-of": "envpin"}
PAYLOAD_CONFIGMAP = "envpin-probe-payload"
PAYLOAD_ANNOTATION = "envpin.io/payload-sha256"
# NVIDIA's GPU Operator sets nvidia.com/gpu.present=true on GPU nodes (gpu-operator controllers/state_manager.go,
# commonGPULabelKey); Node Feature Discovery labels nodes with an NVIDIA PCI device (vendor 10de). NVIDIA's device
# plugin chart schedules on either (k8s-device-plugin deployments/helm/nvidia-device-plugin/values.yaml).
GPU_NODE_LABELS = ("nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present")
#: Kubernetes keeps a ConfigMap under 1 MiB (data and binaryData together).
CONFIGMAP_LIMIT = 1024 * 1024
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


#: The multi-worker self-test's Job (render_selftest): its name (also the headless Service's and the pods'
#: subdomain), its worker container, the first port and how long the Job may run.
SELFTEST_NAME = "envpin-selftest"
SELFTEST_LABELS = {SELECTOR_KEY: SELFTEST_NAME, "app.kubernetes.io/part-of": "envpin"}
SELFTEST_PAYLOAD_CONFIGMAP = "envpin-selftest-payload"
SELFTEST_PORT = 20000
SELFTEST_DEADLINE_S = 1800
#: What the worker container runs (python3 -c): for run k, TF_CONFIG from the pod's JOB_COMPLETION_INDEX and
#: the worker hosts at port PORT+k, then one worker (envpin.probe.replicas --worker) in a fresh process; its
#: JSON line is the container's log. Python 3.6, standard library, as the probe.
WORKER_LAUNCHER = """\
import json, os, subprocess, sys
runs, port = int(sys.argv[1]), int(sys.argv[2])
hosts = os.environ["ENVPIN_WORKER_HOSTS"].split(",")
index = int(os.environ["JOB_COMPLETION_INDEX"])
worst = 0
for k in range(runs):
    cluster = {"worker": ["%s:%d" % (h, port + k) for h in hosts]}
    env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
    cmd = [sys.executable, "-m", "envpin.probe.replicas", "--worker", "--resolver", "tf_config"] + sys.argv[3:]
    sys.stdout.flush()
    worst = max(worst, subprocess.call(cmd, env=env))
sys.exit(worst)
"""


@dataclass(frozen=True, slots=True)
class Manifest(Value):
    text: str
    image: str
    pinned: bool


def validate_namespace(namespace: str) -> str:
    """A Kubernetes namespace name: an RFC 1123 label."""
    if len(namespace) > 63 or not _NAMESPACE.match(namespace):
        raise UsageError(
            f"'{shown(namespace)}' is not a Kubernetes namespace name",
            hint="lower-case letters, digits and '-', at most 63 characters, e.g. envpin",
        )
    return namespace


def probe_command(selftest: bool | None, quick: bool = False) -> list[str]:
    """The probe prints its report on stdout, which becomes the container log kubectl collects. It runs the
    determinism self-test by default where the image has TensorFlow (selftest None; True insists, False
    leaves it out); exit 1 then means the report was written and records a failed self-test: the pod must
    not retry."""
    from envpin.environment.payload import IMAGE_PATH

    flags = {None: "", True: " --selftest", False: " --no-selftest"}[selftest] + (" --quick" if quick else "")
    if selftest is False:
        return ["python3", IMAGE_PATH, "--json", "-", "--no-selftest"]
    return ["sh", "-c", f'python3 {IMAGE_PATH} --json -{flags}; rc=$?; [ "$rc" -le 1 ] || exit "$rc"']


def _pinned_ref(image: str) -> ImageRef:
    """The image as a reference, which must name a tag or a digest."""
    from envpin.environment.plan import validate_image_ref
    from envpin.portable import imageref

    validate_image_ref(image)
    ref = imageref.parse(image)
    if ref.tag is None and ref.digest is None:
        raise UsageError(
            f"'{shown(image)}' names no tag or digest",
            hint="pin the image by digest: REGISTRY/REPOSITORY:TAG@sha256:...",
        )
    return ref


def _encoded(payload: bytes) -> str:
    """The payload as the ConfigMap's binaryData, which must stay under Kubernetes' limit."""
    encoded = base64.b64encode(payload).decode("ascii")
    if len(encoded) >= CONFIGMAP_LIMIT:
        raise UsageError(
            f"the probe payload ({len(payload)} bytes) does not fit in a ConfigMap",
            hint="this envpin's payload is too large for Kubernetes; report it",
        )
    return encoded


def render(image: str, namespace: str, payload: bytes, selftest: bool | None = None, quick: bool = False) -> Manifest:
    """The manifest (ConfigMap with the payload + DaemonSet) for `image` in `namespace`."""
    from envpin.environment.render import template_env

    ref = _pinned_ref(image)
    text = (
        template_env("envpin.fleet")
        .get_template("kubernetes-probe.yaml.j2")
        .render(
            name=NAME,
            namespace=validate_namespace(namespace),
            labels=LABELS,
            selector_key=SELECTOR_KEY,
            image=image,
            probe_container=PROBE_CONTAINER,
            probe_command=probe_command(selftest, quick),
            probe_memory="512Mi" if selftest is False else "4Gi",
            **_payload_vars(payload, PAYLOAD_CONFIGMAP),
        )
    )
    return Manifest(text, image, ref.digest is not None)


def _payload_vars(payload: bytes, configmap: str) -> dict[str, Any]:
    """What both manifests' templates need to mount envpin's payload from its ConfigMap on a GPU node."""
    from envpin.environment.payload import IMAGE_PATH, PAYLOAD_NAME
    from envpin.files.read import sha256_bytes

    return {
        "node_name_env": NODE_NAME_ENV,
        "gpu_node_labels": GPU_NODE_LABELS,
        "payload_configmap": configmap,
        "payload_annotation": PAYLOAD_ANNOTATION,
        "payload_hash": sha256_bytes(payload),
        "payload_name": PAYLOAD_NAME,
        "payload_path": IMAGE_PATH,
        "payload_b64": _encoded(payload),
    }


def worker_hosts(workers: int) -> list[str]:
    """The pods' names as their peers resolve them: host name <job>-<index> in the headless Service's
    subdomain (the namespace's search path completes the rest)."""
    return [f"{SELFTEST_NAME}-{i}.{SELFTEST_NAME}" for i in range(workers)]


def render_selftest(
    image: str,
    namespace: str,
    payload: bytes,
    workers: int,
    runs: int = 2,
    steps: int | None = None,
    port: int = SELFTEST_PORT,
) -> Manifest:
    """The multi-worker self-test for `workers` pods on as many GPU nodes: the payload ConfigMap, a headless
    Service and an indexed Job whose pods probe their node and then run one MultiWorkerMirroredStrategy worker
    `runs` times, TF_CONFIG built from each pod's JOB_COMPLETION_INDEX."""
    from envpin.environment.render import template_env
    from envpin.probe import tfchild

    ref = _pinned_ref(image)
    # What envpin's own TensorFlow children get (determinism on, TensorFlow's C++ chatter off), bar the path.
    env = {k: v for k, v in sorted(tfchild.child_env({}, determinism=True).items()) if k != "PYTHONPATH"}
    launcher = ["python3", "-c", WORKER_LAUNCHER, str(runs), str(port), *(["--steps", str(steps)] if steps else [])]
    text = (
        template_env("envpin.fleet")
        .get_template("kubernetes-selftest.yaml.j2")
        .render(
            name=SELFTEST_NAME,
            namespace=validate_namespace(namespace),
            labels=SELFTEST_LABELS,
            selector_key=SELECTOR_KEY,
            image=image,
            workers=workers,
            runs=runs,
            ports=[port + k for k in range(runs)],
            deadline=SELFTEST_DEADLINE_S,
            probe_container=PROBE_CONTAINER,
            probe_command=probe_command(False),
            worker_container=WORKER_CONTAINER,
            worker_command=launcher,
            worker_hosts=",".join(worker_hosts(workers)),
            worker_env=env,
            **_payload_vars(payload, SELFTEST_PAYLOAD_CONFIGMAP),
        )
    )
    return Manifest(text, image, ref.digest is not None)
