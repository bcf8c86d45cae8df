"""envpin's version, in one leaf module: the root package and the probe (whose reports carry it) read it
from here, so neither imports the other for it (standard library only, Python 3.6+)."""

__version__ = "0.1.0"
