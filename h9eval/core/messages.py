"""Frozen message values and their JSON form (conformance FORMAT.md §2.1).

harness9 has three roles; a tool result is a ``user`` message whose ``tool_call_id`` is
non-empty. h9eval keeps the role the transcript used (``tool`` or ``user``) and, like harness9,
recognises a tool result *only* by ``tool_call_id != ""`` (spec §1.1).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from h9eval.core.errors import FormatError

__all__ = ["ToolCall", "Message", "message_from_json", "messages_from_json", "messages_to_json", "utf8_len"]


def utf8_len(s: str) -> int:
    """UTF-8 byte length of ``s`` (a lone surrogate counts as its 3-byte ``surrogatepass`` form).

    ``isascii`` reads a flag CPython keeps on every string, so ASCII text is never encoded."""
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an assistant message.

    ``arguments`` is the raw JSON text exactly as stored; harness9 counts its bytes without
    re-serialising it, so h9eval never parses it on the hot path.
    """

    id: str
    name: str
    arguments: str = ""

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message; immutable so that a compaction can never change its input.

    ``role`` is ``system``, ``user``, ``assistant`` or ``tool`` (any other string is kept as
    recorded). ``meta`` carries loader metadata (e.g. Claude Code's ``isCompactSummary``) and is
    ignored by every compaction component and by equality.
    """

    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    is_error: bool = False
    meta: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    # harness9's byte count, computed once: the replay sums it at every call.
    nbytes: int = field(init=False, repr=False, compare=False, hash=False)
    # The content's UTF-8 bytes alone (offload thresholds, previews), so nobody encodes it again.
    content_nbytes: int = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        c = utf8_len(self.content)
        n = c + utf8_len(self.tool_call_id)
        for tc in self.tool_calls:
            n += utf8_len(tc.id) + utf8_len(tc.name) + utf8_len(tc.arguments)
        object.__setattr__(self, "nbytes", n)
        object.__setattr__(self, "content_nbytes", c)

    @property
    def is_tool_result(self) -> bool:
        """harness9's only test for a tool result (spec §1.1)."""
        return self.tool_call_id != ""

    @property
    def is_assistant(self) -> bool:
        return self.role == "assistant"

    def with_content(self, content: str) -> Message:
        # direct construction: dataclasses.replace re-reads every field through the signature
        return Message(self.role, content, self.tool_calls, self.tool_call_id, self.is_error, self.meta)

    def to_json(self, *, harness9_roles: bool = False) -> dict[str, Any]:
        """FORMAT.md §2.1 shape. With ``harness9_roles`` a user-role tool result is written as
        ``tool`` (the conformance files' convention)."""
        role = self.role
        if harness9_roles and self.tool_call_id and role == "user":
            role = "tool"
        out: dict[str, Any] = {"role": role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [tc.to_json() for tc in self.tool_calls]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.is_error:
            out["is_error"] = True
        return out


def system(content: str) -> Message:
    return Message("system", content)


def user(content: str) -> Message:
    return Message("user", content)


def assistant(content: str = "", calls: Iterable[ToolCall] = ()) -> Message:
    return Message("assistant", content, tuple(calls))


def tool_result(tool_call_id: str, content: str, *, is_error: bool = False, role: str = "tool") -> Message:
    return Message(role, content, (), tool_call_id, is_error)


def _req(obj: Mapping[str, Any], key: str, typ: type | tuple[type, ...], where: str, path: str | None) -> Any:
    if key not in obj:
        raise FormatError(f"missing field {key!r} (expected {_tname(typ)})", path=path, where=where)
    val = obj[key]
    if not isinstance(val, typ) or isinstance(val, bool) and typ is not bool:
        raise FormatError(f"field {key!r} must be {_tname(typ)}, got {type(val).__name__}", path=path, where=where)
    return val


def _tname(typ: type | tuple[type, ...]) -> str:
    if isinstance(typ, tuple):
        return " or ".join(t.__name__ for t in typ)
    return {"str": "a string", "list": "a list", "dict": "an object", "bool": "a boolean"}.get(
        typ.__name__, typ.__name__
    )


def message_from_json(obj: Any, *, where: str = "message", path: str | None = None) -> Message:
    """Parse one FORMAT.md §2.1 message; raises :class:`FormatError` naming ``where``."""
    if not isinstance(obj, Mapping):
        raise FormatError(f"expected a message object, got {type(obj).__name__}", path=path, where=where)
    role = _req(obj, "role", str, where, path)
    content = obj.get("content", "")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise FormatError(f"field 'content' must be a string, got {type(content).__name__}", path=path, where=where)
    calls_raw = obj.get("tool_calls") or []
    if not isinstance(calls_raw, list):
        raise FormatError("field 'tool_calls' must be a list", path=path, where=where)
    calls = []
    for i, tc in enumerate(calls_raw):
        w = f"{where}.tool_calls[{i}]"
        if not isinstance(tc, Mapping):
            raise FormatError("expected a tool call object", path=path, where=w)
        args = tc.get("arguments", "")
        if args is None:
            args = ""
        if not isinstance(args, str):
            # Some writers store arguments parsed; keep them as compact JSON text.
            args = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
        calls.append(ToolCall(str(_req(tc, "id", str, w, path)), str(_req(tc, "name", str, w, path)), args))
    tcid = obj.get("tool_call_id", "") or ""
    if not isinstance(tcid, str):
        raise FormatError("field 'tool_call_id' must be a string", path=path, where=where)
    is_error = bool(obj.get("is_error", False))
    return Message(role, content, tuple(calls), tcid, is_error)


def messages_from_json(objs: Any, *, where: str = "messages", path: str | None = None) -> list[Message]:
    if not isinstance(objs, list):
        raise FormatError(f"expected a list of messages, got {type(objs).__name__}", path=path, where=where)
    return [message_from_json(o, where=f"{where}[{i}]", path=path) for i, o in enumerate(objs)]


def messages_to_json(msgs: Sequence[Message], *, harness9_roles: bool = False) -> list[dict[str, Any]]:
    return [m.to_json(harness9_roles=harness9_roles) for m in msgs]
