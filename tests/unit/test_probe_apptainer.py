"""The probe recognises Apptainer and SingularityCE containers from the signals their documentation names.

Real filesystem trees under a probe root and real environments, read by the real collector (and by the probe
as a separate Python 3.6+ process); nothing of the collector is replaced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema

from envpin.probe import fields, load_schema, system
from envpin.probe._common import Context

SIF = "/scratch/alice/tf-20.02.sif"
# What Apptainer sets in every container it starts (both prefixes: env.ApptainerPrefixes in its launcher).
APPTAINER_ENV = {
    "APPTAINER_CONTAINER": SIF,
    "APPTAINER_NAME": "tf-20.02.sif",
    "SINGULARITY_CONTAINER": SIF,
    "SINGULARITY_NAME": "tf-20.02.sif",
}


def _root(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            path.mkdir(exist_ok=True)
        else:
            path.write_text(text)
    return root


def _container(root: Path, environ: dict[str, str]) -> dict[str, Any]:
    section = system.collect_container(Context(root=str(root), environ=environ))
    return {k: v["value"] for k, v in section.items()}


def test_apptainer_from_its_variables_and_metadata_folder(tmp_path: Path) -> None:
    root = _root(
        tmp_path, {".singularity.d/env/90-environment.sh": "export A=1\n", "proc/1/cgroup": "0::/init.scope\n"}
    )
    got = _container(root, dict(APPTAINER_ENV))
    assert got["runtime"] == "apptainer" and got["in_container"] is True
    assert got["image"] == SIF
    assert got["evidence"] == sorted(
        [
            "/.singularity.d",
            "environ:APPTAINER_CONTAINER",
            "environ:APPTAINER_NAME",
            "environ:SINGULARITY_CONTAINER",
            "environ:SINGULARITY_NAME",
        ]
    )
    assert got["container_id"] == "unknown"


def test_singularityce_sets_only_the_singularity_names(tmp_path: Path) -> None:
    root = _root(tmp_path, {".singularity.d/": ""})
    got = _container(root, {"SINGULARITY_CONTAINER": "/data/old.sif", "SINGULARITY_NAME": "old.sif"})
    assert got["runtime"] == "singularity" and got["image"] == "/data/old.sif"


def test_metadata_folder_alone_after_the_environment_was_cleared(tmp_path: Path) -> None:
    """`env -i python3 -m envpin.probe` inside the container: only the image's own folder is left."""
    root = _root(tmp_path, {".singularity.d/runscript": "#!/bin/sh\n"})
    got = _container(root, {})
    assert got["runtime"] == "apptainer or singularity" and got["in_container"] is True
    assert got["evidence"] == ["/.singularity.d"] and got["image"] == "unknown"


def test_apptainer_wins_over_what_the_host_passes_in(tmp_path: Path) -> None:
    """Apptainer passes the host's environment in and shares its /proc/1: a host that is itself a podman
    container in Kubernetes must not make this container look like one, though every signal is kept."""
    root = _root(tmp_path, {".singularity.d/": "", "proc/1/cgroup": "0::/kubepods/besteffort/pod7/docker-1\n"})
    environ = {**APPTAINER_ENV, "container": "podman", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    got = _container(root, environ)
    assert got["runtime"] == "apptainer"
    assert {"environ:container=podman", "environ:KUBERNETES_SERVICE_HOST", "/proc/1/cgroup mentions kubepods"} <= set(
        got["evidence"]
    )


def test_gpu_libraries_bound_in_with_nv(tmp_path: Path) -> None:
    root = _root(
        tmp_path,
        {".singularity.d/libs/libcuda.so.1": "", ".singularity.d/libs/libnvidia-ml.so.1": "", "dev/nvidiactl": ""},
    )
    got = _container(root, dict(APPTAINER_ENV))
    assert "/.singularity.d/libs holds the host's libcuda (--nv)" in got["evidence"]
    assert got["gpu_runtime"] == "nvidia"


def test_host_settings_for_apptainer_are_not_a_container(tmp_path: Path) -> None:
    """A login node's shell carries APPTAINER_CACHEDIR, APPTAINER_BIND...: that is no container."""
    root = _root(tmp_path, {"proc/1/cgroup": "0::/init.scope\n"})
    environ = {
        "APPTAINER_CACHEDIR": "/scratch/cache",
        "APPTAINER_BIND": "/data",
        "APPTAINERENV_FOO": "1",
        "SINGULARITY_TMPDIR": "/tmp",
    }
    got = _container(root, environ)
    assert got["runtime"] == "none" and got["in_container"] is False and got["evidence"] == []


def test_docker_is_still_docker(tmp_path: Path) -> None:
    root = _root(tmp_path, {".dockerenv": "", "proc/1/cgroup": "0::/\n"})
    got = _container(root, {"container": "docker"})
    assert got["runtime"] == "docker" and got["image"] == "unknown"


def test_classification_of_the_container_fields() -> None:
    """The runtime is a risk (it decides what the process sees: host environment, /proc, GPU libraries); the
    image path is information: where the SIF lies says nothing about what it holds, which other fields compare."""
    assert fields.rule_for("container.runtime").severity == fields.RISK
    assert fields.rule_for("container.image").severity == fields.INFO
    assert fields.rule_for("container.evidence").severity == fields.INFO
    # Neither enters the fingerprint: the same image run by Docker and by Apptainer fingerprints the same.
    flat = {"container.runtime": "apptainer", "container.image": SIF, "os.arch": "x86_64"}
    assert [k for k in flat if fields.severity(k, cpu_compute=False)[0] == fields.BREAKING] == ["os.arch"]


def test_schema_refuses_an_unknown_container_field() -> None:
    report_part = {
        "container": {"runtime": {"value": "apptainer", "source": "x"}, "guess": {"value": 1, "source": "x"}}
    }
    schema = load_schema()
    validator = jsonschema.Draft7Validator({**schema, "required": []})
    assert any("guess" in e.message for e in validator.iter_errors(report_part))
