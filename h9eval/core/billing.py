"""Cost as providers bill it: prompt caching, call by call.

A provider bills the input of a request in classes: tokens read from its prompt cache, tokens
written to it (Anthropic: by lifetime, 5 minutes or 1 hour) and the rest, uncached; then the
output. Which class a token falls in depends on the prefix the request shares with the cached
prefixes still alive — the earlier requests' breakpoints, their lifetime against the time
between calls — and on the provider's rules. A compaction rewrites the prefix, so the call
after it writes again what the calls before it read: that is the invalidation a compaction
costs. See ``docs/billing.md`` for the model, its assumptions and its measured agreement.

The model, per request (a sequence of *segments*: an optional harness prefix — tool schemas
and system prompt the transcript lacks — then one segment per message):

* **anthropic** (explicit breakpoints, placed by a :class:`CachePlacement`): each breakpoint
  looks back up to ``lookback_blocks`` content blocks for the longest prefix an earlier request
  wrote (same model, alive); the longest hit over all breakpoints is read (and every hit's
  lifetime is refreshed); the tokens from there to the last breakpoint are written, each span at
  its breakpoint's lifetime; the rest is uncached. A prefix shorter than the model's
  ``min_cacheable_tokens`` is never cached.
* **openai** / **google** (automatic prefix caching): the longest prefix shared with an alive
  earlier request of the same model, of at least ``min_cacheable_tokens``, is read, rounded
  down to 128-token steps past the minimum; nothing is billed as a write.
* **other**: no cache.

Everything here is pure: :class:`PromptCache` is the state of one session's cache, fed requests
in time order; :func:`bill_requests` bills a whole sequence.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.core.history import common_prefix_len
from h9eval.core.messages import Message
from h9eval.core.prices import ModelInfo, model_entry, models_with

__all__ = [
    "BILLING_KEYS",
    "DEFAULT_BILLING_MODEL",
    "PLACEMENTS",
    "TTL_SECONDS",
    "BillingConfig",
    "SessionBiller",
    "SessionBills",
    "bill_columns",
    "bill_totals",
    "billing_config_from_dict",
    "recorded_call_times",
    "CachePlacement",
    "CallBill",
    "CallTiming",
    "PromptCache",
    "Request",
    "Segment",
    "SummaryUsage",
    "bill_requests",
    "call_cost_usd",
    "message_segments",
    "placement",
]

TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}
"""Anthropic's cache lifetimes (refreshed at every read)."""

AUTOMATIC_TTL_S = 300.0
"""How long an automatic (OpenAI-style) prefix stays cached without use: 5 minutes, the low end
of OpenAI's "5 to 10 minutes of inactivity"."""

AUTOMATIC_STEP_TOKENS = 128
"""OpenAI caches prefixes in steps of 128 tokens past the minimum."""

_MAX_BREAKPOINTS = 4  # Anthropic's limit per request


@dataclass(frozen=True, kw_only=True)
class CachePlacement:
    """Where a harness puts Anthropic cache breakpoints (``cache_control``) in a request.

    The default, ``claude_code``, is how Claude Code places them: one after the tool schemas and
    the system prompt, and one on the last message of every request (a rolling breakpoint), all
    of the same lifetime."""

    name: str = "claude_code"
    system: bool = True
    """A breakpoint after the harness prefix and the leading system messages."""
    last_messages: int = 1
    """Breakpoints on the last N messages (Claude Code: 1; some harnesses mark the last 2)."""
    ttl: str = "5m"
    """Lifetime of every breakpoint: ``5m`` or ``1h``."""
    lookback_blocks: int = 20
    """How many content blocks before a breakpoint the provider looks for an earlier write."""

    def __post_init__(self) -> None:
        if self.ttl not in TTL_SECONDS:
            raise ConfigError(f"CachePlacement.ttl must be one of {', '.join(TTL_SECONDS)}, got {self.ttl!r}")
        if self.last_messages < 0 or self.last_messages + int(self.system) > _MAX_BREAKPOINTS:
            raise ConfigError(
                f"CachePlacement.last_messages ({self.last_messages}) must be >= 0 and leave at most "
                f"{_MAX_BREAKPOINTS} breakpoints with the system one"
            )
        if self.lookback_blocks < 1:
            raise ConfigError(f"CachePlacement.lookback_blocks must be >= 1, got {self.lookback_blocks}")


