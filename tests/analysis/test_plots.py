"""plots: every function returns a Figure with the artists it promises, on small frames."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from h9eval.analysis import metrics as M
from h9eval.analysis import plots as P
from tests.analysis.test_metrics import calls_frame

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
            for kind, score in (
                ("intent", 1 - ci * 0.1),
                ("fact", 1 - ci * 0.2),
                ("key_decision", 0.5),
                ("tried_solution", 1.0),
            ):
                rows.append(
                    {
                        "run_id": run,
                        "task_id": "t1",
                        "checkpoint_call_index": ci,
                        "n_compactions": ci // 2,
                        "probe_kind": kind,
                        "method": "recall",
                        "scope": "view",
                        "score": score,
                        "answerable": True,
                    }
                )
    return pd.DataFrame(rows)


def _main_axes(fig: Figure) -> list:
    # the token curve's right axes (band names) are twins: they share the x axis and draw no data
    return [ax for ax in fig.axes if ax.get_ylabel() == "tokens"]


def _hlines(ax) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return {ln.get_gid(): float(ln.get_ydata()[0]) for ln in ax.lines if ln.get_gid()}


def _drawn(fig: Figure):  # type: ignore[no-untyped-def]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def _assert_legends_clear(fig: Figure) -> None:
    """Every legend lies outside every axes (so it covers no data) and within a third of the figure."""
    r = _drawn(fig)
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    fw, fh = fig.bbox.width, fig.bbox.height
    for lg in legends:
        lb = lg.get_window_extent(r)
        assert lb.width * lb.height <= fw * fh / 3
        for ax in fig.axes:
            if ax.get_visible() and ax.axison:
                assert not lb.overlaps(ax.get_window_extent(r)), (lg, ax)


def test_token_curve_draws_each_runs_own_thresholds(calls: pd.DataFrame) -> None:
    fig = P.token_curve(
        calls,
        thresholds_by_run={"t1--a": {"warn": 0.5, "soft": 0.6, "full": 0.7, "emergency": 0.9}},
        labels={"t1--a": "tight (view)"},
    )
    a, b = _main_axes(fig)  # one panel per run
    assert a.get_title(loc="left").startswith("tight (view)")
    assert _hlines(a) == pytest.approx(
        {
            "threshold-warn": 500,
            "threshold-soft": 600,
            "threshold-full": 700,
            "threshold-emergency": 900,
            "window": 1000,
        }
    )
    # a run not in the mapping falls back to harness9's defaults
    assert _hlines(b) == pytest.approx(
        {
            "threshold-warn": 600,
            "threshold-soft": 700,
            "threshold-full": 800,
            "threshold-emergency": 950,
            "window": 1000,
        }
    )
    assert len(a.patches) == 5 and len(a.lines) == 2 + 5
    assert {
        "compaction-warn",
        "compaction-soft",
        "compaction-full",
        "compaction-emergency",
        "offload",
        "fallback",
        "forced_truncation",
        "overflow",
    } <= _gids(fig)
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    _assert_legends_clear(fig)
    # a policy without tiers: no bands, only the window
    none = P.token_curve(calls, run_ids=["t1--b"], thresholds_by_run={"t1--b": None})
    (ax,) = _main_axes(none)
    assert len(ax.patches) == 0 and set(_hlines(ax)) == {"window"} and "overflow" not in _gids(none)
    assert isinstance(P.token_curve(calls.iloc[:0]), Figure)


def test_tier_swimlane_and_transition_matrix(calls: pd.DataFrame) -> None:
    fig = P.tier_swimlane(calls, labels={"t1--a": "A (view)", "t1--b": "B (view)"})
    ax = fig.axes[0]
    assert len(ax.images) == 1 and ax.images[0].get_array().shape == (2, 6)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A (view)", "B (view)"]
    fig = P.tier_swimlane(
        calls, labels={"t1--a": "A", "t1--b": "B"}, groups={"progressive": ["t1--a"], "other strategies": ["t1--b"]}
    )
    lanes = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title(loc="left") for ax in lanes] == ["progressive", "other strategies"]
    assert [[t.get_text() for t in ax.get_yticklabels()] for ax in lanes] == [["A"], ["B"]]
    fig = P.tier_transition_matrix(calls)
    ax = fig.axes[0]
    assert len(ax.images) == 1 and len(ax.texts) == 25
    assert sum(int(t.get_text()) for t in ax.texts) == int(M.tier_transitions(calls).to_numpy().sum())
    # one panel per configuration, never pooled; each row says how many transitions it holds
    fig = P.tier_transition_matrix(calls, groups={"A": ["t1--a"], "B": ["t1--b"]})
    pa, pb = [ax for ax in fig.axes if ax.images]
    assert sum(int(t.get_text()) for t in pa.texts) == 5 == sum(int(t.get_text()) for t in pb.texts)
    assert [t.get_text() for t in pb.get_yticklabels()][:2] == ["none (n=2)", "warn (n=2)"]
    assert pa.get_title().startswith("A")


def test_anchor_heatmap_from_probes_and_compactions(probes: pd.DataFrame) -> None:
    fig = P.anchor_retention_heatmap(probes)
    img = fig.axes[0].images[0]
    assert img.get_array().shape == (2, 2)  # key_decision, tried_solution x 2 compaction counts
    comps = pd.DataFrame(
        {"run_id": ["r"], "record_index": [0], "anchors_json": [json.dumps([{"type": "user_intent", "content": "x"}])]}
    )
    assert P.anchor_retention_heatmap(comps).axes[0].images[0].get_array().shape == (1, 1)
    assert len(P.anchor_retention_heatmap(probes.iloc[:0]).axes[0].images) == 0


def test_config_heatmap_writes_n_in_every_cell(probes: pd.DataFrame) -> None:
    p = probes.assign(
        label=probes["run_id"].map({"t1--a": "A", "t1--b": "B"}),
        history_mode=probes["run_id"].map({"t1--a": "view", "t1--b": "write_back"}),
    )
    t = M.retention(p, by=("label", "history_mode", "probe_kind"))
    fig = P.config_heatmap(t)
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["view", "write_back"]
    texts = [x.get_text() for x in panels[0].texts]
    assert len(texts) == 4 and all("\nn=4" in x for x in texts)  # 4 kinds, 4 checkpoints each
    assert "0.50\nn=4" in texts  # key_decision scores 0.5


def test_config_heatmap_splits_long_panels_by_family() -> None:
    rows = [
        {
            "label": f"c{i:02d}",
            "family": P.family("progressive" if i < 8 else "window"),
            "history_mode": "view",
            "probe_kind": k,
            "retention": 0.5,
            "n_probes": 3,
        }
        for i in range(16)
        for k in ("fact", "intent")
    ]
    fig = P.config_heatmap(pd.DataFrame(rows))
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["view · progressive", "view · other strategies"]
    assert [len(ax.get_yticklabels()) for ax in panels] == [8, 8]
    # 12 rows or fewer stay in one panel
    assert len([ax for ax in P.config_heatmap(pd.DataFrame(rows[:24])).axes if ax.images]) == 1


def test_drift_curves_label_runs_by_configuration(probes: pd.DataFrame) -> None:
    fig = P.drift_curves(probes, labels={"t1--a": "harness9-default (view)", "t1--b": "tight (view)"})
    assert len(fig.axes) == 2
    assert [len(ax.lines) for ax in fig.axes] == [2, 2]
    y = fig.axes[1].lines[0].get_ydata()
    assert list(y) == pytest.approx([1.0, 0.8, 0.6, 0.4])
    (lg,) = fig.legends
    assert [t.get_text() for t in lg.get_texts()] == ["harness9-default (view)", "tight (view)"]
    _assert_legends_clear(fig)


def _config_rows(n_configs: int, modes: tuple[str, ...] = ("view", "write_back")) -> pd.DataFrame:
    rows = []
    for mode in modes:
        for c in range(n_configs):
            for t in range(3):
                rows.append(
                    {
                        "run_id": f"t{t}--c{c}--{mode}",
                        "task_id": f"t{t}",
                        "label": f"cfg-{c:02d}",
                        "policy_kind": "progressive" if c % 2 else "window",
                        "history_mode": mode,
                        "tokens_saved": 0.2 + 0.01 * c + 0.005 * t,
                        "retention": 0.975 - 0.005 * c + 0.01 * t,
                        "overflows": int(c == 3),
                    }
                )
        for kind, ts, ret in (("keep_all", 0.0, 1.0), ("drop_all", 0.95, 0.05)):
            for t in range(3):
                rows.append(
                    {
                        "run_id": f"t{t}--{kind}--{mode}",
                        "task_id": f"t{t}",
                        "label": kind,
                        "policy_kind": kind,
                        "history_mode": mode,
                        "tokens_saved": ts,
                        "retention": ret,
                        "overflows": 0,
                    }
                )
    return pd.DataFrame(rows)


def _row_labels(ax) -> list[str]:  # type: ignore[no-untyped-def]
    return [t.get_text() for t in ax.get_yticklabels() if t.get_text()]


def test_strategy_comparison_ranks_configs_and_draws_controls_as_lines() -> None:
    fig = P.strategy_comparison(_config_rows(5), n=200)
    axes = fig.axes
    assert len(axes) == 4  # (retention, tokens saved) x (view, write_back)
    assert [ax.get_title(loc="left") for ax in axes] == [
        "view mode: retention",
        "view mode: tokens saved",
        "write_back mode: retention",
        "write_back mode: tokens saved",
    ]
    ret = axes[0]
    # ranked by retention, best on top; the controls are not rows
    ticks = sorted(((t.get_position()[1], t.get_text()) for t in ret.get_yticklabels()), reverse=True)
    assert [name for _, name in ticks] == ["cfg-00", "cfg-01", "cfg-02", "cfg-03 (overflow)", "cfg-04"]
    assert len(ret.containers) == 5
    # keep_all (retention 1.0) is a reference line inside the range; drop_all (0.05) is named at the edge
    assert any(ln.get_gid() == "control-keep_all" and ln.get_xdata()[0] == pytest.approx(1.0) for ln in ret.lines)
    assert any(t.get_gid() == "control-drop_all-offscale" and "0.05" in t.get_text() for t in ret.texts)
    lo, hi = ret.get_xlim()
    assert lo > 0.5  # the off-scale control does not squeeze the configurations into a corner
    _assert_legends_clear(fig)


def test_strategy_comparison_caps_labelled_rows_per_panel() -> None:
    fig = P.strategy_comparison(_config_rows(30, modes=("view",)), n=100)
    panels = [ax for ax in fig.axes if _row_labels(ax)]
    assert all(len(_row_labels(ax)) <= 12 for ax in panels)
    assert sum(len(_row_labels(ax)) for ax in panels) == 30  # every configuration is somewhere
    titles = [ax.get_title(loc="left") for ax in panels]
    assert any("progressive" in t for t in titles) and any("other strategies" in t for t in titles)
    _assert_legends_clear(fig)


def test_summarizer_cost() -> None:
    rm = pd.DataFrame(
        {
            "run_id": [f"t{i}--{c}" for c in "ab" for i in range(3)],
            "label": ["A"] * 3 + ["B"] * 3,
            "summarizer_calls": [1, 2, 3, 4, 5, 6],
            "summarizer_cost_usd": [0.0] * 6,
        }
    )
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
    comps = pd.DataFrame(
        {
            "session_id": ["s"] * 3,
            "record_index": [0, 1, 2],
            "tokens_before": [900, 950, 990],
            "tokens_after": [400, 500, 100],
            "tier_name": ["soft", "full", "emergency"],
            "error": ["", "", "emergency fallback"],
        }
    )
    fig = P.records_token_curve(comps)
    assert {"compaction-soft", "compaction-full", "compaction-emergency", "error"} <= _gids(fig)
    ev = pd.DataFrame(
        {
            "stage": ["grid", "grid", "refine1"],
            "tokens_saved": [0.1, 0.2, 0.15],
            "retention": [0.8, 0.7, 0.85],
            "feasible": [True, False, True],
            "best": [False, False, True],
        }
    )
    assert {"feasible-grid", "infeasible-grid", "feasible-refine1", "best"} <= _gids(P.tune_evidence(ev))


def test_no_pyplot_state() -> None:
    import sys

    # the module builds Figures directly; pyplot (global figure manager) is never needed
    P.token_curve(calls_frame("x--a", ["none", "warn"]))
    assert "matplotlib.pyplot" not in sys.modules or not __import__("matplotlib.pyplot").pyplot.get_fignums()
