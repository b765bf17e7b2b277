"""Metrics: pure functions from the tidy tables to the numbers plots and reports show.

Inputs are the DataFrames of :func:`h9eval.results.store.load_results` (``runs``, ``calls``,
``compactions``, ``probes``) or of a single :func:`h9eval.runs.replay.replay`; only the columns a
function names are needed, so small hand-built frames work too. Nothing here reads files,
touches the network, or uses global randomness (:func:`bootstrap_ci` takes a seed).

Definitions used throughout:

* **tokens saved** of a run: ``1 - sum(tokens_sent) / sum(raw_tokens_sent)`` over its calls,
  where ``raw_tokens_sent`` is what the *uncompacted transcript* would send at the same call
  (every recorded message before it, no tool-time offload, no write-back, tool schemas
  included on both sides): one baseline for every policy and history mode, so 0 = nothing
  saved against not compacting at all (:func:`tokens_saved`; the only definition: report,
  tuner and notebooks call it). Calls tables written before ``raw_tokens_sent`` existed give
  NaN, never a number against another baseline.
* **peak tokens sent** / **peak ratio to the window** of a run: the largest ``tokens_sent``,
  and that over the run's ``context_window_tokens`` (> 1: some call overflowed).
* **retention** of a run: mean probe ``score`` over *answerable*, *unpinned* probes the placebo
  control kept (method ``recall`` and scope ``view`` unless told otherwise), overall and per
  ``probe_kind``, on the task's checkpoint grid (the same calls for every policy). A pinned
  probe's answer sits in the system or first task message, which every policy keeps: it
  measures pinning, not memory, and is reported apart (``pinned_retention``;
  ``retention_with_pinned`` is both together). **retention after compaction** is the
  conditional view "after the policy compacted at least once" (grid checkpoints with
  ``after_compaction``): its own column, never mixed into ``retention``.
* a **config**: ``policy_kind`` + ``params_hash`` (+ ``history_mode``, ``summarizer``); its
  label names the parameters that differ from the policy's defaults.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from h9eval.analysis import stats as S
from h9eval.compaction.policies import make_policy
from h9eval.compaction.base import policy_params
from h9eval.compaction.anchors import is_no_information
from h9eval.tasks.model import ANCHOR_KINDS

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "TIER_NAMES",
    "DEFAULT_THRESHOLDS",
    "IMPROVEMENT_OPTIONS",
    "CI",
    "bootstrap_ci",
    "dollars_mean",
    "dollars_total",
    "TOKENS_SAVED_COLUMNS",
    "tokens_saved",
    "PINNED_CHOICES",
    "COST_COLUMNS",
    "cost_metrics",
    "compaction_invalidation",
    "retention",
    "retention_over_calls",
    "run_metrics",
    "config_labels",
    "config_metrics",
    "pareto_front",
    "tier_transitions",
    "summarizer_usage",
    "token_estimate_error",
    "tier_of",
    "tier_misclassification",
    "anchor_presence",
    "anchor_retention",
    "params_diff",
    "option_comparison",
    "recommend",
]

TIER_NAMES: tuple[str, ...] = ("none", "warn", "soft", "full", "emergency")
_HARNESS9 = policy_params(make_policy("progressive"))
DEFAULT_THRESHOLDS: Mapping[str, float] = {
    tier: float(_HARNESS9[f"{tier}_frac"]) for tier in ("warn", "soft", "full", "emergency")
}
"""harness9's tier thresholds as fractions of the window (``>=`` comparisons): the defaults of
:class:`~h9eval.compaction.policies.progressive.ProgressiveCompactor`, their one owner."""

IMPROVEMENT_OPTIONS: tuple[str, ...] = (
    "extra_anchors",
    "na_safe_merge",
    "tail_budget_tokens",
    "tier_token_counter",
    "anti_thrash_frac",
    "mask_observations_keep_turns",
    "min_gain_horizon_calls",
)
"""The ``progressive`` policy's h9eval improvement options (all off in the faithful default)."""

_CONFIG_KEYS = ("policy_kind", "params_hash", "history_mode", "summarizer")


# -- statistics -------------------------------------------------------------------------------
@dataclass(frozen=True)
class CI:
    """A mean with a bootstrap confidence interval; ``n`` values went in (NaNs dropped)."""

    mean: float
    lo: float
    hi: float
    n: int
    level: float = 0.95

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {f"{prefix}mean": self.mean, f"{prefix}ci_lo": self.lo, f"{prefix}ci_hi": self.hi, f"{prefix}n": self.n}

    def __str__(self) -> str:
        if self.n == 0:
            return "n/a"
        return f"{self.mean:.3f} [{self.lo:.3f}, {self.hi:.3f}]"


def bootstrap_ci(values: Iterable[float], n: int = 1000, seed: int = 0, level: float = 0.95) -> CI:
    """Percentile bootstrap CI of the mean of ``values`` (NaNs dropped).

    ``n``: resamples (default 1,000). ``seed``: seeds a ``numpy.random.Generator`` (default 0),
    so the interval is reproducible. ``level``: coverage (default 0.95). One value gives a
    zero-width interval; none gives NaNs with ``n=0``.
    """
    import numpy as np

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    x = np.asarray([float(v) for v in values], dtype=float)
    x = x[~np.isnan(x)]
    if len(x) == 0:
        return CI(math.nan, math.nan, math.nan, 0, level)
    m = float(x.mean())
    if len(x) == 1 or n <= 0:
        return CI(m, m, m, len(x), level)
    # the one bootstrap (scipy's, in h9eval.analysis.stats): the same draws, rng.integers(0, len, (n, len))
    lo, hi = S.percentile_interval(S.bootstrap_means(x, n_resamples=n, seed=seed), level)
    return CI(m, lo, hi, len(x), level)