PLACEMENTS: dict[str, CachePlacement] = {
    "claude_code": CachePlacement(),
    "claude_code_1h": CachePlacement(name="claude_code_1h", ttl="1h"),
    "last_two": CachePlacement(name="last_two", last_messages=2),
    "system_only": CachePlacement(name="system_only", last_messages=0),
    "none": CachePlacement(name="none", system=False, last_messages=0),
}
"""Named placements: ``claude_code`` (default; ``claude_code_1h`` with 1-hour writes, as Claude
Code sends them on some plans), ``last_two`` (system + the last two messages), ``system_only``
and ``none`` (no breakpoint: nothing is cached — h9eval's summarizers send none)."""


def placement(name: str) -> CachePlacement:
    """A named placement; an unknown name gets a did-you-mean :class:`ConfigError`."""
    if name not in PLACEMENTS:
        raise ConfigError(did_you_mean(name, PLACEMENTS, what="cache placement"))
    return PLACEMENTS[name]


@dataclass(frozen=True)
class Segment:
    """A run of request content the cache sees as one unit: a key (equal keys = equal content),
    its tokens and its content blocks (Anthropic's lookback counts blocks)."""

    key: Hashable
    tokens: int
    blocks: int = 1
    system: bool = False
    """Part of the leading system prefix (tools and system prompt)."""


