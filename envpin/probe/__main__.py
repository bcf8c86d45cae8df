"""``python -m envpin.probe``: write the environment report (JSON and Markdown).

The determinism self-test runs by default where TensorFlow is importable (``--no-selftest`` skips it,
``--quick`` shortens it, ``--replicas N`` adds the multi-replica self-test); without TensorFlow the report
says why it did not run. ``--selftest`` insists.

Exit status: 0 report written; 1 the self-test ran and did not pass, or ``--selftest`` was given and it
could not run; 2 bad arguments or unwritable output, or the self-test did not finish in time (inconclusive:
the report is written and names the child that ran out of time).
"""

import argparse
import sys
from typing import List, Optional

from envpin.probe.replicas import replica_count
from envpin.probe.report import collect, one_file, tensorflow_missing, write_reports


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


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
    p.add_argument(
        "--replicas",
        type=replica_count,
        default=None,
        metavar="N",
        help="self-test: also MirroredStrategy over N devices (every GPU, or the CPU split) and MWMS over two workers",
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="self-test: CPU seconds each child may use (default: ENVPIN_SELFTEST_TIMEOUT or 600; wall: 4x)",
    )
    p.add_argument("--with-tf", action="store_true", help="import TensorFlow to read its runtime settings")
    p.add_argument(
        "--anonymize",
        action="store_true",
        help="replace the host name, user name and home folder by <host>, <user> and <home>",
    )
    p.add_argument("--root", metavar="DIR", help="read /proc, /sys and /etc under DIR (diagnostics)")
    p.add_argument(
        "--no-check-files",
        dest="check_files",
        action="store_false",
        help="leave out hashing every installed file against its RECORD (seconds with TensorFlow installed)",
    )
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    both = one_file(args.json, args.markdown)
    if both is not None:
        sys.stderr.write("error: --json and --markdown both name %s: one report would replace the other\n" % both)
        sys.stderr.write("hint: give each report its own file\n")
        return 2
    if args.replicas and args.selftest is False:
        sys.stderr.write("error: --replicas adds to the self-test, which --no-selftest leaves out\n")
        sys.stderr.write("hint: drop --replicas, or --no-selftest\n")
        return 2
    if args.selftest or (args.selftest is None and tensorflow_missing() is None):
        sys.stderr.write(
            "running the determinism self-test%s (--no-selftest skips it)\n" % (" (quick)" if args.quick else "")
        )
    report = collect(
        selftest=args.selftest,
        check_files=args.check_files,
        quick=args.quick,
        compare=args.compare,
        with_tf=args.with_tf,
        root=args.root,
        anonymize=args.anonymize,
        replicas=args.replicas,
        timeout=args.timeout,
    )
    try:
        write_reports(report, out_dir=args.out, json_path=args.json, markdown_path=args.markdown)
    except OSError as exc:
        sys.stderr.write("error: cannot write the report: %s\n" % exc)
        sys.stderr.write("hint: the folder it goes in must exist and be writable\n")
        return 2
    if "selftest" not in report:
        return 0
    from envpin.probe.selftest.run import timed_out, verdict

    failed, line = verdict(report["selftest"], insisted=bool(args.selftest))
    if not failed and timed_out(report["selftest"]):
        # Unfinished, not failed: the report is written and says which child ran out of time.
        sys.stderr.write("error: %s\n" % line)
        sys.stderr.write("hint: raise --timeout (CPU seconds per child) or run on a less loaded machine\n")
        return 2
    sys.stderr.write(line + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
