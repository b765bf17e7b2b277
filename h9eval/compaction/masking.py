"""Observation masking (old tool outputs replaced by a placeholder), shared by the masking
policy, the hybrid and the progressive compactor's mask-first option. Results are selected by
position (a result pairs with the nearest earlier call of its id), so providers that reuse ids
(every call ``call_0``) mask the oldest results, not all of them."""

from __future__ import annotations

from collections.abc import Sequence

from h9eval.compaction._peer import call_positions, paired_calls
from h9eval.core.messages import Message

__all__ = [
    "MASK_PLACEHOLDER",
    "JETBRAINS_PLACEHOLDER",
    "WINDOW_UNITS",
    "render_placeholder",
    "is_placeholder",
    "masked_positions",
    "mask_observations",
    "drop_masked_calls",
]

MASK_PLACEHOLDER = "<MASKED>"
#: the study's placeholder; ``{lines}`` is replaced by the masked output's line count
JETBRAINS_PLACEHOLDER = "Old environment output: ({lines} lines omitted)"
#: what ``keep_recent_turns`` counts: assistant messages, or tool results (the study's unit)
WINDOW_UNITS = ("assistant_turns", "tool_results")


def render_placeholder(placeholder: str, content: str) -> str:
    """The placeholder for one masked output: ``{lines}`` becomes its line count (Python's
    ``splitlines``, as the study counts)."""
    if "{lines}" not in placeholder:
        return placeholder
    return placeholder.replace("{lines}", str(len(content.splitlines())))


def is_placeholder(placeholder: str, content: str) -> bool:
    """Whether ``content`` already is this placeholder (with any line count), so that masking
    a masked view (write-back mode) leaves it as it is."""
    if "{lines}" not in placeholder:
        return content == placeholder
    pre, _, post = placeholder.partition("{lines}")
    mid = content[len(pre) : len(content) - len(post)] if len(content) >= len(pre) + len(post) else ""
    return content.startswith(pre) and content.endswith(post) and mid.isdigit() and mid.isascii()


def masked_positions(
    msgs: Sequence[Message], keep_recent: int, placeholder: str = MASK_PLACEHOLDER, *, window_unit: str = "assistant_turns"
) -> list[int]:
    """Indices of the tool results to mask (already-masked ones excluded).

    ``assistant_turns``: a result is masked when the assistant message holding its call is older
    than the last ``keep_recent`` assistant messages. ``tool_results``: all but the last
    ``keep_recent`` tool results are masked (SWE-agent's ``LastNObservations``; its first
    observation, the instance template, is the task message here, which is never a tool result,
    so "never mask the first observation" holds by construction and the count agrees). Results
    whose call is not found before them are left alone.
    """
    pairs = paired_calls(msgs)
    if window_unit == "tool_results":
        results = sorted(pairs)
        old = results[: max(len(results) - keep_recent, 0)]
    else:
        assistant_idx = [i for i, m in enumerate(msgs) if m.role == "assistant"]
        if len(assistant_idx) <= keep_recent:
            return []
        cutoff = assistant_idx[len(assistant_idx) - keep_recent] if keep_recent > 0 else len(msgs)
        positions = call_positions(msgs)
        old = [i for i, j in pairs.items() if positions[j][0] < cutoff]
    return sorted(i for i in old if not is_placeholder(placeholder, msgs[i].content))


def mask_observations(
    msgs: Sequence[Message], keep_recent_turns: int, placeholder: str = MASK_PLACEHOLDER, *, window_unit: str = "assistant_turns"
) -> tuple[list[Message], int]:
    """Return the masked list and the number of tool results masked (see
    :func:`masked_positions` for which ones)."""
    idx = masked_positions(msgs, keep_recent_turns, placeholder, window_unit=window_unit)
    if not idx:
        return list(msgs), 0
    out = list(msgs)
    for i in idx:
        out[i] = msgs[i].with_content(render_placeholder(placeholder, msgs[i].content))
    return out, len(idx)


def drop_masked_calls(msgs: Sequence[Message], masked: Sequence[int], placeholder: str) -> tuple[list[Message], int]:
    """What OpenHands actually sends after masking: each masked output becomes a plain user
    message holding the placeholder (OpenHands' ``AgentCondensationObservation``), and an
    assistant message is held back, with all its results, as soon as one of its calls has no
    tool-role result left (OpenHands sends a tool call only together with all its results).
    Returns the list and the number of assistant messages dropped."""
    if not masked:
        return list(msgs), 0
    pairs = paired_calls(msgs)
    positions = call_positions(msgs)
    masked_set = set(masked)
    dropped_msgs = {positions[pairs[i]][0] for i in masked_set if i in pairs}
    # every result of a dropped assistant message goes too (nothing would be sent for it)
    orphaned = {i for i, j in pairs.items() if positions[j][0] in dropped_msgs and i not in masked_set}
    out: list[Message] = []
    for i, m in enumerate(msgs):
        if i in dropped_msgs or i in orphaned:
            continue
        if i in masked_set:
            out.append(Message("user", render_placeholder(placeholder, m.content)))
        else:
            out.append(m)
    return out, len(dropped_msgs)
