"""harness9's ``TokenBudgetCompactor``: the fallback of the progressive policy (spec §5).

``Compact`` keeps the system message, the oldest head prefix that fits and the last
``min_tail_messages``; the middle goes first. ``CompactForce`` has two generations: the legacy
rule (system + last message, then repair; spec §5.3) and the V3 rewrite (task anchor + newest
messages that fit; spec §5.4, *reconstructed*, not verified against harness9's code).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.compaction.base import Compaction, CompactionEnv, PolicyRun, WindowedPolicy, register
from h9eval.compaction.records import CompactionRecord, Tier
from h9eval.compaction.budget import (
    GreedyIndex,
    FORCED_TRUNCATION_RULES,
    effective_max_tokens,
    budget_compact,
    budget_for_window,
    force_anchor_greedy_v3,
    force_legacy_last1,
)
from h9eval.core.history import PrefixBytes, as_list
from h9eval.core.messages import Message
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tokens

__all__ = ["TokenBudgetCompactor"]


@register
@dataclass(frozen=True, kw_only=True)
class TokenBudgetCompactor(WindowedPolicy):
    """harness9's ``TokenBudgetCompactor`` on its own (the progressive policy's fallback).

    A forced or manual compaction applies the ``forced_truncation`` rule (harness9's
    ``/compact`` prefers ``CompactWithRecord``, which this compactor lacks). harness9 keeps no
    records; h9eval records a compaction that dropped messages as tier ``SOFT`` and a forced
    one as ``EMERGENCY``.
    """

    kind: ClassVar[str] = "token_budget"
    source: ClassVar[str] = "harness9 TokenBudgetCompactor (the progressive policy's fallback), alone"
    claims_budget: ClassVar[bool] = False

    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """Model window in tokens; the budget is 80 % of it unless ``max_tokens`` is given. harness9's
    ``window*80/100``."""
    max_tokens: int | None = None
    """Token budget of the view (``None``: 80 % of the window)."""
    min_tail_messages: int = 6
    """Messages (not turns) kept verbatim at the end of the view."""
    forced_truncation: str = "anchor_greedy_v3"
    """Forced-compaction rule: ``anchor_greedy_v3`` (PR #121, reconstructed) or ``legacy_last1``."""
    compat: bool = False
    """Accept harness9's silent values instead of rejecting them. ``max_tokens <= 0`` means 160,000,
    ``min_tail_messages <= 0`` means 6."""

    def __post_init__(self) -> None:
        if not self.compat:
            self._check(
                self.context_window_tokens > 0, "context_window_tokens", "must be > 0", self.context_window_tokens
            )
            if self.max_tokens is not None:
                self._check(
                    self.max_tokens > 0,
                    "max_tokens",
                    "must be > 0 (harness9 would silently use 160000)",
                    self.max_tokens,
                )
            self._check(self.min_tail_messages > 0, "min_tail_messages", "must be > 0", self.min_tail_messages)
        self._check(
            self.forced_truncation in FORCED_TRUNCATION_RULES,
            "forced_truncation",
            f"must be one of {', '.join(FORCED_TRUNCATION_RULES)}",
            self.forced_truncation,
        )

    @property
    def resolved_max_tokens(self) -> int:
        """The budget in tokens as harness9 would use it."""
        mt = self.max_tokens if self.max_tokens is not None else budget_for_window(self.context_window_tokens)
        return effective_max_tokens(mt)

    def budget_tokens(self) -> int | None:
        return None

    def compact_messages(self, msgs: Sequence[Message], *, cum: Sequence[int] | None = None) -> list[Message]:
        return budget_compact(msgs, self.resolved_max_tokens, self.min_tail_messages, cum=cum)

    def force_messages(self, msgs: Sequence[Message], *, index: GreedyIndex | None = None) -> list[Message]:
        if self.forced_truncation == "legacy_last1":
            return force_legacy_last1(msgs)
        return force_anchor_greedy_v3(msgs, self.resolved_max_tokens, index=index)

    def start(self, env: CompactionEnv | None = None) -> _TokenBudgetRun:
        return _TokenBudgetRun(self, env or CompactionEnv())


class _TokenBudgetRun(PolicyRun):
    def __init__(self, policy: TokenBudgetCompactor, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        # byte totals kept between calls, so that a call costs Python work for its new
        # messages and its (budget-bounded) view only, not for the whole history
        self._bytes = PrefixBytes()
        self._greedy = GreedyIndex()

    def _record(
        self,
        before: Sequence[Message],
        after: list[Message],
        tier: Tier,
        err: str = "",
        *,
        tb: int | None = None,
        ta: int | None = None,
    ) -> CompactionRecord:
        tb = tb if tb is not None else estimate_tokens(before)
        ta = ta if ta is not None else estimate_tokens(after)
        return CompactionRecord(
            id=self.env.new_id(),
            session_id=self.env.session_id,
            timestamp=self.env.clock.timestamp(),
            tier=tier,
            tokens_before=tb,
            tokens_after=ta,
            msgs_before=len(before),
            msgs_after=len(after),
            preserved_tail=max(len(after) - 1, 0) if tier != Tier.NONE else 0,
            compression_ratio=ta / tb if tb > 0 else 0.0,
            error=err,
        )

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        cum = self._bytes.update(history)
        out = self.policy.compact_messages(history, cum=cum)
        # harness9's TokenBudgetCompactor keeps no records; h9eval reports a dropped-messages
        # compaction as tier "soft"-equivalent so the replay can count it.
        changed = len(out) != len(history) or out != as_list(history)
        tb = cum[len(history)] // 4
        rec = self._record(history, out, Tier.SOFT if changed else Tier.NONE, tb=tb, ta=None if changed else tb)
        return Compaction(tuple(out), rec)

    def _force(self, history: Sequence[Message]) -> Compaction:
        out = self.policy.force_messages(history, index=self._greedy)
        return Compaction(tuple(out), self._record(history, out, Tier.EMERGENCY, "forced truncation"))

    # _manual stays PolicyRun's: harness9's /compact prefers CompactWithRecord, which
    # TokenBudgetCompactor lacks, so it falls through to CompactForce (spec §2.4).
