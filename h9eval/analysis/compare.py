"""Compare two configurations of a sweep, task by task: ``compare(results, "a", "b")``.

A **configuration** is what a user set up in the sweep spec: a ``[[policies]]`` entry (its
``name``, default its kind) at one grid point, with one summarizer variant. Its label
(:func:`config_labels`) is ``name`` plus ``(param=value, ...)`` for the grid point, plus
``:summarizer`` when the results hold more than one summarizer variant (anchors and free-text
summaries of the same policy are then two configurations, told apart everywhere this module's
labels are shown). History modes, repeats and checkpoints are *nested inside* a task: the
two configurations are paired within each task on the history modes both ran, and the
statistics of :mod:`h9eval.analysis.stats` resample tasks.

Metrics (:data:`METRICS`, the registry: :func:`register_metric`) are per run, from
:func:`h9eval.analysis.metrics.run_metrics` or each metric's own ``compute`` from the same tables, then
aggregated per task.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
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
    "UNITS",
    "register_metric",
    "DEFAULT_RETENTION_MARGIN",
    "metric_spec",
    "config_labels",
    "shell_name",
    "run_table",
    "Comparison",
    "compare",
    "compare_factor",
    "pairs_for",
    "RANKING_COLUMNS",
    "ROBUSTNESS_COLUMNS",
    "robustness_frame",
    "robust_lines",
    "extractor_pairs",
    "other_extractors",
    "base_labels",
    "stand_in_robustness",
    "EXTRACTOR_ROBUSTNESS_COLUMNS",
    "extractor_robustness",
    "stand_in_caveats",
    "stand_in_caveat",
    "OFFLINE_PREFIXES",
    "is_offline",
    "retention_rankings",
]

DEFAULT_RETENTION_MARGIN = 0.005
"""Default equivalence margin of the share-valued metrics (retention, tokens saved): half a
point, below which a difference is not worth a decision."""


UNITS: tuple[str, ...] = ("share", "tokens", "usd", "count")
"""A metric's unit: ``share`` (0-1), ``tokens``, ``usd`` (dollars) or ``count`` (per run)."""


