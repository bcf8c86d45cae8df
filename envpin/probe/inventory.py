"""``python -m envpin.probe.inventory``: what an SBOM lists of an image, read inside it, as one JSON object on
stdout (envpin.image.probing.read_inventory runs it in a throwaway container; envpin.evidence maps it).

It reads and does not interpret: the dpkg status database as the text dpkg wrote (the host parses it with
python-debian's deb822, a maintained parser this standard-library code cannot import), the operating system's
os-release, and every installed Python distribution with its version and the SHA-256 of its RECORD (the
probe's own scan, envpin.probe.pyenv: importlib.metadata only exists from Python 3.8, and NGC 19.xx-20.xx
images ship 3.6). Standard library only, Python 3.6+.
"""

import hashlib
import json
import platform
import sys
from typing import Any, Dict, Optional

from envpin.probe._common import Context, read_file
from envpin.probe.pyenv import scan_distributions, search_paths
from envpin.probe.system import _os_release

SCHEMA = 1
DPKG_STATUS = "/var/lib/dpkg/status"
#: A dpkg status database is a few MiB for thousands of packages; more than this is not one.
DPKG_LIMIT = 64 * 1024 * 1024


def _dpkg(ctx: Context) -> Dict[str, Any]:
    path = ctx.path(DPKG_STATUS)
    try:
        data = read_file(path, DPKG_LIMIT, whole=True)
    except OSError as exc:
        return {"path": DPKG_STATUS, "text": None, "reason": "%s: %s" % (type(exc).__name__, exc.strerror or exc)}
    except ValueError as exc:
        return {"path": DPKG_STATUS, "text": None, "reason": str(exc)}
    return {
        "path": DPKG_STATUS,
        "text": data.decode("utf-8", "replace"),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _release(ctx: Context) -> Optional[Dict[str, str]]:
    try:
        return _os_release(ctx)
    except Exception:  # no os-release, or none that parses: the SBOM says the distribution is unknown
        return None


def collect(root: str = "/") -> Dict[str, Any]:
    """The inventory of the system under `root` (the running interpreter's distributions in any case)."""
    ctx = Context(root=root)
    dists, _shadowed = scan_distributions(search_paths())
    return {
        "schema": SCHEMA,
        "os_release": _release(ctx),
        "machine": platform.machine(),
        "dpkg": _dpkg(ctx),
        "python": {
            "version": platform.python_version(),
            "executable": sys.executable,
            "distributions": [
                {"name": d["name"], "version": d["version"], "record": d["record"], "record_sha256": d["record_sha256"]}
                for d in dists
            ],
        },
    }


def main() -> int:
    json.dump(collect(), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
