"""The report's cost section and the retention-vs-dollars frontier, on a small fixed table."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from h9eval.analysis.metrics import pareto_front
from h9eval.analysis.plots import retention_cost_frontier
from h9eval.analysis.report.cost import cost_by_configuration, cost_sections

RM = pd.DataFrame(
    {
        "run_id": ["a1", "a2", "b1", "b2", "c1"],
        "label": ["A", "A", "B", "B", "C"],
        "history_mode": ["view"] * 5,
        "tokens_saved": [0.5, 0.7, 0.0, 0.0, 0.9],
        "cost_usd": [1.0, 3.0, 2.0, 2.0, math.nan],
        "raw_cost_usd": [2.0, 2.0, 2.0, 2.0, 2.0],
        "cost_saved": [0.5, -0.5, 0.0, 0.0, math.nan],
        "cache_read_share": [0.9, 0.5, 0.95, 0.95, 0.1],
        "invalidation_usd": [0.1, 0.3, 0.0, 0.0, math.nan],
        "unpriced_calls": [0, 0, 0, 0, 4],
        "retention": [0.8, 0.6, 1.0, 1.0, 0.5],
    }
)


def test_cost_by_configuration_means() -> None:
    t = cost_by_configuration(RM).set_index("configuration")
    assert t.loc["A", "cost_usd"] == pytest.approx(2.0) and t.loc["A", "retention"] == pytest.approx(0.7)
    assert t.loc["A", "tokens_saved"] == pytest.approx(0.6) and t.loc["A", "runs"] == 2
    assert math.isnan(t.loc["C", "cost_usd"]) and t.loc["C", "unpriced_calls"] == 4


def test_section_and_frontier() -> None:
    (s,) = cost_sections(RM)
    kinds = [k for k, _ in s.blocks]
    assert kinds.count("table") == 1 and kinds.count("figure") == 1 and "caveat" in kinds and "note" in kinds
    t = cost_by_configuration(RM)
    front = pareto_front(t, "cost_usd", "retention", maximize=(False, True))
    assert list(front["configuration"]) == ["B"]  # B costs as much as A on average and retains more
    fig = retention_cost_frontier(t)
    assert "1 configurations unpriced" in fig.axes[0].get_title()
    assert cost_sections(RM.drop(columns=["cost_usd"])) == []
