"""Task-level paired statistics: the one place where h9eval decides whether two configurations
differ.

**The unit is the task.** A sweep observes each (task, configuration) several times: in more
than one history mode, over repeats, at several checkpoints. Those observations are not
independent samples of anything a user cares about (two history modes of one task share the
task's content; a deterministic summarizer's repeats are the same number again), so they are
aggregated *inside* each task first and the bootstrap resamples tasks. In detail
(:func:`task_pairs`):

1. repeats are averaged within each (task, configuration, nested cell): deterministic repeats
   (identical values) collapse to that one value, so ``repeats=3`` of an offline summarizer
   adds nothing, exactly as it should; a stochastic summarizer's repeats are averaged, which
   reduces the noise of that task's value without adding to the number of tasks;
2. the two configurations are paired within each task on the nested cells both have (e.g. the
   same history mode and checkpoint): a cell only one of them has is dropped, never compared
   with another moment or mode;
3. the paired differences (a - b) are averaged within the task: one difference per task.

**Interval.** A seeded percentile bootstrap of the mean difference over tasks: each resample
draws ``n`` of the ``n`` tasks with replacement (:func:`bootstrap_means`); the interval at level
``L`` is the ``(1-L)/2`` and ``(1+L)/2`` quantiles (numpy's ``linear`` rule) of the resampled
means. The p-value is the interval's inversion (:func:`bootstrap_p_value`): the smallest
``alpha`` whose ``1-alpha`` interval excludes 0, so "the interval excludes 0" and
"p < alpha" are the same statement.

**A family of comparisons** (every comparison a report or a ``compare`` call makes at once) is
adjusted together (:func:`adjust`): ``holm`` (default; family-wise error), ``bh``
(Benjamini-Hochberg, false discovery rate) or ``none``. The adjusted p-values are reported, and
each comparison's interval is recomputed at its *adjusted level* (Holm: ``1 - alpha/(m-k+1)``
for the comparison ranked ``k`` by p-value, frozen at the first rank Holm fails to reject; BH:
the false-coverage-rate level ``1 - R*alpha/m`` with ``R`` rejections, ``1 - alpha/m`` when
there is none), so that an interval excluding 0 is exactly a rejection of the adjusted test.

**Verdicts** come from the adjusted interval, never from the mean (:func:`verdict`); the words
are defined once, in :data:`VERDICT_DEFINITIONS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from h9eval.core.errors import ConfigError

__all__ = [
    "BETTER",
    "WORSE",
    "INCONCLUSIVE",
    "EQUIVALENT",
    "VERDICT_DEFINITIONS",
    "ADJUSTMENTS",
    "DEFAULT_LEVEL",
    "DEFAULT_RESAMPLES",
    "equivalent_within",
    "min_tasks_for",
    "verdict",
    "TaskPairs",
    "PairedComparison",
    "task_pairs",
    "bootstrap_means",
    "percentile_interval",
    "bootstrap_p_value",
    "holm",
    "benjamini_hochberg",
    "adjust",
    "Adjustment",
    "compare_family",
    "comparisons_frame",
    "MeanInterval",
    "RankCorrelation",
    "mean_interval",
    "spearman",
    "spearman_interval",
    "spearman_rows",
]

BETTER = "better"
WORSE = "worse"
INCONCLUSIVE = "inconclusive"
EQUIVALENT = "equivalent within ±{margin:g}"
"""Format of the equivalence verdict; :func:`equivalent_within` fills in the margin."""

VERDICT_DEFINITIONS: Mapping[str, str] = {
    "equivalent within ±d": "the whole adjusted interval of the mean paired difference lies within [-d, d] "
    "(d in the metric's own unit, stated with the verdict); checked first, so a difference that is "
    "detectable but smaller than d is called equivalent",
    BETTER: "the whole adjusted interval lies on the side of 0 where A is better than B "
    "(above 0 for a larger-is-better metric, below 0 for a smaller-is-better one)",
    WORSE: "the whole adjusted interval lies on the side of 0 where A is worse than B",
    INCONCLUSIVE: "anything else: the adjusted interval contains 0 (and is not within ±d), "
    "or too few tasks were paired for the interval's level (see min_tasks_for: 6 at 0.95)",
}
"""What each verdict word means; every table and report that prints a verdict uses these."""

ADJUSTMENTS: tuple[str, ...] = ("holm", "bh", "none")
DEFAULT_LEVEL = 0.95
DEFAULT_RESAMPLES = 2000


def min_tasks_for(level: float) -> int:
    """The fewest tasks a verdict at interval level ``level`` may rest on: the smallest ``n``
    for which an exact sign test could reach ``alpha = 1 - level`` at all (``2 / 2**n <
    alpha``; 6 tasks at 0.95, 8 at 0.99).

    Why: with few tasks the percentile bootstrap under-covers badly; three tasks that all
    moved the same way give an interval excluding 0 at *every* level, although such a pattern
    turns up by chance one time in four.
    """
    if not 0 < level < 1:
        raise ConfigError(f"level must be in (0, 1), got {level!r}")
    return int(math.floor(1 - math.log2(1 - level))) + 1


def equivalent_within(margin: float) -> str:
    """The equivalence verdict word for margin ``margin`` (e.g. ``equivalent within ±0.005``)."""
    return EQUIVALENT.format(margin=margin)


def verdict(
    lo: float,
    hi: float,
    *,
    higher_is_better: bool = True,
    margin: float | None = None,
    n_tasks: int | None = None,
    level: float = DEFAULT_LEVEL,
) -> str:
    """The verdict on A against B from the (adjusted) interval ``[lo, hi]`` of mean(A - B).

    ``higher_is_better``: the metric's direction. ``margin``: the equivalence margin d (same
    unit as the metric; ``None`` or 0: no equivalence verdict). ``n_tasks``: tasks paired
    (``None``: not checked; fewer than :func:`min_tasks_for` ``level``: inconclusive).
    ``level``: the interval's (adjusted) level. See :data:`VERDICT_DEFINITIONS`.
    """
    if n_tasks is not None and n_tasks < min_tasks_for(level):
        return INCONCLUSIVE
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    if margin is not None and margin > 0 and -margin <= lo and hi <= margin:
        return equivalent_within(margin)
    if lo > 0:
        return BETTER if higher_is_better else WORSE
    if hi < 0:
        return WORSE if higher_is_better else BETTER
    return INCONCLUSIVE


# -- pairing ------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class TaskPairs:
    """One value per task for each of two configurations, paired by task.

    ``task_ids`` sorted; ``values_a[i]``/``values_b[i]`` belong to ``task_ids[i]`` (already
    aggregated over the nested cells, see :func:`task_pairs`). ``higher_is_better``: the
    metric's direction. ``margin``: its equivalence margin (``None``: none).
    """

    a: str
    b: str
    metric: str
    task_ids: tuple[str, ...]
    values_a: tuple[float, ...]
    values_b: tuple[float, ...]
    higher_is_better: bool = True
    margin: float | None = None

    def __post_init__(self) -> None:
        if not (len(self.task_ids) == len(self.values_a) == len(self.values_b)):
            raise ConfigError(
                f"TaskPairs: task_ids, values_a and values_b must have one entry per task, got {len(self.task_ids)}, {len(self.values_a)}, {len(self.values_b)}"
            )
        if self.margin is not None and not self.margin >= 0:
            raise ConfigError(f"TaskPairs.margin must be >= 0 or None, got {self.margin!r}")

    @property
    def diffs(self) -> tuple[float, ...]:
        """Per task: value of A minus value of B."""
        return tuple(x - y for x, y in zip(self.values_a, self.values_b))


def task_pairs(
    table: Any,
    a: str,
    b: str,
    *,
    metric: str,
    value: str | None = None,
    config: str = "config",
    task: str = "task_id",
    within: Sequence[str] = (),
    higher_is_better: bool = True,
    margin: float | None = None,
) -> TaskPairs:
    """Aggregate a tidy table to one paired value per task (see the module docstring).

    ``table``: a DataFrame with one row per observation: ``task`` (task id), ``config``
    (configuration label), the ``value`` column (default: the ``metric`` column) and the
    ``within`` columns (nested cells to pair on: history mode, checkpoint,
    ...; a column named there but missing is ignored). Rows with a NaN value are dropped.
    Tasks where either configuration has no value are left out. Every other column (repeat,
    run id, ...) is averaged over: that is how repeats collapse.
    """
    value = value or metric
    missing = [c for c in (task, config, value) if c not in table.columns]
    if missing:
        raise ConfigError(f"task_pairs: the table has no column(s) {', '.join(missing)}; it has {', '.join(map(str, table.columns))}")
    within = [c for c in within if c in table.columns]
    d = table[table[config].isin([a, b])]
    d = d[d[value].notna()]
    keys = [task, config, *within]
    # step 1: repeats (identical for a deterministic summarizer) collapse to their mean
    g = d.groupby(keys, sort=True, dropna=False)[value]
    cells = g.agg(["mean", "min", "max", "first"]).astype(float)
    # identical repeats give exactly their value (a mean of equal floats may be off by an ulp)
    cells[value] = cells["first"].where(cells["min"] == cells["max"], cells["mean"])
    cells = cells[[value]].reset_index()
    side_a = cells[cells[config] == a].drop(columns=config)
    side_b = cells[cells[config] == b].drop(columns=config)
    # step 2: pair on the nested cells both configurations have
    pair = side_a.merge(side_b, on=[task, *within], suffixes=("_a", "_b"))
    # step 3: one value per task (the mean of the paired cells' differences is the difference
    # of these means, since both sides average the same cells)
    per_task = pair.groupby(task, sort=True).agg(va=(f"{value}_a", "mean"), vb=(f"{value}_b", "mean"))
    return TaskPairs(
        a=a,
        b=b,
        metric=metric,
        task_ids=tuple(str(t) for t in per_task.index),
        values_a=tuple(float(v) for v in per_task["va"]),
        values_b=tuple(float(v) for v in per_task["vb"]),
        higher_is_better=higher_is_better,
        margin=margin,
    )


# -- bootstrap ------------------------------------------------------------------------------------
def bootstrap_means(values: Sequence[float], *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Any:
    """Means of ``n_resamples`` resamples of ``values``, each drawing ``len(values)`` values
    with replacement: ``numpy.random.default_rng(seed).integers(0, n, size=(n_resamples, n))``
    indexes the values (a numpy array of ``n_resamples`` means; empty for no values)."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return np.empty(0)
    rng = np.random.default_rng(seed)
    return x[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)


