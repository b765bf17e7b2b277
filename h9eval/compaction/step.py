"""The one step before a model call: a session's history in, the request of that call out.

Both agent loops run it: the open-loop replay (:mod:`h9eval.runs.replay`, a recorded transcript)
and the closed-loop episode (:mod:`h9eval.closedloop.episode`, a world and an agent). Each keeps
only its own side (the transcript walk and its files; the world, its ledger and its checks).

A :class:`CallStep` holds one session's history. A message joins it through
:meth:`CallStep.arrive` (a tool result passes harness9's tool-time ``OffloadHook`` first, spec
§7.1). Before every model call :meth:`CallStep.before_call` runs, in harness9's order:

1. a manual ``/compact`` when asked (it rewrites the history whatever the mode, spec §2.4);
2. the policy's automatic compaction of the history;
3. in ``write_back`` mode, harness9's write-back (spec §2.3, :func:`writes_back`);
4. forced compactions (``compact(force=True)``) while the view plus the tool schemas exceed the
   window, up to :attr:`StepRules.overflow_retries` (each replaces the history in
   ``write_back`` mode);

and returns a :class:`CallRequest`: the view to send and the call's :class:`CallStats`.

The run's window has one rule for every entry point, :func:`run_window`: the run's window
replaces the policy's default, an explicitly set other value is an error naming both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from h9eval.compaction.base import Compaction, CompactionEnv, Compactor, Policy
from h9eval.compaction.offload import OffloadHook, ToolOutput
from h9eval.compaction.records import (
    EXTRA_MASKED,
    EXTRA_NA_OVERWRITES,
    EXTRA_NA_OVERWRITES_PREVENTED,
    EXTRA_SUMMARY_CALLS,
    EXTRA_THRASH_AVOIDED,
    CompactionRecord,
    Tier,
)
from h9eval.compaction.summary import SummaryCall
from h9eval.core.errors import ConfigError
from h9eval.core.history import common_prefix_len
from h9eval.core.messages import Message, ToolCall
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS, estimate_tokens

__all__ = [
    "HISTORY_MODES",
    "WRITEBACK_RULES",
    "CallRequest",
    "CallStats",
    "CallStep",
    "RunWindow",
    "StepRules",
    "run_window",
    "tool_time_hook",
    "writes_back",
]

HISTORY_MODES = ("view", "write_back")
"""``view`` (harness9 V1: the view is only that call's input) or ``write_back`` (PR #121)."""
WRITEBACK_RULES = ("v2", "v3")
"""harness9's write-back rules: ``v3`` (newest) or ``v2`` (no write-back of emergency results,
no token-only effectiveness)."""


# -- the run's window ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RunWindow:
    """A policy at the run's window, and that window (what ratios and overflows are measured against)."""

    policy: Policy
    window_tokens: int


def run_window(policy: Policy, window: int | None = None, *, explicit: bool | None = None) -> RunWindow:
    """The one window rule of a run (``run_task``, ``run_world``, a sweep cell, the tuner, the CLI).

    ``window``: the run's window in tokens, or ``None`` (the policy's own, else
    :data:`~h9eval.core.tokens.DEFAULT_CONTEXT_WINDOW_TOKENS`). A policy without a window runs as
    it is, measured against ``window``. A policy whose window is the run's, or left at its
    default, runs at ``window`` (a copy). One whose window was set to another value is a
    :class:`ConfigError` naming both; ``explicit`` says whether it was set (a caller that built
    the policy from parameters knows: ``"context_window_tokens" in params``); ``None``: set when
    it differs from the policy class's default.
    """
    own = policy.window_tokens()
    if window is None:
        return RunWindow(policy=policy, window_tokens=own if own is not None else DEFAULT_CONTEXT_WINDOW_TOKENS)
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ConfigError(f"window must be a positive number of tokens, got {window!r}")
    if own is None or own == window:
        return RunWindow(policy=policy, window_tokens=window)
    if explicit is None:
        explicit = own != type(policy).default_window_tokens()
    if explicit:
        raise ConfigError(
            f"window {window} conflicts with {policy.kind}'s context_window_tokens {own}: "
            "a run has one window; set one of them (or both to the same value)"
        )
    return RunWindow(policy=policy.at_window(window), window_tokens=window)


# -- the rules of the step ----------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class StepRules:
    """How the step treats the history (each loop builds it from its own configuration)."""

    history_mode: str = "view"
    """:data:`HISTORY_MODES`: whether an effective compaction replaces the history."""
    writeback_rules: str = "v3"
    """:data:`WRITEBACK_RULES`: which of harness9's write-back predicates applies."""
    overflow_retries: int = 0
    """Forced compactions tried while the view plus the tool schemas exceed the window (0: none,
    as harness9's engine; the closed loop tries some before it calls the episode a loop)."""
    tool_time_offload: bool | None = None
    """The tool-time offload hook: ``None`` on for a policy that declares a hook threshold
    (:meth:`~h9eval.compaction.base.Policy.hook_threshold_bytes`), else as given."""

    def __post_init__(self) -> None:
        if self.history_mode not in HISTORY_MODES:
            modes = ", ".join(HISTORY_MODES)
            raise ConfigError(f"StepRules.history_mode must be one of {modes}, got {self.history_mode!r}")
        if self.writeback_rules not in WRITEBACK_RULES:
            raise ConfigError(f"StepRules.writeback_rules must be v2 or v3, got {self.writeback_rules!r}")
        retries = self.overflow_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"StepRules.overflow_retries must be an integer >= 0, got {self.overflow_retries!r}")


