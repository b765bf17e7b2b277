"""Tool-result clearing: the Claude API context-editing strategy ``clear_tool_uses_20250919``.

When the input exceeds ``trigger_tokens``, the oldest tool results are replaced by a
placeholder, keeping the most recent ``keep_tool_uses`` tool uses intact. Only content changes:
no message is dropped and every ``tool_call_id`` stays, so tool pairing is untouched.

Tier mapping (see :mod:`h9eval.compaction._peer`): ``WARN`` when something was cleared,
``NONE`` otherwise.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from h9eval.compaction._peer import peer_record
from h9eval.compaction.repair import call_positions, paired_calls
from h9eval.compaction.base import Compaction, CompactionEnv, Policy, PolicyRun, register
from h9eval.compaction.records import Tier
from h9eval.core.history import IncrementalView
from h9eval.core.messages import Message

__all__ = ["ClearToolUses", "clear_tool_uses", "IncrementalClearing", "CLEAR_PLACEHOLDER", "CLEARED_INPUTS"]

CLEAR_PLACEHOLDER = "[cleared to save context]"
#: what a cleared call's arguments become with ``clear_tool_inputs`` (still valid JSON)
CLEARED_INPUTS = "{}"


def _nbytes(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def clear_tool_uses(
    msgs: Sequence[Message],
    *,
    keep_tool_uses: int,
    exclude_tools: frozenset[str] | tuple[str, ...] = (),
    clear_tool_inputs: bool | tuple[str, ...] = False,
    placeholder: str = CLEAR_PLACEHOLDER,
) -> tuple[list[Message], int]:
    """Clear every tool use older than the last ``keep_tool_uses``; return the new list and the
    number of tool uses cleared (a use counts when its result or its input changed).

    A *tool use* is one tool call (an assistant message with three parallel calls holds three),
    selected by position: a result belongs to the nearest preceding call of its id, so reused
    ids clear only the old uses. Every call counts towards ``keep_tool_uses``, excluded or not;
    calls named in ``exclude_tools`` are never cleared. A result is left as is when its content
    is not longer than the placeholder (clearing it would not save anything) or was already
    cleared. ``clear_tool_inputs``: True blanks the arguments of every cleared use, a tuple of
    tool names only those of the uses of these tools.
    """
    calls = call_positions(msgs)
    n_old = max(len(calls) - keep_tool_uses, 0)
    excluded = set(exclude_tools)
    # positions in ``calls`` of the uses to clear
    clear_pos = {j for j in range(n_old) if msgs[calls[j][0]].tool_calls[calls[j][1]].name not in excluded}
    if not clear_pos:
        return list(msgs), 0
    ph_bytes = _nbytes(placeholder)
    out = list(msgs)
    cleared: set[int] = set()
    for i, j in paired_calls(msgs).items():
        m = msgs[i]
        if j in clear_pos and m.content != placeholder and _nbytes(m.content) > ph_bytes:
            out[i] = m.with_content(placeholder)
            cleared.add(j)
    if clear_tool_inputs:
        names = None if isinstance(clear_tool_inputs, bool) else set(clear_tool_inputs)
        by_msg: dict[int, set[int]] = {}
        for j in sorted(clear_pos):
            i, k = calls[j]
            if names is None or msgs[i].tool_calls[k].name in names:
                by_msg.setdefault(i, set()).add(k)
        first = {i: j for j, (i, k) in reversed(list(enumerate(calls))) if k == 0}
        for i, ks in sorted(by_msg.items()):
            m = out[i]
            new_calls = tuple(
                replace(tc, arguments=CLEARED_INPUTS)
                if k in ks and _nbytes(tc.arguments) > _nbytes(CLEARED_INPUTS)
                else tc
                for k, tc in enumerate(m.tool_calls)
            )
            if new_calls != m.tool_calls:
                cleared.update(first[i] + k for k, (a, b) in enumerate(zip(m.tool_calls, new_calls)) if a is not b)
                out[i] = replace(m, tool_calls=new_calls)
    return out, len(cleared)


class IncrementalClearing(IncrementalView):
    """:func:`clear_tool_uses` kept up to date between the calls of one run: the same list and
    count, with Python work only for the messages added since the previous call (and the uses
    that became old). Like :class:`h9eval.compaction.masking.IncrementalMasking`, a history
    that extends the previous one (view mode) or the previous cleared list (write-back mode)
    continues; anything else starts over. Clearing only ever grows with the history: a
    result's pairing is fixed when it arrives and the old uses are a growing prefix."""

    def __init__(
        self,
        *,
        keep_tool_uses: int,
        exclude_tools: tuple[str, ...] = (),
        clear_tool_inputs: bool | tuple[str, ...] = False,
        placeholder: str = CLEAR_PLACEHOLDER,
    ) -> None:
        self.keep = keep_tool_uses
        self.excluded = frozenset(exclude_tools)
        self.input_names: frozenset[str] | None = (
            None if isinstance(clear_tool_inputs, bool) else frozenset(clear_tool_inputs)
        )
        self.clear_inputs = bool(clear_tool_inputs)
        self.placeholder = placeholder
        self._ph_bytes = _nbytes(placeholder)
        self._reset()

    def _reset(self) -> None:
        self._clear_view()
        self.src_bytes = self.out_bytes = 0
        self._calls: list[tuple[int, int]] = []  # call_positions(self._src)
        self._latest: dict[str, int] = {}  # call id -> position of its latest call
        self._waiting: list[tuple[int, int]] = []  # heap of (call position, result index) not yet old
        self._next_input = 0  # calls before this position had their inputs considered
        self._changed: set[int] = set()  # call positions whose result or input differs from ``_src``

    def _adopt_view(self) -> None:
        # what it cleared is the history's own content now
        self.src_bytes, self._changed = self.out_bytes, set()

    @property
    def n_calls(self) -> int:
        return len(self._calls)

    def update(self, history: Sequence[Message]) -> tuple[list[Message], int]:
        """The cleared list of ``history`` and the number of tool uses cleared in it (as
        :func:`clear_tool_uses` returns them; the list is this object's, do not change it)."""
        for i in range(self._continue(history), len(history)):
            self._add(i, history[i])
        self._advance()
        return self._out, len(self._changed)

    def _add(self, i: int, m: Message) -> None:
        self._append(m)
        self.src_bytes += m.nbytes
        self.out_bytes += m.nbytes
        if m.tool_call_id:
            j = self._latest.get(m.tool_call_id)
            if j is not None:
                heapq.heappush(self._waiting, (j, i))
        if m.role == "assistant":
            for k, tc in enumerate(m.tool_calls):
                self._latest[tc.id] = len(self._calls)
                self._calls.append((i, k))

    def _name(self, j: int) -> str:
        i, k = self._calls[j]
        return self._src[i].tool_calls[k].name

    def _set(self, i: int, m: Message) -> None:
        self.out_bytes += m.nbytes - self._out[i].nbytes
        self._replace(i, m)

    def _advance(self) -> None:
        n_old = max(len(self._calls) - self.keep, 0)
        while self._waiting and self._waiting[0][0] < n_old:
            j, i = heapq.heappop(self._waiting)
            m = self._out[i]
            if (
                self._name(j) not in self.excluded
                and m.content != self.placeholder
                and _nbytes(m.content) > self._ph_bytes
            ):
                self._set(i, m.with_content(self.placeholder))
                self._changed.add(j)
        if not self.clear_inputs:
            self._next_input = n_old
            return
        for j in range(self._next_input, n_old):
            name = self._name(j)
            if name in self.excluded or (self.input_names is not None and name not in self.input_names):
                continue
            i, k = self._calls[j]
            m = self._out[i]
            tc = m.tool_calls[k]
            if _nbytes(tc.arguments) > _nbytes(CLEARED_INPUTS):
                calls = (*m.tool_calls[:k], replace(tc, arguments=CLEARED_INPUTS), *m.tool_calls[k + 1 :])
                self._set(i, Message(m.role, m.content, calls, m.tool_call_id, m.is_error, m.meta))
                self._changed.add(j)
        self._next_input = max(self._next_input, n_old)


