"""Runtime determinism helper, copied into every envpin image (standard library only, Python 3.6+).

A training script calls ``envpin.enable_determinism(seed=42)`` before building its model; this picks the
recipe row for the TensorFlow it finds (NGC or stock, by version) from the same recipes.json that renders
the Dockerfile, sets the environment, seeds every RNG and enables op determinism where TF supports it.
`python -m envpin.probe.runtime --check` verifies an environment against its recipe (used at build time).
"""

import json
import os
import re
import sys
import warnings

from envpin.portable.versions import major_minor, release_index
from envpin.probe import seeding

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any, Dict, List, Mapping, Optional, Tuple, TypedDict  # novermin (type checking only)

    #: recipes.json, or one recipe row resolved from it (JSON: the keys are documented in the table itself)
    Table = Dict[str, Any]
    Recipe = Dict[str, Any]

    class Report(TypedDict):
        """What enable_determinism returns (a plain dict at run time: TypedDict needs Python 3.8)."""

        seed: int
        recipe: Optional[str]
        tf_version: Optional[str]
        applied: List[str]
        skipped: List[str]
        warnings: List[str]


_TF_DIST = re.compile(
    r"^(tensorflow|tensorflow_cpu|tensorflow_gpu|nvidia_tensorflow|tf_nightly|intel_tensorflow)-"
    r"([0-9][^-]*)\.(dist-info|egg-info)$",
    re.IGNORECASE,
)
#: '20.02-tf2' -> '20.02': ASCII digits and a real month, so release_index() accepts what this returns.
_NGC_RELEASE = re.compile(r"([0-9]{2}\.(?:0[1-9]|1[0-2]))(?![0-9])")


def load_table(path: "Optional[str]" = None) -> "Table":
    """The recipe table: envpin/data/recipes.json, read through the import system so that it is found
    inside the envpin.pyz archive images carry, or the file at `path`."""
    if path is None:
        from envpin.probe._common import package_data

        table: "Table" = json.loads(package_data("envpin", "data/recipes.json").decode("utf-8"))
        return table
    with open(path, encoding="utf-8") as fh:
        table = json.load(fh)
    return table


def within(mm: "Tuple[int, ...]", lo: "Optional[str]", hi: "Optional[str]") -> bool:
    """MAJOR.MINOR `mm` inside a table entry's [tf_min, tf_max] (either end may be open)."""
    if lo is not None and mm < _bound(lo):
        return False
    return not (hi is not None and mm > _bound(hi))


def _bound(text: str) -> "Tuple[int, int]":
    """A table entry's version bound as (MAJOR, MINOR) (the schema has no other); ValueError for one that is no
    version."""
    mm = major_minor(text)
    if mm is None:
        raise ValueError("the recipe table's version bound %r is not a version" % (text,))
    return mm


def resolve(
    table: "Table", tf_version: str, distribution: str = "ngc", ngc_release: "Optional[str]" = None
) -> "Recipe":
    """Resolve one recipe row plus the shared settings into a plain dict (the one selection rule).

    Raises LookupError when no row matches and ValueError for an unusable version.
    """
    mm = major_minor(tf_version)
    if mm is None:  # a bare major cannot be placed in a recipe range
        raise ValueError("a recipe needs the TensorFlow version as MAJOR.MINOR, got %r" % (tf_version,))
    for row in table["recipes"]:
        match = row["match"]
        if match["distribution"] != distribution or not within(mm, match["tf_min"], match["tf_max"]):
            continue
        if distribution == "ngc":
            if ngc_release is None:
                raise ValueError("an NGC recipe needs the NGC release (YY.MM)")
            idx = release_index(ngc_release)
            if match.get("ngc_min") and idx < release_index(match["ngc_min"]):
                continue
            if match.get("ngc_max") and idx > release_index(match["ngc_max"]):
                continue
        common = table["common"]
        return {
            "id": row["id"],
            "distribution": distribution,
            "tf_version": tf_version,
            "summary": row["summary"],
            "env": sorted(common["env"] + row["env"], key=lambda e: e["name"]),
            "unset": list(common["unset"]),
            "no_effect": list(common.get("no_effect", [])),
            "steps": list(row["steps"]),
            "caveats": list(row["caveats"]) + list(common["caveats"]),
            "raises_under_determinism": [
                r
                for r in table["raises_under_determinism"]
                if within(mm, r["tf_min"], r["tf_max"]) and r.get("distribution", distribution) == distribution
            ],
            "nondeterministic_under_determinism": [
                r
                for r in table.get("nondeterministic_under_determinism", ())
                if within(mm, r["tf_min"], r["tf_max"]) and r.get("distribution", distribution) == distribution
            ],
        }
    raise LookupError("no determinism recipe covers TensorFlow %s (%s)" % (tf_version, distribution))


def installed_tf_version() -> "Optional[str]":
    """TensorFlow's version without importing it (importing TF first would be too late for its env)."""
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        return getattr(tf, "__version__", None) or getattr(tf, "VERSION", None)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in sorted(names):
            m = _TF_DIST.match(name)
            if m:
                return m.group(2)
    return None


def ngc_release() -> "Optional[str]":
    """The NGC release this process runs in ('20.02'), from the image's own NVIDIA_TENSORFLOW_VERSION."""
    m = _NGC_RELEASE.match(os.environ.get("NVIDIA_TENSORFLOW_VERSION", ""))
    return m.group(1) if m else None


def current_recipe(table: "Optional[Table]" = None) -> "Optional[Recipe]":
    """The recipe for this process's TensorFlow and distribution, or None without TensorFlow."""
    version = installed_tf_version()
    if version is None:
        return None
    release = ngc_release()
    return resolve(table or load_table(), version, "ngc" if release else "stock", release)


