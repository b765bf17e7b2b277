"""Observation masking: old tool outputs replaced by a placeholder, tool calls kept.

Reproduces the strategy of the JetBrains study of agent context management ("The Complexity
Trap", 2025) on SWE-agent (its ``LastNObservations`` history processor), and OpenHands'
``ObservationMaskingCondenser``: the tool outputs of all but the most recent ones are replaced
by a short placeholder. Results are selected by position: each result belongs to the nearest
preceding call of its id, so reused call ids (every call ``call_0``) do not mask recent outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.compaction.base import Compaction, CompactionEnv, Policy, PolicyRun, register
from h9eval.compaction.records import EXTRA_MASKED, CompactionRecord, Tier
from h9eval.compaction.masking import (
    MASK_PLACEHOLDER,
    WINDOW_UNITS,
    IncrementalMasking,
    drop_masked_calls,
    masked_positions,
    render_placeholder,
)
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = ["ObservationMasking"]


@register
@dataclass(frozen=True, kw_only=True)
class ObservationMasking(Policy):
    """Mask old tool outputs; tool calls (and every other message) are kept.

    Masking is recomputed from the full history at every call, so the policy keeps no state;
    a forced or manual compaction is the same as the automatic one.

    Where this still differs from the references, and why:

    1. JetBrains/SWE-agent ``LastNObservations``: its ``polling`` (re-mask only every k steps,
       for prompt caching) and output tags (``keep_output``/``remove_output``) are not
       reproduced: h9eval transcripts carry no tags, and polling=1 is the study's setting.
    2. The study never masks its first observation, the instance template (the task). In
       h9eval the task is a user message, which masking never touches, so this holds without
       an option; with ``window_unit="tool_results"`` the count of kept outputs agrees too.
    3. OpenHands ``ObservationMaskingCondenser`` counts its ``attention_window`` in events (every
       action and observation; default 5), not in assistant turns or tool results; h9eval
       has no event stream, so the window is one of the two units above.
    4. With ``send_masked_calls=False`` an assistant message with parallel calls is held back as
       soon as one of its results is masked; OpenHands' window (counted in events) can split
       parallel results in the same way, so this matches, but the assistant's text goes with
       it (as in OpenHands, where the text travels with the tool calls).
    """

    kind: ClassVar[str] = "observation_masking"
    source: ClassVar[str] = "JetBrains 'Complexity Trap' observation masking / OpenHands ObservationMaskingCondenser"

    keep_recent_turns: int = 10
    """The most recent outputs kept unmasked, counted in ``window_unit``. 10 is the study's window."""
    placeholder: str = MASK_PLACEHOLDER
    """What a masked output becomes; ``{lines}`` in it becomes the output's line count. ``<MASKED>``
    is OpenHands' text; ``Old environment output: ({lines} lines omitted)`` reproduces the study's."""
    window_unit: str = "assistant_turns"
    """What ``keep_recent_turns`` counts: ``assistant_turns`` or ``tool_results``. With
    ``assistant_turns`` the outputs of all but the last that many assistant messages are masked;
    with ``tool_results`` all but the last that many tool results, as SWE-agent's
    ``LastNObservations`` counts."""
    send_masked_calls: bool = True
    """Send a masked output as the placeholder result of its kept call. ``False`` reproduces what
    OpenHands sends: the placeholder as a plain user message, with the assistant message of that
    call held back with all its results."""

    def __post_init__(self) -> None:
        self._check(self.keep_recent_turns >= 0, "keep_recent_turns", "must be >= 0", self.keep_recent_turns)
        self._check(
            self.window_unit in WINDOW_UNITS,
            "window_unit",
            f"must be one of {', '.join(WINDOW_UNITS)}",
            self.window_unit,
        )

    def start(self, env: CompactionEnv | None = None) -> _MaskingRun:
        return _MaskingRun(self, env or CompactionEnv())


class _MaskingRun(PolicyRun):
    def __init__(self, policy: ObservationMasking, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        self._masker = IncrementalMasking(policy.keep_recent_turns, policy.placeholder, window_unit=policy.window_unit)

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        p = self.policy
        tb = tokens if tokens is not None else estimate_tokens(history)
        out: Sequence[Message]
        if p.send_masked_calls:
            # the masked view is kept up to date between calls: O(new messages) per call
            out, n, out_bytes = self._masker.mask(history)
            extra: dict[str, object] = {EXTRA_MASKED: n}
            ta = out_bytes // 4 if n else tb
            kept: int | None = self._masker.first_difference
        else:
            idx = masked_positions(history, p.keep_recent_turns, p.placeholder, window_unit=p.window_unit)
            n = len(idx)
            out = list(history)
            for i in idx:
                out[i] = history[i].with_content(render_placeholder(p.placeholder, history[i].content))
            extra = {EXTRA_MASKED: n}
            if idx:
                out, dropped = drop_masked_calls(history, idx, p.placeholder)
                extra["held_back_calls"] = dropped
            ta = estimate_tokens(out) if n else tb
            kept = None
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
            extra=extra,
        )
        return Compaction(tuple(out), rec, kept_prefix=kept)

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._auto(history)