# -- per run ----------------------------------------------------------------------------------
TOKENS_SAVED_COLUMNS: tuple[str, ...] = (
    "run_id",
    "mean_tokens_sent",
    "mean_raw_tokens_sent",
    "tokens_saved",
    "peak_tokens_sent",
    "peak_ratio_to_window",
)
"""Columns of :func:`tokens_saved`."""


def tokens_saved(calls: Any) -> Any:
    """Per run (:data:`TOKENS_SAVED_COLUMNS`): ``mean_tokens_sent``, ``mean_raw_tokens_sent``,
    ``tokens_saved`` = ``1 - sum(tokens_sent) / sum(raw_tokens_sent)`` (see the module
    docstring; NaN without ``raw_tokens_sent`` or when it sums to 0), ``peak_tokens_sent`` and
    ``peak_ratio_to_window`` (``peak_tokens_sent / context_window_tokens``; NaN without a window
    column)."""
    import pandas as pd

    if len(calls) == 0:
        return pd.DataFrame(columns=list(TOKENS_SAVED_COLUMNS))
    d = calls.copy()
    d["_sent"] = d["tokens_sent"].astype(float)
    d["_raw"] = d["raw_tokens_sent"].astype(float) if "raw_tokens_sent" in d.columns else math.nan
    d["_ratio"] = (
        d["_sent"] / d["context_window_tokens"].astype(float) if "context_window_tokens" in d.columns else math.nan
    )
    g = d.groupby("run_id", sort=True).agg(
        mean_tokens_sent=("_sent", "mean"),
        mean_raw_tokens_sent=("_raw", "mean"),
        _sum_sent=("_sent", "sum"),
        _sum_raw=("_raw", lambda x: float(x.sum()) if x.notna().all() else math.nan),
        peak_tokens_sent=("tokens_sent", "max"),
        peak_ratio_to_window=("_ratio", "max"),
    )
    raw = g["_sum_raw"].astype(float)
    g["tokens_saved"] = (1 - g["_sum_sent"] / raw.where(raw > 0)).astype(float)
    return g.reset_index()[list(TOKENS_SAVED_COLUMNS)]


PINNED_CHOICES: tuple[str, ...] = ("exclude", "only", "include")
"""What :func:`retention` does with pinned probes (``answer_pinned``: the answer sits in the
system message or the first task message, which every policy keeps): ``exclude`` (default: the
headline retention measures memory, not pinning), ``only`` (the ``pinned_retention`` column) or
``include`` (both, the number h9eval reported before pinning was set apart)."""


COST_COLUMNS = (
    "run_id",
    "cost_usd",
    "raw_cost_usd",
    "cost_saved_usd",
    "cost_saved",
    "cache_read_share",
    "invalidation_usd",
    "unpriced_calls",
)
"""Columns of :func:`cost_metrics`."""

_BILLED_INPUT = ("uncached_input_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens", "cache_read_tokens")


def dollars_total(x: Any) -> float:
    """The sum of a column of dollars: NaN (unknown, never $0) when any value is unknown (an
    unpriced model, a table written before the column existed)."""
    return float(x.sum()) if x.notna().all() else math.nan


def dollars_mean(x: Any) -> float:
    """The mean of a column of dollars, NaN when any value is unknown (:func:`dollars_total`)."""
    return float(x.mean()) if len(x) and x.notna().all() else math.nan


def cost_metrics(calls: Any) -> Any:
    """Per run (:data:`COST_COLUMNS`), from the calls table's billed columns
    (:mod:`h9eval.core.billing`): ``cost_usd`` (dollars per task: agent and summarizer calls),
    ``raw_cost_usd`` (the uncompacted transcript under the same billing), ``cost_saved_usd``
    (their difference), ``cost_saved`` (its share of ``raw_cost_usd``), ``cache_read_share``
    (cache reads over the agent's billed input), ``invalidation_usd`` (dollars paid to rewrite
    what was not new, mostly after compactions) and ``unpriced_calls``. Dollars are NaN — never
    0 — for a run with an unpriced call, and for tables written before billing existed."""
    import pandas as pd

    if len(calls) == 0 or "cost_usd" not in calls.columns:
        runs = sorted(calls["run_id"].unique()) if len(calls) else []
        out = pd.DataFrame({"run_id": runs})
        for c in COST_COLUMNS[1:]:
            out[c] = math.nan
        return out[list(COST_COLUMNS)]
    d = calls.copy()
    total = dollars_total
    d["_input"] = d[list(_BILLED_INPUT)].astype(float).sum(axis=1)
    d["_unpriced"] = ~d["priced"].astype("boolean").fillna(False).astype(bool)
    g = d.groupby("run_id", sort=True).agg(
        cost_usd=("cost_usd", total),
        raw_cost_usd=("raw_cost_usd", total),
        invalidation_usd=("invalidation_usd", total),
        _read=("cache_read_tokens", "sum"),
        _input=("_input", "sum"),
        unpriced_calls=("_unpriced", "sum"),
    )
    g["cost_saved_usd"] = g["raw_cost_usd"] - g["cost_usd"]
    raw = g["raw_cost_usd"].astype(float)
    g["cost_saved"] = (g["cost_saved_usd"] / raw.where(raw > 0)).astype(float)
    g["cache_read_share"] = (g["_read"].astype(float) / g["_input"].where(g["_input"] > 0)).astype(float)
    g["unpriced_calls"] = g["unpriced_calls"].astype(int)
    return g.reset_index()[list(COST_COLUMNS)]


