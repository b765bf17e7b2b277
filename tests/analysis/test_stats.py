"""Task-level paired statistics on small fixed tables, each number checked against an independent
computation (a bootstrap written out here with numpy, Holm and BH adjusted by hand), so that the
faults a statistics layer hides survive no test: resampling n-1 tasks, a 99 % interval reported
as 95 %, a tenfold equivalence band, a verdict read from the mean, a missing or wrong Holm step,
deterministic repeats counted as tasks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from h9eval.analysis import stats as S
from h9eval.core.errors import ConfigError

DIFFS = (0.12, -0.03, 0.05, 0.20, 0.07, -0.01, 0.09, 0.04, 0.15, 0.02)


def _pairs(
    diffs: tuple[float, ...], *, higher_is_better: bool = True, margin: float | None = None, name: str = "m"
) -> S.TaskPairs:
    n = len(diffs)
    return S.TaskPairs(
        a="A",
        b="B",
        metric=name,
        task_ids=tuple(f"t{i:02d}" for i in range(n)),
        values_a=tuple(0.5 + d for d in diffs),
        values_b=(0.5,) * n,
        higher_is_better=higher_is_better,
        margin=margin,
    )


def _hand_bootstrap(x: np.ndarray, r: int, seed: int) -> np.ndarray:
    """The bootstrap as the docs describe it, written independently: r resamples of n of n."""
    rng = np.random.default_rng(seed)
    out = np.empty(r)
    idx = rng.integers(0, len(x), size=(r, len(x)))
    for k in range(r):
        out[k] = sum(x[j] for j in idx[k]) / len(x)
    return out


# -- the bootstrap ------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [0.95, 0.99, 0.9])
def test_interval_matches_an_independent_bootstrap_at_its_stated_level(level: float) -> None:
    x = np.array(DIFFS)
    (c,) = S.compare_family([_pairs(DIFFS)], level=level, method="none", n_resamples=3000, seed=11, exact_max_differ=0)
    assert c.p_method == "bootstrap" and c.interval_method == "bootstrap percentile"
    ref = _hand_bootstrap(x, 3000, 11)
    lo, hi = np.percentile(ref, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    assert (c.lo, c.hi) == pytest.approx((lo, hi), abs=1e-12)
    assert c.level == c.adjusted_level == level
    assert c.mean_diff == pytest.approx(x.mean()) and c.n_tasks == 10 and c.n_differ == 10


def test_a_99_interval_is_wider_than_the_95_one_and_labelled_99() -> None:
    (c95,) = S.compare_family([_pairs(DIFFS)], level=0.95, method="none", seed=3, exact_max_differ=0)
    (c99,) = S.compare_family([_pairs(DIFFS)], level=0.99, method="none", seed=3, exact_max_differ=0)
    assert c99.lo < c95.lo and c99.hi > c95.hi
    assert (c95.adjusted_level, c99.adjusted_level) == (0.95, 0.99)
    assert "level=0.99 " in c99.line() and "level=0.95 " in c95.line()


def test_each_resample_draws_exactly_n_tasks() -> None:
    # one 1 among n zeros: a resample of n draws has a mean that is a multiple of 1/n; with
    # n-1 draws it would be a multiple of 1/(n-1)
    n = 7
    means = S.bootstrap_means([0.0] * (n - 1) + [1.0], n_resamples=500, seed=0)
    k = means * n
    assert np.allclose(k, np.round(k)) and len(means) == 500
    assert not np.allclose(means * (n - 1), np.round(means * (n - 1)))


def test_bootstrap_variance_of_the_mean_is_the_analytic_one() -> None:
    # resampling n of n with replacement: Var(mean*) = population variance / n (not / (n-1))
    x = np.array([0.0, 1.0, 3.0, 4.0, 7.0])
    means = S.bootstrap_means(x, n_resamples=40000, seed=5)
    assert np.var(means) == pytest.approx(np.var(x) / len(x), rel=0.03)
    assert np.mean(means) == pytest.approx(x.mean(), abs=0.02)


def test_same_seed_same_numbers_and_a_seed_changes_them() -> None:
    a = S.compare_family([_pairs(DIFFS)], seed=1, exact_max_differ=0)
    b = S.compare_family([_pairs(DIFFS)], seed=1, exact_max_differ=0)
    c = S.compare_family([_pairs(DIFFS)], seed=2, exact_max_differ=0)
    assert a == b and (a[0].lo, a[0].hi) != (c[0].lo, c[0].hi)


def test_p_value_is_the_inversion_of_the_interval() -> None:
    rng = np.random.default_rng(0)
    for trial in range(20):
        x = rng.normal(0.3 * (trial % 4), 1.0, size=12)
        means = S.bootstrap_means(x, n_resamples=999, seed=trial)
        p = S.bootstrap_p_value(means)
        for level in (0.8, 0.9, 0.95, 0.99, 0.999):
            lo, hi = S.percentile_interval(means, level)
            assert (lo > 0 or hi < 0) == (p < 1 - level), (trial, level, p, lo, hi)
    assert S.bootstrap_p_value(np.zeros(50)) == 1.0
    assert S.bootstrap_p_value(np.full(50, 0.2)) == 0.0


# -- verdicts -----------------------------------------------------------------------------------
def test_verdict_words_are_read_from_the_interval() -> None:
    v = S.verdict
    assert v(0.01, 0.03) == "better" and v(-0.03, -0.01) == "worse" and v(-0.01, 0.03) == "inconclusive"
    assert v(0.01, 0.03, higher_is_better=False) == "worse" and v(-3.0, -1.0, higher_is_better=False) == "better"
    assert v(-0.004, 0.004, margin=0.005) == "equivalent within ±0.005"
    assert v(0.001, 0.004, margin=0.005) == "equivalent within ±0.005"  # detectable, but below d
    # a tenfold band would call these equivalent
    assert v(-0.01, 0.01, margin=0.005) == "inconclusive"
    assert v(0.006, 0.04, margin=0.005) == "better"
    assert v(-0.004, 0.004) == "inconclusive"  # no margin, no equivalence
    assert set(S.VERDICT_DEFINITIONS) == {"better", "worse", "inconclusive", "equivalent within ±d"}


def test_a_positive_mean_with_an_interval_spanning_zero_is_inconclusive() -> None:
    diffs = (0.30, -0.25, 0.28, -0.22, 0.05, -0.10, 0.20, -0.15)  # mean +0.01, wide interval
    (c,) = S.compare_family([_pairs(diffs)], method="none", seed=0)
    assert c.mean_diff > 0 and c.lo < 0 < c.hi and c.verdict == "inconclusive"
    (d,) = S.compare_family([_pairs(DIFFS)], method="none", seed=0)
    assert d.lo > 0 and d.verdict == "better"
    (w,) = S.compare_family([_pairs(DIFFS, higher_is_better=False)], method="none", seed=0)
    assert w.verdict == "worse"


def test_equivalence_uses_the_stated_margin() -> None:
    small = tuple(0.001 * s for s in (1, -1, 2, -2, 1, 0, -1, 1, 2, -1))
    (e,) = S.compare_family([_pairs(small, margin=0.005)], method="none")
    assert e.verdict == "equivalent within ±0.005" and e.equivalence_margin == 0.005
    wide = tuple(0.02 * s for s in (1, -1, 1, -1, 1, -1, 1, -1, 0.5, -0.5))
    (i,) = S.compare_family([_pairs(wide, margin=0.005)], method="none")
    assert -0.05 < i.lo and i.hi < 0.05 and not (-0.005 <= i.lo and i.hi <= 0.005)
    assert i.verdict == "inconclusive"


def test_too_few_tasks_give_no_verdict_however_consistent() -> None:
    assert (S.min_tasks_for(0.95), S.min_tasks_for(0.99), S.min_tasks_for(0.9)) == (6, 8, 5)
    (c,) = S.compare_family([_pairs((0.1, 0.2, 0.15))], method="none")
    # three tasks that all moved up: no outcome of three could reject at 0.95, and the interval says so
    assert (c.lo, c.hi) == (-math.inf, math.inf) and c.verdict == "inconclusive" and "needs 6" in c.line()
    (d,) = S.compare_family([_pairs((0.1, 0.2, 0.15, 0.12, 0.3, 0.11))], method="none")
    assert d.verdict == "better"


# -- multiplicity -------------------------------------------------------------------------------
P = (0.01, 0.04, 0.03, 0.005)


def test_holm_and_bh_adjusted_p_values_by_hand() -> None:
    assert S.holm(P) == pytest.approx((0.03, 0.06, 0.06, 0.02))
    assert S.benjamini_hochberg(P) == pytest.approx((0.02, 0.04, 0.04, 0.02))
    h = S.holm((0.01, math.nan, 0.02))
    assert h[0] == pytest.approx(0.02) and math.isnan(h[1]) and h[2] == pytest.approx(0.02)


def test_holm_levels_step_down_and_freeze_at_the_first_acceptance() -> None:
    a = S.adjust(P, level=0.95, method="holm")
    # ranks: 0.005 (alpha/4, rejected), 0.01 (alpha/3, rejected), 0.03 (alpha/2: not < 0.025,
    # Holm stops), 0.04 (stays at alpha/2)
    assert a.levels == pytest.approx((1 - 0.05 / 3, 1 - 0.05 / 2, 1 - 0.05 / 2, 1 - 0.05 / 4))
    assert a.family_size == 4 and a.method == "holm"
    # Holm rejects more than Bonferroni: 0.015 < alpha/3 and 0.02 < alpha/2 though both >= alpha/4
    b = S.adjust((0.01, 0.015, 0.02, 0.5), level=0.95, method="holm")
    assert b.levels == pytest.approx((1 - 0.05 / 4, 1 - 0.05 / 3, 1 - 0.05 / 2, 1 - 0.05 / 1))
    assert S.holm((0.01, 0.015, 0.02, 0.5)) == pytest.approx((0.04, 0.045, 0.045, 0.5))
    none = S.adjust(P, level=0.95, method="none")
    assert none.levels == (0.95,) * 4 and none.p_adjusted == P
    bh = S.adjust(P, level=0.95, method="bh")
    assert bh.levels == pytest.approx((1 - 4 * 0.05 / 4,) * 4)  # BH rejects all 4: FCR level 1 - R*alpha/m


def _diffs_with_p_between(lo: float, hi: float) -> tuple[tuple[float, ...], float]:
    base = np.array(
        [-0.6, -0.2, 0.1, 0.3, 0.5, 0.8, -0.4, 0.2, 0.6, -0.1, 0.4, 0.0, 0.7, -0.3, 0.3, 0.1, 0.5, -0.2, 0.2, 0.4]
    )
    for shift in np.arange(0.0, 0.5, 0.005):
        d = tuple(float(v) for v in base + shift)
        p = S.bootstrap_p_value(S.bootstrap_means(d, seed=0))
        if lo < p < hi:
            return d, p
    raise AssertionError("no shift gives the wanted p")


def test_a_family_is_adjusted_and_says_so() -> None:
    d, _ = _diffs_with_p_between(0.012, 0.04)
    (single,) = S.compare_family([_pairs(d)], method="holm", seed=0)
    p = single.p_value
    assert 0.01 < p < 0.05
    assert single.verdict == "better" and single.adjusted_level == 0.95 and single.family_size == 1
    fam = S.compare_family([_pairs(d, name=f"m{i}") for i in range(5)], method="holm", seed=0)
    for c in fam:
        assert c.family_size == 5 and c.method == "holm"
        assert c.adjusted_level == pytest.approx(0.99)  # 5 equal p's: Holm stops at rank 1, alpha/5
        assert c.p_adjusted == pytest.approx(min(1.0, 5 * p))
        assert c.lo < 0 < c.hi and c.verdict == "inconclusive"
        assert "holm over 5" in c.line()
    raw = S.compare_family([_pairs(d, name=f"m{i}") for i in range(5)], method="none", seed=0)
    assert all(c.verdict == "better" for c in raw)


def test_bad_family_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="adjustment method"):
        S.adjust(P, method="bonferoni")
    with pytest.raises(ConfigError, match="level"):
        S.compare_family([_pairs(DIFFS)], level=95)
    with pytest.raises(ConfigError, match="n_resamples"):
        S.compare_family([_pairs(DIFFS)], n_resamples=0)
    with pytest.raises(ConfigError, match="one entry per task"):
        S.TaskPairs(a="A", b="B", metric="m", task_ids=("t",), values_a=(1.0, 2.0), values_b=(1.0,))


# -- aggregation inside tasks -------------------------------------------------------------------
def _tidy(repeats: int) -> pd.DataFrame:
    rows = []
    for t in range(8):
        for mode, off in (("view", 0.0), ("write_back", 0.1)):
            for r in range(repeats):
                rows.append(
                    {"task_id": f"t{t}", "config": "A", "history_mode": mode, "repeat": r, "v": 0.5 + off + 0.02 * t}
                )
                rows.append(
                    {
                        "task_id": f"t{t}",
                        "config": "B",
                        "history_mode": mode,
                        "repeat": r,
                        "v": 0.5 + off + (0.01 if t % 3 else 0.0),
                    }
                )
    return pd.DataFrame(rows)


def test_deterministic_repeats_collapse_and_modes_nest_inside_the_task() -> None:
    one = S.task_pairs(_tidy(1), "A", "B", metric="v", within=("history_mode",))
    three = S.task_pairs(_tidy(3), "A", "B", metric="v", within=("history_mode",))
    assert one == three and len(three.task_ids) == 8  # 8 tasks, not 8 x 2 modes x 3 repeats
    ca = S.compare_family([one], method="none")[0]
    cb = S.compare_family([three], method="none")[0]
    assert (ca.lo, ca.hi, ca.n_tasks) == (cb.lo, cb.hi, 8)
    expect = [0.02 * t - (0.01 if t % 3 else 0.0) for t in range(8)]
    assert one.diffs == pytest.approx(tuple(expect))
    assert ca.n_differ == sum(1 for e in expect if abs(e) > 1e-12)


def test_cells_only_one_side_has_are_not_paired() -> None:
    d = _tidy(1)
    # B never ran write_back on t0: t0 is compared on view only; A alone on t9 is left out
    d = d[~((d["config"] == "B") & (d["task_id"] == "t0") & (d["history_mode"] == "write_back"))]
    d = pd.concat([d, pd.DataFrame([{"task_id": "t9", "config": "A", "history_mode": "view", "repeat": 0, "v": 9.0}])])
    p = S.task_pairs(d, "A", "B", metric="v", within=("history_mode",))
    assert "t9" not in p.task_ids and p.task_ids[0] == "t0"
    assert p.values_a[0] == pytest.approx(0.5) and p.values_b[0] == pytest.approx(0.5)


def test_stochastic_repeats_are_averaged_not_counted() -> None:
    d = _tidy(2)
    d.loc[(d["config"] == "A") & (d["repeat"] == 1), "v"] += 0.04
    p = S.task_pairs(d, "A", "B", metric="v", within=("history_mode",))
    assert len(p.task_ids) == 8
    base = S.task_pairs(_tidy(1), "A", "B", metric="v", within=("history_mode",))
    assert p.diffs == pytest.approx(tuple(x + 0.02 for x in base.diffs))


def test_missing_columns_are_named() -> None:
    with pytest.raises(ConfigError, match="no column"):
        S.task_pairs(pd.DataFrame({"task_id": ["t"], "config": ["A"]}), "A", "B", metric="v")


def test_spearman_and_its_task_interval_agree_with_scipy() -> None:
    """The closed-loop report's rank correlation (moved to stats) against an independent one."""
    import numpy as np
    import pandas as pd
    from scipy.stats import spearmanr

    from h9eval.analysis import stats

    x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    y = [2.0, 7.0, 1.0, 8.0, 2.0, 8.0, 1.0, 8.0]
    assert stats.spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)
    df = pd.DataFrame({"task_id": [f"t{i // 2}" for i in range(8)], "x": x, "y": y})
    r = stats.spearman_interval(df, 400, 0)
    assert r.rho == pytest.approx(spearmanr(x, y).statistic) and r.lo <= r.rho <= r.hi and 0 < r.n_resamples <= 400
    # the same resamples, drawn by hand: whole tasks with replacement
    rng = np.random.default_rng(0)
    draws = rng.integers(0, 4, size=(400, 4))
    rhos = []
    for d in draws:
        rows = [i for t in d for i in (2 * t, 2 * t + 1)]
        v = spearmanr([x[i] for i in rows], [y[i] for i in rows]).statistic
        if not np.isnan(v):
            rhos.append(v)
    assert r.n_resamples == len(rhos) and (r.lo, r.hi) == pytest.approx(tuple(np.quantile(rhos, [0.025, 0.975])))
    m = stats.mean_interval([1.0, 2.0, 3.0], 200, 0)
    assert m.mean == 2.0 and m.lo <= 2.0 <= m.hi and tuple(m) == (m.mean, m.lo, m.hi)


