"""``h9eval sweep SPEC.toml``: run a sweep (see :mod:`h9eval.sweeps.sweep`; the spec: :mod:`h9eval.sweeps.spec`)
and say where results are.
``h9eval sweep --task FILE --window W``: every registered policy at its defaults on FILE at
window W, and a table of them (:func:`h9eval.studies.all_policies.compare_all_policies`).

Exit status: 0 when every cell is ok, 1 when some cells failed (rerun the same command to
retry them: finished cells are kept), 2 for an invalid spec, 3 when ``--max-cost-usd`` stopped it
(run the same command again to continue), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import math
import sys

from h9eval.cli import add_command
from h9eval.studies.all_policies import compare_all_policies
from h9eval.cli.run import add_call_limit_options, call_limits
from h9eval.core.errors import ConfigError
from h9eval.sweeps.estimate import estimate_sweep
from h9eval.sweeps.spec import load_spec
from h9eval.sweeps.sweep import SweepResult, sweep


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "sweep")
    p.add_argument("spec", nargs="?", default=None, help="sweep spec (TOML); see examples/sweep-small.toml")
    p.add_argument(
        "--task",
        action="append",
        default=None,
        metavar="PATH|SPEC",
        help="instead of a spec: every registered policy at its defaults on this task (repeatable; a file, a folder of "
        "sessions, "
        "synthetic:PRESET:SEED), at --window, then a table of them",
    )
    p.add_argument("--window", type=int, default=None, help="with --task: the context window (tokens)")
    p.add_argument(
        "--history-mode",
        action="append",
        default=None,
        choices=["view", "write_back"],
        help="with --task: history mode(s) (default view)",
    )
    p.add_argument("--out", default=None, help="results folder (default results/<name>/)")
    p.add_argument(
        "--workers", type=int, default=None, help="worker processes (default min(2, CPUs); 0 = in this process)"
    )
    p.add_argument(
        "--scheduler", default=None, metavar="ADDR|local", help="run on Dask: 'local' (LocalCluster) or tcp://host:port"
    )
    p.add_argument("--skip-invalid", action="store_true", help="skip grid cells the policy rejects instead of failing")
    p.add_argument("--no-resume", action="store_true", help="rerun every cell, even those already finished")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--max-cells", type=int, default=None, help="refuse a spec of more cells (default 100,000)")
    add_call_limit_options(p)  # over the spec's request_timeout_s / max_retries
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print the expected model calls, tokens and dollars per configuration from an offline dry run "
        "of the grid, and call nothing",
    )
    p.add_argument(
        "--max-cost-usd",
        type=float,
        default=None,
        metavar="USD",
        help="stop before the model call that would take this invocation's spending past USD (over the spec's "
        "max_cost_usd); rerun to continue",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        default=None,
        help="send the summaries through Anthropic's Message Batches API (half price; batched across cells; resumable)",
    )
    p.add_argument(
        "--batch-poll-interval-s",
        type=float,
        default=None,
        metavar="S",
        help="with --batch: seconds between status checks of a batch in flight (default 60)",
    )
    p.add_argument(
        "--batch-deadline-s",
        type=float,
        default=None,
        metavar="S",
        help="with --batch: stop polling a batch S seconds after its submission, cancel it and let its "
        "summaries fall back (default 86400, when Anthropic expires a batch)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a cell fell back on every summary it asked for (a bad key, no network)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if (args.spec is None) == (args.task is None):
        raise ConfigError(
            "give a sweep spec (SPEC.toml) or --task PATH --window TOKENS (every policy on that task), not both"
        )
    if args.task is not None:
        return _all_policies(args)
    if args.window is not None or args.history_mode is not None:
        raise ConfigError("--window and --history-mode go with --task; a spec sets its own window and history_modes")
    if args.estimate:
        est = estimate_sweep(args.spec, call_limits=call_limits(args), skip_invalid=args.skip_invalid)
        print(est)
        cap = args.max_cost_usd if args.max_cost_usd is not None else load_spec(args.spec).max_cost_usd
        if cap is not None and not math.isnan(est.usd):
            fits = "covers" if est.usd <= cap else "does NOT cover"
            print(
                f"max_cost_usd ${cap:g} {fits} the expected ${est.usd:.4f} (the run stops before the call that would "
                "pass it)"
            )
        return 0
    r = sweep(
        args.spec,
        out_dir=args.out,
        workers=args.workers,
        scheduler=args.scheduler,
        resume=not args.no_resume,
        progress=not args.no_progress,
        skip_invalid=args.skip_invalid,
        call_limits=call_limits(args),
        max_cost_usd=args.max_cost_usd,
        batch=args.batch,
        batch_poll_interval_s=args.batch_poll_interval_s,
        batch_deadline_s=args.batch_deadline_s,
        **({} if args.max_cells is None else {"max_cells": args.max_cells}),
        on_failure="return",  # the failed cells are listed below, and the exit status is 1
    )
    _print_result(r)
    if r.stopped:
        print(
            f"STOPPED by the spending cap: {r.stopped}; {r.n_cells - r.ok - r.failed} cells left unfinished; "
            "run the same command again to continue"
        )
        return 3
    if r.fell_back:
        print(
            f"WARNING: {len(r.fell_back)} of {r.ok} ok cells fell back on every summary they asked for (first: "
            f"{r.fell_back[0]}); "
            "their numbers measure harness9's truncation fallback, not the summarizer (the runs table's fallbacks, the "
            "calls "
            "table's fallback_cause say why)",
            file=sys.stderr,
        )
    return 1 if r.failed or (r.fell_back and args.strict) else 0


def _all_policies(args: argparse.Namespace) -> int:
    if args.window is None:
        raise ConfigError("--task needs --window TOKENS (the context window every policy runs at)")
    a = compare_all_policies(
        args.task,
        window=args.window,
        out_dir=args.out,
        workers=args.workers,
        history_modes=args.history_mode or ("view",),
        progress=not args.no_progress,
    )
    print(a)
    return 0


def _print_result(r: SweepResult) -> None:
    print(f"sweep {r.name}: {r.n_cells} cells: {r.ok} ok, {r.failed} failed, {len(r.skipped)} skipped (invalid)")
    print(f"  {r.ran} run now, {r.reused} reused from an earlier run; {r.wall_time_s:.1f} s")
    for s in r.skipped:
        print(f"  skipped {s.where}: {s.error}")
    for rid, err in r.failures:
        print(f"  failed {rid}: {err}")
    print(f"results: {r.out_dir}  (h9eval.results.load_results({str(r.out_dir)!r}))")
