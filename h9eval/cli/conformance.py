"""``h9eval conformance [PATH ...]``: run harness9 reference cases."""

from __future__ import annotations

import argparse

from h9eval.cli import add_command
from h9eval.harness9.conformance import CaseResult, run_conformance
from h9eval.core.paths import conformance_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "conformance")
    p.add_argument("paths", nargs="*", help="case files or folders (default: shared/reference/conformance)")
    p.add_argument("-v", "--verbose", action="store_true", help="list every difference of a failing case")
    p.add_argument(
        "--timing",
        action="store_true",
        help="print one JSON line per case before the summary: steps, nanoseconds inside the compaction calls (wall "
        "and CPU), median per tier",
    )
    p.add_argument(
        "--read-prompts",
        action="store_true",
        help="the scripted summarizer reads every prompt, as a model client does, so --timing includes building "
        "them (without it the port builds none; harness9's Go code builds each)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    def show(r: CaseResult) -> None:
        if not r.passed:
            print(r.one_line(max_diffs=len(r.differences) if args.verbose else 3))
        if args.timing and r.timing is not None:
            print(r.timing.json_line(), flush=True)

    report = run_conformance(args.paths or [str(conformance_dir())], on_case=show, read_prompts=args.read_prompts)
    print(report.summary_line())
    return 1 if report.n_failed else 0
