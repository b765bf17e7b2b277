"""Closed-loop statistics over independent units: the world (kind and parameters) is the unit,
seeds are nested inside it, too few worlds give "insufficient units", verdicts against keep_all
are Holm-adjusted, and the validation study leaves the controls out. Fixed episode tables; the
expected p-values are exact sign-flip counts worked out in the comments."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from h9eval.analysis import closedloop_units as CU
from h9eval.analysis.stats import INCONCLUSIVE, WORSE


def _episodes(success: dict[str, list[list[int]]]) -> pd.DataFrame:
    """``success[config][world][seed]`` -> one episode row each (tokens equal everywhere)."""
    rows = []
    for config, worlds in success.items():
        for w, seeds in enumerate(worlds):
            for s, ok in enumerate(seeds):
                rows.append(
                    {
                        "agent_id": "scripted",
                        "config": config,
                        "task_id": f"world-fact_chain-{w:08x}-{s}",
                        "world_kind": "fact_chain",
                        "world_params": f'{{"n": {w}}}',
                        "history_mode": "write_back",
                        "success": bool(ok),
                        "tokens_sent_sum": 100,
                    }
                )
    return pd.DataFrame(rows)


def test_the_unit_is_the_world_not_the_seed() -> None:
    ep = _episodes({"keep_all": [[1, 1]], "a": [[0, 1]]})
    assert list(CU.world_units(ep)) == ['fact_chain {"n": 0}'] * 4
    bare = pd.DataFrame({"task_id": ["world-ticket_queue-3", "world-ticket_queue-4", "world-mini_repo-ab12cd34-0"]})
    assert list(CU.world_units(bare)) == ["world-ticket_queue", "world-ticket_queue", "world-mini_repo-ab12cd34"]


def test_four_worlds_are_insufficient_units_however_many_seeds() -> None:
    """4 worlds x 3 seeds, a fails every seed keep_all passes. Mutant killed: seeds as units
    (12 differing "tasks": exact p = 2/4096, "worse")."""
    ep = _episodes({"keep_all": [[1, 1, 1]] * 4, "a": [[0, 0, 0]] * 4})
    sc = CU.success_cost_by_world(ep, n_boot=200).set_index("config")
    assert sc.loc["a", "n_worlds"] == 4 and sc.loc["a", "n_seeds"] == 12
    assert sc.loc["a", "success_diff"] == -1.0 and sc.loc["a", "success_verdict"] == CU.INSUFFICIENT_UNITS


def test_verdicts_against_keep_all_are_holm_adjusted_over_the_configurations() -> None:
    """8 worlds x 2 seeds. keep_all passes worlds 0-5 and half of 6-7. Per world, minus keep_all:
    a: -1 x6, -0.5 x2 (8 differ, p = 2/256); b: -1 x6, 0 x2 (6 differ, p = 2/64 = 0.03125);
    c: -1, -1, 0 x4, +0.5, +0.5 (12 of 16 patterns as extreme, p = 0.75). Holm over 3: a 0.0234
    worse; b 2 x 0.03125 = 0.0625 not. Mutant killed: dropping Holm makes b "worse"."""
    full, half = [1, 1], [1, 0]
    ep = _episodes(
        {
            "keep_all": [full] * 6 + [half] * 2,
            "a": [[0, 0]] * 8,
            "b": [[0, 0]] * 6 + [half] * 2,
            "c": [[0, 0]] * 2 + [full] * 4 + [full] * 2,
        }
    )
    sc = CU.success_cost_by_world(ep, n_boot=200).set_index("config")
    # independent: mean over worlds of the per-world success rate
    assert sc.loc["keep_all", "success"] == pytest.approx((6 + 0.5 * 2) / 8)
    assert sc.loc["a", "success_p_adjusted"] == pytest.approx(3 * 2 / 256) and sc.loc["a", "success_verdict"] == WORSE
    assert (
        sc.loc["b", "success_p_adjusted"] == pytest.approx(2 * 2 / 64)
        and sc.loc["b", "success_verdict"] == INCONCLUSIVE
    )
    assert sc.loc["c", "success_p_adjusted"] == pytest.approx(0.75)
    unadjusted = CU.success_cost_by_world(ep, n_boot=200, method="none").set_index("config")
    assert unadjusted.loc["b", "success_verdict"] == WORSE


def _rank_rho(x: list[float], y: list[float]) -> float:
    """Spearman by hand: Pearson of pandas' average ranks."""
    return float(np.corrcoef(pd.Series(x).rank(), pd.Series(y).rank())[0, 1])


