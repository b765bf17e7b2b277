"""OpenHands' ``LLMSummarizingCondenser``: forget the middle of the view into one summary.

The condenser keeps the first ``keep_first`` events, and once the view holds more than
``max_size`` events (or more than ``max_tokens`` tokens) it forgets the events after them down
to ``max_size // 2`` in all, replacing them by one summary event inserted at offset
``keep_first``. The next condensation forgets that summary together with the newly old events
(the summarizer sees it among them), so there is always at most one summary.

Tier mapping (see :mod:`h9eval.compaction._peer`): ``FULL`` when a summary replaced events,
``NONE`` otherwise (the view may be the last condensed view followed by the new messages;
``record.error`` says why a due condensation was not possible).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.compaction._peer import ContinuedRun, PeerDecision, request_peer_summary
from h9eval.compaction.base import CompactionEnv, Policy, register
from h9eval.compaction.summary import SummaryCall
from h9eval.compaction.prompts import serialize_conversation
from h9eval.compaction.records import Tier
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = ["OpenHandsCondenser", "OpenHandsCondenserRun", "CONDENSER_PROMPT", "forgetting_range"]

#: h9eval's wording; the structure (instructions, then the forgotten events in order) is the
#: condenser's, whose template lives in OpenHands' ``summarizing_prompt.j2``
CONDENSER_PROMPT = (
    "You maintain a state summary for an agent whose older events are being forgotten. Keep "
    "the user's requirements and goals, tasks completed and pending (with any task ids and "
    "statuses), the current state of files, functions, data and tests, code changes, "
    "dependencies and version-control state. If an earlier summary is among the events, fold "
    "it in. Output only the summary.\n\nEvents being forgotten:\n{conversation}"
)

REASONS = ("request", "tokens", "events")


def _next_boundary(msgs: Sequence[Message], i: int) -> int:
    """OpenHands' ``manipulation_indices.find_next``: the first index ``>= i`` at which the view
    can be cut without separating a tool call from its results (a tool result is never the
    first message after a cut)."""
    while i < len(msgs) and msgs[i].tool_call_id:
        i += 1
    return i


def forgetting_range(
    msgs: Sequence[Message], *, keep_first: int, max_size: int, max_tokens: int | None, request: bool
) -> tuple[tuple[int, int] | None, list[str]]:
    """``((start, end), reasons)``: the events ``msgs[start:end]`` to forget, as
    ``LLMSummarizingCondenser._get_forgotten_events`` chooses them, or ``(None, reasons)`` when
    no condensation is due (no reasons) or none can be computed. ``request`` is an explicit
    condensation request (``/condense``; h9eval's ``compact(force=True)``)."""
    n = len(msgs)
    reasons: list[str] = []
    total = estimate_tokens(msgs)
    if request:
        reasons.append("request")
    if max_tokens is not None and total > max_tokens:
        reasons.append("tokens")
    if n > max_size:
        reasons.append("events")
    if not reasons:
        return None, reasons
    suffixes: list[int] = []
    if "request" in reasons:
        suffixes.append(n // 2 - keep_first - 1)
    if "events" in reasons:
        suffixes.append(max_size // 2 - keep_first - 1)
    if "tokens" in reasons:
        assert max_tokens is not None
        reduce_by = total - max_tokens // 2
        # the shortest prefix of the events after the head whose tokens exceed reduce_by
        # (tokens of head+prefix minus tokens of the head, as OpenHands counts them)
        head_bytes = sum(m.nbytes for m in msgs[:keep_first])
        rest = msgs[keep_first:]
        prefix, used = len(rest), head_bytes
        for k, m in enumerate(rest, 1):
            used += m.nbytes
            if used // 4 - head_bytes // 4 > reduce_by:
                prefix = k
                break
        suffixes.append(len(rest) - prefix)
    from_tail = min(suffixes)
    if from_tail < 0:
        return None, reasons  # the view is too short for the requested target
    start = _next_boundary(msgs, keep_first)
    end = _next_boundary(msgs, n - from_tail)
    if end <= start:
        return None, reasons
    return (start, end), reasons


@register
@dataclass(frozen=True, kw_only=True)
class OpenHandsCondenser(Policy):
    """OpenHands ``LLMSummarizingCondenser`` (software-agent SDK): amortized forgetting with an
    LLM summary of the forgotten events.

    A condensation forgets the events after the first ``keep_first`` down to ``max_size // 2``
    in all (head, summary, newest events), or to half the view for a request (a forced or
    manual compaction, OpenHands' condensation request); with several reasons the one keeping fewest events wins.
    Both cut points move forward to the next
    message that is not a tool result. The summary is a user message holding the summarizer's
    reply (OpenHands' ``CondensationSummaryEvent`` is sent as a user message).

    Where this still differs from OpenHands, and why:

    1. An event here is one message; OpenHands counts an assistant message with n parallel
       tool calls as n action events, so views with parallel calls condense a little later.
    2. Tokens are harness9's bytes/4 estimate of the messages, not the agent LLM's tokenizer,
       and the agent LLM's own input limit is not taken into account (h9eval has none).
    3. When the summary fails the view is left as it is and ``record.error`` says so; OpenHands
       does the same for event-count pressure, but for token pressure or a request it then
       tries a *hard context reset* (summarise everything, shortening events on retry), which
       is not reproduced.
    4. The system message is always kept first: with ``keep_first=0`` OpenHands could forget
       its system-prompt event; h9eval's contract keeps it, so the head is at least it.
    5. The prompt wording is h9eval's (OpenHands renders its own ``summarizing_prompt.j2``);
       events are serialised as harness9 serialises a head, not by OpenHands' ``str(event)``.
    6. In view mode the last condensed view is carried forward (OpenHands records the
       condensation in its event log and rebuilds the view from it).
    """

    kind: ClassVar[str] = "openhands_condenser"
    source: ClassVar[str] = "OpenHands LLMSummarizingCondenser (amortized forgetting + LLM summary at keep_first)"
    uses_summarizer: ClassVar[bool] = True
    claims_budget: ClassVar[bool] = False

    max_size: int = 240
    """Condense once the view holds *more* than this many events. Events are messages here, the
    system message included; 240 is the SDK's default, its default agent uses 80."""
    keep_first: int = 2
    """The first events never forgotten; must be ``< max_size // 2 - 1``. 2 keeps the system prompt
    and the task; the SDK's default agent uses 4."""
    max_tokens: int | None = None
    """Also condense once the view is *over* this many tokens (``None``: events only). harness9's
    estimate; the oldest events are forgotten until half of it would remain."""
    minimum_progress_frac: float = 0.1
    """Skip a condensation that would forget less than this share of the view. The SDK's
    ``minimum_progress``."""
    summary_timeout_s: float = 60.0
    """A slower summary fails (seconds)."""

    def __post_init__(self) -> None:
        c = self._check
        c(self.max_size >= 1, "max_size", "must be >= 1", self.max_size)
        c(self.keep_first >= 0, "keep_first", "must be >= 0", self.keep_first)
        c(
            self.max_size // 2 - self.keep_first - 1 > 0,
            "keep_first",
            f"must be < max_size // 2 - 1 ({self.max_size // 2 - 1}) to leave room for condensation",
            self.keep_first,
        )
        if self.max_tokens is not None:
            c(self.max_tokens > 0, "max_tokens", "must be > 0", self.max_tokens)
        c(
            isinstance(self.minimum_progress_frac, (int, float)) and 0 < self.minimum_progress_frac < 1,
            "minimum_progress_frac",
            "must be in (0, 1)",
            self.minimum_progress_frac,
        )
        c(self.summary_timeout_s > 0, "summary_timeout_s", "must be > 0", self.summary_timeout_s)

    def start(self, env: CompactionEnv | None = None) -> OpenHandsCondenserRun:
        return OpenHandsCondenserRun(self, env or CompactionEnv())


class OpenHandsCondenserRun(ContinuedRun):
    """The condenser on one session: the summary calls and the carried-forward view; ``force``
    is OpenHands' condensation request (condense now, down to half the view)."""

    policy: OpenHandsCondenser
    calls: list[SummaryCall]

    def _decide(self, base: list[Message], *, base_tokens: int | None, force: bool) -> PeerDecision:
        p = self.policy
        keep_first = max(p.keep_first, 1) if base and base[0].role == "system" else p.keep_first
        rng, reasons = forgetting_range(
            base, keep_first=keep_first, max_size=p.max_size, max_tokens=p.max_tokens, request=force
        )
        extra: dict[str, Any] = {}
        if reasons:
            extra["reasons"] = reasons
        fields: dict[str, Any] = {}
        error = ""
        view = base
        tier = Tier.NONE
        if reasons and rng is None:
            error = "no condensation available: no events can be forgotten"
        elif rng is not None:
            start, end = rng
            forgotten = base[start:end]
            if len(forgotten) < len(base) * p.minimum_progress_frac:
                error = "no condensation available: events forgotten below minimum progress"
            else:
                prompt = CONDENSER_PROMPT.replace("{conversation}", serialize_conversation(forgotten), 1)
                text = request_peer_summary(
                    self.env, self.calls, extra, forgotten, prompt, previous=None, timeout_s=p.summary_timeout_s
                )
                if text is None:
                    error = "summary failed: the view is left as it is"
                else:
                    view = [*base[:start], Message("user", text), *base[end:]]
                    tier = Tier.FULL
                    extra["forgotten"] = len(forgotten)
                    fields = {"summarized": len(forgotten), "preserved_tail": len(base) - end, "summary_text": text}
        return PeerDecision(work=base, view=view, tier=tier, error=error, extra=extra, fields=fields)
