"""Library entry points behind the CLI: each command calls exactly one of these, and each returns a typed
result that one envpin.views renderer shows. A Python caller uses the same functions (docs/api.md).

One module per command group, mirroring envpin/cli/ and envpin/views/. The modules import the library
inside their functions, so a command loads only what it uses (`envpin probe` never loads the catalog,
Jinja2 or the Docker SDK); importing envpin.api itself is cheap.
"""

from envpin.api.audit import audit_files
from envpin.api.catalog import catalog_entries, catalog_release, sync_catalog
from envpin.api.doctor import diagnose_host
from envpin.api.environment import (
    DEFAULT_IMAGES_DIR,
    BuildRequest,
    DryRunRequest,
    EnvironmentInputs,
    LockCheck,
    LockCheckRequest,
    LockChecks,
    LockRequest,
    LockResult,
    PlannedBuild,
    RenderResult,
    build_environment,
    build_formats,
    build_or_plan,
    check_lock,
    check_lock_file,
    find_lock,
    lock_or_check,
    lock_requirements,
    plan_build,
    plan_from_lock,
    recipe_for,
    render_environment,
)
from envpin.api.fleet import FleetManifest, FleetProbe, FleetReport, fleet_manifest, fleet_report, probe_fleet
from envpin.api.probe import (
    DiffResult,
    HostProbeRequest,
    ImageProbeRequest,
    ProbeResult,
    VerifyResult,
    diff_files,
    probe_image,
    probe_machine,
    run_probe,
    verify_environment,
)
from envpin.api.runs import bisect_runs, cost_runs, study_runs
from envpin.api.selftest import SelftestError, run_selftest

__all__ = [
    "DEFAULT_IMAGES_DIR",
    "BuildRequest",
    "DiffResult",
    "DryRunRequest",
    "EnvironmentInputs",
    "FleetManifest",
    "FleetProbe",
    "FleetReport",
    "HostProbeRequest",
    "ImageProbeRequest",
    "LockCheck",
    "LockCheckRequest",
    "LockChecks",
    "LockRequest",
    "LockResult",
    "PlannedBuild",
    "ProbeResult",
    "RenderResult",
    "SelftestError",
    "VerifyResult",
    "audit_files",
    "bisect_runs",
    "build_environment",
    "build_formats",
    "build_or_plan",
    "catalog_entries",
    "catalog_release",
    "check_lock",
    "check_lock_file",
    "cost_runs",
    "diagnose_host",
    "diff_files",
    "find_lock",
    "fleet_manifest",
    "fleet_report",
    "lock_or_check",
    "lock_requirements",
    "plan_build",
    "plan_from_lock",
    "probe_fleet",
    "probe_image",
    "probe_machine",
    "recipe_for",
    "render_environment",
    "run_probe",
    "run_selftest",
    "study_runs",
    "sync_catalog",
    "verify_environment",
]
