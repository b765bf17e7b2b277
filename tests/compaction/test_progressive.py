"""The compaction core against harness9's edge cases (spec §10) and properties."""

from __future__ import annotations

import copy
import os
import stat

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from h9eval.compaction import (
    Anchor,
    CompactionEnv,
    CompactionOffloader,
    OffloadHook,
    ProgressiveCompactor,
    Tier,
    TokenBudgetCompactor,
    ToolOutput,
    format_anchors,
    make_policy,
    merge_anchors,
    parse_anchors_and_summary,
    repair_tool_pairs,
)
from h9eval.compaction.repair import REPAIR_PLACEHOLDER, pairing_problems
from h9eval.compaction.budget import budget_compact, force_anchor_greedy_v3, force_legacy_last1
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.compaction.summary import ScriptedSummarizer
from h9eval.core.tokens import estimate_tokens, estimate_tool_tokens, format_token_count
from tests.helpers import TC, A, L, R, S, U

FULL_REPLY = """## Anchors

### User Intent
Build a web server

### Execution Progress
- Set up project

### Key Decisions
- Using net/http

### Tried Solutions
- Tried gin: too heavy

### Next Steps
- Add tests

## Summary
Project uses Go 1.25 stdlib."""


def compat(**kw: object) -> ProgressiveCompactor:
    kw.setdefault("compat", True)
    kw.setdefault("forced_truncation", "legacy_last1")
    return ProgressiveCompactor(**kw)  # type: ignore[arg-type]


# -- §10.1 token estimate -------------------------------------------------------------------
def test_estimate_basics() -> None:
    assert estimate_tokens([U("abcd")]) == 1
    assert estimate_tokens([U("abc")]) == 0
    assert estimate_tokens([U("ab"), U("cd")]) == 1
    assert estimate_tokens([A("", [TC("c1", "bash", "{}")])]) == 2
    assert estimate_tokens([U("中")]) == 0
    assert estimate_tokens([R("tc_001", "x")]) == 1
    assert estimate_tokens([]) == 0


def test_tool_tokens_and_format() -> None:
    tools = [{"name": "bash", "description": "run <cmd>", "input_schema": {"type": "object", "b": 1, "a": "&"}}]
    # Go JSON: sorted keys, HTML escaped
    expected = len("bash") + len("run <cmd>") + len('{"a":"\\u0026","b":1,"type":"object"}')
    assert estimate_tool_tokens(tools) == expected // 4
    assert estimate_tool_tokens([{"name": "x", "input_schema": None}]) == 0
    assert format_token_count(45200) == "45.2K"
    assert format_token_count(1_200_000) == "1.2M"
    assert format_token_count(500) == "500"
    assert format_token_count(999950) == "1000.0K"


# -- §10.2 tiers ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "tokens,tier",
    [
        (599, Tier.NONE),
        (600, Tier.WARN),
        (699, Tier.WARN),
        (700, Tier.SOFT),
        (799, Tier.SOFT),
        (800, Tier.FULL),
        (949, Tier.FULL),
        (950, Tier.EMERGENCY),
    ],
)
def test_tier_boundaries(tokens: int, tier: Tier) -> None:
    assert ProgressiveCompactor(context_window_tokens=1000).tier_for_tokens(tokens) == tier


@pytest.mark.parametrize("window", [0, -5])
def test_nonpositive_window_never_compacts_in_compat(window: int) -> None:
    p = compat(context_window_tokens=window)
    assert p.tier_for_tokens(10**9) == Tier.NONE


def test_tier_none_no_record(tmp_path) -> None:
    from h9eval.compaction import FileRecordStore

    s = ScriptedSummarizer([])
    store = FileRecordStore(tmp_path)
    run = ProgressiveCompactor(context_window_tokens=100000).start(
        CompactionEnv(summarizer=s, record_store=store, session_id="s")
    )
    msgs = [S(), U("hello")]
    res = run.compact(msgs)
    assert list(res.view) == msgs and res.tier == Tier.NONE and not s.calls
    assert store.list("s") == []