def compaction_invalidation(calls: Any) -> Any:
    """One row per compaction (a call with ``compacted``): ``run_id``, ``call_index``, ``tier_name``,
    ``invalidation_usd`` — the invalidation dollars of that call and of the calls after it up to
    the next compaction (the extra it caused over the next calls: mostly its own rewrite, plus any
    lookback miss after it) — and ``calls_until_next``. Empty for tables without bills."""
    import pandas as pd

    cols = ["run_id", "call_index", "tier_name", "invalidation_usd", "calls_until_next"]
    if len(calls) == 0 or "invalidation_usd" not in calls.columns:
        return pd.DataFrame(columns=cols)
    rows = []
    for rid, g in calls.sort_values(["run_id", "call_index"], kind="stable").groupby("run_id", sort=True):
        comp = g["compacted"].astype(bool).to_numpy()
        inval = g["invalidation_usd"].astype(float).to_numpy()
        idx, tiers = g["call_index"].to_numpy(), g["tier_name"].to_numpy()
        starts = [i for i in range(len(g)) if comp[i]]
        for k, i in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else len(g)
            rows.append(
                {
                    "run_id": rid,
                    "call_index": int(idx[i]),
                    "tier_name": str(tiers[i]),
                    "invalidation_usd": float(inval[i:end].sum()),
                    "calls_until_next": end - i,
                }
            )
    return pd.DataFrame(rows, columns=cols)


def _probe_subset(
    probes: Any, method: str | None, scope: str | None, *, pinned: str = "exclude", placebo: bool = True
) -> Any:
    if pinned not in PINNED_CHOICES:
        raise ValueError(f"pinned must be one of {', '.join(PINNED_CHOICES)}, got {pinned!r}")
    p = probes
    if method is not None and "method" in p.columns:
        p = p[p["method"] == method]
    if scope is not None and "scope" in p.columns:
        p = p[p["scope"] == scope]
    if "answerable" in p.columns:
        p = p[p["answerable"].astype(bool)]
    if pinned != "include" and "answer_pinned" in p.columns:
        is_pinned = p["answer_pinned"].fillna(False).astype(bool)
        p = p[is_pinned] if pinned == "only" else p[~is_pinned]
    if placebo and "placebo_excluded" in p.columns:
        # a probe that passes against unrelated histories measures coincidence: never averaged in
        p = p[~p["placebo_excluded"].fillna(False).astype(bool)]
    return p[p["score"].notna()]


def retention(
    probes: Any,
    *,
    by: Sequence[str] = ("run_id", "probe_kind"),
    method: str | None = "recall",
    scope: str | None = "view",
    after_compaction_only: bool = False,
    pinned: str = "exclude",
    placebo: bool = True,
) -> Any:
    """Mean score over answerable probes, grouped by ``by`` (default per run and probe kind).

    Columns: ``by`` + ``retention`` (mean score) + ``n_probes``. ``method``/``scope``: filters
    (default ``recall``/``view``; ``None`` keeps all). ``after_compaction_only``: the
    conditional view, only checkpoints after the policy's first compaction (rows without the
    ``after_compaction`` column or with it unknown are left out). ``pinned``: pinned probes
    are left out by default (:data:`PINNED_CHOICES`). ``placebo``: leave out the probes the
    placebo control excluded (``placebo_excluded``; default ``True``).
    """
    import pandas as pd

    p = _probe_subset(probes, method, scope, pinned=pinned, placebo=placebo)
    if after_compaction_only:
        p = p[p["after_compaction"].fillna(False).astype(bool)] if "after_compaction" in p.columns else p.iloc[0:0]
    if len(p) == 0:
        return pd.DataFrame(columns=[*by, "retention", "n_probes"])
    g = p.groupby(list(by), sort=True)["score"].agg(["mean", "size"]).reset_index()
    return g.rename(columns={"mean": "retention", "size": "n_probes"})


def retention_over_calls(
    probes: Any, *, kinds: Sequence[str] | None = None, method: str | None = "recall", scope: str | None = "view"
) -> Any:
    """Retention per run, kind group and checkpoint: the drift curve's data.

    ``kinds``: probe kinds to keep (default all). Columns: ``run_id``, ``probe_kind``,
    ``checkpoint_call_index``, ``retention``, ``n_probes``.
    """
    p = _probe_subset(probes, method, scope)
    if kinds is not None:
        p = p[p["probe_kind"].isin(list(kinds))]
    return retention(p, by=("run_id", "probe_kind", "checkpoint_call_index"), method=None, scope=None)


def _run_info(runs: Any | None, calls: Any) -> Any:
    """One row per run with the config columns (from ``runs`` when given, else from calls)."""
    import pandas as pd

    if runs is not None and len(runs):
        r = runs
        if "status" in r.columns:
            r = r[r["status"] == "ok"]
        cols = [
            c
            for c in (
                "run_id",
                "task_id",
                "policy_kind",
                "policy_name",
                "params_json",
                "params_hash",
                "history_mode",
                "summarizer",
            )
            if c in r.columns
        ]
        return r[cols].drop_duplicates("run_id").reset_index(drop=True)
    if len(calls) == 0:
        return pd.DataFrame(columns=["run_id", "task_id", "policy_kind", "params_hash", "history_mode"])
    cols = [c for c in ("run_id", "task_id", "policy_kind", "params_hash", "history_mode") if c in calls.columns]
    return calls[cols].drop_duplicates("run_id").reset_index(drop=True)


