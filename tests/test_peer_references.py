"""The peers' own scenarios, translated into h9eval message lists; each test names its source.

Sources (public code and documentation, read for behaviour only):

* SWE-agent / JetBrains "The Complexity Trap" (arXiv 2508.21433): ``sweagent/agent/
  history_processors.py`` (``LastNObservations``, ``SummarizeEveryNTurns``), its
  ``tests/test_history_processors.py`` and the hybrid configuration
  ``config/default_no_demo_checkpoint_same_model_openhands_N=43_M=10_masking_M=10.yaml``.
* OpenHands: ``openhands/memory/condenser/impl/observation_masking_condenser.py``,
  ``openhands/memory/conversation_memory.py`` (a tool call is sent only with its results),
  the SDK's ``openhands/sdk/context/condenser/llm_summarizing_condenser.py`` and its
  ``tests/sdk/context/condenser/test_llm_summarizing_condenser.py``, and the V0 rolling-
  condenser harness in ``tests/unit/memory/condenser/test_condenser.py``.
* Codex CLI: ``codex-rs/core/src/compact.rs`` (``build_compacted_history``, the trim-and-retry
  loop, ``collect_user_messages``) and its unit tests; the auto-compact limit of
  ``codex-rs/core`` (``context_window * 9 / 10``, compared with ``>=``).
* Claude Code auto-compact as its users deobfuscated it (threshold = effective window - 13,000
  tokens, effective window = window - 20,000 output tokens; up to 5 recently read files
  re-attached, 5,000 tokens each; the todo list re-attached).
* Anthropic context editing documentation (``clear_tool_uses_20250919``: ``trigger`` of type
  ``input_tokens`` or ``tool_uses``, ``keep``, ``clear_at_least``, ``exclude_tools``,
  ``clear_tool_inputs`` as a boolean or a list of tool names).
"""

from __future__ import annotations

from h9eval.compaction.base import CompactionEnv, LogicalClock, make_policy
from h9eval.compaction.clear_tool_uses import CLEAR_PLACEHOLDER, ClearToolUses
from h9eval.compaction.observation_masking import JETBRAINS_PLACEHOLDER, MASK_PLACEHOLDER, ObservationMasking, mask_observations
from h9eval.compaction.records import Tier
from h9eval.compaction.repair import pairing_problems
from h9eval.messages import Message
from h9eval.summarizers.base import ScriptedSummarizer
from tests.helpers import A, L, R, S, TC, U


def env(summarizer: object | None = None) -> CompactionEnv:
    return CompactionEnv(summarizer=summarizer, session_id="ref", clock=LogicalClock(), seed=1)  # type: ignore[arg-type]


def rounds(n: int, *, same_id: str | None = None, size: int = 400, name: str = "bash") -> list[Message]:
    """n assistant turns with one call each and its result; ``same_id`` reuses one id."""
    out: list[Message] = []
    for i in range(n):
        cid = same_id if same_id is not None else f"c{i}"
        out += [A(f"step {i}", [TC(cid, name, '{"cmd": "cat f%d"}' % i)]), R(cid, f"line {i}\n" + L(size))]
    return out


# -- reused ids: selection by position -------------------------------------------------------


def test_masking_with_reused_ids_masks_by_position() -> None:
    """Issue scenario: 12 outputs, every call ``call_0``, window 10: the oldest 2 are masked
    (SWE-agent and OpenHands select by position), not all 12."""
    h = [S(), U("task"), *rounds(12, same_id="call_0")]
    out, n = mask_observations(h, 10)
    results = [m for m in out if m.tool_call_id]
    assert n == 2 and [m.content == MASK_PLACEHOLDER for m in results] == [True] * 2 + [False] * 10
    c = ObservationMasking(keep_recent_turns=10).start(env()).compact(h)
    assert c.record is not None and c.record.extra["masked"] == 2


