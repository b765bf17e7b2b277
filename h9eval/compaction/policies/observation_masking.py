"""Observation masking: old tool outputs replaced by a placeholder, tool calls kept.

Reproduces the strategy of the JetBrains study of agent context management ("The Complexity
Trap", 2025) on SWE-agent, and OpenHands' ``ObservationMaskingCondenser``: the tool outputs of
all but the last ``keep_recent_turns`` assistant turns are replaced by a short placeholder.
Deliberate difference from OpenHands: the window is counted in assistant turns (the study's
unit, default 10), not in events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.compaction.base import Compaction, CompactionEnv, Policy, register
from h9eval.compaction.records import EXTRA_MASKED, CompactionRecord, Tier
from h9eval.compaction.masking import MASK_PLACEHOLDER, mask_observations
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = ["ObservationMasking"]


@register
@dataclass(frozen=True, kw_only=True)
class ObservationMasking(Policy):
    """Mask tool outputs older than the last ``keep_recent_turns`` assistant turns (default 10);
    ``placeholder`` replaces each masked output (default ``<MASKED>``, as in OpenHands)."""

    kind: ClassVar[str] = "observation_masking"
    source: ClassVar[str] = "JetBrains 'Complexity Trap' observation masking / OpenHands ObservationMaskingCondenser"

    keep_recent_turns: int = 10
    placeholder: str = MASK_PLACEHOLDER

    def __post_init__(self) -> None:
        self._check(self.keep_recent_turns >= 0, "keep_recent_turns", "must be >= 0", self.keep_recent_turns)

    def start(self, env: CompactionEnv | None = None) -> _MaskingRun:
        return _MaskingRun(self, env or CompactionEnv())


class _MaskingRun:
    def __init__(self, policy: ObservationMasking, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env

    def compact(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        out, n = mask_observations(history, self.policy.keep_recent_turns, self.policy.placeholder)
        tb = tokens if tokens is not None else estimate_tokens(history)
        ta = estimate_tokens(out) if n else tb
        rec = CompactionRecord(
            id=self.env.new_id(),
            session_id=self.env.session_id,
            timestamp=self.env.clock.timestamp(),
            tier=Tier.WARN if n else Tier.NONE,
            tokens_before=tb,
            tokens_after=ta,
            msgs_before=len(history),
            msgs_after=len(out),
            compression_ratio=ta / tb if tb else 0.0,
            extra={EXTRA_MASKED: n},
        )
        return Compaction(tuple(out), rec)

    def compact_force(self, history: Sequence[Message]) -> Compaction:
        return self.compact(history)

    compact_manual = compact_force
