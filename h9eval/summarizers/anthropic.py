"""Summarizers that call the Anthropic Messages API through the official ``anthropic`` SDK.

The SDK is imported when a summarizer is constructed, never when h9eval is imported.

Request: ``model`` (default ``claude-sonnet-4-6``), ``max_tokens`` (default: the request's
``max_output_tokens``), ``temperature`` 0 (sent in the request body: SDK 2.10 has no
``temperature`` argument any more; ``temperature=None`` omits it for models that reject it),
``system=request.system_prompt``, ``messages=[{"role": "user", "content": request.user_prompt}]``.

Timeouts and retries: each HTTP attempt has the request's ``timeout_s`` (harness9: 60 s) unless
``timeout_s`` is given here; the SDK retries 408/409/429/5xx (529 overloaded included) and
connection errors ``max_retries`` times (default 2) with its own backoff, honouring
``retry-after``/``retry-after-ms`` up to ``max_retry_after_s`` (default 60 s; a server asking for
longer ends the call at once: the summary falls back, its cause naming the wait and the cap). So
the wall time of one call can exceed ``timeout_s`` (harness9's 60 s deadline covered all attempts
together), but by a bounded amount.

Replies: the text is the concatenation of the text blocks. A response with *no* text block
(an empty content list, or only non-text blocks) is returned as ``SummaryReply(text=None)`` —
harness9's "nil message", which the compactor reports as ``summarizer returned nil message``
and answers with its fallback — rather than raised, so its usage and cost are still recorded.
Text blocks that are all empty give ``text=""``, a valid empty reply (all anchors N/A).
API errors after the retries, timeouts, connection errors and malformed responses (not JSON,
no ``content`` list) raise :class:`~h9eval.core.errors.SummarizerError`; its message names the
model, the HTTP status and the API's error type, never the API key (any occurrence is
redacted, and the SDK exception, which holds the request headers, is not chained).

Cost: ``input_tokens * in_price + output_tokens * out_price`` with USD prices per million
tokens from :data:`DEFAULT_PRICES_USD_PER_MTOK` (see :func:`price_for`) or from the
``prices`` argument; an unknown model's cost is unknown: NaN (never $0, like the billed columns
of :mod:`h9eval.core.billing`), with ``extra["cost_known"] = False``; ``h9eval run``
prints ``unpriced``; price it with ``prices`` (``summarizer.params.prices`` in a spec: model ->
[input, output] USD per million tokens). A reply that came through the Message Batches API
(:mod:`h9eval.summarizers.batches`) costs :func:`h9eval.core.prices.batch_price_frac` of the list
price (Anthropic: half) and says ``batched=True``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

from h9eval.compaction.summary import SummaryReply, SummaryRequest
from h9eval.core.anthropic import DEFAULT_BREAKER_FAILURES, DEFAULT_MAX_RETRY_AFTER_S, AnthropicAPI, Reply
from h9eval.core.budget import Budget
from h9eval.core.errors import BreakerOpenError, ConfigError, SummarizerError
from h9eval.core.prices import MODELS, base_model_id, batch_price_frac

__all__ = [
    "AnthropicSummarizer",
    "AnthropicFreeTextSummarizer",
    "DEFAULT_PRICES_USD_PER_MTOK",
    "DEFAULT_MODEL",
    "price_for",
]

# claude-sonnet-4-5 reaches end of life on 2026-11-30 (the SDK warns on every call)
DEFAULT_MODEL = "claude-sonnet-4-6"

DEFAULT_PRICES_USD_PER_MTOK: dict[str, tuple[float, float]] = {
    name: (float(info.input_usd_per_mtok or 0.0), float(info.output_usd_per_mtok or 0.0))
    for name, info in MODELS.items()
    if info.priced
}
"""(input, output) USD per million tokens of every priced model, derived from the one model
table :data:`h9eval.core.prices.MODELS` (dated: :data:`h9eval.core.prices.PRICES_AS_OF`)."""


def price_for(model: str, prices: Mapping[str, tuple[float, float]]) -> tuple[float, float] | None:
    """``(input, output)`` USD per million tokens for ``model``, or ``None`` when unknown.

    An exact entry wins; else the entry the model id extends by a date or ``-latest`` suffix
    (``claude-haiku-4-5-20251001`` -> ``claude-haiku-4-5``), as :func:`h9eval.core.prices.model_entry`
    finds it. Plain prefixes do not match: ``claude-opus-4-7`` is not priced as ``claude-opus-4``.
    """
    if model in prices:
        return prices[model]
    return prices.get(base_model_id(model))


class AnthropicSummarizer:
    """Summaries from the Anthropic Messages API (see the module docstring for semantics).

    Parameters (all keyword-only):
      ``model``: model id; default ``claude-sonnet-4-6``.
      ``max_tokens``: reply token limit; default ``None`` = the request's ``max_output_tokens``.
      ``temperature``: default 0.0; ``None`` omits the field.
      ``api_key``: default ``None`` = the ``ANTHROPIC_API_KEY`` environment variable; missing
      either way raises :class:`ConfigError` here, at construction.
      ``base_url``: for Anthropic-compatible endpoints (a local vLLM, Ollama or llama.cpp
      server); default ``None`` = ``$ANTHROPIC_BASE_URL`` when set, else the Anthropic API.
      ``max_retries``: SDK retries per call; default 2.
      ``timeout_s``: seconds per HTTP attempt; default ``None`` = the request's ``timeout_s``.
      ``prices``: model prefix -> (input, output) USD per million tokens; default
      :data:`DEFAULT_PRICES_USD_PER_MTOK`.
      ``http_client``: an ``httpx2.Client`` handed to the SDK (tests inject one with a
      ``MockTransport``); default ``None`` = the SDK's own client.
      ``breaker_failures``: consecutive failed calls (timeouts, 5xx, connection errors) after
      which no more requests are sent for the summarizer's life and each summary falls back at
      once (:class:`~h9eval.core.anthropic.CircuitBreaker`); default 3, 0 = never.
      ``max_retry_after_s``: the longest ``retry-after`` a retry waits for; default 60 s, longer
      ends the call (:class:`~h9eval.core.anthropic.RetryAfterTooLong`).
      ``budget``: a spending cap (:class:`~h9eval.core.budget.Budget`, a sweep's
      ``max_cost_usd``): a summary that could pass it is not requested and stops the run.
    """

    name = "anthropic"
    uses_structured_input = False

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout_s: float | None = None,
        prices: Mapping[str, tuple[float, float]] | None = None,
        http_client: Any = None,
        breaker_failures: int = DEFAULT_BREAKER_FAILURES,
        budget: Budget | None = None,
        max_retry_after_s: float = DEFAULT_MAX_RETRY_AFTER_S,
    ) -> None:
        if not model:
            raise ConfigError("model must be a non-empty model id")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigError(f"max_tokens ({max_tokens}) must be >= 1")
        if max_retries < 0:
            raise ConfigError(f"max_retries ({max_retries}) must be >= 0")
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigError(f"timeout_s ({timeout_s}) must be > 0 seconds")
        self.prices: dict[str, tuple[float, float]] = dict(
            prices if prices is not None else DEFAULT_PRICES_USD_PER_MTOK
        )
        self._api = AnthropicAPI(
            api_key=api_key,
            who=f"anthropic summarizer ({model})",
            error=SummarizerError,
            max_retries=max_retries,
            base_url=base_url,
            http_client=http_client,
            breaker_failures=breaker_failures,
            breaker_error=BreakerOpenError,
            budget=budget,
            price=price_for(model, self.prices),
            max_retry_after_s=max_retry_after_s,
        )
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.base_url = self._api.base_url  # the given one, else $ANTHROPIC_BASE_URL: part of summarizer_id
        self.max_retries = max_retries
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # never shows the key
        return (
            f"{type(self).__name__}(model={self.model!r}, max_tokens={self.max_tokens}, temperature={self.temperature})"
        )

    @property
    def breaker_skips(self) -> int:
        """Summaries refused without a request because the circuit breaker was open."""
        return self._api.breaker.skipped

    @property
    def summarizer_id(self) -> str:
        """Name and the parameters that change the reply (not the key, retries or timeout)."""
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature}
        if self.base_url:
            params["base_url"] = self.base_url
        return f"{self.name}{json.dumps(params, sort_keys=True, separators=(',', ':'))}"

    # -- the call -----------------------------------------------------------------------------

    def prompts(self, request: SummaryRequest) -> tuple[str, str]:
        """The ``(system, user)`` texts sent for ``request``."""
        return request.system_prompt, request.user_prompt

    def cache_material(self, request: SummaryRequest) -> dict[str, Any]:
        """What the response cache keys on besides ``summarizer_id`` and ``model``."""
        system, user = self.prompts(request)
        return {"system": system, "user": user, "max_tokens": self.max_tokens or request.max_output_tokens}

    @property
    def api(self) -> AnthropicAPI:
        """The SDK wrapper this summarizer calls through (the Batches path submits with it)."""
        return self._api

    def request_params(self, request: SummaryRequest) -> dict[str, Any]:
        """The Messages API body sent for ``request`` (no key: it travels in a header): what
        :meth:`summarize` sends, and a batch request's ``params``."""
        system, user = self.prompts(request)
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens or request.max_output_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
        }
        if self.temperature is not None:
            params["temperature"] = self.temperature
        return params

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        params = self.request_params(request)
        timeout = self.timeout_s if self.timeout_s is not None else request.timeout_s
        temperature = params.pop("temperature", None)
        extra_body = {"temperature": temperature} if temperature is not None else None
        t0 = time.perf_counter()
        resp = self._api.create(**params, extra_body=extra_body, timeout=timeout)
        return self.reply_from_message(resp, latency_s=time.perf_counter() - t0)

    def reply_from_message(self, message: Any, *, latency_s: float, batched: bool = False) -> SummaryReply:
        """The :class:`SummaryReply` of one Messages API response (a ``messages.create`` return
        or a batch result's ``message``); ``batched``: it came through the Message Batches API,
        so it costs :func:`h9eval.core.prices.batch_price_frac` of the list price."""
        # Every field stored of the reply (its text, model, stop reason, usage) is read and
        # redacted once, at the source, so the key never reaches the cache, the tables, the
        # records or sessions.db, even when a reply echoes it.
        reply = self._api.reply(message)
        return self._reply(reply, self._reply_text(reply), latency_s, batched=batched)

    def _reply_text(self, reply: Reply) -> str | None:
        return reply.text  # None: harness9's nil message (see the module docstring)

    def _reply(self, reply: Reply, text: str | None, latency: float, *, batched: bool = False) -> SummaryReply:
        usage = reply.usage
        tin, tout = usage.input_tokens, usage.output_tokens
        price = price_for(self.model, self.prices)
        cost = math.nan if price is None else (tin * price[0] + tout * price[1]) / 1e6
        if batched:
            cost *= batch_price_frac(self.model)
        extra: dict[str, object] = {
            "stop_reason": reply.stop_reason,
            "cost_known": price is not None,
            "response_model": reply.model,
        }
        if batched:
            extra["batched"] = True  # kept by the response cache, whose hits restore the flag
        if usage.missing:
            extra["usage_missing"] = True
        if usage.cache_creation_input_tokens:
            extra["cache_creation_input_tokens"] = usage.cache_creation_input_tokens
        if usage.cache_read_input_tokens:
            extra["cache_read_input_tokens"] = usage.cache_read_input_tokens
        return SummaryReply(
            text=text,
            input_tokens=tin,
            output_tokens=tout,
            latency_s=latency,
            cost_usd=cost,
            model=self.model,
            batched=batched,
            extra=extra,
        )