@register
@dataclass(frozen=True, kw_only=True)
class ClearToolUses(Policy):
    """Claude API context editing ``clear_tool_uses_20250919``: clear old tool results.

    Like the API, clearing is recomputed from the full history at every call (the client keeps
    the unedited conversation), so the policy keeps no state. Tool uses are selected by
    position, so reused call ids clear only the old uses.

    Where this still differs from the API, and why:

    1. A result no longer than the placeholder is not replaced: replacing it saves nothing.
    2. Tokens are harness9's bytes/4 estimate of the transcript, not Claude's tokenizer over
       the rendered request (no tool schemas, no system blocks).
    3. The placeholder wording is h9eval's; the API's own text is not documented verbatim.
    4. ``clear_thinking_20251015`` is not reproduced: h9eval messages carry no thinking blocks
       (every transcript loader drops them and only counts them in the task metadata), so
       there is nothing to clear and the token counts already exclude them.
    5. A forced or manual compaction clears regardless of the trigger and of
       ``clear_at_least_tokens`` (the API has no manual entry point).
    """

    kind: ClassVar[str] = "clear_tool_uses"
    source: ClassVar[str] = "Claude API context editing clear_tool_uses_20250919 (tool-result clearing)"
    claims_budget: ClassVar[bool] = False

    trigger_tokens: int = 100_000
    """Clear once the history is *over* this many tokens. harness9's estimate; the API's ``trigger``
    of type ``input_tokens``."""
    trigger_tool_uses: int | None = None
    """Trigger on *more* than this many tool uses instead (``None``: on tokens). The API's
    ``trigger`` of type ``tool_uses``."""
    keep_tool_uses: int = 3
    """The most recent tool uses kept intact (the API's ``keep``)."""
    clear_at_least_tokens: int = 0
    """Clear only if at least this many tokens are freed, else nothing (0: no minimum). The API's
    all-or-nothing ``clear_at_least``."""
    exclude_tools: tuple[str, ...] = ()
    """Tool names whose uses are never cleared."""
    clear_tool_inputs: bool | tuple[str, ...] = False
    """Also blank the cleared calls' arguments to ``{}``: all, or only these tools'. ``True`` for
    every cleared use, a list of tool names for the uses of these tools only (the API accepts a
    boolean or a list)."""
    placeholder: str = CLEAR_PLACEHOLDER
    """The text a cleared tool result becomes."""

    def __post_init__(self) -> None:
        if isinstance(self.exclude_tools, str):
            # a bare string would silently become a set of characters
            self._check(False, "exclude_tools", "must be a list of tool names, not a string", self.exclude_tools)
        object.__setattr__(self, "exclude_tools", tuple(self.exclude_tools))
        c = self._check
        if not isinstance(self.clear_tool_inputs, bool):
            c(
                not isinstance(self.clear_tool_inputs, str),
                "clear_tool_inputs",
                "must be a boolean or a list of tool names, not a string",
                self.clear_tool_inputs,
            )
            c(
                isinstance(self.clear_tool_inputs, (list, tuple)),
                "clear_tool_inputs",
                "must be a boolean or a list of tool names",
                self.clear_tool_inputs,
            )
            object.__setattr__(self, "clear_tool_inputs", tuple(self.clear_tool_inputs))
            for t in self.clear_tool_inputs:  # type: ignore[union-attr]
                c(isinstance(t, str) and t != "", "clear_tool_inputs", "entries must be non-empty tool names", t)
        if self.trigger_tool_uses is not None:
            c(self.trigger_tool_uses >= 0, "trigger_tool_uses", "must be >= 0", self.trigger_tool_uses)
        c(self.trigger_tokens >= 0, "trigger_tokens", "must be >= 0", self.trigger_tokens)
        c(self.keep_tool_uses >= 0, "keep_tool_uses", "must be >= 0", self.keep_tool_uses)
        c(self.clear_at_least_tokens >= 0, "clear_at_least_tokens", "must be >= 0", self.clear_at_least_tokens)
        for t in self.exclude_tools:
            c(isinstance(t, str) and t != "", "exclude_tools", "entries must be non-empty tool names", t)
        c(self.placeholder != "", "placeholder", "must not be empty", self.placeholder)

    def start(self, env: CompactionEnv | None = None) -> ClearToolUsesRun:
        return ClearToolUsesRun(self, env or CompactionEnv())


