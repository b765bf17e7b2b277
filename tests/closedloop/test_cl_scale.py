"""Worlds at real scale: the size table, the filler, the registry's type rule, the five new
families' state checks, the phrasing-independent agent, and the sweep spec's world/agent forms."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

from h9eval.closedloop.agents import PHRASINGS, ScriptedAgent, make_agent, parse_agent_spec
from h9eval.closedloop.agents.base import Action
from h9eval.closedloop.episode import run_episode
from h9eval.closedloop.worlds import WORLDS, make_world, register_world, world_registry
from h9eval.closedloop.worlds.base import World
from h9eval.closedloop.worlds.filler import (
    FILLER_KINDS,
    SizeTable,
    derive_size_table,
    filler,
    recorded_sizes,
    size_table,
    splice,
)
from h9eval.closedloop.worlds.retail_db import db_hash
from h9eval.core.errors import ConfigError
from h9eval.core.paths import shared_dir
from h9eval.sweeps.spec import load_spec

RECORDED = shared_dir() / "data" / "recorded"  # the one rule for where the shared data is
NONCE = re.compile(r"\b[A-Z]{1,2}-[0-9a-f]{8}\b")
SMALL = {
    "retail_db": {"n_requests": 5, "n_orders": 10, "padding_bytes": 300},
    "constraints": {"n_meetings": 5, "update_after": 2, "padding_bytes": 300},
    "evidence_search": {"n_questions": 3, "n_docs": 40, "padding_bytes": 300},
    "debug_session": {"n_hypotheses": 6, "padding_bytes": 300},
    "artifact_trail": {"n_components": 4, "padding_bytes": 300},
}


# -- sizes and filler ---------------------------------------------------------------------------
def test_size_table_derivation_and_draws() -> None:
    t = derive_size_table([[10, 20, 30], [40], []])
    assert (t.n_results, t.n_sessions) == (4, 2)
    assert t.sizes_bytes[0] == 10 and t.sizes_bytes[-1] == 40
    assert t.draw(0.0) == 10 and t.draw(0.999999) <= 40
    assert SizeTable.from_csv(t.to_csv()) == t
    shipped = size_table()
    assert shipped.n_results > 500 and 500 < shipped.mean_bytes < 5000
    draws = [shipped.draw(u / 100) for u in range(100)]
    assert draws == sorted(draws)


@pytest.mark.skipif(not RECORDED.is_dir(), reason="the recorded sessions are not here")
def test_shipped_size_table_is_derived_from_the_recorded_sessions() -> None:
    assert derive_size_table(recorded_sizes(RECORDED)) == size_table()


def test_filler_is_exact_realistic_and_never_a_nonce() -> None:
    for kind in FILLER_KINDS:
        text = filler(5000, f"seed-{kind}", kind)
        assert len(text.encode()) == 5000 and text == filler(5000, f"seed-{kind}", kind)
        assert not NONCE.search(text) and "log 0" not in text
    assert "::test_" in filler(2000, "a", "test_log") and "def " in filler(2000, "a", "source")
    # informative lines land anywhere, not always first
    places = {
        splice("FACT", filler(800, str(i), "listing"), "anywhere", str(i)).split("\n").index("FACT") for i in range(20)
    }
    assert len(places) > 5 and places != {0}
    assert splice("FACT", "x\ny", "head", "s").startswith("FACT") and splice("FACT", "x\ny", "tail", "s").endswith(
        "FACT"
    )


def test_recorded_sizes_vary_per_call_and_scale_is_capped() -> None:
    w = make_world("debug_session", n_hypotheses=40, result_sizes="recorded", size_scale=20.0)
    w.reset(3)
    sizes = [len(w.step("try_fix", {"hypothesis_id": h["id"]})) for h in w._state["hyps"]]
    assert len(set(sizes)) > 10 and max(sizes) <= size_table().sizes_bytes[-1] + 200


# -- registry ------------------------------------------------------------------------------------
def test_world_registry_is_the_core_registry_with_the_type_rule() -> None:
    assert set(world_registry()) >= {"fact_chain", "mini_repo", "ticket_queue", *SMALL}
    with pytest.raises(ConfigError, match="did you mean 'retail_db'"):
        make_world("retail_bd")
    with pytest.raises(ConfigError, match="world 'ticket_queue': refer_back must be a boolean, got 1"):
        make_world("ticket_queue", refer_back=1)
    with pytest.raises(ConfigError, match="world 'constraints': n_meetings must be an integer, got True"):
        make_world("constraints", n_meetings=True)
    with pytest.raises(ConfigError, match="size_scale must be a number"):
        make_world("fact_chain", size_scale="2")
    with pytest.raises(ConfigError, match="already registered"):
        register_world(type("Dup", (World,), {"kind": "fact_chain"}))
    assert "fact_chain" in WORLDS and all(
        cls.scale.window_tokens >= 32_000 and cls.stresses for cls in world_registry().values()
    )


# -- the new families ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(SMALL))
def test_new_families_keep_all_succeeds_drop_all_fails(kind: str) -> None:
    for seed in (0, 1):
        ok = run_episode(make_world(kind, **SMALL[kind]), ScriptedAgent(), "keep_all", seed=seed, max_steps=80)
        assert ok.success, (kind, seed, ok.outcome.failure, ok.terminated_by)
        bad = run_episode(make_world(kind, **SMALL[kind]), ScriptedAgent(), "drop_all", seed=seed, max_steps=80)
        assert not bad.success


def test_retail_db_is_graded_by_the_database_hash() -> None:
    w = make_world("retail_db", **SMALL["retail_db"])
    w.reset(2)
    s = w._state
    assert db_hash(s["orders"]) != db_hash(s["expected"]) or all(r["kind"] != "postcode" for r in s["requests"])
    delivered = (
        next(r for r in s["requests"] if r["kind"] == "cancel" and s["orders"][r["order"]]["status"] == "delivered")
        if any(r["kind"] == "cancel" and s["orders"][r["order"]]["status"] == "delivered" for r in s["requests"])
        else None
    )
    if delivered is not None:
        w.step("cancel_order", {"order_id": delivered["order"]})  # the policy forbids it
        out = w.check()
        assert (
            not out.success
            and out.failure == "database differs from the expected one"
            and out.violations[0].rule == "no_cancel_delivered"
        )
    # a write to an order no request names changes the hash too
    other = next(o for o in s["orders"] if all(r["order"] != o for r in s["requests"]))
    w2 = make_world("retail_db", **SMALL["retail_db"])
    w2.reset(2)
    w2.step("update_postcode", {"order_id": other, "postcode": "P-00000000"})
    assert w2.check().wrong_side_effects == 1


def test_constraints_counts_stale_values_after_the_update() -> None:
    w = make_world("constraints", n_meetings=4, update_after=1, padding_bytes=0)
    w.reset(2)
    first, second = w._state["rules"]
    m0, m1 = w._state["meetings"][0], w._state["meetings"][1]
    good0 = next(
        x
        for x in m0["slots"]
        if x["room"] == first["room"] and x["day"] != first["banned_day"] and x["cost"] <= first["max_cost"]
    )
    w.step("book", {"meeting_id": m0["id"], "slot_id": good0["id"]})
    assert w.interjection() is not None and not w.check().violations
    # a slot the first rules allowed, on the day the update bans: stale values break the current rule
    stale = [
        x
        for x in m1["slots"]
        if x["day"] == second["banned_day"] and x["day"] != first["banned_day"] and x["cost"] <= first["max_cost"]
    ]
    assert stale
    w.step("book", {"meeting_id": m1["id"], "slot_id": stale[0]["id"]})
    assert [v.rule for v in w.check().violations] == ["constraint"]


def test_evidence_search_is_graded_on_the_evidence_cited() -> None:
    w = make_world("evidence_search", **SMALL["evidence_search"])
    w.reset(1)
    q = w._state["questions"][0]
    rel = sorted(d for d, g in w._state["qrels"][q["id"]].items() if g == 2)
    part = sorted(d for d, g in w._state["qrels"][q["id"]].items() if g == 1)
    assert "search results" in w.step("search", {"query": f"the {q['attr']} of {q['subject']}"})
    w.step("answer", {"question_id": q["id"], "value": q["value"], "evidence": [rel[0], part[0]]})
    assert w.check().subgoals[0].reached is False and w.evidence_scores()[q["id"]] == (0.5, 1 / len(rel))
    w2 = make_world("evidence_search", **SMALL["evidence_search"])
    w2.reset(1)
    w2.step("answer", {"question_id": q["id"], "value": q["value"], "evidence": rel[:1]})
    assert w2.check().subgoals[0].reached


def test_debug_session_counts_retries_of_failed_approaches() -> None:
    w = make_world("debug_session", **SMALL["debug_session"])
    w.reset(0)
    bad = next(h["id"] for h in w._state["hyps"] if h["id"] != w._state["good"])
    w.step("try_fix", {"hypothesis_id": bad})
    w.step("try_fix", {"hypothesis_id": bad})
    w.step("try_fix", {"hypothesis_id": w._state["good"]})
    w.step("commit", {"hypothesis_id": w._state["good"]})
    out = w.check()
    assert not out.success and [v.rule for v in out.violations] == ["no_retry"]


def test_artifact_trail_needs_the_latest_paths_and_digests() -> None:
    w = make_world("artifact_trail", n_components=2, padding_bytes=0)
    w.reset(0)
    refs = []
    for comp in w._state["components"]:
        line = w.step("build", {"component": comp})
        refs.append(re.search(r"built artifact (\S+)", line).group(1))  # type: ignore[union-attr]
    # type: ignore[union-attr]
    rebuilt = re.search(r"built artifact (\S+)", w.step("build", {"component": w._state["components"][0]})).group(1)
    for ref in [rebuilt, refs[1]]:
        w.step("test_artifact", {"path": ref.partition("@")[0]})
    snap = w.snapshot()
    w.step("publish", {"manifest": refs})  # a superseded build
    assert w.check().failure == "manifest wrong"
    w.restore(snap)
    w.step("publish", {"manifest": [rebuilt, refs[1]]})
    out = w.check()
    assert out.success and out.duplicate_side_effects == 1


# -- the agent's wording ---------------------------------------------------------------------------
CUES = re.compile(r"\b(because|decided to|instead of|chose|prefer|the fix is)\b", re.IGNORECASE)


def test_notes_have_no_summarizer_cue_and_phrasing_does_not_change_success() -> None:
    worlds = {
        "fact_chain": {"hops": 3, "gap_steps": 2, "padding_bytes": 600},
        "debug_session": {"n_hypotheses": 5, "padding_bytes": 600},
        "artifact_trail": {"n_components": 3, "padding_bytes": 600},
    }
    outcome: dict[str, list[tuple[str, str, bool, int]]] = {"plain": [], "alt": []}
    for phrasing in outcome:
        agent = ScriptedAgent(phrasing=phrasing)
        for summ in ("offline", "offline_free_text", "offline_recent"):
            for kind, params in worlds.items():
                ep = run_episode(
                    make_world(kind, **params),
                    agent,
                    {"kind": "progressive", "context_window_tokens": 1100},
                    seed=7,
                    summarizer=summ,
                    history_mode="write_back",
                )
                notes = [m.content for m in ep.history if m.is_assistant and m.content]
                assert notes and not any(
                    CUES.search(n.replace("escalate(ticket_id) instead of refund", "")) for n in notes
                )
                outcome[phrasing].append((summ, kind, ep.success, ep.n_compactions))
    assert all(n > 0 for *_, n in outcome["plain"])
    assert [x[:3] for x in outcome["plain"]] == [x[:3] for x in outcome["alt"]]
    assert ScriptedAgent(phrasing="alt").agent_id == "scripted:full,phrasing=alt"


def test_phrasings_differ_and_are_seeded() -> None:
    view = (
        '{"messages":[{"role":"system","content":"s"},{"role":"user","content":"TASK debug_session: find the fix x."},'
        '{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"try_fix","arguments":"{\\"hypothesis_id\\":\\"H-0000000a\\"}"}]},'
        '{"role":"user","content":"hypothesis H-0000000a failed: x","tool_call_id":"c1"}],"tools":[]}'
    )
    a, b = ScriptedAgent(phrasing="plain").act(view), ScriptedAgent(phrasing="alt").act(view)
    assert (
        isinstance(a, Action)
        and a.note != b.note
        and "hypothesis H-0000000a failed" in a.note
        and a.note == ScriptedAgent().act(view).note
    )
    assert (a.tool, a.arguments) == (b.tool, b.arguments)
    fact = "hypothesis H-0000000a failed"
    assert a.note in {t.format(fact=fact) for t in PHRASINGS["plain"]} and b.note in {
        t.format(fact=fact) for t in PHRASINGS["alt"]
    }


# -- specs -----------------------------------------------------------------------------------------
def test_agent_forms() -> None:
    assert parse_agent_spec("scripted:raw_only,phrasing=alt") == ("scripted", "raw_only", {"phrasing": "alt"})
    assert make_agent("scripted:last_k,phrasing=alt").agent_id == "scripted:last_k,k=8,phrasing=alt"
    with pytest.raises(ConfigError, match="did you mean 'phrasing'"):
        make_agent("scripted:phrasng=alt")
    with pytest.raises(ConfigError, match="did you mean 'cassette'"):
        make_agent("anthropic:casette=x.jsonl")
    with pytest.raises(ConfigError, match="max_tokens must be a number"):
        make_agent("anthropic:max_tokens=lots")


def test_spec_carries_scale_windows_and_live_agents(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(
        'name = "x"\nagents = ["scripted", { kind = "anthropic", params = { cassette = "c.jsonl", mode = "replay" } }, '
        '"scripted:raw_only,phrasing=alt"]\n'
        '[tasks]\nworlds = [{ kind = "retail_db", seeds = [1], scale = "default", params = { n_requests = 40 } },'
        ' { kind = "fact_chain", seeds = [2], window = 40000, params = { hops = 3 } }]\n'
        '[[policies]]\nkind = "keep_all"\n',
        encoding="utf-8",
    )
    spec = load_spec(tmp_path / "s.toml")
    rd, fc = spec.worlds
    assert (
        rd.params["n_requests"] == 40
        and rd.params["result_sizes"] == "recorded"
        and rd.window == 32_000
        and rd.max_steps == 300
    )
    assert fc.window == 40_000 and fc.max_steps == 60 and fc.scale == ""
    assert spec.agents[1] == f"anthropic:cassette={(tmp_path / 'c.jsonl').resolve()},mode=replay"
    (tmp_path / "b.toml").write_text(
        'name = "x"\n[tasks]\nworlds = [{ kind = "fact_chain", scale = "big" }]\n[[policies]]\nkind = "keep_all"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"tasks.worlds\[0\].scale"):
        load_spec(tmp_path / "b.toml")


# -- the done criterion at each family's default scale (seeds the other tests never use) -------------
@pytest.mark.slow
def test_default_scale_on_unseen_seeds() -> None:
    seeds = (9001,)
    tiers: collections.Counter[str] = collections.Counter()
    reached, episodes, drop_ok = 0, 0, 0
    for kind, cls in world_registry().items():
        sc = cls.scale
        for seed in seeds:
            keep = run_episode(
                make_world(kind, **sc.params),
                ScriptedAgent(),
                "keep_all",
                seed=seed,
                max_steps=sc.max_steps,
                summarizer=None,
            )
            assert keep.success and keep.n_steps >= 50, (kind, seed, keep.outcome.failure, keep.n_steps)
            drop_ok += run_episode(
                make_world(kind, **sc.params), ScriptedAgent(), "drop_all", seed=seed, max_steps=sc.max_steps
            ).success
            # 160 steps: past every family's first soft/full crossing (an agent that redoes lost work
            # can run on to 300, which adds time and no tier)
            h9 = run_episode(
                make_world(kind, **sc.params),
                ScriptedAgent(),
                {"kind": "progressive", "context_window_tokens": sc.window_tokens},
                seed=seed,
                max_steps=min(sc.max_steps, 160),
                history_mode="write_back",
            )
            tiers.update(s.tier_name for s in h9.steps)
            episodes += 1
            reached += any(s.tier_name in ("soft", "full") for s in h9.steps)
    assert drop_ok <= 0.2 * episodes
    assert tiers["emergency"] < 0.2 * sum(tiers.values())
    assert reached >= 0.8 * episodes, (reached, episodes, dict(tiers))


def test_spec_stress_settings_reach_the_cells(tmp_path: Path) -> None:
    from h9eval.sweeps.cells import expand_cells

    (tmp_path / "s.toml").write_text(
        'name = "x"\n[tasks]\nworlds = [{ kind = "fact_chain", seeds = [1], open_loop = false, params = { hops = 2 },'
        " stress = { irreducible_prefix_bytes = 500, compact_between_call_and_result_at = [2] } }]\n"
        '[[policies]]\nkind = "keep_all"\n',
        encoding="utf-8",
    )
    cells, _ = expand_cells(load_spec(tmp_path / "s.toml"), out_dir=tmp_path)
    assert cells[0].spec.stress == {"irreducible_prefix_bytes": 500, "compact_between_call_and_result_at": [2]}
    (tmp_path / "b.toml").write_text(
        'name = "x"\n[tasks]\nworlds = [{ kind = "fact_chain", stress = { irreducible_prefix_byte = 5 } '
        '}]\n[[policies]]\nkind = "keep_all"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"tasks.worlds\[0\].stress: .*did you mean 'irreducible_prefix_bytes'"):
        load_spec(tmp_path / "b.toml")


def test_run_world_at_the_default_scale_uses_the_family_window() -> None:
    from h9eval.runs.world import run_world

    run = run_world(
        "debug_session:4",
        scale="default",
        policy="progressive",
        world_params={"n_hypotheses": 8},
        oracle=False,
        max_steps=40,
    )
    ep = run.episode
    assert ep.context_window_tokens == 32_000 and dict(ep.world_params)["result_sizes"] == "recorded" and ep.success
    with pytest.raises(ConfigError, match="scale must be one of default, small"):
        run_world("debug_session:4", scale="big")


def test_tier_mix_and_family_frames_on_a_fixed_table() -> None:
    import pandas as pd

    from h9eval.closedloop.analysis import family_frame, tier_mix_frame

    ident = {
        "agent_id": "scripted:full",
        "policy_name": "h9",
        "params_json": "{}",
        "summarizer": "offline",
        "history_mode": "write_back",
    }
    episodes = pd.DataFrame(
        [
            {
                **ident,
                "run_id": "a",
                "world_kind": "w1",
                "seed": 0,
                "success": True,
                "tokens_sent_sum": 10,
                "steps": 3,
                "excess_steps": 0,
                "violations_after_compaction": 0,
                "duplicate_side_effects": 0,
            },
            {
                **ident,
                "run_id": "b",
                "world_kind": "w1",
                "seed": 1,
                "success": False,
                "tokens_sent_sum": 30,
                "steps": 5,
                "excess_steps": 2,
                "violations_after_compaction": 1,
                "duplicate_side_effects": 2,
            },
            {
                **ident,
                "run_id": "c",
                "world_kind": "w2",
                "seed": 0,
                "success": True,
                "tokens_sent_sum": 20,
                "steps": 4,
                "excess_steps": 1,
                "violations_after_compaction": 0,
                "duplicate_side_effects": 0,
            },
        ]
    )
    calls = pd.DataFrame(
        {
            "run_id": ["a", "a", "a", "b", "b", "b", "b", "b", "c", "c", "c", "c"],
            "tier_name": [
                "none",
                "soft",
                "none",
                "none",
                "warn",
                "emergency",
                "none",
                "none",
                "none",
                "full",
                "full",
                "none",
            ],
        }
    )
    mix = tier_mix_frame(episodes, calls).set_index("world_kind")
    assert (
        mix.loc["w1", "episodes"] == 2
        and mix.loc["w1", "episodes_soft_or_full_frac"] == 0.5
        and mix.loc["w1", "episodes_emergency_frac"] == 0.5
    )
    assert mix.loc["w1", "calls_emergency_frac"] == pytest.approx(1 / 8) and mix.loc["w2", "calls_full_frac"] == 0.5
    assert mix.loc["all", "episodes"] == 3 and mix.loc["all", "episodes_soft_or_full_frac"] == pytest.approx(2 / 3)
    assert mix.loc["all", "calls_none_frac"] == pytest.approx(7 / 12)
    fam = family_frame(episodes).set_index("world_kind")
    assert (
        fam.loc["w1", "seeds"] == 2 and fam.loc["w1", "success_rate"] == 0.5 and fam.loc["w1", "tokens_sent_mean"] == 20
    )
    assert fam.loc["w2", "excess_steps_mean"] == 1 and fam.loc["w1", "duplicate_side_effects_mean"] == 1
