"""The tuner recommends only what it saw: thresholds no task reached keep harness9's value, ties go
to the smallest change from harness9's defaults, and k-fold cross-validation is computed from
the evidence. Hand-made evidence tables; each expected value is worked out in the comments."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from h9eval.compaction.policies.progressive import ProgressiveCompactor
from h9eval.studies.tune import _choose, change_from_default, cross_validate, keep_unexercised_defaults

D = ProgressiveCompactor()


def test_harness9_defaults_are_the_ones_this_file_assumes() -> None:
    assert (D.warn_frac, D.soft_frac, D.full_frac, D.emergency_frac) == (0.6, 0.7, 0.8, 0.95)


def test_thresholds_above_the_highest_usage_ratio_keep_harness9s_value() -> None:
    """The issue's case: highest usage 0.656, pick full 0.85 / emergency 0.9. Mutant killed:
    recommending the unexercised values (or only warning)."""
    pick = {
        "warn_frac": 0.5,
        "soft_frac": 0.6,
        "full_frac": 0.85,
        "emergency_frac": 0.9,
        "context_window_tokens": 16_000,
    }
    out, why = keep_unexercised_defaults(pick, 0.656)
    assert out == {**pick, "full_frac": 0.8, "emergency_frac": 0.95}
    assert (
        len(why) == 2
        and why[0].startswith("full_frac: harness9's 0.8 kept instead of 0.85")
        and "highest 0.656" in why[0]
    )
    # reached thresholds stay, whatever their value
    assert keep_unexercised_defaults(pick, 0.97) == (pick, [])
    # harness9's values would put soft (0.7) below the reached warn (0.72): the evaluated values stay, said so
    tight = {"warn_frac": 0.72, "soft_frac": 0.8, "full_frac": 0.85, "emergency_frac": 0.9}
    kept, why2 = keep_unexercised_defaults(tight, 0.75)
    assert kept == tight and "would not keep the tiers in order" in why2[0]


def test_change_from_default_is_the_sum_of_relative_changes() -> None:
    # |0.5-0.6|/0.6 + |4-6|/6 = 1/6 + 1/3 = 0.5; context window not counted
    assert change_from_default(
        {"warn_frac": 0.5, "min_tail_messages": 4}, ["warn_frac", "min_tail_messages"]
    ) == pytest.approx(0.5)
    assert change_from_default({"warn_frac": 0.6}, ["warn_frac"]) == 0


def _ev(per: list[dict[str, float]], change: list[float], **cols: list[float]) -> pd.DataFrame:
    n = len(per)
    base = {
        "retention": [sum(p.values()) / len(p) for p in per],
        "retention_min": [min(p.values()) for p in per],
        "worst_peak_ratio": [0.8] * n,
        "tokens_saved": [0.5] * n,
        "summarizer_calls_per_run": [1.0] * n,
        "overflows": [0] * n,
        "emergencies": [0] * n,
        "feasible": [True] * n,
        "change_from_default": change,
        "_per_task": [json.dumps(p) for p in per],
    }
    base.update(cols)
    return pd.DataFrame(base)


def test_ties_go_to_the_smallest_change_from_harness9s_defaults() -> None:
    """Three configs on 3 tasks (too few for any verdict: all tied). Config 1 has the best
    worst-task retention and the most headroom, config 2 changes harness9 least: 2 is picked.
    Mutant killed: the old "most robust / most headroom" tie-break (picks 1)."""
    per = [{"a": 1.0, "b": 1.0, "c": 0.4}, {"a": 0.8, "b": 0.8, "c": 0.8}, {"a": 0.7, "b": 0.9, "c": 0.5}]
    ev = _ev(per, change=[0.9, 0.5, 0.1], worst_peak_ratio=[0.8, 0.5, 0.9])
    c = _choose(ev, level=0.95, n_resamples=200, seed=0)
    assert c.best in (0, 1) and c.tied == (0, 1, 2) and c.pick == 2  # 0 and 1 share the best mean, 0.8


def test_a_config_clearly_worse_than_the_best_is_not_tied() -> None:
    """Ten tasks, config 1 lower on every one (exact p = 2/1024, below 0.05): not tied, even
    though it changes harness9 least."""
    per = [{f"t{i}": 0.9 for i in range(10)}, {f"t{i}": 0.5 for i in range(10)}]
    c = _choose(_ev(per, change=[0.5, 0.0]), level=0.95, n_resamples=200, seed=0)
    assert c.tied == (0,) and c.pick == 0


def test_cross_validation_picks_on_the_other_folds_and_scores_on_its_own() -> None:
    per = [{"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0}, {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5}]
    ev = _ev(per, change=[0.0, 0.0])
    cv = cross_validate(ev, folds=2, seed=0)
    assert list(cv["n_tasks"]) == [2, 2]
    for r in cv.itertuples():
        # by hand: the fold's tasks are the two the other fold did not get
        train = [t for t in "abcd" if t not in _fold_tasks(0, r.fold)]
        means = [sum(p[t] for t in train) / 2 for p in per]
        assert r.pick == (0 if means[0] > means[1] or (means[0] == means[1]) else 1)
        test = _fold_tasks(0, r.fold)
        assert r.pick_retention == pytest.approx(sum(per[r.pick][t] for t in test) / 2)
        assert r.regret == pytest.approx(max(sum(p[t] for t in test) / 2 for p in per) - r.pick_retention)
    assert cross_validate(ev, folds=5).empty  # more folds than tasks


def _fold_tasks(seed: int, fold: int) -> list[str]:
    import numpy as np

    order = np.random.default_rng(seed).permutation(4)
    return sorted("abcd"[int(i)] for i in order[fold::2])
