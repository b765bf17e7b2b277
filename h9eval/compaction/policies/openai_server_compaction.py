"""OpenAI's compaction (the Responses API's ``POST /v1/responses/compact``) as a policy, through a cassette.

What the provider does: the client sends the conversation as Responses input items (messages,
``function_call`` and ``function_call_output`` items, an earlier ``compaction`` item) with the
system prompt as ``instructions``; the reply (``object: "response.compaction"``) has ``output``:
"all user messages, followed by a single compaction item" (``{"type": "compaction", "id",
"encrypted_content"}``, opaque: only the service can read it) and ``usage``, the compaction pass's
tokens (``input_tokens`` with ``input_tokens_details.cached_tokens``, ``output_tokens``). The
client continues from that output, sending the compaction item back verbatim.

Here (see :mod:`h9eval.compaction.policies._server` for what the provider-side policies share),
when the view's estimate reaches the trigger the compact request is looked up in the cassette and
its ``output`` becomes the view: the system message, the user messages as returned and the
compaction item as a ``[Context Compaction]`` message holding the item's JSON as returned (probes
and the ledger cannot read an encrypted summary, and do not: what they find there is what a
reader of the transcript finds). The compaction pass is billed in the summarizer columns at the
model's list prices with OpenAI's automatic-caching rule (cached input at ``cache_read_frac`` of
the input price, :mod:`h9eval.core.prices`).

Reconstructed, not measured against the service: the trigger (the client calls the endpoint when
its estimate passes ``trigger_tokens``, as an agent using the standalone endpoint would; OpenAI's
automatic ``context_management`` compaction in ``responses.create`` is not modelled) and the input
items' exact shape are our reading of the documented API; the shipped cassette comes from a local
fake server that follows it (``h9eval/data/cassettes/README.md``).
"""

from __future__ import annotations

import json
import os
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
from h9eval.core.anthropic import ERROR_MESSAGE_CHARS, redact, redact_obj
from h9eval.core.errors import ConfigError, SummarizerError
from h9eval.core.messages import Message

__all__ = ["OPENAI_API_KEY_ENV", "OpenAIServerCompaction", "compact_request", "openai_input"]

OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
_LABEL = "(provider-side compaction: openai responses.compact)"
_ITEM_FIELDS = ("type", "id", "encrypted_content")
"""The fields of a compaction item sent back as input (the item param's)."""


def _message_item(role: str, text: str) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