def writes_back(rec: CompactionRecord | None, view: Sequence[Message], rules: str) -> bool:
    """harness9's write-back predicate (spec §2.3): whether a compaction's result replaces the
    history. ``v3``: an error-free or emergency record that dropped messages, saved tokens or
    offloaded results; ``v2``: an error-free record that dropped messages or offloaded results."""
    if rec is None or not view:
        return False
    if rules == "v2":
        return rec.error == "" and (rec.msgs_after < rec.msgs_before or bool(rec.offloaded))
    if rec.error != "" and rec.tier != Tier.EMERGENCY:
        return False
    return rec.msgs_after < rec.msgs_before or rec.tokens_after < rec.tokens_before or bool(rec.offloaded)


def tool_time_hook(policy: Policy, rules: StepRules, env: CompactionEnv) -> OffloadHook | None:
    """harness9's tool-time offload hook for a run: at the policy's threshold when it declares
    one, at the hook's own default (harness9's 10,000 bytes) when the rules ask for a hook the
    policy does not declare, else none."""
    threshold = policy.hook_threshold_bytes()
    on = rules.tool_time_offload if rules.tool_time_offload is not None else threshold is not None
    if not on:
        return None
    if env.offload_root is None:
        raise ConfigError("the tool-time offload hook needs an offload folder (CompactionEnv.offload_root)")
    if threshold is not None:
        return OffloadHook(env.offload_root, env.session_id, threshold_bytes=threshold)
    return OffloadHook(env.offload_root, env.session_id)


# -- one call -----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CallStats:
    """What one model call saw and did; each field is a ``calls`` column
    (:data:`~h9eval.results.schema.CALL_COLUMNS`)."""

    history_tokens: int
    """harness9's estimate of the history the automatic compaction saw."""
    history_messages: int
    view_tokens: int
    """harness9's estimate of the view sent (without the tool schemas)."""
    tokens_sent: int
    """``view_tokens`` plus the tool schemas' tokens."""
    tier: int
    """The highest tier of the call's automatic and forced compactions (a manual ``/compact``
    shows in ``manual_compact``)."""
    tier_name: str
    compacted: bool
    """Some compaction of the call changed what is sent
    (:attr:`~h9eval.compaction.base.Compaction.changed_what_is_sent`; a forced compaction
    without a record counts when its view differs from the history)."""
    msgs_before: int
    """Messages the automatic compaction's record says it took in (``history_messages`` without one)."""
    msgs_after: int
    """Messages of the view sent."""
    offloads_tool_time_count: int
    """Tool results the tool-time hook offloaded since the previous call."""
    offloads_tool_time_bytes: int
    offloads_compaction_count: int
    offloads_compaction_bytes: int
    summarizer_calls: int
    summarizer_input_tokens: int
    summarizer_output_tokens: int
    summarizer_latency_s: float
    summarizer_cache_hits: int
    summarizer_cost_usd: float
    summarizer_batched_calls: int
    """Of ``summarizer_calls``, those sent through a provider's batch API (:attr:`SummaryCall.batched`)."""
    fallback: bool
    """A summary failed and the policy fell back (its record says ``LLM summary failed``)."""
    fallback_error: str
    fallback_cause: str
    """Why the failed summaries failed (the summarizer's own messages, distinct, ``; ``-joined):
    harness9's ``fallback_error`` names only the tier, which cannot tell a bad key from an outage."""
    forced_truncation: bool
    """Some compaction of the call was an emergency truncation."""
    written_back: bool
    """The history (and a session store) was replaced at this call."""
    manual_compact: bool
    thrash_avoided: bool
    masked_results: int
    na_overwrites: int
    na_overwrites_prevented: int
    summarizer_breaker_skips: int = 0
    """Summaries not requested because the summarizer's circuit breaker was open (each fell back)."""