# -- one verdict rule, one interval (issue 45) -------------------------------------------------------
@pytest.mark.parametrize(
    ("diffs", "level"),
    [
        (DIFFS, 0.95),
        (DIFFS, 0.99),
        ((0.3, 0.1, -0.05, 0.2, 0.0, 0.0, 0.25, 0.15), 0.95),
        ((1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -1.0), 0.9),
        ((0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, -0.5, 0.0), 0.95),
    ],
)
def test_the_sign_flip_interval_matches_an_independent_inversion(diffs: tuple[float, ...], level: float) -> None:
    from signflip_ref import inverted_interval

    (c,) = S.compare_family([_pairs(diffs)], level=level, method="none", seed=0)
    assert c.p_method == "sign-flip" and c.interval_method == "sign-flip inversion"
    assert (c.lo, c.hi) == pytest.approx(inverted_interval(diffs, level), abs=1e-6)
    assert c.lo <= c.mean_diff <= c.hi


def test_too_few_differing_tasks_give_an_unbounded_interval_and_all_ties_a_point() -> None:
    (few,) = S.compare_family([_pairs((0.2, 0.3, 0.1, 0.0, 0.0, 0.0, 0.0))], method="none")
    assert (few.lo, few.hi) == (-math.inf, math.inf) and few.verdict == "inconclusive"
    (ties,) = S.compare_family([_pairs((0.0,) * 8, margin=0.01)], method="none")
    assert (ties.lo, ties.hi) == (0.0, 0.0) and ties.verdict == "equivalent within ±0.01"


