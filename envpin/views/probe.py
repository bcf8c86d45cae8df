"""View of `envpin probe`: the fingerprint and the files written."""

from __future__ import annotations

from envpin.views.console import say

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from rich.console import Console

    from envpin.api import ProbeResult
    from envpin.image.probing import ImageProbe


def probed(res: ProbeResult, console: Console, note: Console) -> None:
    """When the report itself went to stdout, the summary goes to stderr so stdout stays one JSON document."""
    where = note if res.report_on_stdout else console
    say(where, f"fingerprint {res.fingerprint} ({res.fingerprinted} fingerprinted fields, {res.errors} with errors)")
    if res.selftest:
        say(where, res.selftest)
    for path in res.written:
        say(where, f"wrote {path}")


def image_probed(res: ImageProbe, console: Console, note: Console) -> None:
    """The files on stdout; how the container ran, and its last lines when it failed, on stderr."""
    if res.exit_code != 0:
        say(note, f"the probe failed inside {res.image} (exit {res.exit_code}), run {res.gpus}; its last lines:")
        for line in res.log_tail:
            say(note, f"  | {line}")
    else:
        say(note, f"probed {res.image} {res.gpus}")
    if res.selftest:
        say(note, res.selftest)
    for path in res.written:
        say(console, f"wrote {path}")
