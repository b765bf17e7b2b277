"""Unit tests of the peer policies on crafted histories, their validation and their listing."""

from __future__ import annotations

import pytest

from h9eval.compaction.anchors import COMPACTION_MARKER
from h9eval.compaction.base import CompactionEnv, LogicalClock
from h9eval.compaction.policies import make_policy, policy_from_dict, registry
from h9eval.compaction.policies.clear_tool_uses import CLEAR_PLACEHOLDER, ClearToolUses
from h9eval.compaction.policies.controls import DropAll, KeepAll
from h9eval.cli.policies import describe_policies, format_policies_table
from h9eval.compaction.policies.hybrid import Hybrid
from h9eval.compaction.masking import MASK_PLACEHOLDER
from h9eval.compaction.records import Tier
from h9eval.compaction.repair import pairing_problems
from h9eval.compaction.policies.summary_single_threshold import SummarySingleThreshold
from h9eval.compaction.policies.window import Window
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.compaction.summary import ScriptedSummarizer
from h9eval.core.tokens import estimate_tokens
from tests.helpers import A, L, R, S, TC, U

ANCHOR_REPLY = (
    "## Anchors\n\n### User Intent\nfix it\n\n### Execution Progress\n- ran tests\n\n"
    "### Key Decisions\n- N/A\n\n### Tried Solutions\n- N/A\n\n### Next Steps\n- commit\n\n## Summary\nall good"
)


def env(summarizer: object | None = None) -> CompactionEnv:
    return CompactionEnv(summarizer=summarizer, session_id="t", clock=LogicalClock(), seed=1)  # type: ignore[arg-type]


def tool_rounds(n: int, size: int = 400, names: tuple[str, ...] = ("bash",)) -> list[Message]:
    """n assistant messages with one call each, followed by its result."""
    out: list[Message] = []
    for i in range(n):
        out += [
            A(f"step {i}", [TC(f"c{i}", names[i % len(names)], '{"cmd": "cat file_%d.py"}' % i)]),
            R(f"c{i}", L(size)),
        ]
    return out


# -- clear_tool_uses -----------------------------------------------------------------------


def test_clear_keeps_the_last_three_tool_uses() -> None:
    h = [S(), U("task"), *tool_rounds(6)]
    c = ClearToolUses(trigger_tokens=10).start(env()).compact(h)
    results = [m for m in c.view if m.tool_call_id]
    assert [m.content == CLEAR_PLACEHOLDER for m in results] == [True, True, True, False, False, False]
    assert c.tier == Tier.WARN and len(c.view) == len(h) and pairing_problems(c.view) == []
    assert c.record is not None and c.record.extra["cleared_tool_uses"] == 3
    assert c.record.extra["cleared_input_tokens"] == estimate_tokens(h) - estimate_tokens(c.view) > 0
    # arguments stay unless clear_tool_inputs
    assert [m.tool_calls for m in c.view if m.tool_calls] == [m.tool_calls for m in h if m.tool_calls]


def test_clear_triggers_only_above_trigger_tokens() -> None:
    h = [S(), U("task"), *tool_rounds(5)]
    t = estimate_tokens(h)
    assert ClearToolUses(trigger_tokens=t).start(env()).compact(h).tier == Tier.NONE  # "exceeds", not equals
    assert ClearToolUses(trigger_tokens=t - 1).start(env()).compact(h).tier == Tier.WARN
    # manual /compact clears whatever the usage
    assert ClearToolUses(trigger_tokens=10**9).start(env()).compact(h, manual=True).tier == Tier.WARN


def test_clear_respects_exclude_tools_and_counts_them_in_keep() -> None:
    h = [S(), U("task"), *tool_rounds(6, names=("memory", "bash"))]
    c = ClearToolUses(trigger_tokens=0, keep_tool_uses=2, exclude_tools=("memory",)).start(env()).compact(h)
    by_id = {m.tool_call_id: m.content for m in c.view if m.tool_call_id}
    # c0, c2, c4 are memory calls: never cleared; c1, c3 are old bash calls: cleared; c5 kept
    assert [by_id[f"c{i}"] == CLEAR_PLACEHOLDER for i in range(6)] == [False, True, False, True, False, False]


