"""Property tests for the script audit and its fixer: on any script made of realistic training-script lines
(every hazard the fixer edits among them, in any order, with CRLF or LF endings and nesting), the audit never
fails, the fixed script parses, every line the fixer does not edit survives byte for byte and in order, the
mechanical findings are gone, and a second --fix changes nothing."""

from __future__ import annotations

import ast
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.audit import audit_script, target_for
from envpin.audit.python.fixer import FIXABLE, fix_script
from tests.props import examples

HEAD = [
    "import os",
    "import random",
    "import numpy as np",
    "import tensorflow as tf",
    "from tensorflow.keras import layers",
    "from tensorflow import keras",
]
BODY = [
    "ds = tf.data.Dataset.range(8)",
    "ds = ds.map(lambda x: x + 1, num_parallel_calls=4, deterministic=False)",
    "ds = ds.interleave(f, cycle_length=2,\n                   deterministic=False)",
    "ds = ds.map(aug, deterministic=False, num_parallel_calls=tf.data.AUTOTUNE)",
    "model = tf.keras.Sequential([layers.MaxPooling2D(), layers.Dense(1)])",
    "model.compile(optimizer='adam', loss='mse')",
    "model.compile(\n    optimizer='adam',\n    loss='mse',\n)",
    "model.compile('adam', 'mse', jit_compile='auto')",
    "model.fit(ds, epochs=2, workers=4, use_multiprocessing=True)",
    "y = tf.math.unsorted_segment_sum(data, ids, num_segments=3)",
    "os.environ['PYTHONHASHSEED'] = '0'",
    "os.environ['TF_CUDNN_USE_AUTOTUNE'] = '0'",
    "random.shuffle(files)",
    "seed = int(time.time())",
    "if True:\n    ds = ds.map(g, num_parallel_calls=2, deterministic=False)\n    model.fit(ds)",
    "def step(x):\n    with tf.GradientTape() as tape:\n        loss = model(x)\n    return tape",
    "x = (1 +\n     2)",
    "# a comment",
    "",
]


@settings(max_examples=examples(150), deadline=None)
@given(
    head=st.lists(st.sampled_from(HEAD), min_size=1, max_size=5, unique=True),
    body=st.lists(st.sampled_from(BODY), max_size=12),
    crlf=st.booleans(),
    tf=st.sampled_from(["1.15", "2.4", "2.5", "2.8", "2.16"]),
)
def test_fix_parses_keeps_lines_and_is_idempotent(head: list[str], body: list[str], crlf: bool, tf: str) -> None:
    eol = "\r\n" if crlf else "\n"
    text = eol.join(head + body).replace("\n", eol).replace("\r\r\n", "\r\n") + eol
    target = target_for(tf, "stock", None, f"--tf {tf}")
    findings = audit_script(text, "train.py", target)
    outcome = fix_script(text, "train.py", findings, target)
    ast.parse(outcome.text)
    left = {f.rule for f in audit_script(outcome.text, "train.py", target)}
    assert not left & FIXABLE
    kept = iter(outcome.text.splitlines(keepends=True))
    for line in text.splitlines(keepends=True):
        if "deterministic=False" in line or "compile(" in line or line.strip() in (")", "loss='mse',"):
            continue  # the lines the fixer may edit
        assert any(line == other for other in kept), line
    again = fix_script(outcome.text, "train.py", audit_script(outcome.text, "train.py", target), target)
    assert again.text == outcome.text
    assert_inserted_names_are_bound_above(text, outcome.text)


#: The statements --fix inserts (envpin.audit.python.fixer._insert): the switch and the global seeding.
INSERTED = re.compile(
    r"(\w+\.(config\.experimental\.enable_op_determinism|keras\.utils\.set_random_seed|"
    r"random\.set_seed|compat\.v1\.set_random_seed)\(0?\)|random\.seed\(0\)|numpy\.random\.seed"
    r"\(0\)|os\.environ\[\"\w+\"\] = \"1\")"
)


def assert_inserted_names_are_bound_above(before: str, after: str) -> None:
    """Each statement --fix inserted uses only names an import above it binds: the fixed script must not stop
    with NameError before training starts."""
    original = set(before.splitlines())
    lines = after.splitlines()
    bound: set[str] = set()
    for node in ast.parse(after).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".", 1)[0] for a in node.names)
        elif lines[node.lineno - 1] not in original and INSERTED.fullmatch(lines[node.lineno - 1]):
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            assert used <= bound, (node.lineno, used - bound, after)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.sampled_from([*list("tf.()=:,\n #'\"abcxy0123_\t\\[]{}"), "import ", "def ", "tf.", "\n    "]), max_size=120
    ).map("".join)
)
def test_any_text_gives_findings_or_a_parse_error_never_an_exception(text: str) -> None:
    for f in audit_script(text, "x.py", target_for("2.6", "stock", None, "--tf 2.6")):
        assert f.line >= 1 and f.rule
