"""Verdicts from the evidence: the tasks that differ decide. Each rule is checked on a small fixed
table against an independent computation (every sign pattern enumerated here with itertools,
Holm done by hand), and each test names the hand-made mutant it kills."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from h9eval.analysis import stats as S


def _pairs(diffs: tuple[float, ...], *, name: str = "m", margin: float | None = None) -> S.TaskPairs:
    n = len(diffs)
    return S.TaskPairs(
        a="A",
        b="B",
        metric=name,
        task_ids=tuple(f"t{i:02d}" for i in range(n)),
        values_a=tuple(0.5 + d for d in diffs),
        values_b=(0.5,) * n,
        margin=margin,
    )


def _enumerated_sign_flip_p(diffs: tuple[float, ...]) -> float:
    """Two-sided exact sign-flip p: the share of the 2**k sign patterns of the k non-zero
    differences whose |mean| is at least the observed one (written independently of scipy)."""
    d = [x for x in diffs if x != 0]
    obs = abs(sum(diffs)) / len(diffs)
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        if abs(sum(s * x for s, x in zip(signs, d))) / len(diffs) >= obs - 1e-12:
            hits += 1
    return hits / 2 ** len(d)


# the case: 11 tasks, 8 differ, all 8 in A's favour; nine other metrics in the family
EIGHT_OF_ELEVEN = (0.02, 0.05, 0.01, 0.04, 0.03, 0.06, 0.02, 0.01, 0.0, 0.0, 0.0)
NOISE = (0.03, -0.02, 0.01, -0.04, 0.02, -0.01, 0.05, -0.03, 0.0, 0.0, 0.0)


def test_eight_differing_tasks_give_the_exact_p_and_holm_over_ten_is_not_significant() -> None:
    """Mutant killed: the bootstrap p (0 here, every resample positive) deciding with few tasks."""
    fam = [_pairs(EIGHT_OF_ELEVEN, name="retention")] + [_pairs(NOISE, name=f"m{i}") for i in range(9)]
    c = S.compare_family(fam, method="holm", seed=0)[0]
    assert c.p_method == "sign-flip" and c.n_differ == 8 and c.n_tasks == 11
    assert c.p_value == pytest.approx(_enumerated_sign_flip_p(EIGHT_OF_ELEVEN)) == pytest.approx(2 / 256)
    assert c.family_size == 10 and c.p_adjusted == pytest.approx(10 * 2 / 256)
    assert c.verdict == S.INCONCLUSIVE
    # with the bootstrap's p (0: every resample positive) only the guard at Holm's level stands in the way
    boot = S.compare_family(fam, method="holm", seed=0, exact_max_differ=0)[0]
    assert boot.p_value == 0 and "p=< 1/2000 (bootstrap)" in boot.line()
    assert boot.verdict == S.INCONCLUSIVE and "8 tasks differ; a verdict at this level needs 9" in boot.line()
    # alone (no family) the exact test rejects at 0.05
    (alone,) = S.compare_family([_pairs(EIGHT_OF_ELEVEN)], method="none")
    assert alone.verdict == S.BETTER and "p=0.0078 (sign-flip)" in alone.line()


def test_with_few_differing_tasks_the_exact_test_decides_not_the_bootstrap() -> None:
    """Mutant killed: the bootstrap p deciding when 6 tasks differ. Five of six moved up and one
    slightly down: 4 of the 64 sign patterns are as extreme (p = 0.0625), while nearly every
    bootstrap resample is positive."""
    diffs = (0.3, 0.3, 0.3, 0.3, 0.3, -0.05)
    (c,) = S.compare_family([_pairs(diffs)], method="none", seed=3)
    assert c.p_method == "sign-flip" and c.p_value == pytest.approx(_enumerated_sign_flip_p(diffs)) == pytest.approx(
        4 / 64
    )
    assert c.lo <= 0 <= c.hi and c.verdict == S.INCONCLUSIVE  # the interval printed is the exact test's
    (boot,) = S.compare_family([_pairs(diffs)], method="none", seed=3, exact_max_differ=0)
    assert boot.p_value < 0.05 and boot.verdict == S.BETTER


@pytest.mark.parametrize(
    "diffs", [(0.3, -0.1, 0.2, 0.05, -0.02, 0.0, 0.12), (1.0, 2.0, -0.5, 0.0, 0.0, 3.0), (-0.2, -0.1, 0.4, -0.3)]
)
def test_the_sign_flip_p_matches_an_enumeration_of_every_sign_pattern(diffs: tuple[float, ...]) -> None:
    assert S.sign_flip_p_value(diffs) == pytest.approx(_enumerated_sign_flip_p(diffs))


def test_the_guard_counts_the_tasks_that_differ_not_the_tasks_paired() -> None:
    """Mutant killed: the minimum-task guard counting all 11 paired tasks (5 differ)."""
    diffs = (0.2, 0.3, 0.25, 0.4, 0.35) + (0.0,) * 6
    (c,) = S.compare_family([_pairs(diffs)], method="none", seed=1, exact_max_differ=0)
    assert c.p_value < 0.05  # the bootstrap alone would say "better"
    assert (c.lo, c.hi) == (-math.inf, math.inf) and c.interval_method == "none (too few tasks differ)"
    assert c.n_differ == 5 < S.min_tasks_for(0.95) <= c.n_tasks
    assert c.verdict == S.INCONCLUSIVE and "5 tasks differ; a verdict at this level needs 6" in c.line()


def test_the_guard_is_checked_at_the_adjusted_level() -> None:
    """Mutant killed: the guard read at the family level 0.95 (6 tasks) instead of Holm's
    0.995 for the smallest of 10 p-values (9 tasks)."""
    strong = (0.4, 0.5, 0.45, 0.6, 0.55, 0.5, 0.42)
    fam = [_pairs(strong, name="strong")] + [
        _pairs((0.1, -0.1, 0.2, -0.2, 0.05, -0.05, 0.01), name=f"m{i}") for i in range(9)
    ]
    c = S.compare_family(fam, method="holm", seed=2, exact_max_differ=0)[0]
    assert c.p_adjusted == 0 and c.adjusted_level == pytest.approx(1 - 0.05 / 10) and c.lo == -math.inf
    assert S.min_tasks_for(c.adjusted_level) == 9 > c.n_differ == 7 >= S.min_tasks_for(0.95)
    assert c.verdict == S.INCONCLUSIVE
    # an equivalence verdict is guarded at the adjusted level too (it counts every paired task)
    tiny = (0.001, -0.001, 0.002, 0.0015, -0.002, 0.001, 0.0)  # 6 differ: the exact test can decide at 0.95
    fam_eq = [_pairs(tiny, name="tiny", margin=0.01)] + fam[1:]
    e = S.compare_family(fam_eq, method="holm", seed=2)[0]
    assert e.verdict == S.INCONCLUSIVE
    (alone,) = S.compare_family([_pairs(tiny, margin=0.01)], method="none", seed=2)
    assert alone.verdict == S.equivalent_within(0.01)


def test_a_metric_where_no_task_differs_is_left_out_of_the_family() -> None:
    """Mutant killed: padding the Holm family with a metric that cannot differ (offline cost)."""
    six = (0.1, 0.2, 0.15, 0.3, 0.25, 0.05, 0.2)
    fam = [_pairs(six, name="retention"), _pairs((0.0,) * 7, name="summarizer_cost_usd")]
    ret, cost = S.compare_family(fam, method="holm")
    assert not cost.in_family and cost.p_value == 1.0 and "left out of the family" in cost.line()
    assert ret.family_size == 1 and ret.p_adjusted == ret.p_value == pytest.approx(_enumerated_sign_flip_p(six))
    assert ret.verdict == S.BETTER  # 2/128 = 0.0156: Holm over 2 would still pass, but the size is 1
    assert ret.adjusted_level == pytest.approx(0.95)


def test_holm_and_bh_agree_with_a_hand_computation() -> None:
    p = (0.01, 0.04, 0.03, math.nan, 0.2)
    # Holm by hand: sorted 0.01, 0.03, 0.04, 0.2 with m = 4 -> 0.04, 0.09, 0.09 (monotone), 0.2
    assert S.holm(p)[0] == pytest.approx(0.04) and S.holm(p)[2] == pytest.approx(0.09)
    assert S.holm(p)[1] == pytest.approx(0.09) and S.holm(p)[4] == pytest.approx(0.2) and math.isnan(S.holm(p)[3])
    # BH by hand: 0.01*4/1=0.04, 0.03*4/2=0.06, 0.04*4/3=0.0533, 0.2 -> step-up minima 0.04, 0.0533, 0.0533, 0.2
    bh = S.benjamini_hochberg(p)
    assert (bh[0], bh[2], bh[1], bh[4]) == pytest.approx((0.04, 0.16 / 3, 0.16 / 3, 0.2))


def test_format_p_prints_a_bootstrap_zero_as_below_its_resolution() -> None:
    assert S.format_p(0.0, method="bootstrap", n_resamples=2000) == "< 1/2000"
    assert S.format_p(0.0078125, method="sign-flip") == "0.0078"
    assert S.format_p(math.nan) == "n/a"


def test_the_bootstrap_distribution_is_scipys_and_the_documented_index_draw() -> None:
    x = np.array([0.12, -0.03, 0.05, 0.2, 0.07])
    ref = x[np.random.default_rng(5).integers(0, 5, size=(500, 5))].mean(axis=1)
    assert np.array_equal(S.bootstrap_means(x, n_resamples=500, seed=5), ref)
