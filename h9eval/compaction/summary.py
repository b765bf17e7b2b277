"""The summarizer interface the compactors call (harness9's injected ``Provider``, spec §3.10).

A compactor builds a :class:`SummaryRequest` (the exact prompt plus the structured head it was
made from) and calls ``summarizer.summarize(request)``. A summarizer returns a
:class:`SummaryReply`; ``text=None`` is harness9's "nil message" (an error for the compactor),
``text=""`` is a valid empty reply. Any failure is raised as :class:`SummarizerError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from h9eval.compaction.anchors import Anchor
from h9eval.compaction.prompts import (
    PromptSet,
    conversation_nbytes,
    conversation_parts,
    previous_compaction_text,
    render_template,
    rendered_nbytes,
)
from h9eval.compaction.records import EXTRA_SUMMARY_CALLS

from h9eval.core.errors import BreakerOpenError, BudgetExceeded, SummarizerError
from h9eval.core.messages import Message, utf8_len

__all__ = [
    "SummaryRequest",
    "SummaryReply",
    "Summarizer",
    "SummarizerError",
    "SummaryCall",
    "summary_request",
    "request_summary",
]


_DEFAULT_TYPES = ("user_intent", "execution_progress", "key_decision", "tried_solution", "next_step")


class SummaryRequest:
    """Everything one summary call needs (immutable).

    ``system_prompt`` and ``user_prompt`` are the exact texts a model receives.
    ``template`` is ``first``, ``incremental`` or ``free_text``; ``previous_compaction`` is the
    text substituted into the incremental template (``None`` for the first one);
    ``conversation`` is the serialised head (spec §3.10 step 2). ``head`` and
    ``previous_anchors`` are the structured inputs, for summarizers that do not need an LLM.
    ``anchor_types`` lists the anchor sections the reply must contain, in order.
    ``timeout_s`` is harness9's 60 s summary timeout.

    ``conversation`` and ``user_prompt`` are built on first use when the request is made from
    ``head`` and a ``prompt_template`` (what :func:`summary_request` does): they hold the whole
    head again, and a summarizer that reads the structured head (the offline ones) never needs
    them; ``user_prompt_nbytes`` gives the prompt's size without building it. Given as texts
    they are stored as given.
    """

    __slots__ = (
        "system_prompt",
        "template",
        "previous_compaction",
        "head",
        "previous_summary",
        "previous_anchors",
        "anchor_types",
        "max_output_tokens",
        "timeout_s",
        "_user_prompt",
        "_conversation",
        "_prompt_template",
        "_serialize",
        "_lazy_conversation",
    )
    system_prompt: str
    template: str
    previous_compaction: str | None
    head: tuple[Message, ...]
    previous_summary: str
    previous_anchors: tuple[tuple[str, str], ...] | None
    anchor_types: tuple[str, ...]
    max_output_tokens: int
    timeout_s: float
    _user_prompt: str | None
    _conversation: str | None
    _prompt_template: str | None
    _serialize: Callable[[Sequence[Message]], Sequence[str]] | None
    _lazy_conversation: bool

    def __init__(
        self,
        *,
        system_prompt: str,
        template: str,
        previous_compaction: str | None,
        user_prompt: str | None = None,
        conversation: str | None = None,
        prompt_template: str | None = None,
        head: tuple[Message, ...] = (),
        previous_summary: str = "",
        previous_anchors: tuple[tuple[str, str], ...] | None = None,
        anchor_types: tuple[str, ...] = _DEFAULT_TYPES,
        max_output_tokens: int = 2048,
        timeout_s: float = 60.0,
        serialize: Callable[[Sequence[Message]], Sequence[str]] | None = None,
    ) -> None:
        if user_prompt is None and prompt_template is None:
            raise TypeError("SummaryRequest needs user_prompt or prompt_template")
        setter = object.__setattr__
        setter(self, "system_prompt", system_prompt)
        setter(self, "template", template)
        setter(self, "previous_compaction", previous_compaction)
        setter(self, "head", head)
        setter(self, "previous_summary", previous_summary)
        setter(self, "previous_anchors", previous_anchors)
        setter(self, "anchor_types", anchor_types)
        setter(self, "max_output_tokens", max_output_tokens)
        setter(self, "timeout_s", timeout_s)
        setter(self, "_user_prompt", user_prompt)
        setter(self, "_conversation", conversation)
        setter(self, "_prompt_template", prompt_template)
        setter(self, "_serialize", serialize)
        setter(self, "_lazy_conversation", conversation is None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SummaryRequest is immutable: cannot set {name!r}")

    # pickle and copy restore the slots directly (__setattr__ refuses every assignment)
    def __getstate__(self) -> dict[str, object]:
        # the serializer is a compactor's (its cache of the previous head): never pickled
        return {name: getattr(self, name) for name in self.__slots__ if name != "_serialize"}

    def __setstate__(self, state: dict[str, object]) -> None:
        object.__setattr__(self, "_serialize", None)
        object.__setattr__(self, "_lazy_conversation", False)  # a state from before the field: keep its texts
        for name, value in state.items():
            object.__setattr__(self, name, value)

    @property
    def conversation(self) -> str:
        if self._conversation is None:
            object.__setattr__(self, "_conversation", "".join(self._conversation_parts()))
        assert self._conversation is not None
        return self._conversation

    def _conversation_parts(self) -> Sequence[str]:
        return (self._serialize or conversation_parts)(self.head)

    @property
    def user_prompt(self) -> str:
        if self._user_prompt is None:
            assert self._prompt_template is not None
            prev = self.previous_compaction if self.template == "incremental" else None
            # the conversation's pieces go straight into the prompt: one copy of the head, not two
            conv = self._conversation if self._conversation is not None else self._conversation_parts()
            object.__setattr__(self, "_user_prompt", render_template(self._prompt_template, conv, prev))
        assert self._user_prompt is not None
        return self._user_prompt

    def forget_texts(self) -> None:
        """Drop the texts built on first use (read again, they are built again, equal): a call
        log keeps its requests, and would otherwise keep every prompt of a run that a model
        client read (each the size of a head). Texts given at construction are kept."""
        if self._prompt_template is not None:
            object.__setattr__(self, "_user_prompt", None)
        if self._lazy_conversation:
            object.__setattr__(self, "_conversation", None)

    @property
    def holds_text(self) -> bool:
        """Whether the conversation or the prompt text exists yet (given, or built when read)."""
        return self._conversation is not None or self._user_prompt is not None

    @property
    def user_prompt_nbytes(self) -> int:
        """UTF-8 bytes of :attr:`user_prompt` (not built for this when it was not yet)."""
        if self._user_prompt is not None or self._prompt_template is None:
            return utf8_len(self.user_prompt)
        conv = utf8_len(self._conversation) if self._conversation is not None else conversation_nbytes(self.head)
        prev = self.previous_compaction if self.template == "incremental" else None
        return rendered_nbytes(self._prompt_template, conv, prev)

    def _key(self) -> tuple[object, ...]:
        return (
            self.system_prompt,
            self.user_prompt,
            self.template,
            self.previous_compaction,
            self.conversation,
            self.head,
            self.previous_summary,
            self.previous_anchors,
            self.anchor_types,
            self.max_output_tokens,
            self.timeout_s,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SummaryRequest):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # compared by value, never a dict key

    def __repr__(self) -> str:
        return (
            f"SummaryRequest(template={self.template!r}, head={len(self.head)} messages, "
            f"user_prompt={self.user_prompt_nbytes} bytes, timeout_s={self.timeout_s!r})"
        )


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
    batched: bool = False
    """The call went through a provider's batch API (billed at the batch price)."""
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

    def __init__(
        self, responses: Sequence[str | None], fail_on_calls: Sequence[int] = (), *, read_prompts: bool = False
    ) -> None:
        self.responses = list(responses)
        self.fail_on_calls = set(fail_on_calls)
        self.read_prompts = read_prompts
        """Read each request's prompts, as a model client does (a compactor builds them only
        when read): a timing then includes building them, as harness9's Go code always does."""
        self.calls: list[SummaryRequest] = []

    @property
    def summarizer_id(self) -> str:
        return "scripted"

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        self.calls.append(request)
        if self.read_prompts:
            request.system_prompt, request.user_prompt  # noqa: B018 - built here, as a client sending them would
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
    outcome: str  # response | nil_message | error | breaker_open (not requested: the client's breaker is open)
    error: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    cost_usd: float = 0.0
    batched: bool = False
    """The reply came through a provider's batch API (:attr:`SummaryReply.batched`)."""
    request: SummaryRequest | None = field(default=None, repr=False, compare=False)

    @property
    def conversation(self) -> str:
        """The serialised head the call was made with (built on first use)."""
        return self.request.conversation if self.request is not None else ""


