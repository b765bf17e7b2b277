"""The live agent: the same closed loop driven by a model through the Anthropic Messages API.

Opt-in and never used by default. Each step sends ``messages.create`` with the view as
Anthropic messages (an assistant message's tool calls become ``tool_use`` blocks, tool
results ``tool_result`` blocks in a user message, consecutive messages of one role merged),
the world's tools, ``temperature`` 0 (in the request body, as the summarizer sends it) and
prompt caching: ``cache_control: ephemeral`` on the system block and on the last tool, so the
stable prefix is cached across steps. The reply's text is the note; its first ``tool_use``
block is the action (no ``tool_use``: done). Usage per call (input, output, cache read, cache
creation) and its list-price cost (the one model table, :mod:`h9eval.core.prices`, with the model's own
cache-read and cache-write multipliers; NaN for an unpriced model) are kept on the action and summed by the episode.

A :class:`Cassette` (JSONL, one ``{"request_hash", "response"}`` per line) records a live
episode so that it replays offline: ``mode="replay"`` (the default) answers only from the
cassette and raises :class:`~h9eval.closedloop.agents.base.AgentError` on a miss, never
calling the network (no client is built, no key is needed); ``mode="record"`` answers from
the cassette when it can and otherwise calls the API and appends the response; ``mode="live"``
always calls the API and records nothing. The request hash is the SHA-256 of the canonical
JSON request body, so any change in the view, tools, model or parameters is a miss.

Temperature 0 is still not deterministic: repeat live episodes and report pass^k
(:func:`h9eval.closedloop.analysis.pass_hat_k`).

Server-side context editing as an extra live baseline: ``context_management`` (for example
``{"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 3}}]}``)
sends the request through ``client.beta.messages.create`` with that configuration and the
``betas`` it needs (default: ``context-management-2025-06-27``); run it with the ``keep_all``
policy so that the server is the only compactor. The server edits its copy of each request,
so the harness still sends the full history and the tokens it counts are those sent, not those
the model saw (the response's usage says the latter). Server-side *compaction*
(``compact_20260112``) returns a compaction block that must be sent back in later requests;
the h9eval transcript has no place for it, so it is not supported here.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from h9eval.closedloop.agents.base import (
    Action,
    AgentError,
    CallUsage,
    canonical_json,
    parse_view,
)
from h9eval.core.anthropic import (
    DEFAULT_BREAKER_FAILURES,
    DEFAULT_MAX_RETRY_AFTER_S,
    AnthropicAPI,
    anthropic_messages,
)
from h9eval.core.billing import call_cost_usd as billed_usd
from h9eval.core.cassette import Cassette, request_hash
from h9eval.core.prices import ModelInfo, price_of
from h9eval.core.errors import ConfigError

__all__ = [
    "DEFAULT_AGENT_MODEL",
    "LIVE_MODES",
    "AnthropicAgent",
    "Cassette",
    "action_from_response",
    "request_hash",
    "to_anthropic_request",
]

LIVE_MODES = ("replay", "record", "live")
DEFAULT_AGENT_MODEL = "claude-sonnet-4-6"
#: the beta header server-side context editing needs (``clear_tool_uses_20250919``)
CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
_EPHEMERAL = {"type": "ephemeral"}


def to_anthropic_request(view_json: str, *, model: str, max_tokens: int, temperature: float | None) -> dict[str, Any]:
    """The Messages API request body for one step's view (see the module docstring)."""
    view = parse_view(view_json)
    system, msgs = anthropic_messages(view.messages)
    tools = [
        {
            "name": t["name"],
            "description": t.get("description", ""),
            "input_schema": t.get("input_schema", {"type": "object"}),
        }
        for t in view.tools
    ]
    if tools:
        tools[-1]["cache_control"] = dict(_EPHEMERAL)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "system": [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}] if system else [],
        "tools": tools,
        "messages": msgs,
    }
    if temperature is not None:
        body["temperature"] = temperature
    return body


def call_cost_usd(usage: CallUsage, price: ModelInfo | None) -> float:
    """List-price USD of one call, priced by the one model table (:mod:`h9eval.core.prices`, its own
    cache-read and 5-minute-write multipliers); NaN when the model is unpriced (missing, never 0)."""
    dollars = billed_usd(
        price,
        uncached=usage.input_tokens,
        write_5m=usage.cache_creation_input_tokens,
        read=usage.cache_read_input_tokens,
        output=usage.output_tokens,
    )
    return float("nan") if dollars is None else dollars


def action_from_response(resp: Mapping[str, Any], *, price: ModelInfo | None = None) -> Action:
    """The action in a Messages API response: text blocks are the note, the first ``tool_use``
    block the call (further ones are ignored: the system prompt asks for one per turn);
    ``price`` (the model's entry in :mod:`h9eval.core.prices`; ``None`` = unpriced) prices the usage."""
    content = resp.get("content")
    if not isinstance(content, list):
        raise AgentError(f"malformed response: no content list (got {type(content).__name__})")
    note = "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    use = next((b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"), None)
    u = resp.get("usage") or {}
    usage = CallUsage(
        input_tokens=int(u.get("input_tokens") or 0),
        output_tokens=int(u.get("output_tokens") or 0),
        cache_read_input_tokens=int(u.get("cache_read_input_tokens") or 0),
        cache_creation_input_tokens=int(u.get("cache_creation_input_tokens") or 0),
    )
    usage = dataclasses.replace(usage, cost_usd=call_cost_usd(usage, price))
    if use is None:
        return Action(note=note, usage=usage)
    args = use.get("input") or {}
    if not isinstance(args, Mapping):
        raise AgentError(f"malformed response: tool_use input must be an object, got {type(args).__name__}")
    return Action(note=note, tool=str(use.get("name", "")), arguments=canonical_json(args), usage=usage)