def test_clearing_with_reused_ids_clears_by_position() -> None:
    """Issue scenario: 6 results, all ``toolu_0``, keep=3: 3 cleared, 3 kept (not 6 of 6)."""
    h = [S(), U("task"), *rounds(6, same_id="toolu_0")]
    c = ClearToolUses(trigger_tokens=0, keep_tool_uses=3, clear_tool_inputs=True).start(env()).compact(h)
    results = [m for m in c.view if m.tool_call_id]
    assert [m.content == CLEAR_PLACEHOLDER for m in results] == [True] * 3 + [False] * 3
    args = [tc.arguments for m in c.view for tc in m.tool_calls]
    assert args[:3] == ["{}"] * 3 and all(a != "{}" for a in args[3:])
    assert c.record is not None and c.record.extra["cleared_tool_uses"] == 3 and pairing_problems(c.view) == []


def test_hybrid_masking_stage_with_reused_ids() -> None:
    h = [S(), U("task"), *rounds(6, same_id="call_0")]
    c = make_policy("hybrid", keep_recent_turns=2, context_window_tokens=1_000_000).start(env()).compact(h)
    assert c.record is not None and c.record.extra["masked"] == 4
    assert [m.content == MASK_PLACEHOLDER for m in c.view if m.tool_call_id] == [True] * 4 + [False] * 2


def test_a_result_pairs_with_the_nearest_preceding_call_of_its_id() -> None:
    # two parallel calls with distinct ids, then the same ids again: the second pair's results
    # belong to the second message, which is inside the window
    h = [S(), U("t"), A("a", [TC("x"), TC("y")]), R("x", L(50)), R("y", L(50)), A("b", [TC("x"), TC("y")]), R("x", L(60)), R("y", L(60))]
    out, n = mask_observations(h, 1)
    assert n == 2 and [m.content for m in out[3:5]] == [MASK_PLACEHOLDER] * 2 and out[6:] == h[6:]


# -- JetBrains / SWE-agent LastNObservations -----------------------------------------------


def test_swe_agent_last_n_observations_count() -> None:
    """SWE-agent ``tests/test_history_processors.py::test_last_n_observations``: with n=3, the
    number of placeholders is (observations - 3 - 1), the -1 being the instance template (the
    task message here, never a tool result)."""
    h = [S(), U("instance template: fix the bug"), *rounds(9)]
    total_observations = 1 + sum(1 for m in h if m.tool_call_id)  # the template is an observation there
    c = ObservationMasking(keep_recent_turns=3, window_unit="tool_results", placeholder=JETBRAINS_PLACEHOLDER).start(env()).compact(h)
    assert sum("Old environment output" in m.content for m in c.view) == total_observations - 3 - 1
    assert c.view[1] == h[1]


def test_swe_agent_placeholder_carries_the_line_count() -> None:
    """``LastNObservations``: ``Old environment output: (N lines omitted)`` with N the output's
    ``len(text.splitlines())``."""
    h = [S(), U("task"), A("a", [TC("c1")]), R("c1", "one\ntwo\nthree\n"), A("b", [TC("c2")]), R("c2", "x")]
    c = ObservationMasking(keep_recent_turns=1, window_unit="tool_results", placeholder=JETBRAINS_PLACEHOLDER).start(env()).compact(h)
    assert c.view[3].content == "Old environment output: (3 lines omitted)" and c.view[5] == h[5]
    # masking the masked view again changes nothing (idempotent, as the processor is)
    again = ObservationMasking(keep_recent_turns=1, window_unit="tool_results", placeholder=JETBRAINS_PLACEHOLDER).start(env()).compact(list(c.view))
    assert again.view == c.view


def test_tool_results_unit_counts_parallel_results() -> None:
    # one assistant turn with three results: by turns nothing is old, by results two are
    h = [S(), U("t"), A("a", [TC("p"), TC("q"), TC("r")]), R("p", L(40)), R("q", L(40)), R("r", L(40))]
    assert mask_observations(h, 1)[1] == 0
    assert mask_observations(h, 1, window_unit="tool_results")[1] == 2


# -- OpenHands: a masked observation's action is not sent -------------------------------------


