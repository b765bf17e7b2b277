"""Tests of the synthetic session generator (h9eval.tasks.synthetic)."""

from __future__ import annotations

import dataclasses
import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from h9eval.core.errors import ConfigError
from h9eval.tasks.model import ANCHOR_KINDS, FACT_KINDS, Task, tasks_from_jsonl, tasks_to_jsonl
from h9eval.compaction.offload import (
    HOOK_EXEMPT_TOOLS,
    CompactionOffloader,
    OffloadHook,
    OFFLOAD_COMPACTION_THRESHOLD_BYTES,
    OFFLOAD_HOOK_THRESHOLD_BYTES,
)
from h9eval.tasks.synthetic import (
    GENERATOR_VERSION,
    PRESETS,
    SyntheticSpec,
    generate,
    generate_from_spec,
    generate_many,
)
from h9eval.tasks.synthetic import content, spec

# sha256 of generate("small", 0).content_hash(). Changing it means every stored small/0 task
# changes: bump GENERATOR_VERSION and update this value on purpose.
GOLDEN_SMALL_0 = "db60462b68b038b7648ccabeeb1f4d3ec2252b1e5e16e4c5e07893bcf70aa743"


@pytest.fixture(scope="module")
def small() -> Task:
    return generate("small", 0)


@pytest.fixture(scope="module")
def long_tasks() -> list[Task]:
    # Three seeds so that both languages (python and go worlds) are covered.
    return generate_many("long", [0, 1, 2])


@pytest.fixture(scope="module")
def long0(long_tasks: list[Task]) -> Task:
    return long_tasks[0]


# -- helpers -----------------------------------------------------------------------------------
def assert_pairing(task: Task) -> None:
    """Every tool call has exactly one result, right after its assistant message and in call
    order; every tool result answers such a call; call ids are unique."""
    msgs = task.messages
    seen_ids: set[str] = set()
    i = 0
    while i < len(msgs):
        m = msgs[i]
        assert not m.is_tool_result, f"orphan tool result at {i}: {m.tool_call_id}"
        if m.role == "assistant" and m.tool_calls:
            for k, tc in enumerate(m.tool_calls):
                assert tc.id not in seen_ids, f"duplicate tool call id {tc.id}"
                seen_ids.add(tc.id)
                r = msgs[i + 1 + k]
                assert r.role == "tool" and r.tool_call_id == tc.id, (i, k, tc.id, r.tool_call_id)
            i += 1 + len(m.tool_calls)
        else:
            i += 1


def tool_results(task: Task) -> list[tuple[str, int]]:
    """(tool name, content bytes) for every tool result."""
    names = {tc.id: tc.name for m in task.messages for tc in m.tool_calls}
    return [(names[m.tool_call_id], len(m.content.encode("utf-8"))) for m in task.messages if m.is_tool_result]


# -- determinism -------------------------------------------------------------------------------
def test_same_seed_same_hash(small: Task) -> None:
    random.seed(12345)  # global randomness must not matter
    again = generate("small", 0)
    assert again.content_hash() == small.content_hash()
    assert again == small


def test_different_seeds_differ(small: Task) -> None:
    hashes = {generate("small", s).content_hash() for s in range(1, 6)} | {small.content_hash()}
    assert len(hashes) == 6


def test_golden_hash_small_seed0(small: Task) -> None:
    assert small.metadata["generator_version"] == GENERATOR_VERSION
    assert small.content_hash() == GOLDEN_SMALL_0


def test_overrides_change_task_and_id(small: Task) -> None:
    t = generate("small", 0, n_turns=60)
    assert t.content_hash() != small.content_hash()
    assert t.task_id.startswith("synthetic-small-0-") and t.task_id != small.task_id
    assert t.metadata["overrides"] == {"n_turns": 60}
    assert generate("small", 0, n_turns=60).content_hash() == t.content_hash()