class ClearToolUsesRun(PolicyRun):
    """Clears from the history it is given at every call (the API's semantics), keeping the
    cleared list up to date between calls (:class:`IncrementalClearing`) so that a call's
    Python work follows its new messages, not the whole history."""

    def __init__(self, policy: ClearToolUses, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env
        self._clearer = IncrementalClearing(
            keep_tool_uses=policy.keep_tool_uses,
            exclude_tools=policy.exclude_tools,
            clear_tool_inputs=policy.clear_tool_inputs,
            placeholder=policy.placeholder,
        )

    def _run(self, history: Sequence[Message], tokens: int | None, *, force: bool) -> Compaction:
        p = self.policy
        start_ns = self.env.clock.now_ns()
        cand, n = self._clearer.update(history)
        tb = tokens if tokens is not None else self._clearer.src_bytes // 4
        extra: dict[str, object] = {"cleared_tool_uses": 0, "cleared_input_tokens": 0}
        view: Sequence[Message] = history
        ta = tb
        if p.trigger_tool_uses is not None:
            n_uses = self._clearer.n_calls
            triggered = n_uses > p.trigger_tool_uses
            extra["tool_uses"] = n_uses
        else:
            triggered = tb > p.trigger_tokens
        if force or triggered:
            freed = self._clearer.src_bytes // 4 - self._clearer.out_bytes // 4
            if n and (force or freed >= p.clear_at_least_tokens):
                view, ta = cand, self._clearer.out_bytes // 4
                extra.update(cleared_tool_uses=n, cleared_input_tokens=freed)
            elif n:
                extra["skipped"] = (
                    f"clearing would free {freed} tokens < clear_at_least_tokens ({p.clear_at_least_tokens})"
                )
        # a use counts only when a message changed, so the view differs exactly when one did
        tier = Tier.WARN if view is cand else Tier.NONE
        rec = peer_record(
            self.env, history, view, tier, tokens_before=tb, tokens_after=ta, start_ns=start_ns, extra=extra
        )
        return Compaction(
            tuple(view), rec, kept_prefix=self._clearer.first_difference if view is cand else len(history)
        )

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        return self._run(history, tokens, force=False)

    def _force(self, history: Sequence[Message]) -> Compaction:
        """Clear now, ignoring ``trigger_tokens`` and ``clear_at_least_tokens``."""
        return self._run(history, None, force=True)
