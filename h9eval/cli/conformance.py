"""``h9eval conformance [PATH ...]``: run harness9 reference cases."""

from __future__ import annotations

import argparse

from h9eval.harness9.conformance import run_conformance
from h9eval.core.paths import conformance_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("conformance", help="run harness9 conformance cases against the port")
    p.add_argument("paths", nargs="*", help="case files or folders (default: shared/reference/conformance)")
    p.add_argument("-v", "--verbose", action="store_true", help="list every difference of a failing case")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    report = run_conformance(args.paths or [str(conformance_dir())])
    for r in report.results:
        if not r.passed:
            print(r.one_line(max_diffs=len(r.differences) if args.verbose else 3))
    print(report.summary_line())
    return 1 if report.n_failed else 0
