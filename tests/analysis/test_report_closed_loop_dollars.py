"""Billed dollars beside tokens in the closed-loop report sections, on a small fixed table."""

from __future__ import annotations

import dataclasses
import math
import types

import pandas as pd
import pytest

from h9eval.analysis.episodes import success_cost
from h9eval.analysis.report.closed_loop import success_sections, tier_sections
from h9eval.analysis.report.context import ReportContext

_ZERO = (
    "excess_steps",
    "duplicate_side_effects",
    "wrong_side_effects",
    "violations_after_compaction",
    "protocol_errors",
    "refetches_wasted",
)


def _row(run: str, config: str, family: str, seed: int, tokens: int, usd: float) -> dict[str, object]:
    return {
        "run_id": run,
        "agent_id": "scripted:full",
        "policy_name": config,
        "params_json": "{}",
        "summarizer": "offline",
        "history_mode": "write_back",
        "task_id": f"world-{family}-{seed}",
        "world_kind": family,
        "world_params": "",
        "seed": seed,
        "success": True,
        "tokens_sent_sum": tokens,
        "steps": 3,
        "hard_failure": False,
        "hallucinated_completion": False,
        "loop_detected": False,
        "terminated_by": "done",
        "failure": "",
        "summarizer_cost_usd": 0.0,
        "cost_usd": usd,
        "cache_read_share": 0.9,
        **dict.fromkeys(_ZERO, 0),
    }


# h9: family w1 (two seeds, $0.1 and $0.3: family mean 0.2) and w2 ($0.5): over families 0.35, over
# episodes 0.3; keep_all: one unpriced episode
EPISODES = pd.DataFrame(
    [
        _row("a", "h9", "w1", 0, 100, 0.1),
        _row("b", "h9", "w1", 1, 300, 0.3),
        _row("c", "h9", "w2", 0, 200, 0.5),
        _row("d", "keep_all", "w1", 0, 400, 0.4),
        _row("e", "keep_all", "w1", 1, 400, math.nan),
        _row("f", "keep_all", "w2", 0, 400, 0.6),
    ]
)


def _ctx() -> ReportContext:
    calls = pd.DataFrame({"run_id": list("abcdef"), "tier_name": ["soft", "none", "full", "none", "none", "none"]})
    results = types.SimpleNamespace(episodes=EPISODES, runs=pd.DataFrame(), calls=calls, ledger=pd.DataFrame())
    return ReportContext(
        results=results,
        res=results,
        rm=pd.DataFrame(),  # type: ignore[arg-type]
        cm=pd.DataFrame(),
        names={},
        n_boot=400,
        seed=0,
    )


def test_success_cost_dollars_take_the_world_as_the_unit_with_an_interval() -> None:
    sc = success_cost(EPISODES.assign(config=EPISODES["policy_name"]), n_boot=400).set_index("config")
    assert sc.loc["h9", "cost_usd"] == pytest.approx(0.35)  # not the episode mean 0.3
    # two worlds: every resampled mean is 0.2, 0.35 or 0.5, so the 95 % interval spans the two worlds
    assert sc.loc["h9", "cost_usd_lo"] == pytest.approx(0.2) and sc.loc["h9", "cost_usd_hi"] == pytest.approx(0.5)
    assert math.isnan(sc.loc["keep_all", "cost_usd"]) and math.isnan(sc.loc["keep_all", "cost_usd_lo"])


def _table(section: object, needle: str) -> pd.DataFrame:
    tables = [b[1][0] for b in section.blocks if b[0] == "table"]  # type: ignore[attr-defined]
    return next(t for t in tables if needle in " ".join(map(str, t.columns)))


def test_success_section_shows_billed_dollars_beside_tokens_and_unpriced_for_nan() -> None:
    (s,) = success_sections(_ctx())
    t = _table(s, "billed USD").set_index("configuration")
    assert list(t.columns).index("billed USD [95% CI]") == list(t.columns).index("tokens sent [95% CI]") + 1
    assert t.loc["h9", "billed USD [95% CI]"] == "0.35 [0.2, 0.5]"
    assert t.loc["keep_all", "billed USD [95% CI]"] == "unpriced"


def test_tier_section_shows_dollars_per_configuration_and_per_family() -> None:
    (s,) = tier_sections(_ctx())
    pooled = _table(s, "billed USD per episode").set_index("configuration")
    assert pooled.loc["h9", "billed USD per episode"] == "$0.35"
    assert pooled.loc["h9", "tokens sent per episode"] == "200"
    assert pooled.loc["keep_all", "billed USD per episode"] == "unpriced"
    fam = _table(s, "w2").set_index("configuration")
    assert fam.loc["h9", "w1"].endswith("| $0.2") and fam.loc["h9", "w2"].endswith("| $0.5")
    assert fam.loc["keep_all", "w1"].endswith("| unpriced") and fam.loc["keep_all", "w2"].endswith("| $0.6")


def _answer(section: object) -> dict[str, str]:
    (t,) = [b[1][0] for b in section.blocks if b[0] == "table"]  # type: ignore[attr-defined]
    return dict(zip(t["what"], t["value"]))


