"""Retention is memory: pinned probes and probes the placebo control excluded are left out of the
headline retention, pinning is its own column, and the two rankings are shown side by side. Checked
on a fixed probe table against means computed here by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from h9eval.analysis import metrics as M
from h9eval.analysis.compare import retention_rankings


def _probes() -> pd.DataFrame:
    rows = []
    # (run, task, config, score, pinned, placebo_excluded)
    data = [
        ("r1", "t1", "mask", 1.0, True, False),
        ("r1", "t1", "mask", 0.2, False, False),
        ("r1", "t1", "mask", 1.0, False, True),
        ("r2", "t2", "mask", 1.0, True, False),
        ("r2", "t2", "mask", 0.4, False, False),
        ("r3", "t1", "summ", 0.5, True, False),
        ("r3", "t1", "summ", 0.6, False, False),
        ("r3", "t1", "summ", 0.0, False, True),
        ("r4", "t2", "summ", 0.5, True, False),
        ("r4", "t2", "summ", 0.8, False, False),
    ]
    for run, task, cfg, score, pinned, excl in data:
        rows.append(
            {
                "run_id": run,
                "task_id": task,
                "config": cfg,
                "probe_kind": "fact",
                "method": "recall",
                "scope": "view",
                "answerable": True,
                "score": score,
                "answer_pinned": pinned,
                "placebo_excluded": excl,
            }
        )
    return pd.DataFrame(rows)


def test_headline_retention_leaves_out_pinned_and_placebo_excluded_probes() -> None:
    """Mutants killed: averaging pinned rows in; averaging placebo-excluded rows in."""
    r = M.retention(_probes(), by=("run_id",)).set_index("run_id")["retention"]
    assert r.to_dict() == pytest.approx({"r1": 0.2, "r2": 0.4, "r3": 0.6, "r4": 0.8})
    pinned = M.retention(_probes(), by=("run_id",), pinned="only").set_index("run_id")["retention"]
    assert pinned.to_dict() == pytest.approx({"r1": 1.0, "r2": 1.0, "r3": 0.5, "r4": 0.5})
    both = M.retention(_probes(), by=("run_id",), pinned="include").set_index("run_id")["retention"]
    assert both["r1"] == pytest.approx((1.0 + 0.2) / 2)


def test_both_rankings_are_given_and_they_disagree_here() -> None:
    p = _probes()
    table = pd.DataFrame(
        {
            "run_id": ["r1", "r2", "r3", "r4"],
            "task_id": ["t1", "t2", "t1", "t2"],
            "config": ["mask", "mask", "summ", "summ"],
        }
    )
    for col, which in (("retention", "exclude"), ("pinned_retention", "only"), ("retention_with_pinned", "include")):
        r = M.retention(p, by=("run_id",), pinned=which)[["run_id", "retention"]].rename(columns={"retention": col})
        table = table.merge(r, on="run_id")
    rk = retention_rankings(table).set_index("config")
    # by hand: memory mask (0.2+0.4)/2 = 0.3, summ 0.7; with pinned mask (0.6+0.7)/2 = 0.65, summ (0.55+0.65)/2 = 0.6
    assert rk.loc["summ", "retention"] == pytest.approx(0.7) and rk.loc["mask", "retention"] == pytest.approx(0.3)
    assert rk.loc["mask", "retention_with_pinned"] == pytest.approx(0.65) and rk.loc[
        "summ", "retention_with_pinned"
    ] == pytest.approx(0.6)
    assert (rk.loc["summ", "rank"], rk.loc["summ", "rank_with_pinned"]) == (1, 2)
    assert list(rk["rank_moved"]) == [1, -1]