def test_clear_at_least_is_all_or_nothing() -> None:
    h = [S(), U("task"), *tool_rounds(5, size=400)]  # 2 clearable results of ~100 tokens each
    possible = estimate_tokens(h) - estimate_tokens(ClearToolUses(trigger_tokens=0).start(env()).compact(h).view)
    c = ClearToolUses(trigger_tokens=0, clear_at_least_tokens=possible + 1).start(env()).compact(h)
    assert c.tier == Tier.NONE and list(c.view) == h
    assert c.record is not None and "clear_at_least_tokens" in c.record.extra["skipped"]
    c = ClearToolUses(trigger_tokens=0, clear_at_least_tokens=possible).start(env()).compact(h)
    assert c.tier == Tier.WARN and c.record is not None and c.record.extra["cleared_input_tokens"] == possible


def test_clear_tool_inputs_blanks_arguments_and_keeps_ids() -> None:
    h = [S(), U("task"), *tool_rounds(4)]
    c = ClearToolUses(trigger_tokens=0, keep_tool_uses=1, clear_tool_inputs=True).start(env()).compact(h)
    calls = [tc for m in c.view for tc in m.tool_calls]
    assert [tc.arguments for tc in calls] == ["{}", "{}", "{}", h[-2].tool_calls[0].arguments]
    assert [tc.id for tc in calls] == ["c0", "c1", "c2", "c3"] and pairing_problems(c.view) == []


def test_clear_leaves_short_results_alone() -> None:
    h = [S(), U("task"), *tool_rounds(5, size=5)]
    c = ClearToolUses(trigger_tokens=0).start(env()).compact(h)
    assert c.tier == Tier.NONE and list(c.view) == h


# -- window --------------------------------------------------------------------------------


def test_window_keeps_first_and_last() -> None:
    h = [S(), U("task"), *[U(f"m{i}") for i in range(30)]]
    c = Window(keep_first=1, keep_last=5).start(env()).compact(h)
    assert list(c.view) == [h[0], h[1], *h[-5:]]
    assert c.tier == Tier.SOFT and c.record is not None and c.record.extra["forgotten"] == len(h) - 7
    short = h[:7]
    assert Window(keep_first=1, keep_last=5).start(env()).compact(short).tier == Tier.NONE


def test_window_never_splits_a_call_from_its_result() -> None:
    h = [S(), A("first", [TC("a")]), R("a", "ra"), *tool_rounds(10)]
    c = Window(keep_first=1, keep_last=3).start(env()).compact(h)
    view = list(c.view)
    # head extended over a's result; tail moved back to include the call of its first result
    assert view[:3] == h[:3]
    assert view[3:] == h[-4:] and view[3].role == "assistant"
    assert pairing_problems(view) == []


def test_amortized_window_forgets_in_chunks() -> None:
    p = Window(amortized=True, max_messages=10, keep_first=1)
    for write_back in (False, True):
        runner = p.start(env())
        history = [S(), U("task")]
        lengths, tiers = [], []
        for i in range(30):
            c = runner.compact(history)
            lengths.append(len(c.view) - 1)
            tiers.append(c.tier)
            history = (list(c.view) if write_back else history) + [U(f"m{i}")]
        # grows to max_messages, then is cut to max_messages // 2 in one go
        assert max(lengths) == 10 and Tier.SOFT in tiers
        cuts = [i for i, t in enumerate(tiers) if t == Tier.SOFT]
        assert all(lengths[i] == 5 for i in cuts)
        assert len(cuts) >= 3 and all(b - a == 6 for a, b in zip(cuts, cuts[1:])), (write_back, cuts)


def test_amortized_window_force_forgets_now() -> None:
    h = [S(), U("task"), *[U(f"m{i}") for i in range(8)]]
    p = Window(amortized=True, max_messages=10, keep_first=1)
    assert p.start(env()).compact(h).tier == Tier.NONE
    c = p.start(env()).compact(h, force=True)
    assert c.tier == Tier.SOFT and list(c.view) == [h[0], h[1], *h[-4:]]


# -- summary_single_threshold --------------------------------------------------------------


