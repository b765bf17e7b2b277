"""Single-threshold auto-compaction: Codex CLI's and Claude Code's summarise-everything rule.

When the working history reaches ``threshold_frac`` of the context window, everything between
the system message and the last ``keep_last_messages`` messages is replaced by one summary
message written by the injected summarizer; later turns are appended to that summary.

Tier mapping (see :mod:`h9eval.compaction._peer`): ``FULL`` when a summary replaced messages,
``SOFT`` when the summary failed and the fallback dropped messages, ``NONE`` otherwise (the
view may then be the previous summary followed by the new messages).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.compaction._peer import ContinuedRun, PeerDecision, fit_newest, split_system
from h9eval.compaction.anchors import (
    ANCHOR_TYPES,
    COMPACTION_MARKER,
    Anchor,
    format_anchors,
    go_trim,
    merge_anchors,
    parse_anchors_and_summary,
)
from h9eval.compaction.base import CompactionEnv, WindowedPolicy, register
from h9eval.compaction.summary import SummaryCall, request_summary, summary_request
from h9eval.compaction.prompts import DEFAULT_PROMPTS, PromptSet, load_prompt_file, serialize_conversation
from h9eval.compaction.records import Tier
from h9eval.compaction.repair import repair_tool_pairs
from h9eval.core.messages import Message
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tokens

__all__ = [
    "SummarySingleThreshold",
    "SummaryThresholdRun",
    "summary_message",
    "FREE_TEXT_PROMPT",
    "FREE_TEXT_INCREMENTAL_PROMPT",
]

FREE_TEXT_PROMPT = (
    "Summarize the conversation below so that an agent can continue the task from the summary "
    "alone: the user's request, what has been done and found, decisions and their reasons, "
    "approaches that failed, and what remains to do. Output only the summary.\n\n"
    "Conversation:\n{conversation}"
)
FREE_TEXT_INCREMENTAL_PROMPT = (
    "Update the summary below with the new conversation so that an agent can continue the task "
    "from the summary alone. Output only the updated summary.\n\n"
    "<previous-summary>\n{previous_compaction}\n</previous-summary>\n\n"
    "New conversation:\n{conversation}"
)


def summary_message(summary: str, anchors: Sequence[Anchor] | None, types: Sequence[str] = ANCHOR_TYPES) -> Message:
    """The ``[Context Compaction]`` user message, in the progressive policy's format (no
    offloaded references): anchors and summary, or the summary alone when ``anchors`` is None."""
    if anchors is None:
        return Message("user", COMPACTION_MARKER + "\n## Summary\n" + summary)
    return Message(
        "user", COMPACTION_MARKER + "\n## Anchors\n\n" + format_anchors(anchors, types) + "\n\n## Summary\n" + summary
    )


def _strip_summary_header(text: str) -> str:
    """A free-text reply that starts with its own ``## Summary`` header loses it (the message
    already has one)."""
    t = go_trim(text)
    if t.startswith("## Summary"):
        t = go_trim(t[len("## Summary") :])
    return t


@register
@dataclass(frozen=True, kw_only=True)
class SummarySingleThreshold(WindowedPolicy):
    """Codex CLI / Claude Code auto-compact: one threshold, summarise everything before the tail.

    A second compaction summarises the previous summary with the new messages (harness9's
    incremental template). If the summarizer fails (or none is injected) the view falls back to
    the system message and the newest messages that stay under the threshold (at least the
    newest one), tier ``SOFT``, with ``record.error`` set. A forced or manual compaction
    (``/compact``) summarises now, whatever the usage.

    This is the common core of both tools, for comparing one summarise-everything rule at a
    chosen threshold; ``codex_compact`` and ``claude_code_compact`` reproduce each tool as
    published. Where this policy still differs from them, and why:

    1. Codex CLI re-inserts the most recent user messages (up to 20,000 tokens) *before* its
       summary, and the summary is a user message with a hand-off prefix; here nothing is
       re-inserted and the summary is harness9's ``[Context Compaction]`` message, so that
       the summary's content is compared, not the re-insertion.
    2. Claude Code re-attaches recently read files and the todo list after its summary; not
       reproduced here (see ``claude_code_compact``).
    3. On a failed summary both tools leave the conversation as it is (Codex first trims its
       oldest items and retries); here the view falls back to the newest messages under the
       threshold, so the agent loop can go on within the window.
    4. Tokens are harness9's bytes/4 estimate, not the tools' tokenizers or API usage.
    5. The prompts are harness9's anchor templates (or h9eval's free-text wording), not the
       tools' own summarisation prompts.
    """

    kind: ClassVar[str] = "summary_single_threshold"
    source: ClassVar[str] = "Codex CLI / Claude Code auto-compact (summarise everything at one threshold)"
    uses_summarizer: ClassVar[bool] = True
    claims_budget: ClassVar[bool] = False

    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """Model window in tokens."""
    threshold_frac: float = 0.90
    """Compact when the working history is at this fraction of the window (``>=``). 0.90 is Codex
    CLI's auto-compact limit; Claude Code triggers earlier, at its effective window (the window
    minus up to 20,000 output tokens) minus 13,000 tokens, about 0.835 of 200k."""
    keep_last_messages: int = 0
    """Newest messages kept verbatim after the summary. 0: both tools replace the whole
    conversation; the boundary moves back so a kept tool result keeps its call."""
    anchors: bool = True
    """Ask for harness9's anchored summary (``False``: a free-text one). With anchors the summary is
    the progressive policy's ``[Context Compaction]`` message; without, a free-text prompt
    (``template="free_text"``) whose reply goes under ``[Context Compaction]`` and ``## Summary``."""
    summary_timeout_s: float = 60.0
    """A slower summary fails (seconds)."""
    prompt_file: str | None = None
    """JSON file with the anchor prompt templates (see :mod:`h9eval.compaction.prompts`)."""

    def __post_init__(self) -> None:
        c = self._check
        c(self.context_window_tokens > 0, "context_window_tokens", "must be > 0", self.context_window_tokens)
        c(
            isinstance(self.threshold_frac, (int, float)) and 0 < self.threshold_frac <= 1,
            "threshold_frac",
            "must be a fraction of the window in (0, 1]",
            self.threshold_frac,
        )
        c(self.keep_last_messages >= 0, "keep_last_messages", "must be >= 0", self.keep_last_messages)
        c(self.summary_timeout_s > 0, "summary_timeout_s", "must be > 0", self.summary_timeout_s)

    @property
    def threshold_tokens(self) -> float:
        """The trigger in tokens (``threshold_frac * context_window_tokens``)."""
        return self.threshold_frac * self.context_window_tokens

    def prompts(self) -> PromptSet:
        return load_prompt_file(self.prompt_file) if self.prompt_file else DEFAULT_PROMPTS

    def start(self, env: CompactionEnv | None = None) -> SummaryThresholdRun:
        return SummaryThresholdRun(self, env or CompactionEnv())


