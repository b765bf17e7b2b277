"""Anthropic's server-side compaction (beta ``compact-2026-01-12``) as a policy, through a cassette.

What the provider does: a request carries ``context_management.edits = [{"type":
"compact_20260112", "trigger": {"type": "input_tokens", "value": N}}]``; when the rendered input
passes N tokens, the server summarises the conversation before generating and returns the summary
as a ``compaction`` content block (``content``: the summary; ``encrypted_content``/``signature``
when present, opaque) at the start of its reply. The client appends the reply to its messages;
on later requests the server drops every block before the compaction block. The compaction step
is billed as an extra iteration (``usage.iterations``, ``type: "compaction"``).

Here (see :mod:`h9eval.compaction.policies._server` for what the provider-side policies share),
at every model call the view is the system message, the latest compaction block (a
``[Context Compaction]`` message with the block's summary, so probes and the ledger read it as
one; the block itself rides along and is sent back verbatim) and the messages since. When its
estimate reaches the trigger, the request the client would send is looked up in the cassette:
its compaction block replaces everything before it, and the compaction iteration's tokens and
list-price dollars (:mod:`h9eval.core.prices`, Anthropic's cache classes) are the call's
summarizer columns.

Reconstructed, not measured against the service: the request's other fields (``max_tokens`` 1:
only the compaction matters for the replay), where the block sits on later requests (an assistant
turn after a placeholder user turn) and dropping the earlier messages client-side (the server
would drop them anyway) are our reading of the documented shapes; the shipped cassette comes from
a local fake server that follows them (``h9eval/data/cassettes/README.md``). The service refuses
a trigger below 50,000 tokens; small windows here are for the fake server and tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.compaction.base import CompactionEnv, PolicyRun, register
from h9eval.compaction.policies._server import (
    CompactionStep,
    ServerCompactionPolicy,
    ServerCompactionRun,
    provider_item,
    provider_message,
)
from h9eval.core.anthropic import COMPACTED_PLACEHOLDER, AnthropicAPI, anthropic_messages, resolve_api_key
from h9eval.core.errors import SummarizerError
from h9eval.core.messages import Message

__all__ = ["AnthropicServerCompaction", "COMPACTION_BETA", "COMPACTION_EDIT", "compaction_request"]

COMPACTION_BETA = "compact-2026-01-12"
COMPACTION_EDIT = "compact_20260112"
_LABEL = "(provider-side compaction: anthropic compact_20260112)"


def _request_messages(view: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(system, messages)`` for ``view``, the latest compaction block sent back as returned: in
    an assistant turn (where the reply carried it) after a placeholder user turn, followed by the
    messages since (its text joins that assistant turn when they start with one)."""
    at = next((i for i, m in enumerate(view) if provider_item(m) is not None), None)
    if at is None:
        return anthropic_messages(view)
    block = provider_item(view[at])
    rest = [m for i, m in enumerate(view) if i != at]
    system, msgs = anthropic_messages(rest)
    after = [m for m in view[at + 1 :] if m.role != "system"]
    if after and after[0].is_assistant:  # msgs = [placeholder user, that assistant turn, ...]
        msgs[1]["content"].insert(0, block)
        return system, msgs
    if not after:  # msgs = [placeholder user]
        return system, [*msgs, {"role": "assistant", "content": [block]}]
    placeholder = {"role": "user", "content": [{"type": "text", "text": COMPACTED_PLACEHOLDER}]}
    return system, [placeholder, {"role": "assistant", "content": [block]}, *msgs]


def compaction_request(view: Sequence[Message], *, model: str, trigger_tokens: int) -> dict[str, Any]:
    """The Messages API request body the client sends for ``view`` with compaction configured."""
    system, msgs = _request_messages(view)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 1,
        "messages": msgs,
        "context_management": {
            "edits": [{"type": COMPACTION_EDIT, "trigger": {"type": "input_tokens", "value": trigger_tokens}}]
        },
    }
    if system:
        body["system"] = system
    return body


@register
@dataclass(frozen=True, kw_only=True)
class AnthropicServerCompaction(ServerCompactionPolicy):
    """Anthropic's server-side compaction (``compact_20260112``) replayed from a cassette: past
    the trigger the provider's summary block replaces the conversation (see the module
    docstring); the compaction iteration is billed in the summarizer columns."""

    kind: ClassVar[str] = "anthropic_server_compaction"
    source: ClassVar[str] = "Anthropic Messages API server-side compaction (beta compact-2026-01-12), via a cassette"
    provider: ClassVar[str] = "anthropic"
    model: str = "claude-sonnet-4-6"
    """The model the requests name (its list prices bill the compaction step)."""

    def start(self, env: CompactionEnv | None = None) -> PolicyRun:
        return _AnthropicRun(self, env or CompactionEnv())


_APIS: dict[tuple[str, str | None, str], AnthropicAPI] = {}


def _api(base_url: str | None, model: str) -> AnthropicAPI:
    """One client per key, base URL and model in a process (building one loads the TLS certificates)."""
    key = resolve_api_key(None, who=f"the anthropic server compaction ({model})")
    if (key, base_url, model) not in _APIS:
        _APIS[(key, base_url, model)] = AnthropicAPI(
            api_key=key, who=f"anthropic server compaction ({model})", error=SummarizerError, base_url=base_url
        )
    return _APIS[(key, base_url, model)]


class _AnthropicRun(ServerCompactionRun):
    def request(self, view: Sequence[Message]) -> dict[str, Any]:
        return compaction_request(view, model=self.policy.model, trigger_tokens=self.policy.trigger)

    def send(self, body: dict[str, Any]) -> dict[str, Any]:
        api = _api(self.policy.base_url, self.policy.model)
        raw = api.call(
            api.client.messages.with_raw_response.create,
            timeout=120.0,
            extra_headers={"anthropic-beta": COMPACTION_BETA},
            extra_body={"context_management": body["context_management"]},
            **{k: v for k, v in body.items() if k != "context_management"},
        )
        try:
            response = raw.http_response.json()
        except ValueError as e:
            raise api.error(f"malformed response: {e}") from None
        if not isinstance(response, dict):
            raise api.error(f"malformed response: expected a JSON object, got {type(response).__name__}")
        redacted: dict[str, Any] = api.redact_obj(response)
        return redacted

    def read(self, response: Mapping[str, Any], view: Sequence[Message]) -> CompactionStep:
        blocks = [b for b in response.get("content") or [] if isinstance(b, dict)]
        block = next((b for b in blocks if b.get("type") == "compaction"), None)
        if block is None:
            return CompactionStep(None)
        content = block.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        usage = response.get("usage") or {}
        it = next(
            (i for i in usage.get("iterations") or [] if isinstance(i, dict) and i.get("type") == "compaction"), usage
        )
        system = [m for m in view[:1] if m.role == "system"]
        return CompactionStep(
            [*system, provider_message(_LABEL, text, block)],
            text=text,
            summarized=len(view) - len(system),
            uncached_input_tokens=int(it.get("input_tokens") or 0),
            cache_write_input_tokens=int(it.get("cache_creation_input_tokens") or 0),
            cache_read_input_tokens=int(it.get("cache_read_input_tokens") or 0),
            output_tokens=int(it.get("output_tokens") or 0),
        )