def check_environment(recipe: "Recipe", environ: "Optional[Mapping[str, str]]" = None) -> "List[str]":
    """Problems with the environment for this recipe: wrong or missing env vars, forbidden ones set, and
    misspelt names that TensorFlow never reads (whoever set one believes a setting is in force that is not)."""
    environ = os.environ if environ is None else environ
    problems = []
    for item in recipe["env"]:
        have = environ.get(item["name"])
        if have != item["value"]:
            problems.append("%s should be %s (is %s): %s" % (item["name"], item["value"], have, item["why"]))
    for item in recipe["unset"]:
        if item["name"] in environ:
            problems.append("%s must not be set: %s" % (item["name"], item["why"]))
    for item in recipe.get("no_effect", ()):
        if item["name"] in environ:
            problems.append("%s has no effect: %s" % (item["name"], item["why"]))
    return problems


def _step(name: str, seed: int, tf: "ModuleType", report: "Report") -> None:
    if name in seeding.STEPS:
        applied, skipped = seeding.seed(seed, tf, (name,))
        report["applied"] += applied
        report["skipped"] += skipped
        return
    if name == "enable_op_determinism":
        tf.config.experimental.enable_op_determinism()
    elif name == "keras3_no_auto_xla":
        problem = _keras_auto_xla(tf)
        if problem:
            report["warnings"].append(problem)
            return
    elif name == "fwr13y_enable_determinism":
        try:
            from fwr13y.d9m.tensorflow import enable_determinism as fwr_enable
        except ImportError:
            report["warnings"].append(
                "bias_add backprop stays nondeterministic on GPU: pip install framework-reproducibility"
            )
            return
        fwr_enable()
    else:
        raise ValueError("unknown recipe step %r" % (name,))
    report["applied"].append(name)


#: The first Keras 3 release whose jit_compile="auto" stays off while op determinism is on (Keras PR 20315,
#: read in keras/src/trainers/trainer.py of the 3.6.0 and 3.7.0 wheels).
KERAS_AUTO_XLA_FIXED = (3, 7)


def _keras_auto_xla(tf: "ModuleType") -> "Optional[str]":
    """Why this Keras would still compile models with XLA under determinism, or None. Keras 2 (tf.keras
    before 2.16, or tf_keras) defaults to no XLA; Keras 3 before 3.7 defaults to jit_compile="auto", which
    compiles with XLA on a GPU, where the MaxPool gradient has no deterministic implementation."""
    version = getattr(getattr(tf, "keras", None), "__version__", None)
    if version is None:
        try:
            import keras
        except ImportError:
            return None
        version = getattr(keras, "__version__", None)
    mm = major_minor(str(version or ""))
    if mm is None or mm[0] != 3 or mm >= KERAS_AUTO_XLA_FIXED:
        return None
    return (
        "Keras %s compiles models with XLA by default (jit_compile='auto'), and XLA has no deterministic "
        "GPU MaxPool gradient: pass jit_compile=False to model.compile(), or use Keras 3.7 or later" % version
    )


def enable_determinism(seed: int = 42, strict: bool = False, table: "Optional[Table]" = None) -> "Report":
    """Apply the recipe for the TensorFlow found at run time; returns what was done.

    Environment variables are set before TensorFlow is imported (TF reads some of them once). With
    strict=True any warning (e.g. PYTHONHASHSEED not set before start-up) raises RuntimeError.
    """
    report: "Report" = {"seed": seed, "recipe": None, "tf_version": None, "applied": [], "skipped": [], "warnings": []}
    tf_was_imported = "tensorflow" in sys.modules
    recipe = current_recipe(table)
    if recipe is None:
        report["applied"] += seeding.seed(seed, None, ("seed_python",))[0]
        report["warnings"].append("TensorFlow is not installed: only Python's random module was seeded")
    else:
        report["recipe"], report["tf_version"] = recipe["id"], recipe["tf_version"]
        for item in recipe["env"]:
            name, value = item["name"], item["value"]
            if name == "PYTHONHASHSEED":
                if os.environ.get(name) != value:
                    report["warnings"].append(
                        "PYTHONHASHSEED must be %s before Python starts (set it in the image ENV)" % value
                    )
                continue
            if os.environ.get(name) != value:
                os.environ[name] = value
                report["applied"].append("env %s=%s" % (name, value))
                if tf_was_imported:
                    report["warnings"].append("%s was set after TensorFlow was imported" % name)
        for item in recipe["unset"]:
            if item["name"] in os.environ:
                del os.environ[item["name"]]
                report["warnings"].append("removed %s: %s" % (item["name"], item["why"]))
        for item in recipe.get("no_effect", ()):
            if item["name"] in os.environ:
                report["warnings"].append("%s has no effect: %s" % (item["name"], item["why"]))
        import tensorflow as tf

        for step in recipe["steps"]:
            _step(step["step"], seed, tf, report)
    for message in report["warnings"]:
        if strict:
            raise RuntimeError("envpin: " + message)
        warnings.warn("envpin: " + message, RuntimeWarning, stacklevel=2)
    return report


def main(argv: "Optional[List[str]]" = None) -> int:
    """`--check`: exit 1 if this environment does not match its recipe (the image build runs this)."""
    args = sys.argv[1:] if argv is None else argv
    recipe = current_recipe()
    if recipe is None:
        print("envpin: TensorFlow not found; nothing to check")
        return 0
    problems = check_environment(recipe)
    print("envpin: recipe %s for TensorFlow %s" % (recipe["id"], recipe["tf_version"]))
    for p in problems:
        print("envpin: " + p)
    return 1 if (problems and "--check" in args) else 0


if __name__ == "__main__":
    sys.exit(main())
