"""Views of `envpin bisect`, `envpin study`, `envpin cost` and `envpin resume-check` (text; JSON goes through
console.print_json)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envpin.views.console import say

if TYPE_CHECKING:
    from rich.console import Console


def _tf(version: str | None) -> str:
    return f"TensorFlow {version}" if version else "TensorFlow not imported"


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def bisect_lines(data: dict[str, Any]) -> list[str]:
    """The bisect result as lines (the same words whatever the terminal)."""
    steps = f"first {data['steps']} training steps" if data["steps"] else "the whole run"
    lines = [
        f"bisect: {' '.join(data['command'])} (seed {data['seed']}, {steps}"
        + (", envpin recipe" if data["recipe"] else "")
        + f", TensorFlow {data['tf_version']})",
        f"compared {data['compared']} op executions (run 1 executed {data['executions'][0]}, "
        f"run 2 {data['executions'][1]})",
    ]
    if data.get("replica"):
        lines[1:1] = replica_lines(data["replica"])
    first = data["first_difference"]
    if data["identical"]:
        lines.append(f"bit-identical: all {data['compared']} op executions compared gave the same bits in both runs")
        return lines
    if first is None and not data["compared"]:
        lines.append(
            f"not identical: no op execution had a counterpart in the other run ({data['unmatched']} "
            "without one): the runs took different paths from the start"
        )
        return lines
    if first is None:
        lines.append(
            f"not identical: no compared value differed, but {data['unmatched']} op executions had no "
            "counterpart in the other run (the runs took different paths)"
        )
        return lines
    where = f"graph {first['graph']}" if first["kind"] == "graph" else "eager"
    name = f" {first['op_name']}" if first.get("op_name") else ""
    lines.append(
        f"first difference: {first['op_type']}{name} ({where}, output {first['output_slot']}, "
        f"execution {first['index'] + 1} of those compared)"
    )
    source = data.get("source")
    if source:
        lines.append(f"  created at {source['file']}:{source['line']} in {source['function']}")
    diff = first["difference"]
    if diff["kind"] == "values":
        text = f"  {diff['bit_equal']} of {diff['elements']} elements bit-equal ({diff['dtype']}{diff['shape']})"
        if diff.get("max_abs") is not None:
            text += f"; max abs error {_g(diff['max_abs'])}, max rel error {_g(diff['max_rel'])}"
        lines.append(text)
    elif diff["kind"] == "shape":
        lines.append(f"  different tensors: {diff['a']} against {diff['b']}")
    elif diff["kind"] == "unmatched-value":
        lines.append("  inside a tf.data function: a value the other run never produced")
    else:
        lines.append(f"  different number of outputs: {diff['a']} against {diff['b']}")
    if first.get("unordered"):
        lines.append("  (tf.data functions run concurrently: their calls are compared as a set, not one by one)")
    lines += replica_note(data)
    notes = data["recipe_table"]
    if not notes:
        lines.append(f"  envpin's recipe table lists nothing for {first['op_type']} on TensorFlow {data['tf_version']}")
    for note in notes:
        what = (
            "nondeterministic even with determinism on"
            if note["kind"] == "nondeterministic"
            else "raises under determinism"
        )
        lines.append(f"  recipe table: {note['op']} ({note['devices']}): {what}: {note['detail']} [{note['source']}]")
    return lines


def replica_lines(replica: dict[str, Any]) -> list[str]:
    """Which replica of a distributed command bisect read, and what the runs were."""
    pids = replica.get("pids") or [None, None]
    which = f"pid {pids[0]} in run 1, {pids[1]} in run 2"
    if replica["mode"] == "task":
        task = replica["task"]
        chief = ", the chief" if replica.get("chief") else ""
        what = f"{task['type']} {task['index']}{chief} ({which})"
    elif replica["mode"] == "device":
        what = f"device {replica['device']} of one process ({which})"
    else:
        what = f"the one process ({which})"
    lines = [f"replica {replica['index']} of {replica['of']}: {what}; each run: {replica['shape_description']}"]
    other = replica.get("other_devices")
    if other:
        lines.append(
            f"  compared only the op executions on {replica['device']}: {other[0]} in run 1 and {other[1]} in "
            "run 2 ran elsewhere"
        )
    return lines


def replica_note(data: dict[str, Any]) -> list[str]:
    """The note bisect adds when one replica's first difference is a collective."""
    note = (data.get("replica") or {}).get("note")
    return [f"  {note}"] if note else []


def distributed_line(shape: dict[str, Any], counts: str | None, also: str = "") -> str:
    """What each run of study or cost was, and whose numbers (`counts`, None: nobody's) are taken (`also`:
    what else)."""
    replicas = shape["replicas"]
    strategy = f", {replicas} replica{'s' if replicas != 1 else ''} ({shape['strategy']})" if replicas else ""
    if shape["tasks"]:
        names = ", ".join(f"{t['type']} {t['index']}" for t in shape["tasks"])
        chief = shape["chief"]
        head = f"{chief['type']} {chief['index']}" if chief else "the first task"
        whose = f"; {counts} from {head}, the chief" if counts else ""
        return f"each run: {shape['processes']} processes ({names}){strategy}, every one run to its end{whose}{also}"
    devices = f" on {', '.join(shape['devices'])}" if shape["devices"] else ""
    return f"each run: one process{strategy}{devices}"