# -- §10.4 full ------------------------------------------------------------------------------
def test_full_with_anchors_byte_exact(tmp_path) -> None:
    from h9eval.compaction import FileRecordStore

    msgs = [S(), U(L(2000)), A(L(2000)), U(L(2000)), A(L(2000)), U("tail1"), A("tail2")]
    store = FileRecordStore(tmp_path)
    run = ProgressiveCompactor(context_window_tokens=2500, min_tail_messages=2).start(
        CompactionEnv(summarizer=ScriptedSummarizer([FULL_REPLY]), record_store=store, session_id="sess1")
    )
    res = run.compact(msgs)
    rec = res.record
    assert rec is not None and rec.tier == Tier.FULL
    assert [m.content for m in res.view][2:] == ["tail1", "tail2"]
    assert len(rec.anchors or []) == 5 and rec.summarized == 4 and rec.preserved_tail == 2
    assert rec.tokens_after < rec.tokens_before
    assert res.view[1].content == (
        "[Context Compaction]\n## Anchors\n\n### User Intent\nBuild a web server\n\n### Execution Progress\n- Set up "
        "project\n\n"
        "### Key Decisions\n- Using net/http\n\n### Tried Solutions\n- Tried gin: too heavy\n\n### Next Steps\n- Add "
        "tests\n\n"
        "## Summary\nProject uses Go 1.25 stdlib."
    )
    # the record store got one harness9 JSONL line, mode 0600
    (f,) = tmp_path.iterdir()
    assert f.name == "sess1.jsonl" and stat.S_IMODE(f.stat().st_mode) == 0o600
    assert store.list("sess1")[0].tier == Tier.FULL


def test_warn_without_offloader_is_identity() -> None:
    msgs = [S(), U(L(5000)), A("resp"), U("t1"), A("t2"), U("t3"), A("t4"), U("t5"), A("t6")]
    s = ScriptedSummarizer([])
    res = ProgressiveCompactor(context_window_tokens=2000).start(CompactionEnv(summarizer=s)).compact(msgs)
    assert res.tier == Tier.WARN and list(res.view) == msgs and not s.calls


def test_warn_offload_does_not_mutate_input(tmp_path) -> None:
    big = "".join("x" * 19 + "\n" for _ in range(500))
    msgs = [
        S(),
        A("running", [TC("call-1", "bash", "{}")]),
        R("call-1", big),
        A("t1"),
        U("t2"),
        A("t3"),
        U("t4"),
        A("t5"),
        U("t6"),
    ]
    assert estimate_tokens(msgs) == 2510
    snapshot = copy.deepcopy(msgs)
    run = compat(context_window_tokens=2510 * 8 // 5, offload_threshold_bytes=100).start(
        CompactionEnv(offload_root=tmp_path, session_id="sess-117", harness9_paths=True)
    )
    res = run.compact(msgs)
    assert msgs == snapshot
    assert res.tier == Tier.WARN
    (e,) = res.record.offloaded  # type: ignore[union-attr]
    assert (e.lines, e.bytes, e.file_path) == (501, 10000, ".harness9/tool_results/sess-117/call-1.txt")
    ph = res.view[2].content
    assert ph.startswith("[offloaded:") and len(ph.encode()) == 374
    f = tmp_path / e.file_path
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and stat.S_IMODE(f.parent.stat().st_mode) == 0o700
    f.write_text("MODIFIED")
    res2 = run.compact(msgs)
    assert res2.tier == Tier.WARN and f.read_text() == "MODIFIED"


