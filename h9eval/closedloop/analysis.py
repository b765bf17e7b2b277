"""Episodes as tidy frames, pass^k, excess steps by pairing, and worlds exported as tasks.

``episodes_frame(episodes)`` is one row per episode (:meth:`Episode.summary` plus
``excess_steps`` paired against the ``keep_all`` episode of the same world, parameters, seed,
agent and history mode when the list holds one); ``steps_frame(episodes)`` one row per model
call. pandas is imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

from h9eval.closedloop.episode import Episode
from h9eval.core.errors import ConfigError
from h9eval.core.messages import messages_to_json
from h9eval.tasks.model import Fact, Intent, Task, TaskSource

__all__ = [
    "CONFIG_KEYS",
    "EPISODE_SCHEMA_VERSION",
    "PAIR_KEYS",
    "episode_to_dict",
    "episodes_frame",
    "export_task",
    "family_frame",
    "pass_hat_k",
    "pass_k_frame",
    "steps_frame",
    "tier_mix_frame",
]

EPISODE_SCHEMA_VERSION = 1
#: what pairs an episode with its keep_all oracle
PAIR_KEYS = ("world_kind", "world_params", "seed", "agent_id", "history_mode")


def episodes_frame(episodes: Iterable[Episode]) -> Any:
    """One row per episode; ``excess_steps`` is NaN when no ``keep_all`` partner is present."""
    import pandas as pd

    rows = [{"schema_version": EPISODE_SCHEMA_VERSION, **e.summary()} for e in episodes]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    oracle = df[df["policy_kind"] == "keep_all"].drop_duplicates(list(PAIR_KEYS)).set_index(list(PAIR_KEYS))["steps"]
    keys = pd.MultiIndex.from_frame(df[list(PAIR_KEYS)])
    df["oracle_steps"] = oracle.reindex(keys).to_numpy()
    df["excess_steps"] = df["steps"] - df["oracle_steps"]
    return df


def episode_to_dict(episode: Episode) -> dict[str, Any]:
    """Everything about one episode as JSON-ready data (one line of an episodes JSONL): the
    summary row, the outcome's subgoals and violations, every step, the ledger and the
    transcript (FORMAT.md §2.1 messages)."""
    o = episode.outcome
    return {
        "schema_version": EPISODE_SCHEMA_VERSION,
        "summary": episode.summary(),
        "policy_params": dict(episode.policy_params),
        "config": dataclasses.asdict(episode.config),
        "loop_reason": episode.loop_reason,
        "invented_values": list(episode.invented_values),
        "facts_at_need": [{"fact_id": f, "present": p} for f, p in episode.facts_at_need],
        "subgoals": [{"name": g.name, "reached": g.reached} for g in o.subgoals],
        "violations": [dataclasses.asdict(v) for v in o.violations],
        "steps": [dataclasses.asdict(s) for s in episode.steps],
        "ledger": [dataclasses.asdict(e) for e in episode.ledger],
        "ground_truth": [dataclasses.asdict(g) for g in episode.ground_truth],
        "messages": messages_to_json(episode.history),
    }


def steps_frame(episodes: Iterable[Episode]) -> Any:
    """One row per model call of every episode (the episode's identity columns first)."""
    import pandas as pd

    rows = []
    for e in episodes:
        ident = {
            k: e.summary()[k]
            for k in ("world_kind", "world_params", "seed", "agent_id", "policy_kind", "params_hash", "history_mode")
        }
        for s in e.steps:
            rows.append({**ident, **dataclasses.asdict(s)})
    return pd.DataFrame(rows)


def pass_hat_k(n_success: int, n_trials: int, k: int) -> float:
    """pass^k: the chance that ``k`` trials drawn without replacement from ``n_trials`` all
    succeed, ``C(c, k) / C(n, k)`` (tau-bench's estimator); ``k=1`` is the success rate."""
    if not 1 <= k <= n_trials:
        raise ConfigError(f"pass^k needs 1 <= k <= n_trials ({n_trials}), got k={k}")
    if not 0 <= n_success <= n_trials:
        raise ConfigError(f"n_success must be between 0 and n_trials ({n_trials}), got {n_success}")
    return math.comb(n_success, k) / math.comb(n_trials, k)


def pass_k_frame(
    frame: Any,
    k: int,
    *,
    by: Sequence[str] = (
        "world_kind",
        "world_params",
        "seed",
        "agent_id",
        "policy_kind",
        "params_hash",
        "history_mode",
    ),
) -> Any:
    """pass^k per group of repeated trials (rows of :func:`episodes_frame` that differ only by
    trial): columns ``n_trials``, ``n_success``, ``pass_hat_k``."""
    import pandas as pd

    out = []
    for key, g in frame.groupby(list(by), sort=True):
        n, c = len(g), int(g["success"].sum())
        out.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,))),
                "k": k,
                "n_trials": n,
                "n_success": c,
                "pass_hat_k": pass_hat_k(c, n, k) if k <= n else math.nan,
            }
        )
    return pd.DataFrame(out)


