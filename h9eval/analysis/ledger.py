"""Survival of typed items round after round, from the loss ledger (:mod:`h9eval.probes.ledger`).

:func:`survival_curves`: per configuration (label and history mode), item type and round k (by
default a *fill* round: the k-th time the uncompacted history outgrew a whole window, which a
compacting policy must absorb with a compaction; the same calls for every configuration),
the share of the live items that a view still holds exactly (PRESERVED) after its k-th
round, as the mean over tasks of each task's share (the task is the unit), with a percentile
bootstrap interval over tasks and the number of tasks that reached round k with such an item.
Items whose value sits in the task's system or first task message are left out (``pinned``:
they measure pinning, not memory). ``cliff_rounds`` gives, per configuration and type, the first
round where survival falls below :data:`CLIFF_SURVIVAL` (the "cliff": where a summarizer that kept
everything for two rounds loses every safety rule at the third).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from h9eval.analysis.compare import config_labels
from h9eval.analysis.ledger_page import ledger_page_html, run_diffs, write_page
from h9eval.analysis.metrics import bootstrap_ci
from h9eval.analysis.report.model import Section
from h9eval.core.paths import prepare_out_dir
from h9eval.probes.items import ITEM_TYPES
from h9eval.results.store import Results, cell_dir_name

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "CLIFF_SURVIVAL",
    "MAX_ROUNDS",
    "cliff_rounds",
    "ledger_sections",
    "ledger_summary",
    "survival_curves",
    "survival_plot",
]

CLIFF_SURVIVAL = 0.5
"""The cliff round is the first round where mean survival is below this share of the live items."""
MAX_ROUNDS = 20
"""Rounds a curve shows: later rounds are rare (a view-mode run re-summarises at every call above
its threshold) and their few tasks make the curve noise."""


def _with_labels(ledger: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    labels = runs.assign(label=config_labels(runs))[["run_id", "label", "history_mode"]]
    return ledger.merge(labels, on="run_id", how="inner")


def survival_curves(
    ledger: pd.DataFrame,
    runs: pd.DataFrame,
    *,
    basis: str = "fill",
    max_rounds: int = MAX_ROUNDS,
    include_pinned: bool = False,
    seed: int = 0,
) -> pd.DataFrame:
    """``basis``: ``fill`` (default: round k is the k-th window of new content, the same calls for
    every configuration of a task) or ``compaction`` (each run's own k-th view rewrite; a policy
    that never compacts has no rounds there). Columns: ``label``, ``history_mode``, ``item_type``, ``round``,
    ``survival`` (mean over tasks
    of the PRESERVED share), ``ci_lo``, ``ci_hi``, ``degraded`` and ``stale`` (the same means of
    those states), ``n_tasks``, ``n_items`` (item-rounds pooled)."""
    import pandas as pd

    cols = [
        "label",
        "history_mode",
        "item_type",
        "round",
        "survival",
        "ci_lo",
        "ci_hi",
        "degraded",
        "stale",
        "n_tasks",
        "n_items",
    ]
    if ledger is None or not len(ledger):
        return pd.DataFrame(columns=cols)
    df = ledger[ledger["basis"] == basis]
    df = df if include_pinned else df[~df["pinned"].astype(bool)]
    df = _with_labels(df[df["round"] <= max_rounds], runs)
    if not len(df):
        return pd.DataFrame(columns=cols)
    df = df.assign(kept=df["state"] == "PRESERVED", deg=df["state"] == "DEGRADED", stl=df["state"] == "STALE")
    per_task = (
        df.groupby(["label", "history_mode", "item_type", "round", "task_id"], observed=True)
        .agg(kept=("kept", "mean"), deg=("deg", "mean"), stl=("stl", "mean"), n=("kept", "size"))
        .reset_index()
    )
    rows = []
    for key, g in per_task.groupby(["label", "history_mode", "item_type", "round"], observed=True):
        ci = bootstrap_ci(g["kept"].tolist(), seed=seed)
        rows.append(
            {
                **dict(zip(["label", "history_mode", "item_type", "round"], key)),
                "survival": ci.mean,
                "ci_lo": ci.lo,
                "ci_hi": ci.hi,
                "degraded": float(g["deg"].mean()),
                "stale": float(g["stl"].mean()),
                "n_tasks": int(len(g)),
                "n_items": int(g["n"].sum()),
            }
        )
    out = pd.DataFrame(rows, columns=cols)
    order = {t: i for i, t in enumerate(ITEM_TYPES)}
    return out.sort_values(
        ["label", "history_mode", "item_type", "round"], key=lambda s: s.map(order) if s.name == "item_type" else s
    ).reset_index(drop=True)


def cliff_rounds(curves: pd.DataFrame, *, threshold: float = CLIFF_SURVIVAL) -> pd.DataFrame:
    """Per configuration and item type: ``cliff_round`` (first round with survival below
    ``threshold``; NA when it never falls below), ``survival_round1`` and the rounds observed."""
    import pandas as pd

    rows = []
    for (label, mode, kind), g in curves.groupby(["label", "history_mode", "item_type"], observed=True):
        g = g.sort_values("round")
        below = g[g["survival"] < threshold]
        rows.append(
            {
                "label": label,
                "history_mode": mode,
                "item_type": kind,
                "cliff_round": int(below["round"].iloc[0]) if len(below) else pd.NA,
                "survival_round1": float(g["survival"].iloc[0]) if int(g["round"].iloc[0]) == 1 else math.nan,
                "rounds_observed": int(g["round"].max()),
            }
        )
    return pd.DataFrame(
        rows, columns=["label", "history_mode", "item_type", "cliff_round", "survival_round1", "rounds_observed"]
    ).astype({"cliff_round": "Int64"})


def ledger_summary(ledger: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and item type: the share of item-rounds in each state (pinned left out)
    and how many LOST or STALE items were used again later (``used_after_loss``)."""
    import pandas as pd

    if ledger is None or not len(ledger):
        return pd.DataFrame(columns=["label", "history_mode", "item_type"])
    df = _with_labels(ledger[~ledger["pinned"].astype(bool)], runs)
    counts = df.pivot_table(
        index=["label", "history_mode", "item_type"],
        columns="state",
        values="item_id",
        aggfunc="size",
        fill_value=0,
        observed=True,
    )
    shares = counts.div(counts.sum(axis=1), axis=0).round(3)
    lost = df[df["state"].isin(["LOST", "STALE"])]
    used = lost[lost["next_use_call"].notna()].groupby(["label", "history_mode", "item_type"], observed=True)["item_id"]
    shares["used_after_loss"] = used.nunique().reindex(shares.index).fillna(0).astype(int)
    return shares.reset_index()