def test_generate_many_and_from_spec() -> None:
    many = generate_many("small", [3, 4])
    assert [t.content_hash() for t in many] == [generate("small", s).content_hash() for s in (3, 4)]
    custom = generate_from_spec(SyntheticSpec(n_turns=25, n_facts=3), seed=9)
    assert custom.source.preset == "custom" and custom.n_calls == 25
    assert custom.metadata["overrides"] == {"n_turns": 25, "n_facts": 3}


# -- structure ---------------------------------------------------------------------------------
def test_small_shape(small: Task) -> None:
    m = small.messages
    assert m[0].role == "system" and "agent" in m[0].content
    assert m[1].role == "user" and m[1].content == small.intent.statement
    assert small.n_calls == 40 == small.metadata["n_turns"]
    assert m[-1].role == "assistant" and not m[-1].tool_calls
    assert small.source.kind == "synthetic" and small.source.seed == 0 and small.source.preset == "small"
    assert {t["name"] for t in small.tools} >= {"bash", "read_file", "edit_file", "grep", "run_tests", "list_dir"}
    assert_pairing(small)


def test_long_pairing_and_arguments(long_tasks: list[Task]) -> None:
    for t in long_tasks:
        assert_pairing(t)
        assert t.n_calls == 1000
        for m in t.messages:
            for tc in m.tool_calls:
                # compact JSON text, exactly as json.dumps writes it
                assert json.dumps(json.loads(tc.arguments), separators=(",", ":"), ensure_ascii=False) == tc.arguments


def test_content_mix(long_tasks: list[Task]) -> None:
    langs = {t.metadata["language"] for t in long_tasks}
    assert langs == {"python", "go"}
    text = "\n".join(m.content for t in long_tasks for m in t.messages if m.is_tool_result)
    for marker in (
        "def ", "func (", "test session starts", "--- PASS:", "Traceback (most recent call last)",
        "goroutine ", "diff --git", '{"ts":', "-rw-r--r--", "Collecting ", "go: downloading",
    ):  # fmt: skip
        assert marker in text, marker
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text), "no CJK text"
    assert any(m.is_error for t in long_tasks for m in t.messages)


def test_intermediate_user_messages(long0: Task) -> None:
    users = [i for i, m in enumerate(long0.messages) if m.role == "user"]
    assert len(users) > 10 and users[0] == 1


# -- sizes -------------------------------------------------------------------------------------
def test_metadata_counts_match(long_tasks: list[Task]) -> None:
    for t in long_tasks:
        res = tool_results(t)
        md = t.metadata
        assert md["n_tool_results"] == len(res)
        assert md["n_outputs_over_10000_bytes"] == sum(b > OFFLOAD_HOOK_THRESHOLD_BYTES for _, b in res)
        assert md["n_outputs_4000_to_10000_bytes"] == sum(
            OFFLOAD_COMPACTION_THRESHOLD_BYTES < b <= OFFLOAD_HOOK_THRESHOLD_BYTES for _, b in res
        )
        assert md["n_messages"] == len(t.messages) and md["estimated_tokens"] == t.estimated_tokens
        assert md["total_bytes"] == sum(m.nbytes for m in t.messages)


@pytest.mark.parametrize("large,medium", [(0.05, 0.15), (0.10, 0.30), (0.0, 0.0)])
def test_size_shares(large: float, medium: float) -> None:
    t = generate("long", 5, large_output_share=large, medium_output_share=medium)
    res = tool_results(t)
    n = len(res)
    hook = sum(b > OFFLOAD_HOOK_THRESHOLD_BYTES and tool not in HOOK_EXEMPT_TOOLS for tool, b in res)
    mid = sum(OFFLOAD_COMPACTION_THRESHOLD_BYTES < b <= OFFLOAD_HOOK_THRESHOLD_BYTES for _, b in res)
    big_read = sum(b > OFFLOAD_HOOK_THRESHOLD_BYTES and tool in HOOK_EXEMPT_TOOLS for tool, b in res)
    assert hook / n == pytest.approx(large, abs=0.01)
    assert mid / n == pytest.approx(medium, abs=0.01)
    assert big_read / n == pytest.approx(PRESETS["long"].large_read_share, abs=0.005)
    assert t.metadata["n_outputs_hook_offloadable"] == hook
    # Only read_file is big among the exempt tools (edits and writes stay small).
    assert all(tool == "read_file" for tool, b in res if b > OFFLOAD_HOOK_THRESHOLD_BYTES and tool in HOOK_EXEMPT_TOOLS)


