"""The report's trust and comparison sections
(and the numbers behind them in analysis.headline / analysis.validity) on a
real tiny sweep: 8 synthetic tasks x (harness9's default, the anti-thrash option, the default
under the legacy emergency rule, drop_all), view mode, a window small enough that every run
compacts. Numbers are checked against independent computations from the sweep's own tables."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from h9eval.analysis import headline as H
from h9eval.analysis.report import open_loop as OL
from h9eval.analysis.report import trust as TR
from h9eval.analysis import validity as V
from h9eval.analysis.compare import run_table
from h9eval.analysis.stats import VERDICT_DEFINITIONS
from h9eval.probes.placebo import placebo_by_kind, placebo_table, sweep_placebo, with_placebo
from h9eval.results.store import load_results
from h9eval.sweeps.sweep import sweep

WINDOW = 6000
N_TASKS = 8
CONFIGS = {"harness9-default", "thrash", "legacy", "drop_all"}


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec: dict[str, Any] = {
        "name": "t-sections",
        "window": WINDOW,
        "tasks": {"synthetic": [{"preset": "small", "seeds": list(range(N_TASKS))}]},
        "policies": [
            {"kind": "progressive", "name": "harness9-default", "params": {"context_window_tokens": WINDOW}},
            {
                "kind": "progressive",
                "name": "thrash",
                "params": {"context_window_tokens": WINDOW, "anti_thrash_frac": 0.1},
            },
            {
                "kind": "progressive",
                "name": "legacy",
                "params": {"context_window_tokens": WINDOW, "forced_truncation": "legacy_last1"},
            },
            {"kind": "drop_all"},
        ],
        "history_modes": ["view"],
        "probes": {"scorers": ["recall"], "every_k": 10},
    }
    out = tmp_path_factory.mktemp("sec") / "t-sections"
    r = sweep(spec, out_dir=out, workers=0, progress=False)
    assert (r.n_cells, r.ok) == (N_TASKS * 4, N_TASKS * 4)
    return out


@pytest.fixture(scope="module")
def res(results_dir: Path) -> Any:
    r = load_results(results_dir)
    assert (r.runs["n_compactions"] > 0).all()  # every run compacted: the sections have something to judge
    return r


@pytest.fixture(scope="module")
def placebo(res: Any) -> Any:
    return V.placebo_for(res, seed=0)


def _md(sections: list[Any]) -> str:
    out = []
    for s in sections:
        out.append(s.title)
        for kind, payload in s.blocks:
            if kind == "table":
                df, cap = payload
                out += [cap, df.to_string()]
            elif kind != "figure":
                out.append(str(payload))
    return "\n".join(out)


def _table(section: Any, caption_start: str) -> Any:
    for kind, payload in section.blocks:
        if kind == "table" and payload[1].startswith(caption_start):
            return payload[0]
    raise AssertionError(f"no table captioned {caption_start!r}")


# -- headline ------------------------------------------------------------------------------------
def test_default_and_legacy_variant_are_found(res: Any) -> None:
    t = run_table(res)
    assert set(t["config"]) == CONFIGS
    assert H.default_config(t) == "harness9-default"
    assert H.legacy_variant(t, "harness9-default") == "legacy"
    assert H.legacy_variant(t, "thrash") is None


def test_headline_is_task_paired_against_the_default_and_one_family(res: Any) -> None:
    h = H.versus_default(res, n_resamples=300)
    assert h is not None and h.baselines == ("harness9-default",)
    assert {c.a for c in h.comparisons} == CONFIGS - {"harness9-default"}
    assert all(c.family_size == 6 and c.method == "holm" for c in h.comparisons)  # 3 configs x 2 metrics
    # independent: per-task means from the run table, then the mean of the differences
    t = run_table(res)
    per = t.pivot_table(index="task_id", columns="config", values="retention", aggfunc="mean")
    c = next(c for c in h.comparisons if c.a == "drop_all" and c.metric == "retention")
    assert c.n_tasks == N_TASKS
    assert c.mean_diff == pytest.approx(float((per["drop_all"] - per["harness9-default"]).mean()))
    assert c.n_differ == int(((per["drop_all"] - per["harness9-default"]) != 0).sum())
    assert c.verdict == "worse"  # drop_all loses nearly everything on every task
    assert h.frame()["n_tasks_compacted"].eq(N_TASKS).all()


def test_headline_section_states_method_family_and_words(res: Any) -> None:
    (s,) = OL.headline_sections(res, n_resamples=300)
    md = _md([s])
    assert "Holm-adjusted over a family of 6 comparisons" in md
    for word, meaning in VERDICT_DEFINITIONS.items():
        assert f"“{word}”: {meaning}." in md
    tab = _table(s, "Metrics:")
    assert list(tab["configuration"]) == ["drop_all", "legacy", "thrash"]
    assert tab.loc[tab["configuration"] == "drop_all", "retention verdict"].item() == f"worse ({N_TASKS}/{N_TASKS})"
    assert (tab["tasks compacted"] == f"{N_TASKS}/{N_TASKS}").all()
    assert "Overflowed the window" not in md and H.overflowing(run_table(res)) == {}
    fake = pd.DataFrame({"config": ["a", "a", "b"], "overflows": [2.0, 1.0, 0.0]})
    assert H.overflowing(fake) == {"a": 3}


def test_no_default_is_said_not_invented(res: Any) -> None:
    keep = res.runs["policy_name"] != "harness9-default"
    r = dataclasses.replace(res, runs=res.runs[keep & (res.runs["policy_name"] != "legacy")])
    assert H.versus_default(r) is None
    (s,) = OL.headline_sections(r, n_resamples=100)
    assert "No harness9-default configuration" in _md([s])


# -- options -------------------------------------------------------------------------------------
def test_option_section_judges_targets_with_a_guard_and_never_says_does_not_help(res: Any) -> None:
    (s,) = OL.option_sections(res, n_resamples=300)
    assert s.title == OL.OPTIONS_TITLE
    md = _md([s])
    assert "does not help" not in md and "Holm-adjusted" in md
    tab = _table(s, "One row per option")
    rows = {(r["role"], r["metric"]) for r in tab.to_dict("records") if r["option"] == "anti_thrash_frac=0.1"}
    assert rows == {("target", "summarizer_calls"), ("target", "emergencies"), ("guard", "retention")}
    # the legacy variant is not an improvement option: it is not judged here
    assert not tab["option"].str.contains("forced_truncation").any()
    calls = tab[(tab["metric"] == "summarizer_calls")].iloc[0]
    t = run_table(res)
    per = t.groupby(["config", "task_id"])["summarizer_calls"].mean().groupby(level="config").mean()
    assert calls["baseline"] == pytest.approx(per["harness9-default"]) and calls["with option"] == pytest.approx(
        per["thrash"]
    )
    assert f"/{N_TASKS}" in calls["tasks differ"]


# -- probe validity ---------------------------------------------------------------------------------
def test_placebo_floor_matches_the_placebo_module(res: Any, placebo: Any) -> None:
    tasks = V.sweep_tasks(res)
    assert len(tasks) == N_TASKS
    table = placebo_table(sweep_placebo(tasks))  # what the sweep applied: every unrelated task, synthetic ones up to 8
    # the report counts the probes these results asked (the shared checkpoint grid's)
    asked = set(zip(res.probes["task_id"].astype(str), res.probes["probe_id"].astype(str)))
    table = table[[k in asked for k in zip(table["task_id"].astype(str), table["probe_id"].astype(str))]]
    indep = placebo_by_kind(table).set_index("probe_kind")
    pv = V.probe_validity(res, placebo).set_index("probe_kind")
    for k in indep.index:
        assert pv.loc[k, "placebo_rate"] == pytest.approx(indep.loc[k, "placebo_rate"])
        assert pv.loc[k, "n_excluded"] == indep.loc[k, "n_excluded"]
    assert pv["n_excluded"].sum() > 0  # synthetic tried-solution error names pass by chance


def test_pinned_rows_are_reported_apart(res: Any, placebo: Any) -> None:
    pv = V.probe_validity(res, placebo).set_index("probe_kind")
    p = res.probes
    p = p[(p["method"] == "recall") & (p["scope"] == "view") & p["answerable"].astype(bool)]
    excl = {(a, b) for a, b, e in zip(placebo["task_id"], placebo["probe_id"], placebo["excluded"]) if e}
    p = p[[(a, b) not in excl for a, b in zip(p["task_id"], p["probe_id"])]]
    kt = p[p["probe_kind"] == "key_terms"]
    assert kt["answer_pinned"].any()
    assert pv.loc["key_terms", "n_pinned_rows"] == int(kt["answer_pinned"].sum())
    assert pv.loc["key_terms", "retention_pinned"] == pytest.approx(
        kt.loc[kt["answer_pinned"].astype(bool), "score"].mean()
    )
    art = p[p["probe_kind"] == "artifact"]
    assert pv.loc["artifact", "retention_unpinned"] == pytest.approx(
        art.loc[~art["answer_pinned"].astype(bool), "score"].mean()
    )


def test_placebo_columns_in_the_rows_are_used_when_present(res: Any, placebo: Any) -> None:
    r = dataclasses.replace(res, probes=with_placebo(res.probes, placebo))
    rows = V.placebo_for(r)
    assert rows.attrs["source"] == "probe rows"
    a = V.probe_validity(r).set_index("probe_kind")
    b = V.probe_validity(res, placebo).set_index("probe_kind")
    assert (a["n_excluded"] == b["n_excluded"]).all()
    assert (a["retention_kept"].fillna(-1) == b["retention_kept"].fillna(-1)).all()


def test_probe_validity_section_counts_exclusions_and_flags_chance(res: Any, placebo: Any) -> None:
    (s,) = TR.probe_validity_sections(res, placebo)
    md = _md([s])
    n = int(V.probe_validity(res, placebo)["n_excluded"].sum())
    assert f"{n} of " in md and "excluded by the placebo control" in md
    assert "Near chance" in md and "tried_solution" in md
    assert "Pinned answers" in md and "pinning, not memory" in md


# -- summarizer and scope ---------------------------------------------------------------------------
def test_provenance_names_the_summarizer_and_shows_summary_only_retention(res: Any) -> None:
    (s,) = TR.provenance_sections(res)
    md = _md([s])
    assert "Summarizer: offline" in md and "rank compaction mechanisms" in md
    sc = V.scope_retention(res).set_index("config")
    assert math.isnan(sc.loc["drop_all", "anchors_retention"])  # never called the summarizer
    t = run_table(res)
    p = res.probes
    a = p[
        (p["scope"] == "anchors")
        & (p["method"] == "recall")
        & p["answerable"].astype(bool)
        & ~p["answer_pinned"].astype(bool)
        & ~p["placebo_excluded"].astype(bool)
    ]
    a = a.merge(t[["run_id", "config"]], on="run_id")
    d = a[a["config"] == "harness9-default"].groupby("task_id")["score"].mean().mean()
    assert sc.loc["harness9-default", "anchors_retention"] == pytest.approx(d)
    assert sc.loc["harness9-default", "view_retention"] > sc.loc["harness9-default", "anchors_retention"]


# -- emergency rule -------------------------------------------------------------------------------------
def test_emergency_share_and_the_comparison_under_legacy(res: Any) -> None:
    es = V.emergency_share(res).set_index("config")
    p = res.probes
    p = p[(p["scope"] == "view") & (p["method"] == "recall") & p["answerable"].astype(bool)]
    runs = set(run_table(res).query("config == 'harness9-default'")["run_id"])
    cp = p[p["run_id"].isin(runs)].drop_duplicates(["run_id", "checkpoint_call_index"])
    assert es.loc["harness9-default", "n_checkpoints"] == len(cp)
    assert es.loc["harness9-default", "emergency_frac"] == pytest.approx(
        (cp["tier_at_checkpoint"] == "emergency").mean()
    )
    (s,) = OL.emergency_sections(res, n_resamples=300)
    md = _md([s])
    assert "reconstructed" in md and "of its checkpoints" in md
    tab = _table(s, "The retention comparison")
    assert list(tab["configuration"]) == ["drop_all", "thrash"]
    assert {"verdict (anchor_greedy_v3)", "verdict (legacy_last1)"} <= set(tab.columns)
    assert "legacy vs harness9-default directly" in md


# -- llm scorer -----------------------------------------------------------------------------------------
def _with_llm_rows(res: Any) -> Any:
    p = res.probes
    facts = p[(p["probe_kind"] == "fact") & (p["scope"] == "view") & (p["method"] == "recall")].head(40).copy()
    judge = facts.assign(method="llm")
    exact = facts.assign(method="llm_exact")
    exact.iloc[:5, exact.columns.get_loc("passed")] = ~exact.iloc[:5]["passed"].astype(bool)  # 5 disagreements
    return dataclasses.replace(res, probes=pd.concat([p, judge, exact], ignore_index=True))


def test_llm_section_reports_agreement_with_n_and_the_audit(res: Any) -> None:
    assert TR.llm_sections(res) == []  # the scorer did not run
    r = _with_llm_rows(res)
    overall, per = V.llm_agreement(r)
    assert overall.n == 40 and overall.agreement == pytest.approx(35 / 40)
    assert per["n"].sum() == 40
    audit = pd.DataFrame(
        [
            {
                "role": "answer",
                "verdict": math.nan,
                "cache_hit": False,
                "input_tokens": 100,
                "output_tokens": 5,
                "cost_usd": 0.001,
            },
            {
                "role": "judge",
                "verdict": 1.0,
                "cache_hit": True,
                "input_tokens": 50,
                "output_tokens": 1,
                "cost_usd": 0.0005,
            },
            {
                "role": "judge",
                "verdict": 0.0,
                "cache_hit": False,
                "input_tokens": 50,
                "output_tokens": 1,
                "cost_usd": 0.0005,
            },
        ]
    )
    (s,) = TR.llm_sections(r, audit)
    md = _md([s])
    assert "87.5% of n=40" in md
    summ = V.audit_summary(audit).set_index("role")
    assert (
        summ.loc["all", "n"] == 3
        and summ.loc["judge", "judge_yes"] == 1
        and summ.loc["all", "cost_usd"] == pytest.approx(0.002)
    )
    assert summ.loc["all", "cache_hits"] == 1
    (s,) = TR.llm_sections(r, audit.assign(cost_usd=[0.001, math.nan, 0.0005]))
    assert " unpriced " in _md([s])


def test_llm_audit_cost_of_an_unpriced_reply_is_unknown_never_zero() -> None:
    audit = pd.DataFrame(
        [
            {
                "role": "answer",
                "verdict": math.nan,
                "cache_hit": False,
                "input_tokens": 100,
                "output_tokens": 5,
                "cost_usd": 0.001,
            },
            {
                "role": "judge",
                "verdict": 1.0,
                "cache_hit": False,
                "input_tokens": 50,
                "output_tokens": 1,
                "cost_usd": math.nan,
            },
        ]
    )
    summ = V.audit_summary(audit).set_index("role")
    assert summ.loc["answer", "cost_usd"] == pytest.approx(0.001)
    assert math.isnan(summ.loc["judge", "cost_usd"]) and math.isnan(summ.loc["all", "cost_usd"])