def survival_plot(
    curves: pd.DataFrame, *, history_mode: str | None = None, item_types: tuple[str, ...] | None = None
) -> Figure:
    """One panel per item type: survival (with its interval band) against the compaction round,
    one line per configuration (named by its label); the cliff level is drawn dashed."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    df = curves if history_mode is None else curves[curves["history_mode"] == history_mode]
    kinds = [t for t in (item_types or ITEM_TYPES) if t in set(df["item_type"])]
    n = max(len(kinds), 1)
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    # a Figure, not pyplot: no global figure state (a notebook or a report may draw many)
    fig = Figure(figsize=(3.0 * ncols, 2.4 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    labels = sorted(set(df["label"]))
    colors = {lab: colormaps["tab10"](i % 10) for i, lab in enumerate(labels)}
    for ax, kind in zip(axes.flat, kinds):
        for (lab, mode), g in df[df["item_type"] == kind].groupby(["label", "history_mode"], observed=True):
            g = g.sort_values("round")
            name = lab if history_mode is not None or df["history_mode"].nunique() == 1 else f"{lab} ({mode})"
            ax.plot(g["round"], g["survival"], marker="o", ms=3, color=colors[lab], label=name)
            ax.fill_between(g["round"], g["ci_lo"], g["ci_hi"], color=colors[lab], alpha=0.12)
        ax.axhline(CLIFF_SURVIVAL, color="grey", lw=0.8, ls="--")
        ax.set_title(kind.replace("_", " "), fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("round (window fill)")
    for ax in list(axes.flat)[len(kinds) :]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("items kept exactly")
    handles, names = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="lower center", ncol=min(len(names), 4), fontsize=8, frameon=False)
    fig.suptitle(
        "Items kept exactly after the k-th window fill (pinned items left out; dashed: the cliff level)", fontsize=10
    )
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    return fig


MAX_LEDGER_PAGES = 6
"""Runs the report writes a diff page for (each replayed again: a few seconds apiece)."""


def _page_runs(res: Results, max_pages: int) -> list[str]:
    """One task's runs (the task whose harness9-default run compacted most), one page per
    configuration, harness9's default first and the controls last."""
    led = res.ledger[res.ledger["basis"] == "compaction"]
    if not len(led):
        return []
    rounds = led.groupby(["task_id", "run_id"], observed=True)["round"].max().reset_index()
    task = rounds.sort_values(["round", "task_id"], ascending=[False, True])["task_id"].iloc[0]
    runs = res.runs[(res.runs["task_id"] == task) & (res.runs["status"] == "ok")]
    runs = runs.assign(label=config_labels(runs))
    if "cell_kind" in runs.columns:
        runs = runs[runs["cell_kind"].fillna("replay") == "replay"]
    control = runs["policy_kind"].isin(["keep_all", "drop_all"])
    default = runs["label"].str.startswith("harness9")
    order = runs.assign(o=(~default).astype(int) + 2 * control.astype(int)).sort_values(["o", "label", "history_mode"])
    return list(order["run_id"].head(max_pages))


