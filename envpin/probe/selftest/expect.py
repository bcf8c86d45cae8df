"""What each check should show under determinism, from the recipe table's lists (one home for the facts).

recipes.json lists, per TensorFlow version range and device, the ops that raise under determinism and the
ops that stay nondeterministic without raising; each entry names the battery checks that exercise it. A
check's expectation is the first entry that covers this TensorFlow and device, else "deterministic". A
verdict that differs from its expectation is reported as a surprise: either this environment is not what
the table says, or the table is missing something.
"""

from typing import Any, Dict, Optional

from envpin.portable.versions import parse_version
from envpin.probe.runtime import within

RAISES = "raises-under-determinism"
SILENT = "NONDETERMINISTIC"


def _covers(entry: Dict[str, Any], mm: tuple, gpu: bool) -> bool:
    """Whether `entry` speaks of this TensorFlow on this device: "gpu" entries only where the checks ran on
    a GPU, "cpu" entries only where they ran on the CPU, "any" everywhere."""
    devices = entry.get("devices", "any")
    if (devices == "gpu" and not gpu) or (devices == "cpu" and gpu):
        return False
    return within(mm, entry.get("tf_min"), entry.get("tf_max"))


def expected(name: str, tf_version: Optional[str], gpu: bool, table: Dict[str, Any]) -> Dict[str, Any]:
    """``{"verdict", "why", "source"}`` for check `name` on this TensorFlow (on a GPU or not)."""
    parsed = parse_version(tf_version or "")
    if parsed is None or len(parsed) < 2:
        return {"verdict": None, "why": "TensorFlow version unknown", "source": None}
    mm = parsed[:2]
    for key, verdict in (("raises_under_determinism", RAISES), ("nondeterministic_under_determinism", SILENT)):
        for entry in table.get(key, ()):
            if name in entry.get("checks", ()) and _covers(entry, mm, gpu):
                src = table["sources"].get(entry["source"], {}).get("url")
                return {"verdict": verdict, "why": entry.get("message") or entry.get("why", ""), "source": src}
    return {"verdict": "deterministic", "why": "no entry of the recipe table covers it", "source": None}


def surprise(check: Dict[str, Any]) -> Optional[str]:
    """A sentence when the verdict contradicts the expectation; None when it fits (or cannot be judged).

    A silently nondeterministic op may still agree in every run of a short battery, so "deterministic"
    where NONDETERMINISTIC was expected is no surprise; a skipped check proves nothing either way."""
    want = (check.get("expected") or {}).get("verdict")
    got = check.get("verdict")
    if want is None or got == "skipped" or got == want or (want == SILENT and got == "deterministic"):
        return None
    return "expected %s here, got %s" % (want, got)