def percentile_interval(means: Any, level: float) -> tuple[float, float]:
    """The ``level`` percentile interval of bootstrap ``means`` (numpy ``linear`` quantiles)."""
    import numpy as np

    if not 0 < level < 1:
        raise ConfigError(f"level must be in (0, 1), got {level!r}")
    if len(means) == 0:
        return (math.nan, math.nan)
    a = (1 - level) / 2
    lo, hi = np.quantile(means, [a, 1 - a])
    return (float(lo), float(hi))


def bootstrap_p_value(means: Any) -> float:
    """Two-sided p-value of "mean difference = 0" by inverting the percentile interval: the
    smallest ``alpha`` whose ``1 - alpha`` interval (:func:`percentile_interval`) excludes 0.
    1 when all resampled means are 0; 0 when they all lie on one side of 0; NaN for none."""
    import numpy as np

    s = np.sort(np.asarray(means, dtype=float))
    r = len(s)
    if r == 0:
        return math.nan
    if r == 1:
        return 1.0 if s[0] == 0 else 0.0
    pos = np.arange(r, dtype=float)
    # q0: the largest quantile position whose value is <= 0 (the interval's lower end is > 0
    # exactly when alpha/2 > q0); q1: the smallest whose value is >= 0 (mirror image).
    if s[0] > 0:
        q0 = 0.0
    elif s[-1] <= 0:
        q0 = 1.0
    else:
        i = int(np.nonzero(s <= 0)[0][-1])
        q0 = (pos[i] + (0 - s[i]) / (s[i + 1] - s[i])) / (r - 1)
    if s[-1] < 0:
        q1 = 1.0
    elif s[0] >= 0:
        q1 = 0.0
    else:
        j = int(np.nonzero(s >= 0)[0][0])
        q1 = (pos[j - 1] + (0 - s[j - 1]) / (s[j] - s[j - 1])) / (r - 1)
    return float(min(1.0, 2 * q0, 2 * (1 - q1)))


