"""Anthropic's server-side compaction (beta ``compact-2026-01-12``) as a policy, through a cassette.

What the provider does: a request carries ``context_management.edits = [{"type":
"compact_20260112", "trigger": {"type": "input_tokens", "value": N}}]``; when the rendered input
passes N tokens, the server summarises the conversation before generating, returns the summary as
a ``compaction`` content block in the response, and the client sends that block back in place of
everything before it on later requests. The compaction step is billed as an extra iteration
(``usage.iterations``).

Here, at every model call, the view is the system message, the latest compaction block (as a
``[Context Compaction]`` message, so probes and the ledger read it as a summary) and the messages
since; when its estimate reaches ``trigger_tokens`` the request the client would send is looked up
in the cassette (:class:`h9eval.core.cassette.Cassette`: the SHA-256 of the canonical request
body): its ``compaction`` block becomes the new summary of everything so far, and the compaction
iteration's tokens and price are the call's summarizer columns (no separate summarizer is called:
the provider is the summarizer). A cassette miss is an error; ``record=True`` sends the request
through the ``anthropic`` SDK instead (``base_url`` for a local server or a proxy, the key from
``ANTHROPIC_API_KEY``) and appends the reply to the cassette.

Reconstructed, not measured against the service: the request's other fields (``max_tokens`` 1:
only the compaction matters for the replay) and where the summary sits are our reading of the
documented shapes; the shipped cassettes come from a local server that follows them (see
``examples/cassettes/README.md``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.compaction._peer import peer_record
from h9eval.compaction.anchors import COMPACTION_MARKER
from h9eval.compaction.base import Compaction, CompactionEnv, PolicyRun, WindowedPolicy, register
from h9eval.compaction.records import EXTRA_SUMMARY_CALLS, Tier
from h9eval.compaction.summary import SummaryCall
from h9eval.core.anthropic import AnthropicAPI, anthropic_messages
from h9eval.core.cassette import Cassette, request_hash
from h9eval.core.errors import ConfigError, SummarizerError
from h9eval.core.messages import Message
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tokens

__all__ = ["AnthropicServerCompaction", "COMPACTION_BETA", "compaction_request"]

COMPACTION_BETA = "compact-2026-01-12"
COMPACTION_EDIT = "compact_20260112"
DEFAULT_TRIGGER_TOKENS = 150_000
"""The trigger when none is given (the provider's documented default input-token trigger)."""
_LABEL = "(provider-side compaction: anthropic compact_20260112)"


def compaction_request(view: Sequence[Message], *, model: str, trigger_tokens: int) -> dict[str, Any]:
    """The Messages API request body the client sends for ``view`` with compaction configured."""
    system, msgs = anthropic_messages(view)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 1,
        "messages": msgs,
        "context_management": {"edits": [{"type": COMPACTION_EDIT,
                                          "trigger": {"type": "input_tokens", "value": trigger_tokens}}]},
    }
    if system:
        body["system"] = system
    return body


def _compaction_of(response: dict[str, Any]) -> tuple[str | None, int, int]:
    """``(summary text or None, input tokens, output tokens)`` of the compaction step in a reply."""
    text = None
    for block in response.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "compaction":
            content = block.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
    usage = response.get("usage") or {}
    for it in usage.get("iterations") or []:
        if isinstance(it, dict) and it.get("type") == "compaction":
            return text, int(it.get("input_tokens") or 0), int(it.get("output_tokens") or 0)
    return text, int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)


