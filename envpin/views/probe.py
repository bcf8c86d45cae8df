"""View of `envpin probe`: the fingerprint and the files written."""

from __future__ import annotations

from envpin.views.console import say

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from rich.console import Console

    from envpin.api import ProbeResult
    from envpin.image.probing import ImageProbe


def probed(res: ProbeResult, console: Console, note: Console) -> None:
    """When the report itself went to stdout, the summary goes to stderr so stdout stays one JSON document;
    a report kept for a person (stdout a terminal) is summed up on stdout, and stderr says how to get it all."""
    from envpin.errors import param

    where = note if res.report_on_stdout else console
    say(where, f"fingerprint {res.fingerprint} ({res.fingerprinted} fingerprinted fields, {res.errors} with errors)")
    if res.report is not None:
        for label, text in summary_rows(res.report):
            say(console, f"  {label + ':':<12} {text}")
    if res.selftest and res.exit_code != 2:  # an unfinished self-test is the error line of the command
        say(where, res.selftest)
    for path in res.written:
        say(where, f"wrote {path}")
    if res.report is not None:
        say(
            note,
            f"the whole report: {param('fmt', values=('json',))} (its JSON, also what a pipe gets), "
            f"{param('json_file')} FILE, {param('markdown')} FILE, or {param('out')} DIR for both",
        )


def summary_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """What a person wants first of a probe report, one (label, text) per line: the device class the golden
    hashes are kept for, the machine, the software that changes results, and the fields that failed. Values
    come from the report, escaped (a report holds what the machine said); "not found" where it has none."""
    from envpin.errors import shown
    from envpin.probe import fields

    flat = fields.flatten(report)

    def get(key: str, before: str = "", after: str = "") -> str | None:
        text = flat.get(key)
        if text is None or text == "unavailable" or text.startswith(("unavailable:", "error:")):
            return None
        return f"{before}{shown(text, 120)}{after}"

    def joined(*parts: str | None) -> str | None:
        return ", ".join(p for p in parts if p) or None

    names = sorted({v for k, v in flat.items() if k.startswith("gpu.devices.") and k.endswith(".name")})
    gpus = get("gpu.count")
    if gpus and names:
        gpus += f" ({', '.join(shown(n, 60) for n in names)})"
    memory = flat.get("memory.total_bytes", "")
    distribution = get("tensorflow.distribution.name", "(", ")")
    errors = report.get("probe", {}).get("errors", {}).get("value") or []
    rows = [
        ("device", shown(fields.device_class(report), 120)),
        (
            "host",
            joined(
                get("host.hostname"),
                get("container.runtime", "in a ", " container")
                if flat.get("container.in_container") == "true"
                else None,
            ),
        ),
        ("os", joined(get("os.release.pretty_name"), get("os.kernel", "kernel "), get("os.arch"))),
        ("cpu", joined(get("cpu.model"), get("cpu.logical_cpus", after=" logical CPUs"), get("cpu.isa_level"))),
        ("memory", f"{int(memory) / 2**30:.1f} GiB" if memory.isdigit() else None),
        ("gpus", joined(gpus, get("gpu.driver_version", "driver "))),
        (
            "cuda",
            joined(
                get("cuda.runtime.version", "runtime "),
                get("cuda.cudnn.version", "cuDNN "),
                get("cuda.nccl.version", "NCCL "),
            ),
        ),
        ("python", joined(get("python.version"), get("python.executable"))),
        ("tensorflow", " ".join(p for p in (get("tensorflow.version"), distribution) if p) or None),
        ("packages", get("packages.count", after=" distributions")),
        ("errors", ", ".join(shown(e, 80) for e in errors) if errors else "none"),
    ]
    return [(label, text or "not found") for label, text in rows]


def image_probed(res: ImageProbe, console: Console, note: Console) -> None:
    """The files on stdout; how the container ran, and its last lines when it failed, on stderr."""
    if res.timed_out:
        say(note, f"probed {res.image} {res.gpus}; the self-test did not finish")
    elif res.exit_code != 0:
        say(note, f"the probe failed inside {res.image} (exit {res.exit_code}), run {res.gpus}; its last lines:")
        for line in res.log_tail:
            say(note, f"  | {line}")
    else:
        say(note, f"probed {res.image} {res.gpus}")
    if res.selftest and not res.timed_out:
        say(note, res.selftest)
    for path in res.written:
        say(console, f"wrote {path}")
