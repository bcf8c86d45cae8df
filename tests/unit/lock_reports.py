"""Reports for verify tests: this host's probe report, turned into what a probe inside a lock's image gives."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from envpin.environment import lockfile


def _value(value: Any, source: str = "test") -> dict[str, Any]:
    return {"value": value, "source": source}


def as_lock_image(report: dict[str, Any], lock_path: Path) -> dict[str, Any]:
    """`report` as the lock's image would have it: its plan baked in, the recipe's environment in force, the
    TensorFlow and CUDA its base declares (not whatever this host has)."""
    locked = lockfile.read(lock_path)
    out = copy.deepcopy(report)
    plan = {
        "sha256": locked.files["plan.json"],
        "path": "/opt/envpin/plan.json",
        "name": locked.inputs.name,
        "tag": locked.inputs.tag,
        "release": locked.inputs.release,
        "tf_version": locked.inputs.tf_version,
        "envpin_version": locked.envpin_version,
        "recipe": f"{locked.recipe.id} {locked.recipe.hash}",
    }
    if locked.base.digest:
        plan["base_digest"] = locked.base.digest
    out["image"]["envpin_plan"] = _value(plan, "file:/opt/envpin/plan.json")
    env = out.setdefault("env", {})
    for name in locked.recipe.unset:
        env.pop(name, None)
    for name, value in locked.recipe.env.items():
        env[name] = _value(value, f"environ:{name}")
    out["tensorflow"]["version"] = _value(f"{locked.inputs.tf_version}.0")
    out["tensorflow"].pop("distribution", None)
    out["cuda"]["runtime"] = {"unavailable": "no libcudart in the image", "source": "test"}
    out["cuda"]["cudnn"] = {"unavailable": "no libcudnn in the image", "source": "test"}
    return out