@register
@dataclass(frozen=True, kw_only=True)
class AnthropicServerCompaction(WindowedPolicy):
    """Anthropic's server-side compaction (``compact_20260112``) replayed from a cassette (see the
    module docstring); ``keep_all`` otherwise. Parameters name the request it sends."""

    kind: ClassVar[str] = "anthropic_server_compaction"
    source: ClassVar[str] = "Anthropic Messages API server-side compaction (beta compact-2026-01-12), via a cassette"
    uses_summarizer: ClassVar[bool] = False
    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """The model's window (tokens); default 200,000."""
    trigger_tokens: int = DEFAULT_TRIGGER_TOKENS
    """The ``input_tokens`` trigger sent in the request; must be below the window."""
    model: str = "claude-sonnet-4-6"
    cassette: str = ""
    """The cassette file (JSONL) of recorded replies; required."""
    record: bool = False
    """Send missing requests to the API (``anthropic`` SDK) and record them; default replay only."""
    base_url: str | None = None
    """The API's base URL when recording (a local server, a proxy); default the SDK's."""
    price_input_usd_per_mtok: float = 3.0
    """List price of the compaction step's input tokens (the model's; Sonnet 4.6 by default)."""
    price_output_usd_per_mtok: float = 15.0

    def __post_init__(self) -> None:
        if not self.cassette:
            raise ConfigError("anthropic_server_compaction.cassette is required (a cassette file of recorded replies)")
        if not 0 < self.trigger_tokens < self.context_window_tokens:
            raise ConfigError(f"anthropic_server_compaction.trigger_tokens must be > 0 and < context_window_tokens "
                              f"({self.context_window_tokens}), got {self.trigger_tokens}")

    def start(self, env: CompactionEnv | None = None) -> PolicyRun:
        return _ServerCompactionRun(self, env or CompactionEnv())


class _ServerCompactionRun(PolicyRun):
    def __init__(self, policy: AnthropicServerCompaction, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        self.cassette = Cassette(policy.cassette)
        if not policy.record and len(self.cassette) == 0:
            raise ConfigError(f"cassette {policy.cassette} has no recorded reply (record one with record=true)")
        self.summary: str | None = None
        self.cut = 0  # messages before this index are in the summary
        self._api: AnthropicAPI | None = None

    def _view(self, history: Sequence[Message]) -> list[Message]:
        system = [m for m in history[:1] if m.role == "system"]
        start = max(self.cut, len(system))
        head = [Message("user", f"{COMPACTION_MARKER} {_LABEL}\n{self.summary}")] if self.summary is not None else []
        return [*system, *head, *history[start:]]

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        key = request_hash(body)
        found = self.cassette.get(key)
        if found is not None:
            return found
        if not self.policy.record:
            raise ConfigError(f"cassette {self.policy.cassette}: no recorded reply for this request (hash {key[:16]}…); "
                              "record it with record=true against the API or a compatible server")
        if self._api is None:
            self._api = AnthropicAPI(api_key=None, who=f"anthropic server compaction ({self.policy.model})",
                                     error=SummarizerError, base_url=self.policy.base_url)
        api = self._api
        raw = api.call(api.client.messages.with_raw_response.create, timeout=120.0,
                       extra_headers={"anthropic-beta": COMPACTION_BETA},
                       extra_body={"context_management": body["context_management"]},
                       **{k: v for k, v in body.items() if k != "context_management"})
        response = raw.http_response.json()
        self.cassette.put(key, response)
        return response

    def _compact(self, history: Sequence[Message], tokens: int | None, *, force: bool) -> Compaction:
        start_ns = self.env.clock.now_ns()
        view = self._view(history)
        tb = estimate_tokens(view)
        if not force and tb < self.policy.trigger_tokens:
            # below the trigger: the provider compacts nothing at this call (an earlier summary stays)
            return Compaction(tuple(view), peer_record(self.env, history, view, Tier.NONE,
                                                       tokens_before=estimate_tokens(history), start_ns=start_ns))
        body = compaction_request(view, model=self.policy.model, trigger_tokens=self.policy.trigger_tokens)
        text, n_in, n_out = _compaction_of(self._reply(body))
        if text is None:  # the server counted fewer tokens than the trigger: nothing compacted
            return Compaction(tuple(view), peer_record(self.env, history, view, Tier.NONE, tokens_before=tb,
                                                       start_ns=start_ns))
        self.summary, self.cut = text, len(history)
        new_view = self._view(history)
        cost = (n_in * self.policy.price_input_usd_per_mtok + n_out * self.policy.price_output_usd_per_mtok) / 1e6
        call = SummaryCall(1, "provider", None, "", "response", input_tokens=n_in, output_tokens=n_out, cost_usd=cost)
        rec = peer_record(self.env, history, new_view, Tier.FULL, tokens_before=estimate_tokens(history),
                          start_ns=start_ns, extra={EXTRA_SUMMARY_CALLS: [call]}, summary_text=text)
        return Compaction(tuple(new_view), rec)

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        return self._compact(history, tokens, force=False)

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._compact(history, None, force=True)
