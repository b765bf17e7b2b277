"""The closed loop: calibration, anti-cheat, determinism, stress settings, measures, frames."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from h9eval.closedloop.agents import Action, ScriptedAgent, parse_view
from h9eval.closedloop.analysis import (
    episodes_frame,
    export_task,
    pass_hat_k,
    pass_k_frame,
    steps_frame,
)
from h9eval.closedloop.episode import (
    Episode,
    StressSettings,
    excess_steps,
    protocol_errors,
    run_episode,
    run_oracle,
)
from h9eval.closedloop.worlds import make_world
from h9eval.compaction.policies import make_policy, registry
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message, ToolCall

WORLDS = {
    "fact_chain": {"hops": 3, "gap_steps": 2, "padding_bytes": 600},
    "mini_repo": {"n_bugs": 2, "padding_bytes": 600},
    "ticket_queue": {"n_tickets": 4, "padding_bytes": 600},
}
SEEDS = (0, 1, 2, 3)
AGENTS_DIR = Path(__file__).resolve().parents[2] / "h9eval" / "closedloop" / "agents"


def episode(kind: str, policy: object, seed: int, agent: object = None, **kw: object) -> Episode:
    return run_episode(
        make_world(kind, **WORLDS[kind]), agent or ScriptedAgent(), policy, seed=seed, max_steps=60, **kw
    )  # type: ignore[arg-type]


class Recorder:
    """Wraps an agent and keeps every view it was given."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.views: list[str] = []

    @property
    def agent_id(self) -> str:
        return self.inner.agent_id  # type: ignore[attr-defined]

    def act(self, view_json: str) -> Action:
        self.views.append(view_json)
        return self.inner.act(view_json)  # type: ignore[attr-defined]


# -- calibration ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(WORLDS))
def test_keep_all_always_succeeds_with_zero_excess_steps(kind: str) -> None:
    eps = [episode(kind, "keep_all", s) for s in SEEDS]
    assert all(e.success and e.terminated_by == "done" for e in eps), [e.outcome.failure for e in eps]
    assert all(
        e.n_compactions == 0 and e.outcome.violations == () and e.outcome.duplicate_side_effects == 0 for e in eps
    )
    df = episodes_frame(eps + [episode(kind, "keep_all", s) for s in SEEDS[:1]])
    assert (df["excess_steps"] == 0).all() and (df["success"]).all()
    assert all(excess_steps(e, e) == 0 for e in eps)


@pytest.mark.parametrize("kind", sorted(WORLDS))
def test_drop_all_almost_never_succeeds(kind: str) -> None:
    eps = [episode(kind, "drop_all", s) for s in SEEDS]
    assert sum(e.success for e in eps) == 0
    assert all(e.n_compactions > 0 for e in eps)
    # the task vanished from view, so the agent declared a completion that did not happen
    assert all(e.hallucinated_completion for e in eps)


# -- anti-cheat -------------------------------------------------------------------------------
def test_same_view_same_action_and_hidden_seed_is_irrelevant() -> None:
    rec = Recorder(ScriptedAgent())
    ep = run_episode(
        make_world("ticket_queue", **WORLDS["ticket_queue"]),
        rec,
        make_policy("progressive", context_window_tokens=1500),
        seed=5,
    )
    assert ep.n_compactions > 0 and len(rec.views) == ep.n_steps
    fresh = ScriptedAgent()
    other_world = make_world("ticket_queue", **WORLDS["ticket_queue"])
    other_world.reset(99)  # a different hidden world exists; the agent has no way to see it
    for v in rec.views:
        assert fresh.act(v) == fresh.act(v) == ScriptedAgent().act(v)
    # the same views, replayed against a world with another seed: identical actions
    acts = [fresh.act(v) for v in rec.views]
    assert [a.tool for a in acts] == [s.tool or None for s in ep.steps]
    assert all(isinstance(v, str) for v in rec.views)
    assert parse_view(rec.views[0]).messages[1].content.startswith("TASK ticket_queue")


