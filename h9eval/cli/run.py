"""``h9eval run``: replay one task through one policy and write its results."""

from __future__ import annotations

import argparse
import json
from typing import Any

from h9eval.core.errors import ConfigError
from h9eval.runs.run import run_task


def parse_set(items: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when they parse (numbers, true, lists)."""
    out: dict[str, Any] = {}
    for it in items:
        key, sep, raw = it.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {it!r}: expected key=value")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def parse_indices(raw: str, option: str) -> tuple[int, ...]:
    """``"3,10"`` → ``(3, 10)``; anything else is a :class:`ConfigError` naming the item."""
    out = []
    for x in raw.split(","):
        if not x.strip():
            continue
        try:
            v = int(x)
        except ValueError:
            raise ConfigError(f"{option}: expected comma-separated call indices (integers >= 0), got {x.strip()!r}") from None
        if v < 0:
            raise ConfigError(f"{option}: call indices must be >= 0, got {v}")
        out.append(v)
    return tuple(out)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="replay a task through a policy, call by call")
    p.add_argument("--task", required=True, help="PATH (recorded session, task JSONL, harness9 DB[#session]) or synthetic:PRESET[:SEED]")
    p.add_argument("--policy", default="progressive", help="policy name (see `h9eval policies`)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="policy parameter (repeatable)")
    p.add_argument("--summarizer", default="offline", help="offline (default), offline_free_text, anthropic, anthropic_free_text")
    p.add_argument("--summarizer-cache", default=None, help="SQLite response cache path (shared by runs)")
    p.add_argument("--history-mode", default="view", choices=["view", "write_back"])
    p.add_argument("--writeback-rules", default="v3", choices=["v2", "v3"])
    p.add_argument("--window", type=int, default=None, help="the run's context window (tokens); sets the policy's context_window_tokens unless --set gives another")
    p.add_argument("--compact-at", default="", help="comma-separated call indices for a manual /compact")
    p.add_argument("--probes", default="", help="scorers to probe with, e.g. recall or recall,semantic,llm")
    p.add_argument("--probe-every", type=int, default=None, help="also probe every K calls")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    manual = parse_indices(args.compact_at, "--compact-at")
    results = run_task(
        args.task,
        args.policy,
        params=parse_set(args.set),
        summarizer=args.summarizer,
        summarizer_cache=args.summarizer_cache,
        history_mode=args.history_mode,
        writeback_rules=args.writeback_rules,
        window=args.window,
        manual_compact_at=manual,
        probes=[s for s in args.probes.split(",") if s],
        probe_every_k=args.probe_every,
        out_dir=args.out,
    )
    for r in results:
        s = r.summary()
        print(f"run {s['run_id']} -> {r.out_dir}")
        for k, v in s.items():
            if k != "run_id":
                print(f"  {k:>22}: {v}")
    return 0
