"""The payload unpacked for one interpreter, with its bytecode: ``python3 -m envpin.probe.bytecode PYZ DEST``.

envpin.pyz holds sources only (its bytes, and so its hash, are the code itself, whatever Python reads it), and
Python never writes bytecode for modules it imports from a zip: every probe run inside an image would compile
the probe again. The image build therefore runs this once, with the image's own interpreter: the archive's
``envpin/`` tree goes to DEST (which PYTHONPATH lists before the archive) and is compiled there.

Reproducible: every unpacked file gets the mtime SOURCE_DATE_EPOCH (the build's one timestamp) and the .pyc
files are timestamp-based, so they hold that time and not the clock (Python 3.6's py_compile has no other
mode; on 3.7+ the mode is chosen here, not by SOURCE_DATE_EPOCH, whose checked-hash .pyc would make every
import read and hash the source again). Standard library only, Python 3.6+.
"""

import compileall
import os
import py_compile
import sys
import zipfile

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import List, Optional

#: The archive's members that are unpacked: the package, not the archive's own __main__.py.
PREFIX = "envpin/"


def unpack(archive: str, dest: str, epoch: int) -> bool:
    """Unpack `archive`'s envpin/ tree into `dest` with every mtime `epoch`, then compile it; False when a
    module did not compile (the archive would still be imported, from source)."""
    with zipfile.ZipFile(archive) as zf:
        names = [n for n in zf.namelist() if n.startswith(PREFIX) and not n.endswith("/")]
        for name in names:
            zf.extract(name, dest)
    _stamp(dest, epoch)
    tree = os.path.join(dest, "envpin")
    modes = getattr(py_compile, "PycInvalidationMode", None)  # 3.7+; 3.6 writes timestamp .pyc only
    if modes is None:
        ok = bool(compileall.compile_dir(tree, quiet=1))
    else:
        ok = bool(compileall.compile_dir(tree, quiet=1, invalidation_mode=modes.TIMESTAMP))  # novermin (3.7+ only)
    _stamp(dest, epoch)  # the __pycache__ folders and .pyc files too: the layer holds no build time
    return ok


def _stamp(dest: str, epoch: int) -> None:
    for root, dirs, files in os.walk(dest):
        for name in files + dirs:
            os.utime(os.path.join(root, name), (epoch, epoch))
    os.utime(dest, (epoch, epoch))


def main(argv: "Optional[List[str]]" = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python3 -m envpin.probe.bytecode PYZ DEST\n")
        return 2
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    if epoch <= 0:
        sys.stderr.write("envpin: SOURCE_DATE_EPOCH is not set: the bytecode would hold the build time\n")
        return 2
    return 0 if unpack(args[0], args[1], epoch) else 1


if __name__ == "__main__":
    sys.exit(main())