@pytest.mark.parametrize(("usd", "shown"), [(0.01234, "$0.01234"), (math.nan, "unpriced")])
def test_one_run_and_one_episode_answers_show_billed_dollars(usd: float, shown: str) -> None:
    from h9eval.analysis.report.run import episode_answer_section, run_answer_section

    rm = pd.DataFrame(
        [
            {
                "label": "h9",
                "task_id": "t",
                "history_mode": "view",
                "tokens_saved": 0.5,
                "retention": 0.9,
                "cost_usd": usd,
            }
        ]
    )
    res = types.SimpleNamespace(
        manifest={},
        episodes=EPISODES.iloc[:1].assign(
            cost_usd=usd,
            context_window_tokens=8000,
            subgoals_reached=1,
            subgoals_total=1,
            tokens_sent_peak=60,
            n_compactions=1,
            policy_kind="progressive",
        ),
    )
    ctx = ReportContext(
        results=res,
        res=res,
        rm=rm,
        cm=pd.DataFrame(),  # type: ignore[arg-type]
        names={},
        n_boot=10,
        seed=0,
    )
    (run,) = run_answer_section(ctx)
    (episode,) = episode_answer_section(ctx)
    for section in (run, episode):
        assert _answer(section)["billed USD (agent and summarizer calls)"] == shown


def test_dollars_are_paired_against_the_baseline_per_world_and_only_when_every_episode_is_priced() -> None:
    priced = EPISODES.assign(config=EPISODES["policy_name"], cost_usd=EPISODES["cost_usd"].fillna(0.4))
    sc = success_cost(priced, n_boot=400).set_index("config")
    # per world: w1 0.2 - 0.4, w2 0.5 - 0.6; the mean over worlds of the paired differences
    assert sc.loc["h9", "cost_diff"] == pytest.approx(-0.15) and sc.loc["h9", "cost_verdict"] != ""
    unpriced = success_cost(EPISODES.assign(config=EPISODES["policy_name"]), n_boot=400).set_index("config")
    assert math.isnan(unpriced.loc["h9", "cost_diff"])  # not paired on the priced episodes only


@pytest.mark.parametrize("priced", [True, False])
def test_the_closed_loop_answer_has_a_dollars_target_when_every_episode_is_priced(priced: bool) -> None:
    from h9eval.analysis.report.answer import ANSWER_TARGETS
    from h9eval.results.store import runs_frame

    names = {"h9": "harness9-default", "keep_all": "early"}
    ep = EPISODES.assign(policy_name=EPISODES["policy_name"].map(names), policy_kind="progressive")
    if priced:
        ep = ep.assign(cost_usd=ep["cost_usd"].fillna(0.4))
    runs = runs_frame(
        [
            {
                "run_id": r,
                "task_id": t,
                "policy_name": n,
                "policy_kind": "progressive",
                "params_json": "{}" if n == "harness9-default" else '{"soft_frac": 0.4}',
                "history_mode": "write_back",
                "summarizer": "offline",
                "status": "ok",
            }
            for r, t, n in zip(ep["run_id"], ep["task_id"], ep["policy_name"])
        ]
    )
    res = types.SimpleNamespace(episodes=ep, runs=runs, calls=pd.DataFrame(), ledger=pd.DataFrame())
    ctx = ReportContext(
        results=res,
        res=res,
        rm=pd.DataFrame(),
        cm=pd.DataFrame(),  # type: ignore[arg-type]
        names=dict(zip(ep["run_id"], ep["policy_name"])),
        n_boot=200,
        seed=0,
    )
    rows, verdicts = ANSWER_TARGETS[1](ctx)
    dollars = [r for r in rows if r.target == "dollars per task"]
    if not priced:
        assert not dollars and "dollars per task" not in verdicts[0].by_config["early"]
        return
    # early: w1 0.4, w2 0.6 -> 0.5 over worlds; the default 0.35; paired per world: +0.2 and +0.1
    (row,) = dollars
    assert row.best == "early" and not row.higher_is_better
    assert (row.value, row.default_value, row.diff) == pytest.approx((0.5, 0.35, 0.15))
    assert verdicts[0].by_config["early"]["dollars per task"][1] == pytest.approx(0.5)


def test_success_section_draws_the_frontier_in_dollars_leaving_unpriced_configurations_out() -> None:
    (s,) = success_sections(_ctx())
    figures = {b[1][0]: b[1][1] for b in s.blocks if b[0] == "figure"}
    ax = figures["closedloop_frontier_usd"].axes[0]
    assert ax.get_xlabel().startswith("billed USD") and [t.get_text() for t in ax.texts] == ["h9"]
    assert float(ax.texts[0].xy[0]) == pytest.approx(0.35)  # the point is named where it is drawn
    assert sorted(t.get_text() for t in figures["closedloop_frontier"].axes[0].texts) == ["h9", "keep_all"]


def test_run_world_prints_unpriced_for_unknown_dollars() -> None:
    from h9eval.runs.world import format_episode, run_world

    run = run_world("ticket_queue:0", max_steps=3)
    priced = format_episode(run)
    assert "cost_usd: unpriced" not in priced and "cost_usd: nan" not in priced
    unknown = run.episodes.assign(cost_usd=math.nan, summarizer_cost_usd=None)
    unpriced = format_episode(dataclasses.replace(run, episodes=unknown))
    assert "                    cost_usd: unpriced" in unpriced and "summarizer_cost_usd: unpriced" in unpriced
