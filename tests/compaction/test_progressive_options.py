"""h9eval's options of the progressive policy (issue 10): each does what it claims, and the
default stays harness9."""

from __future__ import annotations

import json

import pytest

from h9eval.compaction import CompactionEnv, ProgressiveCompactor, Tier
from h9eval.compaction.anchors import parse_anchors_and_summary, anchor_types_for
from h9eval.compaction.repair import pairing_problems
from h9eval.core.messages import Message, ToolCall
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.compaction.summary import ScriptedSummarizer
from h9eval.summarizers.registry import make_summarizer
from h9eval.tasks.model import Intent, Task, TaskSource
from h9eval.core.tokens import estimate_tokens

CONSTRAINT = "Never modify files under vendor/ and do not upgrade Django."


def task_with_constraints(n_turns: int = 24) -> Task:
    msgs = [
        Message("system", "You are a coding agent."),
        Message("user", f"Fix the crash in app/models.py when saving an Order. {CONSTRAINT}"),
    ]
    for i in range(n_turns):
        cid = f"c{i}"
        if i % 4 == 1:
            call = ToolCall(cid, "edit_file", json.dumps({"path": f"app/module_{i}.py", "old": "x", "new": "y"}))
        else:
            call = ToolCall(cid, "bash", json.dumps({"command": f"pytest tests/test_{i}.py"}))
        msgs.append(Message("assistant", f"I'll check step {i}.", (call,)))
        msgs.append(Message("tool", f"ok {i}\n" + "log line\n" * 150, (), cid))
    msgs.append(Message("assistant", "Done."))
    return Task(
        task_id="constraints",
        source=TaskSource(kind="synthetic", preset="crafted"),
        messages=tuple(msgs),
        intent=Intent(statement=msgs[1].content),
    )


def _compaction_texts(res) -> list[str]:
    return [m.content for v in res.views for m in v if m.content.startswith("[Context Compaction]")]


def test_default_has_no_extra_sections() -> None:
    res = replay(
        task_with_constraints(),
        ProgressiveCompactor(context_window_tokens=5000, min_tail_messages=4),
        config=ReplayConfig(keep_views=True),
    )
    texts = _compaction_texts(res)
    assert texts and not any("### Constraints" in t or "### Artifacts" in t for t in texts)


def test_constraints_and_artifacts_anchors_survive_merges() -> None:
    pol = ProgressiveCompactor(
        context_window_tokens=5000, min_tail_messages=4, extra_anchors=("constraint", "artifact")
    )
    res = replay(task_with_constraints(40), pol, config=ReplayConfig(keep_views=True, history_mode="write_back"))
    texts = _compaction_texts(res)
    assert res.calls["summarizer_calls"].sum() >= 2, "needs at least one incremental merge"
    last = texts[-1]
    anchors, _ = parse_anchors_and_summary(last, anchor_types_for(("constraint", "artifact")))
    by = {a.type: a.content for a in anchors}
    assert "vendor/" in by["constraint"], "the user's constraint must be carried through merges"
    assert "app/module_" in by["artifact"]


def test_na_safe_merge_prevents_overwrites() -> None:
    msgs = (
        [Message("system", "s")]
        + [Message("user", "u" * 2000), Message("assistant", "a" * 2000)] * 2
        + [Message("user", "t1"), Message("assistant", "t2")]
    )
    first = "### User Intent\nship it\n\n### Key Decisions\n- use chi router\n\n## Summary\nS1"
    second = "### User Intent\n- N/A\n\n### Key Decisions\n- N/A\n\n## Summary\nS2"
    outcomes = {}
    for safe in (False, True):
        run = ProgressiveCompactor(context_window_tokens=2500, min_tail_messages=2, na_safe_merge=safe).start(
            CompactionEnv(summarizer=ScriptedSummarizer([first, second]))
        )
        run.compact(msgs)
        r2 = run.compact(msgs)
        outcomes[safe] = ({a.type: a.content for a in r2.record.anchors}, r2.record.extra)
    assert outcomes[False][0]["key_decision"] == "- N/A" and outcomes[False][1]["na_overwrites"] == [
        "user_intent",
        "key_decision",
    ]
    assert outcomes[True][0]["key_decision"] == "- use chi router" and outcomes[True][0]["user_intent"] == "ship it"
    assert outcomes[True][1]["na_overwrites_prevented"] == ["user_intent", "key_decision"]


def test_token_budgeted_tail_never_splits_pairs() -> None:
    t = task_with_constraints(30)
    pol = ProgressiveCompactor(context_window_tokens=5000, tail_budget_tokens=900)
    for end in range(3, len(t.messages)):
        head, tail = pol.split(t.messages[:end])
        if head is None:
            continue
        assert not tail[0].tool_call_id, "the tail must not start with an orphaned tool result"
        if len(tail) > 1 and pairing_problems(tail) == []:
            assert estimate_tokens(tail) <= 900 or tail[1].tool_call_id
    res = replay(t, pol, config=ReplayConfig(keep_views=True))
    assert res.calls["compacted"].sum() > 0
    for v in res.views:
        assert pairing_problems(v) == []


