"""Closed-loop statistics over independent units: the world, not the seed.

Seeds of one world (its kind and parameters) share the world's structure and behave alike
(harness9's default: 4/4, 3/4, 0/4 successes per world), so they are not independent samples:
twelve seeds of three worlds are three units. Here the unit of every interval and verdict is the
**world** (:func:`world_units`: ``world_kind`` plus its parameters); seeds, history modes and
repeats are averaged inside a world first (nested), and the bootstrap and the sign-flip test of
:mod:`h9eval.analysis.stats` resample and flip worlds. With fewer worlds than a verdict at the
adjusted level needs (:func:`~h9eval.analysis.stats.min_tasks_for`), the verdict is
:data:`INSUFFICIENT_UNITS`, never a word read from seeds.

* :func:`success_cost_by_world`: success and tokens per (agent, configuration) with world-level
  intervals, and the paired differences against ``keep_all`` (Holm over the agent's
  configurations);
* :func:`validation_by_world`: the validation study (open-loop retention against closed-loop
  success) without the controls ``keep_all``/``drop_all`` (retention and success are 1/1 and
  0/0 by construction: they would make any correlation look good), per world and pooled.
"""

from __future__ import annotations

import math
from typing import Any

from h9eval.analysis import stats as S

__all__ = [
    "UNIT",
    "CONTROLS",
    "INSUFFICIENT_UNITS",
    "SUCCESS_COST_COLUMNS",
    "VALIDATION_COLUMNS",
    "world_units",
    "success_cost_by_world",
    "validation_by_world",
]

UNIT = "world"
"""The column naming each row's independent unit."""

CONTROLS: tuple[str, ...] = ("keep_all", "drop_all")
"""Configurations whose retention and success are fixed by construction (the oracle keeps
everything and succeeds, drop_all keeps nothing and fails): left out of the validation study."""

INSUFFICIENT_UNITS = "insufficient units"
"""The verdict when fewer worlds were paired than a verdict at the adjusted level needs."""

SUCCESS_COST_COLUMNS: tuple[str, ...] = (
    "agent",
    "config",
    "n_worlds",
    "n_seeds",
    "success",
    "success_lo",
    "success_hi",
    "tokens_sent",
    "tokens_sent_lo",
    "tokens_sent_hi",
    "success_diff",
    "success_diff_lo",
    "success_diff_hi",
    "success_p_adjusted",
    "success_verdict",
    "tokens_diff",
    "tokens_diff_lo",
    "tokens_diff_hi",
    "tokens_p_adjusted",
    "tokens_verdict",
    "success_diff_level",
    "tokens_diff_level",
    "cost_diff",
    "cost_diff_lo",
    "cost_diff_hi",
    "cost_p_adjusted",
    "cost_verdict",
    "cost_diff_level",
)
"""Columns of :func:`success_cost_by_world` (``cost_*``: billed dollars per episode, paired as tokens are;
NaN and no verdict when an episode's dollars are unknown)."""

VALIDATION_COLUMNS: tuple[str, ...] = ("agent", "scope", "n_worlds", "n_configs", "n_pairs", "rho", "rho_lo", "rho_hi")
"""Columns of :func:`validation_by_world` (``scope``: a world's unit label, or ``pooled``)."""


def world_units(ep: Any) -> Any:
    """The unit of each episode row: ``world_kind`` plus its parameters (``world_params``,
    sorted JSON) when set; the seed is left out. Rows without those columns fall back to the
    task id without its trailing ``-<seed>``."""
    import pandas as pd

    if "world_kind" in ep.columns:
        params = (
            ep["world_params"].fillna("").astype(str) if "world_params" in ep.columns else pd.Series("", index=ep.index)
        )
        kind = ep["world_kind"].astype(str)
        return kind.where(params.isin(["", "{}"]), kind + " " + params)
    return ep["task_id"].astype(str).str.rsplit("-", n=1).str[0]


