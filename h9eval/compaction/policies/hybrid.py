"""The JetBrains hybrid: observation masking always, an LLM summary when masking is not enough.

Tier mapping (see :mod:`h9eval.compaction._peer`): ``FULL`` when a summary replaced messages,
``SOFT`` when the summary failed and its fallback dropped messages, ``WARN`` when only tool
outputs were masked, ``NONE`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.compaction.base import Compaction, CompactionEnv, Policy, register
from h9eval.compaction.masking import MASK_PLACEHOLDER, mask_observations
from h9eval.compaction.summary import SummaryCall
from h9eval.compaction.records import EXTRA_MASKED, Tier
from h9eval.compaction.policies.summary_single_threshold import SummarySingleThreshold, SummaryThresholdRun
from h9eval.core.messages import Message
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tokens

__all__ = ["Hybrid"]


@register
@dataclass(frozen=True, kw_only=True)
class Hybrid(Policy):
    """JetBrains 'The Complexity Trap' hybrid: masking first, a summary as the backstop.

    ``keep_recent_turns``: tool outputs of all but the last this many assistant turns are
    replaced by ``placeholder`` at every call (default 10 turns, the study's window;
    placeholder default ``<MASKED>``). ``context_window_tokens``: the model window (default
    200,000 tokens). ``summary_threshold_frac``: when the *masked* working history is still
    ``>=`` this fraction of the window, it is summarised as by ``summary_single_threshold``
    (default 0.80). ``keep_last_messages``: messages kept verbatim after the summary (default
    6, harness9's tail; the study's summarizer also keeps the most recent turns).
    ``anchors``, ``summary_timeout_s``, ``prompt_file``: as for ``summary_single_threshold``
    (defaults True, 60 s, none).

    Deliberate differences: the study triggers its summaries on a turn count; h9eval triggers
    on tokens, like every other policy here, so the peers can be compared at one window.
    ``compact_force``/``compact_manual`` mask and summarise now, whatever the usage.
    """

    kind: ClassVar[str] = "hybrid"
    source: ClassVar[str] = "JetBrains 'Complexity Trap' hybrid (observation masking + LLM summary)"
    claims_budget: ClassVar[bool] = False

    keep_recent_turns: int = 10
    placeholder: str = MASK_PLACEHOLDER
    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    summary_threshold_frac: float = 0.80
    keep_last_messages: int = 6
    anchors: bool = True
    summary_timeout_s: float = 60.0
    prompt_file: str | None = None

    def __post_init__(self) -> None:
        c = self._check
        c(self.keep_recent_turns >= 0, "keep_recent_turns", "must be >= 0", self.keep_recent_turns)
        c(self.placeholder != "", "placeholder", "must not be empty", self.placeholder)
        c(self.context_window_tokens > 0, "context_window_tokens", "must be > 0", self.context_window_tokens)
        c(
            isinstance(self.summary_threshold_frac, (int, float)) and 0 < self.summary_threshold_frac <= 1,
            "summary_threshold_frac",
            "must be a fraction of the window in (0, 1]",
            self.summary_threshold_frac,
        )
        c(self.keep_last_messages >= 0, "keep_last_messages", "must be >= 0", self.keep_last_messages)
        c(self.summary_timeout_s > 0, "summary_timeout_s", "must be > 0", self.summary_timeout_s)

    def summary_policy(self) -> SummarySingleThreshold:
        """The summary stage as a ``summary_single_threshold`` policy."""
        return SummarySingleThreshold(
            context_window_tokens=self.context_window_tokens,
            threshold_frac=self.summary_threshold_frac,
            keep_last_messages=self.keep_last_messages,
            anchors=self.anchors,
            summary_timeout_s=self.summary_timeout_s,
            prompt_file=self.prompt_file,
        )

    def start(self, env: CompactionEnv | None = None) -> HybridRun:
        return HybridRun(self, env or CompactionEnv())


class HybridRun:
    def __init__(self, policy: Hybrid, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        self.summary = SummaryThresholdRun(policy.summary_policy(), env)

    @property
    def calls(self) -> list[SummaryCall]:
        """The summary calls made so far (``SummaryCall`` objects)."""
        return self.summary.calls

    def _run(self, history: Sequence[Message], tokens: int | None, *, force: bool) -> Compaction:
        start_ns = self.env.clock.now_ns()
        tb = tokens if tokens is not None else estimate_tokens(history)
        # continue from the last summary's view, then mask that working list
        base, carried = self.summary.cont.base(history)
        masked, n = mask_observations(base, self.policy.keep_recent_turns, self.policy.placeholder)
        return self.summary.compact_base(
            history,
            masked,
            tokens_before=tb,
            base_tokens=tb if not carried and not n else None,
            carried=carried,
            force=force,
            start_ns=start_ns,
            unchanged_tier=Tier.WARN if n else Tier.NONE,
            extra={EXTRA_MASKED: n},
        )

    def compact(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        return self._run(history, tokens, force=False)

    def compact_force(self, history: Sequence[Message]) -> Compaction:
        return self._run(history, None, force=True)

    compact_manual = compact_force
