"""Coverage: did the data exercise the policies?

A configuration that never compacts on a task scores there what the uncompacted transcript
scores, so its retention says nothing about it. These tables say, for each configuration,
on how many tasks its calls reached each tier and how many compactions it made, and which
tasks it never compacted on; :func:`conditional_retention` puts the main retention (the
shared checkpoint grid) next to the labelled conditional view "after the policy compacted at
least once". :func:`coverage_blocks` is the report's section.

A task *reached* a tier for a configuration when at least one of its calls ran at that tier
or above (the calls table's ``tier``: the tier the policy's compaction ran at; peers report
``warn`` for their lightweight actions). ``uncompacted_over_warn`` is independent of the
policy: tasks whose uncompacted transcript (``raw_tokens_sent``) reaches harness9's warn
fraction of the window at its peak.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from h9eval.analysis import metrics as M
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "OVERFLOW_COLUMNS",
    "overflow_causes",
    "RUN_COVERAGE_COLUMNS",
    "COVERAGE_COLUMNS",
    "run_coverage",
    "coverage",
    "never_compacted",
    "conditional_retention",
    "coverage_blocks",
]

_REACHED = ("warn", "soft", "full", "emergency")
_CONFIG = ("label", "history_mode", "summarizer")

RUN_COVERAGE_COLUMNS: tuple[str, ...] = (
    "run_id",
    "task_id",
    *_CONFIG,
    "max_tier",
    "n_compactions",
    "never_compacted",
    "uncompacted_peak_ratio",
)
"""Columns of :func:`run_coverage`. ``max_tier``: the highest tier of the run's calls (a name
of :data:`~h9eval.analysis.metrics.TIER_NAMES`); ``uncompacted_peak_ratio``: the largest
``raw_tokens_sent`` over the window (NaN without that column)."""

COVERAGE_COLUMNS: tuple[str, ...] = (
    *_CONFIG,
    "n_tasks",
    *(f"reached_{t}" for t in _REACHED),
    "n_compactions",
    "never_compacted_tasks",
    "uncompacted_over_warn",
    "never_compacted_task_ids",
)
"""Columns of :func:`coverage` (counts of tasks, except ``n_compactions``: compacting calls)."""


def run_coverage(calls: Any, runs: Any | None = None, *, names: Mapping[str, str] | None = None) -> Any:
    """One row per run (:data:`RUN_COVERAGE_COLUMNS`); ``runs`` (a sweep's runs table) gives
    the config labels and keeps only ok runs; ``names``: run id -> the configuration's name
    to use as its label (a report's names)."""
    import numpy as np
    import pandas as pd

    if len(calls) == 0:
        return pd.DataFrame(columns=list(RUN_COVERAGE_COLUMNS))
    rm = M.run_metrics(calls, None, runs)
    info = rm[["run_id", "task_id", *[c for c in _CONFIG if c in rm.columns]]]
    d = calls.copy()
    d["_tier"] = (
        d["tier"].astype(int) if "tier" in d.columns else d["tier_name"].map({t: i for i, t in enumerate(M.TIER_NAMES)})
    )
    d["_raw_ratio"] = (
        d["raw_tokens_sent"].astype(float) / d["context_window_tokens"].astype(float)
        if "raw_tokens_sent" in d.columns
        else np.nan
    )
    g = (
        d.groupby("run_id")
        .agg(_max=("_tier", "max"), n_compactions=("compacted", "sum"), uncompacted_peak_ratio=("_raw_ratio", "max"))
        .reset_index()
    )
    g["max_tier"] = [M.TIER_NAMES[int(t)] for t in g["_max"]]
    g["n_compactions"] = g["n_compactions"].astype(int)
    g["never_compacted"] = g["n_compactions"] == 0
    out = info.merge(g.drop(columns=["_max"]), on="run_id", how="inner")
    for c in _CONFIG:
        if c not in out.columns:
            out[c] = ""
    if names:
        out["label"] = [names.get(r, lab) for r, lab in zip(out["run_id"], out["label"])]
    return out[list(RUN_COVERAGE_COLUMNS)].sort_values("run_id", kind="stable").reset_index(drop=True)


def coverage(
    calls: Any,
    runs: Any | None = None,
    *,
    warn_frac: float = M.DEFAULT_THRESHOLDS["warn"],
    names: Mapping[str, str] | None = None,
) -> Any:
    """One row per configuration (label, history mode, summarizer; :data:`COVERAGE_COLUMNS`):
    tasks that reached each tier, compacting calls in all, tasks never compacted on (and
    their ids), tasks whose uncompacted peak reaches ``warn_frac`` of the window (default
    harness9's 0.6). Repeats of a task count once (a task reached a tier if any repeat did)."""
    import pandas as pd

    rc = run_coverage(calls, runs, names=names)
    if len(rc) == 0:
        return pd.DataFrame(columns=list(COVERAGE_COLUMNS))
    order = {t: i for i, t in enumerate(M.TIER_NAMES)}
    rc["_tier"] = rc["max_tier"].map(order)
    rows = []
    for key, g in rc.groupby(list(_CONFIG), sort=True, dropna=False):
        per_task = g.groupby("task_id").agg(
            t=("_tier", "max"), n=("n_compactions", "sum"), peak=("uncompacted_peak_ratio", "max")
        )
        never = sorted(per_task.index[per_task["n"] == 0])
        row: dict[str, Any] = dict(zip(_CONFIG, key))
        row["n_tasks"] = len(per_task)
        for t in _REACHED:
            row[f"reached_{t}"] = int((per_task["t"] >= order[t]).sum())
        row["n_compactions"] = int(g["n_compactions"].sum())
        row["never_compacted_tasks"] = len(never)
        row["uncompacted_over_warn"] = int((per_task["peak"] >= warn_frac).sum())
        row["never_compacted_task_ids"] = ", ".join(str(x) for x in never)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COVERAGE_COLUMNS))


