"""harness9's token budget and forced truncation rules (spec §3.12, §5.4), shared by the
token-budget policy, the progressive fallback and emergency tier, and the controls."""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate

from h9eval.compaction.repair import repair_tool_pairs
from h9eval.core.history import kept_prefix_len
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "DEFAULT_BUDGET_TOKENS",
    "FORCED_TRUNCATION_RULES",
    "budget_compact",
    "budget_for_window",
    "force_anchor_greedy_v3",
    "GreedyIndex",
    "force_legacy_last1",
]


DEFAULT_BUDGET_TOKENS = 160_000


FORCED_TRUNCATION_RULES = ("anchor_greedy_v3", "legacy_last1")


def budget_for_window(window_tokens: int) -> int:
    """``NewTokenBudgetCompactor(window)``'s MaxTokens: ``window*80/100`` with Go's integer
    division (truncation toward zero, which differs from Python's ``//`` for negatives)."""
    q = abs(window_tokens * 80) // 100
    return q if window_tokens >= 0 else -q


def effective_max_tokens(max_tokens: int) -> int:
    return max_tokens if max_tokens > 0 else DEFAULT_BUDGET_TOKENS


def _eff_tail(min_tail: int) -> int:
    return min_tail if min_tail > 0 else 6


def budget_compact(
    msgs: Sequence[Message], max_tokens: int, min_tail: int, *, cum: Sequence[int] | None = None
) -> list[Message]:
    """harness9 ``TokenBudgetCompactor.Compact`` (spec §5.2), with its getters' defaults
    (``max_tokens <= 0`` → 160,000; ``min_tail <= 0`` → 6).

    ``cum``: the messages' cumulative byte counts (``cum[i]`` the bytes of ``msgs[:i]``, as
    :class:`h9eval.core.history.PrefixBytes` keeps them between calls); computed when absent."""
    budget, k = effective_max_tokens(max_tokens), _eff_tail(min_tail)
    if not msgs:
        return list(msgs)
    if cum is None:
        cum = list(accumulate((m.nbytes for m in msgs), initial=0))
    n = len(msgs)
    if cum[n] // 4 <= budget:
        return list(msgs)
    if msgs[0].role != "system":
        return list(msgs)
    if n - 1 <= k:
        return list(msgs)
    tail = msgs[n - k :]
    # harness9 tries head ends from the longest down and keeps the first that fits; byte counts
    # only grow with the head, so that is the largest ``h`` in [1, n-1-k] with
    # (system + head + tail bytes) // 4 <= budget, found by bisection on the running totals.
    # system + head[:h] = cum[1 + h]; x // 4 <= budget exactly when x <= 4 * budget + 3.
    limit = 4 * budget + 3 - (cum[n] - cum[n - k])
    h = bisect_right(cum, limit, 2, n - k + 1) - 2
    if h >= 1:
        return repair_tool_pairs([msgs[0], *msgs[1 : 1 + h], *tail])
    return repair_tool_pairs([msgs[0], *tail])


def force_legacy_last1(msgs: Sequence[Message]) -> list[Message]:
    """Legacy ``CompactForce`` (spec §5.3): system + last message, then repair."""
    if not msgs or msgs[0].role != "system":
        return list(msgs)
    rest = msgs[1:]
    if len(rest) <= 1:
        return list(msgs)
    return repair_tool_pairs([msgs[0], rest[-1]])


def force_anchor_greedy_v3(
    msgs: Sequence[Message], max_tokens: int, *, index: GreedyIndex | None = None
) -> list[Message]:
    """V3 ``CompactForce`` as reconstructed in spec §5.4 (unverified; marked in results):
    keep the system message and the first non-system message (the task anchor), then the
    newest messages that still fit in the budget, skipping any that do not; then repair.

    ``index``: a :class:`GreedyIndex` kept between the calls of one run, so that the walk skips
    whole blocks of messages too large for what is left of the budget instead of visiting every
    message of the history (the same messages are kept)."""
    if not msgs or msgs[0].role != "system":
        return list(msgs)
    rest = msgs[1:]
    if len(rest) <= 1:
        return list(msgs)
    anchor = rest[0]
    budget = effective_max_tokens(max_tokens) - estimate_tokens([msgs[0], anchor])
    at = index.kept(msgs, budget) if index is not None else None
    if at is not None:
        return repair_tool_pairs([msgs[0], anchor, *(msgs[j] for j in at)])
    kept: list[Message] = []
    for m in reversed(rest[1:]):
        c = m.nbytes // 4
        if c <= budget:
            kept.append(m)
            budget -= c
    kept.reverse()
    return repair_tool_pairs([msgs[0], anchor, *kept])


_BLOCK = 64
_NEVER = float("inf")


class GreedyIndex:
    """Each message's harness9 cost (``nbytes // 4``) for a history that grows between calls,
    with the smallest non-zero cost of every block of 64 messages.

    The V3 greedy walks from the newest message down and keeps whatever still fits; once the
    budget left is below a block's smallest cost, nothing in that block can be kept, so the walk
    jumps over it. Free messages (cost 0) always fit and change nothing, so they are kept from
    a list of their own. Only messages added since the previous call (or after the prefix a
    write-back kept) are costed in Python. A caller whose histories share no messages with the
    previous one (new objects at every call) gains nothing from an index: it is built only once
    a history reuses the previous one's messages."""

    def __init__(self) -> None:
        self._seen: list[Message] = []  # the previous history while no index is kept
        self._msgs: list[Message] = []
        self._cost: list[int] = []
        self._block_min: list[float] = []
        self._free: list[int] = []  # positions of cost-0 messages, ascending

    def _update(self, msgs: Sequence[Message], n: int) -> None:
        """Cost ``msgs`` after the first ``n``, which the index already holds."""
        if not self._msgs:
            self._cost, self._block_min, self._free = [], [], []
        if n < len(self._msgs):
            del self._msgs[n:], self._cost[n:], self._block_min[(n + _BLOCK - 1) // _BLOCK :]
            del self._free[bisect_left(self._free, n) :]
            if n % _BLOCK:  # the kept part of the last block
                self._block_min[-1] = min((c for c in self._cost[n - n % _BLOCK :] if c), default=_NEVER)
        for j in range(n, len(msgs)):
            m = msgs[j]
            c = m.nbytes // 4
            self._msgs.append(m)
            self._cost.append(c)
            if j % _BLOCK == 0:
                self._block_min.append(_NEVER)
            if c:
                if c < self._block_min[-1]:
                    self._block_min[-1] = c
            else:
                self._free.append(j)

    def kept(self, msgs: Sequence[Message], budget: int) -> list[int] | None:
        """Positions (ascending) of the messages after the anchor (``msgs[2:]``) that the V3
        greedy keeps with ``budget`` tokens; ``None`` when no index is kept for this history
        (nothing of it was seen before: the caller walks it)."""
        n = kept_prefix_len(msgs, self._msgs or self._seen)
        if not n:
            self._seen, self._msgs = list(msgs), []
            return None
        self._update(msgs, n if self._msgs else 0)
        self._seen = []
        if budget < 0:
            return []
        cost, block_min = self._cost, self._block_min
        kept: list[int] = []
        j = len(msgs) - 1
        while j >= 2:
            b = j // _BLOCK
            if block_min[b] > budget:
                j = b * _BLOCK - 1  # nothing left in this block fits
                continue
            c = cost[j]
            if 0 < c <= budget:
                kept.append(j)
                budget -= c
            j -= 1
        kept.reverse()
        free = self._free[bisect_left(self._free, 2) :]
        return list(heapq.merge(kept, free)) if free else kept