def show_bisect(data: dict[str, Any], console: Console) -> None:
    for line in bisect_lines(data):
        say(console, line)


def show_study(data: dict[str, Any], console: Console) -> None:
    """Per metric and recipe setting: each arm's mean and standard deviation, the ratio, its interval."""
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=Text(
            f"study: {' '.join(data['command'])} ({data['runs_per_arm']} runs per arm, {_tf(data['tf_version'])})"
        )
    )
    for col in ("metric", "recipe", "fixed mean", "fixed std", "varied mean", "varied std", "ratio", "95% CI"):
        table.add_column(col, justify="left" if col in ("metric", "recipe") else "right")
    for m in data["metrics"]:
        ci = m["ratio_ci95"]
        table.add_row(
            Text(m["metric"]),
            "on" if m["recipe"] else "off",
            _g(m["fixed"]["mean"]),
            _g(m["fixed"]["std"]),
            _g(m["varied"]["mean"]),
            _g(m["varied"]["std"]),
            _g(m["ratio"]),
            f"{_g(ci[0])} to {_g(ci[1])}" if ci else "-",
        )
    console.print(table)
    if data.get("distributed"):
        say(
            console,
            distributed_line(
                data["distributed"],
                "Keras History",
                " (a metrics line on stdout counts whichever process printed it last)",
            ),
        )
    for m in data["metrics"]:
        say(console, ("[recipe on] " if m["recipe"] else "") + m["verdict"])


def show_cost(data: dict[str, Any], console: Console) -> None:
    """Each arm's time per step (or run) and the recipe's overhead with its interval."""
    from rich.table import Table
    from rich.text import Text

    unit = data["unit"]
    table = Table(
        title=Text(
            f"cost: {' '.join(data['command'])} ({data['repeat']} runs per arm, "
            f"TensorFlow {data['tf_version']}, recipe {data['recipe']})"
        )
    )
    for col in ("arm", f"mean s/{unit}", f"s/{unit} of each run", "run seconds"):
        table.add_column(col, justify="left" if col == "arm" else "right")
    for key, label in (("without_recipe", "without recipe"), ("with_recipe", "with recipe")):
        arm = data[key]
        table.add_row(
            label,
            _g(arm["mean"]),
            " ".join(_g(v) for v in arm["values"]),
            " ".join(_g(v) for v in data["run_seconds"][key]),
        )
    console.print(table)
    if data.get("distributed"):
        if unit == "step":
            say(console, distributed_line(data["distributed"], "step times"))
        else:  # no Keras steps: the command's wall time, launcher and every worker in it
            say(console, distributed_line(data["distributed"], None, "; each time is the whole command's"))
    ci = data["overhead_ci95"]
    interval = f" (95% CI {ci[0]:+.1%} to {ci[1]:+.1%})" if ci else ""
    say(console, f"overhead of the recipe: {data['overhead']:+.1%} per {unit}{interval}")


def resume_lines(data: dict[str, Any]) -> list[str]:
    """The resume-check result as lines: the verdict, then each part of the training state at the resume
    point, with advice and sources for each one not restored."""
    k = data["steps"]
    lines = [
        f"resume-check: {' '.join(data['command'])} (seed {data['seed']}, interrupted after step {k}, "
        f"{_tf(data['tf_version'])})"
    ]
    verdict = data["verdict"]
    missing = [c["name"] for c in data["components"] if c["status"] == "not restored"]
    if verdict == "identical":
        lines.append("identical: the resumed run ended bit-identical to the uninterrupted one")
    elif verdict == "not resumed":
        lines.append(
            f"not resumed: the resumed run started from step {data['resumed_from']}, not {k}: it did not restore "
            "its checkpoint (does it read $ENVPIN_RUNS_CHECKPOINT, or {checkpoint} in the command?)"
        )
    elif verdict == "nondeterministic":
        lines.append(
            f"nondeterministic: two uninterrupted runs already differ after {k} steps, so the resume cannot be "
            "judged (envpin bisect names the op that differs)"
        )
    else:
        names = {c["key"]: c["name"] for c in data["components"]}
        what = "; ".join(
            [names.get(k, k) for k in data["end_differs"]] + [f"metric {m}" for m in data["metrics_differ"]]
        )
        lines.append(f"differs: the resumed run did not end as the uninterrupted one did ({what})")
        if missing:
            lines.append(f"  not restored at step {k}: {', '.join(missing)}")
        else:
            lines.append(
                "  every part of the state envpin sees was restored: the difference comes from state it cannot "
                "see (Keras fit's own iterator, a random op's state inside a tf.function, the script's own)"
            )
    lines.append(f"state as step {k + 1} begins, resumed against uninterrupted:")
    for c in data["components"]:
        lines.append(f"  {c['status']:<16} {c['name']}")
    for c in data["components"]:
        if c["advice"]:
            lines.append(f"{c['name']}: {c['advice']} [{', '.join(c['sources'])}]")
    if verdict == "identical" and missing:
        lines.append(f"  ({', '.join(missing)} not restored, without changing the result)")
    return lines


def show_resume(data: dict[str, Any], console: Console) -> None:
    for line in resume_lines(data):
        say(console, line)
