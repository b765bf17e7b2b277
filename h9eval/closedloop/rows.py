"""An episode's results rows: its ``episodes`` row (:func:`episode_row`) and its ``calls`` rows
(:func:`episode_calls_frame`, billed as a provider bills them: :func:`episode_bills`).

An episode is run by :func:`h9eval.runs.execute.execute` (``h9eval run --world``, a sweep's episode
cell, :func:`h9eval.runs.run.run_world`), which builds these rows for it.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from h9eval.closedloop.episode import Episode
from h9eval.compaction.records import Tier
from h9eval.core.billing import BillingConfig, SessionBiller, SessionBills, SummaryUsage, bill_columns, bill_totals
from h9eval.core.messages import Message, ToolCall
from h9eval.results.schema import EPISODES_SCHEMA_VERSION, call_row, calls_frame

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["EPISODE_BILL_KEYS", "episode_bills", "episode_calls_frame", "episode_row"]

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
