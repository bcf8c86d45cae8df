"""XLA compilation: Keras 3 compiling a model through XLA by default where the table lists that as raising
(py-keras3-auto-xla), and XLA asked for by the script (py-jit-compile), an error where an op the script uses then
raises (MaxPool's XLA gradient from TF 2.8).

The fix adds `jit_compile=False` to Keras 3's `compile()`; a `compile(jit_compile=True)` is py-jit-compile's alone
(one hazard, one finding), whose fix turns it to `jit_compile=False` where an op then raises.
"""

from __future__ import annotations

import ast
import re

from envpin.audit.check import Finding
from envpin.audit.python.names import canonical
from envpin.audit.python.refs import FWR, HEAD, SCRIPTS, STATUS
from envpin.audit.python.script import Call, Missing, Script, const, is_model_compile
from envpin.audit.python.table import built_on, condition, matches, meetable, only, short, tf_range
from envpin.audit.rule import Rule
from envpin.errors import param

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit.python.edits import Fix, Fixing, Startup
    from envpin.knowledge.reciperecords import OpEntry

PY_KERAS3_AUTO_XLA = Rule(
    id="py-keras3-auto-xla",
    severity="error",
    title="Keras 3 compiles a model with MaxPooling through XLA",
    finds="On a TensorFlow for which the recipe table lists Keras 3's automatic XLA compilation as raising "
    "(TF 2.16-2.19, which allow Keras 3.0-3.6), a script that uses a layer the entry names (MaxPooling), or a "
    "`keras.applications` model the table says is built on one (ResNet, DenseNet, Inception, NASNet, VGG, "
    "Xception), and calls `compile()` leaving `jit_compile` at its default or 'auto' (`jit_compile=True` is "
    "`py-jit-compile`'s, reported once there). Scripts on `tf_keras` (`TF_USE_LEGACY_KERAS`, "
    "`import tf_keras`) are not Keras 3.",
    why="Keras 3 before 3.7 compiles with XLA by default (jit_compile='auto') and XLA's MaxPool gradient has no "
    "deterministic GPU implementation: the first training step raises. Pass jit_compile=False.",
    bad=HEAD + "model = tf.keras.Sequential([tf.keras.layers.MaxPooling2D(), tf.keras.layers.Flatten()])\n"
    "model.compile(optimizer='adam', loss='mse')\n",
    good=HEAD + "model = tf.keras.Sequential([tf.keras.layers.MaxPooling2D(), tf.keras.layers.Flatten()])\n"
    "model.compile(optimizer='adam', loss='mse', jit_compile=False)\n",
    autofix="Adds `jit_compile=False` to the `compile()` call (the other arguments and lines stay as they are). "
    "Safe: the model runs as without XLA, possibly slower.",
    references=(
        ("TensorFlow issue 69417", "https://github.com/tensorflow/tensorflow/issues/69417"),
        ("Keras PR 20315", "https://github.com/keras-team/keras/pull/20315"),
        SCRIPTS,
    ),
    fixable=True,
    language="python",
    example_tf="2.16",
)


PY_JIT_COMPILE = Rule(
    id="py-jit-compile",
    severity="warning",
    title="The script turns XLA compilation on",
    finds="`jit_compile=True` (`compile()`, `tf.function`), `experimental_compile=True`, "
    "`tf.config.optimizer.set_jit(True)`, and `TF_XLA_FLAGS` with `--tf_xla_auto_jit` set in `os.environ`. "
    "An error when the script also uses an op whose XLA gradient raises on its TensorFlow (MaxPool from "
    "2.8: Keras MaxPooling layers, `tf.nn.max_pool1d`/`max_pool2d`; a warning for `tf.nn.max_pool`, "
    "which raises only on rank-3/4 inputs).",
    why="XLA's kernels are not covered by TensorFlow's determinism before 2.8 (Scatter, reductions before "
    "2.2), and from 2.8 some of them raise instead (MaxPool's gradient).",
    bad=HEAD + "@tf.function(jit_compile=True)\ndef step(x):\n    return x * 2\n",
    good=HEAD + "@tf.function\ndef step(x):\n    return x * 2\n",
    autofix="Comments the line (XLA was asked for on purpose); where an op then raises (an error) and the line's "
    "only `jit_compile=True` is a `compile()` call's, turns it to `jit_compile=False` (the model trains as "
    "without XLA).",
    references=(FWR, STATUS, SCRIPTS),
    language="python",
    example_tf="2.8",
)


RULES: tuple[Rule, ...] = (PY_KERAS3_AUTO_XLA, PY_JIT_COMPILE)

_XLA_AUTO = re.compile(r"--tf_xla_auto_jit=(-?\d+|\w+)")


def xla_raisers(s: Script) -> list[tuple[Call, OpEntry]]:
    """Calls of ops whose XLA-compiled gradient raises on the script's TensorFlow (the table's XLA entries), and
    of library APIs the table says are built on one (`built_on`: keras.applications.ResNet50 holds MaxPooling2D
    layers); each call as the script names it."""
    records = s.target.records
    if records is None:
        return []
    keras = s.keras_major()
    entries = [e for e in meetable(records.raises, keras) if e.xla]
    if not entries:
        return []
    built = built_on(keras)
    out = []
    for call in s.calls:
        for c in call.narrowed():
            b = built.get(c.name) if c.name else None
            meant = c if b is None else Call(c.node, canonical(b.calls), c.attr)
            out += [(c, e.item) for e in entries if any(matches(meant, a, frozenset()) for a in e.apis)]
    return out