def test_the_validation_study_leaves_the_controls_out_per_world_and_pooled() -> None:
    rows = []
    # three worlds x two seeds; three strategies whose retention order matches success in worlds 0 and 1
    ret = {"p": [0.9, 0.8, 0.5], "q": [0.6, 0.7, 0.6], "r": [0.3, 0.2, 0.7]}
    suc = {"p": [1.0, 1.0, 0.0], "q": [0.5, 0.5, 1.0], "r": [0.0, 0.0, 0.5]}
    for cfg in ("p", "q", "r"):
        for w in range(3):
            for s in range(2):
                rows.append(
                    {
                        "agent_id": "scripted",
                        "config": cfg,
                        "task_id": f"world-fact_chain-{w}{w}{w}{w}-{s}",
                        "retention": ret[cfg][w],
                        "success": suc[cfg][w],
                    }
                )
    for w in range(3):
        for s in range(2):
            rows.append(
                {
                    "agent_id": "scripted",
                    "config": "keep_all",
                    "task_id": f"world-fact_chain-{w}{w}{w}{w}-{s}",
                    "retention": 1.0,
                    "success": 1.0,
                }
            )
            rows.append(
                {
                    "agent_id": "scripted",
                    "config": "drop_all",
                    "task_id": f"world-fact_chain-{w}{w}{w}{w}-{s}",
                    "retention": 0.0,
                    "success": 0.0,
                }
            )
    v = CU.validation_by_world(pd.DataFrame(rows), n_boot=200).set_index("scope")
    assert set(v.index) == {"world-fact_chain-0000", "world-fact_chain-1111", "world-fact_chain-2222", "pooled"}
    for w in range(3):
        row = v.loc[f"world-fact_chain-{w}{w}{w}{w}"]
        assert row["n_configs"] == 3 and row["rho"] == pytest.approx(
            _rank_rho([ret[c][w] for c in "pqr"], [suc[c][w] for c in "pqr"])
        )
    pooled = v.loc["pooled"]
    xs = [ret[c][w] for c in "pqr" for w in range(3)]
    ys = [suc[c][w] for c in "pqr" for w in range(3)]
    assert pooled["n_pairs"] == 9 and pooled["n_worlds"] == 3 and pooled["rho"] == pytest.approx(_rank_rho(xs, ys))
    # with the controls (mutant: not leaving them out) the pooled rho is higher: they sit at the corners
    with_controls = (
        CU.validation_by_world(pd.DataFrame(rows), n_boot=50, controls=()).set_index("scope").loc["pooled", "rho"]
    )
    assert with_controls > pooled["rho"] + 0.05


def test_success_cost_carries_the_billed_dollars_and_never_reads_an_unknown_as_zero() -> None:
    """Means over episodes of the episodes table's billed columns (by hand: (0.2 + 0.4) / 2); a
    configuration with one unpriced episode is unknown, and so is a version-1 table without them."""
    from h9eval.analysis.episodes import success_cost

    ep = _episodes({"keep_all": [[1, 1]], "a": [[0, 1]]}).assign(
        excess_steps=0,
        summarizer_cost_usd=0.0,
        cost_usd=[0.2, 0.4, 0.1, np.nan],
        cache_read_share=[0.9, 0.7, 0.5, 0.5],
    )
    sc = success_cost(ep, n_boot=50).set_index("config")
    assert sc.loc["keep_all", "cost_usd"] == pytest.approx(0.3) and sc.loc[
        "keep_all", "cache_read_share"
    ] == pytest.approx(0.8)
    assert np.isnan(sc.loc["a", "cost_usd"]) and sc.loc["a", "cache_read_share"] == pytest.approx(0.5)
    old = success_cost(ep.drop(columns=["cost_usd", "cache_read_share"]), n_boot=50)
    assert old["cost_usd"].isna().all()
