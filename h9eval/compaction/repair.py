"""harness9's bidirectional tool-call/tool-result pair repair (spec §6)."""

from __future__ import annotations

from collections.abc import Sequence

from h9eval.core.messages import Message

__all__ = ["repair_tool_pairs", "REPAIR_PLACEHOLDER", "pairing_problems", "call_positions", "paired_calls"]

REPAIR_PLACEHOLDER = "[工具结果不可用：上下文已被压缩]"


def repair_tool_pairs(msgs: Sequence[Message], *, placeholder_role: str = "user") -> list[Message]:
    """Drop results whose call is nowhere in the list; add a placeholder result right after an
    assistant message for each of its calls that has no result anywhere.

    Both sets are global, as in harness9: order is not checked, duplicates are not removed.
    A call with an empty id always gets a placeholder (with an empty ``tool_call_id``).
    """
    called = {tc.id for m in msgs if m.role == "assistant" for tc in m.tool_calls}
    results = {m.tool_call_id for m in msgs if m.tool_call_id != ""}
    if called == results:
        # nothing to drop (every result's id is called) and nothing to add (every call, none
        # with an empty id, has a result): the usual case, without the per-message pass
        return list(msgs)
    out: list[Message] = []
    for m in msgs:
        if m.tool_call_id != "" and m.tool_call_id not in called:
            continue
        out.append(m)
        if m.role == "assistant" and m.tool_calls:
            for tc in m.tool_calls:
                if tc.id not in results:
                    out.append(Message(placeholder_role, REPAIR_PLACEHOLDER, (), tc.id))
    return out


def pairing_problems(msgs: Sequence[Message]) -> list[str]:
    """Human-readable pairing defects (calls without exactly one result, results without a
    call); empty when the list is valid. Used by tests, loaders and the contract suite."""
    calls: dict[str, int] = {}
    for m in msgs:
        if m.role == "assistant":
            for tc in m.tool_calls:
                calls[tc.id] = calls.get(tc.id, 0) + 1
    res: dict[str, int] = {}
    for m in msgs:
        if m.tool_call_id:
            res[m.tool_call_id] = res.get(m.tool_call_id, 0) + 1
    probs = []
    for cid, n in calls.items():
        if res.get(cid, 0) != n:
            probs.append(f"call {cid!r} has {res.get(cid, 0)} result(s)")
    for rid in res:
        if rid not in calls:
            probs.append(f"result {rid!r} has no call")
    return probs


def call_positions(msgs: Sequence[Message]) -> list[tuple[int, int]]:
    """Every tool call by position: ``(message index, call index within the message)``, in
    transcript order. Only assistant messages carry calls that count."""
    return [(i, k) for i, m in enumerate(msgs) if m.role == "assistant" for k in range(len(m.tool_calls))]


def paired_calls(msgs: Sequence[Message]) -> dict[int, int]:
    """``{result message index: position of its call in call_positions(msgs)}``.

    A result is paired with the *nearest preceding* call of its id, so a provider that reuses
    ids (every call ``call_0``) still pairs each result with its own call; this is how the
    peers select (by position, never by id alone). A result with no preceding call of its id
    is left out."""
    latest: dict[str, int] = {}
    out: dict[int, int] = {}
    pos = 0
    for i, m in enumerate(msgs):
        if m.tool_call_id:
            j = latest.get(m.tool_call_id)
            if j is not None:
                out[i] = j
        if m.role == "assistant":
            for tc in m.tool_calls:
                latest[tc.id] = pos
                pos += 1
    return out
