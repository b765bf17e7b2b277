"""``h9eval compare RESULTS A B [--metric M ...] [--margin d | --margin METRIC=d ...] [--json]``
and ``h9eval compare RESULTS --list``."""

from __future__ import annotations

import argparse
import json

from h9eval.cli import add_command
from h9eval.analysis.compare import METRICS, compare, config_labels, metric_spec, shell_name
from h9eval.analysis.stats import ADJUSTMENTS, DEFAULT_LEVEL, DEFAULT_RESAMPLES, VERDICT_DEFINITIONS
from h9eval.core.errors import ConfigError
from h9eval.results.store import load_results, require_finished


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "compare",
        description="Configuration A against B on each metric: tasks paired, history modes and repeats nested "
        "inside a task, a percentile bootstrap interval of mean(A - B) over tasks, adjusted across the metrics "
        "asked for, and a verdict read from that interval. Verdicts: "
        + "; ".join(f"{k}: {v}" for k, v in VERDICT_DEFINITIONS.items()),
    )
    p.add_argument("results_dir", help="a sweep's results folder")
    p.add_argument(
        "a", nargs="?", default=None, help="configuration A (a label, or its unquoted form; --list shows both)"
    )
    p.add_argument("b", nargs="?", default=None, help="configuration B")
    p.add_argument(
        "--metric",
        action="append",
        default=None,
        metavar="M",
        help="metric to compare (repeatable; default retention): " + ", ".join(m.name for m in METRICS) + ", or 'all'",
    )
    p.add_argument(
        "--margin",
        action="append",
        default=None,
        metavar="d|METRIC=d",
        help="equivalence margin, for every metric or one (repeatable; 0 turns equivalence off; default 0.005 for "
        "retention, anchor_retention and tokens_saved, none for counts)",
    )
    p.add_argument(
        "--level", type=float, default=DEFAULT_LEVEL, help=f"family interval level (default {DEFAULT_LEVEL})"
    )
    p.add_argument("--adjust", choices=ADJUSTMENTS, default="holm", help="adjustment across the metrics (default holm)")
    p.add_argument(
        "--resamples", type=int, default=DEFAULT_RESAMPLES, help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})"
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--mode",
        default=None,
        metavar="HISTORY_MODE",
        help="compare only this history mode (default: pair within every mode)",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--list", action="store_true", help="list the configuration labels and exit")
    p.set_defaults(func=_run)


def _margins(values: list[str] | None) -> float | dict[str, float] | None:
    if not values:
        return None
    per: dict[str, float] = {}
    overall: float | None = None
    for v in values:
        name, sep, num = v.rpartition("=")
        try:
            d = float(num)
        except ValueError:
            raise ConfigError(f"--margin {v!r}: expected a number or METRIC=number") from None
        if not d >= 0:
            raise ConfigError(f"--margin {v!r}: the margin must be >= 0")
        if sep:
            per[metric_spec(name).name] = d
        else:
            overall = d
    if overall is not None:
        return {m.name: per.get(m.name, overall) for m in METRICS}
    return per


def _run(args: argparse.Namespace) -> int:
    res = require_finished(load_results(args.results_dir))  # --list included: no labels is not an answer
    if args.list:
        ok = res.runs[res.runs["status"] == "ok"]
        labels = sorted(set(config_labels(ok)))
        width = max(map(len, labels), default=0)
        for label in labels:
            # the second column is the same name in a form the shell takes without quotes
            print(f"{label:<{width}}  {shell_name(label)}" if shell_name(label) != label else label)
        return 0
    if args.a is None or args.b is None:
        raise ConfigError("give two configurations A and B (h9eval compare RESULTS --list shows them)")
    metrics = args.metric or ["retention"]
    if "all" in metrics:
        metrics = [m.name for m in METRICS]
    c = compare(
        res,
        args.a,
        args.b,
        metric=metrics,
        margin=_margins(args.margin),
        level=args.level,
        method=args.adjust,
        n_resamples=args.resamples,
        seed=args.seed,
        history_mode=args.mode,
    )
    if args.json:
        print(json.dumps(c.as_dict(), indent=2, sort_keys=True, default=str))
    else:
        print(c)
    return 0
