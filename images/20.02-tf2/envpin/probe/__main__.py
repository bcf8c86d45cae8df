"""``python -m envpin.probe``: write the environment report (JSON and Markdown).

Exit status: 0 report written; 1 the self-test ran and did not pass; 2 bad arguments or unwritable output.
"""

import argparse
import sys
from typing import List, Optional

from envpin.probe.report import collect, write_reports


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m envpin.probe",
        description="Record everything that can change a training result, as canonical JSON and Markdown.",
    )
    p.add_argument("--out", metavar="DIR", help="write <hostname>-<UTC time>-<pid>.json and .md into DIR")
    p.add_argument("--json", metavar="FILE", help="write the JSON report to FILE ('-' for stdout)")
    p.add_argument("--markdown", metavar="FILE", help="write the Markdown report to FILE ('-' for stdout)")
    p.add_argument("--selftest", action="store_true", help="also run the determinism self-test (imports TF)")
    p.add_argument("--quick", action="store_true", help="shorter self-test (the fingerprint is never reduced)")
    p.add_argument("--compare", action="store_true", help="self-test: also run the op battery with determinism off")
    p.add_argument("--with-tf", action="store_true", help="import TensorFlow to read its runtime settings")
    p.add_argument("--root", metavar="DIR", help="read /proc, /sys and /etc under DIR (diagnostics)")
    return p


def _failed(result: object) -> bool:
    """The self-test module decides what counts as a failure (its problems()); a self-test that could not
    run at all is one too."""
    if not isinstance(result, dict):
        return False
    if "error" in result:
        return True
    try:
        from envpin.probe import selftest as module

        return bool(module.problems(result))
    except Exception:
        return result.get("passed") is False


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    report = collect(selftest=args.selftest, quick=args.quick, compare=args.compare,
                     with_tf=args.with_tf, root=args.root)
    try:
        write_reports(report, out_dir=args.out, json_path=args.json, markdown_path=args.markdown)
    except OSError as exc:
        sys.stderr.write("error: cannot write the report: %s\n" % exc)
        return 2
    if args.selftest and _failed(report.get("selftest")):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