def summary_request(
    prompts: PromptSet,
    head: Sequence[Message],
    conversation: str | None,
    last_summary: str,
    last_anchors: Sequence[Anchor] | None,
    types: Sequence[str],
    timeout_s: float,
    *,
    template: str | None = None,
    previous: str | None = None,
    user_prompt: str | None = None,
    serialize: Callable[[Sequence[Message]], Sequence[str]] | None = None,
) -> SummaryRequest:
    """The request for one summary. Without ``user_prompt`` the template is harness9's choice
    (spec §3.10 step 3): incremental when a previous summary exists, else the first one, and
    the prompt is built when a summarizer reads it; a caller with its own prompt (e.g. free
    text) passes ``template``, ``previous`` and it. ``conversation=None``: the head is
    serialised when a summarizer reads it (``serialize`` gives its pieces, e.g. a compactor's
    :meth:`~h9eval.compaction.prompts.ConversationText.parts`, when given)."""
    prompt_template = None
    if user_prompt is None:
        if last_summary != "":
            template = "incremental"
            previous = previous_compaction_text(last_summary, last_anchors, types)
            prompt_template = prompts.incremental
        else:
            template, previous = "first", None
            prompt_template = prompts.first_template(types)
    return SummaryRequest(
        system_prompt=prompts.system,
        user_prompt=user_prompt,
        prompt_template=prompt_template,
        template=template or "first",
        previous_compaction=previous,
        conversation=conversation,
        head=tuple(head),
        previous_summary=last_summary,
        previous_anchors=tuple((a.type, a.content) for a in last_anchors) if last_anchors is not None else None,
        anchor_types=tuple(types),
        timeout_s=timeout_s,
        serialize=serialize,
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
    call = SummaryCall(len(calls) + 1, request.template, request.previous_compaction, "error", request=request)
    calls.append(call)
    extra.setdefault(EXTRA_SUMMARY_CALLS, []).append(call)
    if summarizer is None:
        call.error = "provider is nil"
        return None
    try:
        reply = summarizer.summarize(request)
    except BudgetExceeded:
        raise  # a spending cap stops the run; it is not the provider failing
    except BreakerOpenError as e:
        call.outcome, call.error = "breaker_open", str(e)
        return None
    except SummarizerError as e:
        call.error = str(e)
        return None
    except Exception as e:  # noqa: BLE001 - harness9 turns every provider error into the fallback
        call.error = f"{type(e).__name__}: {e}"
        return None
    finally:
        # the call log keeps the request: not the prompt a client built from it (a head's size)
        request.forget_texts()
    call.input_tokens, call.output_tokens = reply.input_tokens, reply.output_tokens
    call.latency_s, call.cache_hit, call.cost_usd = reply.latency_s, reply.cache_hit, reply.cost_usd
    call.batched = reply.batched
    if not math.isfinite(reply.latency_s) or reply.latency_s > request.timeout_s:
        call.error = f"summary timed out after {request.timeout_s} s"
        return None
    if reply.text is None:
        call.outcome, call.error = "nil_message", "summarizer returned nil message"
        return None
    call.outcome = "response"
    return reply.text
