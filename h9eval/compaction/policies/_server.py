"""What the provider-side compaction policies share (Anthropic's ``compact_20260112``, OpenAI's
``responses.compact``): their parameters, the run (a :class:`~h9eval.compaction._peer.ContinuedRun`
whose decision is one provider request, answered from a cassette), the provider's item in the
transcript, the shipped cassettes and the billing of the compaction step.

The provider is the summarizer: no h9eval summarizer is called. When the view passes the trigger,
the request the client would send is looked up in the cassette (:class:`h9eval.core.cassette.Cassette`,
keyed by the SHA-256 of the request body); the provider's reply gives the new view, in which the
compaction item sits as a ``[Context Compaction]`` message holding what the provider returned (its
summary text, or its opaque item), with the item itself in ``Message.meta`` so the next request
sends it back verbatim. The compaction step's billed usage is the call's summarizer columns.

A cassette miss is a :class:`ConfigError` naming the cassette and the request; ``record=True``
sends the request through the provider's SDK (``base_url`` for a local or fake server, the key
from the provider's environment variable) and appends the reply, with the key redacted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from h9eval.compaction._peer import ContinuedRun, PeerDecision
from h9eval.compaction.anchors import COMPACTION_MARKER
from h9eval.compaction.base import CompactionEnv, PolicyRun, WindowedPolicy
from h9eval.compaction.records import EXTRA_SUMMARY_CALLS, Tier
from h9eval.compaction.summary import SummaryCall
from h9eval.core.billing import call_cost_usd
from h9eval.core.cassette import Cassette, request_hash
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.core.prices import price_of
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tokens

__all__ = [
    "CASSETTE_DIR",
    "DEFAULT_TRIGGER_FRAC",
    "PROVIDER_ITEM",
    "SHIPPED",
    "CompactionStep",
    "ServerCompactionPolicy",
    "ServerCompactionRun",
    "provider_item",
    "provider_message",
    "shipped_cassette",
]

SHIPPED = "shipped"
"""The ``cassette`` value naming the cassette shipped with h9eval for the policy's kind."""
CASSETTE_DIR = Path(__file__).resolve().parents[2] / "data" / "cassettes"
"""Where the shipped cassettes live (``h9eval/data/cassettes``; its README says how they were made)."""
DEFAULT_TRIGGER_FRAC = 0.75
"""The trigger when none is given, as a fraction of the window: Anthropic's documented default
(150,000 input tokens) over its 200,000-token window."""
PROVIDER_ITEM = "provider_compaction_item"
"""The ``Message.meta`` key holding the provider's compaction item as returned."""


def shipped_cassette(kind: str) -> Path:
    """The cassette shipped for policy ``kind``."""
    return CASSETTE_DIR / f"{kind}.jsonl"


def provider_message(label: str, text: str, item: Mapping[str, Any]) -> Message:
    """The transcript message for a provider's compaction ``item``: ``text`` (what the provider
    returned, readable or not) after the compaction marker, the item itself in ``meta``."""
    return Message("user", f"{COMPACTION_MARKER} {label}\n{text}", meta={PROVIDER_ITEM: dict(item)})


def provider_item(m: Message) -> dict[str, Any] | None:
    """The provider's compaction item a message holds (``None`` for any other message)."""
    item = (m.meta or {}).get(PROVIDER_ITEM)
    return dict(item) if isinstance(item, Mapping) else None


@dataclass(frozen=True)
class CompactionStep:
    """What one provider reply did: the new view (``None``: nothing compacted), the readable
    text of the compaction item (the summary, or the opaque item as returned) and the billed
    usage of the compaction step (tokens by class, as the provider reported them)."""

    view: list[Message] | None
    text: str = ""
    summarized: int = 0
    """Messages of the request's view the compaction replaced."""
    uncached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class ServerCompactionPolicy(WindowedPolicy):
    """The parameters every provider-side compaction policy takes (not registered itself)."""

    uses_summarizer: ClassVar[bool] = False
    provider: ClassVar[str] = ""
    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """The model's window (tokens); default 200,000."""
    trigger_tokens: int | None = None
    """The input-token count at which the provider compacts; ``None`` (default): 0.75 of the
    window (150,000 at 200,000, Anthropic's documented default). Must be below the window."""
    model: str = ""
    cassette: str = SHIPPED
    """The cassette file (JSONL) of recorded replies; ``shipped`` (default): the one shipped with
    h9eval for this policy (recorded against a local fake server; see its README)."""
    record: bool = False
    """Send requests the cassette lacks to the provider (its SDK) and record them; default
    replay only (a miss is an error). Needs a cassette file of your own."""
    base_url: str | None = None
    """The API's base URL when recording (a local server, a proxy); default the SDK's."""

    def __post_init__(self) -> None:
        self._check(self.context_window_tokens > 0, "context_window_tokens", "must be > 0", self.context_window_tokens)
        t = self.trigger_tokens
        self._check(
            t is None or 0 < t < self.context_window_tokens,
            "trigger_tokens",
            f"must be > 0 and < context_window_tokens ({self.context_window_tokens})",
            t,
        )
        self._check(bool(self.cassette), "cassette", f"must be a cassette file or {SHIPPED!r}", self.cassette)
        self._check(
            not (self.record and self.cassette == SHIPPED),
            "cassette",
            "must be a file of your own with record=true (the shipped one is never written)",
            self.cassette,
        )
        info = price_of(self.model)
        self._check(
            info is not None,
            "model",
            "must have list prices in h9eval's model table (core/prices.py) so the compaction step can be billed",
            self.model,
        )

    @property
    def trigger(self) -> int:
        """The effective trigger (tokens)."""
        if self.trigger_tokens is not None:
            return self.trigger_tokens
        return int(self.context_window_tokens * DEFAULT_TRIGGER_FRAC)

    def cassette_path(self) -> Path:
        return shipped_cassette(self.kind) if self.cassette == SHIPPED else Path(self.cassette)

    def start(self, env: CompactionEnv | None = None) -> PolicyRun:
        raise NotImplementedError


