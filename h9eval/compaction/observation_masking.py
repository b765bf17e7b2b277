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
from h9eval.compaction.records import CompactionRecord, Tier
from h9eval.messages import Message
from h9eval.tokens import estimate_tokens

__all__ = ["ObservationMasking", "mask_observations", "MASK_PLACEHOLDER"]

MASK_PLACEHOLDER = "<MASKED>"


def mask_observations(
    msgs: Sequence[Message], keep_recent_turns: int, placeholder: str = MASK_PLACEHOLDER
) -> tuple[list[Message], int]:
    """Return the masked list and the number of tool results masked.

    A tool result is masked when the assistant message that called it is older than the last
    ``keep_recent_turns`` assistant messages. Results whose call is not found are left alone.
    """
    assistant_idx = [i for i, m in enumerate(msgs) if m.role == "assistant"]
    if len(assistant_idx) <= keep_recent_turns:
        return list(msgs), 0
    cutoff = assistant_idx[len(assistant_idx) - keep_recent_turns] if keep_recent_turns > 0 else len(msgs)
    old_calls = {tc.id for i in assistant_idx if i < cutoff for tc in msgs[i].tool_calls}
    out: list[Message] = []
    n = 0
    for m in msgs:
        if m.tool_call_id and m.tool_call_id in old_calls and m.content != placeholder:
            out.append(m.with_content(placeholder))
            n += 1
        else:
            out.append(m)
    return out, n


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
            extra={"masked": n},
        )
        return Compaction(tuple(out), rec)

    def compact_force(self, history: Sequence[Message]) -> Compaction:
        return self.compact(history)

    compact_manual = compact_force