# -- multiplicity -----------------------------------------------------------------------------------
def holm(p_values: Sequence[float]) -> tuple[float, ...]:
    """Holm's step-down adjusted p-values (same order as given; NaNs stay NaN and do not count
    towards the family size)."""
    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    m = len(idx)
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: (p_values[i], i))):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return tuple(out)


def benjamini_hochberg(p_values: Sequence[float]) -> tuple[float, ...]:
    """Benjamini-Hochberg adjusted p-values (same order; NaNs stay NaN and are not counted)."""
    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    m = len(idx)
    out = [math.nan] * len(p_values)
    running = 1.0
    for k, i in reversed(list(enumerate(sorted(idx, key=lambda i: (p_values[i], i)), start=1))):
        running = min(running, m * p_values[i] / k)
        out[i] = min(1.0, running)
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class Adjustment:
    """A family's adjustment: ``p_adjusted`` and the ``levels`` each comparison's interval is
    computed at (same order as the p-values given)."""

    method: str
    family_size: int
    p_adjusted: tuple[float, ...]
    levels: tuple[float, ...]


def adjust(p_values: Sequence[float], *, level: float = DEFAULT_LEVEL, method: str = "holm") -> Adjustment:
    """Adjust a family's p-values and give each comparison the interval level that matches
    the adjusted test (see the module docstring). ``level``: the family's level (1 - alpha)."""
    if method not in ADJUSTMENTS:
        raise ConfigError(f"adjustment method must be one of {', '.join(ADJUSTMENTS)}, got {method!r}")
    if not 0 < level < 1:
        raise ConfigError(f"level must be in (0, 1), got {level!r}")
    alpha = 1 - level
    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    m = len(idx)
    levels = [level] * len(p_values)
    if method == "none" or m <= 1:
        return Adjustment(method=method, family_size=m, p_adjusted=tuple(p_values), levels=tuple(levels))
    if method == "holm":
        stopped_at: int | None = None
        for rank, i in enumerate(sorted(idx, key=lambda i: (p_values[i], i))):
            if stopped_at is None and not p_values[i] < alpha / (m - rank):
                stopped_at = rank  # Holm stops here: this and every later test use this level
            levels[i] = 1 - alpha / (m - (rank if stopped_at is None else stopped_at))
        return Adjustment(method=method, family_size=m, p_adjusted=holm(p_values), levels=tuple(levels))
    p_adj = benjamini_hochberg(p_values)
    r = sum(1 for i in idx if p_adj[i] < alpha)
    fcr = 1 - max(r, 1) * alpha / m
    for i in idx:
        levels[i] = fcr
    return Adjustment(method=method, family_size=m, p_adjusted=p_adj, levels=tuple(levels))


