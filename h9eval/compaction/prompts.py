"""The summary prompts of the progressive policy (structure of spec §3.10, h9eval's wording).

What harness9 pins, and h9eval keeps byte-exact: the conversation text, the choice of template,
and the previous-compaction text. The instruction wording is h9eval's own; a user can supply
another wording with a prompt file (JSON with ``system``, ``first`` and ``incremental`` keys,
whose ``{conversation}`` and ``{previous_compaction}`` slots are substituted positionally, so a
``%s`` or ``{conversation}`` inside an inserted text stays literal).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from h9eval.compaction.anchors import ANCHOR_HEADERS, ANCHOR_TYPES, Anchor, format_anchors
from h9eval.core.errors import ConfigError, FormatError
from h9eval.core.messages import Message, utf8_len

__all__ = [
    "PromptSet",
    "DEFAULT_PROMPTS",
    "serialize_conversation",
    "conversation_parts",
    "conversation_nbytes",
    "ConversationText",
    "render_template",
    "rendered_nbytes",
    "previous_compaction_text",
    "load_prompt_file",
]

SYSTEM_PROMPT = (
    "You are a context compaction engine. You analyse an agent's conversation and output only "
    "the compaction in the requested format, with no preamble and no commentary."
)

_HINTS = {
    "user_intent": "<one sentence: what the user ultimately wants>",
    "execution_progress": "- <one completed step or result per line>",
    "key_decision": "- <a decision and its reason, one per line>",
    "tried_solution": "- <an approach that was tried and its outcome, one per line>",
    "next_step": "- <a pending step, one per line>",
    "constraint": "- <a rule or constraint the user set (must / must not), one per line>",
    "artifact": "- <a file created or modified, or a key identifier, one per line>",
}


@functools.lru_cache(maxsize=16)
def _first_template(types: tuple[str, ...]) -> str:
    sections = "".join(f"### {ANCHOR_HEADERS[t]}\n{_HINTS[t]}\n\n" for t in types)
    return (
        "Compact the conversation below into a structured context compaction, using exactly this format:\n"
        "\n## Anchors\n\n" + sections + "## Summary\n<a concise summary of the remaining context worth keeping>\n\n"
        "Rules:\n"
        '- Every anchor section must be present; write "- N/A" when nothing applies.\n'
        "- One line per item.\n"
        "- An entry such as [offloaded: ...] is a large output saved to a file; keep its path.\n"
        "\nConversation:\n{conversation}"
    )


_INCREMENTAL = (
    "Merge the new conversation into the existing compaction below, keeping the same format, "
    "and output only the updated compaction with no preamble.\n\n"
    "<previous-compaction>\n{previous_compaction}\n</previous-compaction>\n\n"
    "New conversation to merge:\n{conversation}"
)

_SLOT = re.compile(r"\{(conversation|previous_compaction)\}")


@dataclass(frozen=True)
class PromptSet:
    """System prompt and the two user templates; ``first`` may be ``None`` to build the default
    first template for the anchor types in force."""

    system: str = SYSTEM_PROMPT
    first: str | None = None
    incremental: str = _INCREMENTAL

    def first_template(self, types: Sequence[str] = ANCHOR_TYPES) -> str:
        """The first summary's template (``{conversation}`` slot) for the anchor types in force."""
        return self.first if self.first is not None else _first_template(tuple(types))

    def render_first(self, conversation: str, types: Sequence[str] = ANCHOR_TYPES) -> str:
        return render_template(self.first_template(types), conversation)

    def render_incremental(self, previous: str, conversation: str) -> str:
        return render_template(self.incremental, conversation, previous)


def render_template(template: str, conversation: str | Sequence[str], previous: str | None = None) -> str:
    """``template`` with its ``{conversation}`` slot (and, when ``previous`` is given, its
    ``{previous_compaction}`` slot) filled; any other brace text stays literal. ``conversation``
    is the text or its pieces (:func:`conversation_parts`), joined straight into the prompt."""
    # The template is cut at its slots once; the inserted texts are joined in, never scanned,
    # and the conversation is copied once (no regex pass over a prompt that holds it).
    conv = [conversation] if isinstance(conversation, str) else conversation
    out: list[str] = []
    for i, p in enumerate(_pieces(template)):
        if i % 2 == 0:
            out.append(p)
        elif p == "conversation":
            out.extend(conv)
        elif p == "previous_compaction" and previous is not None:
            out.append(previous)
        else:
            out.append("{" + p + "}")
    return "".join(out)


def rendered_nbytes(template: str, conversation_bytes: int, previous: str | None = None) -> int:
    """UTF-8 bytes of :func:`render_template` ``(template, conversation, previous)`` for a
    conversation of ``conversation_bytes`` bytes, without building the text."""
    n = 0
    for i, p in enumerate(_pieces(template)):
        if i % 2 == 0:
            n += utf8_len(p)
        elif p == "conversation":
            n += conversation_bytes
        elif previous is not None:
            n += utf8_len(previous)
        else:
            n += len(p) + 2  # the slot stays literal: "{previous_compaction}"
    return n


