"""Library entry points behind the CLI: each command calls exactly one of these, and each returns a typed
result that one envpin.views renderer shows. A Python caller uses the same functions (docs/api.md).

One module per command group, mirroring envpin/cli/ and envpin/views/. The modules import the library
inside their functions, so a command loads only what it uses (`envpin probe` never loads the catalog,
Jinja2 or the Docker SDK); importing envpin.api itself is cheap.
"""

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:  # for type checkers and readers; at run time each name is imported on first use (__getattr__)
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

#: Each api module and the public names it defines: a name is imported from its module on first use, so
#: `from envpin import api` costs nothing and a command loads only its own group's module. A new api
#: function goes here, in the imports above and in __all__ (tests/unit/test_api_exports.py checks all three).
_HOMES = {
    "audit": ("audit_files",),
    "catalog": ("catalog_entries", "catalog_release", "sync_catalog"),
    "doctor": ("diagnose_host",),
    "environment": (
        "DEFAULT_IMAGES_DIR",
        "BuildRequest",
        "DryRunRequest",
        "EnvironmentInputs",
        "LockCheck",
        "LockCheckRequest",
        "LockChecks",
        "LockRequest",
        "LockResult",
        "PlannedBuild",
        "RenderResult",
        "build_environment",
        "build_formats",
        "build_or_plan",
        "check_lock",
        "check_lock_file",
        "find_lock",
        "lock_or_check",
        "lock_requirements",
        "plan_build",
        "plan_from_lock",
        "recipe_for",
        "render_environment",
    ),
    "fleet": ("FleetManifest", "FleetProbe", "FleetReport", "fleet_manifest", "fleet_report", "probe_fleet"),
    "probe": (
        "DiffResult",
        "HostProbeRequest",
        "ImageProbeRequest",
        "ProbeResult",
        "VerifyResult",
        "diff_files",
        "probe_image",
        "probe_machine",
        "run_probe",
        "verify_environment",
    ),
    "runs": ("bisect_runs", "cost_runs", "study_runs"),
    "selftest": ("SelftestError", "run_selftest"),
}

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


_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