def test_no_interval_excluding_0_is_printed_beside_inconclusive_and_every_rejection_excludes_it() -> None:
    """Over many random families (few and many differing tasks, ties, Holm and BH): a verdict of
    better or worse exactly when the printed interval lies on one side of 0; the adjusted test
    rejects exactly then too."""
    rng = np.random.default_rng(7)
    seen = {"sign-flip": 0, "bootstrap": 0}
    decided = 0
    for trial in range(60):
        fam = []
        for j in range(int(rng.integers(1, 6))):
            n = int(rng.integers(5, 26))
            d = rng.normal(float(rng.choice([0.0, 0.3, 0.8])), 1.0, size=n).round(2)
            d[rng.random(n) < float(rng.choice([0.0, 0.5]))] = 0.0
            fam.append(_pairs(tuple(float(v) for v in d), name=f"m{j}"))
        method = ["holm", "bh", "none"][trial % 3]
        for c in S.compare_family(fam, method=method, n_resamples=400, seed=trial):
            seen[c.p_method if c.p_method != "none" else "sign-flip"] += 1
            excludes = c.lo > 0 or c.hi < 0
            assert (c.verdict in ("better", "worse")) == excludes, c.line()
            if c.in_family and excludes:
                decided += 1
                assert c.p_adjusted < 1 - c.level, c.line()
    assert min(seen.values()) > 20 and decided > 20, (seen, decided)


def test_the_consistency_check_can_fail() -> None:
    """A mutant: the bootstrap interval printed while the sign-flip test decides. Some comparison
    then shows an interval excluding 0 beside inconclusive, which the check above would catch."""
    diffs = (0.2, 0.3, 0.25, 0.22, 0.0, 0.0)  # 4 tasks differ: the exact test cannot reject (2/16 > 0.05)
    (c,) = S.compare_family([_pairs(diffs)], method="none", seed=0)
    lo, hi = S.percentile_interval(S.bootstrap_means(diffs, seed=0), 0.95)
    assert lo > 0 and c.verdict == "inconclusive" and not (c.lo > 0 or c.hi < 0)
