"""metrics: small hand-built tables with known answers."""

from __future__ import annotations

import json
import math

import pandas as pd
import numpy as np
import pytest

from h9eval.analysis import metrics as M


def calls_frame(
    run_id: str, tiers: list[str], *, sent: list[int] | None = None, hist: list[int] | None = None, **cols: list
) -> pd.DataFrame:
    n = len(tiers)
    d = {
        "run_id": [run_id] * n,
        "task_id": [run_id.split("--")[0]] * n,
        "policy_kind": ["progressive"] * n,
        "params_hash": ["h"] * n,
        "history_mode": ["view"] * n,
        "call_index": list(range(n)),
        "context_window_tokens": [1000] * n,
        "history_tokens": hist or [100 * (i + 1) for i in range(n)],
        "tokens_sent": sent or [50 * (i + 1) for i in range(n)],
        "raw_tokens_sent": hist or [100 * (i + 1) for i in range(n)],
        "tier_name": tiers,
        "compacted": [t != "none" for t in tiers],
        "overflow": [False] * n,
        "forced_truncation": [t == "emergency" for t in tiers],
        "fallback": [False] * n,
        "offloads_tool_time_count": [0] * n,
        "offloads_compaction_count": [0] * n,
        "summarizer_calls": [1 if t in ("soft", "full") else 0 for t in tiers],
        "summarizer_input_tokens": [0] * n,
        "summarizer_output_tokens": [0] * n,
        "summarizer_cost_usd": [0.01 if t in ("soft", "full") else 0.0 for t in tiers],
    }
    d.update(cols)
    return pd.DataFrame(d)


def test_bootstrap_ci_is_seeded_and_sane() -> None:
    v = [0.1, 0.5, 0.9, 0.3, 0.7]
    a, b = M.bootstrap_ci(v, seed=3), M.bootstrap_ci(v, seed=3)
    assert a == b and a.lo <= a.mean <= a.hi and a.n == 5
    assert math.isclose(a.mean, 0.5)
    assert M.bootstrap_ci([0.4]).lo == 0.4 == M.bootstrap_ci([0.4]).hi
    # independently: n resamples of len(v) draws with replacement, numpy's linear quantiles
    x = np.asarray([float(t) for t in v])
    ref = x[np.random.default_rng(3).integers(0, len(x), size=(1000, len(x)))].mean(axis=1)
    assert (a.lo, a.hi) == pytest.approx(tuple(np.quantile(ref, [0.025, 0.975])))
    assert M.bootstrap_ci([]).n == 0 and math.isnan(M.bootstrap_ci([float("nan")]).mean)
    wide, narrow = M.bootstrap_ci(v, level=0.99), M.bootstrap_ci(v, level=0.5)
    assert wide.hi - wide.lo > narrow.hi - narrow.lo


def test_tokens_saved_and_transitions() -> None:
    c = pd.concat(
        [calls_frame("t1--a", ["none", "warn", "soft", "soft", "full"]), calls_frame("t1--b", ["none", "none"])]
    )
    ts = M.tokens_saved(c).set_index("run_id")
    assert math.isclose(ts.loc["t1--a", "tokens_saved"], 0.5)
    m = M.tier_transitions(c)
    assert m.loc["none", "warn"] == 1 and m.loc["soft", "soft"] == 1 and m.loc["soft", "full"] == 1
    assert m.loc["none", "none"] == 1 and int(m.to_numpy().sum()) == 5  # 4 + 1 consecutive pairs
    assert list(m.index) == list(M.TIER_NAMES)
    assert math.isclose(M.tier_transitions(c, normalize=True).loc["soft"].sum(), 1.0)


def test_tokens_saved_is_against_the_uncompacted_transcript_not_the_history() -> None:
    """A write-back run: its history shrinks after the compaction, so 1 - sent/history says
    it saves nothing (here: -0.1), while against the raw transcript it saves sent/raw. Checked
    against a hand computation, with the peak ratio to the window."""
    c = calls_frame(
        "t--wb", ["none", "soft", "none"], sent=[110, 60, 80], hist=[100, 50, 70], raw_tokens_sent=[110, 210, 310]
    )
    ts = M.tokens_saved(c).set_index("run_id")
    assert math.isclose(ts.loc["t--wb", "tokens_saved"], 1 - (110 + 60 + 80) / (110 + 210 + 310))
    assert ts.loc["t--wb", "peak_tokens_sent"] == 110 and math.isclose(ts.loc["t--wb", "peak_ratio_to_window"], 0.11)
    assert math.isclose(ts.loc["t--wb", "mean_raw_tokens_sent"], 210.0)
    # a calls table written before raw_tokens_sent existed: unknown, not a number against another baseline
    assert math.isnan(M.tokens_saved(c.drop(columns=["raw_tokens_sent"]))["tokens_saved"].iloc[0])
    rm = M.run_metrics(c).set_index("run_id")
    assert rm.loc["t--wb", "tokens_saved"] == ts.loc["t--wb", "tokens_saved"]
    assert rm.loc["t--wb", "n_compactions"] == 1 and not rm.loc["t--wb", "never_compacted"]
    idle = M.run_metrics(calls_frame("u--a", ["none", "none"])).set_index("run_id")
    assert (
        bool(idle.loc["u--a", "never_compacted"])
        and M.config_metrics(M.run_metrics(calls_frame("u--a", ["none"])))["never_compacted_runs"].iloc[0] == 1
    )


