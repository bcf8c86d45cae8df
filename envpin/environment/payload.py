"""envpin.pyz: the one artifact that carries envpin's standard-library part into images.

It holds the probe, the runtime helper, the standard-library core they share and the recipe table
(everything under envpin/probe and envpin/portable, plus envpin/__init__.py, the Keras callback envpin/keras.py
and envpin/data/recipes.json),
as a zip that Python imports from PYTHONPATH
(``PYTHONPATH=/opt/envpin/envpin.pyz python3 -m envpin.probe``) or runs directly
(``python3 envpin.pyz`` runs the probe). The same bytes go into every environment folder, the compose
probe service and the containers `envpin lock` resolves in.

Reproducible by construction: sorted members, a fixed timestamp and mode, no compression (zlib's output
may differ between versions), so the same sources give the same bytes, and its hash is an input.

It holds no bytecode: bytecode belongs to one interpreter version, and the archive's hash stays the identity of
the code. Python never writes bytecode for a zip, so the image build compiles it instead, with the image's own
Python (``python3 -m envpin.probe.bytecode``, into the ``lib_path`` templates/common.j2 names, which
PYTHONPATH lists before the archive).
"""

from __future__ import annotations

import functools
import zipfile
from io import BytesIO
from pathlib import Path

from envpin.files.read import sha256_bytes

PAYLOAD_NAME = "envpin.pyz"
#: Where the image keeps it (the Dockerfile's COPY target and PYTHONPATH entry).
IMAGE_PATH = "/opt/envpin/envpin.pyz"
_PKG = Path(__file__).resolve().parent.parent
#: The packages that travel whole (standard library only, Python 3.6+).
_PACKAGES = ("portable", "probe")
#: The modules of the top package that travel beside them (standard library only until used).
_MODULES = ("__init__.py", "keras.py")
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can record
_MAIN = (
    b'"""python3 envpin.pyz [probe options]: run the envpin probe from this archive."""\n'
    b"import sys\n\n"
    b"from envpin.probe.__main__ import main\n\n"
    b"sys.exit(main())\n"
)


def members() -> dict[str, bytes]:
    """Archive path -> bytes of every file the payload holds, read from the installed package."""
    files: dict[str, bytes] = {"__main__.py": _MAIN}
    for name in _MODULES:
        files["envpin/" + name] = (_PKG / name).read_bytes()
    for path in _package_files():
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".json"):
            files["envpin/" + path.relative_to(_PKG).as_posix()] = path.read_bytes()
    files["envpin/data/recipes.json"] = (_PKG / "data" / "recipes.json").read_bytes()
    return dict(sorted(files.items()))


def _package_files() -> list[Path]:
    return [path for name in _PACKAGES for path in sorted((_PKG / name).rglob("*"))]


def build(files: dict[str, bytes]) -> bytes:
    """A zip of `files` whose bytes depend on nothing but their names and contents."""
    buf = BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = (0o100644 & 0xFFFF) << 16
            info.create_system = 3  # Unix, whatever the host
            zf.writestr(info, files[name])
    return buf.getvalue()


@functools.cache
def payload() -> bytes:
    """The payload for the installed envpin, built once per process from the sources it then finds."""
    return build(members())


@functools.cache
def payload_hash() -> str:
    """Its hash, once per process (a render serialises its plan, which names it, half a dozen times)."""
    return sha256_bytes(payload())