def test_emergency_legacy() -> None:
    msgs = [S(), U(L(4000)), A(L(4000)), U("tail")]
    p = compat(context_window_tokens=1000, min_tail_messages=1, fallback_max_tokens=100)
    s = ScriptedSummarizer([])
    res = p.start(CompactionEnv(summarizer=s)).compact(msgs)
    assert res.tier == Tier.EMERGENCY and not s.calls
    assert res.record.error == "emergency fallback: forced truncation"  # type: ignore[union-attr]
    assert list(res.view) == [S(), U("tail")] and res.record.preserved_tail == 1  # type: ignore[union-attr]


def test_zero_thresholds_always_emergency_in_compat() -> None:
    p = compat(context_window_tokens=1000, warn_frac=0, soft_frac=0, full_frac=0, emergency_frac=0)
    run = p.start()
    r0 = run.compact([])
    assert r0.tier == Tier.EMERGENCY and r0.record.preserved_tail == -1  # type: ignore[union-attr]
    r1 = run.compact([U("x")])
    assert list(r1.view) == [U("x")] and r1.record.error  # type: ignore[union-attr]
    assert list(run.compact([S(), U("a"), A("b"), U("c")]).view) == [S(), U("c")]


def test_llm_failure_in_full_uses_fallback() -> None:
    msgs = [S(), U(L(2500)), A(L(2500)), U(L(2500)), A(L(2500)), U("tail1"), A("tail2")]
    p = ProgressiveCompactor(context_window_tokens=3000, min_tail_messages=2, fallback_min_tail_messages=2)
    res = p.start(CompactionEnv(summarizer=ScriptedSummarizer([], fail_on_calls=[1]))).compact(msgs)
    assert res.record.error == "LLM summary failed in TierFull"  # type: ignore[union-attr]
    assert list(res.view) == [S(), U(L(2500)), A(L(2500)), U(L(2500)), U("tail1"), A("tail2")]
    assert estimate_tokens(res.view) == 1878


def test_llm_failure_in_soft_is_noop() -> None:
    msgs = [S()] + [U(L(700)) for _ in range(10)]
    p = ProgressiveCompactor(context_window_tokens=2400)
    assert p.tier_for_tokens(estimate_tokens(msgs)) == Tier.SOFT
    res = p.start(CompactionEnv(summarizer=ScriptedSummarizer([], fail_on_calls=[1]))).compact(msgs)
    assert list(res.view) == msgs and res.record.error == "LLM summary failed in TierSoft"  # type: ignore[union-attr]
    assert res.record.preserved_tail == len(msgs) - 1  # type: ignore[union-attr]


def test_incremental_prompt_and_na_overwrite() -> None:
    msgs = [S(), U(L(2000)), A(L(2000)), U(L(2000)), A(L(2000)), U("tail1"), A("tail2")]
    reply = "### User Intent\nnew intent\n\n### Key Decisions\n- N/A\n\n## Summary\ns2"
    s = ScriptedSummarizer([reply])
    run = ProgressiveCompactor(context_window_tokens=2500, min_tail_messages=2).start(CompactionEnv(summarizer=s))
    run.set_last_summary("previous summary text")
    run.set_last_anchors([Anchor("user_intent", "old intent"), Anchor("key_decision", "old decision")])
    res = run.compact(msgs)
    (req,) = s.calls
    assert req.template == "incremental" and "<previous-compaction>" in req.user_prompt
    assert (
        "### User Intent\nold intent\n\n### Key Decisions\nold decision\n\n## Summary\nprevious summary text"
        in req.user_prompt
    )
    anchors = {a.type: a.content for a in res.record.anchors}  # type: ignore[union-attr]
    assert anchors["key_decision"] == "- N/A" and anchors["user_intent"] == "new intent"
    assert res.record.extra["na_overwrites"] == ["key_decision"]  # type: ignore[union-attr]


