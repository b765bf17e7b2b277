"""Closed-loop episodes, analysed: success and cost per configuration, the cost-vs-success
frontier, failure modes by kind, and the validation study (does open-loop probe retention
predict closed-loop success?).

Everything is task-level: a *task* is one world seed (``task_id`` ``world-<kind>[-<hash>]-<seed>``),
the unit the bootstrap resamples (:mod:`h9eval.analysis.stats`); repeats and history modes are
averaged inside a task first. A *configuration* is the policy entry's name with its grid point
(and the summarizer variant when a sweep has several); the agent is a separate column, since
each reader profile is its own experiment.

* :func:`episode_table`: the ``episodes`` table with ``config`` labels;
* :func:`success_cost`: success rate and tokens sent per (agent, configuration) with 95 %
  task-level bootstrap intervals, and the paired differences against ``keep_all`` (Holm over
  the configurations of an agent);
* :func:`failure_modes`: how the episodes that did not succeed failed, by kind;
* :func:`validation_study`: per configuration, Spearman's rank correlation across tasks between
  the open-loop retention of the task's exported transcript (the replay cells of ``[tasks]
  worlds`` with ``open_loop = true``) and closed-loop success, with a task bootstrap interval;
  pooled over configurations; and the probes whose retention predicts success best and worst.
* :func:`without_episode_runs`: the results without the episode cells, for the open-loop
  sections.

Open-loop retention here is the mean ``recall`` score in the ``view`` scope over the probes
whose answer is in the full history at the checkpoint (``baseline_score > 0``): a probe asked
before its fact appeared says nothing about compaction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from h9eval.analysis import closedloop_units as CU
from h9eval.analysis import stats as S
from h9eval.analysis.metrics import config_labels, dollars_mean

__all__ = [
    "BASELINE",
    "FAILURE_KINDS",
    "Validation",
    "episode_table",
    "failure_modes",
    "open_loop_retention",
    "success_cost",
    "validation_study",
    "without_episode_runs",
]

_NONCE_RE = r"\b[A-Z]+-[0-9a-f]{6,}\b"

BASELINE = "keep_all"
"""The configuration success and cost are paired against (the oracle control)."""

#: failure kinds, in the order the table and figure show them: (column, what it counts)
FAILURE_KINDS: tuple[tuple[str, str], ...] = (
    ("hard_failure", "an argument value found nowhere in the view (invented)"),
    ("loop", "ended as a loop (no progress after compactions, or a view over the window)"),
    ("max_steps", "cut off at max_steps"),
    ("hallucinated_completion", "declared done while the world says it is not"),
    ("duplicate_side_effects", "a side effect done twice (a refund, a commit)"),
    ("wrong_side_effects", "a side effect with wrong arguments"),
    ("violations_after_compaction", "a standing rule broken after the first compaction"),
    ("protocol_errors", "a view a real API would reject for its tool pairs"),
    ("wasted_refetches", "re-read an offloaded result that was still in view"),
)


# -- labels -------------------------------------------------------------------------------------
def _labels(runs: Any) -> dict[str, str]:
    """run_id -> configuration label (:func:`h9eval.analysis.metrics.config_labels`, the one
    definition; history modes and agents are columns of their own)."""
    if runs is None or not len(runs):
        return {}
    return dict(zip(runs["run_id"].astype(str), config_labels(runs)))


def episode_table(res: Any) -> Any:
    """``res.episodes`` with a ``config`` label and plain dtypes (bools and ints as floats where
    a mean is taken)."""
    ep = res.episodes.copy()
    if not len(ep):
        return ep
    labels = _labels(res.runs)
    ep["config"] = [labels.get(str(r), str(p)) for r, p in zip(ep["run_id"], ep["policy_name"])]
    for c in ("success", "hallucinated_completion", "loop_detected", "hard_failure"):
        ep[c] = ep[c].astype(bool)
    ep["tokens_sent_sum"] = ep["tokens_sent_sum"].astype(float)
    return ep


def without_episode_runs(res: Any) -> Any:
    """``res`` without the closed-loop episode cells (their run rows, calls and ledger rows), so
    that the open-loop sections see replays only."""
    if not len(res.episodes):
        return res
    ids = set(res.episodes["run_id"].astype(str))

    def keep(df: Any) -> Any:
        return (
            df[~df["run_id"].astype(str).isin(ids)].reset_index(drop=True) if len(df) and "run_id" in df.columns else df
        )

    return dataclasses.replace(
        res,
        runs=keep(res.runs),
        calls=keep(res.calls),
        compactions=keep(res.compactions),
        probes=keep(res.probes),
        ledger=keep(res.ledger),
    )


# -- success and cost ---------------------------------------------------------------------------
def _task_means(df: Any, value: str) -> Any:
    """One value per task (the mean over history modes and repeats)."""
    return df.groupby("task_id", sort=True)[value].mean()


def _world_dollars(g: Any, n_boot: int, seed: int) -> tuple[float, float, float]:
    """Billed dollars per episode over ``g``'s worlds (``unit``): the mean of the per-world means
    with a world-bootstrap 95 % interval; all NaN when any episode's dollars are unknown."""
    if not g["cost_usd"].notna().all():
        return (math.nan, math.nan, math.nan)
    per_world = [float(v) for v in g.groupby("unit", sort=True)["cost_usd"].mean()]
    lo, hi = S.percentile_interval(S.bootstrap_means(per_world, n_resamples=n_boot, seed=seed), S.DEFAULT_LEVEL)
    return (sum(per_world) / len(per_world), lo, hi)