def test_agents_cannot_import_the_world() -> None:
    for path in sorted(AGENTS_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module] + [
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
        ]
        assert not [n for n in names if n.startswith(("h9eval.closedloop.worlds", "h9eval.closedloop.episode"))], (
            path.name
        )
    # Transitively: nothing an agent module imports (and nothing that imports) reaches them. Read
    # from the code, since ``import h9eval`` (run first by any import of a submodule) loads the
    # whole public API, worlds included, into the process.
    reached = _import_closure(
        [f"h9eval.closedloop.agents.{p.stem}" for p in AGENTS_DIR.glob("*.py") if p.stem != "__init__"]
    )
    assert "h9eval.closedloop.agents.scripted" in reached and "h9eval.core.messages" in reached
    assert not [m for m in reached if m.startswith(("h9eval.closedloop.worlds", "h9eval.closedloop.episode"))]


def _import_closure(roots: list[str]) -> set[str]:
    """Every h9eval module the ``roots`` import, directly or through each other (module-level and
    function-level imports alike; a package's ``__init__`` counts when a module under it does)."""
    src = AGENTS_DIR.parents[2]
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        mod = todo.pop()
        if mod in seen or not mod.startswith("h9eval"):
            continue
        base = src.joinpath(*mod.split("."))
        path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if not path.exists():
            continue
        seen.add(mod)
        parts = mod.split(".")
        todo += [".".join(parts[:i]) for i in range(2, len(parts))]  # the parent packages run first
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                todo += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return seen


class Inventor:
    """Knows a value it was never shown (here: a made-up key)."""

    agent_id = "inventor"

    def act(self, view_json: str) -> Action:
        return Action.call("lookup", key="K-deadbeef")


class Peeker:
    """Cheats by holding the world and submitting its hidden answer at once."""

    agent_id = "peeker"

    def __init__(self, world: object) -> None:
        self.world = world

    def act(self, view_json: str) -> Action:
        keys = self.world._state["keys"]  # type: ignore[attr-defined]
        return Action.call("submit", answer=keys[-1], receipt=keys[1])


def test_a_value_from_nowhere_is_a_hard_failure() -> None:
    ep = run_episode(make_world("fact_chain", **WORLDS["fact_chain"]), Inventor(), "keep_all", seed=1)
    assert ep.terminated_by == "hard_failure" and ep.invented_values == ("K-deadbeef",)
    assert not ep.success and ep.ledger == () and ep.n_steps == 1
    world = make_world("fact_chain", **WORLDS["fact_chain"])
    ep = run_episode(world, Peeker(world), "keep_all", seed=1)
    assert ep.hard_failure and len(ep.invented_values) == 2 and ep.ledger == ()
    assert not world.check().finished  # the guessed submission never reached the world


# -- determinism ------------------------------------------------------------------------------
def test_same_seed_same_episode_and_frames() -> None:
    pol = make_policy("progressive", context_window_tokens=1500)
    a, b = (episode("mini_repo", pol, 4) for _ in range(2))
    assert a.n_compactions > 0
    assert a == b and a.history == b.history and a.steps == b.steps
    assert episodes_frame([a]).to_csv() == episodes_frame([b]).to_csv()
    assert steps_frame([a]).to_csv() == steps_frame([b]).to_csv()
    c = episode("mini_repo", pol, 5)
    assert c.task_prompt == a.task_prompt and c.history[3].content != a.history[3].content  # other nonces


# -- the measures -----------------------------------------------------------------------------
def test_progressive_at_a_small_window_compacts() -> None:
    """harness9's default policy at a 1,100-token window compacts in every world; these are the
    outcomes (deterministic), with keep_all's for comparison."""
    got = {}
    for kind in sorted(WORLDS):
        for seed in SEEDS:
            e = episode(kind, make_policy("progressive", context_window_tokens=1100), seed)
            assert e.n_compactions > 0 and e.summary()["summarizer_calls"] > 0
            assert e.summary()["tokens_sent_peak"] < episode(kind, "keep_all", seed).summary()["tokens_sent_peak"]
            got[(kind, seed)] = e.success
    assert sum(got.values()) == GOLDEN_PROGRESSIVE_SUCCESSES, got


GOLDEN_PROGRESSIVE_SUCCESSES = 6