def test_na_safe_merge_keeps_known_value() -> None:
    old = [Anchor("key_decision", "old decision")]
    for wipe in ("- N/A", "N/A.", "", "  "):
        new = [Anchor("key_decision", wipe)]
        assert merge_anchors(old, new)[2].content in ("N/A", wipe)
        prevented: list[str] = []
        assert merge_anchors(old, new, na_safe=True, overwrites=prevented)[2].content == "old decision"
        assert prevented == ["key_decision"]


# -- §4 anchors -------------------------------------------------------------------------------
def test_parse_cases() -> None:
    a, s = parse_anchors_and_summary("### User Intent\nDo something\n## Summary\nBrief context.")
    assert a[0].content == "Do something" and all(x.content == "N/A" for x in a[1:]) and s == "Brief context."
    a, s = parse_anchors_and_summary("random text no structure")
    assert all(x.content == "N/A" for x in a) and s == ""
    assert parse_anchors_and_summary("  ### User Intent  \nX")[0][0].content == "X"
    assert parse_anchors_and_summary("###User Intent\nX")[0][0].content == "N/A"
    assert parse_anchors_and_summary("### Key Decision\nX")[0][2].content == "N/A"
    assert parse_anchors_and_summary("### Next Steps\na\n### Next Steps\nb")[0][4].content == "b"
    assert parse_anchors_and_summary("## Summary\nx\n## Summary\ny")[1] == "x\ny"
    # Go's TrimSpace keeps U+001F: not a header
    assert parse_anchors_and_summary("### User Intent\x1f\nX")[0][0].content == "N/A"


def test_merge_rule() -> None:
    m = merge_anchors(
        [Anchor("user_intent", "old intent"), Anchor("key_decision", "old decision")],
        [Anchor("user_intent", "updated intent"), Anchor("next_step", "new step")],
    )
    assert [x.content for x in m] == ["updated intent", "N/A", "old decision", "N/A", "new step"]
    assert merge_anchors([Anchor("key_decision", "x")], [Anchor("key_decision", "")])[2].content == "N/A"


# -- §5 token budget -------------------------------------------------------------------------
def test_token_budget_cases() -> None:
    assert budget_compact([S(), U("hello"), A("hi")], 8000, 6) == [S(), U("hello"), A("hi")]
    msgs = [S(), U(L(400)), A(L(400)), U("recent user"), A("recent assistant")]
    assert budget_compact(msgs, 100, 2) == [S(), U("recent user"), A("recent assistant")]
    msgs = [S("s"), U(L(1000)), A(L(1000)), U(L(1000)), A(L(1000))]
    assert budget_compact(msgs, 1, 2) == [S("s"), U(L(1000)), A(L(1000))][:1] + msgs[-2:]
    msgs = [S("s"), U(L(400)), A(L(400)), U(L(400)), U("x"), A("y")]
    assert budget_compact(msgs, 150, 2) == [S("s"), U(L(400)), U("x"), A("y")]
    assert budget_compact([U(L(1000)), A(L(1000))], 1, 6) == [U(L(1000)), A(L(1000))]
    assert budget_compact([], 1, 6) == []
    msgs = [S("s"), A("", [TC("old_call")]), R("old_call", "result"), U(L(10))]
    assert budget_compact(msgs, 1, 2) == [S("s"), U(L(10))]


def test_budget_of_one_is_160000_in_compat_and_rejected_otherwise() -> None:
    assert TokenBudgetCompactor(context_window_tokens=1, compat=True).resolved_max_tokens == 160_000
    with pytest.raises(ConfigError, match=r"max_tokens must be > 0"):
        TokenBudgetCompactor(max_tokens=0)


def test_forced_truncation_generations() -> None:
    msgs = [S(), U("task"), A("", [TC("c9")]), R("c9", L(5000))]
    assert force_legacy_last1(msgs) == [S()]
    assert force_anchor_greedy_v3(msgs, 1000) == [S(), U("task"), A("", [TC("c9")]), R("c9", L(5000))][:2] + [
        A("", [TC("c9")]),
        Message("user", REPAIR_PLACEHOLDER, (), "c9"),
    ]