def success_cost(ep: Any, *, n_boot: int = 1000, seed: int = 0, baseline: str = BASELINE) -> Any:
    """One row per (agent, configuration): the world-level success and cost of
    :func:`h9eval.analysis.closedloop_units.success_cost_by_world` (the unit is the world, seeds
    nested; verdicts Holm-adjusted over the agent's configurations, ``insufficient units`` with
    too few worlds), plus ``excess_steps``, ``summarizer_cost_usd``, the billed ``cost_usd`` (mean over
    worlds of the per-world means, with its world-bootstrap interval ``cost_usd_lo``/``cost_usd_hi``) and
    ``cache_read_share`` (means over episodes; dollars NaN, never 0, when an episode's are unknown:
    an unpriced model, or an ``episodes`` table of version 1) and ``n_tasks`` (= ``n_worlds``: the
    paired units)."""
    sc = CU.success_cost_by_world(ep, n_boot=n_boot, seed=seed, baseline=baseline)
    ep = ep.assign(**{c: math.nan for c in ("cost_usd", "cache_read_share") if c not in ep.columns})
    extra = (
        ep.groupby(["agent_id", "config"], sort=True)
        .agg(
            excess_steps=("excess_steps", lambda v: float(v.astype(float).mean())),
            summarizer_cost_usd=("summarizer_cost_usd", lambda v: dollars_mean(v.astype(float))),
            cache_read_share=("cache_read_share", lambda v: dollars_mean(v.astype(float))),
        )
        .reset_index()
        .rename(columns={"agent_id": "agent"})
    )
    out = sc.merge(extra, on=["agent", "config"], how="left")
    billed = ep.assign(unit=CU.world_units(ep), cost_usd=ep["cost_usd"].astype(float))
    ci = {key: _world_dollars(g, n_boot, seed) for key, g in billed.groupby(["agent_id", "config"], sort=True)}
    for i, name in enumerate(("cost_usd", "cost_usd_lo", "cost_usd_hi")):
        # the world is the unit for dollars as for tokens: mean over worlds of the per-world mean
        out[name] = [ci.get((a, c), (math.nan,) * 3)[i] for a, c in zip(out["agent"], out["config"])]
    # the paired unit count under the name the answer box reads (a closed-loop "task" is a world)
    out["n_tasks"] = out["n_worlds"]
    return out