def run_metrics(calls: Any, probes: Any | None = None, runs: Any | None = None, *, method: str = "recall") -> Any:
    """One row per run: config columns, ``tokens_saved``, ``peak_tokens_sent``,
    ``peak_ratio_to_window`` (:func:`tokens_saved`), ``retention`` (all kinds; unpinned probes
    the placebo control kept), ``pinned_retention`` (pinned probes only), ``retention_with_pinned``
    (both), ``retention_after_compaction`` (the conditional view; NaN when the run never compacted
    before a checkpoint), ``retention_<kind>`` per probe kind, ``overflows``, ``emergencies`` (forced truncations),
    ``fallbacks``, ``summarizer_calls``, ``summarizer_cost_usd``, the billed dollars of
    :func:`cost_metrics` (``cost_usd`` ...), ``n_compactions`` (calls
    that compacted), ``never_compacted`` (the run never compacted: its scores say nothing
    about the policy), ``calls``, ``label`` (:func:`config_labels`). ``runs`` (optional): the sweep's runs table,
    for ``params_json``/``summarizer`` and to keep only ok runs."""
    import pandas as pd

    info = _run_info(runs, calls)
    ts = tokens_saved(calls)
    agg = (
        calls.groupby("run_id")
        .agg(
            calls=("call_index", "size"),
            overflows=("overflow", "sum"),
            emergencies=("forced_truncation", "sum"),
            fallbacks=("fallback", "sum"),
            summarizer_calls=("summarizer_calls", "sum"),
            summarizer_cost_usd=("summarizer_cost_usd", dollars_total),
            n_compactions=("compacted", "sum"),
        )
        .reset_index()
        if len(calls)
        else pd.DataFrame(columns=["run_id"])
    )
    out = info.merge(
        ts[["run_id", "tokens_saved", "peak_tokens_sent", "peak_ratio_to_window"]], on="run_id", how="left"
    ).merge(agg, on="run_id", how="left")
    out = out.merge(cost_metrics(calls), on="run_id", how="left")
    if probes is not None and len(probes):
        overall = retention(probes, by=("run_id",), method=method)[["run_id", "retention"]]
        out = out.merge(overall, on="run_id", how="left")
        for col, which in (("pinned_retention", "only"), ("retention_with_pinned", "include")):
            r = retention(probes, by=("run_id",), method=method, pinned=which)[["run_id", "retention"]]
            out = out.merge(r.rename(columns={"retention": col}), on="run_id", how="left")
        cond = retention(probes, by=("run_id",), method=method, after_compaction_only=True)[["run_id", "retention"]]
        out = out.merge(cond.rename(columns={"retention": "retention_after_compaction"}), on="run_id", how="left")
        per = retention(probes, by=("run_id", "probe_kind"), method=method)
        if len(per):
            wide = (
                per.pivot(index="run_id", columns="probe_kind", values="retention")
                .add_prefix("retention_")
                .reset_index()
            )
            out = out.merge(wide, on="run_id", how="left")
    else:
        for col in ("retention", "retention_after_compaction", "pinned_retention", "retention_with_pinned"):
            out[col] = math.nan
    for c in ("overflows", "emergencies", "fallbacks", "summarizer_calls", "calls", "n_compactions"):
        if c in out.columns:
            out[c] = out[c].fillna(0).astype(int)
    if "n_compactions" in out.columns:
        out["never_compacted"] = out["n_compactions"] == 0
    out["label"] = config_labels(out)
    return out


def policy_defaults(kind: str) -> dict[str, Any]:
    """The resolved default parameters of policy ``kind`` (``{}`` for a kind that cannot be built)."""
    try:
        return dict(_kind_defaults(kind))
    except Exception:  # noqa: BLE001 - an unknown or unbuildable kind simply has no defaults
        return {}


@functools.lru_cache(maxsize=256)
def _kind_defaults(kind: str) -> dict[str, Any]:
    # built once per kind (a failure is not cached: a policy registered later is found): a
    # report labels thousands of rows, and building a policy per row was most of its time
    return policy_params(make_policy(kind))


def params_of(params_json: Any) -> dict[str, Any]:
    """A config's parameters from ``params_json`` (JSON text or a mapping; ``{}`` when neither)."""
    if isinstance(params_json, Mapping):
        return dict(params_json)
    if isinstance(params_json, str) and params_json:
        try:
            v = json.loads(params_json)
            return v if isinstance(v, dict) else {}
        except json.JSONDecodeError:
            return {}
    return {}


def params_diff(kind: str, params_json: Any) -> dict[str, Any]:
    """The parameters of a config that differ from the policy kind's defaults."""
    d = policy_defaults(kind)
    p = params_of(params_json)
    return {k: v for k, v in sorted(p.items()) if k in d and d[k] != v or k not in d}