# -- §6 repair --------------------------------------------------------------------------------
def test_repair_placement_and_empty_id() -> None:
    out = repair_tool_pairs([S(), A("", [TC("A1"), TC("B1")]), R("B1", "ok")])
    assert [(m.content, m.tool_call_id) for m in out[2:]] == [(REPAIR_PLACEHOLDER, "A1"), ("ok", "B1")]
    once = repair_tool_pairs([S(), A("", [TC("")]), U("next")])
    twice = repair_tool_pairs(once)
    assert len(twice) == len(once) + 1  # harness9 is not idempotent for empty ids


# -- §7 offload -------------------------------------------------------------------------------
def test_offloader_guards(tmp_path) -> None:
    from h9eval.compaction.offload import OffloadError

    off = CompactionOffloader(tmp_path, "s")
    for m in (R("t", "small"), R("t", "[输出已保存至 " + "x" * 5000), U("x" * 5000), R("t", "x" * 4000)):
        with pytest.raises(OffloadError):
            off.offload_tool_result(m)
    assert off.offload_tool_result(R("t", "x" * 4001)).entry.bytes == 4001


def test_offload_hook(tmp_path) -> None:
    hook = OffloadHook(tmp_path, "sess1", threshold_bytes=100)
    r = ToolOutput("tc1", "x" * 12)
    assert hook.after_execute(TC("tc1"), r) == r and not (tmp_path / ".harness9").exists()
    hook = OffloadHook(tmp_path, "sess1", threshold_bytes=10, preview_lines=2)
    out = hook.after_execute(TC("tc2"), ToolOutput("tc2", "line\n" * 50))
    f = tmp_path / ".harness9/tool_results/sess1/tc2.txt"
    assert (
        f.read_text() == "line\n" * 50 and ".harness9/tool_results/sess1/tc2.txt" in out.output and "预览" in out.output
    )
    for call in (TC(""), TC("x", "read_file"), TC("x", "write_file"), TC("x", "edit_file")):
        assert hook.after_execute(call, ToolOutput("x", "y" * 50)).output == "y" * 50


def test_offload_hook_fails_open_when_mkdir_fails(tmp_path) -> None:
    (tmp_path / ".harness9").write_text("a file")
    hook = OffloadHook(tmp_path, "s", threshold_bytes=1)
    assert hook.after_execute(TC("c"), ToolOutput("c", "zz")).output == "zz"


@pytest.mark.parametrize(
    "sid,cid",
    [
        ("../x", "c"),
        ("a/b", "c"),
        ("/abs", "c"),
        ("s", "../../etc/passwd"),
        ("s", "a/b"),
        ("s\x00", "c\n"),
        ("..", ".."),
    ],
)
def test_hostile_ids_stay_inside_session_folder(tmp_path, sid: str, cid: str) -> None:
    root = tmp_path / "root"
    hook = OffloadHook(root, sid, threshold_bytes=1)
    out = hook.after_execute(TC(cid), ToolOutput(cid, "data!"))
    assert out.output != "data!"
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 1
    rel = files[0].relative_to(root / ".harness9" / "tool_results")
    assert len(rel.parts) == 2  # <session>/<file>, nothing else


def test_symlink_in_offload_tree_not_followed(tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / ".harness9" / "tool_results").mkdir(parents=True)
    os.symlink(outside, root / ".harness9" / "tool_results" / "s")
    hook = OffloadHook(root, "s", threshold_bytes=1)
    assert hook.after_execute(TC("c"), ToolOutput("c", "data!")).output == "data!"
    assert list(outside.iterdir()) == []


