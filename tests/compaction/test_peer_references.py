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

from h9eval.compaction.base import CompactionEnv, LogicalClock
from h9eval.compaction.policies import make_policy
from h9eval.compaction.policies.clear_tool_uses import CLEAR_PLACEHOLDER, ClearToolUses
from h9eval.compaction.masking import JETBRAINS_PLACEHOLDER
from h9eval.compaction.policies.observation_masking import ObservationMasking
from h9eval.compaction.masking import MASK_PLACEHOLDER, mask_observations
from h9eval.compaction.records import Tier
from h9eval.compaction.repair import pairing_problems
from h9eval.core.messages import Message
from h9eval.compaction.summary import ScriptedSummarizer
from tests.helpers import A, L, R, S, TC, U


def env(summarizer: object | None = None) -> CompactionEnv:
    # type: ignore[arg-type]
    return CompactionEnv(summarizer=summarizer, session_id="ref", clock=LogicalClock(), seed=1)


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
    h = [
        S(),
        U("t"),
        A("a", [TC("x"), TC("y")]),
        R("x", L(50)),
        R("y", L(50)),
        A("b", [TC("x"), TC("y")]),
        R("x", L(60)),
        R("y", L(60)),
    ]
    out, n = mask_observations(h, 1)
    assert n == 2 and [m.content for m in out[3:5]] == [MASK_PLACEHOLDER] * 2 and out[6:] == h[6:]


# -- JetBrains / SWE-agent LastNObservations -----------------------------------------------


def test_swe_agent_last_n_observations_count() -> None:
    """SWE-agent ``tests/test_history_processors.py::test_last_n_observations``: with n=3, the
    number of placeholders is (observations - 3 - 1), the -1 being the instance template (the
    task message here, never a tool result)."""
    h = [S(), U("instance template: fix the bug"), *rounds(9)]
    total_observations = 1 + sum(1 for m in h if m.tool_call_id)  # the template is an observation there
    c = (
        ObservationMasking(keep_recent_turns=3, window_unit="tool_results", placeholder=JETBRAINS_PLACEHOLDER)
        .start(env())
        .compact(h)
    )
    assert sum("Old environment output" in m.content for m in c.view) == total_observations - 3 - 1
    assert c.view[1] == h[1]