def test_sizes_heavy_tailed(long0: Task) -> None:
    sizes = sorted(b for _, b in tool_results(long0))
    median = sizes[len(sizes) // 2]
    assert 150 < median < 2000
    assert sizes[-1] > 30_000  # Pareto tail
    assert sizes[-1] <= PRESETS["long"].max_output_bytes


# -- ground truth ------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["small", "long"])
def task(request: pytest.FixtureRequest, small: Task, long0: Task) -> Task:
    return small if request.param == "small" else long0


def test_facts_answers_at_index(task: Task) -> None:
    assert task.facts
    ids = [f.fact_id for f in task.facts]
    assert len(set(ids)) == len(ids)
    for f in task.facts:
        assert f.kind in FACT_KINDS and f.kind != "derived"
        assert f.question.endswith("?") and f.answer
        assert f.answer in task.messages[f.message_index].content, f
        assert f.answer not in f.variants


def test_superseded_facts_point_to_later_facts(task: Task) -> None:
    by_id = {f.fact_id: f for f in task.facts}
    sup = [f for f in task.facts if f.superseded_by is not None]
    assert sup
    for f in sup:
        new = by_id[f.superseded_by]
        assert new.question == f.question and new.answer != f.answer
        assert f.superseded_at == new.message_index > f.message_index
        assert f.live_at(f.message_index) and not f.live_at(new.message_index) and new.live_at(new.message_index)
    for f in task.facts:
        assert (f.superseded_at is None) == (f.superseded_by is None)


def test_fact_sources(long0: Task) -> None:
    roles = {long0.messages[f.message_index].role for f in long0.facts}
    assert roles == {"user", "tool"}  # stated by the user and discovered in tool output
    assert {f.kind for f in long0.facts} == set(FACT_KINDS) - {"derived"}
    # A fact in a tool output is never in one the hook would replace by a preview.
    for f in long0.facts:
        m = long0.messages[f.message_index]
        if m.role == "tool":
            assert len(m.content.encode()) <= OFFLOAD_HOOK_THRESHOLD_BYTES


def test_anchor_key_terms_at_index(task: Task) -> None:
    assert task.anchors
    for a in task.anchors:
        assert a.kind in ANCHOR_KINDS
        content = task.messages[a.message_index].content
        assert a.key_terms
        for term in a.key_terms:
            assert term in content, (a, term)
        if a.until_index is not None:
            assert a.until_index > a.message_index


def test_anchor_kinds_in_long(long_tasks: list[Task]) -> None:
    for t in long_tasks:
        kinds = {a.kind for a in t.anchors}
        assert kinds == set(ANCHOR_KINDS)
        steps = [a for a in t.anchors if a.kind == "next_step"]
        assert any(a.until_index is not None for a in steps)
        for a in steps:
            if a.until_index is not None:
                assert a.text in t.messages[a.until_index].content  # "Done with the step: ..."
        constraints = [f for f in t.facts if f.kind == "constraint"]
        assert len([a for a in t.anchors if a.kind == "constraint"]) == len(constraints)


def test_tried_solutions_follow_their_error(long0: Task) -> None:
    tried = [a for a in long0.anchors if a.kind == "tried_solution"]
    assert len(tried) == PRESETS["long"].n_failed_attempts
    for a in tried:
        err_type = a.key_terms[1]
        # the failing run_tests output sits between the attempt and the reflection
        before = [m.content for m in long0.messages[a.message_index - 4 : a.message_index] if m.role == "tool"]
        assert any(err_type in c for c in before), a


def test_artifacts_are_edited_files(long0: Task) -> None:
    arts = [a for a in long0.anchors if a.kind == "artifact"]
    assert arts and len({a.key_terms[0] for a in arts}) == len(arts)
    for a in arts:
        m = long0.messages[a.message_index]
        assert any(
            tc.name in ("edit_file", "write_file") and json.loads(tc.arguments)["path"] == a.key_terms[0]
            for tc in m.tool_calls
        )


def test_intent(task: Task) -> None:
    it = task.intent
    assert it.key_terms and all(k in it.statement for k in it.key_terms)
    for ch in it.changes:
        m = task.messages[ch.message_index]
        assert m.role == "user" and ch.statement in m.content
        assert ch.key_terms and all(k in m.content for k in ch.key_terms)
    assert [c.message_index for c in it.changes] == sorted(c.message_index for c in it.changes)


def test_intent_changes_in_long(long0: Task) -> None:
    assert len(long0.intent.changes) == PRESETS["long"].n_intent_changes
    last = long0.intent.changes[-1]
    assert long0.intent.at(len(long0.messages)) == last
    assert long0.intent.at(1).statement == long0.intent.statement


def test_metadata(small: Task) -> None:
    md = small.metadata
    assert md["generator"] == "h9eval.tasks.synthetic" and md["preset"] == "small" and md["seed"] == 0
    assert md["spec"] == dataclasses.asdict(PRESETS["small"])
    assert md["n_facts"] == len(small.facts)
    assert md["n_intent_changes"] == len(small.intent.changes)
    assert sum(md["n_anchors_by_kind"].values()) == len(small.anchors)
    json.dumps(md)


# -- validation --------------------------------------------------------------------------------
def test_presets() -> None:
    assert {k: v.n_turns for k, v in PRESETS.items()} == {"small": 40, "medium": 200, "long": 1000, "marathon": 5000}
    with pytest.raises(TypeError):
        PRESETS["tiny"] = SyntheticSpec()  # type: ignore[index]


def test_spec_is_frozen_and_keyword_only() -> None:
    s = SyntheticSpec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.n_turns = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        SyntheticSpec(40)  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"preset": "smal"}, r"unknown preset 'smal'; did you mean 'small'\?"),
        ({"preset": "marathn"}, r"did you mean 'marathon'\?"),
        ({"n_turn": 40}, r"unknown SyntheticSpec field 'n_turn'; did you mean 'n_turns'\?"),
        ({"n_turns": 5}, r"n_turns must be between 10 and 5000 inclusive; got 5"),
        ({"n_turns": 5001}, r"n_turns must be between 10 and 5000 inclusive; got 5001"),
        ({"n_turns": "40"}, r"n_turns must be an integer; got '40'"),
        ({"n_turns": 40.0}, r"n_turns must be an integer; got 40.0"),
        ({"n_turns": True}, r"n_turns must be an integer; got True"),
        ({"large_output_share": 1.5}, r"large_output_share must be between 0 and 1 inclusive; got 1.5"),
        ({"medium_output_share": -0.1}, r"medium_output_share must be between 0 and 1 inclusive; got -0.1"),
        ({"cjk_share": float("nan")}, r"cjk_share must be a finite number; got nan"),
        ({"large_output_share": 0.5, "medium_output_share": 0.5}, r"\+ large_read_share must be <= 0.9.*got 1.01"),
        (
            {"n_facts": 121, "n_turns": 1000},
            r"n_facts must be between 0 and 120 inclusive \(at most min\(120, n_turns\)\); got 121",
        ),
        ({"n_facts": 41, "n_turns": 40}, r"n_facts must be between 0 and 40 inclusive"),
        (
            {"n_failed_attempts": 8, "n_turns": 10},
            r"n_failed_attempts must be between 0 and 7 inclusive \(at most n_turns - 3\); got 8",
        ),
        (
            {"n_decisions": 40, "n_milestones": 40, "n_plans": 10},
            r"narrative events .*= 123\) must be <= 3 \* n_turns \(120\)",
        ),
        ({"max_output_bytes": 5000}, r"max_output_bytes must be between 12000 and 10000000 inclusive; got 5000"),
        ({"seed": -1}, r"seed must be a non-negative integer; got -1"),
        ({"seed": 1.5}, r"seed must be a non-negative integer; got 1.5"),
    ],
)
def test_validation_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        generate(**kwargs)