# -- validation -------------------------------------------------------------------------------
def test_validation_messages() -> None:
    with pytest.raises(ConfigError, match=r"warn_frac must be < soft_frac \(0.7\), got 0.8"):
        ProgressiveCompactor(warn_frac=0.8, soft_frac=0.7)
    with pytest.raises(ConfigError, match=r"context_window_tokens must be > 0, got 0"):
        ProgressiveCompactor(context_window_tokens=0)
    with pytest.raises(ConfigError, match=r"emergency_frac must be <= 1"):
        ProgressiveCompactor(emergency_frac=1.2)
    with pytest.raises(ConfigError, match=r"unknown policy 'progresive'; did you mean 'progressive'\?"):
        make_policy("progresive")
    with pytest.raises(ConfigError, match=r"did you mean 'warn_frac'"):
        make_policy("progressive", warn_fracc=0.5)
    with pytest.raises(ConfigError, match=r"forced_truncation must be one of"):
        ProgressiveCompactor(forced_truncation="x")


# -- properties --------------------------------------------------------------------------------
_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)


@st.composite
def transcripts(draw: st.DrawFn) -> list[Message]:
    msgs = [S(draw(_text))]
    n = draw(st.integers(0, 12))
    k = 0
    for _ in range(n):
        kind = draw(st.sampled_from(["user", "assistant", "call"]))
        if kind == "user":
            msgs.append(U(draw(_text) + "u" * draw(st.integers(0, 3000))))
        elif kind == "assistant":
            msgs.append(A(draw(_text)))
        else:
            ids = [f"c{k + i}" for i in range(draw(st.integers(1, 3)))]
            k += len(ids)
            msgs.append(A(draw(_text), [TC(i) for i in ids]))
            for i in ids:
                msgs.append(R(i, "r" * draw(st.integers(0, 6000))))
    return msgs


@st.composite
def shuffled_pairs(draw: st.DrawFn) -> list[Message]:
    msgs = draw(transcripts())
    # drop random messages to create orphans both ways
    keep = draw(st.lists(st.booleans(), min_size=len(msgs), max_size=len(msgs)))
    return [m for m, k in zip(msgs, keep) if k]


@settings(max_examples=150, deadline=None)
@given(shuffled_pairs())
def test_repair_yields_valid_pairs(msgs: list[Message]) -> None:
    out = repair_tool_pairs(msgs)
    assert pairing_problems(out) == []


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user_intent", "execution_progress", "key_decision", "tried_solution", "next_step"]), _text
        ),
        max_size=6,
    )
)
def test_parse_format_is_stable(pairs: list[tuple[str, str]]) -> None:
    anchors = merge_anchors(None, [Anchor(t, c) for t, c in pairs])
    once, _ = parse_anchors_and_summary(format_anchors(anchors))
    twice, _ = parse_anchors_and_summary(format_anchors(once))
    assert once == twice


@settings(max_examples=100, deadline=None)
@given(st.lists(_text, max_size=5), _text)
def test_estimate_monotone(contents: list[str], extra: str) -> None:
    base = [U(c) for c in contents]
    assert estimate_tokens(base + [U(extra)]) >= estimate_tokens(base)
    if base:
        grown = base[:-1] + [U(base[-1].content + extra)]
        assert estimate_tokens(grown) >= estimate_tokens(base)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(transcripts(), st.integers(200, 4000))
def test_progressive_never_mutates_input(tmp_path, msgs: list[Message], window: int) -> None:
    snapshot = copy.deepcopy(msgs)
    reply = FULL_REPLY
    run = ProgressiveCompactor(context_window_tokens=window, min_tail_messages=2).start(
        CompactionEnv(summarizer=ScriptedSummarizer([reply] * 50), offload_root=tmp_path, session_id="p")
    )
    res = run.compact(msgs)
    assert msgs == snapshot
    if res.tier != Tier.NONE and pairing_problems(msgs) == []:
        assert pairing_problems(res.view) == []


