"""Observation masking: old tool outputs replaced by a placeholder, tool calls kept.

Reproduces the strategy of the JetBrains study of agent context management ("The Complexity
Trap", 2025) on SWE-agent (its ``LastNObservations`` history processor), and OpenHands'
``ObservationMaskingCondenser``: the tool outputs of all but the most recent ones are replaced
by a short placeholder. Results are selected by position: each result belongs to the nearest
preceding call of its id, so reused call ids (every call ``call_0``) do not mask recent outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.compaction._peer import call_positions, paired_calls
from h9eval.compaction.base import Compaction, CompactionEnv, Policy, register
from h9eval.compaction.records import CompactionRecord, Tier
from h9eval.messages import Message
from h9eval.tokens import estimate_tokens

__all__ = [
    "ObservationMasking",
    "mask_observations",
    "masked_positions",
    "drop_masked_calls",
    "MASK_PLACEHOLDER",
    "JETBRAINS_PLACEHOLDER",
    "render_placeholder",
    "is_placeholder",
    "WINDOW_UNITS",
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


@register
@dataclass(frozen=True, kw_only=True)
class ObservationMasking(Policy):
    """Mask old tool outputs; tool calls (and every other message) are kept.

    ``keep_recent_turns``: the most recent window kept unmasked, counted in ``window_unit``
    (default 10, the study's window). ``window_unit``: ``assistant_turns`` (default: the
    outputs of all but the last this many assistant messages are masked) or ``tool_results``
    (all but the last this many tool results, as SWE-agent's ``LastNObservations`` counts).
    ``placeholder``: what a masked output becomes (default ``<MASKED>``, as in OpenHands);
    ``{lines}`` in it is replaced by the output's line count, so the study's
    ``Old environment output: ({lines} lines omitted)`` reproduces its placeholder.
    ``send_masked_calls``: keep a masked output's call and send the placeholder as its result
    (default True); False reproduces what OpenHands actually sends: the placeholder as a plain
    user message and the assistant message of that call held back with all its results.

    Where this still differs from the references, and why:

    1. JetBrains/SWE-agent ``LastNObservations``: its ``polling`` (re-mask only every k steps,
       for prompt caching) and output tags (``keep_output``/``remove_output``) are not
       reproduced: h9eval transcripts carry no tags, and polling=1 is the study's setting.
    2. The study never masks its first observation, the instance template (the task). In
       h9eval the task is a user message, which masking never touches, so this holds without
       an option; with ``window_unit="tool_results"`` the count of kept outputs agrees too.
    3. OpenHands ``ObservationMaskingCondenser`` counts its ``attention_window`` in events (every
       action and observation; default 5), not in assistant turns or tool results; h9eval
       has no event stream, so the window is one of the two units above.
    4. With ``send_masked_calls=False`` an assistant message with parallel calls is held back as
       soon as one of its results is masked; OpenHands' window (counted in events) can split
       parallel results in the same way, so this matches, but the assistant's text goes with
       it (as in OpenHands, where the text travels with the tool calls).
    """

    kind: ClassVar[str] = "observation_masking"
    source: ClassVar[str] = "JetBrains 'Complexity Trap' observation masking / OpenHands ObservationMaskingCondenser"

    keep_recent_turns: int = 10
    placeholder: str = MASK_PLACEHOLDER
    window_unit: str = "assistant_turns"
    send_masked_calls: bool = True

    def __post_init__(self) -> None:
        self._check(self.keep_recent_turns >= 0, "keep_recent_turns", "must be >= 0", self.keep_recent_turns)
        self._check(self.window_unit in WINDOW_UNITS, "window_unit", f"must be one of {', '.join(WINDOW_UNITS)}", self.window_unit)

    def start(self, env: CompactionEnv | None = None) -> _MaskingRun:
        return _MaskingRun(self, env or CompactionEnv())


class _MaskingRun:
    def __init__(self, policy: ObservationMasking, env: CompactionEnv) -> None:
        self.policy = policy
        self.env = env

    def compact(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        p = self.policy
        idx = masked_positions(history, p.keep_recent_turns, p.placeholder, window_unit=p.window_unit)
        n = len(idx)
        out = list(history)
        for i in idx:
            out[i] = history[i].with_content(render_placeholder(p.placeholder, history[i].content))
        extra: dict[str, object] = {"masked": n}
        if not p.send_masked_calls and idx:
            out, dropped = drop_masked_calls(history, idx, p.placeholder)
            extra["held_back_calls"] = dropped
        tb = tokens if tokens is not None else estimate_tokens(history)
        ta = estimate_tokens(out) if n else tb
        rec = CompactionRecord(
            id=self.env.new_id(),
            session_id=self.env.session_id,
            timestamp=self.env.clock.timestamp(),
            tier=Tier.WARN if n else Tier.NONE,
            tokens_before=tb,
            tokens_after=ta,
            msgs_before=len(history),
            msgs_after=len(out),
            compression_ratio=ta / tb if tb else 0.0,
            extra=extra,
        )
        return Compaction(tuple(out), rec)

    def compact_force(self, history: Sequence[Message]) -> Compaction:
        return self.compact(history)

    compact_manual = compact_force