def test_refetch_through_the_offload_placeholder_is_justified() -> None:
    # facts after 3,000 bytes of padding: the tool-time offload preview (20 lines) hides them
    world = make_world("fact_chain", hops=2, gap_steps=1, padding_bytes=3000, fact_position="tail")
    ep = run_episode(world, ScriptedAgent(), make_policy("progressive", offload_hook_threshold_bytes=2000), seed=2)
    s = ep.summary()
    assert ep.success and s["offloads_tool_time"] == 3 and s["refetches_justified"] == 3 and s["refetches_wasted"] == 0
    assert [x.kind for x in ep.ledger].count("refetch") == 3
    assert excess_steps(ep, run_oracle(world, ScriptedAgent(), seed=2)) == 3
    placeholder = next(m.content for m in ep.history if m.tool_call_id == "call_001")
    assert placeholder.startswith("[输出已保存至 .harness9/tool_results/fact_chain-2/call_001.txt")


def test_refetch_of_a_compaction_time_offload() -> None:
    # write-back history: harness9's warn tier replaces big head results by "[offloaded: path | ...]"
    world = make_world("fact_chain", hops=4, gap_steps=2, padding_bytes=5000, fact_position="tail")
    ep = run_episode(
        world,
        ScriptedAgent("raw_only"),
        make_policy("progressive", context_window_tokens=10_000, min_tail_messages=2),
        seed=0,
        history_mode="write_back",
    )
    assert any(m.content.startswith("[offloaded: .harness9/tool_results/") for m in ep.history)
    assert ep.summary()["refetches_justified"] > 0 and ep.summary()["refetches_wasted"] == 0


class DoubleReader:
    """Re-fetches the first offloaded result twice: the second read is wasted."""

    agent_id = "double_reader"

    def act(self, view_json: str) -> Action:
        view = parse_view(view_json)
        paths = re.findall(r"\.harness9/tool_results/\S+?\.txt", " ".join(m.content for m in view.messages))
        reads = sum(1 for m in view.messages for tc in m.tool_calls if tc.name == "read_file")
        if not paths:
            # type: ignore[union-attr]
            return Action.call("lookup", key=re.search(r"K-[0-9a-f]{8}", view.messages[1].content).group(0))
        if reads < 2:
            return Action.call("read_file", path=paths[0])
        return Action.finish("stop")


def test_wasted_refetch_and_redundant_reads() -> None:
    world = make_world("fact_chain", hops=2, gap_steps=0, padding_bytes=3000, fact_position="tail")
    ep = run_episode(world, DoubleReader(), make_policy("progressive", offload_hook_threshold_bytes=2000), seed=2)
    s = ep.summary()
    assert (s["refetches_justified"], s["refetches_wasted"]) == (1, 1)
    assert s["hallucinated_completion"]


class Stubborn:
    """Repeats the same lookup forever."""

    agent_id = "stubborn"

    def act(self, view_json: str) -> Action:
        key = re.search(r"K-[0-9a-f]{8}", view_json)
        return Action.call("lookup", key=key.group(0)) if key else Action.finish("no key")  # type: ignore[union-attr]


def test_compactions_without_progress_are_a_loop() -> None:
    ep = run_episode(
        make_world("fact_chain", **WORLDS["fact_chain"]),
        Stubborn(),
        make_policy("progressive", context_window_tokens=1500),
        seed=1,
        max_steps=60,
        loop_patience=4,
    )
    assert ep.terminated_by == "loop" and "without a new subgoal" in ep.loop_reason and ep.n_steps < 60
    assert ep.summary()["redundant_read_calls"] >= 4
    # without compaction, re-reading an unchanged result is no progress either
    ep = run_episode(
        make_world("fact_chain", **WORLDS["fact_chain"]), Stubborn(), "keep_all", seed=1, max_steps=60, loop_patience=4
    )
    assert ep.terminated_by == "loop" and ep.n_steps == 5 and ep.n_compactions == 0
    ep = run_episode(
        make_world("fact_chain", **WORLDS["fact_chain"]), Stubborn(), "keep_all", seed=1, max_steps=8, loop_patience=50
    )
    assert ep.terminated_by == "max_steps" and ep.n_steps == 8


def test_rule_violations_are_split_at_the_first_compaction() -> None:
    # mini_repo under the single-threshold summary: the rules file is summarised away, and the
    # agent falls back to the rule-breaking defaults after the compaction
    world = make_world("mini_repo", n_bugs=3, padding_bytes=1000)
    ep = run_episode(
        world, ScriptedAgent(), make_policy("summary_single_threshold", context_window_tokens=1500), seed=1
    )
    s = ep.summary()
    assert not ep.success and {v.rule for v in ep.outcome.violations} >= {"grep_not_search"}
    assert ep.first_compaction_step is not None
    assert s["violations_before_compaction"] == 0 and s["violations_after_compaction"] > 0
    _, after = ep.violations_split()
    assert all(v.step >= ep.first_compaction_step for v in after)


