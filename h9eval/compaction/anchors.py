"""The structured summary anchors: types, parse, merge, format (spec §4, §3.11).

harness9 has five anchors. h9eval adds two optional ones (``constraint``, ``artifact``; off by
default, see the progressive policy's ``extra_anchors``). Parsing and merging take the list of
anchor types in force so the default stays byte-exact with harness9.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "Anchor",
    "ANCHOR_TYPES",
    "EXTRA_ANCHOR_TYPES",
    "ANCHOR_HEADERS",
    "COMPACTION_MARKER",
    "NA",
    "go_trim",
    "parse_anchors_and_summary",
    "merge_anchors",
    "format_anchors",
    "anchor_types_for",
    "is_no_information",
]

COMPACTION_MARKER = "[Context Compaction]"
NA = "N/A"

ANCHOR_TYPES: tuple[str, ...] = (
    "user_intent",
    "execution_progress",
    "key_decision",
    "tried_solution",
    "next_step",
)
EXTRA_ANCHOR_TYPES: tuple[str, ...] = ("constraint", "artifact")

ANCHOR_HEADERS: dict[str, str] = {
    "user_intent": "User Intent",
    "execution_progress": "Execution Progress",
    "key_decision": "Key Decisions",
    "tried_solution": "Tried Solutions",
    "next_step": "Next Steps",
    "constraint": "Constraints",
    "artifact": "Artifacts",
}
_HEADER_TO_TYPE = {v: k for k, v in ANCHOR_HEADERS.items()}

# Go's strings.TrimSpace set (spec §4.2): Python's str.strip() would also remove U+001C-U+001F.
GO_WS = (
    "\t\n\v\f\r "
    "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def go_trim(s: str) -> str:
    """Go ``strings.TrimSpace``."""
    return s.strip(GO_WS)


@dataclass(frozen=True, slots=True)
class Anchor:
    """One anchor: ``type`` (e.g. ``user_intent``) and its text."""

    type: str
    content: str

    def to_json(self) -> dict[str, str]:
        return {"type": self.type, "content": self.content}


def anchor_types_for(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """harness9's five types followed by the requested extra types (canonical order)."""
    extra = tuple(extra)
    return ANCHOR_TYPES + tuple(t for t in EXTRA_ANCHOR_TYPES if t in extra)


def parse_anchors_and_summary(text: str, types: Sequence[str] = ANCHOR_TYPES) -> tuple[list[Anchor], str]:
    """harness9 ``ParseAnchorsAndSummary``: always one anchor per type in ``types`` order
    (``N/A`` when absent or empty) and the ``## Summary`` text (``""`` when absent)."""
    allowed = set(types)
    found: dict[str, str] = {}
    current: str | None = None
    buf: list[str] = []
    summary_parts: list[str] = []
    in_summary = False

    def store() -> None:
        if current is not None:
            found[current] = go_trim("\n".join(buf))

    for line in text.split("\n"):
        t = go_trim(line)
        if t == "## Summary":
            store()
            current = None
            buf = []
            in_summary = True
            continue
        if in_summary:
            summary_parts.append(line + "\n")
            continue
        if t.startswith("### "):
            store()
            buf = []
            typ = _HEADER_TO_TYPE.get(t[4:])
            current = typ if typ in allowed else None
            continue
        if current is not None:
            buf.append(line)
    store()
    anchors = [Anchor(t, found.get(t) or NA) for t in types]
    return anchors, go_trim("".join(summary_parts))


def is_no_information(content: str) -> bool:
    """The N/A-safe merge rule (h9eval option): empty, ``N/A``, ``- N/A``, ``N/A.`` and the like
    carry no new information. harness9 itself only skips the exact string ``N/A``."""
    c = go_trim(content)
    if not c:
        return True
    for line in c.split("\n"):
        s = go_trim(line).lstrip("-*• ").rstrip(".").strip()
        if s.upper() not in ("N/A", "NA", "NONE", ""):
            return False
    return True


def merge_anchors(
    old: Sequence[Anchor] | None,
    new: Sequence[Anchor] | None,
    types: Sequence[str] = ANCHOR_TYPES,
    *,
    na_safe: bool = False,
    overwrites: list[str] | None = None,
) -> list[Anchor]:
    """harness9 ``MergeAnchors``: overlay ``new`` on ``old`` unless the new content is exactly
    ``N/A``. With ``na_safe`` any no-information content (see :func:`is_no_information`) keeps
    the old value; each type whose known value was replaced by such content under the harness9
    rule (or protected from it under ``na_safe``) is appended to ``overwrites`` when given."""
    m: dict[str, str] = {}
    for a in old or ():
        m[a.type] = a.content
    for a in new or ():
        if a.content == NA:
            continue
        known = m.get(a.type, "")
        # only a value that carried information can be lost
        wipes = not is_no_information(known) and is_no_information(a.content)
        if wipes and overwrites is not None:
            overwrites.append(a.type)
        if na_safe and is_no_information(a.content):
            continue
        m[a.type] = a.content
    return [Anchor(t, m.get(t) or NA) for t in types]


def format_anchors(anchors: Iterable[Anchor], types: Sequence[str] = ANCHOR_TYPES) -> str:
    """harness9 ``formatAnchors``: ``### Header\\ncontent\\n\\n`` per anchor in the given order,
    then trimmed; a type not in ``types`` gets an empty header (``### ``), as in harness9."""
    allowed = set(types)
    out = "".join(
        "### " + (ANCHOR_HEADERS[a.type] if a.type in allowed else "") + "\n" + a.content + "\n\n" for a in anchors
    )
    return go_trim(out)