def test_summary_triggers_at_the_threshold_and_not_below() -> None:
    p = SummarySingleThreshold(context_window_tokens=1000, threshold_frac=0.5)  # 500 tokens = 2000 bytes
    at = [Message("system", "abcd"), U(L(1996))]
    below = [Message("system", "abcd"), U(L(1995))]
    assert estimate_tokens(at) == 500 and estimate_tokens(below) == 499
    s = ScriptedSummarizer([ANCHOR_REPLY])
    c = p.start(env(s)).compact(at)
    assert c.tier == Tier.FULL and len(s.calls) == 1
    s2 = ScriptedSummarizer([ANCHOR_REPLY])
    c = p.start(env(s2)).compact(below)
    assert c.tier == Tier.NONE and list(c.view) == below and s2.calls == []


def test_summary_message_format_with_and_without_anchors() -> None:
    h = [S(), U("task"), *tool_rounds(4)]
    p = SummarySingleThreshold(context_window_tokens=100, keep_last_messages=2)
    c = p.start(env(ScriptedSummarizer([ANCHOR_REPLY]))).compact(h)
    view = list(c.view)
    assert view[0] == h[0] and view[2:] == h[-2:] and len(view) == 4
    assert view[1].role == "user" and view[1].content.startswith(
        COMPACTION_MARKER + "\n## Anchors\n\n### User Intent\nfix it"
    )
    assert view[1].content.endswith("## Summary\nall good")
    rec = c.record
    assert (
        rec is not None and rec.summarized == len(h) - 3 and rec.preserved_tail == 2 and rec.summary_text == "all good"
    )
    assert rec.anchors is not None and rec.anchors[0].content == "fix it"
    calls = rec.extra["summary_calls"]
    assert [(x.call, x.template, x.outcome) for x in calls] == [(1, "first", "response")]

    free = SummarySingleThreshold(context_window_tokens=100, anchors=False)
    s = ScriptedSummarizer(["## Summary\nthe gist"])
    c = free.start(env(s)).compact(h)
    assert [m.content for m in c.view[1:]] == [COMPACTION_MARKER + "\n## Summary\nthe gist"]
    assert s.calls[0].template == "free_text" and c.record is not None and c.record.anchors is None


def test_summary_tail_keeps_calls_with_their_results() -> None:
    h = [S(), U("task"), A("x", [TC("p"), TC("q")]), R("p", L(300)), R("q", L(300))]
    p = SummarySingleThreshold(context_window_tokens=100, keep_last_messages=1)
    c = p.start(env(ScriptedSummarizer([ANCHOR_REPLY]))).compact(h)
    assert list(c.view[2:]) == h[2:] and pairing_problems(c.view) == []


def test_summary_failure_falls_back_to_the_newest_messages_that_fit() -> None:
    h = [S(), U("task"), *tool_rounds(8, size=400)]
    p = SummarySingleThreshold(context_window_tokens=1000, threshold_frac=0.5)
    c = p.start(env(ScriptedSummarizer([], fail_on_calls=[1]))).compact(h)
    assert c.tier == Tier.SOFT and c.record is not None and "summary failed" in c.record.error
    assert estimate_tokens(c.view) < 500 and list(c.view[-2:]) == h[-2:] and pairing_problems(c.view) == []
    assert c.record.extra["summary_calls"][0].error == "scripted failure on call 1"
    # no summarizer at all: the same fallback
    c = p.start(env(None)).compact(h)
    assert (
        c.tier == Tier.SOFT and c.record is not None and c.record.extra["summary_calls"][0].error == "provider is nil"
    )


def test_summary_carries_forward_and_goes_incremental() -> None:
    """In view mode the next turns are appended to the summary: no new summary until the
    carried view reaches the threshold again, and then the incremental template."""
    p = SummarySingleThreshold(context_window_tokens=1000, threshold_frac=0.5)
    s = ScriptedSummarizer([ANCHOR_REPLY, ANCHOR_REPLY])
    runner = p.start(env(s))
    h = [S(), U("task"), *tool_rounds(6, size=400)]
    c1 = runner.compact(h)
    assert c1.tier == Tier.FULL
    h2 = h + [A("next"), U("small")]
    c2 = runner.compact(h2)
    assert c2.tier == Tier.NONE and list(c2.view) == [*c1.view, *h2[len(h) :]]
    assert c2.record is not None and c2.record.extra["carried_over"] is True and len(s.calls) == 1
    h3 = h2 + tool_rounds(6, size=400)
    c3 = runner.compact(h3)
    assert c3.tier == Tier.FULL and [r.template for r in s.calls] == ["first", "incremental"]