# -- stress settings --------------------------------------------------------------------------
def test_compaction_between_a_call_and_its_result_breaks_the_pair() -> None:
    stress = StressSettings(compact_between_call_and_result_at=(2,))
    ep = episode("fact_chain", make_policy("progressive"), 1, stress=stress)
    assert ep.steps[1].compacted_mid_call and ep.n_compactions >= 1 and ep.first_compaction_step == 3
    # harness9's repair inserted a placeholder result; the real one arrives as a second result
    assert ep.summary()["protocol_errors"] > 0
    ok = episode("fact_chain", "keep_all", 1, stress=stress)
    assert ok.summary()["protocol_errors"] == 0 and not ok.steps[1].compacted_mid_call


def test_irreducible_prefix_ends_in_a_detected_loop() -> None:
    stress = StressSettings(irreducible_prefix_bytes=20_000)
    for pol in (make_policy("progressive", context_window_tokens=3000), make_policy("keep_all")):
        ep = episode("fact_chain", pol, 1, stress=stress, context_window_tokens=3000)
        assert ep.terminated_by == "loop" and ep.loop_detected and ep.n_steps == 1
        assert "exceeds the 3000-token window" in ep.loop_reason and not ep.success


def test_the_todo_list_must_survive() -> None:
    world = make_world("fact_chain", hops=2, gap_steps=1, padding_bytes=1000, todo_items=3)
    kept = run_episode(world, ScriptedAgent(), "keep_all", seed=1)
    assert kept.success and [s.tool for s in kept.steps].count("mark_todo") == 3
    lost = run_episode(world, ScriptedAgent(), make_policy("progressive", context_window_tokens=1500), seed=1)
    assert lost.n_compactions > 0 and not lost.success and lost.outcome.failure.startswith("subgoal todo:")


# -- profiles, policies, bad input ----------------------------------------------------------
def test_reader_profiles_differ_where_they_should() -> None:
    pol = make_policy("progressive", context_window_tokens=1500)
    full = episode("fact_chain", pol, 1)
    raw = episode("fact_chain", pol, 1, agent=ScriptedAgent("raw_only"))
    assert full.success and not raw.success  # the task survives only inside the summary
    assert raw.agent_id == "scripted:raw_only" and raw.hallucinated_completion
    assert episode("fact_chain", "keep_all", 1, agent=ScriptedAgent("last_k")).agent_id == "scripted:last_k,k=8"
    with pytest.raises(ConfigError, match="did you mean 'raw_only'"):
        ScriptedAgent("raw_onyl")


@pytest.mark.parametrize("kind", sorted(registry()))
def test_every_registered_policy_runs_an_episode(kind: str) -> None:
    ep = episode("ticket_queue", make_policy(kind), 0, summarizer="offline")
    assert ep.terminated_by in ("done", "max_steps", "loop") and ep.n_steps > 0
    assert ep.policy_kind == kind and len(ep.params_hash) == 12


def test_bad_configuration_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="history_mode must be one of view, write_back"):
        episode("fact_chain", "keep_all", 0, history_mode="both")
    with pytest.raises(ConfigError, match="max_steps must be an integer >= 1"):
        run_episode("fact_chain", ScriptedAgent(), "keep_all", seed=0, max_steps=0)
    with pytest.raises(ConfigError, match="irreducible_prefix_bytes must be >= 0"):
        StressSettings(irreducible_prefix_bytes=-1)
    with pytest.raises(ConfigError, match="did you mean 'progressive'"):
        run_episode("fact_chain", ScriptedAgent(), "progresive", seed=0)
    ep = episode("fact_chain", "keep_all", 0)
    with pytest.raises(ConfigError, match="must be a keep_all episode"):
        excess_steps(ep, episode("fact_chain", "drop_all", 0))
    with pytest.raises(ConfigError, match="does not pair"):
        excess_steps(ep, episode("fact_chain", "keep_all", 1))


def test_protocol_errors_checker() -> None:
    call = Message("assistant", "", (ToolCall("a", "t", "{}"),))
    res = Message("user", "x", (), "a")
    assert protocol_errors([Message("system", "s"), call, res]) == []
    assert len(protocol_errors([call])) == 1
    assert len(protocol_errors([res])) == 1
    assert len(protocol_errors([call, res, res])) == 1