# -- results ----------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class PairedComparison:
    """A against B on one metric, over the tasks both were run on.

    ``mean_diff`` is mean(A - B) over tasks; ``[lo, hi]`` its percentile bootstrap interval at
    ``adjusted_level`` (the family's ``level`` after the ``method`` adjustment over
    ``family_size`` comparisons); ``verdict`` is read from that interval (see
    :data:`VERDICT_DEFINITIONS`). ``n_differ``: tasks whose paired difference is not 0.
    """

    a: str
    b: str
    metric: str
    n_tasks: int
    n_differ: int
    mean_a: float
    mean_b: float
    mean_diff: float
    lo: float
    hi: float
    level: float
    adjusted_level: float
    p_value: float
    p_adjusted: float
    method: str
    family_size: int
    verdict: str
    equivalence_margin: float | None
    higher_is_better: bool
    n_resamples: int
    seed: int
    task_ids: tuple[str, ...] = field(default=(), repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The fields as a flat dict (``task_ids`` joined with commas)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["task_ids"] = ",".join(self.task_ids)
        return d

    def line(self) -> str:
        """One line: metric, tasks, tasks that differ, mean diff, interval, level, verdict."""
        adj = f", {self.method} over {self.family_size}" if self.method != "none" and self.family_size > 1 else ""
        need = min_tasks_for(self.adjusted_level)
        why = f" ({self.n_tasks} tasks; a verdict at this level needs {need})" if self.n_tasks < need else ""
        return (
            f"{self.metric}: n_tasks={self.n_tasks} n_differ={self.n_differ} "
            f"mean_diff={self.mean_diff:+.4g} CI=[{self.lo:+.4g}, {self.hi:+.4g}] "
            f"level={self.adjusted_level:.4g} (family {self.level:g}{adj}) -> {self.verdict}{why}"
        )


def compare_family(
    pairs: Sequence[TaskPairs],
    *,
    level: float = DEFAULT_LEVEL,
    method: str = "holm",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[PairedComparison, ...]:
    """Compare every :class:`TaskPairs` of a family, adjusted together (``method``: ``holm``,
    ``bh`` or ``none``; ``level``: the family's level). Each comparison resamples its own tasks
    with a generator seeded by ``seed``, so the result does not depend on the family's order."""
    import numpy as np

    if not isinstance(n_resamples, int) or n_resamples < 1:
        raise ConfigError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    boots = [bootstrap_means(p.diffs, n_resamples=n_resamples, seed=seed) for p in pairs]
    # a comparison with fewer than 2 tasks has no p-value and does not count in the family
    pvals = [bootstrap_p_value(bm) if len(p.task_ids) >= 2 else math.nan for p, bm in zip(pairs, boots)]
    adj = adjust(pvals, level=level, method=method)
    out = []
    for p, bm, pv, pa, lev in zip(pairs, boots, pvals, adj.p_adjusted, adj.levels):
        d = np.asarray(p.diffs, dtype=float)
        n = len(d)
        lo, hi = percentile_interval(bm, lev)
        out.append(
            PairedComparison(
                a=p.a,
                b=p.b,
                metric=p.metric,
                n_tasks=n,
                n_differ=int(np.count_nonzero(d)),
                mean_a=float(np.mean(p.values_a)) if n else math.nan,
                mean_b=float(np.mean(p.values_b)) if n else math.nan,
                mean_diff=float(d.mean()) if n else math.nan,
                lo=lo,
                hi=hi,
                level=level,
                adjusted_level=lev,
                p_value=pv,
                p_adjusted=pa,
                method=adj.method,
                family_size=adj.family_size,
                verdict=verdict(lo, hi, higher_is_better=p.higher_is_better, margin=p.margin, n_tasks=n, level=lev),
                equivalence_margin=p.margin,
                higher_is_better=p.higher_is_better,
                n_resamples=n_resamples,
                seed=seed,
                task_ids=p.task_ids,
            )
        )
    return tuple(out)


def comparisons_frame(comparisons: Sequence[PairedComparison]) -> Any:
    """The comparisons as a DataFrame, one row each (the :class:`PairedComparison` fields)."""
    import pandas as pd

    cols = list(PairedComparison.__dataclass_fields__)
    return pd.DataFrame([c.as_dict() for c in comparisons], columns=cols)


# -- rank correlation and a mean's interval (the closed-loop report's statistics) ---------------
@dataclass(frozen=True)
class MeanInterval:
    """A mean over tasks and its task-bootstrap percentile interval (NaN without values)."""

    mean: float
    lo: float
    hi: float

    def __iter__(self) -> Any:
        return iter((self.mean, self.lo, self.hi))


def mean_interval(values: Any, n_boot: int, seed: int, level: float = DEFAULT_LEVEL) -> MeanInterval:
    """The mean of ``values`` (one per task) and its bootstrap interval (:func:`bootstrap_means`)."""
    vals = [float(v) for v in values]
    if not vals:
        return MeanInterval(math.nan, math.nan, math.nan)
    lo, hi = percentile_interval(bootstrap_means(vals, n_resamples=n_boot, seed=seed), level)
    return MeanInterval(sum(vals) / len(vals), lo, hi)


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's rho, its task-bootstrap interval and the resamples that gave a rho."""

    rho: float
    lo: float
    hi: float
    n_resamples: int

    def __iter__(self) -> Any:
        return iter((self.rho, self.lo, self.hi, self.n_resamples))


def _avg_ranks(x: Any) -> Any:
    import numpy as np

    a = np.asarray(x, dtype=float)
    order = np.argsort(a, kind="mergesort")
    _, inv, counts = np.unique(a[order], return_inverse=True, return_counts=True)
    avg = np.cumsum(counts) - (counts - 1) / 2.0
    r = np.empty(len(a))
    r[order] = avg[inv]
    return r


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant
    or there are fewer than 3 points."""
    import numpy as np

    if len(x) != len(y):
        raise ConfigError(f"spearman: x and y must have the same length, got {len(x)} and {len(y)}")
    if len(x) < 3:
        return math.nan
    rx, ry = _avg_ranks(x), _avg_ranks(y)
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return math.nan
    return float(np.mean((rx - rx.mean()) * (ry - ry.mean())) / (sx * sy))


def _batch_ranks(a: Any) -> Any:
    """Average ranks (1-based, ties averaged) along the last axis of a 2-D array."""
    import numpy as np

    b, n = a.shape
    order = np.argsort(a, axis=1, kind="mergesort")
    srt = np.take_along_axis(a, order, axis=1)
    pos = np.broadcast_to(np.arange(n), (b, n))
    new_group = np.ones((b, n), dtype=bool)
    new_group[:, 1:] = srt[:, 1:] != srt[:, :-1]
    start = np.maximum.accumulate(np.where(new_group, pos, 0), axis=1)
    end_group = np.ones((b, n), dtype=bool)
    end_group[:, :-1] = new_group[:, 1:]
    end = np.flip(np.minimum.accumulate(np.flip(np.where(end_group, pos, n), axis=1), axis=1), axis=1)
    ranks = np.empty((b, n))
    np.put_along_axis(ranks, order, (start + end) / 2.0 + 1.0, axis=1)
    return ranks


def spearman_rows(x: Any, y: Any) -> Any:
    """Spearman's rho per row of two 2-D arrays (NaN where a row of either is constant)."""
    import numpy as np

    rx, ry = _batch_ranks(x), _batch_ranks(y)
    rx = rx - rx.mean(axis=1, keepdims=True)
    ry = ry - ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def spearman_interval(df: Any, n_boot: int, seed: int, level: float = DEFAULT_LEVEL) -> RankCorrelation:
    """Spearman's rho of columns ``x`` and ``y`` over the rows of ``df`` and its task-bootstrap
    interval (``task_id``s drawn with replacement, every row of a drawn task kept): a
    :class:`RankCorrelation`. Resamples with a constant side are left out (``n_resamples``
    counts those that gave a rho)."""
    import numpy as np

    rho = spearman(df["x"].tolist(), df["y"].tolist())
    tasks = sorted(set(df["task_id"]))
    if math.isnan(rho) or len(tasks) < 3:
        return RankCorrelation(rho, math.nan, math.nan, 0)
    xy = df[["x", "y"]].to_numpy(dtype=float)
    tid = df["task_id"].to_numpy()
    rows_of = [np.flatnonzero(tid == t) for t in tasks]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(tasks), size=(n_boot, len(tasks)))
    if len({len(r) for r in rows_of}) == 1:
        # every task has the same number of rows: all resamples at once
        idx = np.stack(rows_of)[draws].reshape(n_boot, -1)
        r = spearman_rows(xy[idx, 0], xy[idx, 1])
        vals = r[~np.isnan(r)]
    else:
        out = []
        for d in draws:
            m = xy[np.concatenate([rows_of[i] for i in d])]
            out.append(spearman(m[:, 0], m[:, 1]))
        vals = np.asarray([v for v in out if not math.isnan(v)])
    if not len(vals):
        return RankCorrelation(rho, math.nan, math.nan, 0)
    a = (1 - level) / 2
    lo, hi = np.quantile(vals, [a, 1 - a])
    return RankCorrelation(rho, float(lo), float(hi), int(len(vals)))
