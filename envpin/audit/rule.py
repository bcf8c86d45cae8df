"""What an audit rule is: one frozen record per hazard, holding every fact about it in one place.

The record is data only (this module imports nothing of envpin but envpin.record), so the docs generator, the
configuration (ignore lists), SARIF and --fix read the same facts the checks report with, and any module may
import a rule without importing the checking machinery. The rules themselves live in envpin/audit/rules/, one module per
family, each next to the check that reports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envpin.record import Value

SEVERITIES = ("error", "warning", "info")
#: What an audited file is written in: a Dockerfile, or a Python training script.
LANGUAGES = ("dockerfile", "python")
_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*\Z")
#: An inline suppression: `# envpin: ignore=RULE,RULE` on a finding's line or the comment line above it
#: (envpin.audit.config reads it; the fixers keep their notes clear of it).
IGNORE_MARK = re.compile(r"#\s*envpin:\s*ignore\s*=\s*([A-Za-z0-9_,\s-]+)")

#: A digest in the examples: a placeholder, obviously not an image (the docs say to take the real one).
EXAMPLE_DIGEST = "sha256:" + "0" * 64
#: The start of most examples: a produced image no rule faults (NGC 22.03 is TensorFlow 2.8, pinned by digest,
#: with the recipe's ENV), so each example shows the one hazard its rule is about.
EXAMPLE_BASE = (
    f"FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3@{EXAMPLE_DIGEST}\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule(Value):
    """One hazard: its id and severity (what findings carry), its docs, and how --fix and suppressions treat it.

    A check reports it as `ctx.add(RULE, ...)`, so a misspelt rule is an import error, not a KeyError at run time.
    """

    #: The id findings, suppressions, ignore lists and SARIF name it by; its section's anchor in docs/audit.md.
    id: str
    #: error, warning or info: the default of its findings (a check may lower one, see d9m-env-missing).
    severity: str
    #: One line: SARIF's shortDescription and the docs' summary.
    title: str
    #: What it finds, precisely (markdown): which instructions, options and values.
    finds: str
    #: Why it matters and what to do by hand (plain text): SARIF's help text.
    why: str
    #: A Dockerfile it fires on.
    bad: str
    #: The same Dockerfile done right: the rule does not fire on it.
    good: str
    #: What `envpin audit --fix` does about it and how safe that is (markdown).
    autofix: str
    #: Where the facts come from or more is said: (title, URL, or an anchor of docs/audit.md, or a docs page).
    references: tuple[tuple[str, str], ...]
    #: --fix changes the file for it (the other rules get a comment above their line).
    fixable: bool = False
    #: `# envpin: ignore=` and `ignore = [...]` may silence it (not so a line the builder rejects).
    suppressible: bool = True
    #: What the rule reads and its examples are written in: "dockerfile", or "python" (training scripts).
    language: str = "dockerfile"
    #: The TensorFlow MAJOR.MINOR a Python rule's examples are judged against (`--tf`); None: any or none.
    example_tf: str | None = None

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise ValueError(f"rule id {self.id!r}: lower-case words joined by '-'")
        if self.language not in LANGUAGES:
            raise ValueError(f"rule {self.id}: language {self.language!r} is not one of {', '.join(LANGUAGES)}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"rule {self.id}: severity {self.severity!r} is not one of {', '.join(SEVERITIES)}")
