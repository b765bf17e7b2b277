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

**Interval: the test's own.** The interval printed is the inversion of the test that gave the
p-value, so the verdict read from it and the test agree. When the exact sign-flip test decides,
:func:`sign_flip_interval` (the shifts of the differing tasks it does not reject, scaled to the mean
over all tasks, ties exact zeros; unbounded when too few differ to ever reject). Otherwise a seeded
percentile bootstrap of the mean difference over tasks (``scipy.stats.bootstrap``): each resample
draws ``n`` of the ``n`` tasks with replacement (:func:`bootstrap_means`); the interval at level
``L`` is the ``(1-L)/2`` and ``(1+L)/2`` quantiles (numpy's ``linear`` rule) of the resampled means.

**p-value** (:func:`paired_p_value`). Only the tasks whose paired difference is not 0 carry
evidence. When at most :data:`EXACT_MAX_DIFFER` tasks differ, an exact sign-flip
(permutation) test over them decides (``scipy.stats.permutation_test``: every one of the
``2**k`` sign patterns; eight tasks that all moved the same way give ``p = 2/256``, never 0).
With more, the bootstrap interval's inversion (:func:`bootstrap_p_value`): the smallest
``alpha`` whose ``1-alpha`` interval excludes 0. A bootstrap p of 0 only says "below the
resolution of ``B`` resamples" and is printed ``< 1/B``.

**A family of comparisons** (every comparison a report or a ``compare`` call makes at once) is
adjusted together (:func:`adjust`, ``statsmodels.stats.multitest.multipletests``): ``holm``
(default; family-wise error), ``bh`` (Benjamini-Hochberg, false discovery rate) or ``none``.
A comparison in which no task differs cannot reject anything and is not counted in the family
(offline summarizer cost, fallbacks that never happened: padding the family with them would
only weaken the others). The adjusted p-values are reported, and
each comparison's interval is recomputed at its *adjusted level* (Holm: ``1 - alpha/(m-k+1)``
for the comparison ranked ``k`` by p-value, frozen at the first rank Holm fails to reject; BH:
the false-coverage-rate level ``1 - R*alpha/m`` with ``R`` rejections, ``1 - alpha/m`` when
there is none), so that an interval excluding 0 is exactly a rejection of the adjusted test.