# -- hybrid --------------------------------------------------------------------------------


def test_hybrid_masks_before_summarizing() -> None:
    h = [S(), U("task"), *tool_rounds(6, size=400)]
    # under the summary threshold: masking only
    c = Hybrid(keep_recent_turns=2, context_window_tokens=100_000).start(env()).compact(h)
    assert c.tier == Tier.WARN and sum(m.content == MASK_PLACEHOLDER for m in c.view) == 4
    assert c.record is not None and c.record.extra["masked"] == 4
    # over it even after masking: the summarizer sees the masked head
    s = ScriptedSummarizer([ANCHOR_REPLY])
    c = Hybrid(keep_recent_turns=2, context_window_tokens=200, keep_last_messages=2).start(env(s)).compact(h)
    assert c.tier == Tier.FULL and len(s.calls) == 1
    head = s.calls[0].head
    assert sum(m.content == MASK_PLACEHOLDER for m in head) == 4
    assert c.view[1].content.startswith(COMPACTION_MARKER)


def test_hybrid_masking_can_avoid_the_summary() -> None:
    h = [S(), U("task"), *tool_rounds(6, size=400)]
    masked_tokens = estimate_tokens(Hybrid(keep_recent_turns=2).start(env()).compact(h).view)
    window = int(masked_tokens / 0.8) + 10  # raw history over 0.8 of it, masked history under
    assert estimate_tokens(h) >= 0.8 * window
    s = ScriptedSummarizer([])
    c = Hybrid(keep_recent_turns=2, context_window_tokens=window).start(env(s)).compact(h)
    assert c.tier == Tier.WARN and s.calls == []


# -- controls ------------------------------------------------------------------------------


def test_keep_all_and_drop_all() -> None:
    h = [S(), U("task"), *tool_rounds(3), U("last question")]
    c = KeepAll().start(env()).compact(h)
    assert list(c.view) == h and c.tier == Tier.NONE
    c = DropAll().start(env()).compact(h)
    assert list(c.view) == [h[0], h[-1]] and c.tier == Tier.EMERGENCY
    # a last tool result loses its call, so only the system message remains
    c = DropAll().start(env()).compact(h[:-1])
    assert list(c.view) == [h[0]] and pairing_problems(c.view) == []
    assert DropAll().start(env()).compact([S(), U("task")]).tier == Tier.NONE


