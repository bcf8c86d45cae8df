"""View of `envpin doctor`: the verdict first, then each reason with its fix, then every check (a reason's
message once: its check line points up to it)."""

from __future__ import annotations

from envpin.views.console import say

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from rich.console import Console

    from envpin.doctor.diagnosis import Diagnosis

_LABEL = {"ok": "ok", "forward-compat": "fwd-compat", "problem": "PROBLEM", "unknown": "unknown"}


def diagnosis(d: Diagnosis, console: Console) -> None:
    say(console, f"{d.verdict}: {d.target.image} on this host")
    if d.readings.origin != "host":
        say(console, f"  (host readings replaced from {d.readings.origin})")
    for c in d.reasons:
        say(console, f"  - {c.message}")
        if c.fix:
            say(console, f"    {'how to find out' if c.status == 'unknown' else 'fix'}: {c.fix}")
    say(console, "checks:")
    width = max(len(c.name) for c in d.checks)
    for c in d.checks:  # a reason's message is printed once, above, with its fix
        message = "(the reason above)" if c in d.reasons else c.message
        say(console, f"  {_LABEL[c.status]:<11} {c.name:<{width}}  {message}".rstrip())
    say(console, f"probe the image here with: {d.readings.compose_advice}")