def test_retention_uses_answerable_probes_only() -> None:
    p = pd.DataFrame(
        {
            "run_id": ["r"] * 4,
            "task_id": ["t"] * 4,
            "checkpoint_call_index": [0, 0, 1, 1],
            "probe_kind": ["fact", "fact", "intent", "fact"],
            "method": ["recall"] * 4,
            "scope": ["view"] * 4,
            "score": [1.0, float("nan"), 0.5, 0.0],
            "answerable": [True, False, True, True],
        }
    )
    r = M.retention(p).set_index("probe_kind")
    assert r.loc["fact", "retention"] == 0.5 and r.loc["fact", "n_probes"] == 2
    assert M.retention(p, by=("run_id",))["retention"].iloc[0] == pytest.approx(0.5)
    oc = M.retention_over_calls(p, kinds=["fact"])
    assert list(oc["checkpoint_call_index"]) == [0, 1]


def test_pareto_front() -> None:
    df = pd.DataFrame({"x": [0.1, 0.2, 0.3, 0.15, 0.3], "y": [0.9, 0.8, 0.5, 0.7, 0.4], "k": list("abcde")})
    f = M.pareto_front(df, "x", "y")
    assert list(f["k"]) == ["a", "b", "c"]
    assert list(M.pareto_front(df, "x", "y", maximize=(False, True))["k"]) == ["a"]


def test_tier_misclassification() -> None:
    d = pd.DataFrame(
        {
            "history_tokens": [500, 650, 940, 990],
            "history_tokens_bpe": [550, 720, 960, 1010],
            "context_window_tokens": [1000] * 4,
        }
    )
    bad = M.tier_misclassification(d)
    # 650 is soft... no: 0.65 -> warn vs 0.72 -> soft; 940 full vs 960 emergency; 990 vs 1010 crosses the window
    assert list(bad.index) == [1, 2, 3]
    assert list(bad["direction"]) == ["under"] * 3
    assert bool(bad.loc[3, "bpe_over_window"]) and not bool(bad.loc[3, "est_over_window"])
    assert M.tier_of(600, 1000) == "warn" and M.tier_of(599, 1000) == "none"


def test_token_estimate_error() -> None:
    t = pd.DataFrame(
        {
            "kind": ["code", "code", "prose"],
            "bytes": [400, 400, 400],
            "est_tokens": [100.0, 100.0, 100.0],
            "bpe_tokens": [125, 125, 100],
        }
    )
    e = M.token_estimate_error(t).set_index("kind")
    assert e.loc["code", "est_error"] == pytest.approx(-0.2)
    assert e.loc["prose", "est_error"] == pytest.approx(0.0)
    assert e.loc["all", "n_messages"] == 3


