"""Survival of typed items round after round, from the loss ledger (:mod:`h9eval.probes.ledger`).

:func:`survival_curves`: per configuration (label and history mode), item type and round k (by
default a *fill* round: the k-th time the uncompacted history outgrew a whole window, which a
compacting policy must absorb with a compaction; the same calls for every configuration), the share of the live items that a view still holds exactly (PRESERVED) after its k-th
round, as the mean over tasks of each task's share (the task is the unit), with a percentile
bootstrap interval over tasks and the number of tasks that reached round k with such an item.
Items whose value sits in the task's system or first task message are left out (``pinned``:
they measure pinning, not memory). ``cliff_rounds`` gives, per configuration and type, the first
round where survival falls below :data:`CLIFF_SURVIVAL` (the "cliff": where a summarizer that kept
everything for two rounds loses every safety rule at the third).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from h9eval.analysis.compare import config_labels
from h9eval.analysis.metrics import bootstrap_ci
from h9eval.probes.items import ITEM_TYPES

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["CLIFF_SURVIVAL", "MAX_ROUNDS", "cliff_rounds", "ledger_summary", "survival_curves", "survival_plot"]

CLIFF_SURVIVAL = 0.5
"""The cliff round is the first round where mean survival is below this share of the live items."""
MAX_ROUNDS = 20
"""Rounds a curve shows: later rounds are rare (a view-mode run re-summarises at every call above
its threshold) and their few tasks make the curve noise."""


def _with_labels(ledger: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    labels = runs.assign(label=config_labels(runs))[["run_id", "label", "history_mode"]]
    return ledger.merge(labels, on="run_id", how="inner")


def survival_curves(ledger: pd.DataFrame, runs: pd.DataFrame, *, basis: str = "fill", max_rounds: int = MAX_ROUNDS,
                    include_pinned: bool = False, seed: int = 0) -> pd.DataFrame:
    """``basis``: ``fill`` (default: round k is the k-th window of new content, the same calls for
    every configuration of a task) or ``compaction`` (each run's own k-th view rewrite; a policy
    that never compacts has no rounds there). Columns: ``label``, ``history_mode``, ``item_type``, ``round``, ``survival`` (mean over tasks
    of the PRESERVED share), ``ci_lo``, ``ci_hi``, ``degraded`` and ``stale`` (the same means of
    those states), ``n_tasks``, ``n_items`` (item-rounds pooled)."""
    import pandas as pd

    cols = ["label", "history_mode", "item_type", "round", "survival", "ci_lo", "ci_hi", "degraded", "stale",
            "n_tasks", "n_items"]
    if ledger is None or not len(ledger):
        return pd.DataFrame(columns=cols)
    df = ledger[ledger["basis"] == basis]
    df = df if include_pinned else df[~df["pinned"].astype(bool)]
    df = _with_labels(df[df["round"] <= max_rounds], runs)
    if not len(df):
        return pd.DataFrame(columns=cols)
    df = df.assign(kept=df["state"] == "PRESERVED", deg=df["state"] == "DEGRADED", stl=df["state"] == "STALE")
    per_task = (df.groupby(["label", "history_mode", "item_type", "round", "task_id"], observed=True)
                  .agg(kept=("kept", "mean"), deg=("deg", "mean"), stl=("stl", "mean"), n=("kept", "size"))
                  .reset_index())
    rows = []
    for key, g in per_task.groupby(["label", "history_mode", "item_type", "round"], observed=True):
        ci = bootstrap_ci(g["kept"].tolist(), seed=seed)
        rows.append({**dict(zip(["label", "history_mode", "item_type", "round"], key)), "survival": ci.mean,
                     "ci_lo": ci.lo, "ci_hi": ci.hi, "degraded": float(g["deg"].mean()), "stale": float(g["stl"].mean()),
                     "n_tasks": int(len(g)), "n_items": int(g["n"].sum())})
    out = pd.DataFrame(rows, columns=cols)
    order = {t: i for i, t in enumerate(ITEM_TYPES)}
    return out.sort_values(["label", "history_mode", "item_type", "round"],
                           key=lambda s: s.map(order) if s.name == "item_type" else s).reset_index(drop=True)


def cliff_rounds(curves: pd.DataFrame, *, threshold: float = CLIFF_SURVIVAL) -> pd.DataFrame:
    """Per configuration and item type: ``cliff_round`` (first round with survival below
    ``threshold``; NA when it never falls below), ``survival_round1`` and the rounds observed."""
    import pandas as pd

    rows = []
    for (label, mode, kind), g in curves.groupby(["label", "history_mode", "item_type"], observed=True):
        g = g.sort_values("round")
        below = g[g["survival"] < threshold]
        rows.append({"label": label, "history_mode": mode, "item_type": kind,
                     "cliff_round": int(below["round"].iloc[0]) if len(below) else pd.NA,
                     "survival_round1": float(g["survival"].iloc[0]) if int(g["round"].iloc[0]) == 1 else math.nan,
                     "rounds_observed": int(g["round"].max())})
    return pd.DataFrame(rows, columns=["label", "history_mode", "item_type", "cliff_round", "survival_round1",
                                       "rounds_observed"]).astype({"cliff_round": "Int64"})


def ledger_summary(ledger: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and item type: the share of item-rounds in each state (pinned left out)
    and how many LOST or STALE items were used again later (``used_after_loss``)."""
    import pandas as pd

    if ledger is None or not len(ledger):
        return pd.DataFrame(columns=["label", "history_mode", "item_type"])
    df = _with_labels(ledger[~ledger["pinned"].astype(bool)], runs)
    counts = df.pivot_table(index=["label", "history_mode", "item_type"], columns="state", values="item_id",
                            aggfunc="size", fill_value=0, observed=True)
    shares = counts.div(counts.sum(axis=1), axis=0).round(3)
    lost = df[df["state"].isin(["LOST", "STALE"])]
    used = lost[lost["next_use_call"].notna()].groupby(["label", "history_mode", "item_type"], observed=True)["item_id"]
    shares["used_after_loss"] = used.nunique().reindex(shares.index).fillna(0).astype(int)
    return shares.reset_index()


