"""``h9eval tune --window 200000 --tasks SPEC [SPEC...] [--model NAME] [--out DIR]``."""

from __future__ import annotations

import argparse
import json
import sys

from h9eval.cli import add_command
from h9eval.studies.tune import load_models, tune
from h9eval.core.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "tune")
    p.add_argument(
        "--tasks",
        nargs="+",
        required=True,
        metavar="SPEC",
        help="task specs (synthetic:small:0, recorded paths, task JSONL, DB)",
    )
    p.add_argument("--window", type=int, default=None, help="context window in tokens (default: the --model's)")
    p.add_argument(
        "--model", default=None, help="model name from the registry (window and prices), e.g. claude-sonnet-4-6"
    )
    p.add_argument("--models-file", default=None, help="TOML/JSON file adding or overriding models")
    p.add_argument(
        "--grid", default=None, help='JSON grid, e.g. \'{"warn_frac": [0.5, 0.6], "min_tail_messages": [4, 6]}\''
    )
    p.add_argument("--refine-rounds", type=int, default=1, help="local refinement rounds after the grid (default 1)")
    p.add_argument("--max-summarizer-calls", type=float, default=None, help="bound on mean summarizer calls per run")
    p.add_argument("--max-cost-usd", type=float, default=None, help="bound on mean summarizer cost per run (USD)")
    p.add_argument("--history-mode", default="write_back", choices=["view", "write_back"])
    p.add_argument(
        "--objective",
        default="retention",
        choices=["retention", "cost_usd"],
        help="among configs whose retention is not distinguishable from the best: the most robust (retention, "
        "default) or the cheapest in dollars per task as the provider bills them (cost_usd; retention is the guard)",
    )
    p.add_argument(
        "--holdout-frac",
        type=float,
        default=0.25,
        help="share of tasks held out of the search and replayed with the recommendation (default 0.25)",
    )
    p.add_argument("--split-seed", type=int, default=0, help="seed of the tuning/held-out split (default 0)")
    p.add_argument(
        "--safety-margin-frac",
        type=float,
        default=0.05,
        help="headroom the worst task's peak tokens sent (tool schemas counted) must keep below the window (default "
        "0.05)",
    )
    p.add_argument(
        "--allow-unexercised",
        action="store_true",
        help="tune even when some tasks never reach the warn tier at this window (a loud warning instead of an error)",
    )
    p.add_argument(
        "--cv-folds",
        type=int,
        default=0,
        help="k-fold cross-validation of the choice over the tuning tasks (0 = none; default 0)",
    )
    p.add_argument("--workers", type=int, default=1, help="sweep worker processes (1 = in-process)")
    p.add_argument("--out", default=None, help="folder for sweeps, recommended.toml, evidence.csv, tune.png")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:

    grid = None
    if args.grid:
        try:
            grid = json.loads(args.grid)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--grid is not JSON ({e.msg})") from None
        if not isinstance(grid, dict):
            raise ConfigError("--grid must be a JSON object of parameter -> list of values")
    r = tune(
        args.tasks,
        window=args.window,
        model=args.model,
        grid=grid,
        refine_rounds=args.refine_rounds,
        max_summarizer_calls=args.max_summarizer_calls,
        max_cost_usd=args.max_cost_usd,
        out_dir=args.out,
        workers=args.workers,
        models=load_models(args.models_file),
        history_mode=args.history_mode,
        objective=args.objective,
        holdout_frac=args.holdout_frac,
        split_seed=args.split_seed,
        safety_margin_frac=args.safety_margin_frac,
        allow_unexercised=args.allow_unexercised,
        cv_folds=args.cv_folds,
    )
    print(r.toml, end="")
    # the held-out check, the thresholds kept, the tied set and the caveat next to the recommendation
    for line in r.lines():
        print(line)
    for w in r.warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    for k, p in r.paths.items():
        print(f"wrote {k}: {p}")
    return 0 if r.feasible and (r.holdout is None or r.holdout.promise_kept) else 1
