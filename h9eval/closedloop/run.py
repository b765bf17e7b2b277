"""One world episode as the CLI, a sweep cell and a notebook run it, and its results rows.

``run_world("fact_chain:3", agent="scripted", policy="progressive")`` runs the episode and the
``keep_all`` oracle of the same world, seed, agent and history mode (for excess steps), and
returns a :class:`WorldRun`; with ``out_dir`` it writes ``episodes.parquet`` (one row of the
versioned ``episodes`` table), ``calls.parquet`` (one ``calls`` row per model call, as a replay
writes them), ``ledger.parquet`` (the episode's loss ledger, :mod:`h9eval.closedloop.ledger`)
and ``episode.json`` (:func:`~h9eval.closedloop.analysis.episode_to_dict`).
:func:`format_episode` is the summary ``h9eval run --world`` prints.

:func:`world_task` is a world exported as an open-loop task (the transcript of its ``keep_all``
episode with the world's ground truth as planted facts): what a sweep replays, with probes, on
the same episodes its closed-loop cells run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.closedloop.agents import make_agent
from h9eval.closedloop.analysis import episode_to_dict, export_task
from h9eval.closedloop.episode import Episode, StressSettings, run_episode, run_oracle
from h9eval.closedloop.ledger import episode_ledger
from h9eval.closedloop.worlds import WORLDS, make_world, parse_world_spec
from h9eval.compaction.base import Policy, params_hash, policy_params
from h9eval.compaction.policies import make_policy, policy_param_names
from h9eval.compaction.records import Tier
from h9eval.compaction.step import run_window
from h9eval.compaction.summary import Summarizer
from h9eval.core.billing import BillingConfig, SessionBiller, SessionBills, SummaryUsage, bill_columns, bill_totals
from h9eval.core.messages import Message, ToolCall
from h9eval.core.errors import ConfigError
from h9eval.core.anthropic import CallLimits
from h9eval.core.lock import folder_lock
from h9eval.core.paths import prepare_out_dir, write_json_atomic
from h9eval.results.io import write_table
from h9eval.results.schema import EPISODES_SCHEMA_VERSION, call_row, calls_frame
from h9eval.results.tables import episodes_table, ledger_table
from h9eval.summarizers.registry import build_summarizer
from h9eval.tasks.model import Task

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_EXPORT_AGENT",
    "EPISODE_BILL_KEYS",
    "WorldRun",
    "episode_calls_frame",
    "episode_row",
    "format_episode",
    "run_world",
    "world_task",
    "world_task_id",
]

DEFAULT_EXPORT_AGENT = "scripted"
"""The agent whose ``keep_all`` episode a world is exported as (the reference transcript)."""


def world_task_id(kind: str, params: Mapping[str, Any], seed: int) -> str:
    """``world-<kind>-<seed>``, with a hash of the parameters when any are set
    (``world-<kind>-<hash8>-<seed>``): the task-level key that pairs open- and closed-loop rows."""
    if not params:
        return f"world-{kind}-{seed}"
    h = hashlib.sha256(json.dumps(dict(params), sort_keys=True).encode()).hexdigest()[:8]
    return f"world-{kind}-{h}-{seed}"


@dataclass(frozen=True, kw_only=True)
class WorldRun:
    """One episode and its ``keep_all`` oracle (``None`` when the episode is itself keep_all)."""

    run_id: str
    task_id: str
    episode: Episode
    oracle: Episode | None
    out_dir: Path | None = None

    @property
    def oracle_steps(self) -> int | None:
        """Steps of the keep_all episode; ``None`` when no oracle was run (a live agent)."""
        if self.episode.policy_kind == "keep_all":
            return self.episode.n_steps
        return self.oracle.n_steps if self.oracle is not None else None

    @property
    def excess_steps(self) -> int | None:
        o = self.oracle_steps
        return None if o is None else self.episode.n_steps - o

    def row(self, *, calls: pd.DataFrame | None = None, **identity: Any) -> dict[str, Any]:
        """The episode's ``episodes`` row; ``identity`` adds the sweep's columns; ``calls``: its
        calls rows when already built (:func:`episode_row`)."""
        return episode_row(
            self.episode,
            oracle_steps=self.oracle_steps,
            run_id=self.run_id,
            task_id=self.task_id,
            calls=calls,
            **identity,
        )


EPISODE_BILL_KEYS: tuple[str, ...] = ("cost_usd", "summarizer_bill_usd", "cache_read_share", "invalidation_usd")
"""The billed columns of an ``episodes`` row (:func:`~h9eval.core.billing.bill_totals` of its calls)."""


def episode_row(
    episode: Episode,
    *,
    oracle_steps: int | None,
    run_id: str,
    task_id: str,
    calls: pd.DataFrame | None = None,
    **identity: Any,
) -> dict[str, Any]:
    """One row of the ``episodes`` table: ``identity`` (policy_name, params_json, summarizer,
    repeat), the episode's measures, the pairing with its oracle and its billed dollars
    (:data:`EPISODE_BILL_KEYS`: the totals of its calls rows, ``calls`` when the caller built them
    already, else :func:`episode_calls_frame` at the default billing; NaN when unpriced)."""
    s = episode.summary()
    if calls is None:
        calls = episode_calls_frame(episode, run_id=run_id, task_id=task_id)
    totals = bill_totals(calls)
    return {
        "schema_version": EPISODES_SCHEMA_VERSION,
        "run_id": run_id,
        "task_id": task_id,
        "policy_name": identity.pop("policy_name", episode.policy_kind),
        "params_json": identity.pop(
            "params_json", json.dumps(dict(episode.policy_params), sort_keys=True, default=str)
        ),
        "summarizer": identity.pop("summarizer", s["summarizer_id"]),
        "repeat": identity.pop("repeat", 0),
        **identity,
        **s,
        "oracle_steps": oracle_steps,
        "excess_steps": None if oracle_steps is None else episode.n_steps - oracle_steps,
        **{k: math.nan if totals[k] is None else totals[k] for k in EPISODE_BILL_KEYS},
    }


def episode_calls_frame(
    episode: Episode, *, run_id: str, task_id: str, billing: BillingConfig | None = None
) -> pd.DataFrame:
    """The episode's model calls as ``calls`` rows (:func:`~h9eval.results.schema.call_row`, the
    replay's builder and dtypes).

    What the closed loop does not record per step is zero or empty: offload bytes, summarizer
    latency and cache hits, fallbacks, write-backs and masking counts. The billed columns come
    from :func:`episode_bills` (no uncompacted transcript: ``raw_cost_usd`` is NaN; an episode
    without its views leaves them unknown); ``billing``: how the calls are billed (default
    :class:`~h9eval.core.billing.BillingConfig`)."""
    rows = []
    bills = episode_bills(episode, billing)
    for i, s in enumerate(episode.steps):
        rows.append(
            call_row(
                {
                    "run_id": run_id,
                    "task_id": task_id,
                    "policy_kind": episode.policy_kind,
                    "params_hash": episode.params_hash,
                    "history_mode": episode.config.history_mode,
                    "call_index": s.step - 1,
                    "message_index": s.history_messages,
                    "context_window_tokens": episode.context_window_tokens,
                    "history_tokens": s.history_tokens,
                    "history_messages": s.history_messages,
                    "tool_schema_tokens": s.tokens_sent - s.view_tokens,
                    "tokens_sent": s.tokens_sent,
                    "tier": int(Tier.parse(s.tier_name)),
                    "tier_name": s.tier_name,
                    "compacted": s.compacted,
                    "msgs_before": s.history_messages,
                    "msgs_after": s.view_messages,
                    "view_tokens": s.view_tokens,
                    "offloads_tool_time_count": int(s.offloaded_tool_time),
                    "summarizer_calls": s.summarizer_calls,
                    "summarizer_input_tokens": s.summarizer_input_tokens,
                    "summarizer_output_tokens": s.summarizer_output_tokens,
                    "summarizer_cost_usd": s.summarizer_cost_usd,
                    "summarizer_batched_calls": s.summarizer_batched_calls,
                    "forced_truncation": s.forced_compactions > 0,
                    **(bill_columns(bills[i]) if i < len(bills) else {}),
                }
            )
        )
    return calls_frame(rows)


def episode_bills(episode: Episode, billing: BillingConfig | None = None) -> list[SessionBills]:
    """Each step's bill (:mod:`h9eval.core.billing`): the view sent, after the tool schemas; the
    reply as the step's tool call (its note is not kept); time between steps from the stated
    timing model; tokens new since the previous step = the view's messages the previous view did
    not hold (a compaction's summary counts as new here, unlike in the open-loop replay)."""
    views = episode.views
    if not views:
        return []
    steps = episode.steps
    tools_tokens = max(steps[0].tokens_sent - steps[0].view_tokens, 0) if steps else 0
    cfg = billing or BillingConfig()
    biller = SessionBiller(cfg, prefix_tokens=cfg.prefix_tokens if cfg.prefix_tokens is not None else tools_tokens)
    out: list[SessionBills] = []
    previous: Message | None = None
    seen: set[Message] = set()
    for i, (s, view) in enumerate(zip(steps, views)):
        reply = Message("assistant", "", (ToolCall(f"call_{s.step:03d}", s.tool, s.arguments),) if s.tool else ())
        new = sum(m.nbytes for m in view if m not in seen) // 4
        # a step's summaries billed together: at the batch price when all of them were batched
        batched = s.summarizer_batched_calls == s.summarizer_calls
        usage = SummaryUsage(s.summarizer_input_tokens, s.summarizer_output_tokens, batched)
        summ = [usage] if s.summarizer_calls else []
        out.append(
            biller.call(
                i,
                view=view,
                raw_view=None,
                output=reply,
                previous_output=previous,
                appended_tokens=new,
                summarizer_calls=summ,
            )
        )
        previous, seen = reply, set(view)
    return out


def world_task(
    kind: str, params: Mapping[str, Any], seed: int, *, agent: str = DEFAULT_EXPORT_AGENT, max_steps: int = 60
) -> Task:
    """The world's ``keep_all`` episode exported as a task, under :func:`world_task_id`."""
    oracle = run_oracle(make_world(kind, **dict(params)), make_agent(agent), seed=seed, max_steps=max_steps)
    task = export_task(oracle)
    return dataclasses.replace(task, task_id=world_task_id(kind, params, seed))


def run_world(
    world: str,
    *,
    agent: str = "scripted",
    agent_params: Mapping[str, Any] | None = None,
    policy: str | Policy = "progressive",
    params: Mapping[str, Any] | None = None,
    world_params: Mapping[str, Any] | None = None,
    summarizer: str | Summarizer | None = "offline",
    summarizer_cache: str | None = None,
    history_mode: str = "view",
    writeback_rules: str = "v3",
    window: int | None = None,
    max_steps: int | None = None,
    oracle: bool | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    scale: str = "",
    stress: StressSettings | None = None,
    call_limits: CallLimits | None = None,
) -> WorldRun:
    """Run the episode ``world`` (``KIND:SEED``) × ``agent`` (a ``make_agent`` form with
    ``agent_params``, e.g. ``{"cassette": "x.jsonl"}`` for ``anthropic``) × ``policy`` (a name
    with ``params``, or a policy object) and its ``keep_all`` oracle; see the module docstring.
    ``window``: the run's window (tokens), the same rule as :func:`~h9eval.runs.run.run_task`'s
    (:func:`~h9eval.compaction.step.run_window`).
    ``oracle``: run the oracle (default: for scripted agents only; a live agent's oracle is a
    second paid episode, and a cassette holds only the episode it recorded). ``scale="default"``:
    the family's default scale (:class:`~h9eval.closedloop.worlds.WorldScale`): its parameters
    under ``world_params``, its window for a policy named here that has a window and is not
    given one in ``params``, its step budget unless ``max_steps`` is given. ``stress``: the
    episode's :class:`~h9eval.closedloop.episode.StressSettings`. ``call_limits``: the
    request timeout and retries of the live agent and a model summarizer."""
    kind, seed = parse_world_spec(world)
    if scale not in ("", "default"):
        raise ConfigError(f"run_world: scale must be 'default' or empty, got {scale!r}")
    family = WORLDS.get(kind).scale if scale else None
    wparams = {**(family.params if family else {}), **dict(world_params or {})}
    make_world(kind, **wparams)  # refuse a bad parameter before anything runs
    ag = make_agent(agent, call_limits=call_limits, **dict(agent_params or {}))
    if max_steps is None:
        max_steps = family.max_steps if family else 60
    if isinstance(policy, str):
        pparams = dict(params or {})
        if (
            family is not None
            and "context_window_tokens" not in pparams
            and "context_window_tokens" in policy_param_names(policy)
        ):
            pparams["context_window_tokens"] = family.window_tokens
        pol = make_policy(policy, **pparams)
    else:
        if params:
            raise ConfigError("run_world: give params only with a policy name, not with a policy object")
        pol = policy
    # the run's window, as run_task resolves it (a window given in params is an explicit choice)
    explicit = "context_window_tokens" in (params or {}) if isinstance(policy, str) else None
    pol = run_window(pol, window, explicit=explicit).policy
    summ = (
        build_summarizer(summarizer, summarizer_cache, call_limits=call_limits)
        if isinstance(summarizer, str)
        else summarizer
    )
    common: dict[str, Any] = {
        "seed": seed,
        "history_mode": history_mode,
        "writeback_rules": writeback_rules,
        "context_window_tokens": window,
        "max_steps": max_steps,
        "stress": stress,
    }
    ep = run_episode(make_world(kind, **wparams), ag, pol, summarizer=summ, **common)
    want_oracle = agent.partition(":")[0] == "scripted" if oracle is None else oracle
    orc = run_oracle(make_world(kind, **wparams), ag, **common) if want_oracle and pol.kind != "keep_all" else None
    task_id = world_task_id(kind, wparams, seed)
    run_id = f"{task_id}--{pol.kind}-{params_hash(pol.kind, policy_params(pol))}-{history_mode}--{agent}"
    out = None
    if out_dir is not None:
        out = prepare_out_dir(out_dir)
    run = WorldRun(run_id=run_id, task_id=task_id, episode=ep, oracle=orc, out_dir=out)
    if out is not None:
        with folder_lock(out):  # two episodes written into one folder at once would mix their files
            calls = episode_calls_frame(ep, run_id=run_id, task_id=task_id)
            write_table(episodes_table([run.row(calls=calls)]), out / "episodes.parquet", "episodes")
            write_table(calls, out / "calls.parquet", "calls")
            write_json_atomic(out / "episode.json", episode_to_dict(ep))
            write_table(
                ledger_table(episode_ledger(ep, run_id=run_id, task_id=task_id)), out / "ledger.parquet", "ledger"
            )
    return run


_SHOWN = (
    "success",
    "failure",
    "terminated_by",
    "steps",
    "excess_steps",
    "subgoals_reached",
    "subgoals_total",
    "n_compactions",
    "first_compaction_step",
    "tokens_sent_sum",
    "tokens_sent_peak",
    "summarizer_calls",
    "summarizer_cost_usd",
    "cost_usd",
    "cache_read_share",
    "refetches_justified",
    "refetches_wasted",
    "redundant_read_calls",
    "duplicate_side_effects",
    "violations_before_compaction",
    "violations_after_compaction",
    "hallucinated_completion",
    "protocol_errors",
    "facts_present_at_need",
    "facts_needed",
)


def format_episode(run: WorldRun) -> str:
    """The summary ``h9eval run --world`` prints: the run id, then one measure a line."""
    row = run.row()
    lines = [f"episode {run.run_id}" + (f" -> {run.out_dir}" if run.out_dir is not None else "")]
    # unknown dollars (an unpriced model) read "unpriced", never nan or $0
    unknown = {k for k in _SHOWN if k.endswith("_usd") and (row[k] is None or row[k] != row[k])}
    lines += [f"  {k:>28}: {'unpriced' if k in unknown else row[k]}" for k in _SHOWN]
    if run.episode.loop_reason:
        lines.append(f"  {'loop_reason':>28}: {run.episode.loop_reason}")
    return "\n".join(lines)
