"""``h9eval run``: replay one task through one policy and write its results (:func:`h9eval.runs.run.run_task`),
or (``--world``) run one closed-loop episode of a world with an agent (:func:`h9eval.runs.world.run_world`).
Both build the run's :class:`~h9eval.runs.spec.RunSpec` and run it with :func:`~h9eval.runs.execute.execute`."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import sys
from typing import TYPE_CHECKING, Any

from h9eval.cli import add_command
from h9eval.analysis.metrics import tokens_saved
from h9eval.compaction.policies import read_policy_file
from h9eval.compaction.step import HISTORY_MODES, WRITEBACK_RULES
from h9eval.core.anthropic import (
    DEFAULT_BREAKER_FAILURES,
    DEFAULT_MAX_RETRY_AFTER_S,
    MAX_RETRIES_LIMIT,
    MAX_RETRY_AFTER_LIMIT_S,
    CallLimits,
)
from h9eval.core.errors import ConfigError
from h9eval.probes.drift import DEFAULT_MAX_PROBES
from h9eval.runs.execute import fallback_warning
from h9eval.runs.run import run_task

if TYPE_CHECKING:
    import pandas as pd


UNPRICED = "unpriced (a model without a price; how to price it: docs/real-models.md)"


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
            raise ConfigError(
                f"{option}: expected comma-separated call indices (integers >= 0), got {x.strip()!r}"
            ) from None
        if v < 0:
            raise ConfigError(f"{option}: call indices must be >= 0, got {v}")
        out.append(v)
    return tuple(out)


def add_call_limit_options(p: argparse.ArgumentParser) -> None:
    """``--request-timeout-s``, ``--max-retries``, ``--max-retry-after-s`` and the rest: every command
    that can call a model has them."""
    p.add_argument(
        "--request-timeout-s",
        type=float,
        default=None,
        metavar="S",
        help="seconds per model request attempt (Anthropic summarizer, llm probes, live agent; default 60)",
    )
    p.add_argument(
        "--max-retries",
        type=int,
        default=None,
        metavar="N",
        help=f"retries of a failed model request (429/5xx/timeouts), 0-{MAX_RETRIES_LIMIT} (default 2)",
    )
    p.add_argument(
        "--max-retry-after-s",
        type=float,
        default=None,
        metavar="S",
        help=f"the longest retry-after a retry waits for; a server asking for longer ends the call and the "
        f"summary falls back, 0-{MAX_RETRY_AFTER_LIMIT_S:g} (default {DEFAULT_MAX_RETRY_AFTER_S:g})",
    )
    p.add_argument(
        "--base-url",
        default=None,
        metavar="URL",
        help="an Anthropic-compatible endpoint for every model request (vLLM, Ollama, llama.cpp's server: "
        "see the README); default $ANTHROPIC_BASE_URL, else the Anthropic API",
    )
    p.add_argument("--summarizer-model", default=None, metavar="MODEL", help="the anthropic summarizers' model")
    p.add_argument("--scorer-model", default=None, metavar="MODEL", help="the llm scorer's model")
    p.add_argument("--agent-model", default=None, metavar="MODEL", help="the live agent's model (--agent anthropic)")
    p.add_argument(
        "--breaker-failures",
        type=int,
        default=None,
        metavar="N",
        help=f"stop calling a model after N consecutive failed calls (timeouts, 5xx, connection errors) "
        f"for the rest of the run; policies fall back (default {DEFAULT_BREAKER_FAILURES}; 0 = never)",
    )


def call_limits(args: argparse.Namespace) -> CallLimits | None:
    """The :class:`CallLimits` the options give (``None`` when none was given)."""
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(CallLimits)}
    if all(v is None for v in given.values()):
        return None
    return CallLimits(**given)


#: the closed loop's worlds, imported for ``--world`` only: worlds, agents and their patterns are a
#: tenth of a 10-call task run's CPU
_WORLDS = "h9eval.closedloop.worlds"
_WORLD_RUNS = "h9eval.runs.world"


class _WorldOption(argparse.Action):
    """``--world KIND:SEED``, whose help lists the registered worlds only when help is printed: the
    closed loop (:data:`_CLOSED_LOOP`) is not loaded for a task run."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, *_: Any) -> None:
        setattr(namespace, self.dest, values)

    @property  # type: ignore[override]
    def help(self) -> str:
        kinds = importlib.import_module(_WORLDS).world_registry()
        return f"closed loop instead of a task: KIND:SEED ({', '.join(kinds)})"

    @help.setter
    def help(self, _: object) -> None:
        pass  # argparse.Action.__init__ assigns help=None; the property above is the text


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "run")
    p.add_argument(
        "--task",
        default=None,
        help="PATH (recorded session, task JSONL, harness9 DB[#session]) or synthetic:PRESET[:SEED]",
    )
    p.add_argument("--world", default=None, action=_WorldOption)
    p.add_argument(
        "--scale",
        default="small",
        choices=["small", "default"],  # h9eval.runs.world.SCALES, not imported for a task run
        help="with --world: small (default: the parameters as given) or default (the family's default scale: "
        "its parameters, window and step budget)",
    )
    p.add_argument(
        "--agent",
        default="scripted",
        help="with --world: scripted (default), scripted:raw_only, scripted:last_k or anthropic",
    )
    p.add_argument(
        "--agent-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --world: an agent parameter (repeatable), e.g. cassette=episode.jsonl for anthropic",
    )
    p.add_argument(
        "--world-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --world: a world parameter (repeatable), e.g. hops=4",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="with --world: agent steps before the episode is cut off (default 60, or the scale's)",
    )
    p.add_argument(
        "--policy", default=None, help="policy name (see `h9eval policies`; default progressive, harness9's)"
    )
    p.add_argument(
        "--policy-file",
        default=None,
        metavar="FILE",
        help="the policy and its parameters from a TOML [policy] table (what `h9eval tune` writes: recommended.toml) "
        "or JSON; --set overrides",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="policy parameter (repeatable)")
    p.add_argument(
        "--summarizer", default="offline", help="offline (default), offline_free_text, anthropic, anthropic_free_text"
    )
    p.add_argument("--summarizer-cache", default=None, help="SQLite response cache path (shared by runs)")
    p.add_argument("--history-mode", default="view", choices=HISTORY_MODES)
    p.add_argument("--writeback-rules", default="v3", choices=WRITEBACK_RULES)
    p.add_argument(
        "--window",
        type=int,
        default=None,
        help="the run's context window (tokens), with --task and --world alike: every policy runs at it "
        "(it replaces the policy's default context_window_tokens; --set context_window_tokens=<another> is an error)",
    )
    p.add_argument(
        "--window-peak-frac",
        type=float,
        default=None,
        metavar="FRAC",
        help="with --task, instead of --window: size each task's window to FRAC (0-1] of its own peak (uncompacted; "
        "in write-back mode the written-back one), so every task compacts",
    )
    p.add_argument("--compact-at", default="", help="comma-separated call indices for a manual /compact")
    p.add_argument("--probes", default="", help="scorers to probe with, e.g. recall or recall,semantic,llm")
    p.add_argument(
        "--probe-every",
        type=int,
        default=None,
        help="probe every K-th call (and always the last): the same calls for every policy",
    )
    p.add_argument(
        "--max-probes",
        type=int,
        default=DEFAULT_MAX_PROBES,
        metavar="N",
        help="refuse a probe grid scoring more than N probes (probe x checkpoint) per task (default "
        f"{DEFAULT_MAX_PROBES:,})",
    )
    p.add_argument("--out", default=None, help="output folder (required with --task; optional with --world)")
    add_call_limit_options(p)
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a run fell back on every summary it asked for (a bad key, no network)",
    )
    p.set_defaults(func=_run)