# -- failure modes ------------------------------------------------------------------------------
def failure_modes(ep: Any) -> Any:
    """One row per (agent, configuration): ``episodes``, ``failed`` and, per
    :data:`FAILURE_KINDS`, the number of episodes showing that kind (an episode may show
    several); ``world_failures``: the worlds' own failure reasons with counts, most frequent first."""
    import pandas as pd

    rows = []
    for (agent, config), g in ep.groupby(["agent_id", "config"], sort=True):
        flags = {
            "hard_failure": g["hard_failure"].astype(bool),
            "loop": g["terminated_by"] == "loop",
            "max_steps": g["terminated_by"] == "max_steps",
            "hallucinated_completion": g["hallucinated_completion"].astype(bool),
            "duplicate_side_effects": g["duplicate_side_effects"].astype(int) > 0,
            "wrong_side_effects": g["wrong_side_effects"].astype(int) > 0,
            "violations_after_compaction": g["violations_after_compaction"].astype(int) > 0,
            "protocol_errors": g["protocol_errors"].astype(int) > 0,
            "wasted_refetches": g["refetches_wasted"].astype(int) > 0,
        }
        # per-episode nonces (ticket ids) make every reason unique; counted by their kind
        reasons = g.loc[~g["success"].astype(bool), "failure"].astype(str).str.replace(_NONCE_RE, "<id>", regex=True)
        counts = reasons[reasons != ""].value_counts()
        rows.append(
            {
                "agent": agent,
                "config": config,
                "episodes": len(g),
                "failed": int((~g["success"].astype(bool)).sum()),
                **{k: int(v.sum()) for k, v in flags.items()},
                "world_failures": "; ".join(
                    f"{r} ×{n}" for r, n in sorted(counts.items(), key=lambda rn: (-rn[1], rn[0]))
                ),
            }
        )
    return pd.DataFrame(rows)


# -- validation study -----------------------------------------------------------------------------
def open_loop_retention(res: Any, *, by: Sequence[str] = ("run_id",)) -> Any:
    """Mean ``recall``/``view`` score over the probes answerable from the full history at their
    checkpoint (``baseline_score > 0``), grouped by ``by``; columns ``by`` + ``retention``."""
    import pandas as pd

    p = res.probes
    if not len(p):
        return pd.DataFrame(columns=[*by, "retention"])
    p = p[(p["method"] == "recall") & (p["scope"] == "view") & p["score"].notna()]
    if "answerable" in p.columns:
        p = p[p["answerable"].astype(bool)]
    if "placebo_excluded" in p.columns:
        p = p[~p["placebo_excluded"].astype(bool)]
    p = p[p["baseline_score"].astype(float) > 0]
    return p.groupby(list(by), sort=True)["score"].mean().reset_index().rename(columns={"score": "retention"})


@dataclass(frozen=True, kw_only=True)
class Validation:
    """The validation study's tables (see :func:`validation_study`)."""

    pairs: Any
    """One row per (agent, configuration, task): ``retention`` (open loop), ``success``."""
    per_config: Any
    """Per (agent, configuration): ``n_tasks``, ``rho`` and its ``rho_lo``/``rho_hi``."""
    pooled: Any
    """Per agent, over every (configuration, task): ``rho`` with its task-bootstrap interval."""
    probes: Any
    """Per (agent, world kind, probe id) asked on at least 3 tasks: ``rho`` of that probe's
    retention against success, best first."""