class SummaryThresholdRun(ContinuedRun):
    """A summary policy bound to one session: the previous summary and anchors (for the
    incremental template), the summary calls made, and the carried-forward view; ``force``
    summarises now (Claude Code's and Codex's manual ``/compact``)."""

    policy: SummarySingleThreshold
    calls: list[SummaryCall]

    def __init__(self, policy: SummarySingleThreshold, env: CompactionEnv) -> None:
        super().__init__(policy, env)
        self.types: tuple[str, ...] = ANCHOR_TYPES
        self._prompts = policy.prompts()
        self.last_summary = ""
        self.last_anchors: list[Anchor] | None = None

    def _decide(self, base: list[Message], *, base_tokens: int | None, force: bool) -> PeerDecision:
        return self.decide_base(base, base_tokens=base_tokens, force=force)

    # -- shared with the hybrid policy -----------------------------------------------------
    def decide_base(
        self,
        base: list[Message],
        *,
        base_tokens: int | None,
        force: bool,
        unchanged_tier: Tier = Tier.NONE,
        extra: dict[str, Any] | None = None,
    ) -> PeerDecision:
        """Compact the working list ``base``. ``unchanged_tier`` is the tier reported when no
        summary is made (the hybrid reports ``WARN`` when it masked something)."""
        extra = dict(extra or {})
        bt = base_tokens if base_tokens is not None else estimate_tokens(base)
        fields: dict[str, Any] = {}
        error = ""
        if force or bt >= self.policy.threshold_tokens:
            view, done, fields, error = self._summarize_base(base, extra)
            tier = done if done is not None else unchanged_tier
        else:
            view, tier = base, unchanged_tier
        return PeerDecision(
            work=base,
            view=view,
            tier=tier,
            error=error,
            extra=extra,
            fields=fields,
            tokens_after=bt if view is base else None,
        )

    # -- internals -------------------------------------------------------------------------
    def _summarize_base(
        self, base: list[Message], extra: dict[str, Any]
    ) -> tuple[list[Message], Tier | None, dict[str, Any], str]:
        """``(view, tier or None when nothing was done, record fields, error)``."""
        p = self.policy
        sys, rest = split_system(base)
        k = p.keep_last_messages
        t = len(rest) - min(k, len(rest))
        # never separate a kept tool result from its call
        while 0 < t < len(rest) and rest[t].tool_call_id:
            t -= 1
        head, tail = rest[:t], rest[t:]
        if not head:
            extra["skipped"] = "nothing to summarize before the kept tail"
            return base, None, {}, ""
        ok = self._summarize(head, extra)
        if ok is None:
            start = fit_newest(sys, rest, p.threshold_tokens)
            # results whose call is not kept go (what the repair does with unique ids; by
            # position, so that reused call ids keep the pairs valid too)
            while start < len(rest) and rest[start].tool_call_id:
                start += 1
            view = repair_tool_pairs([*sys, *rest[start:]])
            err = "summary failed: kept the newest messages under the threshold"
            return view, Tier.SOFT, {"preserved_tail": len(view) - len(sys)}, err
        summary, anchors = ok
        view = repair_tool_pairs([*sys, summary_message(summary, anchors, self.types), *tail])
        fields = {"anchors": anchors, "summarized": len(head), "preserved_tail": len(tail), "summary_text": summary}
        return view, Tier.FULL, fields, ""

    def _summarize(self, head: list[Message], extra: dict[str, Any]) -> tuple[str, list[Anchor] | None] | None:
        """One summarizer call (progressive's ``_summarize`` shape); ``None`` on any failure."""
        p = self.policy
        if p.anchors:  # the conversation and the prompt are built only if the summarizer reads them
            req = summary_request(
                self._prompts, head, None, self.last_summary, self.last_anchors, self.types, p.summary_timeout_s
            )
        else:
            conv = serialize_conversation(head)
            prev = self.last_summary or None
            tmpl = FREE_TEXT_INCREMENTAL_PROMPT if prev is not None else FREE_TEXT_PROMPT
            # one pass, so a "{conversation}" inside the previous summary stays literal
            free = PromptSet(incremental=tmpl).render_incremental(prev or "", conv)
            req = summary_request(
                self._prompts,
                head,
                conv,
                self.last_summary,
                self.last_anchors,
                self.types,
                p.summary_timeout_s,
                template="free_text",
                previous=prev,
                user_prompt=free,
            )
        text = request_summary(self.env.summarizer, self.calls, extra, req)
        if text is None:
            return None
        if not p.anchors:
            summary = _strip_summary_header(text)
            self.last_summary, self.last_anchors = summary, None
            return summary, None
        anchors, summary = parse_anchors_and_summary(text, self.types)
        if self.last_anchors is not None:
            anchors = merge_anchors(self.last_anchors, anchors, self.types)
        self.last_summary, self.last_anchors = summary, anchors
        return summary, anchors
