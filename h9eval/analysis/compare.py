"""Compare two configurations of a sweep, task by task: ``compare(results, "a", "b")``.

A **configuration** is what a user set up in the sweep spec: a ``[[policies]]`` entry (its
``name``, default its kind) at one grid point, with one summarizer variant. Its label
(:func:`config_labels`) is ``name`` plus ``(param=value, ...)`` for the grid point, plus
``:summarizer`` when the results hold more than one summarizer variant (anchors and free-text
summaries of the same policy are then two configurations, told apart everywhere this module's
labels are shown). History modes, repeats and checkpoints are *nested inside* a task: the
two configurations are paired within each task on the history modes both ran, and the
statistics of :mod:`h9eval.analysis.stats` resample tasks.

Metrics (:data:`METRICS`) are per run, from :func:`h9eval.analysis.metrics.run_metrics` (plus
``anchor_retention`` and ``na_overwrites`` computed here from the same tables), then
aggregated per task.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from h9eval.analysis import metrics as M
from h9eval.analysis.metrics import config_labels
from h9eval.analysis.stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    PairedComparison,
    TaskPairs,
    compare_family,
    comparisons_frame,
    task_pairs,
)
from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.results.store import Results, load_results
from h9eval.tasks.model import ANCHOR_KINDS

__all__ = [
    "Metric",
    "METRICS",
    "DEFAULT_RETENTION_MARGIN",
    "metric_spec",
    "config_labels",
    "run_table",
    "Comparison",
    "compare",
    "compare_factor",
    "pairs_for",
]

DEFAULT_RETENTION_MARGIN = 0.005
"""Default equivalence margin of the share-valued metrics (retention, tokens saved): half a
point, below which a difference is not worth a decision."""


@dataclass(frozen=True, kw_only=True)
class Metric:
    """A per-run metric that can be compared: ``name`` (a column of :func:`run_table`),
    ``higher_is_better`` (its direction), ``description``, ``default_margin`` (equivalence
    margin in the metric's unit; ``None``: no equivalence verdict unless one is given)."""

    name: str
    higher_is_better: bool
    description: str
    default_margin: float | None = None


METRICS: tuple[Metric, ...] = (
    Metric(name="retention", higher_is_better=True, default_margin=DEFAULT_RETENTION_MARGIN,
           description="mean probe score over answerable recall probes of the view sent"),
    Metric(name="anchor_retention", higher_is_better=True, default_margin=DEFAULT_RETENTION_MARGIN,
           description="retention over the anchor-kind probes only (" + ", ".join(ANCHOR_KINDS) + ")"),
    Metric(name="tokens_saved", higher_is_better=True, default_margin=DEFAULT_RETENTION_MARGIN,
           description="share of tokens saved (h9eval.analysis.metrics.tokens_saved)"),
    Metric(name="peak_tokens_sent", higher_is_better=False, description="largest request of the run, tokens"),
    Metric(name="summarizer_calls", higher_is_better=False, description="summarizer calls per run"),
    Metric(name="summarizer_cost_usd", higher_is_better=False, description="summarizer cost per run, USD"),
    Metric(name="cost_usd", higher_is_better=False,
           description="dollars per task as the provider bills it: prompt caching, agent and summarizer calls (h9eval.core.billing)"),
    Metric(name="cost_saved", higher_is_better=True, default_margin=DEFAULT_RETENTION_MARGIN,
           description="share of the uncompacted transcript's dollars saved, under the same billing"),
    Metric(name="cache_read_share", higher_is_better=True, description="cache reads over the agent's billed input"),
    Metric(name="emergencies", higher_is_better=False, description="forced (emergency) truncations per run"),
    Metric(name="overflows", higher_is_better=False, description="calls whose request exceeded the window, per run"),
    Metric(name="fallbacks", higher_is_better=False, description="summaries replaced by the fallback, per run"),
    Metric(name="na_overwrites", higher_is_better=False, description="anchors overwritten by an N/A section, per run"),
)
"""The metrics :func:`compare` knows, in the order a full comparison lists them."""

_BY_NAME = {m.name: m for m in METRICS}


def metric_spec(name: str) -> Metric:
    """The :class:`Metric` called ``name``; :class:`ConfigError` with suggestions otherwise."""
    if name not in _BY_NAME:
        raise ConfigError(did_you_mean(name, _BY_NAME, what="metric"))
    return _BY_NAME[name]


# -- configurations ---------------------------------------------------------------------------
def _params(s: Any) -> dict[str, Any]:
    if isinstance(s, str) and s:
        v = json.loads(s)
        return v if isinstance(v, dict) else {}
    return {}


def run_table(results: Results) -> Any:
    """One row per ok run: ``run_id``, ``task_id``, ``config`` (label), ``policy_name``,
    ``policy_kind``, ``params_hash``, ``params_json``, ``summarizer``, ``history_mode``,
    ``repeat``, ``n_compactions`` and one column per :data:`METRICS` entry (NaN where the
    tables cannot give it, e.g. retention of a sweep without probes)."""
    import pandas as pd

    runs = results.runs
    ok = runs[runs["status"] == "ok"] if "status" in runs.columns else runs
    ok = ok.drop_duplicates("run_id").copy()
    ok["config"] = config_labels(ok)
    rm = M.run_metrics(results.calls, results.probes, ok)
    keep = [c for c in ("run_id", "tokens_saved", "retention", "peak_tokens_sent", "summarizer_calls", "summarizer_cost_usd",
                        "cost_usd", "cost_saved", "cache_read_share", "emergencies", "overflows", "fallbacks") if c in rm.columns]
    info_cols = [c for c in ("run_id", "task_id", "config", "policy_name", "policy_kind", "params_hash", "params_json", "summarizer", "history_mode", "repeat", "n_compactions") if c in ok.columns]
    out = ok[info_cols].merge(rm[keep], on="run_id", how="left")
    probes = results.probes
    if probes is not None and len(probes):
        anchors = probes[probes["probe_kind"].isin(ANCHOR_KINDS)]
        ar = M.retention(anchors, by=("run_id",))[["run_id", "retention"]].rename(columns={"retention": "anchor_retention"})
        out = out.merge(ar, on="run_id", how="left")
    calls = results.calls
    if calls is not None and len(calls) and "na_overwrites" in calls.columns:
        na = calls.groupby("run_id")["na_overwrites"].sum().rename("na_overwrites").reset_index()
        out = out.merge(na, on="run_id", how="left")
    for m in METRICS:
        if m.name not in out.columns:
            out[m.name] = float("nan")
        out[m.name] = pd.to_numeric(out[m.name], errors="coerce").astype(float)
    return out.sort_values("run_id", kind="stable").reset_index(drop=True)


def as_results(results: Results | str | os.PathLike[str]) -> Results:
    return results if isinstance(results, Results) else load_results(results)


def _resolve(label: str, labels: Sequence[str]) -> str:
    if label in labels:
        return label
    raise ConfigError(did_you_mean(label, labels, what="configuration"))


def _margin_for(metric: Metric, margin: float | Mapping[str, float] | None) -> float | None:
    if margin is None:
        return metric.default_margin
    if isinstance(margin, Mapping):
        for k in margin:
            metric_spec(k)
        v = margin.get(metric.name, metric.default_margin)
    else:
        v = margin
    if v is not None and not (isinstance(v, (int, float)) and v >= 0):
        raise ConfigError(f"margin for {metric.name} must be a number >= 0, got {v!r}")
    return None if v is None or v == 0 else float(v)


def _metric_list(metric: str | Sequence[str]) -> list[Metric]:
    names = [metric] if isinstance(metric, str) else list(metric)
    if not names:
        raise ConfigError("metric: give at least one metric; available: " + ", ".join(_BY_NAME))
    return [metric_spec(n) for n in names]


def pairs_for(table: Any, a: str, b: str, metric: Metric, *, margin: float | Mapping[str, float] | None = None, within: Sequence[str] = ("history_mode",)) -> TaskPairs:
    """The :class:`~h9eval.analysis.stats.TaskPairs` of configurations ``a`` and ``b`` of a
    :func:`run_table` on ``metric``, paired within ``within`` (default: the history mode)."""
    return task_pairs(table, a, b, metric=metric.name, within=within, higher_is_better=metric.higher_is_better, margin=_margin_for(metric, margin))


# -- results ------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Comparisons made as one family (adjusted together): ``comparisons`` in the order asked
    (:class:`~h9eval.analysis.stats.PairedComparison`), ``method`` and ``level`` of the
    adjustment, ``history_modes`` the pairs were matched within, ``notes`` (tasks only one
    side ran, and similar caveats)."""

    comparisons: tuple[PairedComparison, ...]
    method: str
    level: float
    history_modes: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """One line per comparison (``A vs B`` heads each new pair) and then the notes."""
        out: list[str] = []
        last: tuple[str, str] | None = None
        for c in self.comparisons:
            if (c.a, c.b) != last:
                within = f" within history mode {', '.join(self.history_modes)}" if self.history_modes else ""
                out.append(f"{c.a} vs {c.b} (A - B, paired by task{within}):")
                last = (c.a, c.b)
            out.append("  " + c.line())
        fam = len([c for c in self.comparisons if c.p_value == c.p_value])
        if self.method != "none" and fam > 1:
            out.append(f"intervals adjusted for {fam} comparisons ({self.method}); family level {self.level:g}")
        return out + [f"note: {n}" for n in self.notes]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def frame(self) -> Any:
        """The comparisons as a DataFrame (one row each)."""
        return comparisons_frame(self.comparisons)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: method, level, history modes, notes and the comparisons."""
        return {
            "method": self.method,
            "level": self.level,
            "history_modes": list(self.history_modes),
            "notes": list(self.notes),
            "comparisons": [{k: _json_safe(v) for k, v in c.as_dict().items()} for c in self.comparisons],
        }


def _json_safe(v: Any) -> Any:
    return None if isinstance(v, float) and v != v else v  # NaN is not JSON


def _select_mode(table: Any, history_mode: str | None) -> Any:
    if history_mode is None:
        return table
    modes = sorted(table["history_mode"].dropna().unique())
    if history_mode not in modes:
        raise ConfigError(did_you_mean(history_mode, modes, what="history mode"))
    return table[table["history_mode"] == history_mode]


def _notes(table: Any, a: str, b: str) -> list[str]:
    ta = set(table.loc[table["config"] == a, "task_id"])
    tb = set(table.loc[table["config"] == b, "task_id"])
    notes = []
    for x, only in ((a, ta - tb), (b, tb - ta)):
        if only:
            notes.append(f"{len(only)} task(s) only {x} ran, left out: {', '.join(sorted(only))}")
    if "n_compactions" in table.columns:
        # a score where the configuration never compacted is the uncompacted transcript's: flag it
        for x in (a, b):
            rows = table[(table["config"] == x) & (table["n_compactions"].fillna(0) == 0)]
            if len(rows):
                tasks = sorted(set(rows["task_id"]))
                notes.append(f"{x} never compacted on {len(tasks)} task(s) (its scores there are the uncompacted transcript's): {', '.join(tasks)}")
    return notes


def compare(
    results: Results | str | os.PathLike[str],
    a: str,
    b: str,
    *,
    metric: str | Sequence[str] = "retention",
    margin: float | Mapping[str, float] | None = None,
    level: float = DEFAULT_LEVEL,
    method: str = "holm",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    history_mode: str | None = None,
) -> Comparison:
    """Configuration ``a`` against ``b`` (labels of :func:`config_labels`) on each ``metric``.

    ``results``: a :class:`~h9eval.results.store.Results` or its folder. ``metric``: a name
    or several (:data:`METRICS`; default ``retention``); several are one family, adjusted by
    ``method`` (``holm`` default, ``bh``, ``none``). ``margin``: the equivalence margin d, one
    number for every metric or ``{metric: d}`` (default: each metric's ``default_margin``; 0
    turns equivalence off). ``level``: the family's interval level (default 0.95).
    ``n_resamples``/``seed``: the bootstrap's. ``history_mode``: compare only that mode
    (default: pair within every mode both ran).

    Raises :class:`ConfigError` for an unknown configuration, metric or mode (with the
    available ones) and :class:`~h9eval.core.errors.FormatError` for a folder that is not a
    sweep's results.
    """
    res = as_results(results)
    table = _select_mode(run_table(res), history_mode)
    labels = sorted(table["config"].dropna().unique())
    a, b = _resolve(a, labels), _resolve(b, labels)
    if a == b:
        raise ConfigError(f"compare: A and B are the same configuration {a!r}")
    mets = _metric_list(metric)
    pairs = [pairs_for(table, a, b, m, margin=margin) for m in mets]
    comps = compare_family(pairs, level=level, method=method, n_resamples=n_resamples, seed=seed)
    sides = table[table["config"].isin([a, b])]
    modes = tuple(sorted(set(sides.loc[sides["config"] == a, "history_mode"]) & set(sides.loc[sides["config"] == b, "history_mode"])))
    return Comparison(comparisons=comps, method=method, level=level, history_modes=modes, notes=tuple(_notes(table, a, b)))


# -- one factor ----------------------------------------------------------------------------------
_FACTOR_COLUMNS = ("summarizer", "history_mode")
_PREFERRED_BASELINE = {"summarizer": "offline", "history_mode": "view"}


_MISSING = object()


def _factor_value(row: Mapping[str, Any], factor: str) -> Any:
    if factor in _FACTOR_COLUMNS:
        return row.get(factor)
    return _params(row.get("params_json")).get(factor, _MISSING)


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def compare_factor(
    results: Results | str | os.PathLike[str],
    factor: str,
    *,
    metric: str | Sequence[str] = "retention",
    baseline: Any = None,
    margin: float | Mapping[str, float] | None = None,
    level: float = DEFAULT_LEVEL,
    method: str = "holm",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Every pair of configurations that differ in ``factor`` only, against its baseline.

    ``factor``: ``summarizer``, ``history_mode`` or a policy parameter (``warn_frac``,
    ``anti_thrash_frac``, ...). Runs are grouped by everything else (policy kind, the other
    parameters, summarizer and history mode; the entry's name does not count); within a group,
    each value of ``factor`` is compared with ``baseline`` (default: the policy's default
    value when present, ``offline``/``view`` for summarizer/mode, else the smallest value).
    All comparisons × metrics form one family. For ``history_mode`` the labels are
    ``config@mode`` and the pairs are matched by task only.
    """
    res = as_results(results)
    table = run_table(res)
    mets = _metric_list(metric)
    rows = table.to_dict("records")
    vals = [_factor_value(r, factor) for r in rows]
    if all(v is _MISSING for v in vals):
        known = set(_FACTOR_COLUMNS)
        for r in rows:
            known |= set(_params(r.get("params_json")))
        raise ConfigError(did_you_mean(factor, known, what="factor"))
    within: tuple[str, ...] = () if factor == "history_mode" else ("history_mode",)
    table = table.copy()
    table["_value"] = [_key(v) if v is not _MISSING else None for v in vals]
    if factor == "history_mode":
        table["config"] = table["config"] + "@" + table["history_mode"].astype(str)
    # everything but the factor (and the entry's name) must agree for two runs to be paired
    table["_group"] = [
        _key({
            "kind": r.get("policy_kind"),
            "params": {k: v for k, v in _params(r.get("params_json")).items() if k != factor},
            **{c: r.get(c) for c in _FACTOR_COLUMNS if c != factor},
        })
        for r in rows
    ]
    table = table[table["_value"].notna()]
    pairs: list[TaskPairs] = []
    seen: set[tuple[str, str]] = set()
    for _, g in table.groupby("_group", sort=True):
        values = sorted(g["_value"].unique())
        if len(values) < 2:
            continue
        base = _baseline_value(g, factor, values, baseline)
        if base is None:
            continue
        b_label = sorted(g.loc[g["_value"] == base, "config"].unique())[0]
        for v in values:
            if v == base:
                continue
            a_label = sorted(g.loc[g["_value"] == v, "config"].unique())[0]
            if (a_label, b_label) in seen:
                continue
            seen.add((a_label, b_label))
            sub = g[g["config"].isin([a_label, b_label])]
            pairs.extend(pairs_for(sub, a_label, b_label, m, margin=margin, within=within) for m in mets)
    if not pairs:
        raise ConfigError(f"compare_factor: no two configurations of these results differ in {factor!r} only")
    comps = compare_family(pairs, level=level, method=method, n_resamples=n_resamples, seed=seed)
    modes = tuple(sorted(table["history_mode"].dropna().unique())) if within else ()
    return Comparison(comparisons=comps, method=method, level=level, history_modes=modes)


def _baseline_value(g: Any, factor: str, values: Sequence[str], baseline: Any) -> str | None:
    if baseline is not None:
        k = _key(baseline)
        return k if k in values else None
    if factor in _PREFERRED_BASELINE and _key(_PREFERRED_BASELINE[factor]) in values:
        return _key(_PREFERRED_BASELINE[factor])
    kind = str(g["policy_kind"].iloc[0])
    defaults = M.policy_defaults(kind)
    if factor in defaults and _key(defaults[factor]) in values:
        return _key(defaults[factor])
    return values[0]