def never_compacted(
    calls: Any, runs: Any | None = None, *, names: Mapping[str, str] | None = None
) -> dict[str, list[str]]:
    """Config label -> the tasks it never compacted on (only labels with at least one)."""
    out: dict[str, list[str]] = {}
    for r in coverage(calls, runs, names=names).itertuples(index=False):
        if r.never_compacted_tasks:
            label = f"{r.label} ({r.history_mode})" if r.history_mode else str(r.label)
            out.setdefault(label, []).extend(r.never_compacted_task_ids.split(", "))
    return out


def conditional_retention(run_metrics_df: Any) -> Any:
    """Per configuration: ``retention`` (every checkpoint of the shared grid: the main number),
    ``retention_after_compaction`` (the conditional view: checkpoints after the policy's first
    compaction, averaged over the runs that have one), ``runs_with_compaction_before_a_checkpoint``
    and ``never_compacted_runs``."""
    import pandas as pd

    df = run_metrics_df
    keys = [c for c in _CONFIG if c in df.columns]
    if len(df) == 0 or "retention" not in df.columns:
        return pd.DataFrame(columns=[*keys, "n_runs", "retention", "retention_after_compaction"])
    rows = []
    for key, g in df.groupby(keys, sort=True, dropna=False):
        cond = (
            g["retention_after_compaction"].dropna()
            if "retention_after_compaction" in g.columns
            else g.iloc[0:0]["retention"]
        )
        rows.append(
            {
                **dict(zip(keys, key if isinstance(key, tuple) else (key,))),
                "n_runs": len(g),
                "retention": float(g["retention"].mean()),
                "retention_after_compaction": float(cond.mean()) if len(cond) else float("nan"),
                "runs_with_compaction_before_a_checkpoint": len(cond),
                "never_compacted_runs": int(g["never_compacted"].astype(bool).sum())
                if "never_compacted" in g.columns
                else 0,
            }
        )
    return pd.DataFrame(rows)