def test_validation_error_is_value_error() -> None:
    with pytest.raises(ValueError):
        SyntheticSpec(n_turns=0)
    with pytest.raises(ConfigError, match="spec must be a SyntheticSpec"):
        generate_from_spec({"n_turns": 40})  # type: ignore[arg-type]


def test_smallest_session_is_valid() -> None:
    t = generate("small", 1, n_turns=10)
    assert t.n_calls == 10
    assert_pairing(t)


def test_fact_capacity() -> None:
    # N_FACTS_MAX facts in both languages: questions and answers stay unique.
    for seed in (0, 2):
        t = generate("small", seed, n_turns=400, n_facts=120, superseded_share=1.0)
        assert len(t.facts) == 240
        assert len({f.question for f in t.facts}) == 120
        assert len({f.answer for f in t.facts}) == 240


# -- properties --------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_turns=st.integers(10, 60), seed=st.integers(0, 2**32 - 1))
def test_property_pairing_and_round_trip(n_turns: int, seed: int) -> None:
    t = generate("small", seed, n_turns=n_turns)
    assert_pairing(t)
    assert t.n_calls == n_turns
    back = Task.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back.content_hash() == t.content_hash()
    with tempfile.TemporaryDirectory() as d:
        path = tasks_to_jsonl([t], Path(d) / "tasks.jsonl")
        (loaded,) = tasks_from_jsonl(path)
    assert loaded.content_hash() == t.content_hash()
    for f in t.facts:
        assert f.answer in t.messages[f.message_index].content


