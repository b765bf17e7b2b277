"""The summarizer interface the compactors call (harness9's injected ``Provider``, spec §3.10).

A compactor builds a :class:`SummaryRequest` (the exact prompt plus the structured head it was
made from) and calls ``summarizer.summarize(request)``. A summarizer returns a
:class:`SummaryReply`; ``text=None`` is harness9's "nil message" (an error for the compactor),
``text=""`` is a valid empty reply. Any failure is raised as :class:`SummarizerError`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from h9eval.compaction.anchors import Anchor
from h9eval.compaction.prompts import PromptSet, previous_compaction_text
from h9eval.compaction.records import EXTRA_SUMMARY_CALLS

from h9eval.core.errors import SummarizerError
from h9eval.core.messages import Message

__all__ = ["SummaryRequest", "SummaryReply", "Summarizer", "SummarizerError", "SummaryCall", "summary_request", "request_summary"]


@dataclass(frozen=True, kw_only=True)
class SummaryRequest:
    """Everything one summary call needs.

    ``system_prompt`` and ``user_prompt`` are the exact texts a model receives.
    ``template`` is ``first``, ``incremental`` or ``free_text``; ``previous_compaction`` is the
    text substituted into the incremental template (``None`` for the first one);
    ``conversation`` is the serialised head (spec §3.10 step 2). ``head`` and
    ``previous_anchors`` are the structured inputs, for summarizers that do not need an LLM.
    ``anchor_types`` lists the anchor sections the reply must contain, in order.
    ``timeout_s`` is harness9's 60 s summary timeout.
    """

    system_prompt: str
    user_prompt: str
    template: str
    previous_compaction: str | None
    conversation: str
    head: tuple[Message, ...] = ()
    previous_summary: str = ""
    previous_anchors: tuple[tuple[str, str], ...] | None = None
    anchor_types: tuple[str, ...] = (
        "user_intent",
        "execution_progress",
        "key_decision",
        "tried_solution",
        "next_step",
    )
    max_output_tokens: int = 2048
    timeout_s: float = 60.0


@dataclass(frozen=True, kw_only=True)
class SummaryReply:
    """A summary call's outcome. Token counts are the provider's (or an estimate offline)."""

    text: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    cost_usd: float = 0.0
    model: str = ""
    extra: dict[str, object] = field(default_factory=dict)


@runtime_checkable
class Summarizer(Protocol):
    """Produces the compaction text for a :class:`SummaryRequest`.

    ``summarizer_id`` names the summarizer and its parameters (it keys the response cache).
    """

    @property
    def summarizer_id(self) -> str: ...

    def summarize(self, request: SummaryRequest) -> SummaryReply: ...


class ScriptedSummarizer:
    """Replies from a fixed script (conformance FORMAT.md §3.3): call *n* fails when *n* is in
    ``fail_on_calls``, else returns ``responses[n-1]`` (``None`` → nil message); a call with no
    scripted response fails. Calls are numbered over the summarizer's whole life."""

    def __init__(self, responses: Sequence[str | None], fail_on_calls: Sequence[int] = ()) -> None:
        self.responses = list(responses)
        self.fail_on_calls = set(fail_on_calls)
        self.calls: list[SummaryRequest] = []

    @property
    def summarizer_id(self) -> str:
        return "scripted"

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        self.calls.append(request)
        n = len(self.calls)
        if n in self.fail_on_calls:
            raise SummarizerError(f"scripted failure on call {n}")
        if n > len(self.responses):
            raise SummarizerError(f"no scripted response for call {n}")
        return SummaryReply(text=self.responses[n - 1])


@dataclass
class SummaryCall:
    """One summarizer call as the conformance cases and the replay report it."""

    call: int
    template: str
    previous_compaction: str | None
    conversation: str
    outcome: str  # response | nil_message | error
    error: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    cost_usd: float = 0.0


def summary_request(
    prompts: PromptSet,
    head: Sequence[Message],
    conversation: str,
    last_summary: str,
    last_anchors: Sequence[Anchor] | None,
    types: Sequence[str],
    timeout_s: float,
    *,
    template: str | None = None,
    previous: str | None = None,
    user_prompt: str | None = None,
) -> SummaryRequest:
    """The request for one summary. Without ``user_prompt`` the template is harness9's choice
    (spec §3.10 step 3): incremental when a previous summary exists, else the first one;
    a caller with its own prompt (e.g. free text) passes ``template``, ``previous`` and it."""
    if user_prompt is None:
        if last_summary != "":
            template = "incremental"
            previous = previous_compaction_text(last_summary, last_anchors, types)
            user_prompt = prompts.render_incremental(previous, conversation)
        else:
            template, previous = "first", None
            user_prompt = prompts.render_first(conversation, types)
    return SummaryRequest(
        system_prompt=prompts.system,
        user_prompt=user_prompt,
        template=template or "first",
        previous_compaction=previous,
        conversation=conversation,
        head=tuple(head),
        previous_summary=last_summary,
        previous_anchors=tuple((a.type, a.content) for a in last_anchors) if last_anchors is not None else None,
        anchor_types=tuple(types),
        timeout_s=timeout_s,
    )


def request_summary(
    summarizer: Any,
    calls: list[SummaryCall],
    extra: dict[str, Any],
    request: SummaryRequest,
) -> str | None:
    """Call ``summarizer`` as harness9 does (spec §3.10 steps 4-5) and log the call in
    ``calls`` and ``extra[EXTRA_SUMMARY_CALLS]``: the reply text, or ``None`` on any failure (no
    summarizer, an error, a timeout, a nil message). Shared by every summarising policy."""
    call = SummaryCall(len(calls) + 1, request.template, request.previous_compaction, request.conversation, "error")
    calls.append(call)
    extra.setdefault(EXTRA_SUMMARY_CALLS, []).append(call)
    if summarizer is None:
        call.error = "provider is nil"
        return None
    try:
        reply = summarizer.summarize(request)
    except SummarizerError as e:
        call.error = str(e)
        return None
    except Exception as e:  # noqa: BLE001 - harness9 turns every provider error into the fallback
        call.error = f"{type(e).__name__}: {e}"
        return None
    call.input_tokens, call.output_tokens = reply.input_tokens, reply.output_tokens
    call.latency_s, call.cache_hit, call.cost_usd = reply.latency_s, reply.cache_hit, reply.cost_usd
    if not math.isfinite(reply.latency_s) or reply.latency_s > request.timeout_s:
        call.error = f"summary timed out after {request.timeout_s} s"
        return None
    if reply.text is None:
        call.outcome, call.error = "nil_message", "summarizer returned nil message"
        return None
    call.outcome = "response"
    return reply.text