class ServerCompactionRun(ContinuedRun):
    """The run of a provider-side compaction policy: below the trigger nothing happens (an
    earlier compaction's view is carried forward); at or above it (or on ``/compact``) one
    request, answered from the cassette, gives the new view. Subclasses build the request
    (:meth:`request`), send it (:meth:`send`, recording only) and read the reply (:meth:`read`)."""

    label: ClassVar[str] = ""

    def __init__(self, policy: ServerCompactionPolicy, env: CompactionEnv) -> None:
        super().__init__(policy, env)
        self.policy: ServerCompactionPolicy = policy
        self.cassette = Cassette(policy.cassette_path())
        if not policy.record and len(self.cassette) == 0:
            raise ConfigError(f"cassette {self.cassette.path} has no recorded reply (record one with record=true)")

    # -- the provider-specific parts ----------------------------------------------------------
    def request(self, view: Sequence[Message]) -> dict[str, Any]:
        """The request body the client sends to compact ``view``."""
        raise NotImplementedError

    def send(self, body: dict[str, Any]) -> dict[str, Any]:
        """Send ``body`` through the provider's SDK; the reply as JSON with the key redacted."""
        raise NotImplementedError

    def read(self, response: Mapping[str, Any], view: Sequence[Message]) -> CompactionStep:
        """What the provider's ``response`` to the request for ``view`` did."""
        raise NotImplementedError

    # -- the shared run -------------------------------------------------------------------------
    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The recorded reply to ``body``; a miss records it (``record=True``) or is one error
        naming the cassette and the request."""
        key = request_hash(body)
        found = self.cassette.get(key)
        if found is not None:
            return found
        p = self.policy
        if not p.record:
            n = len(body.get("messages") or body.get("input") or [])
            raise ConfigError(
                f"cassette {self.cassette.path}: no recorded reply for the {p.kind} request {key[:16]} "
                f"(model {p.model}, {n} messages, trigger {p.trigger} tokens); this task or window is not covered: "
                f"record it with record=true and cassette=FILE against the API or a compatible server"
            )
        response = self.send(body)
        self.cassette.put(key, response)
        return response

    def _decide(self, base: list[Message], *, base_tokens: int | None, force: bool) -> PeerDecision:
        tokens = base_tokens if base_tokens is not None else estimate_tokens(base)
        if not force and tokens < self.policy.trigger:
            return PeerDecision(base, base, tokens_after=tokens)  # below the trigger: nothing compacted
        step = self.read(self.reply(self.request(base)), base)
        if step.view is None:  # the provider counted fewer tokens than the trigger: nothing compacted
            return PeerDecision(base, base, tokens_after=tokens)
        info = price_of(self.policy.model)
        n_in = step.uncached_input_tokens + step.cache_write_input_tokens + step.cache_read_input_tokens
        cost = call_cost_usd(
            info,
            uncached=step.uncached_input_tokens,
            write_5m=step.cache_write_input_tokens,
            read=step.cache_read_input_tokens,
            output=step.output_tokens,
        )
        call = SummaryCall(
            len(self.calls) + 1,
            "provider",
            None,
            "response",
            input_tokens=n_in,
            output_tokens=step.output_tokens,
            cost_usd=float(cost or 0.0),
        )
        self.calls.append(call)
        return PeerDecision(
            base,
            step.view,
            Tier.FULL,
            extra={EXTRA_SUMMARY_CALLS: [call]},
            fields={"summary_text": step.text, "summarized": step.summarized},
        )
