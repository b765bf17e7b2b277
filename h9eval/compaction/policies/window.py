"""Sliding windows: OpenHands' ``RecentEventsCondenser`` and ``AmortizedForgettingCondenser``.

Tier mapping (see :mod:`h9eval.compaction._peer`): ``SOFT`` when messages were dropped,
``NONE`` otherwise (for the amortized window ``NONE`` may carry the previous view forward).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.compaction._peer import Continuation, head_end, peer_record, split_system, tail_start
from h9eval.compaction.base import Compaction, CompactionEnv, Policy, PolicyRun, register
from h9eval.compaction.records import Tier
from h9eval.compaction.repair import repair_tool_pairs
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = ["Window", "window_view"]


def window_view(msgs: Sequence[Message], keep_first: int, keep_last: int) -> list[Message]:
    """System message + the first ``keep_first`` and the last ``keep_last`` other messages.

    Neither boundary separates a tool call from its results: the head is extended over the
    results that follow it, the tail is moved back to include the call of its first results
    (so either part may hold a few more messages than asked). Then pairs are repaired.
    Returns the input (as a list) when nothing would be dropped.
    """
    sys, rest = split_system(msgs)
    if len(rest) <= keep_first + keep_last:
        return list(msgs)
    h = head_end(rest, keep_first, len(rest))
    t = tail_start(rest, keep_last, h)
    if t <= h:
        return list(msgs)
    return repair_tool_pairs([*sys, *rest[:h], *rest[t:]])


@register
@dataclass(frozen=True, kw_only=True)
class Window(Policy):
    """OpenHands' recent-events window (or, with ``amortized``, its amortized forgetting).

    The plain window (``RecentEventsCondenser``) keeps the first ``keep_first`` and the newest
    ``keep_last`` messages at every call, with no state. The amortized window
    (``AmortizedForgettingCondenser``) drops nothing until the working view holds more than
    ``max_messages`` messages, then cuts it down to ``max_messages // 2`` (the first
    ``keep_first`` plus the newest), so forgetting happens in chunks.

    Deliberate differences: messages are counted after the system message (always kept); a
    boundary never separates a tool call from its results, so a part may keep a few more
    messages; the amortized window carries its last view forward when the replay keeps the
    original history (OpenHands records the forgetting in its event log).
    A forced or manual compaction: the plain window is the same as the automatic one; the
    amortized window forgets down to ``max_messages // 2`` now, whatever the length.
    """

    kind: ClassVar[str] = "window"
    source: ClassVar[str] = "OpenHands RecentEventsCondenser / AmortizedForgettingCondenser (sliding window)"
    claims_budget: ClassVar[bool] = False

    keep_first: int = 1
    """Messages after the system message always kept. 1 keeps the task; OpenHands' ``keep_first``."""
    keep_last: int = 20
    """(plain window) The newest messages kept. OpenHands' ``max_events`` minus ``keep_first``."""
    amortized: bool = False
    """Use OpenHands' ``AmortizedForgettingCondenser`` instead of the plain window."""
    max_messages: int = 100
    """(amortized) Forget once the view holds more messages than this, down to half. OpenHands'
    ``max_size``."""

    def __post_init__(self) -> None:
        c = self._check
        c(self.keep_first >= 0, "keep_first", "must be >= 0", self.keep_first)
        c(self.keep_last >= 1, "keep_last", "must be >= 1 (the newest message is always kept)", self.keep_last)
        c(self.max_messages >= 2, "max_messages", "must be >= 2", self.max_messages)
        if self.amortized:
            c(
                self.keep_first < self.max_messages // 2,
                "keep_first",
                f"must be < max_messages // 2 ({self.max_messages // 2}) when amortized",
                self.keep_first,
            )

    def start(self, env: CompactionEnv | None = None) -> WindowRun:
        return WindowRun(self, env or CompactionEnv())


class WindowRun(PolicyRun):
    def __init__(self, policy: Window, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        self.cont = Continuation()

    def _run(self, history: Sequence[Message], tokens: int | None, *, force: bool) -> Compaction:
        p = self.policy
        start_ns = self.env.clock.now_ns()
        tb = tokens if tokens is not None else estimate_tokens(history)
        extra: dict[str, object] = {}
        if not p.amortized:
            base = list(history)
            out = window_view(history, p.keep_first, p.keep_last)
            tier = Tier.SOFT if out != list(history) else Tier.NONE
        else:
            base, carried = self.cont.base(history)
            n_rest = len(split_system(base)[1])
            if force or n_rest > p.max_messages:
                target = p.max_messages // 2
                out = window_view(base, p.keep_first, max(target - p.keep_first, 1))
            else:
                out = base
            if out is not base and out != base:
                tier = Tier.SOFT
                self.cont.remember(history, out)
            else:
                tier = Tier.NONE
                if carried:
                    extra["carried_over"] = True
        # messages forgotten by this call (placeholders added by the repair make it approximate)
        extra["forgotten"] = max(len(base) - len(out), 0) if tier != Tier.NONE else 0
        rec = peer_record(self.env, history, out, tier, tokens_before=tb, start_ns=start_ns, extra=extra)
        return Compaction(tuple(out), rec)

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        return self._run(history, tokens, force=False)

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._run(history, None, force=True)
