"""Tool-result clearing: the Claude API context-editing strategy ``clear_tool_uses_20250919``.

When the input exceeds ``trigger_tokens``, the oldest tool results are replaced by a
placeholder, keeping the most recent ``keep_tool_uses`` tool uses intact. Only content changes:
no message is dropped and every ``tool_call_id`` stays, so tool pairing is untouched.

Tier mapping (see :mod:`h9eval.compaction._peer`): ``WARN`` when something was cleared,
``NONE`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from h9eval.compaction._peer import call_positions, paired_calls, peer_record
from h9eval.compaction.base import Compaction, CompactionEnv, Policy, PolicyRun, register
from h9eval.compaction.records import Tier
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = ["ClearToolUses", "clear_tool_uses", "CLEAR_PLACEHOLDER", "CLEARED_INPUTS"]

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
                replace(tc, arguments=CLEARED_INPUTS) if k in ks and _nbytes(tc.arguments) > _nbytes(CLEARED_INPUTS) else tc
                for k, tc in enumerate(m.tool_calls)
            )
            if new_calls != m.tool_calls:
                cleared.update(first[i] + k for k, (a, b) in enumerate(zip(m.tool_calls, new_calls)) if a is not b)
                out[i] = replace(m, tool_calls=new_calls)
    return out, len(cleared)


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
            c(not isinstance(self.clear_tool_inputs, str), "clear_tool_inputs", "must be a boolean or a list of tool names, not a string", self.clear_tool_inputs)
            c(isinstance(self.clear_tool_inputs, (list, tuple)), "clear_tool_inputs", "must be a boolean or a list of tool names", self.clear_tool_inputs)
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
    """A stateless runner: every call clears from the history it is given."""

    def __init__(self, policy: ClearToolUses, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env

    def _run(self, history: Sequence[Message], tokens: int | None, *, force: bool) -> Compaction:
        p = self.policy
        start_ns = self.env.clock.now_ns()
        tb = tokens if tokens is not None else estimate_tokens(history)
        extra: dict[str, object] = {"cleared_tool_uses": 0, "cleared_input_tokens": 0}
        out: list[Message] = list(history)
        if p.trigger_tool_uses is not None:
            n_uses = sum(len(m.tool_calls) for m in history if m.role == "assistant")
            triggered = n_uses > p.trigger_tool_uses
            extra["tool_uses"] = n_uses
        else:
            triggered = tb > p.trigger_tokens
        if force or triggered:
            cand, n = clear_tool_uses(
                history,
                keep_tool_uses=p.keep_tool_uses,
                exclude_tools=p.exclude_tools,
                clear_tool_inputs=p.clear_tool_inputs,
                placeholder=p.placeholder,
            )
            freed = estimate_tokens(history) - estimate_tokens(cand)
            if n and (force or freed >= p.clear_at_least_tokens):
                out = cand
                extra.update(cleared_tool_uses=n, cleared_input_tokens=freed)
            elif n:
                extra["skipped"] = f"clearing would free {freed} tokens < clear_at_least_tokens ({p.clear_at_least_tokens})"
        tier = Tier.WARN if out != list(history) else Tier.NONE
        rec = peer_record(self.env, history, out, tier, tokens_before=tb, start_ns=start_ns, extra=extra)
        return Compaction(tuple(out), rec)

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        return self._run(history, tokens, force=False)

    def _force(self, history: Sequence[Message]) -> Compaction:
        """Clear now, ignoring ``trigger_tokens`` and ``clear_at_least_tokens``."""
        return self._run(history, None, force=True)
