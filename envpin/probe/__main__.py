"""``python -m envpin.probe``: write the environment report (JSON and Markdown).

The determinism self-test runs by default where TensorFlow is importable (``--no-selftest`` skips it,
``--quick`` shortens it); without TensorFlow the report says why it did not run. ``--selftest`` insists.

Exit status: 0 report written; 1 the self-test ran and did not pass, or ``--selftest`` was given and it
could not run; 2 bad arguments or unwritable output.
"""

import argparse
import sys
from typing import List, Optional

from envpin.probe.report import collect, one_file, tensorflow_missing, write_reports


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m envpin.probe",
        description="Record everything that can change a training result, as canonical JSON and Markdown.",
    )
    p.add_argument("--out", metavar="DIR", help="write <hostname>-<UTC time>-<pid>.json and .md into DIR")
    p.add_argument("--json", metavar="FILE", help="write the JSON report to FILE ('-' for stdout)")
    p.add_argument("--markdown", metavar="FILE", help="write the Markdown report to FILE ('-' for stdout)")
    choice = p.add_mutually_exclusive_group()
    choice.add_argument(
        "--selftest",
        dest="selftest",
        action="store_const",
        const=True,
        default=None,
        help="run the determinism self-test, and fail when it cannot run (default: run it "
        "when TensorFlow is importable, else record why not)",
    )
    choice.add_argument("--no-selftest", dest="selftest", action="store_const", const=False, help="fingerprint only")
    p.add_argument("--quick", action="store_true", help="shorter self-test (the fingerprint is never reduced)")
    p.add_argument("--compare", action="store_true", help="self-test: also run the op battery with determinism off")
    p.add_argument("--with-tf", action="store_true", help="import TensorFlow to read its runtime settings")
    p.add_argument(
        "--anonymize",
        action="store_true",
        help="replace the host name, user name and home folder by <host>, <user> and <home>",
    )
    p.add_argument("--root", metavar="DIR", help="read /proc, /sys and /etc under DIR (diagnostics)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    both = one_file(args.json, args.markdown)
    if both is not None:
        sys.stderr.write("error: --json and --markdown both name %s: one report would replace the other\n" % both)
        sys.stderr.write("hint: give each report its own file\n")
        return 2
    if args.selftest or (args.selftest is None and tensorflow_missing() is None):
        sys.stderr.write(
            "running the determinism self-test%s (--no-selftest skips it)\n" % (" (quick)" if args.quick else "")
        )
    report = collect(
        selftest=args.selftest,
        quick=args.quick,
        compare=args.compare,
        with_tf=args.with_tf,
        root=args.root,
        anonymize=args.anonymize,
    )
    try:
        write_reports(report, out_dir=args.out, json_path=args.json, markdown_path=args.markdown)
    except OSError as exc:
        sys.stderr.write("error: cannot write the report: %s\n" % exc)
        sys.stderr.write("hint: the folder it goes in must exist and be writable\n")
        return 2
    if "selftest" not in report:
        return 0
    from envpin.probe.selftest.run import verdict

    failed, line = verdict(report["selftest"], insisted=bool(args.selftest))
    sys.stderr.write(line + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