def test_anti_thrash_guard_avoids_repeated_compactions() -> None:
    t = task_with_constraints(60)
    base = ProgressiveCompactor(context_window_tokens=6000, min_tail_messages=4)
    guarded = ProgressiveCompactor(context_window_tokens=6000, min_tail_messages=4, anti_thrash_frac=0.2)
    r0 = replay(t, base, config=ReplayConfig(keep_views=True))
    r1 = replay(t, guarded, config=ReplayConfig(keep_views=True))
    assert r1.calls["thrash_avoided"].sum() > 0
    assert r1.calls["summarizer_calls"].sum() < r0.calls["summarizer_calls"].sum()
    assert r1.calls["forced_truncation"].sum() <= r0.calls["forced_truncation"].sum()
    for v in r1.views:
        assert pairing_problems(v) == []


def test_mask_then_progressive_masks_before_summarising() -> None:
    t = task_with_constraints(40)
    base = ProgressiveCompactor(context_window_tokens=8000, min_tail_messages=4)
    masked = ProgressiveCompactor(context_window_tokens=8000, min_tail_messages=4, mask_observations_keep_turns=5)
    r0 = replay(t, base)
    r1 = replay(t, masked)
    assert r1.calls["masked_results"].sum() > 0
    assert r1.calls["summarizer_calls"].sum() < r0.calls["summarizer_calls"].sum()


def test_options_default_off_is_harness9() -> None:
    p = ProgressiveCompactor()
    assert (
        p.extra_anchors,
        p.na_safe_merge,
        p.tail_budget_tokens,
        p.tier_token_counter,
        p.anti_thrash_frac,
        p.mask_observations_keep_turns,
    ) == ((), False, None, "harness9", None, None)


@pytest.mark.parametrize("counter", ["calibrated", "bpe"])
def test_better_token_counts_raise_the_tier_on_dense_text(counter: str) -> None:
    pytest.importorskip("h9eval.core.token_counters")
    # Dense code/JSON has fewer bytes per token than 4, so bytes/4 under-counts it.
    blob = json.dumps([{"id": i, "k": [i, i + 1], "v": None} for i in range(400)], separators=(",", ":"))
    msgs = [Message("system", "s"), Message("user", blob)] + [Message("assistant", "x"), Message("user", "y")] * 3
    est = estimate_tokens(msgs)
    window = int(est / 0.62)  # bytes/4 says warn
    p0 = ProgressiveCompactor(context_window_tokens=window)
    p1 = ProgressiveCompactor(context_window_tokens=window, tier_token_counter=counter)
    t0 = p0.start().compact(msgs).tier
    t1 = p1.start(CompactionEnv(summarizer=make_summarizer("offline"))).compact(msgs).tier
    assert t0 == Tier.WARN and t1 > t0


def test_each_option_has_a_line_in_policies_output() -> None:
    from h9eval.cli.policies import format_policies_table

    text = format_policies_table()
    for opt in (
        "extra_anchors",
        "na_safe_merge",
        "tail_budget_tokens",
        "tier_token_counter",
        "anti_thrash_frac",
        "mask_observations_keep_turns",
    ):
        (line,) = [ln for ln in text.splitlines() if ln.strip().startswith(opt + " ")]
        assert "# OPTION:" in line


def test_na_overwrites_counted_only_when_information_is_lost() -> None:
    from h9eval.compaction.anchors import Anchor, merge_anchors

    ov: list[str] = []
    merge_anchors([Anchor("key_decision", "- N/A")], [Anchor("key_decision", "- N/A")], overwrites=ov)
    assert ov == []


def test_na_safe_merge_helps_with_a_compliant_dash_na_summarizer() -> None:
    """With a summarizer that writes '- N/A' as harness9's prompt asks, harness9's merge wipes
    known anchors; the N/A-safe merge keeps them."""
    t = task_with_constraints(40)
    summ = make_summarizer("offline", na_text="- N/A")
    base = replay(
        t,
        ProgressiveCompactor(context_window_tokens=5000, min_tail_messages=4),
        summarizer=summ,
        config=ReplayConfig(history_mode="write_back"),
    )
    safe = replay(
        t,
        ProgressiveCompactor(context_window_tokens=5000, min_tail_messages=4, na_safe_merge=True),
        summarizer=summ,
        config=ReplayConfig(history_mode="write_back"),
    )
    assert base.calls["na_overwrites"].sum() > 0
    assert safe.calls["na_overwrites"].sum() == 0 and safe.calls["na_overwrites_prevented"].sum() > 0
