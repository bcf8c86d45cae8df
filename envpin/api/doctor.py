"""`envpin doctor`: what on this host stands between it and a reproducible run."""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.doctor.diagnosis import Diagnosis


def diagnose_host(ngc: str | None = None, lock: Path | None = None, stock: str | None = None) -> Diagnosis:
    """`envpin doctor`: can this host run the image of `ngc` (an NGC release or tag), of `stock` (a stock
    TensorFlow GPU image) or of the lock (`lock`, else the one every command finds)? One of them at most
    (UsageError)."""
    from envpin.doctor import diagnosis

    return diagnosis.run(ngc=ngc, lock=lock, stock=stock)
