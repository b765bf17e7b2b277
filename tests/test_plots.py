"""plots: every function returns a Figure with the artists it promises, on small frames."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from h9eval.analysis import metrics as M
from h9eval.analysis import plots as P
from tests.test_metrics import calls_frame

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402


def _gids(fig: Figure) -> set[str]:
    return {a.get_gid() for ax in fig.axes for a in ax.collections if a.get_gid()}


@pytest.fixture()
def calls() -> pd.DataFrame:
    a = calls_frame("t1--a", ["none", "warn", "soft", "full", "emergency", "none"])
    a.loc[5, "overflow"] = True
    a.loc[2, "fallback"] = True
    a.loc[1, "offloads_compaction_count"] = 2
    b = calls_frame("t1--b", ["none", "none", "warn", "warn", "soft", "soft"])
    return pd.concat([a, b], ignore_index=True)


@pytest.fixture()
def probes() -> pd.DataFrame:
    rows = []
    for run in ("t1--a", "t1--b"):
        for ci in range(4):
            for kind, score in (("intent", 1 - ci * 0.1), ("fact", 1 - ci * 0.2), ("key_decision", 0.5), ("tried_solution", 1.0)):
                rows.append({"run_id": run, "task_id": "t1", "checkpoint_call_index": ci, "n_compactions": ci // 2, "probe_kind": kind, "method": "recall", "scope": "view", "score": score, "answerable": True})
    return pd.DataFrame(rows)


def test_token_curve(calls: pd.DataFrame) -> None:
    fig = P.token_curve(calls)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    ax = fig.axes[0]
    # 2 lines per run + 4 threshold lines + the window line
    assert len(ax.lines) == 2 * 2 + 5
    assert {"compaction-warn", "compaction-soft", "compaction-full", "compaction-emergency", "offload", "fallback", "forced_truncation", "overflow"} <= _gids(fig)
    assert len(ax.patches) == 5  # tier bands
    labels = ax.get_legend().get_texts()
    assert any("window (1,000)" in t.get_text() for t in labels)
    one = P.token_curve(calls, run_ids=["t1--b"])
    assert len(one.axes[0].lines) == 2 + 5 and "overflow" not in _gids(one)
    assert isinstance(P.token_curve(calls.iloc[:0]), Figure)


def test_tier_swimlane_and_transition_matrix(calls: pd.DataFrame) -> None:
    fig = P.tier_swimlane(calls)
    ax = fig.axes[0]
    assert len(ax.images) == 1 and ax.images[0].get_array().shape == (2, 6)
    fig = P.tier_transition_matrix(calls)
    ax = fig.axes[0]
    assert len(ax.images) == 1 and len(ax.texts) == 25
    assert sum(int(t.get_text()) for t in ax.texts) == int(M.tier_transitions(calls).to_numpy().sum())


def test_anchor_heatmap_from_probes_and_compactions(probes: pd.DataFrame) -> None:
    fig = P.anchor_retention_heatmap(probes)
    img = fig.axes[0].images[0]
    assert img.get_array().shape == (2, 2)  # key_decision, tried_solution x 2 compaction counts
    comps = pd.DataFrame({"run_id": ["r"], "record_index": [0], "anchors_json": [json.dumps([{"type": "user_intent", "content": "x"}])]})
    assert P.anchor_retention_heatmap(comps).axes[0].images[0].get_array().shape == (1, 1)
    assert len(P.anchor_retention_heatmap(probes.iloc[:0]).axes[0].images) == 0


def test_drift_curves(probes: pd.DataFrame) -> None:
    fig = P.drift_curves(probes)
    assert len(fig.axes) == 2
    assert [len(ax.lines) for ax in fig.axes] == [2, 2]
    y = fig.axes[1].lines[0].get_ydata()
    assert list(y) == pytest.approx([1.0, 0.8, 0.6, 0.4])


def test_strategy_comparison_and_cost() -> None:
    rm = pd.DataFrame(
        {
            "run_id": [f"t{i}--{c}" for c in "ab" for i in range(3)],
            "label": ["A"] * 3 + ["B"] * 3,
            "policy_kind": ["progressive"] * 6,
            "tokens_saved": [0.3, 0.35, 0.32, 0.5, 0.55, 0.52],
            "retention": [0.9, 0.85, 0.88, 0.7, 0.72, 0.69],
            "overflows": [0] * 6,
            "summarizer_calls": [1, 2, 3, 4, 5, 6],
            "summarizer_cost_usd": [0.0] * 6,
        }
    )
    fig = P.strategy_comparison(rm)
    ax = fig.axes[0]
    assert len(ax.containers) == 2  # one errorbar per config
    assert any(line.get_label() == "Pareto front" for line in ax.lines)
    fig = P.summarizer_cost(rm.assign(status="ok"), by="label")
    assert len(fig.axes) == 2 and len(fig.axes[0].patches) == 2
    assert [p.get_width() for p in fig.axes[0].patches] == [2.0, 5.0]


def test_token_estimate_error() -> None:
    from h9eval.analysis import token_accuracy as TC
    from h9eval.tasks.synthetic import generate

    t = generate("small", seed=0)
    mt = TC.message_token_table(t.messages)
    ct = TC.call_token_table(t, context_window_tokens=12_000)
    fig = P.token_estimate_error(mt, ct)
    assert len(fig.axes) == 2
    n_kinds = len(M.token_estimate_error(mt))
    assert len(fig.axes[0].patches) == 2 * n_kinds
    assert ("misclassified" in _gids(fig)) == (len(M.tier_misclassification(ct)) > 0)
    assert len(P.token_estimate_error(mt).axes) == 1


def test_records_curve_and_tune_evidence() -> None:
    comps = pd.DataFrame({"session_id": ["s"] * 3, "record_index": [0, 1, 2], "tokens_before": [900, 950, 990], "tokens_after": [400, 500, 100], "tier_name": ["soft", "full", "emergency"], "error": ["", "", "emergency fallback"]})
    fig = P.records_token_curve(comps)
    assert {"compaction-soft", "compaction-full", "compaction-emergency", "error"} <= _gids(fig)
    ev = pd.DataFrame({"stage": ["grid", "grid", "refine1"], "tokens_saved": [0.1, 0.2, 0.15], "retention": [0.8, 0.7, 0.85], "feasible": [True, False, True], "best": [False, False, True]})
    assert {"feasible-grid", "infeasible-grid", "feasible-refine1", "best"} <= _gids(P.tune_evidence(ev))


def test_no_pyplot_state() -> None:
    import sys

    # the module builds Figures directly; pyplot (global figure manager) is never needed
    P.token_curve(calls_frame("x--a", ["none", "warn"]))
    assert "matplotlib.pyplot" not in sys.modules or not __import__("matplotlib.pyplot").pyplot.get_fignums()