def test_openhands_holds_back_the_call_of_a_masked_observation() -> None:
    """OpenHands ``ObservationMaskingCondenser`` replaces an old observation by an
    ``AgentCondensationObservation('<MASKED>')`` (sent as a user message), and
    ``ConversationMemory`` sends an assistant tool call only together with a tool-role result
    for every call; so the masked observation's action is not sent either."""
    h = [S(), U("task"), *rounds(4)]
    c = ObservationMasking(keep_recent_turns=2, send_masked_calls=False).start(env()).compact(h)
    view = list(c.view)
    assert view == [h[0], h[1], U(MASK_PLACEHOLDER), U(MASK_PLACEHOLDER), *h[6:]]
    assert pairing_problems(view) == [] and c.tier == Tier.WARN
    assert c.record is not None and c.record.extra["held_back_calls"] == 2 and c.record.extra["masked"] == 2


def test_openhands_holds_back_all_results_of_a_partly_masked_parallel_call() -> None:
    h = [S(), U("t"), A("a", [TC("p"), TC("q")]), R("p", L(40)), R("q", L(40)), A("b", [TC("z")]), R("z", L(40))]
    c = ObservationMasking(keep_recent_turns=2, window_unit="tool_results", send_masked_calls=False).start(env()).compact(h)
    # p is masked; q is kept but its assistant message is held back, so q goes too
    assert list(c.view) == [h[0], h[1], U(MASK_PLACEHOLDER), *h[5:]] and pairing_problems(c.view) == []


# -- Anthropic context editing ---------------------------------------------------------------


def test_context_editing_tool_uses_trigger() -> None:
    """``trigger: {type: tool_uses, value: N}``: clearing starts once the prompt holds more
    than N tool uses, whatever its tokens."""
    h = [S(), U("task"), *rounds(5)]
    assert ClearToolUses(trigger_tool_uses=5, keep_tool_uses=2).start(env()).compact(h).tier == Tier.NONE
    c = ClearToolUses(trigger_tool_uses=4, keep_tool_uses=2).start(env()).compact(h)
    assert c.tier == Tier.WARN and c.record is not None and c.record.extra["cleared_tool_uses"] == 3
    assert c.record.extra["tool_uses"] == 5


def test_context_editing_clear_tool_inputs_list() -> None:
    """``clear_tool_inputs`` as a list of tool names: only those tools' inputs are cleared
    (their results are cleared like any other)."""
    h = [S(), U("task"), *rounds(2, name="bash"), *[m for m in rounds(2, name="edit") if True]]
    # rounds() numbers ids from 0 each time: give the edit calls their own ids
    h = [S(), U("task"), *rounds(2, name="bash")]
    h += [A("e0", [TC("e0", "edit", '{"path": "a.py", "text": "xxxxxxxx"}')]), R("e0", L(300))]
    h += [A("e1", [TC("e1", "edit", '{"path": "b.py", "text": "yyyyyyyy"}')]), R("e1", L(300))]
    p = ClearToolUses(trigger_tokens=0, keep_tool_uses=1, clear_tool_inputs=["edit"])
    assert p.clear_tool_inputs == ("edit",)
    c = p.start(env()).compact(h)
    args = {tc.id: tc.arguments for m in c.view for tc in m.tool_calls}
    assert args["e0"] == "{}" and args["c0"] != "{}" and args["c1"] != "{}" and args["e1"] != "{}"
    assert [m.content == CLEAR_PLACEHOLDER for m in c.view if m.tool_call_id] == [True, True, True, False]


# -- OpenHands LLMSummarizingCondenser ---------------------------------------------------------


class _Counting:
    """The tests' mock LLM: one fixed reply, counting the calls and keeping the requests."""

    summarizer_id = "counting"

    def __init__(self, reply: str = "Summary of forgotten events") -> None:
        self.reply = reply
        self.requests: list[object] = []

    def summarize(self, request: object) -> object:
        from h9eval.summarizers.base import SummaryReply

        self.requests.append(request)
        return SummaryReply(text=self.reply)


def events(n: int, text: str = "Event {i}") -> list[Message]:
    """The SDK tests' ``message_event`` list: plain user messages."""
    return [U(text.format(i=i)) for i in range(n)]


def condenser(**kw: object) -> object:
    return make_policy("openhands_condenser", **kw)