def _fmt(v: Any) -> str:
    return repr(v) if isinstance(v, str) else json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def config_labels(runs: pd.DataFrame) -> pd.Series:
    """One label per row of a runs table (a Series on the same index): the one definition of a
    configuration's name, used by every table, figure, report section and ``h9eval compare``.

    The name the user gave the ``[[policies]]`` entry (``policy_name``; its kind when unnamed),
    made unique only where needed: by the grid point (``tail [min_tail_messages=2]``), or the
    parameters that differ from the kind's defaults when the entry has no grid, then by the
    summarizer variant (``base:offline_free_text``) when one entry ran with several. History
    mode is never part of the name (tables show it as a column, figures as a panel).
    """
    import pandas as pd

    if len(runs) == 0:
        return pd.Series([], dtype=object, index=runs.index)
    kinds = runs["policy_kind"].fillna("").astype(str)
    no_names = pd.Series("", index=runs.index)
    names = runs["policy_name"].fillna("").astype(str) if "policy_name" in runs.columns else no_names
    base = names.where(names != "", kinds)
    label = base.astype(object).copy()
    hashes = runs["params_hash"].astype(str) if "params_hash" in runs.columns else pd.Series("", index=runs.index)
    grids = runs["grid_json"] if "grid_json" in runs.columns else pd.Series(None, index=runs.index)
    pj = runs["params_json"] if "params_json" in runs.columns else pd.Series(None, index=runs.index)
    for b in base.unique():
        rows = base.index[base == b]
        if hashes[rows].nunique() > 1:
            for i in rows:
                point = params_of(grids[i]) or params_diff(kinds[i], pj[i])
                label[i] = b + " [" + ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(point.items())) + "]"
        if "summarizer" in runs.columns and runs.loc[rows, "summarizer"].nunique(dropna=True) > 1:
            for i in rows:
                label[i] = f"{label[i]}:{runs.at[i, 'summarizer']!s}"
    return label


