"""``h9eval report RESULTS_DIR [--out DIR]`` (a sweep's folder or one run's) and
``h9eval report --records DIR --out DIR``."""

from __future__ import annotations

import argparse

from h9eval.cli import add_command
from h9eval.analysis.report import write_report, write_report_from_records
from h9eval.core.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "report")
    p.add_argument(
        "results_dir", nargs="?", default=None, help="a sweep's results folder, or one run's (h9eval run --out)"
    )
    p.add_argument(
        "--records",
        default=None,
        metavar="DIR",
        help="harness9 compaction_records folder (or one .jsonl) instead of a sweep",
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output folder (default RESULTS_DIR itself: RESULTS_DIR/report.html; required with --records)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--n-boot",
        type=int,
        default=1000,
        metavar="N",
        help="bootstrap resamples per interval (default 1,000; fewer is faster and coarser)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:

    if args.records is not None:
        if args.results_dir is not None:
            raise ConfigError("give either RESULTS_DIR or --records DIR, not both")
        if args.out is None:
            raise ConfigError("--records needs --out DIR")
        paths = write_report_from_records(args.records, args.out)
    else:
        if args.results_dir is None:
            raise ConfigError("give a sweep's or a run's RESULTS_DIR, or --records DIR --out DIR")
        if args.n_boot < 100:
            raise ConfigError(
                f"--n-boot must be at least 100 (an interval from fewer resamples is noise), got {args.n_boot}"
            )
        paths = write_report(args.results_dir, args.out, seed=args.seed, n_boot=args.n_boot)
    print(f"wrote {paths.html}")
    print(f"wrote {paths.markdown} ({len(paths.figures)} figures in {paths.out_dir / 'figures'})")
    return 0
