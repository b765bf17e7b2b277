"""``h9eval sweep SPEC.toml``: run a sweep (see :mod:`h9eval.sweeps.sweep`; the spec: :mod:`h9eval.sweeps.spec`) and say where results are.

Exit status: 0 when every cell is ok, 1 when some cells failed (rerun the same command to
retry them: finished cells are kept), 2 for an invalid spec, 130 when interrupted.
"""

from __future__ import annotations

import argparse

from h9eval.cli.run import add_call_limit_options, call_limits
from h9eval.sweeps.sweep import sweep


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a grid of replays from a TOML spec (resumable)")
    p.add_argument("spec", help="sweep spec (TOML); see examples/sweep-small.toml")
    p.add_argument("--out", default=None, help="results folder (default results/<name>/)")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default min(2, CPUs); 0 = in this process)")
    p.add_argument("--scheduler", default=None, metavar="ADDR|local", help="run on Dask: 'local' (LocalCluster) or tcp://host:port")
    p.add_argument("--skip-invalid", action="store_true", help="skip grid cells the policy rejects instead of failing")
    p.add_argument("--no-resume", action="store_true", help="rerun every cell, even those already finished")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--max-cells", type=int, default=None, help="refuse a spec of more cells (default 100,000)")
    add_call_limit_options(p)  # over the spec's request_timeout_s / max_retries
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    r = sweep(
        args.spec,
        out_dir=args.out,
        workers=args.workers,
        scheduler=args.scheduler,
        resume=not args.no_resume,
        progress=not args.no_progress,
        skip_invalid=args.skip_invalid,
        call_limits=call_limits(args),
        **({} if args.max_cells is None else {"max_cells": args.max_cells}),
    )
    print(f"sweep {r.name}: {r.n_cells} cells: {r.ok} ok, {r.failed} failed, {len(r.skipped)} skipped (invalid)")
    print(f"  {r.ran} run now, {r.reused} reused from an earlier run; {r.wall_time_s:.1f} s")
    for s in r.skipped:
        print(f"  skipped {s.where}: {s.error}")
    for rid, err in r.failures:
        print(f"  failed {rid}: {err}")
    print(f"results: {r.out_dir}  (h9eval.results.load_results({str(r.out_dir)!r}))")
    return 1 if r.failed else 0