def test_run_metrics_option_comparison_and_recommend() -> None:
    base = json.dumps({"context_window_tokens": 1000})
    opt = json.dumps({"context_window_tokens": 1000, "na_safe_merge": True})
    rows = []
    for task, (rb, ro) in {"t1": (0.5, 0.7), "t2": (0.6, 0.75), "t3": (0.4, 0.62)}.items():
        rows.append(
            {
                "run_id": f"{task}--b",
                "task_id": task,
                "policy_kind": "progressive",
                "params_json": base,
                "params_hash": "b",
                "history_mode": "view",
                "summarizer": "offline",
                "retention": rb,
                "tokens_saved": 0.3,
                "overflows": 0,
                "emergencies": 0,
            }
        )
        rows.append(
            {
                "run_id": f"{task}--o",
                "task_id": task,
                "policy_kind": "progressive",
                "params_json": opt,
                "params_hash": "o",
                "history_mode": "view",
                "summarizer": "offline",
                "retention": ro,
                "tokens_saved": 0.3,
                "overflows": 0,
                "emergencies": 0,
            }
        )
    rm = pd.DataFrame(rows)
    rm["label"] = M.config_labels(rm)
    assert set(rm["label"]) == {
        "progressive [context_window_tokens=1000]",
        "progressive [context_window_tokens=1000, na_safe_merge=True]",
    }
    oc = M.option_comparison(rm)
    assert len(oc) == 1 and oc["option"].iloc[0] == "na_safe_merge=True"
    assert oc["retention_verdict"].iloc[0] == "helps" and oc["retention_delta"].iloc[0] == pytest.approx(0.19)
    assert oc["tokens_saved_verdict"].iloc[0] == "negligible"
    cm = M.config_metrics(rm)
    best = M.recommend(cm)
    assert best is not None and "na_safe_merge=True" in best["label"] and "retention" in best["reason"]
    # an overflowing config is never recommended
    rm.loc[rm["params_hash"] == "o", "overflows"] = 1
    best = M.recommend(M.config_metrics(rm))
    assert best is not None and "na_safe_merge" not in best["label"] and best["excluded"]


def test_summarizer_usage_from_calls_and_runs() -> None:
    c = pd.concat([calls_frame("t1--a", ["none", "soft", "full"]), calls_frame("t2--a", ["soft"])])
    u = M.summarizer_usage(c, by="policy_kind")
    assert u["summarizer_calls"].iloc[0] == 3 and u["calls_per_run"].iloc[0] == 1.5
    runs = pd.DataFrame(
        {
            "run_id": ["a", "b"],
            "policy_kind": ["progressive"] * 2,
            "status": ["ok", "ok"],
            "summarizer_calls": [2, 4],
            "summarizer_cost_usd": [0.1, 0.3],
        }
    )
    u2 = M.summarizer_usage(runs)
    assert u2["calls_per_run"].iloc[0] == 3 and u2["cost_per_run_usd"].iloc[0] == pytest.approx(0.2)


def test_anchor_retention_from_compactions() -> None:
    comps = pd.DataFrame(
        {
            "run_id": ["r", "r", "s"],
            "record_index": [0, 1, 0],
            "anchors_json": [
                json.dumps([{"type": "user_intent", "content": "x"}, {"type": "key_decision", "content": "N/A"}]),
                json.dumps([{"type": "user_intent", "content": "x"}, {"type": "key_decision", "content": "- use Go"}]),
                None,
            ],
        }
    )
    w = M.anchor_retention(comps)
    assert list(w.index) == ["user_intent", "key_decision"]
    assert w.loc["key_decision", 0] == 0.0 and w.loc["key_decision", 1] == 1.0


def test_retention_after_compaction_is_a_separate_conditional_view() -> None:
    """The main number is every grid checkpoint; the conditional view only those after the
    first compaction; unknown after_compaction (old rows) never counts as after."""
    p = pd.DataFrame(
        {
            "run_id": ["r"] * 4,
            "checkpoint_call_index": [4, 9, 14, 19],
            "probe_kind": ["fact"] * 4,
            "method": ["recall"] * 4,
            "scope": ["view"] * 4,
            "score": [1.0, 1.0, 0.5, 0.0],
            "answerable": [True] * 4,
            "after_compaction": [False, None, True, True],
        }
    )
    c = calls_frame("r", ["none"] * 20)
    rm = M.run_metrics(c, p).set_index("run_id")
    assert math.isclose(rm.loc["r", "retention"], 2.5 / 4)
    assert math.isclose(rm.loc["r", "retention_after_compaction"], 0.25)
    assert len(M.retention(p.drop(columns=["after_compaction"]), by=("run_id",), after_compaction_only=True)) == 0


def test_recommend_applies_the_emergency_filter() -> None:
    """The best-retention config hit the emergency tier: the recommendation is the best of
    those that did not; only when every config did is one of them recommended (and the reason
    says so)."""
    cm = pd.DataFrame(
        {
            "label": ["a", "b", "c"],
            "retention": [0.95, 0.80, 0.70],
            "tokens_saved": [0.5, 0.4, 0.6],
            "overflows": [0, 0, 0],
            "emergencies": [2, 0, 0],
        }
    )
    best = M.recommend(cm)
    assert best is not None and best["label"] == "b" and "no emergency" in best["reason"]
    every = M.recommend(cm.assign(emergencies=[2, 1, 3]))
    assert every is not None and every["label"] == "a" and "every one of them hit the emergency tier" in every["reason"]
    assert M.recommend(cm.assign(overflows=[1, 1, 1])) is None
