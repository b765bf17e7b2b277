"""harness9's five-tier ``ProgressiveCompactor`` (spec §3), plus h9eval's optional improvements.

Tiers are chosen on the ratio of the history's tokens to the context window: none below
``warn_frac`` (0.60), then warn (offload the head's large tool results), soft (summarise the
oldest half of the head), full (summarise the whole head) and emergency (forced truncation) at
0.70 / 0.80 / 0.95. The last ``min_tail_messages`` (6) messages are always kept verbatim.

Every improvement option is off by default, so the default is harness9's behaviour:
``extra_anchors`` (``constraint``, ``artifact``), ``na_safe_merge``, ``tail_budget_tokens``,
``tier_token_counter`` (``calibrated``, ``bpe``), ``anti_thrash_frac``,
``mask_observations_keep_turns`` and ``min_gain_horizon_calls`` (defer a summary that would not
repay the prompt cache it destroys). ``compat=True`` accepts harness9's silent values (zero
thresholds meaning "always emergency", a non-positive window meaning "never compact", a
non-positive tail meaning 6) and fixes the compaction-time offloader at 4,000 bytes whatever
``offload_threshold_bytes`` says, as harness9 does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from h9eval.compaction.anchors import (
    COMPACTION_MARKER,
    EXTRA_ANCHOR_TYPES,
    Anchor,
    anchor_types_for,
    format_anchors,
    merge_anchors,
    parse_anchors_and_summary,
)
from h9eval.compaction.base import Compaction, CompactionEnv, PolicyRun, WindowedPolicy, register
from h9eval.compaction.masking import MASK_PLACEHOLDER, IncrementalMasking
from h9eval.compaction.offload import (
    OFFLOAD_COMPACTION_THRESHOLD_BYTES,
    OFFLOAD_HOOK_THRESHOLD_BYTES,
    CompactionOffloader,
    OffloadError,
)
from h9eval.compaction.prompts import DEFAULT_PROMPTS, ConversationText, PromptSet, load_prompt_file
from h9eval.compaction.records import (
    EXTRA_MASKED,
    EXTRA_MIN_GAIN_DEFERRED,
    EXTRA_NA_OVERWRITES,
    EXTRA_NA_OVERWRITES_PREVENTED,
    EXTRA_OFFLOAD_PLACEHOLDERS,
    EXTRA_THRASH_AVOIDED,
    CompactionRecord,
    OffloadEntry,
    Tier,
)
from h9eval.compaction.repair import repair_tool_pairs
from h9eval.compaction.budget import (
    GreedyIndex,
    FORCED_TRUNCATION_RULES,
    budget_compact,
    budget_for_window,
    force_anchor_greedy_v3,
    force_legacy_last1,
)
from h9eval.core.billing import DEFAULT_BILLING_MODEL
from h9eval.core.messages import Message
from h9eval.core.prices import model_entry
from h9eval.compaction.summary import SummaryCall, request_summary, summary_request
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, TokenCounter, estimate_tokens
from h9eval.core.token_counters import make_counter

__all__ = ["ProgressiveCompactor", "ProgressiveRun", "TIER_COUNTERS"]

TIER_COUNTERS = ("harness9", "calibrated", "bpe")


@register
@dataclass(frozen=True, kw_only=True)
class ProgressiveCompactor(WindowedPolicy):
    """harness9's progressive compactor: five tiers by window usage, a verbatim tail, offload.

    The frozen fields are its configuration, each documented once, below (``h9eval policies``
    shows the first sentence as help)."""

    kind: ClassVar[str] = "progressive"
    source: ClassVar[str] = "harness9 ProgressiveCompactor (five tiers, verbatim tail, offload, anchors)"
    uses_summarizer: ClassVar[bool] = True

    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    """Model window in tokens; the tiers are fractions of it."""
    warn_frac: float = 0.60
    """Warn tier (offload large head tool results) from this fraction of the window (``>=``)."""
    soft_frac: float = 0.70
    """Soft tier (summarise the oldest half of the head) from this fraction of the window."""
    full_frac: float = 0.80
    """Full tier (summarise the whole head) from this fraction of the window."""
    emergency_frac: float = 0.95
    """Emergency tier (forced truncation) from this fraction of the window."""
    min_tail_messages: int = 6
    """Messages (not turns) kept verbatim at the end of the view."""
    offload_threshold_bytes: int = OFFLOAD_COMPACTION_THRESHOLD_BYTES
    """Compaction-time offload of head tool results of more bytes than this, in the warn, soft
    and full tiers."""
    offload_hook_threshold_bytes: int = OFFLOAD_HOOK_THRESHOLD_BYTES
    """Tool-time offload (the replay's OffloadHook) of tool outputs above this many bytes."""
    fallback_max_tokens: int | None = None
    """TokenBudget fallback budget in tokens (``None``: 80 % of the window, Go's ``window*80/100``)."""
    fallback_min_tail_messages: int | None = 6
    """The fallback's tail (harness9: 6, independent of ``min_tail_messages``; ``None`` follows
    ``min_tail_messages``)."""
    forced_truncation: str = "anchor_greedy_v3"
    """Emergency rule: ``anchor_greedy_v3`` (PR #121, reconstructed) or ``legacy_last1`` (the rule
    the conformance cases pin)."""
    summary_timeout_s: float = 60.0
    """A slower summary fails into the fallback (seconds)."""
    prompt_file: str | None = None
    """JSON file with system/first/incremental prompt templates (see :mod:`h9eval.compaction.prompts`)."""
    compat: bool = False
    """Accept harness9's silent values (conformance runner only): zero thresholds meaning "always
    emergency", a non-positive window meaning "never compact", a non-positive tail meaning 6, and
    the compaction-time offloader fixed at 4,000 bytes whatever ``offload_threshold_bytes`` says."""
    # -- h9eval improvements (all off by default) -------------------------------------------
    extra_anchors: tuple[str, ...] = ()
    """OPTION: add ``constraint`` and/or ``artifact`` anchor sections."""
    na_safe_merge: bool = False
    """OPTION: ``- N/A``, ``N/A.`` and empty sections never overwrite a known anchor."""
    tail_budget_tokens: int | None = None
    """OPTION: the tail is the newest messages within this many tokens (tool pairs kept), instead
    of a message count."""
    tier_token_counter: str = "harness9"
    """OPTION: decide tiers on ``calibrated`` or ``bpe`` counts instead of ``harness9`` (bytes/4)."""
    anti_thrash_frac: float | None = None
    """OPTION: after a compaction, no new one until the history grew by this share of the window."""
    mask_observations_keep_turns: int | None = None
    """OPTION: mask tool outputs older than this many assistant turns before any summary."""
    min_gain_horizon_calls: int | None = None
    """OPTION: defer a soft or full summary unless its expected saving over this many calls repays
    the prompt cache it destroys and the summarizer's call (docs/billing.md); emergency still runs."""
    min_gain_model: str = DEFAULT_BILLING_MODEL
    """The model whose prices and caching rules the minimum-gain rule weighs (with ``min_gain_horizon_calls``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_anchors", tuple(self.extra_anchors))
        c = self._check
        fr = (self.warn_frac, self.soft_frac, self.full_frac, self.emergency_frac)
        names = ("warn_frac", "soft_frac", "full_frac", "emergency_frac")
        if not self.compat:
            c(self.context_window_tokens > 0, "context_window_tokens", "must be > 0", self.context_window_tokens)
            c(0 < self.warn_frac, "warn_frac", "must be > 0", self.warn_frac)
            for (a, an), (b, bn) in zip(zip(fr, names), zip(fr[1:], names[1:])):
                c(a < b, an, f"must be < {bn} ({b})", a)
            c(self.emergency_frac <= 1, "emergency_frac", "must be <= 1", self.emergency_frac)
            c(self.min_tail_messages > 0, "min_tail_messages", "must be > 0", self.min_tail_messages)
            if self.fallback_max_tokens is not None:
                c(
                    self.fallback_max_tokens > 0,
                    "fallback_max_tokens",
                    "must be > 0 (harness9 would silently use 160000)",
                    self.fallback_max_tokens,
                )
            if self.fallback_min_tail_messages is not None:
                c(
                    self.fallback_min_tail_messages > 0,
                    "fallback_min_tail_messages",
                    "must be > 0",
                    self.fallback_min_tail_messages,
                )
            c(
                self.offload_threshold_bytes >= 0,
                "offload_threshold_bytes",
                "must be >= 0",
                self.offload_threshold_bytes,
            )
        c(
            self.forced_truncation in FORCED_TRUNCATION_RULES,
            "forced_truncation",
            f"must be one of {', '.join(FORCED_TRUNCATION_RULES)}",
            self.forced_truncation,
        )
        c(self.summary_timeout_s > 0, "summary_timeout_s", "must be > 0", self.summary_timeout_s)
        for extra in self.extra_anchors:
            c(
                extra in EXTRA_ANCHOR_TYPES,
                "extra_anchors",
                f"entries must be among {', '.join(EXTRA_ANCHOR_TYPES)}",
                extra,
            )
        if self.tail_budget_tokens is not None:
            c(self.tail_budget_tokens > 0, "tail_budget_tokens", "must be > 0", self.tail_budget_tokens)
        c(
            self.tier_token_counter in TIER_COUNTERS,
            "tier_token_counter",
            f"must be one of {', '.join(TIER_COUNTERS)}",
            self.tier_token_counter,
        )
        if self.anti_thrash_frac is not None:
            c(0 < self.anti_thrash_frac < 1, "anti_thrash_frac", "must be in (0, 1)", self.anti_thrash_frac)
        if self.mask_observations_keep_turns is not None:
            c(
                self.mask_observations_keep_turns >= 0,
                "mask_observations_keep_turns",
                "must be >= 0",
                self.mask_observations_keep_turns,
            )
        if self.min_gain_horizon_calls is not None:
            c(self.min_gain_horizon_calls >= 1, "min_gain_horizon_calls", "must be >= 1", self.min_gain_horizon_calls)
        info = model_entry(self.min_gain_model)
        c(
            info is not None and info.priced,
            "min_gain_model",
            "must be a priced model of h9eval.core.prices.MODELS",
            self.min_gain_model,
        )

    # -- derived ---------------------------------------------------------------------------
    @property
    def anchor_types(self) -> tuple[str, ...]:
        return anchor_types_for(self.extra_anchors)

    @property
    def effective_min_tail(self) -> int:
        return self.min_tail_messages if self.min_tail_messages > 0 else 6

    @property
    def resolved_fallback_max_tokens(self) -> int:
        """Fallback budget as harness9 uses it (non-positive → 160,000)."""
        mt = self.fallback_max_tokens
        if mt is None:
            mt = budget_for_window(self.context_window_tokens)
        return mt if mt > 0 else 160_000

    @property
    def resolved_fallback_min_tail(self) -> int:
        t = self.fallback_min_tail_messages
        if t is None:
            return self.effective_min_tail
        return t if t > 0 else 6

    def tier_for_ratio(self, ratio: float) -> Tier:
        if ratio >= self.emergency_frac:
            return Tier.EMERGENCY
        if ratio >= self.full_frac:
            return Tier.FULL
        if ratio >= self.soft_frac:
            return Tier.SOFT
        if ratio >= self.warn_frac:
            return Tier.WARN
        return Tier.NONE

    def tier_for_tokens(self, tokens: int) -> Tier:
        if self.context_window_tokens <= 0:
            return Tier.NONE
        return self.tier_for_ratio(tokens / self.context_window_tokens)

    def split(self, msgs: Sequence[Message]) -> tuple[list[Message] | None, list[Message]]:
        """harness9's head/tail split (spec §3.4); ``head`` is ``None`` when nothing is
        compressible. With ``tail_budget_tokens`` the tail is the newest messages within that
        budget, extended backwards so no tool result is separated from its call."""
        if not msgs or msgs[0].role != "system":
            return None, list(msgs)
        rest = list(msgs[1:])
        k = self._tail_len(rest) if self.tail_budget_tokens is not None else self.effective_min_tail
        if len(rest) <= k:
            return None, rest
        return rest[: len(rest) - k], rest[len(rest) - k :]

    def _tail_len(self, rest: list[Message]) -> int:
        budget_bytes = (self.tail_budget_tokens or 0) * 4
        used, start = 0, len(rest)
        while start > 0 and used + rest[start - 1].nbytes <= budget_bytes:
            used += rest[start - 1].nbytes
            start -= 1
        if start == len(rest) and rest:
            start -= 1  # always keep at least the newest message
        # never split a call from its results: move the boundary back over tool results
        while 0 < start < len(rest) and rest[start].tool_call_id:
            start -= 1
        return len(rest) - start

    def prompts(self) -> PromptSet:
        return load_prompt_file(self.prompt_file) if self.prompt_file else DEFAULT_PROMPTS

    def hook_threshold_bytes(self) -> int:
        """harness9 runs its tool-time offload hook at ``offload_hook_threshold_bytes``."""
        return self.offload_hook_threshold_bytes

    def start(self, env: CompactionEnv | None = None) -> ProgressiveRun:
        return ProgressiveRun(self, env or CompactionEnv())


@dataclass
class _Partial:
    """What a tier method returns before ``compact`` stamps the common fields."""

    result: list[Message]
    anchors: list[Anchor] | None = None
    offloaded: list[OffloadEntry] | None = None
    summarized: int = 0
    preserved_tail: int = 0
    summary_text: str = ""
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class ProgressiveRun(PolicyRun):
    """A progressive compactor bound to one session: keeps the incremental summary state
    (``last_summary``, ``last_anchors``; in memory only, as in harness9) and the offloader."""

    def __init__(self, policy: ProgressiveCompactor, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        self.types = policy.anchor_types
        self._prompts = policy.prompts()
        # successive view-mode heads start with the previous one: their text is extended, not rebuilt
        self._conversation = ConversationText()
        self.last_summary = ""
        self.last_anchors: list[Anchor] | None = None
        self.calls: list[SummaryCall] = []
        self.offloader: CompactionOffloader | None = None
        if env.offload_root is not None:
            self.offloader = CompactionOffloader(
                env.offload_root,
                env.session_id,
                threshold_bytes=OFFLOAD_COMPACTION_THRESHOLD_BYTES if policy.compat else policy.offload_threshold_bytes,
                harness9_paths=env.harness9_paths,
            )
        self._counter: TokenCounter | None = None
        if policy.tier_token_counter != "harness9":
            self._counter = make_counter(policy.tier_token_counter)
        # anti-thrash state: the last effective compaction's input and view
        self._last_input: list[Message] | None = None
        self._last_view: list[Message] | None = None
        self._last_tokens = 0
        self.thrash_avoided = 0
        self._placeholders: dict[str, str] = {}
        self._placeholder_msgs: dict[tuple[Any, ...], Message] = {}
        # kept between calls so that a call's Python work follows the messages it added: the
        # emergency walk skips blocks that cannot fit, the mask-first view masks only new results
        self._greedy = GreedyIndex()
        keep = policy.mask_observations_keep_turns
        self._masker = IncrementalMasking(keep, MASK_PLACEHOLDER) if keep is not None else None
        # none of the options that act below the warn tier (anti-thrash, masking, another tier
        # counter) is on: a call under the warn threshold returns its input with a record
        self._plain = policy.anti_thrash_frac is None and self._masker is None and self._counter is None
        # the previous call's history and its harness9 byte count (see _history_bytes)
        self._prev_view: tuple[Message, ...] = ()
        self._prev_bytes = 0

    # -- harness9 API ----------------------------------------------------------------------
    def set_last_summary(self, s: str) -> None:
        self.last_summary = s

    def set_last_anchors(self, anchors: list[Anchor] | None) -> None:
        self.last_anchors = anchors

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        """``CompactWithRecord`` (spec §3.2); the record is also appended to the store."""
        start_ns = self.env.clock.now_ns()
        view = tuple(history)
        tokens_before = tokens if tokens is not None else self._history_bytes(view) // 4
        if self._plain and self.policy.tier_for_tokens(tokens_before) == Tier.NONE:
            # most calls of a session: nothing to do, so only the record is made (one copy of
            # the history, the view, instead of a working list and a view)
            return Compaction(view, self._none_record(tokens_before, len(view), start_ns))
        msgs = list(view)
        extra: dict[str, Any] = {}
        self._placeholders = {}
        guarded = self._anti_thrash(msgs, tokens_before)
        if guarded is not None:
            tier, part = Tier.NONE, _Partial(guarded, extra={EXTRA_THRASH_AVOIDED: True})
        else:
            tier = self._tier(msgs, tokens_before)
            work = msgs
            if tier != Tier.NONE and self._masker is not None:
                masked, n, masked_bytes = self._masker.mask(msgs)
                work = list(masked)
                extra[EXTRA_MASKED] = n
                if n:
                    tier = self._tier(work, masked_bytes // 4)
            if tier == Tier.NONE:
                part = _Partial(work)
                if work is not msgs and extra.get(EXTRA_MASKED):
                    tier = Tier.WARN  # masking alone brought the history under the warn threshold
            elif tier in (Tier.SOFT, Tier.FULL) and not self._repays(work, tokens_before):
                tier, part = Tier.NONE, _Partial(work, extra={EXTRA_MIN_GAIN_DEFERRED: True})
            elif tier == Tier.WARN:
                part = self._warn(work)
            elif tier == Tier.SOFT:
                part = self._summarize_tier(work, soft=True)
            elif tier == Tier.FULL:
                part = self._summarize_tier(work, soft=False)
            else:
                part = self._emergency(work)
        part.extra.update(extra)
        if self._placeholders:
            part.extra[EXTRA_OFFLOAD_PLACEHOLDERS] = dict(self._placeholders)
        # Most calls leave the history untouched; re-estimating it would make a replay O(n^2).
        ta = tokens_before if part.result is msgs else estimate_tokens(part.result)
        rec = self._stamp(part, tier, tokens_before, len(msgs), start_ns, ta, len(part.result))
        if self.env.record_store is not None and tier != Tier.NONE:
            self.env.record_store.append(rec)
        if self.policy.anti_thrash_frac is not None and guarded is None and self._effective(rec):
            self._last_input, self._last_view, self._last_tokens = msgs, part.result, tokens_before
        return Compaction(view if part.result is msgs else tuple(part.result), rec)

    def _force(self, history: Sequence[Message]) -> Compaction:
        """harness9 ``ProgressiveCompactor.CompactForce``: the emergency path, no record."""
        return Compaction(tuple(self._emergency(list(history)).result), None)

    def _manual(self, history: Sequence[Message]) -> Compaction:
        """harness9's ``/compact`` prefers ``CompactWithRecord``: the tier follows usage."""
        return self._auto(history)

    # -- internals -------------------------------------------------------------------------
    def _tier(self, msgs: list[Message], harness9_tokens: int) -> Tier:
        t = harness9_tokens if self._counter is None else self._counter.count(msgs)
        return self.policy.tier_for_tokens(t)

    def _repays(self, msgs: list[Message], tokens: int) -> bool:
        """The minimum-gain rule (``min_gain_horizon_calls``): whether summarising now is expected
        to save more than it costs, in input-token prices of ``min_gain_model``.

        Without the summary each of the next N calls reads the history H from the cache (r H);
        with it the summarizer reads H uncached (H) and writes a summary S (o S, o the output /
        input price), the call writes the new view V = tail + S (w V) and the N - 1 calls after
        it read V (r V). S is taken as the previous summary's size, or 5 % of H for the first."""
        p = self.policy
        if p.min_gain_horizon_calls is None:
            return True
        info = model_entry(p.min_gain_model)
        assert info is not None and info.input_usd_per_mtok  # checked at construction
        r, w = info.cache_read_frac, max(info.cache_write_5m_frac, 1.0)
        o = float(info.output_usd_per_mtok or 0.0) / float(info.input_usd_per_mtok)
        _, tail = p.split(msgs)
        summary = len(self.last_summary.encode()) // 4 if self.last_summary else tokens // 20
        view = estimate_tokens(tail) + summary
        n = p.min_gain_horizon_calls
        keep = n * r * tokens
        compact = tokens + o * summary + w * view + (n - 1) * r * view
        return compact < keep

    @staticmethod
    def _effective(rec: CompactionRecord) -> bool:
        return rec.tier != Tier.NONE and (
            rec.msgs_after < rec.msgs_before or rec.tokens_after < rec.tokens_before or bool(rec.offloaded)
        )

    def _anti_thrash(self, msgs: list[Message], tokens: int) -> list[Message] | None:
        """The view to send without compacting, or ``None`` to compact normally."""
        p = self.policy
        if p.anti_thrash_frac is None or self._last_view is None or self._last_input is None:
            return None
        li, lv = self._last_input, self._last_view
        if len(msgs) >= len(li) and msgs[len(li) - 1 : len(li)] == li[-1:] and msgs[: len(li)] == li:
            base = lv + msgs[len(li) :]  # view mode: history still holds the original prefix
        elif len(msgs) >= len(lv) and msgs[: len(lv)] == lv:
            base = msgs  # write-back mode: history already starts with the last view
        else:
            return None
        grown = tokens - self._last_tokens
        if grown >= p.anti_thrash_frac * p.context_window_tokens:
            return None
        # Reuse only a view that is still below the full tier: near the window the reused view
        # plus the tool schemas (which tiers do not count) could overflow.
        if self._tier(base, estimate_tokens(base)) >= Tier.FULL:
            return None
        self.thrash_avoided += 1
        return base

    def _history_bytes(self, view: tuple[Message, ...]) -> int:
        """harness9's byte count of ``view`` (``estimate_tokens`` times 4), summing only the
        messages after the previous call's history when ``view`` starts with it (a history
        passed again with a few messages appended). Equal messages have equal byte counts, so
        the equality test (by identity first, in C) is enough; fresh objects fall back to a sum."""
        prev = self._prev_view
        k = len(prev)
        if k and len(view) >= k and view[k - 1] is prev[-1] and view[0] is prev[0] and view[:k] == prev:
            n = self._prev_bytes + sum(m.nbytes for m in view[k:])
        else:
            n = sum(m.nbytes for m in view)
        self._prev_view, self._prev_bytes = view, n
        return n

    def _none_record(self, tokens: int, n_msgs: int, start_ns: int) -> CompactionRecord:
        """What :meth:`_stamp` makes of an untouched history at tier none, the other fields left
        at their defaults (the same record, without a ``_Partial`` to read them from)."""
        ts = self.env.clock.timestamp()
        return CompactionRecord(
            id=self.env.new_id(),
            session_id=self.env.session_id,
            timestamp=ts,
            tokens_before=tokens,
            tokens_after=tokens,
            msgs_before=n_msgs,
            msgs_after=n_msgs,
            compression_ratio=1.0 if tokens > 0 else 0.0,
            duration_ns=self.env.clock.now_ns() - start_ns,
        )

    def _stamp(
        self,
        part: _Partial,
        tier: Tier,
        tokens_before: int,
        msgs_before: int,
        start_ns: int,
        tokens_after: int,
        msgs_after: int,
    ) -> CompactionRecord:
        ta = tokens_after
        ts = self.env.clock.timestamp()
        return CompactionRecord(
            id=self.env.new_id(),
            session_id=self.env.session_id,
            timestamp=ts,
            tier=tier,
            tokens_before=tokens_before,
            tokens_after=ta,
            msgs_before=msgs_before,
            msgs_after=msgs_after,
            anchors=part.anchors,
            offloaded=part.offloaded,
            summarized=part.summarized,
            preserved_tail=part.preserved_tail,
            summary_text=part.summary_text,
            compression_ratio=ta / tokens_before if tokens_before > 0 else 0.0,
            duration_ns=self.env.clock.now_ns() - start_ns,
            error=part.error,
            extra=part.extra,
        )

    def _offload_head(self, head: list[Message]) -> tuple[list[Message], list[OffloadEntry] | None]:
        if self.offloader is None:
            return head, None
        out, entries = [], []
        threshold = self.policy.offload_threshold_bytes
        for m in head:
            if m.tool_call_id != "" and m.content_nbytes > threshold:
                try:
                    oc = self.offloader.offload_tool_result(m)
                except OffloadError:
                    out.append(m)
                    continue
                out.append(self._placeholder_message(m, oc.placeholder))
                entries.append(oc.entry)
                # harness9 V1 wrote these placeholders into the caller's history in place (the
                # issue-#117 alias bug); the replay can emulate that from this map.
                self._placeholders[m.tool_call_id] = oc.placeholder
            else:
                out.append(m)
        return out, entries or None

    def _placeholder_message(self, m: Message, placeholder: str) -> Message:
        """``m`` with ``placeholder`` as its content, built once per message: the same head
        result is offloaded again at every later warn/soft/full call."""
        if m.meta is not None:
            return m.with_content(placeholder)  # meta is not part of equality: never shared
        key = (m.role, m.tool_call_id, m.is_error, m.tool_calls, m.content)
        pm = self._placeholder_msgs.get(key)
        if pm is None or pm.content != placeholder:
            pm = m.with_content(placeholder)
            self._placeholder_msgs[key] = pm
        return pm

    def _warn(self, msgs: list[Message]) -> _Partial:
        head, tail = self.policy.split(msgs)
        if head is None:
            return _Partial(msgs)
        head2, off = self._offload_head(head)
        return _Partial(repair_tool_pairs([msgs[0], *head2, *tail]), offloaded=off, preserved_tail=len(tail))

    def _summarize_tier(self, msgs: list[Message], *, soft: bool) -> _Partial:
        head, tail = self.policy.split(msgs)
        if head is None:
            return _Partial(msgs)
        if soft:
            mid = len(head) // 2
            summarized, kept = head[:mid], head[mid:]
        else:
            summarized, kept = head, []
        summarized2, off = self._offload_head(summarized)
        extra: dict[str, Any] = {}
        ok = self._summarize(summarized2, extra)
        if ok is None:
            reason = "LLM summary failed in TierSoft" if soft else "LLM summary failed in TierFull"
            part = self._fallback(msgs, reason)
            part.extra.update(extra)
            return part
        summary, anchors = ok
        result = repair_tool_pairs([msgs[0], self._compaction_message(anchors, summary, off or []), *kept, *tail])
        self.last_summary, self.last_anchors = summary, anchors
        return _Partial(
            result,
            anchors=anchors,
            offloaded=off,
            summarized=len(summarized),
            preserved_tail=len(tail) + len(kept),
            summary_text=summary,
            extra=extra,
        )

    def _compaction_message(self, anchors: list[Anchor], summary: str, off: list[OffloadEntry]) -> Message:
        s = COMPACTION_MARKER + "\n## Anchors\n\n" + format_anchors(anchors, self.types) + "\n\n## Summary\n" + summary
        if off:
            s += "\n\n## Offloaded References\n" + "".join(
                f"- {e.file_path} ({e.lines}行) - offloaded tool result\n" for e in off
            )
        return Message("user", s)

    def _summarize(self, head: list[Message], extra: dict[str, Any]) -> tuple[str, list[Anchor]] | None:
        """``summarizeAndExtract`` (spec §3.10); ``None`` on any failure."""
        if self.env.summarizer is None:
            return None  # harness9 fails a nil provider before building a request: nothing is sent or logged
        # the conversation and the prompt are built only if the summarizer reads them
        req = summary_request(
            self._prompts,
            head,
            None,
            self.last_summary,
            self.last_anchors,
            self.types,
            self.policy.summary_timeout_s,
            serialize=self._conversation.parts,
        )
        text = request_summary(self.env.summarizer, self.calls, extra, req)
        if text is None:
            return None
        anchors, summary = parse_anchors_and_summary(text, self.types)
        if self.last_anchors is not None:
            overwrites: list[str] = []
            anchors = merge_anchors(
                self.last_anchors, anchors, self.types, na_safe=self.policy.na_safe_merge, overwrites=overwrites
            )
            extra[EXTRA_NA_OVERWRITES if not self.policy.na_safe_merge else EXTRA_NA_OVERWRITES_PREVENTED] = overwrites
        return summary, anchors

    def _fallback(self, msgs: list[Message], reason: str) -> _Partial:
        p = self.policy
        result = budget_compact(msgs, p.resolved_fallback_max_tokens, p.resolved_fallback_min_tail)
        return _Partial(result, preserved_tail=len(result) - 1, error=reason)

    def _emergency(self, msgs: list[Message]) -> _Partial:
        p = self.policy
        if p.forced_truncation == "legacy_last1":
            result = force_legacy_last1(msgs)
        else:
            result = force_anchor_greedy_v3(msgs, p.resolved_fallback_max_tokens, index=self._greedy)
        return _Partial(result, preserved_tail=len(result) - 1, error="emergency fallback: forced truncation")
