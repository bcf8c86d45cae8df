"""What each check should show under determinism, from the recipe table's lists (one home for the facts).

recipes.json lists, per TensorFlow version range and device, the ops that raise under determinism and the
ops that stay nondeterministic without raising; each entry names the battery checks that exercise it. An
entry may narrow itself further to a Keras version range (``keras_min``/``keras_max``: Keras 2 and Keras 3
differ in how layers draw random numbers and when they compile with XLA) or to one platform (``platform``:
native Windows builds lacked some deterministic kernels). ``ngc_overrides`` say where NVIDIA's NGC builds
differ from stock TensorFlow, per NGC release range. A check's expectation is the first override that covers
this NGC build, else the first entry that covers this TensorFlow, Keras, device and platform, else
"deterministic". A verdict that differs from its expectation is reported as a surprise: either this
environment is not what the table says, or the table is missing something.
"""

import sys

from envpin.portable.versions import major_minor, release_index
from envpin.probe.runtime import within

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

RAISES = "raises-under-determinism"
SILENT = "NONDETERMINISTIC"
#: Comparisons a check the table lists as nondeterministic gets at least (it stops at the first difference):
#: at the lowest rate measured here (weighted Bincount on CPU differed in 2 of 50 runs, p = 0.04), 113
#: comparisons that all agree happen with probability 0.96 ** 113 < 1 %. Agreement after them is reported
#: (the table may not cover this platform) but fails nothing: a race that did not show on a loaded machine
#: is no evidence that the op is deterministic.
SILENT_COMPARISONS = 113
_OVERRIDE_VERDICTS = {"deterministic": "deterministic", "nondeterministic": SILENT, "raises": RAISES}


def platform_name(value: "Optional[str]" = None) -> str:
    """ "windows", "linux", "darwin" ... for sys.platform (or `value`)."""
    value = sys.platform if value is None else value
    return "windows" if value.startswith("win") else value.rstrip("0123456789")


def covers(
    entry: "Dict[str, Any]",
    mm: "Tuple[int, ...]",
    gpu: bool,
    keras: "Optional[str]" = None,
    platform: "Optional[str]" = None,
) -> bool:
    """Whether `entry` speaks of this TensorFlow on this device: "gpu" entries only where the checks ran on
    a GPU, "cpu" entries only where they ran on the CPU, "any" everywhere; an entry with a Keras range only
    where that Keras is installed (an unknown Keras matches no such entry), one with a platform only there."""
    devices = entry.get("devices", "any")
    if (devices == "gpu" and not gpu) or (devices == "cpu" and gpu):
        return False
    if entry.get("platform") and entry["platform"] != platform_name(platform):
        return False
    if "keras_min" in entry or "keras_max" in entry:
        kmm = major_minor(keras)
        if kmm is None or not within(kmm, entry.get("keras_min"), entry.get("keras_max")):
            return False
    return within(mm, entry.get("tf_min"), entry.get("tf_max"))


def ngc_overrides(
    table: "Dict[str, Any]", tf_version: "Optional[str]", ngc_release: "Optional[str]", gpu: "Optional[bool]" = None
) -> "List[Dict[str, Any]]":
    """The table's NGC-only facts that hold for this NGC release and TensorFlow (none for stock builds).
    `gpu` None: whatever the device (the recipe view); True/False: only entries for that device."""
    mm = major_minor(tf_version)
    if ngc_release is None or mm is None:
        return []
    idx = release_index(ngc_release)
    out = []
    for entry in table.get("ngc_overrides", ()):
        if entry.get("ngc_min") and idx < release_index(entry["ngc_min"]):
            continue
        if entry.get("ngc_max") and idx > release_index(entry["ngc_max"]):
            continue
        if gpu is None:
            if within(mm, entry.get("tf_min"), entry.get("tf_max")):
                out.append(entry)
        elif covers(entry, mm, gpu):
            out.append(entry)
    return out


def expected(
    name: str,
    tf_version: "Optional[str]",
    gpu: bool,
    table: "Dict[str, Any]",
    keras: "Optional[str]" = None,
    ngc_release: "Optional[str]" = None,
    platform: "Optional[str]" = None,
) -> "Dict[str, Any]":
    """``{"verdict", "why", "source"}`` for check `name` on this TensorFlow (on a GPU or not)."""
    mm = major_minor(tf_version)
    if mm is None:
        return {"verdict": None, "why": "TensorFlow version unknown", "source": None}
    for entry in ngc_overrides(table, tf_version, ngc_release, gpu):
        if name in entry.get("checks", ()):
            src = table["sources"].get(entry["source"], {}).get("url")
            return {
                "verdict": _OVERRIDE_VERDICTS[entry["verdict"]],
                "why": "NGC %s: %s" % (ngc_release, entry["why"]),
                "source": src,
            }
    for key, verdict in (("raises_under_determinism", RAISES), ("nondeterministic_under_determinism", SILENT)):
        for entry in table.get(key, ()):
            if name in entry.get("checks", ()) and covers(entry, mm, gpu, keras, platform):
                src = table["sources"].get(entry["source"], {}).get("url")
                return {"verdict": verdict, "why": entry.get("message") or entry.get("why", ""), "source": src}
    return {"verdict": "deterministic", "why": "no entry of the recipe table covers it", "source": None}


def surprise(check: "Dict[str, Any]") -> "Optional[str]":
    """A sentence when the verdict contradicts the expectation; None when it fits (or cannot be judged).

    A silently nondeterministic op may agree in a few runs, so "deterministic" where NONDETERMINISTIC was
    expected is a surprise only after SILENT_COMPARISONS comparisons (the battery gives such a check that
    many); a skipped check proves nothing either way."""
    want = (check.get("expected") or {}).get("verdict")
    got = check.get("verdict")
    if want is None or got == "skipped" or got == want:
        return None
    if want == SILENT and got == "deterministic":
        compared = int(check.get("comparisons") or 0)
        if compared < SILENT_COMPARISONS:
            return None
        return "expected %s here, but %d comparisons agreed (a miss has a chance under 1 %%)" % (want, compared)
    return "expected %s here, got %s" % (want, got)