def validation_study(res: Any, *, n_boot: int = 1000, seed: int = 0) -> Validation:
    """Does open-loop retention predict closed-loop success? (see the module docstring). Pairs
    a replay run and an episode of the same configuration, task and history mode."""
    import pandas as pd

    ep = episode_table(res)
    empty = pd.DataFrame()
    if not len(ep) or not len(res.probes):
        return Validation(pairs=empty, per_config=empty, pooled=empty, probes=empty)
    labels = _labels(res.runs)
    ep_ids = set(ep["run_id"].astype(str))
    replays = res.runs[~res.runs["run_id"].astype(str).isin(ep_ids) & res.runs["task_id"].isin(set(ep["task_id"]))]
    ret = open_loop_retention(res, by=("run_id",))
    ret = ret[ret["run_id"].isin(set(replays["run_id"]))]
    if not len(ret):
        return Validation(pairs=empty, per_config=empty, pooled=empty, probes=empty)
    info = replays[["run_id", "task_id", "history_mode"]].assign(
        config=[labels.get(str(r), "") for r in replays["run_id"]]
    )
    ret = ret.merge(info, on="run_id")
    closed = (
        ep.assign(success=ep["success"].astype(float))
        .groupby(["agent_id", "config", "task_id", "history_mode"], as_index=False)["success"]
        .mean()
    )
    pairs = closed.merge(
        ret[["config", "task_id", "history_mode", "retention"]], on=["config", "task_id", "history_mode"]
    )
    pairs = pairs.groupby(["agent_id", "config", "task_id"], as_index=False)[["retention", "success"]].mean()
    per, pooled = [], []
    for agent, g in pairs.groupby("agent_id", sort=True):
        for config, c in g.groupby("config", sort=True):
            rho, lo, hi, nv = S.spearman_interval(c.rename(columns={"retention": "x", "success": "y"}), n_boot, seed)
            per.append(
                {
                    "agent": agent,
                    "config": config,
                    "n_tasks": int(c["task_id"].nunique()),
                    "mean_retention": float(c["retention"].mean()),
                    "success": float(c["success"].mean()),
                    "rho": rho,
                    "rho_lo": lo,
                    "rho_hi": hi,
                }
            )
        rho, lo, hi, nv = S.spearman_interval(g.rename(columns={"retention": "x", "success": "y"}), n_boot, seed)
        pooled.append(
            {
                "agent": agent,
                "n_configs": int(g["config"].nunique()),
                "n_tasks": int(g["task_id"].nunique()),
                "n_pairs": len(g),
                "rho": rho,
                "rho_lo": lo,
                "rho_hi": hi,
            }
        )
    # per probe: its retention per (config, task) against success, pooled over configurations
    pr = open_loop_retention(res, by=("run_id", "probe_id"))
    pr = pr.merge(info, on="run_id")
    pr = pr.groupby(["config", "task_id", "probe_id"], as_index=False)["retention"].mean()
    kinds = ep.drop_duplicates("task_id").set_index("task_id")["world_kind"]
    prows = []
    for agent, g in pairs.groupby("agent_id", sort=True):
        m = pr.merge(g[["config", "task_id", "success"]], on=["config", "task_id"])
        m["world_kind"] = m["task_id"].map(kinds)
        for (wk, pid), c in m.groupby(["world_kind", "probe_id"], sort=True):
            if c["task_id"].nunique() < 3:
                continue  # a probe of one seed's nonce (a ticket id): no interval across tasks
            rho, lo, hi, nv = S.spearman_interval(c.rename(columns={"retention": "x", "success": "y"}), n_boot, seed)
            prows.append(
                {
                    "agent": agent,
                    "world_kind": wk,
                    "probe_id": pid,
                    "n_pairs": len(c),
                    "rho": rho,
                    "rho_lo": lo,
                    "rho_hi": hi,
                }
            )
    probes = pd.DataFrame(prows)
    if len(probes):
        probes = probes.sort_values(
            ["agent", "rho"], ascending=[True, False], na_position="last", kind="stable"
        ).reset_index(drop=True)
    return Validation(pairs=pairs, per_config=pd.DataFrame(per), pooled=pd.DataFrame(pooled), probes=probes)
