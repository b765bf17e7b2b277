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

from h9eval.compaction._peer import peer_record
from h9eval.compaction.base import Compaction, CompactionEnv, Policy, register
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
    clear_tool_inputs: bool = False,
    placeholder: str = CLEAR_PLACEHOLDER,
) -> tuple[list[Message], int]:
    """Clear every tool use older than the last ``keep_tool_uses``; return the new list and the
    number of tool uses cleared (a use counts when its result or its input changed).

    A *tool use* is one tool call (an assistant message with three parallel calls holds three).
    Every call counts towards ``keep_tool_uses``, excluded or not; calls named in
    ``exclude_tools`` are never cleared. A result is left as is when its content is not longer
    than the placeholder (clearing it would not save anything) or was already cleared.
    """
    calls = [(i, tc) for i, m in enumerate(msgs) if m.role == "assistant" for tc in m.tool_calls]
    old = calls[: max(len(calls) - keep_tool_uses, 0)]
    excluded = set(exclude_tools)
    clear_ids = {tc.id for _, tc in old if tc.name not in excluded}
    if not clear_ids:
        return list(msgs), 0
    ph_bytes = _nbytes(placeholder)
    out = list(msgs)
    cleared: set[str] = set()
    for i, m in enumerate(msgs):
        if m.tool_call_id in clear_ids and m.content != placeholder and _nbytes(m.content) > ph_bytes:
            out[i] = m.with_content(placeholder)
            cleared.add(m.tool_call_id)
    if clear_tool_inputs:
        idx = sorted({i for i, tc in old if tc.id in clear_ids})
        for i in idx:
            m = out[i]
            new_calls = tuple(
                replace(tc, arguments=CLEARED_INPUTS)
                if tc.id in clear_ids and _nbytes(tc.arguments) > _nbytes(CLEARED_INPUTS)
                else tc
                for tc in m.tool_calls
            )
            if new_calls != m.tool_calls:
                cleared.update(a.id for a, b in zip(m.tool_calls, new_calls) if a is not b)
                out[i] = replace(m, tool_calls=new_calls)
    return out, len(cleared)


@register
@dataclass(frozen=True, kw_only=True)
class ClearToolUses(Policy):
    """Claude API context editing ``clear_tool_uses_20250919``: clear old tool results.

    ``trigger_tokens``: clearing starts once the input is *over* this many tokens (harness9
    estimate of the history; the API's ``trigger``, default 100,000 input tokens).
    ``keep_tool_uses``: the most recent tool uses kept intact (the API's ``keep``, default 3).
    ``clear_at_least_tokens``: when clearing, at least this many tokens must be freed, else
    nothing is cleared at all (the API's documented all-or-nothing ``clear_at_least``; default
    0 = no minimum). ``exclude_tools``: tool names whose uses are never cleared (default none).
    ``clear_tool_inputs``: also blank the cleared calls' arguments to ``{}`` (default False).
    ``placeholder``: the text a cleared result becomes (default ``[cleared to save context]``).

    Like the API, clearing is recomputed from the full history at every call (the client keeps
    the unedited conversation), so the policy keeps no state. Deliberate differences: a result
    no longer than the placeholder is not replaced (no saving); tokens are harness9's bytes/4
    estimate, not Claude's tokenizer. ``compact_force``/``compact_manual`` clear regardless of
    ``trigger_tokens`` and ``clear_at_least_tokens``.
    """

    kind: ClassVar[str] = "clear_tool_uses"
    source: ClassVar[str] = "Claude API context editing clear_tool_uses_20250919 (tool-result clearing)"
    claims_budget: ClassVar[bool] = False

    trigger_tokens: int = 100_000
    keep_tool_uses: int = 3
    clear_at_least_tokens: int = 0
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool = False
    placeholder: str = CLEAR_PLACEHOLDER

    def __post_init__(self) -> None:
        if isinstance(self.exclude_tools, str):
            # a bare string would silently become a set of characters
            self._check(False, "exclude_tools", "must be a list of tool names, not a string", self.exclude_tools)
        object.__setattr__(self, "exclude_tools", tuple(self.exclude_tools))
        c = self._check
        c(self.trigger_tokens >= 0, "trigger_tokens", "must be >= 0", self.trigger_tokens)
        c(self.keep_tool_uses >= 0, "keep_tool_uses", "must be >= 0", self.keep_tool_uses)
        c(self.clear_at_least_tokens >= 0, "clear_at_least_tokens", "must be >= 0", self.clear_at_least_tokens)
        for t in self.exclude_tools:
            c(isinstance(t, str) and t != "", "exclude_tools", "entries must be non-empty tool names", t)
        c(self.placeholder != "", "placeholder", "must not be empty", self.placeholder)

    def start(self, env: CompactionEnv | None = None) -> ClearToolUsesRun:
        return ClearToolUsesRun(self, env or CompactionEnv())


class ClearToolUsesRun:
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
        if force or tb > p.trigger_tokens:
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

    def compact(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        return self._run(history, tokens, force=False)

    def compact_force(self, history: Sequence[Message]) -> Compaction:
        """Clear now, ignoring ``trigger_tokens`` and ``clear_at_least_tokens``."""
        return self._run(history, None, force=True)

    compact_manual = compact_force