**Verdicts** are read from the adjusted interval, never from the mean (:func:`verdict`):
"better"/"worse" when it lies on one side of 0 (the adjusted test then rejects, and at least
:func:`min_tasks_for` tasks at the *adjusted* level differ: both are checked too); the words are
defined once, in :data:`VERDICT_DEFINITIONS`.
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
    "EXACT_MAX_DIFFER",
    "sign_flip_p_value",
    "sign_flip_interval",
    "paired_p_value",
    "PairedTest",
    "format_p",
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
    BETTER: "the whole adjusted interval (the inversion of the test that gave the p-value: the exact sign-flip "
    "test's when few tasks differ) lies on the side of 0 where A is better than B (above 0 for a larger-is-better "
    "metric, below 0 for a smaller-is-better one); the adjusted p-value is then below alpha",
    WORSE: "the whole adjusted interval lies on the side of 0 where A is worse than B; the adjusted p-value is "
    "then below alpha",
    INCONCLUSIVE: "anything else: the adjusted interval contains 0 (and is not within ±d); with too few differing "
    "tasks for the adjusted level (see min_tasks_for: 6 at 0.95) it is unbounded (an equivalence verdict counts "
    "all paired tasks)",
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
    n_differ: int | None = None,
    p_adjusted: float | None = None,
    level: float = DEFAULT_LEVEL,
    family_level: float | None = None,
) -> str:
    """The verdict on A against B from the (adjusted) interval ``[lo, hi]`` of mean(A - B).

    ``higher_is_better``: the metric's direction. ``margin``: the equivalence margin d (same
    unit as the metric; ``None`` or 0: no equivalence verdict). ``n_tasks``: tasks paired (an
    equivalence verdict needs :func:`min_tasks_for` ``level`` of them). ``n_differ``: tasks whose
    difference is not 0 (better/worse needs that many of *them*; default ``n_tasks``).
    ``p_adjusted``: the adjusted p-value (better/worse needs it below the family's alpha,
    ``1 - family_level`` (default ``level``), i.e. the adjusted test rejects; ``None``: not
    checked). ``level``: the interval's (adjusted) level. ``None`` counts are not checked.
    See :data:`VERDICT_DEFINITIONS`.
    """
    need = min_tasks_for(level)
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    if margin is not None and margin > 0 and -margin <= lo and hi <= margin:
        return INCONCLUSIVE if n_tasks is not None and n_tasks < need else equivalent_within(margin)
    differ = n_differ if n_differ is not None else n_tasks
    if differ is not None and differ < need:
        return INCONCLUSIVE
    alpha = 1 - (level if family_level is None else family_level)
    if p_adjusted is not None and not math.isnan(p_adjusted) and not p_adjusted < alpha:
        return INCONCLUSIVE
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
                f"TaskPairs: task_ids, values_a and values_b must have one entry per task, got {len(self.task_ids)}, "
                f"{len(self.values_a)}, {len(self.values_b)}"
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
        raise ConfigError(
            f"task_pairs: the table has no column(s) {', '.join(missing)}; it has {', '.join(map(str, table.columns))}"
        )
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
    with replacement (``scipy.stats.bootstrap``'s distribution with
    ``numpy.random.default_rng(seed)``: the indexes are
    ``rng.integers(0, n, size=(n_resamples, n))``); a numpy array, empty for no values."""
    import warnings

    import numpy as np
    from scipy import stats as sps

    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return np.empty(0)
    if n == 1:  # scipy refuses one value; every resample of one value is that value
        return np.full(n_resamples, x[0])
    with warnings.catch_warnings():
        # identical values make scipy warn that the interval is degenerate: the distribution is still right
        warnings.simplefilter("ignore", category=sps.DegenerateDataWarning)
        res = sps.bootstrap(
            (x,),
            np.mean,
            n_resamples=n_resamples,
            method="percentile",
            vectorized=True,
            axis=-1,
            rng=np.random.default_rng(seed),
        )
    return np.asarray(res.bootstrap_distribution, dtype=float)


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


EXACT_MAX_DIFFER = 16
"""Up to this many differing tasks the exact sign-flip test gives the p-value (``2**16`` sign
patterns at most, a few milliseconds); beyond it the bootstrap's resolution is fine."""


def sign_flip_p_value(diffs: Sequence[float]) -> float:
    """Exact two-sided sign-flip (permutation) p-value of "the paired differences are symmetric
    about 0", over every sign pattern of the non-zero differences (``scipy.stats.permutation_test``,
    statistic: the mean). 1 when no difference is non-zero; NaN for no values."""
    import numpy as np
    from scipy import stats as sps

    d = np.asarray(diffs, dtype=float)
    if len(d) == 0:
        return math.nan
    d = d[d != 0]
    if len(d) <= 1:  # both sign patterns of one difference are equally extreme (scipy wants two)
        return 1.0
    res = sps.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="two-sided", vectorized=True, axis=-1
    )
    return float(min(1.0, res.pvalue))


_SIGNS: dict[int, Any] = {}


