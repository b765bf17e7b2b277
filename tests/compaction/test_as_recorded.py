"""as_recorded: after a recorded compaction, the summary and what followed, as the agent sent it."""

from __future__ import annotations

from h9eval.compaction.policies import make_policy
from h9eval.compaction.records import Tier
from h9eval.core.messages import Message


def _summary(text: str) -> Message:
    return Message("user", text, meta={"is_compact_summary": True})


def test_views_follow_the_recorded_compactions() -> None:
    run = make_policy("as_recorded").start()
    sys, u1, a1 = Message("system", "s"), Message("user", "task"), Message("assistant", "first")
    history = [sys, u1, a1]
    c = run.compact(history)
    assert list(c.view) == history and c.tier == Tier.NONE  # nothing recorded yet: everything
    s1, u2 = _summary("summary one"), Message("user", "go on")
    history += [s1, u2]
    c = run.compact(history)
    assert list(c.view) == [sys, s1, u2] and c.tier == Tier.FULL and c.changed_what_is_sent
    assert c.record is not None and c.record.summarized == 2 and c.record.preserved_tail == 2
    a2 = Message("assistant", "second")
    history += [a2]
    c = run.compact(history)
    assert list(c.view) == [sys, s1, u2, a2] and c.tier == Tier.NONE  # the same compaction: counted once
    s2 = _summary("summary two")
    history += [s2]
    c = run.compact(history)
    assert list(c.view) == [sys, s2] and c.tier == Tier.FULL
    # a rewritten (written-back) history is searched again, not from where the last call stopped
    c = run.compact([sys, s1, u2])
    assert list(c.view) == [sys, s1, u2]


def test_an_unmarked_user_message_is_not_a_summary() -> None:
    run = make_policy("as_recorded").start()
    history = [Message("user", "This session is being continued from a previous conversation")]
    assert list(run.compact(history).view) == history