def ledger_sections(
    res: Results, out: Path | None, *, seed: int = 0, max_pages: int = MAX_LEDGER_PAGES
) -> list[Section]:
    """The report's section on what compaction loses: survival of each item type after each
    window fill with task-level intervals and the cliff round, the states per configuration, the
    calibration caveat, and links to the diff pages of one task's runs (written into ``out``)."""
    s = Section("What compaction loses: the loss ledger")
    ledger = getattr(res, "ledger", None)
    if ledger is None or not len(ledger):
        s.text("No ledger in these results (a sweep written before the loss ledger, or closed-loop cells only).")
        return [s]
    curves = survival_curves(ledger, res.runs, seed=seed)
    s.text(
        "Every item the task's ground truth tracks (goal terms, safety rules, side constraints, preferences, "
        "facts, updated values, artifacts, failed approaches, progress, next steps) is judged in the view sent "
        "at each round: PRESERVED only with its exact value, DEGRADED, STALE (an old value shown as current) "
        "or LOST. A round is the k-th time the uncompacted history outgrew a whole window: the same calls for "
        "every configuration of a task. Items pinned in the system or first task message are left out. "
        f"The cliff round is the first where survival falls below {CLIFF_SURVIVAL:.0%}."
    )
    summarizers = set(res.runs["summarizer"].dropna().astype(str)) if "summarizer" in res.runs.columns else set()
    if not summarizers or all(name.startswith("offline") for name in summarizers):
        s.note(
            "The summaries are written by the offline extractive stand-in, not a model; README section 'The loss "
            "ledger' gives its measured gap to Claude Code's own compaction summaries per item type."
        )
    else:
        s.note(
            f"Summaries written by: {', '.join(sorted(summarizers))} (the offline ones are an extractive stand-in; "
            "README section 'The loss ledger' gives its gap to a real model's summaries)."
        )
    for mode in sorted(set(curves["history_mode"])):
        s.figure(
            f"survival_{mode}",
            survival_plot(curves, history_mode=mode),
            f"Items kept exactly after each window fill ({mode} mode); band: 95% bootstrap interval over tasks",
        )
    cliffs = cliff_rounds(curves)
    if len(cliffs):
        wide = cliffs.pivot_table(
            index=["label", "history_mode"], columns="item_type", values="cliff_round", aggfunc="first", observed=True
        )
        s.table(
            wide.astype(object).where(wide.notna(), "–").reset_index(),
            f"Cliff round per item type (first round with survival below {CLIFF_SURVIVAL:.0%}; – : never)",
        )
    summary = ledger_summary(ledger, res.runs)
    if "LOST" in summary.columns:
        lost = summary.pivot_table(
            index=["label", "history_mode"], columns="item_type", values="LOST", aggfunc="first", observed=True
        )
        s.table(
            lost.round(2).reset_index(),
            "Share of item-rounds LOST per item type (all rounds, both bases; "
            "ledger_summary() gives every state and the LOST/STALE items used again later)",
        )
    if out is not None:
        runs = res.runs.drop_duplicates("run_id")
        # the link says which configuration, mode and task, by the names the spec gave (the run id is a hash)
        names = dict(zip(runs["run_id"], config_labels(runs)))
        where = {r: f"{m} mode, {t}" for r, m, t in zip(runs["run_id"], runs["history_mode"], runs["task_id"])}
        for rid in _page_runs(res, max_pages):
            target = out / "ledger" / f"{cell_dir_name(rid)}.html"
            prepare_out_dir(target.parent, what="ledger pages folder")  # refuses a planted link
            write_page(target, ledger_page_html(run_diffs(res, rid)))
            s.link(
                f"ledger/{target.name}",
                f"Diff view of {names.get(rid, rid)} ({where.get(rid, rid)}): "
                "what each compaction took out and what followed",
            )
    return [s]
