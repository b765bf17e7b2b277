"""``h9eval demo``: the main job (see :mod:`h9eval.cli.demo_job`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="conformance, a step-by-step compaction, the demo sweep and its report")
    p.add_argument("--out", default="results/demo", help="results folder (default results/demo)")
    p.add_argument("--workers", type=int, default=None)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from h9eval.cli.demo_job import run_demo

    run_demo(args.out, workers=args.workers)
    return 0
