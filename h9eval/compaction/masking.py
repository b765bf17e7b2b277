"""Observation masking (old tool outputs replaced by a placeholder), shared by the masking
policy, the hybrid and the progressive compactor's mask-first option."""

from __future__ import annotations

from collections.abc import Sequence

from h9eval.core.messages import Message

__all__ = ["MASK_PLACEHOLDER", "mask_observations"]


MASK_PLACEHOLDER = "<MASKED>"


def mask_observations(
    msgs: Sequence[Message], keep_recent_turns: int, placeholder: str = MASK_PLACEHOLDER
) -> tuple[list[Message], int]:
    """Return the masked list and the number of tool results masked.

    A tool result is masked when the assistant message that called it is older than the last
    ``keep_recent_turns`` assistant messages. Results whose call is not found are left alone.
    """
    assistant_idx = [i for i, m in enumerate(msgs) if m.role == "assistant"]
    if len(assistant_idx) <= keep_recent_turns:
        return list(msgs), 0
    cutoff = assistant_idx[len(assistant_idx) - keep_recent_turns] if keep_recent_turns > 0 else len(msgs)
    old_calls = {tc.id for i in assistant_idx if i < cutoff for tc in msgs[i].tool_calls}
    out: list[Message] = []
    n = 0
    for m in msgs:
        if m.tool_call_id and m.tool_call_id in old_calls and m.content != placeholder:
            out.append(m.with_content(placeholder))
            n += 1
        else:
            out.append(m)
    return out, n