@dataclass(frozen=True, kw_only=True)
class CallRequest:
    """What :meth:`CallStep.before_call` hands the model call."""

    view: tuple[Message, ...]
    """The messages to send."""
    compactions: tuple[Compaction, ...]
    """The call's compactions in order: a manual ``/compact`` (when asked), the automatic one,
    then the forced ones."""
    stats: CallStats
    forced_compactions: int = 0
    """Forced compactions run because the view exceeded the window (:attr:`StepRules.overflow_retries`)."""


def _summary_calls(rec: CompactionRecord) -> list[SummaryCall]:
    calls: list[SummaryCall] = rec.extra.get(EXTRA_SUMMARY_CALLS, [])
    return calls


def _stats(
    comps: Sequence[Compaction],
    *,
    auto: int,
    before: Sequence[Message],
    history_tokens: int,
    view_tokens: int,
    tokens_sent: int,
    hook: tuple[int, int],
    written: bool,
    manual: bool,
) -> CallStats:
    """The statistics of a call whose compactions are ``comps`` (``comps[auto]`` the automatic one)."""
    main = comps[auto]
    rec = main.record
    recs = [c.record for c in comps if c.record is not None]
    summ = [sc for r in recs for sc in _summary_calls(r)]
    off = [o for r in recs for o in (r.offloaded or [])]
    fallback_err = next((r.error for r in recs if r.error.startswith("LLM summary failed")), "")
    forced = comps[auto + 1 :]
    compacted = any(c.changed_what_is_sent for c in comps) or any(
        c.record is None and list(c.view) != list(before) for c in forced
    )
    tier = max((c.tier for c in comps[auto:]), default=Tier.NONE)
    causes = [sc.error for sc in summ if sc.outcome != "response" and sc.error]
    return CallStats(
        history_tokens=history_tokens,
        history_messages=len(before),
        view_tokens=view_tokens,
        tokens_sent=tokens_sent,
        tier=int(tier),
        tier_name=tier.label,
        compacted=compacted,
        msgs_before=rec.msgs_before if rec is not None else len(before),
        msgs_after=len(comps[-1].view),
        offloads_tool_time_count=hook[0],
        offloads_tool_time_bytes=hook[1],
        offloads_compaction_count=len(off),
        offloads_compaction_bytes=sum(o.bytes for o in off),
        summarizer_calls=len(summ),
        summarizer_input_tokens=sum(s.input_tokens for s in summ),
        summarizer_output_tokens=sum(s.output_tokens for s in summ),
        summarizer_latency_s=float(sum(s.latency_s for s in summ)),
        summarizer_cache_hits=sum(1 for s in summ if s.cache_hit),
        summarizer_cost_usd=float(sum(s.cost_usd for s in summ)),
        summarizer_batched_calls=sum(1 for s in summ if s.batched),
        fallback=bool(fallback_err),
        fallback_error=fallback_err,
        fallback_cause="; ".join(dict.fromkeys(causes)) if fallback_err else "",
        forced_truncation=any(r.tier == Tier.EMERGENCY for r in recs),
        written_back=written,
        manual_compact=manual,
        thrash_avoided=bool(rec is not None and rec.extra.get(EXTRA_THRASH_AVOIDED)),
        masked_results=int(rec.extra.get(EXTRA_MASKED, 0)) if rec is not None else 0,
        na_overwrites=len(rec.extra.get(EXTRA_NA_OVERWRITES, [])) if rec is not None else 0,
        na_overwrites_prevented=len(rec.extra.get(EXTRA_NA_OVERWRITES_PREVENTED, [])) if rec is not None else 0,
        summarizer_breaker_skips=sum(1 for s in summ if s.outcome == "breaker_open"),
    )