def test_swe_agent_placeholder_carries_the_line_count() -> None:
    """``LastNObservations``: ``Old environment output: (N lines omitted)`` with N the output's
    ``len(text.splitlines())``."""
    h = [S(), U("task"), A("a", [TC("c1")]), R("c1", "one\ntwo\nthree\n"), A("b", [TC("c2")]), R("c2", "x")]
    c = (
        ObservationMasking(keep_recent_turns=1, window_unit="tool_results", placeholder=JETBRAINS_PLACEHOLDER)
        .start(env())
        .compact(h)
    )
    assert c.view[3].content == "Old environment output: (3 lines omitted)" and c.view[5] == h[5]
    # masking the masked view again changes nothing (idempotent, as the processor is)
    again = (
        ObservationMasking(keep_recent_turns=1, window_unit="tool_results", placeholder=JETBRAINS_PLACEHOLDER)
        .start(env())
        .compact(list(c.view))
    )
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
    c = (
        ObservationMasking(keep_recent_turns=2, window_unit="tool_results", send_masked_calls=False)
        .start(env())
        .compact(h)
    )
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
        from h9eval.compaction.summary import SummaryReply

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

    from h9eval.core.errors import ConfigError

    p = condenser()
    assert p.max_size == 240 and p.keep_first == 2 and p.max_tokens is None  # type: ignore[attr-defined]
    for kw, match in (
        ({"max_size": 0}, r"max_size must be >= 1, got 0"),
        ({"keep_first": -1}, r"keep_first must be >= 0, got -1"),
        (
            {"max_size": 10, "keep_first": 8},
            r"keep_first must be < max_size // 2 - 1 \(4\) to leave room for condensation, got 8",
        ),
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
        # type: ignore[attr-defined]
        c = condenser(max_size=max_size, keep_first=2).start(env(_Counting())).compact(events(n), force=True)
        assert c.record is not None and c.record.summarized == forgotten, (max_size, n)
        assert set(c.record.extra["reasons"]) == {"request", "events"}


def test_openhands_minimum_progress() -> None:
    """SDK ``test_minimum_progress_threshold_met``: max_size 20, keep_first 2, 30 events: the
    condensation is made (``view[2:23]``, 21 events, 70 % > 10 %; the SDK test's comment says
    23, counting the head, and asserts only that a summary is made).
    And a request on a view whose forgettable range is below
    ``minimum_progress`` is refused (``..._not_met``; here by a large minimum)."""
    c = condenser(max_size=20, keep_first=2).start(env(_Counting())).compact(events(30))  # type: ignore[attr-defined]
    assert c.tier == Tier.FULL and c.record is not None and c.record.summarized == 21
    s = _Counting()
    # type: ignore[attr-defined]
    c = condenser(max_size=20, keep_first=2, minimum_progress_frac=0.8).start(env(s)).compact(events(30))
    assert c.tier == Tier.NONE and s.requests == [] and c.record is not None and "minimum progress" in c.record.error


def test_openhands_token_limit() -> None:
    """SDK ``test_condense_with_token_limit_exceeded``: max_tokens 100, max_size 1000, keep_first
    2, 15 events of 40 characters (10 tokens each): the TOKENS reason alone; events are forgotten
    until half of max_tokens would remain (the shortest prefix over 150 - 50 = 100 tokens: 11)."""
    h = events(15, "A" * 40)
    assert all(m.nbytes == 40 for m in h)
    # type: ignore[attr-defined]
    c = condenser(max_size=1000, max_tokens=100, keep_first=2).start(env(_Counting())).compact(h)
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
    # type: ignore[attr-defined]
    c = condenser(max_size=10, keep_first=2).start(env(ScriptedSummarizer([], fail_on_calls=[1]))).compact(h)
    assert c.tier == Tier.NONE and list(c.view) == h and c.record is not None and "summary failed" in c.record.error
    c = condenser(max_size=10, keep_first=2).start(env(None)).compact(h)  # type: ignore[attr-defined]
    assert c.tier == Tier.NONE and c.record is not None and "summary_calls" not in c.record.extra


# -- JetBrains hybrid as published (SummarizeEveryNTurns + LastNObservations) -----------------


def jetbrains(**kw: object) -> object:
    params: dict[str, object] = {
        "style": "jetbrains",
        "summarize_every_turns": 3,
        "keep_last_turns": 2,
        "keep_recent_turns": 10,
        "window_unit": "tool_results",
        "placeholder": JETBRAINS_PLACEHOLDER,
    }
    params.update(kw)
    return make_policy("hybrid", **params)


def test_jetbrains_hybrid_checkpoint_after_the_first_two_messages() -> None:
    """``SummarizeEveryNTurns`` (n=N, keep_last_m_turns=M, static checkpointing): nothing until
    N+M unsummarised turns; then the oldest N raw turns go to the summarizer with the problem
    statement, and the view is ``history[:2]`` + an assistant checkpoint + the kept turns."""
    s = ScriptedSummarizer(["state after three turns", "state after six turns"])
    runner = jetbrains().start(env(s))  # type: ignore[attr-defined]
    h = [S(), U("the problem statement"), *rounds(4)]
    assert runner.compact(h).tier == Tier.NONE and s.calls == []
    h = h + rounds(5)[8:]  # turn 5 (ids c4)
    c = runner.compact(h)
    view = list(c.view)
    assert c.tier == Tier.FULL and view[:2] == h[:2]
    assert view[2] == Message("assistant", "Checkpoint for the last 3 turns:\nstate after three turns")
    assert view[3:] == h[8:] and pairing_problems(view) == []
    req = s.calls[0]
    assert "<PROBLEM_STATEMENT>\nthe problem statement\n</PROBLEM_STATEMENT>" in req.user_prompt
    # the summarizer saw the raw outputs, not placeholders
    assert [m.content for m in req.head if m.tool_call_id] == [m.content for m in h[2:8] if m.tool_call_id]
    assert c.record is not None and c.record.summarized == 6 and c.record.summary_text == "state after three turns"


def test_jetbrains_hybrid_static_checkpoint_replaces_the_previous_one() -> None:
    s = ScriptedSummarizer(["first", "second"])
    runner = jetbrains().start(env(s))  # type: ignore[attr-defined]
    raw = [S(), U("task")]
    views = []
    for i in range(8):
        raw = raw + [A(f"step {i}", [TC(f"c{i}")]), R(f"c{i}", f"out {i}\n" + L(100))]
        views.append(runner.compact(raw))
    fulls = [i for i, c in enumerate(views) if c.tier == Tier.FULL]
    assert fulls == [4, 7]  # 5 = 3 + 2 unsummarised turns; then 2 + 3 more
    last = list(views[-1].view)
    assert sum(m.content.startswith("Checkpoint for the last") for m in last) == 1
    assert last[2].content == "Checkpoint for the last 3 turns:\nsecond"
    assert (
        "<PREVIOUS_CHECKPOINT>\nCheckpoint for the last 3 turns:\nfirst\n</PREVIOUS_CHECKPOINT>"
        in s.calls[1].user_prompt
    )
    assert last[3:] == raw[-4:]


def test_jetbrains_hybrid_masks_after_summarising() -> None:
    """The published chain runs ``last_n_observations`` after the summary: the kept turns'
    older outputs are masked with the line count; the summarizer saw them raw."""
    s = ScriptedSummarizer(["cp"])
    h = [S(), U("task"), *rounds(5)]
    c = jetbrains(keep_recent_turns=1).start(env(s)).compact(h)  # type: ignore[attr-defined]
    results = [m for m in c.view if m.tool_call_id]
    assert [m.content for m in results] == ["Old environment output: (2 lines omitted)", h[-1].content]
    assert all("Old environment output" not in m.content for m in s.calls[0].head)


def test_jetbrains_hybrid_view_and_write_back_agree() -> None:
    def loop(write_back: bool) -> list[tuple[object, ...]]:
        # type: ignore[attr-defined]
        runner = jetbrains(keep_recent_turns=2).start(env(ScriptedSummarizer(["a", "b", "c"])))
        history = [S(), U("task")]
        out = []
        for i in range(9):
            c = runner.compact(history)
            out.append(c.view)
            history = (list(c.view) if write_back else history) + [A(f"s{i}", [TC(f"k{i}")]), R(f"k{i}", L(80))]
        return out

    assert loop(False) == loop(True)


def test_jetbrains_hybrid_token_trigger_and_failure() -> None:
    h = [S(), U("task"), *rounds(4, size=800)]
    # turns alone would not trigger (N + M = 45); the token trigger folds all but M turns
    p = jetbrains(
        summarize_every_turns=43, keep_last_turns=1, token_trigger=True, context_window_tokens=500, keep_recent_turns=10
    )
    c = p.start(env(ScriptedSummarizer(["cp"]))).compact(h)  # type: ignore[attr-defined]
    assert (
        c.tier == Tier.FULL
        and c.view[2].content.startswith("Checkpoint for the last 3 turns:")
        and list(c.view[3:]) == h[-2:]
    )
    # a failed summary keeps the turns, records the error and retries at the next call
    s = ScriptedSummarizer(["unused", "late"], fail_on_calls=[1])
    runner = p.start(env(s))  # type: ignore[attr-defined]
    c = runner.compact(h)
    assert c.tier == Tier.NONE and list(c.view) == h and c.record is not None and "summary failed" in c.record.error
    assert runner.compact(h).tier == Tier.FULL and len(s.calls) == 2


# -- Codex CLI auto-compact --------------------------------------------------------------------


def test_codex_trigger_is_nine_tenths_by_integer_arithmetic() -> None:
    p = make_policy("codex_compact", context_window_tokens=1001)
    assert p.limit_tokens == 900  # type: ignore[attr-defined]
    at = [Message("system", "abcd"), U(L(3596))]
    below = [Message("system", "abcd"), U(L(3595))]
    assert p.start(env(ScriptedSummarizer(["s"]))).compact(at).tier == Tier.FULL  # type: ignore[attr-defined]
    assert p.start(env(ScriptedSummarizer(["s"]))).compact(below).tier == Tier.NONE  # type: ignore[attr-defined]


def test_codex_compacted_history_shape() -> None:
    """``summarize_context_three_requests_and_instructions`` / ``build_compacted_history``: the
    initial context, then the user messages (no assistant text, no tool output), then the
    summary as a user message with the hand-off prefix."""
    from h9eval.compaction.policies.codex_compact import CODEX_SUMMARY_PREFIX

    env_ctx = U("<environment_context>cwd=/repo</environment_context>")
    h = [S(), env_ctx, U("first request"), A("reply 1"), U("second request"), *rounds(2), U("third request")]
    # type: ignore[attr-defined]
    c = make_policy("codex_compact").start(env(ScriptedSummarizer(["SUMMARY"]))).compact(h, manual=True)
    assert [m.content for m in c.view] == [
        "sys",
        env_ctx.content,
        "first request",
        "second request",
        "third request",
        CODEX_SUMMARY_PREFIX + "\nSUMMARY",
    ]
    assert all(m.role == "user" for m in c.view[1:]) and c.tier == Tier.FULL


def test_codex_truncates_the_user_message_that_does_not_fit() -> None:
    """``build_token_limited_compacted_history_truncates_overlong_user_messages``: limit 16
    tokens, one message of ``"word " * 200``: two items, a truncation marker, not the full
    text, then the summary."""
    from h9eval.compaction.policies.codex_compact import build_compacted_history

    big = "word " * 200
    out, truncated = build_compacted_history([], [big], "SUMMARY", 16)
    assert len(out) == 2 and truncated and "tokens truncated" in out[0].content and big not in out[0].content
    assert out[1] == U("SUMMARY") and len(out[0].content.encode()) < 16 * 4 + 40
    # newest first within the budget, then in their order; the first that does not fit is cut
    out, truncated = build_compacted_history([], ["old " * 40, "mid", "new"], "S", 5)
    assert [m.content for m in out[1:-1]] == ["mid", "new"] and out[0].content.startswith("old") and truncated


def test_codex_collects_user_messages_only() -> None:
    """``collect_user_messages_extracts_user_text_only`` and ``..._filters_session_prefix_
    entries``; previous summaries are not collected (``is_summary_message``)."""
    from h9eval.compaction.policies.codex_compact import CODEX_SUMMARY_PREFIX, collect_user_messages

    h = [
        A("ignored"),
        U("# AGENTS.md instructions for project\n\n<INSTRUCTIONS>\ndo things\n</INSTRUCTIONS>"),
        U("<ENVIRONMENT_CONTEXT>cwd=/repo</ENVIRONMENT_CONTEXT>"),
        U("real user message"),
        R("c1", "tool output"),
        U(CODEX_SUMMARY_PREFIX + "\nold summary"),
    ]
    assert collect_user_messages(h) == ["real user message"]


def test_codex_retries_after_trimming_the_oldest_item() -> None:
    """``manual_compact_retries_after_context_window_error``: the first compaction request fails,
    the oldest history item is removed and the second request, one item shorter, succeeds."""
    s = ScriptedSummarizer([None, "SUMMARY"], fail_on_calls=[1])
    h = [S(), U("u1"), A("a1"), U("u2")]
    c = make_policy("codex_compact").start(env(s)).compact(h, manual=True)  # type: ignore[attr-defined]
    assert [len(r.head) for r in s.calls] == [3, 2] and s.calls[1].head == tuple(h[2:])
    assert c.tier == Tier.FULL and c.record is not None and c.record.extra["trimmed_items"] == 1
    # a trimmed call takes its results with it
    s = ScriptedSummarizer([None, "S"], fail_on_calls=[1])
    h = [S(), A("x", [TC("p")]), R("p", "out"), U("u")]
    make_policy("codex_compact").start(env(s)).compact(h, manual=True)  # type: ignore[attr-defined]
    assert s.calls[1].head == (U("u"),)
    # every attempt failing: the history is left as it is
    s = ScriptedSummarizer([], fail_on_calls=[1, 2, 3])
    # type: ignore[attr-defined]
    c = make_policy("codex_compact").start(env(s)).compact([S(), U("u1"), A("a1"), U("u2")], manual=True)
    assert c.tier == Tier.NONE and len(s.calls) == 3 and c.record is not None and "summary failed" in c.record.error


def test_codex_compact_twice_preserves_latest_user_messages() -> None:
    """``manual_compact_twice_preserves_latest_user_messages``: after two compactions the user
    messages are still there, in order, and only the latest summary is."""
    from h9eval.compaction.policies.codex_compact import CODEX_SUMMARY_PREFIX

    runner = make_policy("codex_compact").start(env(ScriptedSummarizer(["S1", "S2"])))  # type: ignore[attr-defined]
    h = [S(), U("first"), A("r1")]
    c1 = runner.compact(h, manual=True)
    h2 = list(c1.view) + [U("second"), A("r2")]
    c2 = runner.compact(h2, manual=True)
    assert [m.content for m in c2.view] == ["sys", "first", "second", CODEX_SUMMARY_PREFIX + "\nS2"]


# -- Claude Code auto-compact --------------------------------------------------------------------


def test_claude_code_threshold_is_effective_window_minus_13k() -> None:
    p = make_policy("claude_code_compact")
    assert p.threshold_tokens == 167_000 and abs(167_000 / 200_000 - 0.835) < 1e-12  # type: ignore[attr-defined]
    small = make_policy("claude_code_compact", context_window_tokens=2000, output_reserve_tokens=500, buffer_tokens=500)
    at = [Message("system", "abcd"), U(L(3996))]
    assert small.start(env(ScriptedSummarizer(["s"]))).compact(at).tier == Tier.FULL  # type: ignore[attr-defined]
    # type: ignore[attr-defined]
    assert small.start(env(ScriptedSummarizer(["s"]))).compact(at[:1] + [U(L(3995))]).tier == Tier.NONE


def test_claude_code_reattaches_recent_files_and_the_todo_list() -> None:
    read = lambda i, path: A(f"r{i}", [TC(f"r{i}", "Read", '{"file_path": "%s"}' % path)])  # noqa: E731
    h = [S(), U("task")]
    for i, path in enumerate(["a.py", "b.py", "a.py", "c.py", "d.py", "e.py", "f.py", "big.py"]):
        h += [read(i, path), R(f"r{i}", ("x" * 30000) if path == "big.py" else f"{path} v{i}")]
    h += [
        A(
            "plan",
            [
                TC(
                    "t1",
                    "TodoWrite",
                    '{"todos": [{"content": "fix bug", "status": "in_progress"}, {"content": "run tests", "status": '
                    '"pending"}]}',
                )
            ],
        ),
        R("t1", "ok"),
    ]
    # type: ignore[attr-defined]
    c = make_policy("claude_code_compact").start(env(ScriptedSummarizer(["the summary"]))).compact(h, manual=True)
    view = list(c.view)
    assert view[0] == h[0] and view[1].content.endswith("the summary")
    files = [m.content.split("\n", 1) for m in view[2:-1]]
    # newest first, each file once (its last read), the oversized one skipped, at most 5
    assert [f[0] for f in files] == [
        f"[re-attached file {p}, as last read]" for p in ("f.py", "e.py", "d.py", "c.py", "a.py")
    ]
    assert files[-1][1] == "a.py v2"
    assert view[-1].content == "[todo list]\n- [in_progress] fix bug\n- [pending] run tests"
    assert c.record is not None and c.record.extra["reattached_files"] == ["f.py", "e.py", "d.py", "c.py", "a.py"]
    assert pairing_problems(view) == []


def test_claude_code_summary_failure_leaves_the_conversation() -> None:
    h = [S(), U("task"), *rounds(3)]
    c = make_policy("claude_code_compact").start(env(None)).compact(h, manual=True)  # type: ignore[attr-defined]
    assert c.tier == Tier.NONE and list(c.view) == h and c.record is not None and "summary failed" in c.record.error
    assert "summary_calls" not in c.record.extra


# -- harness9 with no summarizer at all ----------------------------------------------------------


def test_harness9_nil_provider_sends_and_logs_nothing() -> None:
    """harness9 fails a nil provider before building any request (spec §3.10 step 1): no
    summarizer call is logged; the fallback and the record's error are as before."""
    h = [S(), U("task"), *rounds(10, size=400)]
    p = make_policy("progressive", context_window_tokens=1200)
    run = p.start(env(None))  # type: ignore[attr-defined]
    c = run.compact(h)
    assert c.tier == Tier.FULL and c.record is not None and c.record.error == "LLM summary failed in TierFull"
    assert run.calls == [] and "summary_calls" not in c.record.extra
    # the same view as with a provider that fails
    failing = p.start(env(ScriptedSummarizer([], fail_on_calls=[1]))).compact(h)  # type: ignore[attr-defined]
    assert failing.view == c.view and failing.record is not None and len(failing.record.extra["summary_calls"]) == 1