def _sign_patterns(k: int) -> Any:
    """Every one of the ``2**k`` sign patterns as a ``(2**k, k)`` array of +-1 (cached per ``k``)."""
    import numpy as np

    if k not in _SIGNS:
        bits = (np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1
        _SIGNS[k] = 1.0 - 2.0 * bits
    return _SIGNS[k]


def sign_flip_interval(diffs: Sequence[float] | Any, level: float) -> tuple[float, float]:
    """The interval of mean paired difference that inverts the exact sign-flip test of
    :func:`sign_flip_p_value` at ``level``: every shift ``delta`` of the differing tasks' values
    that the test does not reject (``p >= 1 - level``), scaled to the mean over all tasks, the tied
    ones counted as the exact zeros they are. So it excludes 0 exactly when the test rejects at
    ``alpha = 1 - level``, and it is infinite when no outcome of that few differing tasks could
    reject at that level (``2 / 2**k >= alpha``). NaN for no values.

    How: for the ``k`` non-zero differences ``x`` and a sign pattern ``s``, the shifted test counts
    ``s`` when ``|sum s(x - delta)| >= |sum (x - delta)|``, a quadratic in ``delta`` with a negative
    leading term (two patterns, all + and all -, count everywhere), so each pattern counts on one
    closed interval with known ends; the accepted shifts are where at least ``alpha * 2**k`` patterns
    count. Their hull is returned (accepted shifts need not be contiguous; the hull is never
    narrower)."""
    import numpy as np

    if not 0 < level < 1:
        raise ConfigError(f"level must be in (0, 1), got {level!r}")
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    if n == 0:
        return (math.nan, math.nan)
    x = d[d != 0]
    k = len(x)
    if k == 0:
        return (0.0, 0.0)
    alpha = 1 - level
    need = alpha * 2**k - 2  # patterns besides all + and all - that must count for p >= alpha
    if need <= 0:
        return (-math.inf, math.inf)
    signs = _sign_patterns(k)
    a = signs @ x
    b = signs.sum(axis=1)
    keep = np.abs(b) != k
    a, b = a[keep], b[keep]
    total = float(x.sum())
    # the roots of (a - b*delta)^2 = (total - k*delta)^2
    r1 = (a - total) / (b - k)
    r2 = (a + total) / (b + k)
    starts = np.sort(np.minimum(r1, r2))
    ends = np.sort(np.maximum(r1, r2))
    # Ties at a root count (as scipy's comparison does, with a tolerance): coverage is counted on the
    # ends widened by eps; the ends reported are the roots themselves.
    eps = 1e-12 * (float(np.abs(x).max()) + 1.0)
    wide_s, wide_e = starts - eps, ends + eps
    c = math.ceil(need - 1e-9)
    cover_at_start = np.searchsorted(wide_s, wide_s, "right") - np.searchsorted(wide_e, wide_s, "left")
    cover_at_end = np.searchsorted(wide_s, wide_e, "right") - np.searchsorted(wide_e, wide_e, "left")
    lo = float(starts[cover_at_start >= c].min())
    hi = float(ends[cover_at_end >= c].max())
    return (lo * k / n, hi * k / n)


@dataclass(frozen=True, kw_only=True)
class PairedTest:
    """A paired test's p-value and how it was computed: ``method`` ``sign-flip`` (exact) or
    ``bootstrap``; ``n_differ`` tasks whose difference is not 0; ``n_resamples`` the bootstrap's."""

    p_value: float
    method: str
    n_differ: int
    n_resamples: int


def paired_p_value(diffs: Sequence[float], means: Any, *, exact_max_differ: int = EXACT_MAX_DIFFER) -> PairedTest:
    """The p-value of "mean difference = 0" (see the module docstring): the exact sign-flip test
    when at most ``exact_max_differ`` of ``diffs`` are not 0, else :func:`bootstrap_p_value` of
    the bootstrap ``means``. NaN with fewer than 2 tasks."""
    n_differ = sum(1 for x in diffs if x != 0)
    if len(diffs) < 2:
        return PairedTest(p_value=math.nan, method="none", n_differ=n_differ, n_resamples=len(means))
    if n_differ <= exact_max_differ:
        p = sign_flip_p_value(diffs)
        return PairedTest(p_value=p, method="sign-flip", n_differ=n_differ, n_resamples=len(means))
    return PairedTest(p_value=bootstrap_p_value(means), method="bootstrap", n_differ=n_differ, n_resamples=len(means))


def format_p(p: float, *, method: str = "bootstrap", n_resamples: int = DEFAULT_RESAMPLES) -> str:
    """A p-value as printed: ``0.0078``; a bootstrap p of 0 as ``< 1/2000`` (all resamples on one
    side says only that p is below the bootstrap's resolution); NaN as ``n/a``."""
    if math.isnan(p):
        return "n/a"
    if p == 0 and method == "bootstrap":
        return f"< 1/{n_resamples}"
    return f"{p:.2g}" if p < 0.001 else f"{p:.4f}".rstrip("0").rstrip(".") if p < 1 else "1"


# -- multiplicity -----------------------------------------------------------------------------------
def _multipletests(p_values: Sequence[float], method: str) -> tuple[float, ...]:
    """Adjusted p-values by ``statsmodels``' ``multipletests`` (NaNs stay NaN and do not count
    towards the family size)."""
    from statsmodels.stats.multitest import multipletests

    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    out = [math.nan] * len(p_values)
    if idx:
        adjusted = multipletests([p_values[i] for i in idx], method=method)[1]
        for i, v in zip(idx, adjusted):
            out[i] = float(v)
    return tuple(out)


def holm(p_values: Sequence[float]) -> tuple[float, ...]:
    """Holm's step-down adjusted p-values (same order as given; NaNs stay NaN and do not count
    towards the family size)."""
    return _multipletests(p_values, "holm")


def benjamini_hochberg(p_values: Sequence[float]) -> tuple[float, ...]:
    """Benjamini-Hochberg adjusted p-values (same order; NaNs stay NaN and are not counted)."""
    return _multipletests(p_values, "fdr_bh")


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

    ``mean_diff`` is mean(A - B) over tasks; ``[lo, hi]`` its interval at ``adjusted_level`` (the
    family's ``level`` after the ``method`` adjustment over ``family_size`` comparisons), the
    inversion of the test that gave ``p_value`` (``interval_method``: ``sign-flip inversion`` when
    the exact sign-flip test decided, :func:`sign_flip_interval`; else ``bootstrap percentile``);
    ``verdict`` is read from that interval (see :data:`VERDICT_DEFINITIONS`). ``n_differ``: tasks
    whose paired difference is not 0.
    ``p_method``: how ``p_value`` was computed (``sign-flip``: exact, few tasks differ;
    ``bootstrap``; ``none``: fewer than 2 tasks). ``in_family``: counted in the adjustment's
    family (``False`` when no task differs: such a comparison cannot reject anything).
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
    p_method: str = "bootstrap"
    interval_method: str = "bootstrap percentile"
    in_family: bool = True
    task_ids: tuple[str, ...] = field(default=(), repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The fields as a flat dict (``task_ids`` joined with commas)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["task_ids"] = ",".join(self.task_ids)
        return d

    def line(self) -> str:
        """One line: metric, tasks, tasks that differ, mean diff, interval, level, p, verdict."""
        adj = f", {self.method} over {self.family_size}" if self.method != "none" and self.family_size > 1 else ""
        need = min_tasks_for(self.adjusted_level)
        if not self.in_family:
            why = " (no task differs: left out of the family)"
        elif self.n_differ < need and not self.verdict.startswith("equivalent"):
            why = f" ({self.n_differ} tasks differ; a verdict at this level needs {need})"
        else:
            why = ""
        p = format_p(self.p_value, method=self.p_method, n_resamples=self.n_resamples)
        pa = format_p(self.p_adjusted, method=self.p_method, n_resamples=self.n_resamples)
        test = ""
        if self.p_method != "none":
            test = f" p={p} ({self.p_method})" + (f" p_adj={pa}" if adj and self.in_family else "")
        return (
            f"{self.metric}: n_tasks={self.n_tasks} n_differ={self.n_differ} "
            f"mean_diff={self.mean_diff:+.4g} CI=[{self.lo:+.4g}, {self.hi:+.4g}] "
            f"level={self.adjusted_level:.4g} (family {self.level:g}{adj}){test} -> {self.verdict}{why}"
        )


def compare_family(
    pairs: Sequence[TaskPairs],
    *,
    level: float = DEFAULT_LEVEL,
    method: str = "holm",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    exact_max_differ: int = EXACT_MAX_DIFFER,
) -> tuple[PairedComparison, ...]:
    """Compare every :class:`TaskPairs` of a family, adjusted together (``method``: ``holm``,
    ``bh`` or ``none``; ``level``: the family's level). Each comparison resamples its own tasks
    with a generator seeded by ``seed``, so the result does not depend on the family's order.
    ``exact_max_differ``: up to this many differing tasks the exact sign-flip test gives the
    p-value (:func:`paired_p_value`). A comparison in which no task differs is left out of the
    family (``in_family=False``)."""
    import numpy as np

    if not isinstance(n_resamples, int) or n_resamples < 1:
        raise ConfigError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    boots = [bootstrap_means(p.diffs, n_resamples=n_resamples, seed=seed) for p in pairs]
    tests = [paired_p_value(p.diffs, bm, exact_max_differ=exact_max_differ) for p, bm in zip(pairs, boots)]
    # a comparison with fewer than 2 tasks, or none that differs, has no p-value in the family
    in_family = [not math.isnan(t.p_value) and t.n_differ > 0 for t in tests]
    adj = adjust([t.p_value if f else math.nan for t, f in zip(tests, in_family)], level=level, method=method)
    out = []
    for p, bm, t, fam, pa, lev in zip(pairs, boots, tests, in_family, adj.p_adjusted, adj.levels):
        d = np.asarray(p.diffs, dtype=float)
        n = len(d)
        # The interval printed is the one the verdict is read from: the inversion of the test that
        # gave the p-value (the exact sign-flip test's when it decided, else the bootstrap's, whose
        # p-value is that interval's inversion), so one excludes 0 exactly when the other rejects.
        if t.method == "sign-flip":
            lo, hi = sign_flip_interval(d, lev)
            interval_method = "sign-flip inversion"
        else:
            lo, hi = percentile_interval(bm, lev)
            interval_method = "bootstrap percentile"
            if 0 < t.n_differ < min_tasks_for(lev):
                # too few differing tasks for any verdict at this level (the guard): the bootstrap
                # interval would exclude 0 beside "inconclusive", so none is claimed
                lo, hi = -math.inf, math.inf
                interval_method = "none (too few tasks differ)"
        p_adj = pa if fam else t.p_value
        out.append(
            PairedComparison(
                a=p.a,
                b=p.b,
                metric=p.metric,
                n_tasks=n,
                n_differ=t.n_differ,
                mean_a=float(np.mean(p.values_a)) if n else math.nan,
                mean_b=float(np.mean(p.values_b)) if n else math.nan,
                mean_diff=float(d.mean()) if n else math.nan,
                lo=lo,
                hi=hi,
                level=level,
                adjusted_level=lev,
                p_value=t.p_value,
                p_adjusted=p_adj,
                method=adj.method,
                family_size=adj.family_size,
                verdict=verdict(
                    lo,
                    hi,
                    higher_is_better=p.higher_is_better,
                    margin=p.margin,
                    n_tasks=n,
                    n_differ=t.n_differ,
                    p_adjusted=p_adj,
                    level=lev,
                    family_level=level,
                ),
                equivalence_margin=p.margin,
                higher_is_better=p.higher_is_better,
                n_resamples=n_resamples,
                seed=seed,
                p_method=t.method,
                interval_method=interval_method,
                in_family=fam,
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


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (``scipy.stats.spearmanr``, average ranks for ties); NaN when
    either side is constant or there are fewer than 3 points."""
    import warnings

    from scipy import stats as sps

    if len(x) != len(y):
        raise ConfigError(f"spearman: x and y must have the same length, got {len(x)} and {len(y)}")
    if len(x) < 3 or len(set(map(float, x))) < 2 or len(set(map(float, y))) < 2:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(sps.spearmanr(x, y).statistic)


def _batch_ranks(a: Any) -> Any:
    """Average ranks (1-based, ties averaged) along the last axis of a 2-D array (``scipy.stats.rankdata``)."""
    from scipy import stats as sps

    return sps.rankdata(a, axis=1)


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
