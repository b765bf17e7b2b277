"""Small pieces the peer policies share: the record builder, the continuation of a previous
compaction's view, and the boundary rules that never separate a tool call from its results.

Tier mapping used by every non-harness9 policy (harness9's own tiers are chosen on token
ratios; the peers have no tiers, so h9eval names what a compaction *did*):

============  =========================================================================
``NONE``      no compaction work in this call. On a fresh runner the view equals the
              input; a stateful policy may return the previous compaction's view followed
              by the new messages (``record.extra["carried_over"]``).
``WARN``      content-only edits: tool results masked or cleared, no message dropped.
``SOFT``      messages dropped without a summary (sliding window, summary fallback).
``FULL``      a summary message replaced messages.
``EMERGENCY`` forced truncation to (almost) nothing (the ``drop_all`` control).
============  =========================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from h9eval.compaction.base import Compaction, CompactionEnv, PolicyRun
from h9eval.compaction.records import CompactionRecord, Tier
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens
from h9eval.compaction.summary import request_summary, summary_request
from h9eval.compaction.prompts import DEFAULT_PROMPTS, serialize_conversation

__all__ = [
    "Continuation",
    "ContinuedRun",
    "PeerDecision",
    "RawHistory",
    "peer_record",
    "split_system",
    "head_end",
    "tail_start",
    "fit_newest",
    "request_peer_summary",
]


def peer_record(
    env: CompactionEnv,
    history: Sequence[Message],
    view: Sequence[Message],
    tier: Tier,
    *,
    tokens_before: int | None = None,
    tokens_after: int | None = None,
    start_ns: int | None = None,
    error: str = "",
    extra: dict[str, Any] | None = None,
    **fields: Any,
) -> CompactionRecord:
    """A record in harness9's shape for a peer compaction of ``history`` into ``view``.

    ``tokens_before`` and ``tokens_after`` are the caller's precomputed harness9 estimates of
    ``history`` and ``view`` (computed here when ``None``);
    ``start_ns`` (from ``env.clock.now_ns()``) fills ``duration_ns``.
    Further keyword arguments set record fields (``summarized``, ``anchors``, ...).
    """
    tb = tokens_before if tokens_before is not None else estimate_tokens(history)
    # An untouched view costs nothing to re-estimate: the replay calls this at every model call.
    ta = tokens_after if tokens_after is not None else tb if view is history else estimate_tokens(view)
    ts = env.clock.timestamp()
    return CompactionRecord(
        id=env.new_id(),
        session_id=env.session_id,
        timestamp=ts,
        tier=tier,
        tokens_before=tb,
        tokens_after=ta,
        msgs_before=len(history),
        msgs_after=len(view),
        compression_ratio=ta / tb if tb > 0 else 0.0,
        duration_ns=env.clock.now_ns() - start_ns if start_ns is not None else 0,
        error=error,
        extra=extra if extra is not None else {},
        **fields,
    )


class Continuation:
    """Carries the last compaction's view forward, as the peers' agents do.

    Claude Code, Codex CLI and OpenHands' rolling condensers *replace* the conversation by the
    compacted one: later turns are appended to the summary, not to the original transcript.
    h9eval's replay may instead keep the original history and ask for a view every turn (view
    mode). Without this class a stateful policy would then recompute its compaction from the
    full history at every call (a new summary every turn once the raw history is over the
    threshold; an amortized window that never forgets in chunks). ``base(history)`` returns the
    list the policy should work on:

    * view mode (``history`` starts with the last compacted input): the last view followed by
      the messages appended since;
    * write-back mode (``history`` starts with the last view) or any other history: the
      history itself (an unrelated history also forgets the remembered state).
    """

    def __init__(self) -> None:
        self._input: list[Message] | None = None
        self._view: list[Message] | None = None

    def base(self, history: Sequence[Message]) -> tuple[list[Message], bool]:
        """``(work list, carried)``; ``carried`` is True when the list is not ``history``."""
        h = list(history)
        if self._input is None or self._view is None:
            return h, False
        n = len(self._input)
        # list == compares identity first, so a replay that appends to one list is O(n) cheap
        if len(h) >= n and h[:n] == self._input:
            return self._view + h[n:], True
        m = len(self._view)
        if len(h) >= m and h[:m] == self._view:
            return h, False
        self.reset()
        return h, False

    def remember(self, history: Sequence[Message], view: Sequence[Message]) -> None:
        self._input, self._view = list(history), list(view)

    def finish(
        self,
        env: CompactionEnv,
        history: Sequence[Message],
        base: Sequence[Message],
        view: Sequence[Message],
        tier: Tier,
        carried: bool,
        *,
        tokens_before: int | None,
        start_ns: int | None,
        error: str,
        extra: dict[str, Any],
        tokens_after: int | None = None,
        **fields: Any,
    ) -> Compaction:
        """The common end of a carried-forward compaction: flag a view carried over unchanged,
        remember a new view for the next call, and record the result."""
        if tier == Tier.NONE and carried:
            extra["carried_over"] = True
        if view is not base:
            self.remember(history, view)
        rec = peer_record(
            env,
            history,
            view,
            tier,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            start_ns=start_ns,
            error=error,
            extra=extra,
            **fields,
        )
        return Compaction(tuple(view), rec)

    def reset(self) -> None:
        self._input = self._view = None


@dataclass
class PeerDecision:
    """What a peer policy did with its working list (:meth:`ContinuedRun._decide`)."""

    work: list[Message]
    """The list the decision started from (the view, when nothing changed, is this very list)."""
    view: list[Message]
    tier: Tier = Tier.NONE
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    """Further record fields (``summarized``, ``summary_text``, ...)."""
    tokens_after: int | None = None
    """harness9's estimate of ``view`` when already known (else computed for the record)."""


