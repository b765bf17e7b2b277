"""How far a sweep's numbers can be trusted: probe validity, the summarizer that made them,
where the probes were taken, and the llm scorer's agreement with exact matching.

Pure functions from a :class:`~h9eval.results.store.Results` (and, for the placebo control,
the sweep's tasks) to tables a report prints next to the numbers they qualify:

* :func:`probe_validity`: per probe kind, retention of the view, the **placebo floor** (how often
  the kind's probes pass against an unrelated task's full history,
  :mod:`h9eval.probes.placebo`), how many probes the placebo control excludes, and retention
  split into answers pinned in the system prompt / first message (pinning, not memory) and the
  rest;
* :func:`summarizer_runs`: which summarizer produced which runs, and whether it is offline;
* :func:`scope_retention`: per configuration, retention of the whole view beside retention of
  the summary alone (scope ``anchors``), averaged per task first;
* :func:`emergency_share`: per configuration, the share of checkpoints (and probe rows) taken
  at the emergency tier, whose truncation rule (``anchor_greedy_v3``) is reconstructed;
* :func:`llm_agreement` and :func:`audit_summary`: the llm scorer's judge-vs-exact agreement
  and the cost of its answers and verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from h9eval.analysis import metrics as M
from h9eval.analysis.compare import OFFLINE_PREFIXES, config_labels, is_offline, run_table
from h9eval.probes.llm import judge_agreement, judge_agreement_table
from h9eval.probes.placebo import PLACEBO_MAX_PASS_RATE, placebo_by_kind, placebo_table, sweep_placebo
from h9eval.results.store import Results
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.model import Task

__all__ = [
    "VALIDITY_COLUMNS",
    "OFFLINE_PREFIXES",
    "is_offline",
    "sweep_tasks",
    "placebo_from_rows",
    "placebo_for",
    "PLACEBO_THRESHOLD",
    "probe_validity",
    "summarizer_runs",
    "scope_retention",
    "emergency_share",
    "llm_agreement",
    "audit_summary",
]

VALIDITY_COLUMNS: tuple[str, ...] = (
    "probe_kind",
    "n_rows",
    "retention",
    "placebo_rate",
    "n_probes",
    "n_excluded",
    "retention_kept",
    "n_pinned_rows",
    "retention_pinned",
    "retention_unpinned",
)
"""Columns of :func:`probe_validity`."""


def sweep_tasks(results: Results, *, max_tasks: int | None = None) -> list[Task]:
    """The sweep's tasks, reloaded from the runs' ``task_spec`` entries (only the task ids the
    runs name; at most ``max_tasks``). Raises what the loaders raise for a moved recording."""
    runs = results.runs
    if "task_spec" not in runs.columns or len(runs) == 0:
        return []
    want = set(runs["task_id"].astype(str))
    out: dict[str, Task] = {}
    for spec in dict.fromkeys(runs["task_spec"].dropna().astype(str)):
        for t in load_tasks_from_spec(spec):
            if t.task_id in want and t.task_id not in out:
                out[t.task_id] = t
        if max_tasks is not None and len(out) >= max_tasks:
            break
    return [out[k] for k in sorted(out)][:max_tasks]


def placebo_from_rows(probes: Any) -> Any:
    """A :func:`h9eval.probes.placebo.placebo_table`-like frame (one row per task and probe) from
    probe rows that carry ``placebo_rate``/``placebo_excluded``; empty when none does. Its
    ``n_partners`` is 1 per probe, so :func:`placebo_by_kind` averages the probes' rates."""
    import pandas as pd

    cols = ["task_id", "probe_id", "probe_kind", "n_partners", "n_passed", "placebo_rate", "excluded"]
    if probes is None or len(probes) == 0 or "placebo_rate" not in probes.columns:
        return pd.DataFrame(columns=cols)
    p = probes[probes["placebo_rate"].notna()]
    if len(p) == 0:
        return pd.DataFrame(columns=cols)
    first = p.drop_duplicates(["task_id", "probe_id"])
    return pd.DataFrame(
        {
            "task_id": first["task_id"],
            "probe_id": first["probe_id"],
            "probe_kind": first["probe_kind"],
            "n_partners": 1,
            "n_passed": first["placebo_rate"].astype(float),
            "placebo_rate": first["placebo_rate"].astype(float),
            "excluded": first["placebo_excluded"].fillna(False).astype(bool),
        },
        columns=cols,
    ).reset_index(drop=True)