class AnthropicAgent:
    """A model as the closed-loop agent (see the module docstring).

    Parameters (keyword-only): ``model`` (default ``claude-sonnet-4-6``); ``max_tokens`` per
    reply (default 1024); ``temperature`` (default 0.0; ``None`` omits it); ``cassette``: a
    JSONL path (required for ``replay`` and ``record``); ``mode``: ``replay`` (default),
    ``record`` or ``live``; ``api_key`` (default ``ANTHROPIC_API_KEY``; not needed in replay);
    ``base_url`` (default ``$ANTHROPIC_BASE_URL``, else the API); ``max_retries`` (default 2); ``timeout_s`` per
    attempt (default 60); ``breaker_failures`` (default 3: see :class:`~h9eval.core.anthropic.CircuitBreaker`);
    ``max_retry_after_s``: the longest ``retry-after`` a retry waits for (default 60; longer ends the call);
    ``http_client``: an ``httpx2.Client`` handed to the SDK (tests inject a fake transport);
    ``context_management``: server-side context editing configuration (see the module
    docstring; default ``None``: none); ``betas``: beta headers sent with it (default
    ``context-management-2025-06-27`` when ``context_management`` is set).
    """

    def __init__(
        self,
        *,
        model: str = DEFAULT_AGENT_MODEL,
        max_tokens: int = 1024,
        temperature: float | None = 0.0,
        cassette: str | os.PathLike[str] | None = None,
        mode: str = "replay",
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout_s: float = 60.0,
        http_client: Any = None,
        context_management: Mapping[str, Any] | None = None,
        betas: tuple[str, ...] | None = None,
        breaker_failures: int = DEFAULT_BREAKER_FAILURES,
        max_retry_after_s: float = DEFAULT_MAX_RETRY_AFTER_S,
    ) -> None:
        if context_management is not None and not isinstance(context_management.get("edits"), list):
            raise ConfigError(
                f"AnthropicAgent.context_management must have an 'edits' list, got {context_management!r}"
            )
        if mode not in LIVE_MODES:
            raise ConfigError(f"AnthropicAgent.mode must be one of {', '.join(LIVE_MODES)}, got {mode!r}")
        if not model:
            raise ConfigError("AnthropicAgent.model must be a non-empty model id")
        if max_tokens < 1:
            raise ConfigError(f"AnthropicAgent.max_tokens must be >= 1, got {max_tokens}")
        if timeout_s <= 0:
            raise ConfigError(f"AnthropicAgent.timeout_s must be > 0 seconds, got {timeout_s}")
        if mode in ("replay", "record") and cassette is None:
            raise ConfigError(f"AnthropicAgent mode {mode!r} needs a cassette path")
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.mode = mode
        self.cassette = Cassette(cassette) if cassette is not None else None
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self._http_client = http_client
        self.context_management = json.loads(json.dumps(context_management)) if context_management is not None else None
        self.betas = (
            tuple(betas)
            if betas is not None
            else ((CONTEXT_MANAGEMENT_BETA,) if context_management is not None else ())
        )
        # replay mode needs no key and never builds a client
        self._api: AnthropicAPI | None = None
        if mode != "replay":
            self._api = AnthropicAPI(
                api_key=api_key,
                who=f"anthropic agent ({model})",
                error=AgentError,
                max_retries=max_retries,
                base_url=base_url,
                http_client=http_client,
                breaker_failures=breaker_failures,
                max_retry_after_s=max_retry_after_s,
            )
            self.base_url = self._api.base_url

    def __repr__(self) -> str:  # never shows the key
        return f"AnthropicAgent(model={self.model!r}, mode={self.mode!r})"

    @property
    def agent_id(self) -> str:
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature}
        if self.context_management is not None:
            params["context_management"] = self.context_management
        return "anthropic" + json.dumps(params, sort_keys=True, separators=(",", ":"))

    def request(self, view_json: str) -> dict[str, Any]:
        body = to_anthropic_request(
            view_json, model=self.model, max_tokens=self.max_tokens, temperature=self.temperature
        )
        if self.context_management is not None:
            body["context_management"] = self.context_management
            body["betas"] = list(self.betas)  # part of the hash: another beta is another request
        return body

    def act(self, view_json: str) -> Action:
        body = self.request(view_json)
        key = request_hash(body)
        if self.cassette is not None and self.mode != "live":
            hit = self.cassette.get(key)
            if hit is not None:
                return action_from_response(hit, price=self._price())
            if self.mode == "replay":
                raise AgentError(
                    f"cassette {self.cassette.path}: no recorded response for request {key[:16]} (replay mode never "
                    "calls the API; record it with mode='record')"
                )
        resp = self._call(body)
        if self.cassette is not None and self.mode == "record":
            self.cassette.put(key, resp)
        return action_from_response(resp, price=self._price())

    def _price(self) -> ModelInfo | None:
        return price_of(self.model)

    def _call(self, body: dict[str, Any]) -> dict[str, Any]:
        assert self._api is not None  # only replay mode has none, and it never calls
        api = self._api
        kwargs = {k: v for k, v in body.items() if k not in ("temperature",)}
        extra_body = {"temperature": body["temperature"]} if "temperature" in body else None
        method = api.client.beta.messages.create if "context_management" in kwargs else api.client.messages.create
        resp = api.call(method, timeout=self.timeout_s, extra_body=extra_body, **kwargs)
        # Stored whole (the cassette): every string of it redacted, as the one redaction does for a summary.
        return dict(api.redact_obj(resp.model_dump(mode="json", exclude_none=True)))