def _mean_ci(values: Any, n_boot: int, seed: int) -> tuple[float, float, float]:
    vals = [float(v) for v in values if v == v]
    if not vals:
        return (math.nan, math.nan, math.nan)
    lo, hi = S.percentile_interval(S.bootstrap_means(vals, n_resamples=n_boot, seed=seed), S.DEFAULT_LEVEL)
    return (sum(vals) / len(vals), lo, hi)


def _unit_verdict(c: S.PairedComparison) -> str:
    """The comparison's verdict, or :data:`INSUFFICIENT_UNITS` when too few worlds were paired
    for its adjusted level."""
    return INSUFFICIENT_UNITS if c.n_tasks < S.min_tasks_for(c.adjusted_level) else c.verdict


def success_cost_by_world(
    ep: Any, *, n_boot: int = 1000, seed: int = 0, baseline: str = "keep_all", method: str = "holm"
) -> Any:
    """One row per (agent, configuration) (:data:`SUCCESS_COST_COLUMNS`): ``n_worlds`` units and
    ``n_seeds`` episodes' seeds; ``success`` and ``tokens_sent`` (per episode) as means over worlds
    of the per-world means, with world-bootstrap 95 % intervals; against ``baseline`` on the same
    worlds, ``success_diff``/``tokens_diff`` with their adjusted intervals, adjusted p-values and
    verdicts (``method`` over the agent's configurations, default Holm; fewer worlds than the
    adjusted level needs: :data:`INSUFFICIENT_UNITS`). ``ep``: episode rows with ``agent_id``,
    ``config``, ``task_id``, ``history_mode``, ``success``, ``tokens_sent_sum`` and the world
    columns (:func:`world_units`)."""
    import pandas as pd

    d = ep.assign(
        **{
            UNIT: world_units(ep),
            "success": ep["success"].astype(float),
            "tokens_sent_sum": ep["tokens_sent_sum"].astype(float),
            **({"cost_usd": ep["cost_usd"].astype(float)} if "cost_usd" in ep.columns else {}),
        }
    )
    rows: list[dict[str, Any]] = []
    for agent, g in d.groupby("agent_id", sort=True):
        pairs: dict[str, list[S.TaskPairs]] = {"success": [], "tokens": [], "cost": []}
        # dollars are compared only when every episode's are known: a dropped unpriced episode would bias them
        priced = "cost_usd" in g.columns and bool(g["cost_usd"].astype(float).notna().all())
        names: list[str] = []
        for config, c in g.groupby("config", sort=True):
            per_world = c.groupby(UNIT, sort=True)[["success", "tokens_sent_sum"]].mean()
            s = _mean_ci(per_world["success"], n_boot, seed)
            t = _mean_ci(per_world["tokens_sent_sum"], n_boot, seed)
            rows.append(
                {
                    "agent": agent,
                    "config": config,
                    "n_worlds": len(per_world),
                    "n_seeds": int(c["task_id"].nunique()),
                    "success": s[0],
                    "success_lo": s[1],
                    "success_hi": s[2],
                    "tokens_sent": t[0],
                    "tokens_sent_lo": t[1],
                    "tokens_sent_hi": t[2],
                }
            )
            if config != baseline and baseline in set(g["config"]):
                # task=UNIT: seeds and history modes of a world are cells averaged inside it
                pairs["success"].append(S.task_pairs(g, config, baseline, metric="success", task=UNIT))
                pairs["tokens"].append(
                    S.task_pairs(g, config, baseline, metric="tokens_sent_sum", task=UNIT, higher_is_better=False)
                )
                if priced:
                    pairs["cost"].append(
                        S.task_pairs(g, config, baseline, metric="cost_usd", task=UNIT, higher_is_better=False)
                    )
                names.append(config)
        for metric, ps in pairs.items():
            for name, cmp in zip(
                names, S.compare_family(ps, n_resamples=n_boot, seed=seed, method=method) if ps else ()
            ):
                row = next(r for r in rows if r["agent"] == agent and r["config"] == name)
                row.update(
                    {
                        f"{metric}_diff": cmp.mean_diff,
                        f"{metric}_diff_lo": cmp.lo,
                        f"{metric}_diff_hi": cmp.hi,
                        f"{metric}_p_adjusted": cmp.p_adjusted,
                        f"{metric}_verdict": _unit_verdict(cmp),
                        f"{metric}_diff_level": cmp.adjusted_level,
                    }
                )
    df = pd.DataFrame(rows)
    for col in SUCCESS_COST_COLUMNS:
        if col not in df.columns:
            df[col] = "" if col.endswith("verdict") else math.nan
    return df[list(SUCCESS_COST_COLUMNS)]