FREE_TEXT_SYSTEM_PROMPT = (
    "You are a context compaction engine. You read a conversation between a user and an AI "
    "agent and write a summary that lets the agent continue the task. Output only the summary, "
    "with no preamble."
)

FREE_TEXT_INSTRUCTIONS = (
    "Summarize the conversation below in plain prose (no headings, no anchor sections). Keep: "
    "the user's task and any later changes to it, constraints, what was done and with what "
    "outcome, decisions and their reasons, approaches that failed and why, files and "
    "identifiers that matter, and the next steps. Stay within about {max_tokens} tokens."
)


class AnthropicFreeTextSummarizer(AnthropicSummarizer):
    """A plain prose summary (no anchors) from the Anthropic API; same parameters as
    :class:`AnthropicSummarizer`. It builds its own prompt from ``request.conversation`` and
    ``request.previous_summary`` (ignoring the anchor templates) and returns
    ``"## Summary\\n" + text`` so that every anchor parses as ``N/A``."""

    name = "anthropic_free_text"

    def prompts(self, request: SummaryRequest) -> tuple[str, str]:
        max_tokens = self.max_tokens or request.max_output_tokens
        parts = [FREE_TEXT_INSTRUCTIONS.format(max_tokens=max_tokens)]
        if request.previous_summary:
            parts.append(
                "Fold in the previous summary:\n<previous-summary>\n"
                + request.previous_summary
                + "\n</previous-summary>"
            )
        parts.append("Conversation:\n" + request.conversation)
        return FREE_TEXT_SYSTEM_PROMPT, "\n\n".join(parts)

    def _reply_text(self, reply: Reply) -> str | None:
        text = super()._reply_text(reply)
        if text is None:
            return None
        body = text.strip()
        # A model that writes its own "## Summary" header would otherwise get two.
        if body.startswith("## Summary"):
            body = body[len("## Summary") :].lstrip("\n")
        return "## Summary\n" + body