def message_segments(
    messages: Iterable[Message], *, prefix_tokens: int = 0, prefix_key: Hashable = "harness-prefix"
) -> list[Segment]:
    """One segment per message (tokens: harness9's bytes/4, as a float-free floor per message;
    blocks: a text block and one per tool call), after an optional harness prefix of
    ``prefix_tokens`` (tool schemas and a system prompt the transcript lacks)."""
    out: list[Segment] = []
    if prefix_tokens > 0:
        out.append(Segment(("prefix", prefix_key), prefix_tokens, 1, True))
    leading = True
    for m in messages:
        leading = leading and m.role == "system"
        out.append(Segment(m, m.nbytes // 4, max(1, int(bool(m.content)) + len(m.tool_calls)), leading))
    return out


@dataclass(frozen=True, kw_only=True)
class Request:
    """One model call to bill: its content as ``segments``, or as ``messages`` after a harness
    prefix of ``prefix_tokens`` (the same as :func:`message_segments` gives, built only for the
    messages the previous request did not already have)."""

    model: str
    at_s: float
    """When the request was sent (seconds; only differences matter)."""
    segments: Sequence[Segment] = ()
    messages: Sequence[Message] | None = None
    prefix_tokens: int = 0
    output_tokens: int = 0
    placement: CachePlacement = field(default_factory=CachePlacement)
    batched: bool = False
    """Sent through the provider's batch API (billed at :attr:`ModelInfo.batch_price_frac`)."""

    def keys(self) -> list[Hashable]:
        if self.messages is None:
            return [s.key for s in self.segments]
        head: list[Hashable] = [("prefix", "harness-prefix")] if self.prefix_tokens > 0 else []
        return [*head, *self.messages]

    def is_system(self, i: int) -> bool:
        """Whether the ``i``-th segment is system content (without building it)."""
        if self.messages is None:
            return self.segments[i].system
        if self.prefix_tokens > 0:
            if i == 0:
                return True
            i -= 1
        return self.messages[i].role == "system"

    def segment(self, i: int) -> Segment:
        """The ``i``-th segment (built on demand for a request given as messages)."""
        if self.messages is None:
            return self.segments[i]
        if self.prefix_tokens > 0:
            if i == 0:
                return Segment(("prefix", "harness-prefix"), self.prefix_tokens, 1, True)
            i -= 1
        m = self.messages[i]
        return Segment(m, m.nbytes // 4, max(1, int(bool(m.content)) + len(m.tool_calls)), m.role == "system")


@dataclass(frozen=True, kw_only=True)
class CallBill:
    """What one call is billed: its input by class, its output, and the dollars."""

    model: str
    input_tokens: int
    """Every input token of the request (the sum of the three classes)."""
    uncached_input_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    cache_read_tokens: int
    output_tokens: int
    cost_usd: float | None
    """List-price dollars; ``None`` when the model is unpriced (never a silent 0)."""

    @property
    def cache_write_tokens(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def priced(self) -> bool:
        return self.cost_usd is not None


def call_cost_usd(
    info: ModelInfo | None,
    *,
    uncached: int,
    write_5m: int = 0,
    write_1h: int = 0,
    read: int = 0,
    output: int = 0,
    batched: bool = False,
) -> float | None:
    """List-price dollars of one call's billed classes; ``None`` when ``info`` is unpriced.
    ``batched``: sent through the provider's batch API, billed ``info.batch_price_frac`` of that."""
    if info is None or not info.priced:
        return None
    pin, pout = float(info.input_usd_per_mtok or 0.0), float(info.output_usd_per_mtok or 0.0)
    dollars = (
        uncached * pin
        + write_5m * pin * info.cache_write_5m_frac
        + write_1h * pin * info.cache_write_1h_frac
        + read * pin * info.cache_read_frac
        + output * pout
    )
    if batched:
        dollars *= info.batch_price_frac
    return dollars / 1e6


@dataclass(frozen=True, kw_only=True)
class CallTiming:
    """A stated model of the time between calls where none is recorded (synthetic tasks and
    worlds): the model thinks ``base_s`` plus ``s_per_output_token`` per token it writes, then
    each tool it called runs ``tool_s``. Defaults: 2 s + 20 ms/token + 5 s/tool (a fast agent:
    gaps of seconds, so a 5-minute cache expires only across a pause)."""

    base_s: float = 2.0
    s_per_output_token: float = 0.02
    tool_s: float = 5.0

    def __post_init__(self) -> None:
        for name in ("base_s", "s_per_output_token", "tool_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"CallTiming.{name} must be >= 0, got {getattr(self, name)}")

    def gap_s(self, previous_output: Message | None) -> float:
        """Seconds between the call that wrote ``previous_output`` and the next call."""
        if previous_output is None:
            return 0.0
        return (
            self.base_s
            + self.s_per_output_token * (previous_output.nbytes // 4)
            + self.tool_s * len(previous_output.tool_calls)
        )


@dataclass
class _Entry:
    tokens: int
    expires_at_s: float
    ttl_s: float


@dataclass
class _Prefix:
    """One request's segments with their prefix sums and chained keys (index j: the first j)."""

    keys: list[Hashable]
    chain: list[int]
    tokens: list[int]
    blocks: list[int]
    n_system: int
    at_s: float = 0.0
    model: str = ""
    shared: bool = False
    """Kept by the automatic cache as an earlier request: the next build must copy, not cut."""

    @classmethod
    def build(cls, request: Request, previous: _Prefix | None) -> _Prefix:
        """Prefix sums and chain of ``request``, reusing ``previous``'s over the keys they share
        (one C-speed comparison), so a growing session costs O(new segments) per call."""
        keys = request.keys()
        k = common_prefix_len(previous.keys, keys) if previous is not None else 0  # type: ignore[arg-type]
        if previous is not None and k and not previous.shared:
            # nothing else holds the previous request's sums: cut them back in place (no O(n) copy)
            chain, tokens, blocks = previous.chain, previous.tokens, previous.blocks
            del chain[k + 1 :], tokens[k + 1 :], blocks[k + 1 :]
            previous.keys = []
        elif previous is not None and k:
            chain, tokens, blocks = previous.chain[: k + 1], previous.tokens[: k + 1], previous.blocks[: k + 1]
        else:
            chain, tokens, blocks, k = [0], [0], [0], 0
        for i in range(k, len(keys)):
            seg = request.segment(i)
            chain.append(hash((chain[-1], seg.key)))
            tokens.append(tokens[-1] + seg.tokens)
            blocks.append(blocks[-1] + seg.blocks)
        n_system = 0
        while n_system < len(keys) and request.is_system(n_system):
            n_system += 1
        return cls(keys, chain, tokens, blocks, n_system)


class PromptCache:
    """The prompt cache of one session at a provider, fed requests in time order.

    ``models``: the model table (default :data:`h9eval.core.prices.MODELS`). A model without an
    entry is billed with no cache and no price (``cost_usd=None``)."""

    def __init__(self, *, models: Mapping[str, ModelInfo] | None = None) -> None:
        self.models = models
        self._entries: dict[tuple[str, int, int], _Entry] = {}
        self._previous: _Prefix | None = None
        self._recent: list[_Prefix] = []  # automatic caching: alive earlier requests, newest last
        self._last_at_s = float("-inf")

    def bill(self, request: Request) -> CallBill:
        """Bill ``request`` and update the cache (requests must come in time order)."""
        if request.at_s < self._last_at_s:
            raise ConfigError(f"requests must be billed in time order: {request.at_s} s after {self._last_at_s} s")
        self._last_at_s = request.at_s
        info = model_entry(request.model, self.models)
        pre = _Prefix.build(request, self._previous)
        pre.at_s, pre.model = request.at_s, request.model
        self._previous = pre
        total = pre.tokens[-1]
        provider = info.provider if info is not None else "other"
        if provider == "anthropic" and info is not None:
            read, w5, w1 = self._anthropic(request, pre, info)
        elif provider in ("openai", "google") and info is not None:
            read, w5, w1 = self._automatic(pre, info), 0, 0
        else:
            read, w5, w1 = 0, 0, 0
        uncached = total - read - w5 - w1
        cost = call_cost_usd(
            info,
            uncached=uncached,
            write_5m=w5,
            write_1h=w1,
            read=read,
            output=request.output_tokens,
            batched=request.batched,
        )
        return CallBill(
            model=request.model,
            input_tokens=total,
            uncached_input_tokens=uncached,
            cache_write_5m_tokens=w5,
            cache_write_1h_tokens=w1,
            cache_read_tokens=read,
            output_tokens=request.output_tokens,
            cost_usd=cost,
        )

    # -- anthropic ----------------------------------------------------------------------------
    def _breakpoints(self, pre: _Prefix, where: CachePlacement) -> list[int]:
        """Prefix lengths (in segments) that end at a breakpoint, ascending, at most 4."""
        n = len(pre.keys)
        points: set[int] = set()
        if where.system and pre.n_system:
            points.add(pre.n_system)
        for j in range(max(n - where.last_messages + 1, 1), n + 1):
            points.add(j)
        return sorted(points)[-_MAX_BREAKPOINTS:]

    def _anthropic(self, request: Request, pre: _Prefix, info: ModelInfo) -> tuple[int, int, int]:
        where, now, model = request.placement, request.at_s, request.model
        points = self._breakpoints(pre, where)
        hit = 0  # the longest prefix (segments) read
        for p in points:
            j = p
            while j >= 1 and pre.blocks[p] - pre.blocks[j] < where.lookback_blocks:
                entry = self._entries.get((model, j, pre.chain[j]))
                if entry is not None and entry.expires_at_s >= now:
                    entry.expires_at_s = now + entry.ttl_s  # a read refreshes the lifetime
                    hit = max(hit, j)
                    break
                j -= 1
        read = pre.tokens[hit] if hit else 0
        writes = {"5m": 0, "1h": 0}
        ttl_s = TTL_SECONDS[where.ttl]
        done = read
        for p in points:
            if p <= hit or pre.tokens[p] < info.min_cacheable_tokens:
                continue
            writes[where.ttl] += pre.tokens[p] - done
            done = pre.tokens[p]
            self._entries[(model, p, pre.chain[p])] = _Entry(pre.tokens[p], now + ttl_s, ttl_s)
        if len(self._entries) > 4096:  # drop the dead ones now and then
            self._entries = {k: e for k, e in self._entries.items() if e.expires_at_s >= now}
        return read, writes["5m"], writes["1h"]

    # -- automatic (OpenAI) -------------------------------------------------------------------
    def _automatic(self, pre: _Prefix, info: ModelInfo) -> int:
        now = pre.at_s
        pre.shared = True
        alive = [r for r in self._recent if r.at_s + AUTOMATIC_TTL_S >= now]
        best = 0
        for r in alive:
            if r.model == pre.model:
                best = max(best, pre.tokens[common_prefix_len(r.keys, pre.keys)])  # type: ignore[arg-type]
        self._recent = [*alive, pre][-8:]  # the newest request carries the refreshed prefix
        if best < info.min_cacheable_tokens:
            return 0
        return (
            info.min_cacheable_tokens
            + (best - info.min_cacheable_tokens) // AUTOMATIC_STEP_TOKENS * AUTOMATIC_STEP_TOKENS
        )


def bill_requests(requests: Iterable[Request], *, models: Mapping[str, ModelInfo] | None = None) -> list[CallBill]:
    """Bill a session's requests in order, from an empty cache."""
    cache = PromptCache(models=models)
    return [cache.bill(r) for r in requests]


DEFAULT_BILLING_MODEL = "claude-sonnet-4-6"
"""The agent model a run is billed as when the task records none (synthetic tasks, worlds)."""


@dataclass(frozen=True, kw_only=True)
class BillingConfig:
    """How a run's calls are billed (all optional; see ``docs/billing.md``)."""

    model: str | None = None
    """The agent's model; ``None``: each call's recorded model where the task records one, else
    :data:`DEFAULT_BILLING_MODEL`."""
    summarizer_model: str | None = None
    """The model the summarizer's calls are billed as; ``None``: the agent's model (the offline
    summarizer's token counts priced as that model would bill them)."""
    placement: str = "claude_code"
    """The agent's cache breakpoints: a name of :data:`PLACEMENTS`."""
    timing: CallTiming = field(default_factory=CallTiming)
    """Time between calls where the task records no timestamps."""
    prefix_tokens: int | None = None
    """Tokens the harness sends before the transcript (tool schemas, a system prompt the record
    lacks); ``None``: the task's tool schemas."""
    models: Mapping[str, Mapping[str, object]] | None = None
    """Overrides of :data:`h9eval.core.prices.MODELS` (model -> fields), e.g. from a spec."""

    def __post_init__(self) -> None:
        placement(self.placement)  # a did-you-mean for an unknown name, at construction
        if self.prefix_tokens is not None and self.prefix_tokens < 0:
            raise ConfigError(f"BillingConfig.prefix_tokens must be >= 0, got {self.prefix_tokens}")
        if self.models is not None:
            models_with(self.models, where="billing.models")

    def model_table(self) -> dict[str, ModelInfo]:
        return models_with(self.models, where="billing.models")


def recorded_call_times(recorded_calls: Sequence[Mapping[str, object]] | None) -> list[float] | None:
    """Seconds since the first call of each recorded call (ISO 8601 ``timestamp`` fields), or
    ``None`` when any is missing or unreadable (the timing model is used then)."""
    if not recorded_calls:
        return None
    out: list[float] = []
    for c in recorded_calls:
        ts = c.get("timestamp")
        if not isinstance(ts, str):
            return None
        try:
            out.append(datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp())
        except ValueError:
            return None
    return [t - out[0] for t in out]


class SummaryUsage(NamedTuple):
    """One summarizer call as :meth:`SessionBiller.call` bills it; a plain ``(input_tokens,
    output_tokens)`` pair is an unbatched call."""

    input_tokens: int
    output_tokens: int
    batched: bool = False
    """Sent through the provider's batch API (:attr:`Request.batched`)."""


@dataclass(frozen=True, kw_only=True)
class SessionBills:
    """One call's bills: the agent's request, the summarizer's requests, and the uncompacted
    transcript's request under the same billing."""

    agent: CallBill
    summarizer: tuple[CallBill, ...]
    raw: CallBill | None
    """``None`` where there is no uncompacted transcript to bill (the closed loop)."""
    at_s: float
    invalidation_usd: float | None
    """Dollars paid to cache again tokens that were not new since the previous call (Anthropic:
    written; automatic caching: sent uncached in a cacheable prompt), over reading them: what a
    rewritten prefix (a compaction, an expiry, a model switch) cost this call."""

    @property
    def cost_usd(self) -> float | None:
        parts = [self.agent.cost_usd, *(b.cost_usd for b in self.summarizer)]
        return None if any(p is None for p in parts) else float(sum(p for p in parts if p is not None))


class SessionBiller:
    """Bills a session's calls in order: the agent's views through one prompt cache, the
    uncompacted transcript through another, the summarizer's calls (no breakpoints, a prompt of
    their own) uncached. ``recorded_models`` / ``recorded_times_s``: per call, from the task."""

    def __init__(
        self,
        config: BillingConfig,
        *,
        prefix_tokens: int,
        recorded_models: Sequence[str | None] | None = None,
        recorded_times_s: Sequence[float] | None = None,
    ) -> None:
        self.config = config
        self.models = config.model_table()
        self.prefix_tokens = prefix_tokens
        self._where = placement(config.placement)
        self._recorded_models = recorded_models
        self._times = recorded_times_s
        self._agent = PromptCache(models=self.models)
        self._raw = PromptCache(models=self.models)
        self._summ = PromptCache(models=self.models)
        self._clock = 0.0
        self._n = 0
        self._summary_calls = 0
        self._cacheable_before = 0  # input tokens of the previous agent request, when it was cacheable

    def model_of(self, call_index: int) -> str:
        if self.config.model is not None:
            return self.config.model
        rec = self._recorded_models
        if rec is not None and call_index < len(rec) and rec[call_index]:
            return str(rec[call_index])
        return DEFAULT_BILLING_MODEL

    def _at(self, call_index: int, previous_output: Message | None) -> float:
        if self._times is not None and call_index < len(self._times):
            self._clock = max(self._clock, self._times[call_index])
        else:
            self._clock += self.config.timing.gap_s(previous_output) if call_index else 0.0
        return self._clock

    def call(
        self,
        call_index: int,
        *,
        view: Sequence[Message],
        raw_view: Sequence[Message] | None,
        output: Message,
        previous_output: Message | None,
        appended_tokens: int,
        summarizer_calls: Iterable[tuple[int, int] | SummaryUsage] = (),
    ) -> SessionBills:
        """Bill call ``call_index``: ``view`` sent, ``raw_view`` the uncompacted transcript,
        ``output`` the reply, ``appended_tokens`` the tokens that joined the history since the
        previous call, ``summarizer_calls`` the summaries made for this call (billed just before
        it): :class:`SummaryUsage` values or ``(input_tokens, output_tokens)`` pairs."""
        at = self._at(call_index, previous_output)
        model = self.model_of(call_index)
        out_tokens = output.nbytes // 4
        agent = self._agent.bill(
            Request(
                model=model,
                messages=view,
                prefix_tokens=self.prefix_tokens,
                at_s=at,
                output_tokens=out_tokens,
                placement=self._where,
            )
        )
        raw = (
            None
            if raw_view is None
            else self._raw.bill(
                Request(
                    model=model,
                    messages=raw_view,
                    prefix_tokens=self.prefix_tokens,
                    at_s=at,
                    output_tokens=out_tokens,
                    placement=self._where,
                )
            )
        )
        summ_model = self.config.summarizer_model or model
        summ: list[CallBill] = []
        for c in summarizer_calls:
            u = SummaryUsage(*c)
            self._summary_calls += 1
            summ.append(
                self._summ.bill(
                    Request(
                        model=summ_model,
                        segments=[Segment(("summary-request", self._summary_calls), u.input_tokens)],
                        at_s=at,
                        output_tokens=u.output_tokens,
                        placement=PLACEMENTS["none"],
                        batched=u.batched,
                    )
                )
            )
        info = model_entry(model, self.models)
        # what the call put into the cache again: Anthropic's writes; with automatic caching the
        # uncached part of a cacheable prompt. A prompt under the minimum never had a cache to lose.
        if info is None or info.provider == "other":
            again = 0
        elif info.provider == "anthropic":
            again = agent.cache_write_tokens
        else:
            again = agent.uncached_input_tokens if agent.input_tokens >= info.min_cacheable_tokens else 0
        # ... and only what the previous request could have left in the cache (a prompt that first
        # grows past the minimum writes its old part for the first time, not again)
        rewritten = min(max(0, again - appended_tokens), self._cacheable_before)
        self._cacheable_before = (
            agent.input_tokens if info is not None and agent.input_tokens >= info.min_cacheable_tokens else 0
        )
        lost = None
        if info is not None and info.priced:
            write_frac = info.cache_write_1h_frac if self._where.ttl == "1h" else info.cache_write_5m_frac
            frac = (
                max(write_frac, 1.0) - info.cache_read_frac
                if info.provider == "anthropic"
                else 1.0 - info.cache_read_frac
            )
            lost = rewritten * float(info.input_usd_per_mtok or 0.0) * frac / 1e6
        return SessionBills(agent=agent, summarizer=tuple(summ), raw=raw, at_s=at, invalidation_usd=lost)


BILLING_KEYS = ("model", "summarizer_model", "placement", "prefix_tokens", "timing", "models")
"""The keys of a spec's ``[billing]`` table (:class:`BillingConfig`'s fields)."""
TIMING_KEYS = ("base_s", "s_per_output_token", "tool_s")


def billing_config_from_dict(d: Mapping[str, object] | None, *, where: str = "billing") -> BillingConfig:
    """A :class:`BillingConfig` from a spec's ``[billing]`` table; errors name ``where.<key>``."""
    if not d:
        return BillingConfig()
    unknown = sorted(set(d) - set(BILLING_KEYS))
    if unknown:
        raise ConfigError(f"{where}: " + did_you_mean(unknown[0], BILLING_KEYS, what="billing key"))
    kwargs: dict[str, object] = {k: v for k, v in d.items() if k != "timing"}
    timing = d.get("timing")
    if timing is not None:
        if not isinstance(timing, Mapping) or set(timing) - set(TIMING_KEYS):
            bad = sorted(set(timing) - set(TIMING_KEYS)) if isinstance(timing, Mapping) else []
            raise ConfigError(
                f"{where}.timing: "
                + (
                    did_you_mean(bad[0], TIMING_KEYS, what="timing key")
                    if bad
                    else f"expected a table of {', '.join(TIMING_KEYS)}, got {timing!r}"
                )
            )
        try:
            kwargs["timing"] = CallTiming(**timing)  # type: ignore[arg-type]
        except (TypeError, ConfigError) as e:
            raise ConfigError(f"{where}.timing: {e}") from None
    for key in ("model", "summarizer_model", "placement"):
        if key in kwargs and not isinstance(kwargs[key], str):
            raise ConfigError(f"{where}.{key}: expected a string, got {kwargs[key]!r}")
    if "prefix_tokens" in kwargs and not (
        isinstance(kwargs["prefix_tokens"], int) and not isinstance(kwargs["prefix_tokens"], bool)
    ):
        raise ConfigError(f"{where}.prefix_tokens: expected an integer >= 0, got {kwargs['prefix_tokens']!r}")
    if "models" in kwargs and not isinstance(kwargs["models"], Mapping):
        raise ConfigError(f"{where}.models: expected a table of models, got {kwargs['models']!r}")
    try:
        return BillingConfig(**kwargs)  # type: ignore[arg-type]
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def _usd(v: float | None) -> float:
    return float("nan") if v is None else float(v)


def bill_columns(bills: SessionBills | None) -> dict[str, object]:
    """The calls table's billed columns (``billed_model`` .. ``priced``) of one call's bills, the
    one mapping both agent loops use (:data:`h9eval.results.schema.CALL_COLUMNS` owns the names)."""
    if bills is None:
        return {}
    a = bills.agent
    summ = [b.cost_usd for b in bills.summarizer]
    summ_usd = None if any(c is None for c in summ) else float(sum(c for c in summ if c is not None))
    return {
        "billed_model": a.model,
        "call_at_s": float(bills.at_s),
        "uncached_input_tokens": a.uncached_input_tokens,
        "cache_write_5m_tokens": a.cache_write_5m_tokens,
        "cache_write_1h_tokens": a.cache_write_1h_tokens,
        "cache_read_tokens": a.cache_read_tokens,
        "billed_output_tokens": a.output_tokens,
        "agent_cost_usd": _usd(a.cost_usd),
        "summarizer_bill_usd": _usd(summ_usd),
        "cost_usd": _usd(bills.cost_usd),
        "raw_cost_usd": _usd(bills.raw.cost_usd if bills.raw is not None else None),
        "invalidation_usd": _usd(bills.invalidation_usd),
        "priced": bills.cost_usd is not None,
    }


_BILLED_INPUT_COLUMNS = ("uncached_input_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens", "cache_read_tokens")


def bill_totals(calls: Any) -> dict[str, float | None]:
    """A run's (or an episode's) billed totals from its calls' billed columns (:func:`bill_columns`;
    a DataFrame or a mapping of column -> values): ``cost_usd``, ``raw_cost_usd``,
    ``invalidation_usd`` and ``summarizer_bill_usd`` summed, to the millionth of a dollar, and
    ``None`` (never 0) when a call's value is unknown (an unpriced model, no uncompacted
    transcript, no bills) or there is no call; ``cache_read_share``: cache reads over the agent's
    billed input (to 4 decimals; ``None`` without billed input)."""

    def dollars(col: str) -> float | None:
        vals = [float(v) for v in calls[col]] if col in calls else []
        return round(math.fsum(vals), 6) if vals and not any(math.isnan(v) for v in vals) else None

    have = all(c in calls for c in _BILLED_INPUT_COLUMNS)
    billed = sum(int(v) for c in _BILLED_INPUT_COLUMNS for v in calls[c]) if have else 0
    read = sum(int(v) for v in calls["cache_read_tokens"]) if have else 0
    return {
        "cost_usd": dollars("cost_usd"),
        "raw_cost_usd": dollars("raw_cost_usd"),
        "cache_read_share": round(read / billed, 4) if billed else None,
        "invalidation_usd": dollars("invalidation_usd"),
        "summarizer_bill_usd": dollars("summarizer_bill_usd"),
    }