def test_openhands_defaults_and_invalid_config() -> None:
    """SDK ``test_default_values`` (max_size 240, keep_first 2) and ``test_invalid_config``
    (max_size 0, keep_first -1, keep_first 8 with max_size 10), plus V0's max_size=4/keep_first=2."""
    import pytest

    from h9eval.errors import ConfigError

    p = condenser()
    assert p.max_size == 240 and p.keep_first == 2 and p.max_tokens is None  # type: ignore[attr-defined]
    for kw, match in (
        ({"max_size": 0}, r"max_size must be >= 1, got 0"),
        ({"keep_first": -1}, r"keep_first must be >= 0, got -1"),
        ({"max_size": 10, "keep_first": 8}, r"keep_first must be < max_size // 2 - 1 \(4\) to leave room for condensation, got 8"),
        ({"max_size": 4, "keep_first": 2}, r"keep_first must be < max_size // 2 - 1"),
        ({"max_tokens": 0}, r"max_tokens must be > 0, got 0"),
        ({"minimum_progress_frac": 1.0}, r"minimum_progress_frac must be in \(0, 1\), got 1.0"),
    ):
        with pytest.raises(ConfigError, match=match):
            condenser(**kw)


def test_openhands_should_condense_only_above_max_size() -> None:
    """SDK ``test_should_condense`` / ``test_condense_returns_view_when_no_condensation_needed``:
    max_size 100 events is not condensed (no LLM call), 101 is."""
    s = _Counting()
    c = condenser(max_size=100).start(env(s)).compact(events(100))  # type: ignore[attr-defined]
    assert c.tier == Tier.NONE and list(c.view) == events(100) and s.requests == []
    c = condenser(max_size=100).start(env(s)).compact(events(101))  # type: ignore[attr-defined]
    assert c.tier == Tier.FULL and len(s.requests) == 1


def test_openhands_condensation_inserts_the_summary_at_keep_first() -> None:
    """SDK ``test_condense_returns_condensation_when_needed``: max_size 10, keep_first 3, 11
    events: summary_offset == keep_first, something forgotten, one LLM call; the view is
    ``max_size // 2`` events (head, summary, newest)."""
    s = _Counting()
    h = events(11)
    c = condenser(max_size=10, keep_first=3).start(env(s)).compact(h)  # type: ignore[attr-defined]
    view = list(c.view)
    assert view[:3] == h[:3] and view[3] == U("Summary of forgotten events") and view[4:] == h[-1:]
    assert len(view) == 10 // 2 and len(s.requests) == 1
    assert c.record is not None and c.record.summarized == 7 and c.record.extra["reasons"] == ["events"]


def test_openhands_previous_summary_goes_to_the_summarizer() -> None:
    """SDK ``test_get_condensation_with_previous_summary``: the second condensation's prompt
    holds the previous summary (it is among the forgotten events)."""
    s = _Counting("Previous summary content")
    runner = condenser(max_size=10, keep_first=3).start(env(s))  # type: ignore[attr-defined]
    h = events(11)
    runner.compact(h)
    h = h + events(6, "Later {i}")
    c = runner.compact(h)
    assert c.tier == Tier.FULL and len(s.requests) == 2
    assert "Previous summary content" in s.requests[1].user_prompt  # type: ignore[attr-defined]
    assert sum(m.content == "Previous summary content" for m in c.view) == 1  # one summary at a time


def test_openhands_request_and_events_most_aggressive_wins() -> None:
    """SDK ``test_condense_with_request_and_events_reasons`` (max_size 20, keep_first 2, 25
    events + a request: min(9, 7) -> 16 forgotten) and ``test_most_aggressive_condensation_
    chosen`` (max_size 30, 40 events + request: min(17, 12) -> 26 forgotten)."""
    for max_size, n, forgotten in ((20, 25, 16), (30, 40, 26)):
        c = condenser(max_size=max_size, keep_first=2).start(env(_Counting())).compact_force(events(n))  # type: ignore[attr-defined]
        assert c.record is not None and c.record.summarized == forgotten, (max_size, n)
        assert set(c.record.extra["reasons"]) == {"request", "events"}