def probe_validity(results: Results, placebo: Any = None, *, method: str = "recall", scope: str = "view") -> Any:
    """Per probe kind (:data:`VALIDITY_COLUMNS`): ``n_rows`` answerable probe rows and their
    ``retention``; ``placebo_rate`` (pooled over the kind's probes and partners), ``n_probes``
    and ``n_excluded`` (probes whose rate exceeds
    :data:`~h9eval.probes.placebo.PLACEBO_MAX_PASS_RATE`) from ``placebo`` (a placebo table;
    default: the rows' own placebo columns); ``retention_kept``: retention without the excluded
    probes; ``n_pinned_rows``, ``retention_pinned``/``retention_unpinned``: rows whose answer is
    in the system prompt or the pinned first message, and the rest (kept rows only)."""
    import pandas as pd

    probes = results.probes
    if placebo is None:
        placebo = placebo_from_rows(probes)
    elif probes is not None and len(probes) and len(placebo):
        # only the probes these results asked: a task's other probes (at checkpoints the shared
        # grid did not pick) are not part of what the report measured
        asked = set(zip(probes["task_id"].astype(str), probes["probe_id"].astype(str)))
        placebo = placebo[[k in asked for k in zip(placebo["task_id"].astype(str), placebo["probe_id"].astype(str))]]
    pk = placebo_by_kind(placebo).set_index("probe_kind") if len(placebo) else pd.DataFrame()
    excluded: set[tuple[str, str]] = set()
    if len(placebo):
        excluded = {
            k
            for k, e in zip(
                zip(placebo["task_id"].astype(str), placebo["probe_id"].astype(str)), placebo["excluded"].astype(bool)
            )
            if e
        }
    rows = []
    p = probes if probes is not None else pd.DataFrame(columns=["probe_kind", "score"])
    kinds = sorted(set(p["probe_kind"].dropna()) | set(pk.index)) if len(p) or len(pk) else []
    ans = (
        M.retention(p, by=("probe_kind",), method=method, scope=scope, pinned="include", placebo=False)
        if len(p)
        else pd.DataFrame(columns=["probe_kind", "retention", "n_probes"])
    )
    ans = ans.set_index("probe_kind")
    if len(p):
        sub = p[(p["method"] == method) & (p["scope"] == scope)]
        key = list(zip(sub["task_id"].astype(str), sub["probe_id"].astype(str)))
        kept = sub[[k not in excluded for k in key]]
        pinned = (
            kept["answer_pinned"].fillna(False).astype(bool)
            if "answer_pinned" in kept.columns
            else pd.Series(False, index=kept.index)
        )
        r_kept = M.retention(
            kept, by=("probe_kind",), method=None, scope=None, pinned="include", placebo=False
        ).set_index("probe_kind")
        r_pin = M.retention(
            kept[pinned], by=("probe_kind",), method=None, scope=None, pinned="include", placebo=False
        ).set_index("probe_kind")
        r_unpin = M.retention(
            kept[~pinned], by=("probe_kind",), method=None, scope=None, pinned="include", placebo=False
        ).set_index("probe_kind")
    else:
        r_kept = r_pin = r_unpin = pd.DataFrame(columns=["retention", "n_probes"])
    nan = math.nan

    def get(df: Any, k: str, c: str, default: Any = nan) -> Any:
        return df[c].get(k, default) if len(df) and c in df.columns else default

    for k in kinds:
        rows.append(
            {
                "probe_kind": k,
                "n_rows": int(get(ans, k, "n_probes", 0)),
                "retention": float(get(ans, k, "retention")),
                "placebo_rate": float(get(pk, k, "placebo_rate")),
                "n_probes": int(get(pk, k, "n_probes", 0)),
                "n_excluded": int(get(pk, k, "n_excluded", 0)),
                "retention_kept": float(get(r_kept, k, "retention")),
                "n_pinned_rows": int(get(r_pin, k, "n_probes", 0)),
                "retention_pinned": float(get(r_pin, k, "retention")),
                "retention_unpinned": float(get(r_unpin, k, "retention")),
            }
        )
    return pd.DataFrame(rows, columns=list(VALIDITY_COLUMNS))


