"""The summarizer interface the compactors call (harness9's injected ``Provider``, spec §3.10).

A compactor builds a :class:`SummaryRequest` (the exact prompt plus the structured head it was
made from) and calls ``summarizer.summarize(request)``. A summarizer returns a
:class:`SummaryReply`; ``text=None`` is harness9's "nil message" (an error for the compactor),
``text=""`` is a valid empty reply. Any failure is raised as :class:`SummarizerError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from h9eval.errors import SummarizerError
from h9eval.messages import Message

__all__ = ["SummaryRequest", "SummaryReply", "Summarizer", "SummarizerError"]


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