# -- frames, pass^k, export -------------------------------------------------------------------
def test_frames_pass_k_and_export_task() -> None:
    eps = [episode("fact_chain", p, s) for p in ("keep_all", "drop_all") for s in (0, 1)]
    df = episodes_frame(eps)
    assert len(df) == 4 and df["schema_version"].eq(1).all()
    assert list(df.loc[df["policy_kind"] == "drop_all", "excess_steps"]) == [
        e.n_steps - k.n_steps for e, k in zip(eps[2:], eps[:2])
    ]
    for col in (
        "success",
        "tokens_sent_sum",
        "tokens_sent_peak",
        "refetches_justified",
        "violations_after_compaction",
        "facts_present_at_need",
        "protocol_errors",
    ):
        assert col in df.columns
    assert pass_hat_k(3, 4, 2) == pytest.approx(0.5) and pass_hat_k(4, 4, 3) == 1.0 and pass_hat_k(1, 4, 2) == 0.0
    with pytest.raises(ConfigError, match="1 <= k <= n_trials"):
        pass_hat_k(1, 2, 3)
    pk = pass_k_frame(df, 1, by=("world_kind", "policy_kind"))
    assert dict(zip(pk["policy_kind"], pk["pass_hat_k"])) == {"keep_all": 1.0, "drop_all": 0.0}

    task = export_task(eps[0])
    assert task.task_id == "world-fact_chain-0" and task.source.kind == "world" and task.n_calls == eps[0].n_steps
    assert {f.fact_id for f in task.facts} == {"start_key", "receipt", "answer"}
    for f in task.facts:
        assert f.answer in task.messages[f.message_index].content
    with pytest.raises(ConfigError, match="needs a keep_all episode"):
        export_task(eps[2])
    from h9eval.runs.replay import replay  # the exported task replays open-loop

    r = replay(task, make_policy("progressive", context_window_tokens=1500))
    assert len(r.calls) == task.n_calls
    assert json.loads(json.dumps(task.to_dict()))["facts"][0]["answer"] == task.facts[0].answer


def test_byte_identical_across_processes_and_hash_seeds() -> None:
    code = (
        "import hashlib, json\n"
        "from h9eval.closedloop import run_episode, make_world, ScriptedAgent, episodes_frame\n"
        "eps = [run_episode(make_world(k, padding_bytes=600), ScriptedAgent(), {'kind': 'progressive', "
        "'context_window_tokens': 1500}, seed=3) for k in ('fact_chain', 'mini_repo', 'ticket_queue')]\n"
        "blob = episodes_frame(eps).to_csv() + json.dumps([[m.to_json() for m in e.history] for e in eps])\n"
        "print(hashlib.sha256(blob.encode()).hexdigest())\n"
    )
    root = AGENTS_DIR.parents[2]
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env={"PYTHONHASHSEED": h, "PATH": "/usr/bin:/bin"},
        ).stdout
        for h in ("1", "2")
    }
    assert len(outs) == 1 and len(next(iter(outs)).strip()) == 64


def test_grid_helper_agent_specs_and_episode_json() -> None:
    from h9eval.closedloop import episode_to_dict, make_agent
    from h9eval.runs.world import run_episodes

    eps = [
        r.episode
        for r in run_episodes(
            [("fact_chain", {"padding_bytes": 300}, (0, 1))],
            ["scripted", "scripted:raw_only"],
            ["keep_all", "drop_all"],
        )
    ]
    assert len(eps) == 8 and [e.policy_kind for e in eps[:2]] == ["keep_all", "drop_all"]
    assert eps[2].agent_id == "scripted:raw_only"
    d = json.loads(json.dumps(episode_to_dict(eps[0])))
    assert d["summary"]["success"] and d["messages"][1]["content"].startswith("TASK fact_chain")
    assert len(d["steps"]) == eps[0].n_steps and d["subgoals"][0] == {"name": "hop1", "reached": True}
    with pytest.raises(ConfigError, match="did you mean 'scripted'"):
        make_agent("scriptd")
    with pytest.raises(ConfigError, match="unknown reader profile 'raw' available: full, last_k, raw_only"):
        make_agent("scripted:raw")
