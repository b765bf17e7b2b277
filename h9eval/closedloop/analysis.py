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
    "EPISODE_SCHEMA_VERSION",
    "PAIR_KEYS",
    "episode_to_dict",
    "episodes_frame",
    "export_task",
    "pass_hat_k",
    "pass_k_frame",
    "steps_frame",
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
        ident = {k: e.summary()[k] for k in ("world_kind", "world_params", "seed", "agent_id", "policy_kind", "params_hash", "history_mode")}
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


def pass_k_frame(frame: Any, k: int, *, by: Sequence[str] = ("world_kind", "world_params", "seed", "agent_id", "policy_kind", "params_hash", "history_mode")) -> Any:
    """pass^k per group of repeated trials (rows of :func:`episodes_frame` that differ only by
    trial): columns ``n_trials``, ``n_success``, ``pass_hat_k``."""
    import pandas as pd

    out = []
    for key, g in frame.groupby(list(by), sort=True):
        n, c = len(g), int(g["success"].sum())
        out.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "k": k, "n_trials": n, "n_success": c, "pass_hat_k": pass_hat_k(c, n, k) if k <= n else math.nan})
    return pd.DataFrame(out)


def export_task(episode: Episode) -> Task:
    """A ``keep_all`` episode's transcript as an open-loop task, with the world's ground truth
    as planted facts (``message_index``: the first message holding the value), so open- and
    closed-loop numbers are measured on the same episodes."""
    if episode.policy_kind != "keep_all":
        raise ConfigError(f"export_task needs a keep_all episode (its transcript is complete), got policy {episode.policy_kind!r}")
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
