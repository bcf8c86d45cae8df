"""What a base image declares about itself, held against the plan and the catalog before anything is built.

A mirror (`--base-image`) can hold another image than the tag it stands for, and NVIDIA's notes are sometimes
wrong; the image's own config is the last word on what it contains. A different TensorFlow major.minor means the
recipe baked into the image would be the wrong one, so the build is refused. Other differences (the NGC release
it names, CUDA, cuDNN, NCCL, the minimum CUDA) are warnings: the recipe does not depend on them, but the catalog
and the lock would tell a teammate other numbers than the image holds.
"""

from __future__ import annotations

from envpin.environment.plan import release_version, same_minor
from envpin.errors import UsageError, param
from envpin.knowledge import imageconfig
from envpin.portable.versions import major_minor

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.environment.plan import BuildPlan
    from envpin.knowledge.sync import ImageRead

#: catalog field -> the ENV variable it is read from, for the warnings' wording.
_CHECKED = {"cuda": "CUDA_VERSION", "cudnn": "CUDNN_VERSION", "nccl": "NCCL_VERSION"}


def cross_check(plan: BuildPlan, got: ImageRead) -> list[str]:
    """Warnings for the build; raises UsageError when the declared TensorFlow contradicts the plan's."""
    declared, entry, ref = got.declared, plan.entry, got.ref
    tf = declared.get("tf_version")
    if tf and not same_minor(release_version(tf), plan.tf_version):
        parts = major_minor(tf)
        assert parts is not None  # release_version took it: two components at least
        mm = f"{parts[0]}.{parts[1]}"
        given = param("tf")
        sources = {
            "catalog": "from the catalog",
            "image": "from the image config read earlier",
            "user": f"from {given}",
        }
        where = sources.get(plan.tf_version_source, plan.tf_version_source)
        if plan.tf_version_source == "user":
            hint = f"pass {given} {mm}, the version the image holds"
        else:
            hint = (
                f"build from a copy of {entry.tag}; if {entry.tag} itself holds TensorFlow {tf}, record it with "
                f"`{param('releases', command='catalog sync')} {entry.tag}` and pass {given} {mm}"
            )
        raise UsageError(
            f"{ref} declares TensorFlow {tf} (ENV TENSORFLOW_VERSION), but the plan is for TensorFlow "
            f"{plan.tf_version} ({where}): the recipe baked into the image would be the wrong one",
            hint=hint,
        )
    warnings = []
    named = declared.get("nvidia_tensorflow_version")
    if named and imageconfig.compare_ngc_version(entry.tag, named) == imageconfig.DISAGREES:
        warnings.append(f"{ref} declares it is NGC {named} (ENV NVIDIA_TENSORFLOW_VERSION), not {entry.tag}")
    for key, env in _CHECKED.items():
        if key in declared and imageconfig.compare_version(entry.value(key), declared[key]) == imageconfig.DISAGREES:
            warnings.append(
                f"{ref} declares {env} {declared[key]}; the catalog says {key} {entry.value(key)} "
                f"({entry.facts[key].kind} evidence)"
            )
    cuda_min = declared.get("cuda_min")
    if cuda_min is not None and imageconfig.compare_version(entry.value("cuda"), cuda_min) == imageconfig.DISAGREES:
        warnings.append(
            f"{ref} requires CUDA >= {cuda_min} (ENV {imageconfig.REQUIRE_CUDA_ENV}); the catalog "
            f"says CUDA {entry.value('cuda')}"
        )
    return warnings