def placebo_for(results: Results, tasks: Sequence[Task] | None = None, *, seed: int = 0) -> Any:
    """The placebo table behind :func:`probe_validity`: the rows' own placebo columns when the
    sweep filled them, else :func:`h9eval.probes.placebo.placebo_table` of ``tasks`` (default
    the sweep's tasks, :func:`sweep_tasks`). Its ``attrs["source"]`` says which."""
    t = placebo_from_rows(results.probes)
    if len(t):
        t.attrs["source"] = "probe rows"
        return t
    ts = list(tasks) if tasks is not None else sweep_tasks(results)
    t = placebo_table(sweep_placebo(ts)) if ts else placebo_from_rows(None)
    t.attrs["source"] = f"recomputed on {len(ts)} task(s) (results written before sweeps applied the control)"
    return t


def summarizer_runs(results: Results) -> Any:
    """Per summarizer variant: ``summarizer``, ``offline`` (:func:`is_offline`), ``n_runs`` (ok
    runs) and ``configurations`` (how many configuration labels used it)."""
    import pandas as pd

    ok = results.ok
    if len(ok) == 0 or "summarizer" not in ok.columns:
        return pd.DataFrame(columns=["summarizer", "offline", "n_runs", "configurations"])
    labels = config_labels(ok)
    rows = [
        {
            "summarizer": s,
            "offline": is_offline(s),
            "n_runs": int(len(g)),
            "configurations": int(labels[g.index].nunique()),
        }
        for s, g in ok.groupby(ok["summarizer"].fillna("").astype(str), sort=True)
    ]
    return pd.DataFrame(rows, columns=["summarizer", "offline", "n_runs", "configurations"])


def _task_mean(table: Any, col: str) -> Any:
    """Per configuration: the mean over tasks of the per-task mean of ``col`` (NaNs dropped)."""
    t = table[table[col].notna()]
    return t.groupby(["config", "task_id"])[col].mean().groupby(level="config").mean()


def scope_retention(results: Results, *, method: str = "recall") -> Any:
    """Per configuration: ``view_retention`` and ``anchors_retention`` (the summary alone; NaN
    for runs that never called the summarizer), each the mean over tasks of the per-task
    mean; ``n_tasks``; ``n_tasks_compacted``."""
    import pandas as pd

    table = run_table(results)
    cols = ["config", "view_retention", "anchors_retention", "n_tasks", "n_tasks_compacted"]
    probes = results.probes
    if len(table) == 0 or probes is None or len(probes) == 0:
        return pd.DataFrame(columns=cols)
    a = M.retention(probes, by=("run_id",), method=method, scope="anchors")[["run_id", "retention"]].rename(
        columns={"retention": "anchors_retention"}
    )
    t = table.merge(a, on="run_id", how="left")
    # a run that never called the summarizer has no summary to score: its 0 would read as "lost"
    t.loc[t["summarizer_calls"].fillna(0) == 0, "anchors_retention"] = math.nan
    comp = (
        t.assign(_c=t["n_compactions"].fillna(0) > 0).groupby(["config", "task_id"])["_c"].any().groupby(level="config")
    )
    out = pd.DataFrame(
        {
            "view_retention": _task_mean(t, "retention"),
            "anchors_retention": _task_mean(t, "anchors_retention"),
            "n_tasks": comp.size(),
            "n_tasks_compacted": comp.sum().astype(int),
        }
    )
    return out.rename_axis("config").reset_index()[cols]