# -- validation, names, listing ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "params", "match"),
    [
        ("clear_tool_uses", {"trigger_tokens": -1}, r"ClearToolUses\.trigger_tokens must be >= 0, got -1"),
        ("clear_tool_uses", {"keep_tool_uses": -2}, r"keep_tool_uses must be >= 0, got -2"),
        ("clear_tool_uses", {"clear_at_least_tokens": -5}, r"clear_at_least_tokens must be >= 0, got -5"),
        (
            "clear_tool_uses",
            {"exclude_tools": "memory"},
            r"exclude_tools must be a list of tool names, not a string, got 'memory'",
        ),
        ("clear_tool_uses", {"placeholder": ""}, r"placeholder must not be empty"),
        ("window", {"keep_last": 0}, r"Window\.keep_last must be >= 1 .*got 0"),
        ("window", {"keep_first": -1}, r"Window\.keep_first must be >= 0, got -1"),
        (
            "window",
            {"amortized": True, "max_messages": 10, "keep_first": 5},
            r"keep_first must be < max_messages // 2 \(5\) when amortized, got 5",
        ),
        ("window", {"max_messages": 1}, r"max_messages must be >= 2, got 1"),
        (
            "summary_single_threshold",
            {"threshold_frac": 1.5},
            r"threshold_frac must be a fraction of the window in \(0, 1\], got 1.5",
        ),
        ("summary_single_threshold", {"threshold_frac": 0}, r"threshold_frac .* got 0"),
        ("summary_single_threshold", {"context_window_tokens": 0}, r"context_window_tokens must be > 0, got 0"),
        ("summary_single_threshold", {"keep_last_messages": -1}, r"keep_last_messages must be >= 0, got -1"),
        ("summary_single_threshold", {"summary_timeout_s": 0}, r"summary_timeout_s must be > 0, got 0"),
        ("hybrid", {"summary_threshold_frac": 80}, r"Hybrid\.summary_threshold_frac must be a fraction .* got 80"),
        ("hybrid", {"keep_recent_turns": -1}, r"keep_recent_turns must be >= 0, got -1"),
        ("hybrid", {"style": "paper"}, r"Hybrid\.style must be one of h9eval, jetbrains, got 'paper'"),
        ("hybrid", {"summarize_every_turns": 0}, r"summarize_every_turns must be >= 1, got 0"),
        ("hybrid", {"keep_last_turns": -1}, r"keep_last_turns must be >= 0, got -1"),
        (
            "hybrid",
            {"window_unit": "events"},
            r"window_unit must be one of assistant_turns, tool_results, got 'events'",
        ),
        (
            "observation_masking",
            {"window_unit": "turns"},
            r"ObservationMasking\.window_unit must be one of assistant_turns, tool_results, got 'turns'",
        ),
        (
            "clear_tool_uses",
            {"clear_tool_inputs": "edit"},
            r"clear_tool_inputs must be a boolean or a list of tool names, not a string, got 'edit'",
        ),
        (
            "clear_tool_uses",
            {"clear_tool_inputs": [""]},
            r"clear_tool_inputs entries must be non-empty tool names, got ''",
        ),
        ("clear_tool_uses", {"trigger_tool_uses": -1}, r"trigger_tool_uses must be >= 0, got -1"),
        (
            "codex_compact",
            {"auto_compact_token_limit": 0},
            r"CodexCompact\.auto_compact_token_limit must be > 0, got 0",
        ),
        ("codex_compact", {"user_message_max_tokens": -1}, r"user_message_max_tokens must be >= 0, got -1"),
        (
            "claude_code_compact",
            {"context_window_tokens": 30000},
            r"buffer_tokens must leave a positive threshold .*= -3000\), got 13000",
        ),
        (
            "claude_code_compact",
            {"read_tools": "Read"},
            r"read_tools must be a list of tool names, not a string, got 'Read'",
        ),
        (
            "openhands_condenser",
            {"max_size": 10, "keep_first": 4},
            r"OpenHandsCondenser\.keep_first must be < max_size // 2 - 1 \(4\) .*got 4",
        ),
    ],
)
def test_validation_errors_name_field_rule_and_value(kind: str, params: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make_policy(kind, **params)


def test_unknown_names_get_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown policy 'windw'; did you mean 'window'\?"):
        make_policy("windw")
    with pytest.raises(ConfigError, match=r"unknown parameter of policy 'window' 'keep_lst'; did you mean 'keep_last'"):
        make_policy("window", keep_lst=3)
    with pytest.raises(ConfigError, match=r"did you mean 'clear_tool_uses'\?"):
        policy_from_dict({"kind": "clear_tool_use"})
    with pytest.raises(ConfigError, match=r"policy 'keep_all'"):
        make_policy("keep_all", window=3)


def test_policy_params_round_trip() -> None:
    p = policy_from_dict({"kind": "clear_tool_uses", "exclude_tools": ["memory"], "trigger_tokens": 5})
    assert isinstance(p, ClearToolUses) and p.exclude_tools == ("memory",) and hash(p)


def test_describe_policies_lists_every_kind_with_real_defaults() -> None:
    d = {x["kind"]: x for x in describe_policies()}
    assert set(d) == set(registry())
    w = {p["name"]: p for p in d["window"]["parameters"]}
    assert w["keep_last"]["default"] == 20 and w["keep_last"]["type"] == "int" and w["amortized"]["default"] is False
    assert d["keep_all"]["parameters"] == [] and d["clear_tool_uses"]["source"].startswith("Claude API")
    assert all(x["summary"] and x["source"] for x in d.values())
    text = format_policies_table()
    for kind in registry():
        assert f"\n{kind}  (" in "\n" + text
    assert "trigger_tokens" in text and "100_000" in text and "(no parameters)" in text