def test_openhands_minimum_progress() -> None:
    """SDK ``test_minimum_progress_threshold_met``: max_size 20, keep_first 2, 30 events: the
    condensation is made (``view[2:23]``, 21 events, 70 % > 10 %; the SDK test's comment says
    23, counting the head, and asserts only that a summary is made). And a request on a view whose forgettable range is below
    ``minimum_progress`` is refused (``..._not_met``; here by a large minimum)."""
    c = condenser(max_size=20, keep_first=2).start(env(_Counting())).compact(events(30))  # type: ignore[attr-defined]
    assert c.tier == Tier.FULL and c.record is not None and c.record.summarized == 21
    s = _Counting()
    c = condenser(max_size=20, keep_first=2, minimum_progress_frac=0.8).start(env(s)).compact(events(30))  # type: ignore[attr-defined]
    assert c.tier == Tier.NONE and s.requests == [] and c.record is not None and "minimum progress" in c.record.error


def test_openhands_token_limit() -> None:
    """SDK ``test_condense_with_token_limit_exceeded``: max_tokens 100, max_size 1000, keep_first
    2, 15 events of 40 characters (10 tokens each): the TOKENS reason alone; events are forgotten
    until half of max_tokens would remain (the shortest prefix over 150 - 50 = 100 tokens: 11)."""
    h = events(15, "A" * 40)
    assert all(m.nbytes == 40 for m in h)
    c = condenser(max_size=1000, max_tokens=100, keep_first=2).start(env(_Counting())).compact(h)  # type: ignore[attr-defined]
    assert c.record is not None and c.record.extra["reasons"] == ["tokens"] and c.record.summarized == 11
    assert list(c.view[3:]) == h[-2:]


def test_openhands_rolling_view_sizes_and_condensation_count() -> None:
    """V0 ``test_llm_summarizing_condenser_gives_expected_view_size`` and ``..._keeps_first_and_
    summary_events`` with ``RollingCondenserTestHarness``: one event at a time, a condensation
    yields no view; view sizes follow ``((i - max) % target) + target + 1`` once past max_size,
    the prefix stays, the summary sits at ``keep_first`` and the LLM is called once per
    condensation."""
    max_size, target = 10, 5
    for keep_first in (1, 3):
        s = _Counting()
        runner = condenser(max_size=max_size, keep_first=keep_first).start(env(s))  # type: ignore[attr-defined]
        stream = events(max_size * 10)
        history: list[Message] = []
        i = 0
        for ev in stream:
            history.append(ev)
            c = runner.compact(list(history))
            if c.tier == Tier.FULL:
                continue  # the condensation is recorded; the next event sees its view
            view = list(c.view)
            expected = i + 1 if i < max_size else ((i - max_size) % target) + target + 1
            assert len(view) == expected, (keep_first, i)
            conds = 0 if i < max_size else (i - max_size) // target + 1
            assert len(s.requests) == conds
            assert view[:keep_first] == stream[: min(keep_first, i + 1)]
            if i > max_size:
                assert view[keep_first].content == "Summary of forgotten events"
            i += 1
        assert i > max_size * 5


def test_openhands_cut_points_never_split_a_tool_call() -> None:
    """SDK manipulation indices: both cut points move forward to a message that is not a tool
    result."""
    h = [S(), U("task"), *rounds(8)]
    c = condenser(max_size=10, keep_first=2).start(env(_Counting())).compact(h)  # type: ignore[attr-defined]
    assert c.tier == Tier.FULL and pairing_problems(c.view) == [] and c.view[:2] == tuple(h[:2])
    assert c.view[3].role == "assistant"


def test_openhands_summary_failure_leaves_the_view() -> None:
    h = events(12)
    c = condenser(max_size=10, keep_first=2).start(env(ScriptedSummarizer([], fail_on_calls=[1]))).compact(h)  # type: ignore[attr-defined]
    assert c.tier == Tier.NONE and list(c.view) == h and c.record is not None and "summary failed" in c.record.error
    c = condenser(max_size=10, keep_first=2).start(env(None)).compact(h)  # type: ignore[attr-defined]
    assert c.tier == Tier.NONE and c.record is not None and "summary_calls" not in c.record.extra