_PIECES: dict[str, tuple[str, ...]] = {}


def _pieces(template: str) -> tuple[str, ...]:
    """``template`` split at its slots: literal, slot name, literal, ... (cached per template)."""
    got = _PIECES.get(template)
    if got is None:
        if len(_PIECES) > 64:  # prompt files are few; never let a caller grow this without bound
            _PIECES.clear()
        got = _PIECES[template] = tuple(_SLOT.split(template))
    return got


DEFAULT_PROMPTS = PromptSet()


def load_prompt_file(path: str | Path) -> PromptSet:
    """Read a JSON prompt file (keys ``system``, ``first``, ``incremental``; all optional)."""
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"prompt file {p}: cannot read ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise FormatError(
            f"not JSON ({e.msg}); expected an object with system/first/incremental",
            path=str(p),
            where=f"line {e.lineno}",
        ) from None
    if not isinstance(d, dict) or not set(d) <= {"system", "first", "incremental"}:
        raise FormatError("expected an object with only the keys system, first, incremental", path=str(p))
    for k in ("first", "incremental"):
        if k in d and "{conversation}" not in d[k]:
            raise FormatError(f"template {k!r} lacks the {{conversation}} slot", path=str(p))
    if "incremental" in d and "{previous_compaction}" not in d["incremental"]:
        raise FormatError("template 'incremental' lacks the {previous_compaction} slot", path=str(p))
    return PromptSet(
        system=d.get("system", SYSTEM_PROMPT), first=d.get("first"), incremental=d.get("incremental", _INCREMENTAL)
    )


def conversation_parts(head: Sequence[Message]) -> list[str]:
    """The pieces of :func:`serialize_conversation` ``(head)``, in order (their join is the
    text): a prompt can join them into itself, copying each content once, not twice."""
    parts: list[str] = []
    add = parts.extend
    for m in head:
        if m.tool_call_id != "":
            add(("\n[tool_result ", m.tool_call_id, "]: ", m.content))
            continue
        if m.content != "":
            add(("\n[", m.role, "]: ", m.content))
        for tc in m.tool_calls:
            add(("\n[tool_call ", tc.name, "(", tc.id, ")]: ", tc.arguments))
    if parts:
        parts[0] = parts[0][1:]  # no newline before the first line
    return parts


def serialize_conversation(head: Sequence[Message]) -> str:
    """harness9's head serialisation (spec §3.10 step 2), byte-exact."""
    # One list of pieces, one join: each content is copied once, not into a line and again.
    return "".join(conversation_parts(head))


class ConversationText:
    """:func:`conversation_parts` for one compactor's successive heads: a head that starts with
    the previous one (the same message objects, as successive view-mode heads do) extends the
    previous pieces with its new messages' instead of rebuilding them. Pieces, not text: the
    prompt joins them into itself, so the conversation is never copied on its own (a text is
    joined only for a caller that reads it)."""

    def __init__(self) -> None:
        self._head: tuple[Message, ...] = ()
        self._parts: list[str] = []

    def parts(self, head: Sequence[Message]) -> list[str]:
        """The pieces of ``head``'s serialisation (a list the caller must not change)."""
        prev, n = self._head, len(self._head)
        if n and len(head) >= n and all(a is b for a, b in zip(head, prev)):
            rest = conversation_parts(head[n:])
            if rest and self._parts:
                rest[0] = "\n" + rest[0]
            parts = self._parts + rest if rest else self._parts
        else:
            parts = conversation_parts(head)
        self._head, self._parts = tuple(head), parts
        return parts

    def __call__(self, head: Sequence[Message]) -> str:
        return "".join(self.parts(head))


def conversation_nbytes(head: Sequence[Message]) -> int:
    """UTF-8 bytes of :func:`serialize_conversation` ``(head)``, without building the text (an
    offline summarizer needs only the size, for its token estimate)."""
    n = 0
    for m in head:
        if m.tool_call_id != "":
            n += 17 + utf8_len(m.tool_call_id) + m.content_nbytes  # "\n[tool_result " id "]: " content
            continue
        if m.content != "":
            n += 5 + utf8_len(m.role) + m.content_nbytes  # "\n[" role "]: " content
        for tc in m.tool_calls:
            n += (
                17 + utf8_len(tc.name) + utf8_len(tc.id) + utf8_len(tc.arguments)
            )  # "\n[tool_call " name "(" id ")]: " args
    return n - 1 if n else 0  # no newline before the first line


def previous_compaction_text(
    last_summary: str, last_anchors: Sequence[Anchor] | None, types: Sequence[str] = ANCHOR_TYPES
) -> str:
    """The text inside ``<previous-compaction>``: the summary alone, or the formatted anchors
    followed by ``## Summary`` and the summary when anchors are known."""
    if last_anchors:
        return format_anchors(last_anchors, types) + "\n\n## Summary\n" + last_summary
    return last_summary
