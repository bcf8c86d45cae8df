"""Library entry points behind the CLI: each command calls exactly one of these, and each returns a typed
result that one envpin.views renderer shows. A Python caller uses the same functions (docs/api.md).

One module per command group, mirroring envpin/cli/ and envpin/views/. The modules import the library
inside their functions, so a command loads only what it uses (`envpin probe` never loads the catalog,
Jinja2 or the Docker SDK); importing envpin.api itself is cheap.

The block below is the one declaration of the public names: type checkers read it, and at run time
envpin.portable.lazy reads the same lines, so each name is imported from its module on first use and
`__all__` lists them all. A new api function goes there (tests/unit/test_api_exports.py checks that the
block names exactly what the modules define).
"""

from envpin.portable.lazy import lazy_exports

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:  # the one declaration (see above): `name as name` exports it
    from envpin.api.audit import audit_files as audit_files
    from envpin.api.catalog import catalog_entries as catalog_entries
    from envpin.api.catalog import catalog_release as catalog_release
    from envpin.api.catalog import sync_catalog as sync_catalog
    from envpin.api.doctor import diagnose_host as diagnose_host
    from envpin.api.environment import DEFAULT_IMAGES_DIR as DEFAULT_IMAGES_DIR
    from envpin.api.environment import BuildRequest as BuildRequest
    from envpin.api.environment import DryRunRequest as DryRunRequest
    from envpin.api.environment import EnvironmentInputs as EnvironmentInputs
    from envpin.api.environment import PlannedBuild as PlannedBuild
    from envpin.api.environment import RecipeResult as RecipeResult
    from envpin.api.environment import RenderResult as RenderResult
    from envpin.api.environment import build_environment as build_environment
    from envpin.api.environment import build_formats as build_formats
    from envpin.api.environment import build_or_plan as build_or_plan
    from envpin.api.environment import find_lock as find_lock
    from envpin.api.environment import plan_build as plan_build
    from envpin.api.environment import plan_from_lock as plan_from_lock
    from envpin.api.environment import recipe_for as recipe_for
    from envpin.api.environment import render_environment as render_environment
    from envpin.api.evidence import Attestation as Attestation
    from envpin.api.evidence import AttestVerification as AttestVerification
    from envpin.api.evidence import KeyPair as KeyPair
    from envpin.api.evidence import SbomResult as SbomResult
    from envpin.api.evidence import attest_keygen as attest_keygen
    from envpin.api.evidence import attest_sign as attest_sign
    from envpin.api.evidence import attest_verify as attest_verify
    from envpin.api.evidence import image_sbom as image_sbom
    from envpin.api.fleet import FleetManifest as FleetManifest
    from envpin.api.fleet import FleetProbe as FleetProbe
    from envpin.api.fleet import FleetReport as FleetReport
    from envpin.api.fleet import FleetSelftest as FleetSelftest
    from envpin.api.fleet import fleet_manifest as fleet_manifest
    from envpin.api.fleet import fleet_report as fleet_report
    from envpin.api.fleet import fleet_selftest as fleet_selftest
    from envpin.api.fleet import probe_fleet as probe_fleet
    from envpin.api.lock import LockCheck as LockCheck
    from envpin.api.lock import LockCheckRequest as LockCheckRequest
    from envpin.api.lock import LockChecks as LockChecks
    from envpin.api.lock import LockRequest as LockRequest
    from envpin.api.lock import LockResult as LockResult
    from envpin.api.lock import check_lock as check_lock
    from envpin.api.lock import check_lock_file as check_lock_file
    from envpin.api.lock import lock_or_check as lock_or_check
    from envpin.api.lock import lock_requirements as lock_requirements
    from envpin.api.probe import DiffResult as DiffResult
    from envpin.api.probe import HostProbeRequest as HostProbeRequest
    from envpin.api.probe import ImageProbeRequest as ImageProbeRequest
    from envpin.api.probe import ProbeResult as ProbeResult
    from envpin.api.probe import VerifyResult as VerifyResult
    from envpin.api.probe import diff_files as diff_files
    from envpin.api.probe import probe_image as probe_image
    from envpin.api.probe import probe_machine as probe_machine
    from envpin.api.probe import run_probe as run_probe
    from envpin.api.probe import verify_environment as verify_environment
    from envpin.api.runs import bisect_runs as bisect_runs
    from envpin.api.runs import cost_runs as cost_runs
    from envpin.api.runs import resume_check as resume_check
    from envpin.api.runs import study_runs as study_runs
    from envpin.api.selftest import SelftestError as SelftestError
    from envpin.api.selftest import run_selftest as run_selftest
    from envpin.api.track import RunsDiff as RunsDiff
    from envpin.api.track import TrackedRun as TrackedRun
    from envpin.api.track import diff_runs as diff_runs

lazy_exports(__name__)
