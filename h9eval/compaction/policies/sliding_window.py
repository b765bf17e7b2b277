"""harness9's ``SlidingWindowCompactor`` (spec §5.5): system message + the newest messages.

Not used by the progressive policy; it is part of harness9's compaction package and a useful
baseline. The window backtracks over tool results so that it starts at their call, then the
pairs are repaired (the result may hold more than ``max_messages`` messages).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.compaction._peer import peer_record
from h9eval.compaction.base import Compaction, CompactionEnv, Policy, PolicyRun, register
from h9eval.compaction.records import Tier
from h9eval.compaction.repair import repair_tool_pairs
from h9eval.core.messages import Message

__all__ = ["SlidingWindowCompactor", "sliding_window"]


def sliding_window(msgs: Sequence[Message], max_messages: int) -> list[Message]:
    """harness9 ``SlidingWindowCompactor.Compact``, with its getters (``<= 0`` → 100, ``< 2`` → 2)."""
    m = 100 if max_messages <= 0 else max(max_messages, 2)
    if not msgs or msgs[0].role != "system" or len(msgs) <= m:
        return list(msgs)
    start = len(msgs) - m + 1
    while start > 1 and msgs[start].tool_call_id != "":
        start -= 1
    return repair_tool_pairs([msgs[0], *msgs[start:]])


@register
@dataclass(frozen=True, kw_only=True)
class SlidingWindowCompactor(Policy):
    """harness9's ``SlidingWindowCompactor``: keep the system message and the newest messages.

    A forced or manual compaction is the same as the automatic one.
    """

    kind: ClassVar[str] = "sliding_window"
    source: ClassVar[str] = "harness9 SlidingWindowCompactor (system + newest messages)"

    max_messages: int = 100
    """Messages kept, the system message included."""
    compat: bool = False
    """Accept harness9's silent values instead of rejecting them. ``max_messages <= 0`` means 100,
    ``< 2`` means 2."""

    def __post_init__(self) -> None:
        if not self.compat:
            self._check(
                self.max_messages >= 2,
                "max_messages",
                "must be >= 2 (harness9 would silently use 100 or 2)",
                self.max_messages,
            )

    def start(self, env: CompactionEnv | None = None) -> _SlidingRun:
        return _SlidingRun(self, env or CompactionEnv())


class _SlidingRun(PolicyRun):
    def __init__(self, policy: SlidingWindowCompactor, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        start_ns = self.env.clock.now_ns()
        out = sliding_window(history, self.policy.max_messages)
        changed = len(out) != len(history) or out != list(history)
        view = out if changed else history
        rec = peer_record(
            self.env, history, view, Tier.SOFT if changed else Tier.NONE, tokens_before=tokens, start_ns=start_ns
        )
        return Compaction(tuple(out), rec)

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._auto(history)
