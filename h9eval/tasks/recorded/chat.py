"""Generic chat transcripts → Task: OpenAI chat messages and Anthropic Messages API requests.

``openai_chat`` accepts

* a JSON list of messages ``{role, content, tool_calls?, tool_call_id?, is_error?}``,
* a JSON object ``{"messages": [...], "tools"?: [...], "model"?: ...}``,
* JSONL with one message per line (one conversation), or JSONL with one
  ``{"messages": [...]}`` object per line (many conversations: :func:`load_chat_many`).

``content`` may be a string, ``null`` or a list of parts (text parts joined by a blank line,
images as ``[image]``). ``tool_calls[]`` may be ``{id, type, function: {name, arguments}}``
or flat ``{id, name, arguments}``; arguments that are not a string are serialised as compact
JSON text. Roles are kept as recorded (``tool`` results, legacy ``function``).

``anthropic_messages`` accepts ``{"system": str | blocks, "messages": [...], "tools"?: [...]}``
(or a bare list of such messages) whose ``content`` is a string or blocks: ``text``;
``thinking``/``redacted_thinking`` (dropped, counted); ``tool_use {id, name, input}`` → a tool
call with ``input`` as compact JSON text; ``tool_result {tool_use_id, content, is_error}`` →
``Message(role="tool", ...)``. A user message mixing results and text becomes the results
followed by one user message with the text. ``system`` becomes the first message.

The first user message (not a tool result) is the task statement; later user messages are
intent refinements.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from h9eval.core.errors import FormatError
from h9eval.core.messages import Message, ToolCall
from h9eval.tasks.model import Task
from h9eval.tasks.recorded._common import (
    Cursor,
    Transcript,
    blocks_text,
    expect,
    finish_task,
    guarded,
    iter_jsonl,
    json_text,
    openai_tool_calls,
    openai_tool_schema,
    read_text,
    stem,
)
from h9eval.tasks.recorded._format import RecordedFormat

__all__ = [
    "OPENAI",
    "ANTHROPIC",
    "classify_chat",
    "read_chat_file",
    "load_openai_chat",
    "load_anthropic_messages",
    "load_chat_many",
    "openai_task_from_messages",
]

OPENAI = "openai_chat"
ANTHROPIC = "anthropic_messages"
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
_EXPECTED = "a list of chat messages, {'messages': [...]}, or JSONL with one message per line"


def _messages_of(obj: Any) -> list[Any] | None:
    if isinstance(obj, list):
        return obj
    if isinstance(obj, dict) and isinstance(obj.get("messages"), list):
        return obj["messages"]
    return None


def classify_chat(obj: Any) -> str | None:
    """``openai_chat``, ``anthropic_messages`` or ``None`` for a parsed conversation."""
    msgs = _messages_of(obj)
    if not msgs or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in msgs[:20]):
        return None
    # Only the first 20 messages are checked to be objects: the rest may be anything here.
    if (
        isinstance(obj, dict)
        and "system" in obj
        and not any(isinstance(m, dict) and m.get("role") == "system" for m in msgs)
    ):
        return ANTHROPIC
    for m in msgs:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in c):
            return ANTHROPIC
    return OPENAI


def read_chat_file(path: Path, shown: str) -> list[tuple[str, Any]]:
    """The conversations in a chat file as ``(where, parsed object)`` pairs.

    A whole-file JSON value is one conversation; otherwise the file is read as JSONL: lines that
    are messages form one conversation, lines that hold ``{"messages": [...]}`` are one each.
    """
    text = read_text(path, shown=shown)
    try:
        return [("file", json.loads(text))]
    except json.JSONDecodeError as e:
        whole_err = e
    except RecursionError:
        raise FormatError("JSON nested too deeply", path=shown) from None
    lines = list(iter_jsonl(text, path=shown, expected=_EXPECTED)) if "\n" in text.strip() else []
    if not lines:
        raise FormatError(
            f"not valid JSON ({whole_err.msg}); expected {_EXPECTED}",
            path=shown,
            where=f"line {whole_err.lineno} column {whole_err.colno}",
        )
    if all(isinstance(v, dict) and isinstance(v.get("messages"), list) for _, v in lines):
        return [(f"line {n}", v) for n, v in lines]
    for n, v in lines:
        if not (isinstance(v, dict) and isinstance(v.get("role"), str)):
            raise FormatError("expected a chat message object with a string 'role'", path=shown, where=f"line {n}")
    return [("file", [v for _, v in lines])]


def load_openai_chat(path: str | Path) -> Task:
    """Load a file holding one OpenAI-style conversation (see module docstring)."""
    return _single(path, OPENAI)


def load_anthropic_messages(path: str | Path) -> Task:
    """Load a file holding one Anthropic Messages API conversation (see module docstring)."""
    return _single(path, ANTHROPIC)


def _single(path: str | Path, fmt: str) -> Task:
    shown = str(path)
    convs = read_chat_file(Path(path), shown)
    if len(convs) != 1:
        raise FormatError(
            f"file holds {len(convs)} conversations (one per line); load it with load_tasks()", path=shown
        )
    where, obj = convs[0]
    return _load_one(Path(path), shown, obj, fmt, session=stem(Path(path)), where=where)


def load_chat_many(path: str | Path, fmt: str | None = None) -> list[Task]:
    """Every conversation of a chat file (a JSONL of ``{"messages": [...]}`` gives several).

    ``fmt``: force ``openai_chat``/``anthropic_messages``; default: classify each one.
    """
    shown = str(path)
    p = Path(path)
    convs = read_chat_file(p, shown)
    out = []
    for k, (where, obj) in enumerate(convs):
        f = fmt or classify_chat(obj)
        if f is None:
            raise FormatError(f"not a chat conversation; expected {_EXPECTED}", path=shown, where=where)
        session = stem(p) if len(convs) == 1 else f"{stem(p)}#{_conv_id(obj, k)}"
        out.append(_load_one(p, shown, obj, f, session=session, where=where))
    return out


def _conv_id(obj: Any, k: int) -> str:
    for key in ("id", "conversation_id", "session_id"):
        v = obj.get(key) if isinstance(obj, dict) else None
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
            return str(v)
    return str(k)


def _load_one(p: Path, shown: str, obj: Any, fmt: str, *, session: str, where: str) -> Task:
    cur = Cursor(shown)
    cur.where = None if where == "file" else where
    with guarded(fmt, cur, _EXPECTED):
        msgs = _messages_of(obj)
        expect(msgs is not None, f"expected {_EXPECTED}, got {type(obj).__name__}", cur)
        assert msgs is not None
        counts: Counter[str] = Counter()
        tr = Transcript()
        prefix = "" if where == "file" else f"{where}: "
        if fmt == ANTHROPIC:
            system = obj.get("system") if isinstance(obj, dict) else None
            if system:
                cur.where = f"{prefix}system"
                tr.add(Message("system", blocks_text(system, counts, what="system", cursor=cur)))
            for i, m in enumerate(msgs):
                cur.where = f"{prefix}messages[{i}]"
                _anthropic_message(m, tr, counts, cur)
        else:
            for i, m in enumerate(msgs):
                cur.where = f"{prefix}messages[{i}]"
                _openai_message(m, tr, counts, cur)
        cur.where = None if where == "file" else where
        expect(bool(tr.messages), "conversation has no messages", cur)
        raw_tools = obj.get("tools") if isinstance(obj, dict) else None
        tools = (
            [t for t in (openai_tool_schema(x) for x in raw_tools or []) if t] if isinstance(raw_tools, list) else []
        )
        meta: dict[str, Any] = {
            "agent": None,
            "model": obj.get("model") if isinstance(obj, dict) and isinstance(obj.get("model"), str) else None,
            "thinking_blocks": counts.get("thinking_blocks", 0),
            "content_blocks_dropped": {k: v for k, v in sorted(counts.items()) if k != "thinking_blocks"},
        }
        return finish_task(fmt=fmt, session=session, path_shown=shown, path=p, tr=tr, tools=tools, metadata=meta)


def openai_task_from_messages(
    messages: Any,
    *,
    tools: Any,
    shown: str,
    session: str,
    fmt: str,
    n_bytes: int,
    metadata: dict[str, Any],
    where: str,
    source_kind: str = "dataset",
) -> Task:
    """A task from an in-memory list of OpenAI-style messages (a dataset row's trajectory, an
    Inspect log's sample): read as an ``openai_chat`` file would be, named by the row (``where``
    is its column, for errors)."""
    cur = Cursor(shown)
    with guarded(fmt, cur, _EXPECTED):
        cur.where = where
        expect(isinstance(messages, list), f"{where} must be a list of messages, got {type(messages).__name__}", cur)
        counts: Counter[str] = Counter()
        tr = Transcript()
        for i, m in enumerate(messages):
            cur.where = f"{where}[{i}]"
            _openai_message(m, tr, counts, cur)
        cur.where = where
        expect(bool(tr.messages), "conversation has no messages", cur)
        schemas = [t for t in (openai_tool_schema(x) for x in tools or []) if t] if isinstance(tools, list) else []
        meta = {
            **metadata,
            "thinking_blocks": counts.get("thinking_blocks", 0),
            "content_blocks_dropped": {k: v for k, v in sorted(counts.items()) if k != "thinking_blocks"},
        }
        return finish_task(
            fmt=fmt,
            session=session,
            path_shown=shown,
            path=Path(shown),
            tr=tr,
            tools=schemas,
            metadata=meta,
            source_kind=source_kind,
            n_bytes=n_bytes,
        )


def _role(m: Any, cur: Cursor) -> str:
    expect(isinstance(m, dict), f"expected a message object, got {type(m).__name__}", cur)
    role = m.get("role")
    expect(isinstance(role, str) and role != "", "message needs a non-empty string 'role'", cur)
    return role


def _openai_message(m: Any, tr: Transcript, counts: Counter[str], cur: Cursor) -> None:
    role = _role(m, cur)
    content = blocks_text(m.get("content"), counts, what="content", cursor=cur)
    calls = openai_tool_calls(m.get("tool_calls") or [], cur)
    tid = m.get("tool_call_id") or ""
    expect(isinstance(tid, str), "'tool_call_id' must be a string", cur)
    msg = Message(role, content, calls, tid, bool(m.get("is_error", False)))
    if role == "user" and not tid:
        tr.add_prompt(msg)
    else:
        tr.add(msg)


def _anthropic_message(m: Any, tr: Transcript, counts: Counter[str], cur: Cursor) -> None:
    role = _role(m, cur)
    content = m.get("content")
    if isinstance(content, str) or content is None:
        msg = Message(role, content or "")
        tr.add_prompt(msg) if role == "user" else tr.add(msg)
        return
    expect(isinstance(content, list), "'content' must be a string or a list of blocks", cur)
    texts: list[Any] = []
    calls: list[ToolCall] = []
    n_results = 0
    for k, b in enumerate(content):
        expect(isinstance(b, dict), f"content[{k}] must be a block object", cur)
        t = b.get("type")
        if t == "tool_use":
            tid, name = b.get("id"), b.get("name")
            expect(isinstance(tid, str) and tid != "", f"content[{k}] tool_use needs a non-empty string 'id'", cur)
            expect(isinstance(name, str), f"content[{k}] tool_use needs a string 'name'", cur)
            calls.append(ToolCall(tid, name, json_text(b.get("input", {}))))
        elif t == "tool_result":
            tid = b.get("tool_use_id")
            expect(
                isinstance(tid, str) and tid != "",
                f"content[{k}] tool_result needs a non-empty string 'tool_use_id'",
                cur,
            )
            out = blocks_text(b.get("content"), counts, what=f"content[{k}].content", cursor=cur)
            tr.add(Message("tool", out, (), tid, bool(b.get("is_error", False))))
            n_results += 1
        else:
            texts.append(b)
    text = blocks_text(texts, counts, what="content", cursor=cur) if texts else ""
    if role == "assistant":
        tr.add(Message("assistant", text, tuple(calls)))
        return
    expect(not calls, "tool_use blocks are only valid in assistant messages", cur)
    if texts or not n_results:
        msg = Message(role, text)
        tr.add_prompt(msg) if role == "user" and text.strip() else tr.add(msg)


def _jsonl_is(fmt: str) -> Callable[[Any, Path], bool]:
    """A JSON-lines file of ``fmt``: its first record is a message or a conversation, and its first
    conversation classifies as ``fmt``."""

    def test(first: Any, path: Path) -> bool:
        shaped = isinstance(first, dict) and (
            isinstance(first.get("role"), str) or isinstance(first.get("messages"), list)
        )
        if not shaped:
            return False
        return classify_chat(read_chat_file(path, str(path))[0][1]) == fmt

    return test


RECORDED_FORMATS = tuple(
    RecordedFormat(
        name=fmt,
        described=described,
        detect_order=order,  # after h9eval's task lines, which hold "messages" too
        listed_order=order + 10,
        load=load,
        load_all=lambda path, fmt=fmt: load_chat_many(path, fmt),
        matches_json=lambda obj, fmt=fmt: classify_chat(obj) == fmt,
        matches_jsonl=_jsonl_is(fmt),
    )
    for fmt, described, order, load in (
        (OPENAI, "an OpenAI chat-messages JSON/JSONL", 40, load_openai_chat),
        (ANTHROPIC, "an Anthropic Messages JSON", 41, load_anthropic_messages),
    )
)
