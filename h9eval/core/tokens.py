"""Token estimates: harness9's bytes/4 estimate exactly (spec §1.2-§1.4), behind a protocol.

The estimate counts UTF-8 bytes of content, tool-call id/name/arguments and tool_call_id, and
floors *once* over the whole list, so ``["ab", "cd"]`` is 1 token, not 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from h9eval.core.messages import Message

__all__ = [
    "DEFAULT_CONTEXT_WINDOW_TOKENS",
    "TokenCounter",
    "Harness9Estimate",
    "message_bytes",
    "estimate_tokens",
    "estimate_tool_tokens",
    "format_token_count",
    "go_json",
]

DEFAULT_CONTEXT_WINDOW_TOKENS = 200_000
"""The model window (tokens) a policy or run assumes when none is given (Claude's 200k)."""


def message_bytes(m: Message) -> int:
    """Bytes harness9 counts for one message (before the division by 4)."""
    return m.nbytes


def estimate_tokens(msgs: Iterable[Message]) -> int:
    """harness9 ``EstimateTokens``: floor(total UTF-8 bytes / 4), one division over the list."""
    return sum(m.nbytes for m in msgs) // 4


def go_json(value: Any) -> str:
    """Go ``encoding/json`` output of a map: compact, sorted keys, HTML and U+2028/2029 escaped."""
    return go_escape(json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False))


def go_escape(s: str) -> str:
    """The escapes Go's JSON encoder adds to compact JSON text: ``<>&`` and U+2028/2029."""
    return (
        s.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def estimate_tool_tokens(tools: Iterable[Mapping[str, Any]] | None) -> int:
    """harness9 ``EstimateToolTokens`` (spec §1.3): (name + description + Go-JSON schema) bytes / 4.

    Each tool is a mapping with ``name``, ``description`` and ``input_schema`` (``parameters``
    is accepted as an alias); a missing or unserialisable schema contributes 0.
    """
    total = 0
    for t in tools or ():
        total += len(str(t.get("name", "")).encode("utf-8", "surrogatepass"))
        total += len(str(t.get("description", "") or "").encode("utf-8", "surrogatepass"))
        schema = t.get("input_schema", t.get("parameters"))
        if schema is not None:
            try:
                total += len(go_json(schema).encode("utf-8", "surrogatepass"))
            except (TypeError, ValueError):
                pass
    return total // 4


def format_token_count(n: int) -> str:
    """harness9 ``FormatTokenCount``: ``45.2K``, ``1.2M`` or the plain integer."""
    if n >= 1_000_000:
        return "%.1fM" % (n / 1e6)
    if n >= 1_000:
        return "%.1fK" % (n / 1e3)
    return str(n)


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that can count a message list's tokens (tiers are decided on this number)."""

    name: str

    def count(self, msgs: Sequence[Message]) -> int: ...

    def message_units(self, m: Message) -> int:
        """Additive per-message units such that ``count(msgs) == finish(sum(units))``."""
        ...

    def finish(self, units: int) -> int: ...


class Harness9Estimate:
    """harness9's estimate as a :class:`TokenCounter`; units are bytes, ``finish`` floors by 4."""

    name = "harness9_bytes_div4"

    def count(self, msgs: Sequence[Message]) -> int:
        return estimate_tokens(msgs)

    def message_units(self, m: Message) -> int:
        return message_bytes(m)

    def finish(self, units: int) -> int:
        return units // 4

    def __repr__(self) -> str:
        return "Harness9Estimate()"


HARNESS9_ESTIMATE = Harness9Estimate()
