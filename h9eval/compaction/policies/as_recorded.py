"""``as_recorded``: the views the recorded agent actually sent.

A recorded session that compacted itself (Claude Code's ``compact_boundary``) holds the whole
history in its transcript, but after the boundary the agent sent only its summary and what
followed. This policy reproduces that: the view is the leading system messages, then the
transcript from the latest compact summary (a message whose ``meta`` has
``is_compact_summary``, as the Claude Code loader marks it) onwards; before any summary it is the
whole history. So a recorded session has a baseline that is what really happened — for cost (the
billing model's validation replays with it) and for every other comparison.

The record's tier is ``full`` at the first call that sees a new summary (the agent's own
compaction happened there) and ``none`` afterwards, so the ``compacted`` column marks each
recorded compaction once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.compaction._peer import peer_record
from h9eval.compaction.base import Compaction, CompactionEnv, Policy, PolicyRun, register
from h9eval.compaction.records import Tier
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = ["AsRecorded", "COMPACT_SUMMARY_META", "is_compact_summary"]

COMPACT_SUMMARY_META = "is_compact_summary"
"""The ``Message.meta`` key a loader sets on a recorded agent's own compaction summary."""


def is_compact_summary(m: Message) -> bool:
    """Whether ``m`` is a recorded agent's compaction summary."""
    return bool(m.meta) and bool(m.meta.get(COMPACT_SUMMARY_META))  # type: ignore[union-attr]


@register
@dataclass(frozen=True, kw_only=True)
class AsRecorded(Policy):
    """The recorded agent's own views: after its compaction, its summary and what followed
    (no parameters). Only meaningful on recorded sessions that mark their summaries."""

    kind: ClassVar[str] = "as_recorded"
    source: ClassVar[str] = "the recorded agent's own compactions (Claude Code compact_boundary)"
    claims_budget: ClassVar[bool] = False

    def start(self, env: CompactionEnv | None = None) -> _AsRecordedRun:
        return _AsRecordedRun(env or CompactionEnv())


class _AsRecordedRun(PolicyRun):
    def __init__(self, env: CompactionEnv) -> None:
        self.env = env
        self._scanned = 0  # messages of the history already searched for a summary
        self._last: Message | None = None  # the last message scanned, to notice a rewritten history
        self._summary_at: int | None = None
        self._reported: int | None = None  # the summary the last record reported as a compaction

    def _latest_summary(self, history: Sequence[Message]) -> int | None:
        """Index of the latest compact summary, scanning only what was appended since the last call."""
        n = self._scanned
        if n > len(history) or (n and history[n - 1] is not self._last):
            n, self._summary_at = 0, None  # the history was rewritten: search it again
        for i in range(n, len(history)):
            if is_compact_summary(history[i]):
                self._summary_at = i
        self._scanned = len(history)
        self._last = history[-1] if history else None
        return self._summary_at

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        start_ns = self.env.clock.now_ns()
        tb = tokens if tokens is not None else estimate_tokens(history)
        at = self._latest_summary(history)
        if at is None:
            return Compaction(
                tuple(history), peer_record(self.env, history, history, Tier.NONE, tokens_before=tb, start_ns=start_ns)
            )
        head = 0
        while head < at and history[head].role == "system":
            head += 1
        view = (*history[:head], *history[at:])
        tier = Tier.FULL if at != self._reported else Tier.NONE
        self._reported = at
        rec = peer_record(
            self.env,
            history,
            view,
            tier,
            tokens_before=tb,
            start_ns=start_ns,
            summarized=at - head,
            preserved_tail=len(history) - at,
        )
        return Compaction(view, rec, kept_prefix=head)

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._auto(history)