def config_metrics(
    run_metrics_df: Any,
    metrics: Sequence[str] = ("tokens_saved", "retention"),
    *,
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Any:
    """Per config (``label`` + history mode + summarizer): mean and bootstrap CI across runs
    (i.e. tasks) of each metric, plus ``n_runs``, total ``overflows`` and ``emergencies`` and
    mean ``summarizer_calls``/``summarizer_cost_usd``, billed ``cost_usd`` with its CI (NaN when a run is
    unpriced), the worst ``peak_ratio_to_window`` and
    ``never_compacted_runs`` (runs on which the config never compacted: flag its scores).
    Columns ``<metric>``, ``<metric>_ci_lo``, ``<metric>_ci_hi``."""
    import pandas as pd

    df = run_metrics_df
    keys = [c for c in ("label", "policy_kind", "params_hash", "history_mode", "summarizer") if c in df.columns]
    rows = []
    for key, g in df.groupby(keys, sort=True, dropna=False):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        row["n_runs"] = len(g)
        for m in metrics:
            ci = bootstrap_ci(g[m] if m in g.columns else [], n=n, seed=seed, level=level)
            row[m], row[f"{m}_ci_lo"], row[f"{m}_ci_hi"] = ci.mean, ci.lo, ci.hi
        for c in ("overflows", "emergencies", "fallbacks"):
            if c in g.columns:
                row[c] = int(g[c].sum())
        if "summarizer_calls" in g.columns:
            row["summarizer_calls"] = float(g["summarizer_calls"].mean())
        if "summarizer_cost_usd" in g.columns:
            row["summarizer_cost_usd"] = dollars_mean(g["summarizer_cost_usd"].astype(float))
        if "cost_usd" in g.columns:
            # billed dollars per task: unknown (NaN, never a mean of the priced runs) when any run is unpriced
            usd = g["cost_usd"].astype(float)
            usd_ci = bootstrap_ci(usd, n=n, seed=seed, level=level) if usd.notna().all() else None
            bounds = (usd_ci.mean, usd_ci.lo, usd_ci.hi) if usd_ci else (math.nan, math.nan, math.nan)
            row["cost_usd"], row["cost_usd_ci_lo"], row["cost_usd_ci_hi"] = bounds
        if "peak_ratio_to_window" in g.columns:
            row["peak_ratio_to_window"] = float(g["peak_ratio_to_window"].max())
        if "never_compacted" in g.columns:
            row["never_compacted_runs"] = int(g["never_compacted"].astype(bool).sum())
        rows.append(row)
    return pd.DataFrame(rows)


def pareto_front(df: Any, x: str, y: str, *, maximize: tuple[bool, bool] = (True, True)) -> Any:
    """The rows of ``df`` not dominated on ``(x, y)``, sorted by ``x``.

    A row is dominated when another is at least as good on both and strictly better on one;
    ``maximize`` says the direction of each axis (default both larger-is-better). Rows with a
    NaN in ``x`` or ``y`` are never on the front.
    """
    d = df.dropna(subset=[x, y])
    if len(d) == 0:
        return d
    sx = 1.0 if maximize[0] else -1.0
    sy = 1.0 if maximize[1] else -1.0
    xs = d[x].astype(float).to_numpy() * sx
    ys = d[y].astype(float).to_numpy() * sy
    keep = []
    for i in range(len(d)):
        dominated = ((xs >= xs[i]) & (ys >= ys[i]) & ((xs > xs[i]) | (ys > ys[i]))).any()
        keep.append(not dominated)
    return d[keep].sort_values(x, kind="stable")


# -- tiers, cost -------------------------------------------------------------------------------
def tier_transitions(calls: Any, *, normalize: bool = False) -> Any:
    """From→to tier counts between consecutive calls of the same run (5×5, rows = from).

    Uses ``tier_name`` (or ``tier``) ordered by ``call_index`` within ``run_id``. ``normalize``:
    rows sum to 1 (rows without transitions stay 0).
    """
    import pandas as pd

    m = pd.DataFrame(0, index=pd.Index(TIER_NAMES, name="from"), columns=pd.Index(TIER_NAMES, name="to"))
    if len(calls) == 0:
        return m.astype(float) if normalize else m
    tcol = "tier_name" if "tier_name" in calls.columns else "tier"
    for _, g in calls.sort_values(["run_id", "call_index"]).groupby("run_id", sort=False):
        t = [TIER_NAMES[int(v)] if tcol == "tier" else str(v) for v in g[tcol]]
        for a, b in zip(t, t[1:]):
            if a in m.index and b in m.columns:
                m.at[a, b] = int(m.at[a, b]) + 1  # type: ignore[call-overload,arg-type]  # the counts are ints
    if normalize:
        s = m.sum(axis=1).replace(0, 1)
        return m.div(s, axis=0)
    return m


def summarizer_usage(table: Any, runs: Any | None = None, *, by: str = "label") -> Any:
    """Summarizer calls, tokens and cost, summed per ``by`` (default the config label;
    ``policy_kind`` works too).

    ``table``: the ``calls`` table (summed per run first) or a ``runs`` table with
    ``summarizer_calls``/``summarizer_cost_usd`` columns (no ``call_index``; with ``billed_usd_per_run``,
    as this function returns it ``by="run_id"``, the bills are averaged too). ``runs``: with a
    calls table, the runs table for ``params_json``. Columns: ``by``, ``n_runs``,
    ``summarizer_calls``, ``summarizer_input_tokens``, ``summarizer_output_tokens``,
    ``summarizer_cost_usd`` (totals; token columns 0 when unknown), ``calls_per_run``,
    ``cost_per_run_usd``, and with a calls table that has bills ``billed_usd_per_run`` (the
    summarizer's calls as the provider bills them, :mod:`h9eval.core.billing`; NaN when unpriced)."""
    import pandas as pd

    cols = ["summarizer_calls", "summarizer_input_tokens", "summarizer_output_tokens", "summarizer_cost_usd"]
    billed = "call_index" in table.columns and "summarizer_bill_usd" in table.columns
    if "call_index" in table.columns:
        per_run = (
            table.groupby("run_id")
            .agg(**{c: (c, dollars_total if c == "summarizer_cost_usd" else "sum") for c in cols})
            .reset_index()
            if len(table)
            else pd.DataFrame(columns=["run_id", *cols])
        )
        if billed and len(table):
            bill = table.groupby("run_id")["summarizer_bill_usd"].agg(dollars_total)
            per_run = per_run.merge(bill.rename("_billed").reset_index(), on="run_id", how="left")
        info = _run_info(runs, table)
        d = info.merge(per_run, on="run_id", how="left")
    else:
        d = table[table["status"] == "ok"] if "status" in table.columns else table
        d = d.copy()
        if "billed_usd_per_run" in d.columns:
            # a per-run table of this function (by="run_id") re-aggregated: its bills carry through
            d["_billed"] = d["billed_usd_per_run"].astype(float)
    for c in cols:
        # token counts unknown: 0; dollars unknown (an unpriced model): NaN, never $0
        d[c] = (
            (d[c].astype(float) if c == "summarizer_cost_usd" else d[c].astype(float).fillna(0))
            if c in d.columns
            else 0.0
        )
    if by == "label" and "label" not in d.columns:
        d["label"] = config_labels(d)
    if len(d) == 0:
        return pd.DataFrame(columns=[by, "n_runs", *cols, "calls_per_run", "cost_per_run_usd"])
    sums: dict[str, Any] = {c: (c, dollars_total if c == "summarizer_cost_usd" else "sum") for c in cols}
    g = d.groupby(by, sort=True).agg(n_runs=("run_id", "nunique"), **sums).reset_index()
    g["calls_per_run"] = g["summarizer_calls"] / g["n_runs"]
    g["cost_per_run_usd"] = g["summarizer_cost_usd"] / g["n_runs"]
    if "_billed" in d.columns:
        billed_mean = d.groupby(by, sort=True)["_billed"].agg(dollars_mean)
        g["billed_usd_per_run"] = g[by].map(billed_mean)
    return g


# -- token estimates ---------------------------------------------------------------------------
def token_estimate_error(messages_table: Any) -> Any:
    """bytes/4 (and the calibrated estimate, when present) against BPE, per content kind.

    Input: :func:`h9eval.analysis.token_accuracy.message_token_table` rows (``kind``, ``bytes``,
    ``est_tokens``, ``bpe_tokens``, optional ``calibrated_tokens``). Output per kind (plus an
    ``all`` row): ``n_messages``, ``bytes``, ``bpe_tokens``, ``bytes_per_token`` (measured),
    ``est_error`` = ``sum(est)/sum(bpe) - 1`` (negative: bytes/4 undercounts),
    ``est_abs_error_median`` (median per-message ``|est/bpe - 1|``), and the same two for the
    calibrated estimate.
    """
    import numpy as np
    import pandas as pd

    d = messages_table[messages_table["bpe_tokens"] > 0]
    rows = []
    groups = [(k, g) for k, g in d.groupby("kind", sort=True)] + [("all", d)]
    for kind, g in groups:
        bpe = float(g["bpe_tokens"].sum())
        row: dict[str, Any] = {
            "kind": kind,
            "n_messages": len(g),
            "bytes": int(g["bytes"].sum()),
            "bpe_tokens": int(bpe),
            "bytes_per_token": float(g["bytes"].sum()) / bpe if bpe else math.nan,
        }
        for col, name in (("est_tokens", "est"), ("calibrated_tokens", "calibrated")):
            if col in g.columns:
                row[f"{name}_error"] = float(g[col].sum()) / bpe - 1 if bpe else math.nan
                row[f"{name}_abs_error_median"] = (
                    float(np.median(np.abs(g[col] / g["bpe_tokens"] - 1))) if len(g) else math.nan
                )
        rows.append(row)
    return pd.DataFrame(rows)


def tier_of(tokens: Any, window: Any, thresholds: Mapping[str, float] = DEFAULT_THRESHOLDS) -> Any:
    """Tier names for token counts (scalars or arrays) against ``window`` (same ``>=`` rule as
    ProgressiveCompactor)."""
    import numpy as np

    r = np.asarray(tokens, dtype=float) / np.asarray(window, dtype=float)
    out = np.full(r.shape, "none", dtype=object)
    for name in ("warn", "soft", "full", "emergency"):
        out[r >= float(thresholds[name])] = name
    return out if out.shape else out.item()


def tier_misclassification(
    calls_with_both_counts: Any,
    thresholds: Mapping[str, float] = DEFAULT_THRESHOLDS,
    *,
    estimate_col: str = "history_tokens",
    reference_col: str = "history_tokens_bpe",
    window_col: str = "context_window_tokens",
    window: int | None = None,
) -> Any:
    """Calls where the BPE count lands in another tier, or over the window, while the estimate
    does not (or vice versa).

    Input: one row per call with both counts (e.g. :func:`h9eval.analysis.token_accuracy.call_token_table`).
    ``thresholds``: ``warn``/``soft``/``full``/``emergency`` fractions (default harness9's).
    ``window``: overrides ``window_col``. Output: the misclassified rows with ``est_tier``,
    ``bpe_tier``, ``est_over_window``, ``bpe_over_window``, ``direction`` (``under``: the
    estimate picks a lower tier than BPE, i.e. compacts too late; ``over``: too early).
    """
    d = calls_with_both_counts.copy()
    w = window if window is not None else d[window_col]
    d["est_tier"] = tier_of(d[estimate_col], w, thresholds)
    d["bpe_tier"] = tier_of(d[reference_col], w, thresholds)
    d["est_over_window"] = d[estimate_col] > w
    d["bpe_over_window"] = d[reference_col] > w
    order = {t: i for i, t in enumerate(TIER_NAMES)}
    bad = (d["est_tier"] != d["bpe_tier"]) | (d["est_over_window"] != d["bpe_over_window"])
    d = d[bad].copy()
    ei = d["est_tier"].map(order)
    bi = d["bpe_tier"].map(order)
    under = (ei < bi) | ((ei == bi) & d["bpe_over_window"] & ~d["est_over_window"])
    d["direction"] = ["under" if u else "over" for u in under]
    return d


# -- anchors -----------------------------------------------------------------------------------
def anchor_presence(compactions: Any) -> Any:
    """Per run and record: for each anchor type in ``anchors_json``, whether it holds
    information (1), says N/A / nothing (0), or is missing (NaN). Long format: ``run_id``,
    ``record_index``, ``anchor_type``, ``present``."""
    import pandas as pd

    rows = []
    for r in compactions.itertuples(index=False):
        aj = getattr(r, "anchors_json", None)
        if not isinstance(aj, str) or not aj:
            continue
        try:
            anchors = json.loads(aj)
        except json.JSONDecodeError:
            continue
        for a in anchors or []:
            rows.append(
                {
                    "run_id": r.run_id,
                    "record_index": int(r.record_index),
                    "anchor_type": a.get("type", ""),
                    "present": 0.0 if is_no_information(str(a.get("content", ""))) else 1.0,
                }
            )
    return pd.DataFrame(rows, columns=["run_id", "record_index", "anchor_type", "present"])


def anchor_retention(table: Any, *, method: str | None = "recall", scope: str | None = "view") -> Any:
    """Anchor type × compaction index: the anchor heatmap's data (a wide DataFrame, rows =
    anchor types, columns = compaction index, values in [0, 1], NaN where unseen).

    ``table``: a probes table (anchor-kind probes; value = mean score over answerable probes;
    compaction index = ``n_compactions`` at the checkpoint, or ``checkpoint_call_index`` when
    that column is missing or empty) or a compactions table (value = share of runs whose
    record at that index has the anchor filled, from ``anchors_json``).
    """
    import pandas as pd

    if "anchors_json" in table.columns:
        long = anchor_presence(table).rename(columns={"record_index": "compaction_index", "present": "value"})
    else:
        p = _probe_subset(table, method, scope)
        p = p[p["probe_kind"].isin(ANCHOR_KINDS)]
        col = (
            "n_compactions"
            if "n_compactions" in p.columns and p["n_compactions"].notna().any()
            else "checkpoint_call_index"
        )
        long = pd.DataFrame(
            {
                "anchor_type": p["probe_kind"],
                "compaction_index": p[col].fillna(-1).astype(int),
                "value": p["score"].astype(float),
            }
        )
    if len(long) == 0:
        return pd.DataFrame()
    w = long.groupby(["anchor_type", "compaction_index"])["value"].mean().unstack("compaction_index")
    known = ("user_intent", *ANCHOR_KINDS)
    order = [a for a in known if a in w.index] + sorted(a for a in w.index if a not in known)
    return w.loc[order]


# -- comparisons and recommendation -------------------------------------------------------------
def _improvement_options_set(params_json: Any) -> dict[str, Any]:
    diff = params_diff("progressive", params_json)
    return {k: v for k, v in diff.items() if k in IMPROVEMENT_OPTIONS}


def option_comparison(
    run_metrics_df: Any,
    *,
    metrics: Sequence[str] = ("retention", "tokens_saved"),
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    negligible: float = 0.005,
) -> Any:
    """Each ``progressive`` improvement option against the faithful default, paired by task.

    A *variant* is a progressive config whose parameters differ from the defaults only in
    :data:`IMPROVEMENT_OPTIONS` (at least one); the *baseline* is the progressive config with
    none of them, on the same task, history mode and summarizer, and the same values of every
    non-option parameter. Per variant and metric: mean paired difference (variant - baseline)
    with a bootstrap CI across tasks, and a ``verdict``: ``negligible`` (the whole CI within
    ±``negligible``, default 0.005 = half a point of retention or tokens saved), ``helps`` (CI
    above 0), ``hurts`` (CI below 0), ``no clear effect`` (CI spans 0) or ``no baseline``. Columns: ``option``
    (``name=value, ...``), ``n_tasks``, ``<m>_baseline``, ``<m>_variant``, ``<m>_delta``,
    ``<m>_delta_ci_lo``, ``<m>_delta_ci_hi``, ``<m>_verdict``, ``overflows_delta``.
    """
    import pandas as pd

    df = (
        run_metrics_df[run_metrics_df["policy_kind"] == "progressive"].copy() if len(run_metrics_df) else run_metrics_df
    )
    if len(df) == 0 or "params_json" not in df.columns:
        return pd.DataFrame(columns=["option", "n_tasks"])
    opts, base_keys = [], []
    for pj in df["params_json"]:
        p = params_of(pj)
        o = _improvement_options_set(pj)
        opts.append(", ".join(f"{k}={v}" for k, v in sorted(o.items())))
        base_keys.append(
            json.dumps(
                {k: v for k, v in sorted(p.items()) if k not in IMPROVEMENT_OPTIONS}, sort_keys=True, default=str
            )
        )
    df["option"] = opts
    df["_base"] = base_keys
    ctx = [c for c in ("history_mode", "summarizer") if c in df.columns]
    keys = ["task_id", "_base", *ctx]
    base = df[df["option"] == ""].drop_duplicates(keys)
    rows = []
    for opt, g in df[df["option"] != ""].groupby("option", sort=True):
        pair = g.merge(base, on=keys, suffixes=("", "_b"))
        row: dict[str, Any] = {"option": opt, "n_tasks": int(pair["task_id"].nunique())}
        for m in metrics:
            if m not in df.columns:
                continue
            if len(pair) == 0:
                row[f"{m}_verdict"] = "no baseline"
                continue
            delta = pair[m].astype(float) - pair[f"{m}_b"].astype(float)
            ci = bootstrap_ci(delta, n=n, seed=seed, level=level)
            row[f"{m}_baseline"] = float(pair[f"{m}_b"].mean())
            row[f"{m}_variant"] = float(pair[m].mean())
            row[f"{m}_delta"], row[f"{m}_delta_ci_lo"], row[f"{m}_delta_ci_hi"] = ci.mean, ci.lo, ci.hi
            if ci.n == 0:
                v = "no data"
            elif -negligible < ci.lo and ci.hi < negligible:
                v = "negligible"
            elif ci.lo > 0:
                v = "helps"
            elif ci.hi < 0:
                v = "hurts"
            else:
                v = "no clear effect"
            row[f"{m}_verdict"] = v
        if "overflows" in pair.columns and len(pair):
            row["overflows_delta"] = int(pair["overflows"].sum() - pair["overflows_b"].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def recommend(
    config_metrics_df: Any, *, metric: str = "retention", tiebreak: str = "tokens_saved"
) -> dict[str, Any] | None:
    """The best config by ``metric`` among those with no overflow (and no emergency when that
    leaves any), ties broken by ``tiebreak``; ``None`` when no config qualifies. Returns the row
    as a dict plus ``reason`` (one sentence saying how it was chosen), ``excluded`` (labels
    dropped for overflowing) and ``excluded_why`` (every configuration left out, for overflows
    or emergency truncations, with its count: ``label: 12 call(s) over the window``)."""
    df = config_metrics_df
    if len(df) == 0 or metric not in df.columns:
        return None
    ok = df[df.get("overflows", 0) == 0] if "overflows" in df.columns else df
    excluded = sorted(set(df["label"]) - set(ok["label"])) if "label" in df.columns else []
    why: list[str] = []

    def name(r: Mapping[str, Any]) -> str:
        extra = [
            str(r[c])
            for c in ("history_mode", "summarizer")
            if c in r and isinstance(r[c], str) and r[c] and r[c] not in str(r["label"])
        ]
        return str(r["label"]) + (f" ({', '.join(extra)})" if extra else "")

    if excluded and "overflows" in df.columns:
        for r in df[df["label"].isin(excluded)].sort_values("label").to_dict("records"):
            why.append(f"{name(r)}: {int(r['overflows'])} call(s) over the window")
    note = "no overflow"
    if "emergencies" in ok.columns and (ok["emergencies"] == 0).any():
        for r in ok[ok["emergencies"] > 0].sort_values("label").to_dict("records") if "label" in ok.columns else []:
            why.append(f"{name(r)}: {int(r['emergencies'])} emergency truncation(s)")
        ok = ok[ok["emergencies"] == 0]
        note = "no overflow and no emergency truncation"
    elif "emergencies" in ok.columns and len(ok):
        note = "no overflow (every one of them hit the emergency tier at least once)"
    ok = ok.dropna(subset=[metric])
    if len(ok) == 0:
        return None
    sort_cols = [metric] + ([tiebreak] if tiebreak in ok.columns else [])
    best = ok.sort_values(sort_cols, ascending=False, kind="stable").iloc[0].to_dict()
    best["reason"] = f"highest mean {metric} ({best[metric]:.3f}) among {len(ok)} config(s) with {note}" + (
        f"; ties broken by {tiebreak}" if tiebreak in ok.columns else ""
    )
    best["excluded"] = excluded
    best["excluded_why"] = why
    return best