# -- the one marathon --------------------------------------------------------------------------
@pytest.mark.slow
def test_marathon_once() -> None:
    t = generate("marathon", 0)
    assert t.n_calls == 5000
    assert_pairing(t)
    md = t.metadata
    assert md["n_outputs_hook_offloadable"] / md["n_tool_results"] == pytest.approx(0.05, abs=0.005)
    assert md["n_outputs_4000_to_10000_bytes"] / md["n_tool_results"] == pytest.approx(0.15, abs=0.01)
    assert len(t.intent.changes) == 6 and len(t.facts) > 120


def test_every_action_has_a_renderer() -> None:
    """The content renderer is a table keyed by action: every action ACTIONS can draw is in it."""
    drawn = {a for by_cls in content.ACTIONS.values() for acts in by_cls.values() for a in acts}
    assert drawn == set(content._RENDERERS)


def test_offload_sizes_use_the_offload_owner() -> None:
    """The generator's size classes are defined against the offloader's own thresholds."""
    assert spec.SMALL_MAX_BYTES < OFFLOAD_COMPACTION_THRESHOLD_BYTES < spec.MEDIUM_MIN_BYTES
    assert spec.MEDIUM_MAX_BYTES < OFFLOAD_HOOK_THRESHOLD_BYTES < spec.LARGE_MIN_BYTES
    with tempfile.TemporaryDirectory() as d:
        assert OffloadHook(d, "s").threshold_bytes == OFFLOAD_HOOK_THRESHOLD_BYTES
        assert CompactionOffloader(d, "s").threshold_bytes == OFFLOAD_COMPACTION_THRESHOLD_BYTES