def _policy(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The policy kind and parameters from --policy, --policy-file and --set (in that order of
    precedence for the parameters: --set over the file)."""
    params = parse_set(args.set)
    if args.policy_file is None:
        return args.policy or "progressive", params
    table = read_policy_file(args.policy_file)
    kind = str(table.pop("kind"))
    if args.policy is not None and args.policy != kind:
        raise ConfigError(
            f"--policy {args.policy} conflicts with --policy-file {args.policy_file} (kind {kind!r}); give one"
        )
    return kind, {**table, **params}


def _run(args: argparse.Namespace) -> int:
    if (args.task is None) == (args.world is None):
        raise ConfigError("give exactly one of --task PATH|synthetic:PRESET[:SEED] and --world KIND:SEED")
    if args.world is not None:
        return _run_world(args)
    if args.out is None:
        raise ConfigError("--task: --out FOLDER is required")
    manual = parse_indices(args.compact_at, "--compact-at")
    kind, params = _policy(args)
    results = run_task(
        args.task,
        kind,
        params=params,
        summarizer=args.summarizer,
        summarizer_cache=args.summarizer_cache,
        history_mode=args.history_mode,
        writeback_rules=args.writeback_rules,
        window=args.window,
        window_peak_frac=args.window_peak_frac,
        manual_compact_at=manual,
        probes=[s for s in args.probes.split(",") if s],
        probe_every_k=args.probe_every,
        max_probes=args.max_probes,
        out_dir=args.out,
        call_limits=call_limits(args),
    )
    all_fell_back = False
    for r in results:
        s = {"task_id": r.task_id, "policy": r.spec.policy.kind, "history_mode": r.spec.history_mode}
        s.update(r.summary.shown())
        print(f"run {r.run_id} -> {r.out_dir}")
        for k, v in s.items():
            unknown = v is None or (isinstance(v, float) and math.isnan(v))
            print(f"  {k:>22}: {UNPRICED if unknown and k.endswith('_usd') else v}")
        if len(r.calls):
            print(f"  {'tokens_saved':>22}: {_tokens_saved_line(r.calls)}")
        warning = fallback_warning(s)
        if warning:
            all_fell_back = True
            print(f"WARNING: {r.run_id}: {warning}", file=sys.stderr)
    return 1 if all_fell_back and args.strict else 0


def _tokens_saved_line(calls: pd.DataFrame) -> str:
    """The headline number: the share of tokens the policy saved against the raw transcript
    (:func:`~h9eval.analysis.metrics.tokens_saved`), with the two sums it compares."""
    saved = float(tokens_saved(calls)["tokens_saved"].iloc[0])
    sent, raw = int(calls["tokens_sent"].sum()), int(calls["raw_tokens_sent"].sum())
    return f"{saved:.3f} (sent {sent:,} of the raw transcript's {raw:,} tokens over {len(calls)} calls)"


def _run_world(args: argparse.Namespace) -> int:
    for flag, given in (
        ("--compact-at", args.compact_at),
        ("--probes", args.probes),
        ("--probe-every", args.probe_every),
        ("--window-peak-frac", args.window_peak_frac),  # a world has no transcript to size it from
    ):
        if given:
            raise ConfigError(f"{flag} applies to --task replays only")
    kind, params = _policy(args)
    world = importlib.import_module(_WORLD_RUNS)
    run = world.run_world(
        args.world,
        agent=args.agent,
        agent_params=parse_set(args.agent_set),
        policy=kind,
        params=params,
        world_params=parse_set(args.world_set),
        summarizer=args.summarizer,
        summarizer_cache=args.summarizer_cache,
        history_mode=args.history_mode,
        writeback_rules=args.writeback_rules,
        window=args.window,
        max_steps=args.max_steps,
        out_dir=args.out,
        scale=args.scale,
        call_limits=call_limits(args),
    )
    print(world.format_episode(run))
    return 0