def emergency_share(results: Results, *, method: str = "recall", scope: str = "view") -> Any:
    """Per configuration: ``n_checkpoints`` (distinct run × checkpoint), ``emergency_checkpoints``
    (taken at the emergency tier), ``emergency_frac`` (their share), ``emergency_row_frac`` (share
    of the answerable probe rows taken there) and ``runs_with_emergency`` (runs with a forced
    truncation)."""
    import pandas as pd

    cols = [
        "config",
        "n_checkpoints",
        "emergency_checkpoints",
        "emergency_frac",
        "emergency_row_frac",
        "runs_with_emergency",
    ]
    table = run_table(results)
    probes = results.probes
    if len(table) == 0 or probes is None or len(probes) == 0:
        return pd.DataFrame(columns=cols)
    p = probes[(probes["method"] == method) & (probes["scope"] == scope) & probes["answerable"].astype(bool)]
    p = p.merge(table[["run_id", "config"]], on="run_id", how="inner")
    p = p.assign(_e=p["tier_at_checkpoint"].astype(str) == "emergency")
    cp = p.drop_duplicates(["run_id", "checkpoint_call_index"])
    rows = []
    for cfg in sorted(table["config"].unique()):
        c, r = cp[cp["config"] == cfg], p[p["config"] == cfg]
        n = int(len(c))
        rows.append(
            {
                "config": cfg,
                "n_checkpoints": n,
                "emergency_checkpoints": int(c["_e"].sum()),
                "emergency_frac": float(c["_e"].mean()) if n else math.nan,
                "emergency_row_frac": float(r["_e"].mean()) if len(r) else math.nan,
                "runs_with_emergency": int((table.loc[table["config"] == cfg, "emergencies"].fillna(0) > 0).sum()),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def llm_agreement(results: Results) -> tuple[Any, Any]:
    """The llm scorer's judge-vs-exact agreement: overall
    (:class:`h9eval.probes.llm.JudgeAgreement`, ``n == 0`` when the scorer did not run) and per
    configuration (a DataFrame: ``config``, ``n``, ``agreement``, ``judge_yes_exact_no``,
    ``judge_no_exact_yes``)."""
    import pandas as pd

    probes = results.probes
    cols = ["config", "n", "agreement", "judge_yes_exact_no", "judge_no_exact_yes"]
    if probes is None or len(probes) == 0:
        return judge_agreement(
            pd.DataFrame(
                columns=[
                    "method",
                    "answerable",
                    "passed",
                    "run_id",
                    "task_id",
                    "checkpoint_call_index",
                    "probe_id",
                    "scope",
                ]
            )
        ), pd.DataFrame(columns=cols)
    overall = judge_agreement(probes)
    if overall.n == 0:
        return overall, pd.DataFrame(columns=cols)
    per_run = judge_agreement_table(probes, by=("run_id",))
    table = run_table(results)[["run_id", "config"]]
    m = per_run.merge(table, on="run_id", how="inner")
    rows = []
    for cfg, g in m.groupby("config", sort=True):
        n = int(g["n"].sum())
        agree = float((g["agreement"] * g["n"]).sum() / n) if n else math.nan
        rows.append(
            {
                "config": cfg,
                "n": n,
                "agreement": agree,
                "judge_yes_exact_no": int(g["judge_yes_exact_no"].sum()),
                "judge_no_exact_yes": int(g["judge_no_exact_yes"].sum()),
            }
        )
    return overall, pd.DataFrame(rows, columns=cols)


def audit_summary(audit: Any) -> Any:
    """Per role of an llm-scorer audit table (:data:`h9eval.probes.llm.AUDIT_COLUMNS`: answer,
    judge, action): ``n`` replies, ``cache_hits``, ``input_tokens``, ``output_tokens``,
    ``cost_usd`` (NaN when a reply's model was unpriced) and, for the judge, ``judge_yes`` (verdicts
    1.0); an ``all`` row last."""
    import pandas as pd

    cols = ["role", "n", "cache_hits", "input_tokens", "output_tokens", "cost_usd", "judge_yes"]
    if audit is None or len(audit) == 0:
        return pd.DataFrame(columns=cols)

    def row(role: str, g: Any) -> dict[str, Any]:
        judge = g[g["role"] == "judge"]
        return {
            "role": role,
            "n": int(len(g)),
            "cache_hits": int(g["cache_hit"].fillna(False).astype(bool).sum()),
            "input_tokens": int(g["input_tokens"].fillna(0).sum()),
            "output_tokens": int(g["output_tokens"].fillna(0).sum()),
            "cost_usd": M.dollars_total(g["cost_usd"].astype(float)),  # an unpriced reply: unknown, never $0
            "judge_yes": int((judge["verdict"] == 1.0).sum()) if len(judge) else 0,
        }

    rows = [row(str(r), g) for r, g in audit.groupby("role", sort=True)]
    rows.append(row("all", audit))
    return pd.DataFrame(rows, columns=cols)


PLACEBO_THRESHOLD = PLACEBO_MAX_PASS_RATE
"""Re-exported for the report's wording: probes passing by chance above this are excluded."""