class ContinuedRun(PolicyRun):
    """The template of the peer runners that carry their last view forward (Claude Code, Codex,
    OpenHands, the single-threshold summary and the hybrid): one compaction starts the clock,
    measures the history, continues from the last view (:class:`Continuation`), lets the policy
    decide (:meth:`_decide`, the one method a runner fills in) and finishes (remember the view,
    record it). The automatic path and the peer's ``/compact`` (``force``) both run it."""

    #: carry the last view forward (``False``: every call compacts the history it is given, as a
    #: strategy that sees the whole conversation does)
    carries_view: ClassVar[bool] = True

    def __init__(self, policy: Any, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        self.calls: list[Any] = []
        self.cont = Continuation()

    def _run(self, history: Sequence[Message], tokens: int | None, *, force: bool) -> Compaction:
        start_ns = self.env.clock.now_ns()
        tb = tokens if tokens is not None else estimate_tokens(history)
        base, carried = self.cont.base(history) if self.carries_view else (list(history), False)
        d = self._decide(base, base_tokens=None if carried else tb, force=force)
        return self.cont.finish(
            self.env,
            history,
            d.work,
            d.view,
            d.tier,
            carried,
            tokens_before=tb,
            tokens_after=d.tokens_after,
            start_ns=start_ns,
            error=d.error,
            extra=d.extra,
            **d.fields,
        )

    def _decide(self, base: list[Message], *, base_tokens: int | None, force: bool) -> PeerDecision:
        """Compact ``base`` (the history continued from the last view); ``base_tokens``: its
        harness9 estimate when known (``None`` when the view was carried over); ``force``: the
        peer's ``/compact``, whatever the usage."""
        raise NotImplementedError

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        return self._run(history, tokens, force=False)

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._run(history, None, force=True)


def split_system(msgs: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """``([system], rest)`` when the list starts with a system message, else ``([], all)``."""
    if msgs and msgs[0].role == "system":
        return [msgs[0]], list(msgs[1:])
    return [], list(msgs)


def head_end(rest: Sequence[Message], keep_first: int, limit: int) -> int:
    """End index of a head of ``keep_first`` messages, extended over the tool results that
    directly follow it (so a kept call keeps its results), but never past ``limit``."""
    end = min(keep_first, limit)
    while 0 < end < limit and rest[end].tool_call_id:
        end += 1
    return end


def tail_start(rest: Sequence[Message], keep_last: int, floor: int) -> int:
    """Start index of a tail of ``keep_last`` messages, moved back over tool results so that a
    kept result keeps its call, but never below ``floor``."""
    start = max(len(rest) - keep_last, floor)
    while floor < start < len(rest) and rest[start].tool_call_id:
        start -= 1
    return start


def fit_newest(fixed: Sequence[Message], rest: Sequence[Message], below_tokens: float) -> int:
    """Start index of the longest suffix of ``rest`` such that ``fixed + suffix`` stays under
    ``below_tokens`` (harness9 estimate, strictly below); at least the newest message is kept."""
    used = sum(m.nbytes for m in fixed)
    start = len(rest)
    while start > 0 and (used + rest[start - 1].nbytes) // 4 < below_tokens:
        used += rest[start - 1].nbytes
        start -= 1
    if start == len(rest) and rest:
        start -= 1
    return start


class RawHistory:
    """The raw (uncompacted) history behind a call, for policies that, like the JetBrains
    study's history processors, recompute their view from the full raw history each step.

    In view mode the replay passes the raw history itself. In write-back mode it passes the
    last view followed by the new messages; ``raw(history)`` then returns the remembered raw
    history followed by those new messages, so both modes see the same thing."""

    def __init__(self) -> None:
        self._raw: list[Message] | None = None
        self._view: list[Message] | None = None

    def raw(self, history: Sequence[Message]) -> tuple[list[Message], bool]:
        """``(raw history, written_back)``."""
        h = list(history)
        if self._raw is not None and self._view is not None:
            n, m = len(self._raw), len(self._view)
            if len(h) >= n and h[:n] == self._raw:
                return h, False
            if len(h) >= m and h[:m] == self._view:
                return self._raw + h[m:], True
        return h, False

    def remember(self, raw: Sequence[Message], view: Sequence[Message]) -> None:
        self._raw, self._view = list(raw), list(view)


def request_peer_summary(
    env: CompactionEnv,
    calls: list[Any],
    extra: dict[str, Any],
    head: Sequence[Message],
    prompt: str,
    *,
    previous: str | None,
    timeout_s: float,
    template: str = "free_text",
) -> str | None:
    """One free-text summary for a peer policy: the reply text or ``None`` on any failure.

    With no summarizer injected nothing is requested and no call is logged (the peers, like
    harness9, fail before building a request); ``extra["summary_error"]`` says why."""

    if env.summarizer is None:
        extra["summary_error"] = "no summarizer"
        return None
    req = summary_request(
        DEFAULT_PROMPTS,
        head,
        serialize_conversation(head),
        previous or "",
        None,
        (),
        timeout_s,
        template=template,
        previous=previous,
        user_prompt=prompt,
    )
    return request_summary(env.summarizer, calls, extra, req)
