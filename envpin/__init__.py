"""envpin: pin, build, verify and share bit-reproducible TensorFlow environments on NVIDIA NGC images.

This module stays importable with the standard library alone (Python 3.6+): it is copied into every
image so that training scripts can ``import envpin; envpin.enable_determinism(seed=42)``.
"""

__version__ = "0.1.0"
#: Where envpin lives; its documentation is under docs/ there (audit rules link to their sections).
HOMEPAGE = "https://github.com/envpin/envpin"


TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Optional

    from envpin.probe.runtime import Report, Table


def enable_determinism(seed: int = 42, strict: bool = False, table: "Optional[Table]" = None) -> "Report":
    """Apply the determinism recipe for the TensorFlow found at run time (see envpin.probe.runtime)."""
    from envpin.probe.runtime import enable_determinism as _enable

    return _enable(seed=seed, strict=strict, table=table)