def check_xla(s: Script) -> None:
    raisers = xla_raisers(s)
    # the table's entry for Keras 3's own XLA compilation (compile() with jit_compile='auto'), for this version
    auto = [(c, item) for c, item in raisers if (item.keras_min or "").startswith("3")]
    if auto and s.keras_major() == 3:
        layer = auto[0][0]
        kind = (layer.name or "").rsplit(".", 1)[-1]  # the layer's class (or the application built on one)
        adds = f"pass jit_compile=False to compile() ({param('fix', command='audit')} adds it)"
        for c in s.calls:
            # jit_compile=True is the script's own request: py-jit-compile reports it, once (one hazard)
            if c.attr == "compile" and is_model_compile(c) and const(c.kw("jit_compile")) not in (False, True):
                s.add(
                    PY_KERAS3_AUTO_XLA,
                    c.node.lineno,
                    f"Keras 3 on TensorFlow {s.target.tf_version} compiles with XLA unless jit_compile=False, and "
                    f"the model's {kind} (line {layer.node.lineno}) has an XLA gradient "
                    f"that raises under determinism ({short(auto[0][1].op)})",
                    adds,
                )
    _check_jit(s, raisers)


def _check_jit(s: Script, raisers: list[tuple[Call, OpEntry]]) -> None:
    sites: list[tuple[int, str]] = []
    for c in s.calls:
        for k in c.node.keywords:
            if k.arg in ("jit_compile", "experimental_compile") and const(k.value) is True:
                sites.append((c.node.lineno, f"{k.arg}=True"))
        if (
            c.name
            and c.name.endswith("config.optimizer.set_jit")
            and c.node.args
            and const(c.node.args[0]) not in (False, None, 0, "", Missing)
        ):
            sites.append((c.node.lineno, "tf.config.optimizer.set_jit"))
    for line, key, value in s.env:
        if key == "TF_XLA_FLAGS" and value:
            m = _XLA_AUTO.search(value)
            if m and m.group(1) not in ("0", "-1"):
                sites.append((line, f"TF_XLA_FLAGS={value}"))
    when = [condition(s, item, c) for c, item in raisers] if sites else []  # once: the same for every site
    for line, what in sites:
        if raisers:
            layer, item = raisers[when.index(None)] if None in when else raisers[0]
            s.add(
                PY_JIT_COMPILE,
                line,
                f"{what} compiles with XLA, and {layer.name} (line {layer.node.lineno}) then raises under "
                f"determinism{only(min(when, key=bool))} ({short(item.op)}, {tf_range(item)})",
                "drop it, or compile with jit_compile=False",
                severity="warning" if all(when) else "error",
            )
        else:
            s.add(
                PY_JIT_COMPILE,
                line,
                f"{what} compiles with XLA, whose kernels the determinism switch does not fully cover",
                "drop it unless you checked the model is deterministic under XLA",
            )


CHECKS = (check_xla,)


def _add_jit_false(fix: Fixing, f: Finding) -> bool:
    """py-keras3-auto-xla: jit_compile=False in the compile() call of the finding's line (its jit_compile value
    replaced, or the keyword added after the last argument); False where a part spans lines."""
    edits = fix.edits
    for call in fix.calls_at(f.line):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "compile"):
            continue
        jit = next((k for k in call.keywords if k.arg == "jit_compile"), None)
        if jit is not None:
            v = jit.value
            if v.lineno != v.end_lineno or v.end_col_offset is None:
                return False
            edits.cuts.setdefault(v.lineno, []).append((v.col_offset, v.end_col_offset, "False"))
        else:
            parts: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
            if parts:
                last = max(parts, key=lambda p: (p.end_lineno or 0, p.end_col_offset or 0))
                if last.end_lineno is None or last.end_col_offset is None:
                    return False
                edits.cuts.setdefault(last.end_lineno, []).append(
                    (last.end_col_offset, last.end_col_offset, ", jit_compile=False")
                )
            else:
                if call.end_lineno is None or call.end_col_offset is None:
                    return False
                at = call.end_col_offset - 1
                edits.cuts.setdefault(call.end_lineno, []).append((at, at, "jit_compile=False"))
        fix.actions.append(f"line {f.line}: compile(..., jit_compile=False)")
        return True
    return False


def _only_compile_jit(fix: Fixing, line: int) -> bool:
    """Whether the only jit_compile=True on `line` is a compile() call's (the one the Keras 3 fix turns off)."""
    sites = [
        call
        for call in fix.calls_at(line)
        for k in call.keywords
        if k.arg in ("jit_compile", "experimental_compile")
        and isinstance(k.value, ast.Constant)
        and k.value.value is True
    ]
    return len(sites) == 1 and isinstance(sites[0].func, ast.Attribute) and sites[0].func.attr == "compile"


def _compile_jit_off(fix: Fixing, f: Finding) -> bool:
    """py-jit-compile where an op then raises (an error) and the line's only jit_compile=True is a compile()
    call's: jit_compile=False there, as for py-keras3-auto-xla (the model trains as without XLA); else commented."""
    return f.severity == "error" and _only_compile_jit(fix, f.line) and _add_jit_false(fix, f)


FIXES: dict[str, Fix] = {PY_KERAS3_AUTO_XLA.id: _add_jit_false, PY_JIT_COMPILE.id: _compile_jit_off}
FOLLOW_UPS: dict[str, Fix] = {}
STARTUP: dict[str, Startup] = {}