@dataclass(frozen=True, kw_only=True)
class Metric:
    """A per-run metric that can be compared: one value per metric in :data:`METRICS` (the registry), from
    which :func:`run_table`, :func:`compare` and the report's answer box derive what they show.

    Attributes:
        name: its column in :func:`run_table`.
        higher_is_better: its direction.
        description: what it measures (``h9eval compare --metric`` help and the docs).
        default_margin: the equivalence margin in the metric's unit (``None``: no equivalence verdict unless
            one is given).
        label: how tables and the answer box name it (default: the name with spaces).
        unit: one of :data:`UNITS`.
        priced: its value comes from a price table (all 0 without one: the answer box then leaves it out).
        answer_rank: its place among the answer box's targets (lower first); ``None``: not a target.
        superseded_by: the answer box leaves this target out when that one is shown (the summarizer's dollars
            beside the whole bill's).
        compute: ``compute(results, runs) -> DataFrame`` of ``run_id`` and a column ``name``, for a metric
            :func:`~h9eval.analysis.metrics.run_metrics` does not give (``runs``: the ok runs); ``None``: one of
            its columns.
    """

    name: str
    higher_is_better: bool
    description: str
    default_margin: float | None = None
    label: str = ""
    unit: str = "count"
    priced: bool = False
    answer_rank: int | None = None
    superseded_by: str = ""
    compute: Callable[[Results, Any], Any] | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ConfigError(f"Metric.name must be a lower-case identifier, got {self.name!r}")
        if self.unit not in UNITS:
            raise ConfigError(f"Metric {self.name}: unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if not self.label:
            object.__setattr__(self, "label", self.name.replace("_", " "))


def _anchor_retention(results: Results, runs: Any) -> Any:
    import pandas as pd

    probes = results.probes
    if probes is None or not len(probes):
        return pd.DataFrame(columns=["run_id", "anchor_retention"])
    anchors = probes[probes["probe_kind"].isin(ANCHOR_KINDS)]
    return M.retention(anchors, by=("run_id",))[["run_id", "retention"]].rename(
        columns={"retention": "anchor_retention"}
    )


def _na_overwrites(results: Results, runs: Any) -> Any:
    import pandas as pd

    calls = results.calls
    if calls is None or not len(calls) or "na_overwrites" not in calls.columns:
        return pd.DataFrame(columns=["run_id", "na_overwrites"])
    return calls.groupby("run_id")["na_overwrites"].sum().rename("na_overwrites").reset_index()


METRICS: list[Metric] = [
    Metric(
        name="retention",
        higher_is_better=True,
        default_margin=DEFAULT_RETENTION_MARGIN,
        unit="share",
        answer_rank=0,
        description="mean probe score over answerable, unpinned recall probes the placebo control kept (memory)",
    ),
    Metric(
        name="pinned_retention",
        higher_is_better=True,
        default_margin=DEFAULT_RETENTION_MARGIN,
        unit="share",
        description="retention over the pinned probes only (answer in the system or first task message): pinning, not "
        "memory",
    ),
    Metric(
        name="anchor_retention",
        higher_is_better=True,
        default_margin=DEFAULT_RETENTION_MARGIN,
        unit="share",
        description="retention over the anchor-kind probes only (" + ", ".join(ANCHOR_KINDS) + ")",
        compute=_anchor_retention,
    ),
    Metric(
        name="tokens_saved",
        higher_is_better=True,
        default_margin=DEFAULT_RETENTION_MARGIN,
        unit="share",
        answer_rank=1,
        description="share of tokens saved (h9eval.analysis.metrics.tokens_saved)",
    ),
    Metric(
        name="peak_tokens_sent", higher_is_better=False, unit="tokens", description="largest request of the run, tokens"
    ),
    Metric(name="summarizer_calls", higher_is_better=False, description="summarizer calls per run"),
    Metric(
        name="summarizer_cost_usd",
        higher_is_better=False,
        unit="usd",
        priced=True,
        label="summarizer dollars per run",
        answer_rank=4,
        superseded_by="cost_usd",
        description="summarizer cost per run, USD",
    ),
    Metric(
        name="cost_usd",
        higher_is_better=False,
        unit="usd",
        priced=True,
        label="dollars per task",
        answer_rank=3,
        description="dollars per task as the provider bills it: prompt caching, agent and summarizer calls "
        "(h9eval.core.billing)",
    ),
    Metric(
        name="cost_saved",
        higher_is_better=True,
        default_margin=DEFAULT_RETENTION_MARGIN,
        unit="share",
        priced=True,
        label="dollars saved (share)",
        answer_rank=2,
        description="share of the uncompacted transcript's dollars saved, under the same billing",
    ),
    Metric(
        name="cache_read_share",
        higher_is_better=True,
        unit="share",
        description="cache reads over the agent's billed input",
    ),
    Metric(name="emergencies", higher_is_better=False, description="forced (emergency) truncations per run"),
    Metric(name="overflows", higher_is_better=False, description="calls whose request exceeded the window, per run"),
    Metric(name="fallbacks", higher_is_better=False, description="summaries replaced by the fallback, per run"),
    Metric(
        name="na_overwrites",
        higher_is_better=False,
        description="anchors overwritten by an N/A section, per run",
        compute=_na_overwrites,
    ),
]
"""The metrics :func:`compare` knows (the registry), in the order a full comparison lists them. Add one with
:func:`register_metric`."""


def register_metric(metric: Metric) -> Metric:
    """Add a metric to :data:`METRICS`: :func:`run_table` computes it, :func:`compare` and ``h9eval compare
    --metric`` compare it, and the report's answer box shows it when it has an ``answer_rank``.

    Args:
        metric: the metric (a name not yet registered).

    Returns:
        The metric.

    Raises:
        ConfigError: the name is taken.
    """
    if any(m.name == metric.name for m in METRICS):
        raise ConfigError(f"metric {metric.name!r} is already registered")
    METRICS.append(metric)
    return metric


def metric_spec(name: str) -> Metric:
    """The :class:`Metric` called ``name``; :class:`ConfigError` with suggestions otherwise."""
    by_name = {m.name: m for m in METRICS}
    if name not in by_name:
        raise ConfigError(did_you_mean(name, by_name, what="metric"))
    return by_name[name]


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
    # the registered metrics run_metrics gives, and retention with the pinned probes in (the rankings read it)
    given = ["retention_with_pinned", *(m.name for m in METRICS if m.compute is None)]
    keep = ["run_id", *(c for c in given if c in rm.columns)]
    info_cols = [
        c
        for c in (
            "run_id",
            "task_id",
            "config",
            "policy_name",
            "policy_kind",
            "params_hash",
            "params_json",
            "summarizer",
            "history_mode",
            "repeat",
            "n_compactions",
        )
        if c in ok.columns
    ]
    out = ok[info_cols].merge(rm[keep], on="run_id", how="left")
    for m in METRICS:
        if m.compute is not None:
            got = m.compute(results, ok)
            out = out.merge(got[["run_id", m.name]], on="run_id", how="left")
    for m in METRICS:
        if m.name not in out.columns:
            out[m.name] = float("nan")
        out[m.name] = pd.to_numeric(out[m.name], errors="coerce").astype(float)
    return out.sort_values("run_id", kind="stable").reset_index(drop=True)


RANKING_COLUMNS: tuple[str, ...] = (
    "config",
    "n_tasks",
    "retention",
    "rank",
    "retention_with_pinned",
    "rank_with_pinned",
    "pinned_retention",
    "rank_moved",
)
"""Columns of :func:`retention_rankings`."""


def retention_rankings(table: Any) -> Any:
    """Configurations ranked by retention (memory: pinned probes left out) and by retention
    with the pinned probes averaged in, from a :func:`run_table` (:data:`RANKING_COLUMNS`).

    Each value is the mean over tasks of the per-task mean (tasks weigh equally, as in
    :mod:`h9eval.analysis.stats`); ranks are 1 = best, ties share the smaller rank;
    ``rank_moved`` is ``rank_with_pinned - rank``. Sorted by ``rank``. The two rankings
    disagree when any ``rank_moved`` is not 0: a report then shows both.
    """
    import pandas as pd

    if len(table) == 0:
        return pd.DataFrame(columns=list(RANKING_COLUMNS))
    cols = ["retention", "retention_with_pinned", "pinned_retention"]
    per_task = table.groupby(["config", "task_id"], sort=True)[cols].mean()
    g = per_task.groupby(level="config")
    out = g.mean()
    out["n_tasks"] = g["retention"].count()
    out = out[out["retention"].notna()]
    out["rank"] = out["retention"].rank(ascending=False, method="min").astype(int)
    out["rank_with_pinned"] = out["retention_with_pinned"].rank(ascending=False, method="min").astype("Int64")
    out["rank_moved"] = out["rank_with_pinned"] - out["rank"]
    out = out.reset_index().sort_values(["rank", "config"], kind="stable").reset_index(drop=True)
    return out[list(RANKING_COLUMNS)]


def as_results(results: Results | str | os.PathLike[str]) -> Results:
    return results if isinstance(results, Results) else load_results(results)


def shell_name(label: str) -> str:
    """A configuration label in a form a shell takes unquoted: the grid point's brackets become
    a colon and its ``, `` a comma, any other character but letters, digits and ``._=:,+-``
    a ``-`` (``progressive [min_tail_messages=4, warn_frac=0.5]:offline`` ->
    ``progressive:min_tail_messages=4,warn_frac=0.5:offline``; ``base:offline`` stays).
    :func:`compare` accepts either form; ``h9eval compare RESULTS --list`` shows both."""
    s = label.replace(" [", ":").replace("]", "").replace(", ", ",")
    return re.sub(r"[^A-Za-z0-9._=:,+-]+", "-", s).strip("-")


def _resolve(label: str, labels: Sequence[str]) -> str:
    if label in labels:
        return label
    by_shell = {shell_name(x): x for x in labels}
    if len(by_shell) == len(labels) and shell_name(label) in by_shell:
        return by_shell[shell_name(label)]
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
        raise ConfigError("metric: give at least one metric; available: " + ", ".join(m.name for m in METRICS))
    return [metric_spec(n) for n in names]


def pairs_for(
    table: Any,
    a: str,
    b: str,
    metric: Metric,
    *,
    margin: float | Mapping[str, float] | None = None,
    within: Sequence[str] = ("history_mode",),
) -> TaskPairs:
    """The :class:`~h9eval.analysis.stats.TaskPairs` of configurations ``a`` and ``b`` of a
    :func:`run_table` on ``metric``, paired within ``within`` (default: the history mode)."""
    return task_pairs(
        table,
        a,
        b,
        metric=metric.name,
        within=within,
        higher_is_better=metric.higher_is_better,
        margin=_margin_for(metric, margin),
    )


# -- results ------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Comparisons made as one family (adjusted together): ``comparisons`` in the order asked
    (:class:`~h9eval.analysis.stats.PairedComparison`), ``method`` and ``level`` of the
    adjustment, ``history_modes`` the pairs were matched within, ``notes`` (tasks only one
    side ran, and similar caveats), ``caveats`` (printed beside the verdicts: the stand-in
    summarizer), ``robustness`` (one line per metric: the verdict under each offline
    extractor the sweep ran, and whether they agree; see :func:`stand_in_robustness`)."""

    comparisons: tuple[PairedComparison, ...]
    method: str
    level: float
    history_modes: tuple[str, ...]
    notes: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    robustness: tuple[str, ...] = ()

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
        fams = {c.family_size for c in self.comparisons if c.in_family}
        if self.method != "none" and fams and max(fams) > 1:
            out.append(
                f"intervals adjusted within each family of {'/'.join(map(str, sorted(fams)))} comparisons "
                f"({self.method}); "
                f"family level {self.level:g}"
            )
        out += [f"stand-in: {r}" for r in self.robustness]
        out += [f"caveat: {c}" for c in self.caveats]
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
            "caveats": list(self.caveats),
            "robustness": list(self.robustness),
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


def _task_mean(table: Any, config: str, column: str) -> float:
    rows = table[table["config"] == config]
    return (
        float(rows.groupby("task_id")[column].mean().mean()) if column in rows.columns and len(rows) else float("nan")
    )


def _notes(table: Any, a: str, b: str) -> list[str]:
    ta = set(table.loc[table["config"] == a, "task_id"])
    tb = set(table.loc[table["config"] == b, "task_id"])
    notes = []
    pa, pb = _task_mean(table, a, "pinned_retention"), _task_mean(table, b, "pinned_retention")
    if pa == pa or pb == pb:
        notes.append(
            "pinned_retention (answer in the system or first task message; pinning, not memory, left out of "
            "retention): "
            f"{a} {pa:.3f}, {b} {pb:.3f}"
        )
    for x, only in ((a, ta - tb), (b, tb - ta)):
        if only:
            notes.append(f"{len(only)} task(s) only {x} ran, left out: {', '.join(sorted(only))}")
    if "n_compactions" in table.columns:
        # a score where the configuration never compacted is the uncompacted transcript's: flag it
        for x in (a, b):
            rows = table[(table["config"] == x) & (table["n_compactions"].fillna(0) == 0)]
            if len(rows):
                tasks = sorted(set(rows["task_id"]))
                if set(tasks) == set(table.loc[table["config"] == x, "task_id"]):
                    notes.append("warning: " + NEVER_COMPACTED_WARNING.format(config=x, n=len(tasks)))
                    continue
                notes.append(
                    f"{x} never compacted on {len(tasks)} task(s) (its scores there are the uncompacted transcript's): "
                    f"{', '.join(tasks)}"
                )
    return notes


NEVER_COMPACTED_WARNING = (
    "{config} never compacted on any of its {n} task(s): every score of it is the uncompacted transcript's (a "
    "policy of your own gets the run's window only through a context_window_tokens field, docs/own-policy.md)"
)
"""The one wording, in ``h9eval compare`` and the report, for a configuration that compacted nowhere."""


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
    bases = base_labels(table)
    if (a not in labels or b not in labels) and {a, b} <= set(bases) | set(labels):
        # a strategy named without its summarizer: compare under every extractor it ran (the
        # other side paired by extractor too, or as it is when it calls no summarizer)
        pairs_ab = extractor_pairs(table, bases, labels, a, b)
        summs = [str(table.loc[table["config"] == x, "summarizer"].iloc[0]) for x, _ in pairs_ab]
    else:
        a, b = _resolve(a, labels), _resolve(b, labels)
        if a == b:
            raise ConfigError(f"compare: A and B are the same configuration {a!r}")
        pairs_ab = [(a, b)]
    mets = _metric_list(metric)
    comps: list[PairedComparison] = []
    for x, y in pairs_ab:  # each extractor's comparison is a family of its own: the verdict under that stand-in
        pairs = [pairs_for(table, x, y, m, margin=margin) for m in mets]
        comps.extend(compare_family(pairs, level=level, method=method, n_resamples=n_resamples, seed=seed))
    x, y = pairs_ab[0]
    sides = table[table["config"].isin([x, y])]
    modes = tuple(
        sorted(
            set(sides.loc[sides["config"] == x, "history_mode"]) & set(sides.loc[sides["config"] == y, "history_mode"])
        )
    )
    robust: list[str] = []
    if len(pairs_ab) == 1:
        others = other_extractors(table, bases, x, y)
        if others:
            rob = stand_in_robustness(
                table,
                [(x, y), *others],
                mets,
                margin=margin,
                level=level,
                method=method,
                n_resamples=n_resamples,
                seed=seed,
            )
            robust = robust_lines(rob)
    else:
        rob = robustness_frame(comps, [sm for sm in summs for _ in mets])
        robust = robust_lines(rob)
    notes = [n for x2, y2 in pairs_ab for n in _notes(table, x2, y2)]
    return Comparison(
        comparisons=tuple(comps),
        method=method,
        level=level,
        history_modes=modes,
        notes=tuple(dict.fromkeys(notes)),
        caveats=tuple(stand_in_caveats(table, [c for xy in pairs_ab for c in xy])),
        robustness=tuple(robust),
    )


# -- the stand-in summarizer ------------------------------------------------------------------------
ROBUSTNESS_COLUMNS: tuple[str, ...] = (
    "a",
    "b",
    "summarizer",
    "metric",
    "n_differ",
    "mean_diff",
    "lo",
    "hi",
    "p_adjusted",
    "verdict",
    "robust",
)
"""Columns of :func:`stand_in_robustness`."""


def base_labels(table: Any) -> Any:
    """Each row's configuration label without its ``:summarizer`` suffix."""
    import pandas as pd

    if "summarizer" not in table.columns:
        return table["config"].copy()
    return pd.Series(
        [
            c[: -len(sm) - 1] if isinstance(sm, str) and str(c).endswith(":" + sm) else c
            for c, sm in zip(table["config"], table["summarizer"])
        ],
        index=table.index,
    )


def extractor_pairs(table: Any, bases: Any, labels: Sequence[str], a: str, b: str) -> list[tuple[str, str]]:
    """``(a:sm, b:sm)`` for every summarizer ``sm`` both strategies ran with; a side given as a
    full label (a policy that calls no summarizer runs once) is paired as it is."""

    def variants(x: str) -> dict[str, str]:
        if x in labels:
            return {}
        return {str(sm): str(c) for c, sm in zip(table.loc[bases == x, "config"], table.loc[bases == x, "summarizer"])}

    va, vb = variants(a), variants(b)
    if va and vb:
        out = [(va[sm], vb[sm]) for sm in sorted(set(va) & set(vb))]
    else:
        out = [(va[sm], b) for sm in sorted(va)] if va else [(a, vb[sm]) for sm in sorted(vb)]
    if not out:
        raise ConfigError(f"compare: {a!r} and {b!r} never ran with the same summarizer")
    return out


def other_extractors(table: Any, bases: Any, a: str, b: str) -> list[tuple[str, str]]:
    """``(a', b')`` for every other summarizer variant both ``a``'s and ``b``'s strategies ran with."""
    ba, bb = bases[table["config"] == a], bases[table["config"] == b]
    if not len(ba) or not len(bb):
        return []
    base_a, base_b = ba.iloc[0], bb.iloc[0]
    own = set(table.loc[table["config"].isin([a, b]), "summarizer"])
    sa = set(table.loc[bases == base_a, "summarizer"]) - own
    sb = set(table.loc[bases == base_b, "summarizer"]) - own
    fixed_a, fixed_b = (
        table.loc[bases == base_a, "config"].nunique() == 1,
        table.loc[bases == base_b, "config"].nunique() == 1,
    )
    if fixed_b and not fixed_a:  # b calls no summarizer: it ran once, and pairs with each of a's extractors
        return [(f"{base_a}:{sm}", b) for sm in sorted(sa)]
    if fixed_a and not fixed_b:
        return [(a, f"{base_b}:{sm}") for sm in sorted(sb)]
    return [(f"{base_a}:{sm}", f"{base_b}:{sm}") for sm in sorted(sa & sb)]


def robustness_frame(comps: Sequence[PairedComparison], summarizers: Sequence[str]) -> Any:
    """The verdicts of ``comps`` (one per summarizer in ``summarizers``, same order) with a
    ``robust`` column per metric (:data:`ROBUSTNESS_COLUMNS`): ``True`` only when at least two
    extractors ran and every one gives the same verdict."""
    import pandas as pd

    rows = [
        {
            "a": c.a,
            "b": c.b,
            "summarizer": sm,
            "metric": c.metric,
            "n_differ": c.n_differ,
            "mean_diff": c.mean_diff,
            "lo": c.lo,
            "hi": c.hi,
            "p_adjusted": c.p_adjusted,
            "verdict": c.verdict,
        }
        for c, sm in zip(comps, summarizers)
    ]
    df = pd.DataFrame(rows, columns=[c for c in ROBUSTNESS_COLUMNS if c != "robust"])
    agree = df.groupby("metric")["verdict"].agg(lambda v: len(v) >= 2 and v.nunique() == 1)
    df["robust"] = df["metric"].map(agree).astype(bool)
    return df[list(ROBUSTNESS_COLUMNS)]


def stand_in_robustness(
    table: Any,
    pairs_ab: Sequence[tuple[str, str]],
    metrics: Sequence[Metric],
    *,
    margin: float | Mapping[str, float] | None = None,
    level: float = DEFAULT_LEVEL,
    method: str = "holm",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Any:
    """The same comparison of two summarizing strategies under each offline extractor:
    ``pairs_ab`` gives the two labels per extractor (``a:offline``, ``b:offline``), each pair a
    family of its own; see :func:`robustness_frame`."""
    comps: list[PairedComparison] = []
    summs: list[str] = []
    for x, y in pairs_ab:
        sm = str(table.loc[table["config"] == x, "summarizer"].iloc[0]) if "summarizer" in table.columns else ""
        pairs = [pairs_for(table, x, y, m, margin=margin) for m in metrics]
        comps.extend(compare_family(pairs, level=level, method=method, n_resamples=n_resamples, seed=seed))
        summs.extend([sm] * len(metrics))
    return robustness_frame(comps, summs)


EXTRACTOR_ROBUSTNESS_COLUMNS: tuple[str, ...] = ("strategy", "baseline", *ROBUSTNESS_COLUMNS)
"""Columns of :func:`extractor_robustness`."""


def extractor_robustness(table: Any, comparisons: Sequence[PairedComparison]) -> Any:
    """Every comparison of a summarizing strategy with a baseline under each offline extractor
    it ran with, as ``comparisons`` (e.g. a headline's, each paired within one summarizer) give
    them: one row per comparison (:data:`EXTRACTOR_ROBUSTNESS_COLUMNS`: ``strategy`` and
    ``baseline`` are the labels without their ``:summarizer``), ``robust`` per strategy,
    baseline and metric as :func:`robustness_frame` reads it (at least two extractors, every
    verdict the same). Only strategies compared under two or more offline extractors: with one
    there is nothing to agree. Empty when there are none."""
    import pandas as pd

    if not len(table) or "summarizer" not in table.columns:
        return pd.DataFrame(columns=list(EXTRACTOR_ROBUSTNESS_COLUMNS))
    summ = dict(zip(table["config"], table["summarizer"].astype(str)))
    base = dict(zip(table["config"], base_labels(table)))
    groups: dict[tuple[str, str], list[tuple[PairedComparison, str]]] = {}
    for c in comparisons:
        sm = summ.get(c.a, "")
        # a strategy that calls no summarizer runs once: its label has no extractor to vary
        if base.get(c.a, c.a) == c.a or not is_offline(sm) or not is_offline(summ.get(c.b, "")):
            continue
        groups.setdefault((base[c.a], base.get(c.b, c.b)), []).append((c, sm))
    frames = []
    for (strategy, baseline), cs in sorted(groups.items()):
        if len({sm for _, sm in cs}) < 2:
            continue
        f = robustness_frame([c for c, _ in cs], [sm for _, sm in cs])
        frames.append(f.assign(strategy=strategy, baseline=baseline))
    if not frames:
        return pd.DataFrame(columns=list(EXTRACTOR_ROBUSTNESS_COLUMNS))
    out = pd.concat(frames, ignore_index=True)
    out = out.sort_values(["strategy", "baseline", "metric", "summarizer"], kind="stable")
    return out[list(EXTRACTOR_ROBUSTNESS_COLUMNS)].reset_index(drop=True)


def robust_lines(rob: Any) -> list[str]:
    out = []
    for metric, g in rob.groupby("metric", sort=False):
        each = ", ".join(f"{r.verdict} under {r.summarizer}" for r in g.itertuples())
        word = (
            "robust to the stand-in (every extractor agrees)"
            if bool(g["robust"].iloc[0])
            else "NOT robust to the stand-in"
        )
        out.append(f"{metric}: {each} -> {word}")
    return out


OFFLINE_PREFIXES: tuple[str, ...] = ("offline", "none")
"""Summarizer names starting with one of these run without a model."""


def is_offline(summarizer: Any) -> bool:
    """True for an offline summarizer name (:data:`OFFLINE_PREFIXES`)."""
    return str(summarizer).startswith(OFFLINE_PREFIXES)


def stand_in_caveat(names: Sequence[str]) -> str:
    """The stand-in caveat for offline summarizers ``names``: printed beside every verdict and
    recommendation whose numbers come from them (``compare``, the tuner's TOML, notebooks)."""
    return (
        f"summaries from the offline extractive stand-in ({', '.join(names)}), not a language model: a verdict between "
        "summarizing strategies ranks mechanisms under this extractor and may change under a model's summaries"
    )


def stand_in_caveats(table: Any, configs: Sequence[str]) -> list[str]:
    """The caveat printed beside a verdict when a configuration compared called an offline
    summarizer (an extractive stand-in, not a model)."""
    rows = table[table["config"].isin(list(configs))]
    if "summarizer" not in rows.columns or "summarizer_calls" not in rows.columns:
        return []
    used = rows[rows["summarizer_calls"].fillna(0) > 0]
    offline = sorted({str(sm) for sm in used["summarizer"].dropna() if is_offline(sm)})
    if not offline:
        return []
    return [stand_in_caveat(offline)]


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
        _key(
            {
                "kind": r.get("policy_kind"),
                "params": {k: v for k, v in _params(r.get("params_json")).items() if k != factor},
                **{c: r.get(c) for c in _FACTOR_COLUMNS if c != factor},
            }
        )
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