class CallStep:
    """One session's history and the step before each of its model calls (module docstring).

    ``compactor``: the policy's running compactor; ``rules``: :class:`StepRules`;
    ``window_tokens``: the run's window (:func:`run_window`); ``tool_schema_tokens``: what the
    tool schemas add to every request; ``hook``: the tool-time offload hook
    (:func:`tool_time_hook`) or ``None``; ``history``: the session's first messages.

    Token totals are running byte sums, so a call costs O(1) beyond what the policy does.
    """

    def __init__(
        self,
        compactor: Compactor,
        rules: StepRules,
        *,
        window_tokens: int,
        tool_schema_tokens: int,
        hook: OffloadHook | None,
        history: Sequence[Message] = (),
    ) -> None:
        self.compactor = compactor
        self.rules = rules
        self.window_tokens = window_tokens
        self.tool_schema_tokens = tool_schema_tokens
        self.hook = hook
        self.history: list[Message] = list(history)
        """The session's history (the step's own list: read it, change it through the methods)."""
        self.history_bytes = sum(m.nbytes for m in self.history)
        self._calls_by_id: dict[str, ToolCall] = {}
        self._hook_count = self._hook_bytes = 0  # tool-time offloads since the last call

    # -- the history ----------------------------------------------------------------------------
    def arrive(self, m: Message) -> bool:
        """``m`` joins the history; a tool result passes the tool-time hook first (with the call
        it answers, from an earlier assistant message). Returns whether the hook offloaded it."""
        offloaded = False
        if m.tool_call_id and self.hook is not None:
            hook = self.hook
            tc = self._calls_by_id.get(m.tool_call_id, ToolCall(m.tool_call_id, "", ""))
            n = len(hook.offloaded)
            res = hook.after_execute(tc, ToolOutput(m.tool_call_id, m.content, m.is_error))
            if len(hook.offloaded) > n:
                self._hook_count += 1
                self._hook_bytes += hook.offloaded[-1].bytes
                m = m.with_content(res.output)
                offloaded = True
        self.history.append(m)
        self.history_bytes += m.nbytes
        for tc in m.tool_calls:
            self._calls_by_id[tc.id] = tc
        return offloaded

    def replace_history(self, new: Sequence[Message], kept: int | None = None) -> None:
        """Replace the history by ``new`` (a write-back, a ``/compact``, a loop's own rewrite);
        ``kept``: how many leading messages the two share, when the caller knows."""
        # bytes of the replaced span only: a write-back keeps most of the history as it was
        old, new = self.history, list(new)
        k = kept if kept is not None else common_prefix_len(old, new)
        self.history_bytes += sum(x.nbytes for x in new[k:]) - sum(x.nbytes for x in old[k:])
        self.history = new

    def _write_back(self, comp: Compaction) -> bool:
        """``write_back`` mode: an effective compaction replaces the history (spec §2.3)."""
        rules = self.rules
        if rules.history_mode != "write_back" or not writes_back(comp.record, comp.view, rules.writeback_rules):
            return False
        k = comp.kept_prefix if comp.kept_prefix is not None else common_prefix_len(self.history, comp.view)
        if k == len(comp.view) == len(self.history):
            return False
        self.replace_history(comp.view, k)
        return True

    # -- the step -------------------------------------------------------------------------------
    def before_call(self, *, manual: bool = False) -> CallRequest:
        """Compact the history for the next model call (module docstring); ``manual``: run a
        ``/compact`` first."""
        comps: list[Compaction] = []
        written = False
        if manual:
            mc = self.compactor.compact(self.history, manual=True)
            self.replace_history(mc.view)  # harness9's /compact rewrites the session unconditionally
            comps.append(mc)
            written = True
        auto = len(comps)
        before = self.history
        h_tokens = self.history_bytes // 4
        comp = self.compactor.compact(before, tokens=h_tokens)
        comps.append(comp)
        written = self._write_back(comp) or written
        view = comp.view
        # the record already holds harness9's estimate of the view: no second O(n) pass
        view_tokens = comp.record.tokens_after if comp.record is not None else estimate_tokens(view)
        retries = self.rules.overflow_retries
        while view_tokens + self.tool_schema_tokens > self.window_tokens and len(comps) - auto - 1 < retries:
            forced = self.compactor.compact(view, force=True)
            comps.append(forced)
            view = forced.view
            view_tokens = estimate_tokens(view)
            if self.rules.history_mode == "write_back":
                written = written or list(view) != self.history
                self.replace_history(view)
        hook = (self._hook_count, self._hook_bytes)
        self._hook_count = self._hook_bytes = 0
        stats = _stats(
            comps,
            auto=auto,
            before=before,
            history_tokens=h_tokens,
            view_tokens=view_tokens,
            tokens_sent=view_tokens + self.tool_schema_tokens,
            hook=hook,
            written=written,
            manual=manual,
        )
        return CallRequest(view=view, compactions=tuple(comps), stats=stats, forced_compactions=len(comps) - auto - 1)