def test_soft_with_one_message_head_adds_a_message() -> None:
    """Spec §10.35: MinTail 6, [S] + 7 messages at Soft → empty conversation summarised, the
    result has one more message than the input, summarized 0."""
    msgs = [S()] + [U(L(300)) for _ in range(7)]
    tokens = estimate_tokens(msgs)
    p = ProgressiveCompactor(context_window_tokens=int(tokens / 0.75), min_tail_messages=6)
    s = ScriptedSummarizer([FULL_REPLY])
    res = p.start(CompactionEnv(summarizer=s)).compact(msgs)
    assert res.tier == Tier.SOFT and s.calls[0].conversation == ""
    assert len(res.view) == len(msgs) + 1 and res.record.summarized == 0  # type: ignore[union-attr]
    assert res.view[2] == msgs[1] and res.record.preserved_tail == 7  # type: ignore[union-attr]


def test_no_system_message_at_full_is_a_noop_record(tmp_path) -> None:
    """Spec §10.36: no system message at Full ratio → unchanged, no LLM call, a tier-3 record
    with no anchors is still appended."""
    from h9eval.compaction import FileRecordStore

    msgs = [U(L(4000)), A(L(4000))]
    s = ScriptedSummarizer([FULL_REPLY])
    store = FileRecordStore(tmp_path)
    res = (
        ProgressiveCompactor(context_window_tokens=2400)
        .start(CompactionEnv(summarizer=s, record_store=store, session_id="x"))
        .compact(msgs)
    )
    assert res.tier == Tier.FULL and list(res.view) == msgs and not s.calls
    (rec,) = store.list("x")
    assert rec.tier == Tier.FULL and rec.anchors is None and rec.summarized == 0


def test_record_json_matches_harness9_shape() -> None:
    """Spec §8.1: Go field order, null anchors/offloaded, error omitted when empty, HTML escaped."""
    import json

    from h9eval.compaction.records import CompactionRecord

    line = CompactionRecord(id="i", session_id="s<1>", tier=Tier.WARN).to_jsonl_line()
    assert line.endswith("\n") and "s\\u003c1\\u003e" in line
    d = json.loads(line)
    assert list(d) == [
        "id",
        "session_id",
        "timestamp",
        "tier",
        "tokens_before",
        "tokens_after",
        "msgs_before",
        "msgs_after",
        "anchors",
        "offloaded",
        "summarized",
        "preserved_tail",
        "summary_text",
        "compression_ratio",
        "duration",
    ]
    assert d["anchors"] is None and d["offloaded"] is None and "error" not in d
    assert "error" in json.loads(CompactionRecord(error="emergency fallback: forced truncation").to_jsonl_line())


def test_sliding_window_cases() -> None:
    """Spec §10.23/25, checked against harness9's code."""
    from h9eval.compaction.policies.sliding_window import sliding_window

    s, u1, a1, u2, a2, u3 = S(), U("u1"), A("a1"), U("u2"), A("a2"), U("u3")
    assert sliding_window([s, u1, a1, u2, a2, u3], 4) == [s, u2, a2, u3]
    msgs = [s, u1, A("", [TC("tc1")]), R("tc1", "r"), a2, u3]
    assert sliding_window(msgs, 4) == msgs[2:][:0] + [s, *msgs[2:]]
    mid, latest = U("mid"), U("latest")
    assert sliding_window([s, A("", [TC("tc_a")]), mid, R("tc_a", "r"), latest], 3) == [s, mid, latest]
    done, pend = A("", [TC("tc_done")]), A("", [TC("tc_pending")])
    out = sliding_window([s, U("u"), done, R("tc_done", "x"), pend, U("q")], 3)
    assert [m.content or m.tool_calls[0].id for m in out] == ["sys", "tc_pending", REPAIR_PLACEHOLDER, "q"]
    long = [s] + [U(str(i)) for i in range(150)]
    assert len(sliding_window(long, 0)) == 100 and len(sliding_window(long, 1)) == 2
    assert sliding_window([U("x")] * 200, 3) == [U("x")] * 200