def openai_input(view: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(instructions, input items)`` of a Responses request for h9eval messages: system
    messages joined into the instructions, tool calls as ``function_call`` items, tool results as
    ``function_call_output`` items and a provider compaction item sent back as returned."""
    instructions = "\n\n".join(m.content for m in view if m.role == "system")
    items: list[dict[str, Any]] = []
    for m in view:
        item = provider_item(m)
        if m.role == "system":
            continue
        if item is not None:
            items.append({k: item[k] for k in _ITEM_FIELDS if k in item})
        elif m.is_tool_result:
            items.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content})
        elif m.is_assistant:
            if m.content:
                items.append(_message_item("assistant", m.content))
            items += [
                {"type": "function_call", "call_id": tc.id, "name": tc.name, "arguments": tc.arguments or "{}"}
                for tc in m.tool_calls
            ]
        else:
            items.append(_message_item("user", m.content))
    return instructions, items


def compact_request(view: Sequence[Message], *, model: str) -> dict[str, Any]:
    """The ``/v1/responses/compact`` request body for ``view``."""
    instructions, items = openai_input(view)
    body: dict[str, Any] = {"model": model, "input": items}
    if instructions:
        body["instructions"] = instructions
    return body


def _text_of(item: Mapping[str, Any]) -> str:
    parts = item.get("content")
    if isinstance(parts, str):
        return parts
    return "".join(str(p.get("text", "")) for p in parts or [] if isinstance(p, dict))


_CLIENTS: dict[tuple[str, str | None], Any] = {}


def _client(key: str, base_url: str | None) -> Any:
    """One SDK client per key and base URL in a process (building one loads the TLS certificates)."""
    import openai

    if (key, base_url) not in _CLIENTS:
        kwargs: dict[str, Any] = {"api_key": key, "max_retries": 2}
        if base_url is not None:
            kwargs["base_url"] = base_url
        _CLIENTS[(key, base_url)] = openai.OpenAI(**kwargs)
    return _CLIENTS[(key, base_url)]


@register
@dataclass(frozen=True, kw_only=True)
class OpenAIServerCompaction(ServerCompactionPolicy):
    """OpenAI's compaction endpoint (``responses.compact``) replayed from a cassette: past the
    trigger the provider's output (the user messages and one opaque compaction item) replaces the
    conversation (see the module docstring); the compaction pass is billed in the summarizer columns."""

    kind: ClassVar[str] = "openai_server_compaction"
    source: ClassVar[str] = (
        "OpenAI Responses API compaction (POST /v1/responses/compact, encrypted compaction item), via a cassette"
    )
    provider: ClassVar[str] = "openai"
    model: str = "gpt-5"
    """The model the requests name (its list prices and caching rule bill the compaction pass)."""

    def start(self, env: CompactionEnv | None = None) -> PolicyRun:
        return _OpenAIRun(self, env or CompactionEnv())


class _OpenAIRun(ServerCompactionRun):
    def request(self, view: Sequence[Message]) -> dict[str, Any]:
        return compact_request(view, model=self.policy.model)

    def send(self, body: dict[str, Any]) -> dict[str, Any]:
        key = os.environ.get(OPENAI_API_KEY_ENV, "")
        who = f"openai server compaction ({self.policy.model})"
        if not key:
            raise ConfigError(f"the {who} needs an API key to record: set {OPENAI_API_KEY_ENV}")
        import openai  # lazy and optional: replaying a cassette needs no SDK

        client = _client(key, self.policy.base_url)

        def fail(detail: str) -> SummarizerError:
            return SummarizerError(redact(f"{who}: {detail}", key)[: ERROR_MESSAGE_CHARS + len(who) + 2])

        try:
            # the body goes as built (extra_body): the SDK's typed transform of a long input costs seconds
            raw = client.responses.with_raw_response.compact(
                model=body["model"], timeout=120.0, extra_body={k: v for k, v in body.items() if k != "model"}
            )
            response = raw.http_response.json()
        except openai.APIStatusError as e:
            raise fail(f"HTTP {e.status_code}: {e.message}") from None
        except openai.APIConnectionError as e:
            raise fail(f"connection error: {e.message}") from None
        except (openai.OpenAIError, ValueError) as e:
            raise fail(f"malformed response: {type(e).__name__}: {e}") from None
        if not isinstance(response, dict):
            raise fail(f"malformed response: expected a JSON object, got {type(response).__name__}")
        # every string redacted in place: redacting the JSON text could cut an escape of it in two
        redacted: dict[str, Any] = redact_obj(response, key)
        return redacted

    def read(self, response: Mapping[str, Any], view: Sequence[Message]) -> CompactionStep:
        output = [i for i in response.get("output") or [] if isinstance(i, dict)]
        item = next((i for i in output if i.get("type") == "compaction"), None)
        if item is None:
            return CompactionStep(None)
        text = json.dumps(item, sort_keys=True, ensure_ascii=False)
        kept = [Message("user", _text_of(i)) for i in output if i.get("type") == "message" and i.get("role") == "user"]
        system = [m for m in view[:1] if m.role == "system"]
        usage = response.get("usage") or {}
        n_in = int(usage.get("input_tokens") or 0)
        cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
        return CompactionStep(
            [*system, *kept, provider_message(_LABEL, text, item)],
            text=text,
            summarized=len(view) - len(system) - len(kept),
            uncached_input_tokens=n_in - cached,
            cache_read_input_tokens=cached,
            output_tokens=int(usage.get("output_tokens") or 0),
        )