def export_task(episode: Episode) -> Task:
    """A ``keep_all`` episode's transcript as an open-loop task, with the world's ground truth
    as planted facts (``message_index``: the first message holding the value), so open- and
    closed-loop numbers are measured on the same episodes."""
    if episode.policy_kind != "keep_all":
        raise ConfigError(
            f"export_task needs a keep_all episode (its transcript is complete), got policy {episode.policy_kind!r}"
        )
    msgs = episode.history
    facts = []
    for f in episode.ground_truth:
        idx = next((i for i, m in enumerate(msgs) if f.value in m.content), None)
        if idx is None:
            continue  # never shown to the agent: nothing a view could retain
        facts.append(Fact(fact_id=f.fact_id, question=f.question, answer=f.value, kind="identifier", message_index=idx))
    header = episode.task_prompt.split("\n", 1)[0]
    return Task(
        task_id=f"world-{episode.world_kind}-{episode.seed}",
        source=TaskSource(kind="world", preset=episode.world_kind, seed=episode.seed),
        messages=msgs,
        tools=tuple(dict(t) for t in episode.tools),
        intent=Intent(statement=header, key_terms=tuple(f.answer for f in facts[:3])),
        facts=tuple(facts),
        metadata={
            "world_params": dict(episode.world_params),
            "agent_id": episode.agent_id,
            "outcome_success": episode.outcome.success,
        },
    )


#: what identifies a configuration across world families in the results tables (the world
#: family is the unit of the closed loop: seeds are nested in it)
CONFIG_KEYS = ("agent_id", "policy_name", "params_json", "summarizer", "history_mode")
_TIERS = ("none", "warn", "soft", "full", "emergency")


def tier_mix_frame(episodes: Any, calls: Any, *, by: Sequence[str] = CONFIG_KEYS) -> Any:
    """The tier mix per configuration (``by``) and world family, from the results tables
    (``load_results(...).episodes`` and ``.calls``): episodes, the share of episodes whose calls
    reached soft or full (summaries written) and emergency, and the share of calls at each tier
    (``calls_<tier>_frac``). One row per (configuration, ``world_kind``); a row with
    ``world_kind == "all"`` pools the families of each configuration."""
    import pandas as pd

    keys = [*by, "world_kind"]
    ep = episodes[["run_id", *keys]]
    c = calls[["run_id", "tier_name"]].merge(ep, on="run_id", how="inner")
    per_ep = c.groupby("run_id")["tier_name"].agg(
        lambda t: (bool(t.isin(["soft", "full"]).any()), bool((t == "emergency").any()))
    )
    flags = pd.DataFrame(
        per_ep.tolist(), index=per_ep.index, columns=["reached_soft_or_full", "reached_emergency"]
    ).reset_index()
    ep = ep.merge(flags, on="run_id", how="left").fillna({"reached_soft_or_full": False, "reached_emergency": False})

    def one(group_ep: Any, group_calls: Any) -> dict[str, Any]:
        n_calls = len(group_calls)
        row = {
            "episodes": len(group_ep),
            "calls": n_calls,
            "episodes_soft_or_full_frac": float(group_ep["reached_soft_or_full"].mean()) if len(group_ep) else 0.0,
            "episodes_emergency_frac": float(group_ep["reached_emergency"].mean()) if len(group_ep) else 0.0,
        }
        counts = group_calls["tier_name"].value_counts()
        for t in _TIERS:
            row[f"calls_{t}_frac"] = float(counts.get(t, 0)) / n_calls if n_calls else 0.0
        return row

    rows = []
    for key, g in ep.groupby(keys, sort=True, dropna=False):
        rows.append({**dict(zip(keys, key)), **one(g, c[c["run_id"].isin(g["run_id"])])})
    for key, g in ep.groupby(list(by), sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "world_kind": "all", **one(g, c[c["run_id"].isin(g["run_id"])])})
    return pd.DataFrame(
        rows,
        columns=[
            *keys,
            "episodes",
            "calls",
            "episodes_soft_or_full_frac",
            "episodes_emergency_frac",
            *(f"calls_{t}_frac" for t in _TIERS),
        ],
    )


def family_frame(episodes: Any, *, by: Sequence[str] = CONFIG_KEYS) -> Any:
    """Success and cost per configuration and world family (seeds nested: one row per family),
    from the ``episodes`` results table: seeds, success rate, mean tokens sent, mean steps,
    mean excess steps, violations after compaction and duplicate side effects per episode. The
    unit for statistics over families is a row of this frame."""
    keys = [*by, "world_kind"]
    g = episodes.groupby(keys, sort=True, dropna=False)
    out = g.agg(
        seeds=("seed", "nunique"),
        episodes=("run_id", "count"),
        success_rate=("success", "mean"),
        tokens_sent_mean=("tokens_sent_sum", "mean"),
        steps_mean=("steps", "mean"),
        excess_steps_mean=("excess_steps", "mean"),
        violations_after_compaction_mean=("violations_after_compaction", "mean"),
        duplicate_side_effects_mean=("duplicate_side_effects", "mean"),
    ).reset_index()
    return out