def _rho_world_ci(df: Any, n_boot: int, seed: int) -> tuple[float, float, float]:
    """rho of (retention, success) over the rows of ``df`` and its world-bootstrap interval:
    worlds drawn with replacement, every row of a drawn world kept; resamples with a constant
    side give no rho and are left out."""
    import numpy as np

    rho = S.spearman(df["retention"].tolist(), df["success"].tolist())
    worlds = sorted(set(df[UNIT]))
    if math.isnan(rho) or len(worlds) < 3:
        return (rho, math.nan, math.nan)
    xy = df[["retention", "success"]].to_numpy(dtype=float)
    rows_of = [np.flatnonzero(df[UNIT].to_numpy() == w) for w in worlds]
    rng = np.random.default_rng(seed)
    vals = []
    for draw in rng.integers(0, len(worlds), size=(n_boot, len(worlds))):
        m = xy[np.concatenate([rows_of[i] for i in draw])]
        r = S.spearman(m[:, 0].tolist(), m[:, 1].tolist())
        if not math.isnan(r):
            vals.append(r)
    if not vals:
        return (rho, math.nan, math.nan)
    lo, hi = np.quantile(vals, [(1 - S.DEFAULT_LEVEL) / 2, (1 + S.DEFAULT_LEVEL) / 2])
    return (rho, float(lo), float(hi))


def validation_by_world(pairs: Any, *, n_boot: int = 1000, seed: int = 0, controls: tuple[str, ...] = CONTROLS) -> Any:
    """The validation study without the controls (:data:`VALIDATION_COLUMNS`), from the pairs of
    :func:`h9eval.analysis.episodes.validation_study` (``agent_id``, ``config``,
    ``task_id``, ``retention``, ``success``; plus ``world_kind``/``world_params`` or a task id
    ending in ``-<seed>``). Seeds are averaged inside each (configuration, world). Per world:
    Spearman's rho across the configurations (no interval: one world is one unit). Pooled: rho
    across every (configuration, world) with a world-bootstrap interval."""
    import pandas as pd

    if not len(pairs):
        return pd.DataFrame(columns=list(VALIDATION_COLUMNS))
    p = pairs[~pairs["config"].isin(list(controls))]
    p = p.assign(**{UNIT: world_units(p)})
    cell = p.groupby(["agent_id", "config", UNIT], as_index=False)[["retention", "success"]].mean()
    rows = []
    for agent, g in cell.groupby("agent_id", sort=True):
        for world, w in g.groupby(UNIT, sort=True):
            rows.append(
                {
                    "agent": agent,
                    "scope": world,
                    "n_worlds": 1,
                    "n_configs": int(w["config"].nunique()),
                    "n_pairs": len(w),
                    "rho": S.spearman(w["retention"].tolist(), w["success"].tolist()),
                    "rho_lo": math.nan,
                    "rho_hi": math.nan,
                }
            )
        rho, lo, hi = _rho_world_ci(g, n_boot, seed)
        rows.append(
            {
                "agent": agent,
                "scope": "pooled",
                "n_worlds": int(g[UNIT].nunique()),
                "n_configs": int(g["config"].nunique()),
                "n_pairs": len(g),
                "rho": rho,
                "rho_lo": lo,
                "rho_hi": hi,
            }
        )
    return pd.DataFrame(rows, columns=list(VALIDATION_COLUMNS))