def coverage_blocks(
    calls: Any, runs: Any | None = None, run_metrics_df: Any | None = None, *, names: Mapping[str, str] | None = None
) -> list[tuple[str, Any]]:
    """The report's coverage section as blocks (``("text", str)``, ``("note", str)``,
    ``("table", (DataFrame, caption))``); ``names``: as for :func:`run_coverage` (the run
    metrics' labels are used as they are)."""
    if len(calls) == 0:
        return [("note", "No calls: nothing to cover.")]
    cov = coverage(calls, runs, names=names)
    blocks: list[tuple[str, Any]] = [
        (
            "table",
            (
                cov,
                "Per configuration: tasks whose calls reached each tier (the tier the policy's compaction ran at), "
                "compacting calls in all, tasks it never compacted on, and tasks whose uncompacted transcript reaches "
                "harness9's warn fraction (0.6) of the window at its peak.",
            ),
        )
    ]
    flagged: Mapping[str, list[str]] = never_compacted(calls, runs, names=names)
    if flagged:
        blocks.append(
            (
                "note",
                f"{len(flagged)} configuration(s) never compacted on some tasks; their scores there are the "
                "uncompacted "
                "transcript's and say nothing about the policy: "
                + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(flagged.items()))
                + ".",
            )
        )
    if (
        run_metrics_df is not None
        and len(run_metrics_df)
        and "retention" in run_metrics_df.columns
        and run_metrics_df["retention"].notna().any()
    ):
        blocks.append(
            (
                "table",
                (
                    conditional_retention(run_metrics_df),
                    "Retention on the shared checkpoint grid (the main number) and, separately, the conditional view "
                    "'after the policy compacted at least once' (grid checkpoints after its first compaction); the "
                    "conditional view compares configurations at different moments and is never mixed into the main "
                    "number.",
                ),
            )
        )
    return blocks


OVERFLOW_COLUMNS: tuple[str, ...] = (
    "config",
    "task_id",
    "history_mode",
    "call_index",
    "message_index",
    "tokens_sent",
    "context_window_tokens",
    "overflow_tokens",
    "message_role",
    "message_tokens",
    "message_alone_over_window",
    "cause",
)
"""Columns of :func:`overflow_causes`."""


def overflow_causes(calls: Any, tasks: Any, *, names: Mapping[str, str] | None = None) -> Any:
    """One row per call whose request exceeded the window (:data:`OVERFLOW_COLUMNS`): which
    message made it too large. The call's newest message (``message_index``: the one whose
    arrival the request answers) with its role and size (harness9's estimate), whether it alone
    is larger than the window, and a sentence (``cause``). ``tasks``: the sweep's
    :class:`~h9eval.tasks.model.Task` objects (a task not given: role and size unknown, NaN);
    ``names``: run id -> configuration label."""
    import pandas as pd

    if calls is None or len(calls) == 0 or "overflow" not in calls.columns:
        return pd.DataFrame(columns=list(OVERFLOW_COLUMNS))
    over = calls[calls["overflow"].fillna(False).astype(bool)]
    by_id = {t.task_id: t for t in tasks}
    rows = []
    for r in over.sort_values(["run_id", "call_index"]).to_dict("records"):
        t = by_id.get(str(r["task_id"]))
        i = int(r["message_index"])
        msg = t.messages[i] if t is not None and 0 <= i < len(t.messages) else None
        size = estimate_tokens([msg]) if msg is not None else float("nan")
        window = int(r["context_window_tokens"])
        alone = bool(msg is not None and size > window)
        role = str(msg.role) if msg is not None else ""
        if msg is None:
            cause = "message unknown (the task could not be reloaded)"
        elif alone:
            cause = f"message {i} ({role}, {size:,} tokens) is larger than the {window:,}-token window by itself"
        else:
            cause = (
                f"message {i} ({role}, {size:,} tokens) arrived with {int(r['tokens_sent']) - size:,} tokens already "
                "in the "
                f"request: what the policy kept plus it exceed the window by {int(r['overflow_tokens']):,}"
            )
        rows.append(
            {
                "config": (names or {}).get(str(r["run_id"]), str(r.get("policy_kind", ""))),
                "task_id": r["task_id"],
                "history_mode": r.get("history_mode"),
                "call_index": int(r["call_index"]),
                "message_index": i,
                "tokens_sent": int(r["tokens_sent"]),
                "context_window_tokens": window,
                "overflow_tokens": int(r["overflow_tokens"]),
                "message_role": role,
                "message_tokens": size,
                "message_alone_over_window": alone,
                "cause": cause,
            }
        )
    return pd.DataFrame(rows, columns=list(OVERFLOW_COLUMNS))
