"""harness9's token budget and forced truncation rules (spec §3.12, §5.4), shared by the
token-budget policy, the progressive fallback and emergency tier, and the controls."""

from __future__ import annotations

from collections.abc import Sequence

from h9eval.compaction.repair import repair_tool_pairs
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "DEFAULT_BUDGET_TOKENS",
    "FORCED_TRUNCATION_RULES",
    "budget_compact",
    "budget_for_window",
    "force_anchor_greedy_v3",
    "force_legacy_last1",
]


DEFAULT_BUDGET_TOKENS = 160_000


FORCED_TRUNCATION_RULES = ("anchor_greedy_v3", "legacy_last1")


def budget_for_window(window_tokens: int) -> int:
    """``NewTokenBudgetCompactor(window)``'s MaxTokens: ``window*80/100`` with Go's integer
    division (truncation toward zero, which differs from Python's ``//`` for negatives)."""
    q = abs(window_tokens * 80) // 100
    return q if window_tokens >= 0 else -q


def _eff_max(max_tokens: int) -> int:
    return max_tokens if max_tokens > 0 else DEFAULT_BUDGET_TOKENS


def _eff_tail(min_tail: int) -> int:
    return min_tail if min_tail > 0 else 6


def budget_compact(msgs: Sequence[Message], max_tokens: int, min_tail: int) -> list[Message]:
    """harness9 ``TokenBudgetCompactor.Compact`` (spec §5.2), with its getters' defaults
    (``max_tokens <= 0`` → 160,000; ``min_tail <= 0`` → 6)."""
    budget, k = _eff_max(max_tokens), _eff_tail(min_tail)
    if not msgs:
        return list(msgs)
    total_bytes = sum(m.nbytes for m in msgs)
    if total_bytes // 4 <= budget:
        return list(msgs)
    if msgs[0].role != "system":
        return list(msgs)
    rest = msgs[1:]
    if len(rest) <= k:
        return list(msgs)
    tail = list(rest[len(rest) - k :])
    # Running byte totals make the linear scan O(n) instead of harness9's O(n^2); the
    # candidates and the first that fits are the same.
    fixed = msgs[0].nbytes + sum(m.nbytes for m in tail)
    head_bytes = sum(m.nbytes for m in rest[: len(rest) - k])
    for head_end in range(len(rest) - k, 0, -1):
        if (fixed + head_bytes) // 4 <= budget:
            return repair_tool_pairs([msgs[0], *rest[:head_end], *tail])
        head_bytes -= rest[head_end - 1].nbytes
    return repair_tool_pairs([msgs[0], *tail])


def force_legacy_last1(msgs: Sequence[Message]) -> list[Message]:
    """Legacy ``CompactForce`` (spec §5.3): system + last message, then repair."""
    if not msgs or msgs[0].role != "system":
        return list(msgs)
    rest = msgs[1:]
    if len(rest) <= 1:
        return list(msgs)
    return repair_tool_pairs([msgs[0], rest[-1]])


def force_anchor_greedy_v3(msgs: Sequence[Message], max_tokens: int) -> list[Message]:
    """V3 ``CompactForce`` as reconstructed in spec §5.4 (unverified; marked in results):
    keep the system message and the first non-system message (the task anchor), then the
    newest messages that still fit in the budget, skipping any that do not; then repair."""
    if not msgs or msgs[0].role != "system":
        return list(msgs)
    rest = msgs[1:]
    if len(rest) <= 1:
        return list(msgs)
    anchor = rest[0]
    budget = _eff_max(max_tokens) - estimate_tokens([msgs[0], anchor])
    kept: list[Message] = []
    for m in reversed(rest[1:]):
        c = m.nbytes // 4
        if c <= budget:
            kept.append(m)
            budget -= c
    kept.reverse()
    return repair_tool_pairs([msgs[0], anchor, *kept])