def survival_plot(curves: pd.DataFrame, *, history_mode: str | None = None,
                  item_types: tuple[str, ...] | None = None) -> Figure:
    """One panel per item type: survival (with its interval band) against the compaction round,
    one line per configuration (named by its label); the cliff level is drawn dashed."""
    import matplotlib.pyplot as plt

    df = curves if history_mode is None else curves[curves["history_mode"] == history_mode]
    kinds = [t for t in (item_types or ITEM_TYPES) if t in set(df["item_type"])]
    n = max(len(kinds), 1)
    ncols = min(n, 4)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.8 * nrows), squeeze=False, sharey=True)
    labels = sorted(set(df["label"]))
    colors = {lab: plt.get_cmap("tab10")(i % 10) for i, lab in enumerate(labels)}
    for ax, kind in zip(axes.flat, kinds):
        for (lab, mode), g in df[df["item_type"] == kind].groupby(["label", "history_mode"], observed=True):
            g = g.sort_values("round")
            name = lab if history_mode is not None or df["history_mode"].nunique() == 1 else f"{lab} ({mode})"
            ax.plot(g["round"], g["survival"], marker="o", ms=3, color=colors[lab], label=name)
            ax.fill_between(g["round"], g["ci_lo"], g["ci_hi"], color=colors[lab], alpha=0.12)
        ax.axhline(CLIFF_SURVIVAL, color="grey", lw=0.8, ls="--")
        ax.set_title(kind.replace("_", " "), fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("compaction round")
    for ax in list(axes.flat)[len(kinds):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("items kept exactly")
    handles, names = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="lower center", ncol=min(len(names), 4), fontsize=8, frameon=False)
    fig.suptitle("Survival of typed items after each compaction round (pinned items left out; dashed: cliff level)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    return fig
