"""How the scripted agent reads a view: calls with their results, notes, summaries, the task.

A :class:`ReaderProfile` decides what the agent trusts:

* ``full``: tool results, its own notes (assistant message text), compaction summaries and
  anchors, user messages;
* ``raw_only``: only tool results (raw text, offload previews and re-fetched files) and user
  messages: a summary's claim or the agent's own note counts for nothing;
* ``last_k``: like ``full`` but only the system message, the first other message (the task,
  or the summary that replaced it) and the last ``last_k_messages``: a reader that loses the
  middle of a long context.

Offload placeholders (harness9's tool-time ``[输出已保存至 <path>，...`` and compaction-time
``[offloaded: <path> | ...``) are recognised; the path is kept so the agent can re-fetch it, and
a visible ``read_file`` of that path stands in for the original result.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from h9eval.compaction.anchors import COMPACTION_MARKER
from h9eval.core.messages import Message
from h9eval.core.errors import ConfigError

__all__ = ["PROFILES", "ReaderProfile", "Reading", "SeenCall", "offload_path", "read_view"]

_HOOK_PATH = re.compile(r"^\[输出已保存至 (\S+?)，")
_COMPACT_PATH = re.compile(r"^\[offloaded: (\S+) \|")


@dataclass(frozen=True, kw_only=True)
class ReaderProfile:
    """What the scripted agent reads (see the module docstring)."""

    name: str
    read_notes: bool = True
    read_summaries: bool = True
    #: read only the system message, the first other message and this many last ones (``None``: all)
    last_k_messages: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("ReaderProfile.name must be non-empty")
        if self.last_k_messages is not None and self.last_k_messages < 1:
            raise ConfigError(f"ReaderProfile.last_k_messages must be >= 1 or None, got {self.last_k_messages!r}")


PROFILES: dict[str, ReaderProfile] = {
    "full": ReaderProfile(name="full"),
    "raw_only": ReaderProfile(name="raw_only", read_notes=False, read_summaries=False),
    "last_k": ReaderProfile(name="last_k", last_k_messages=8),
}


def offload_path(content: str) -> str | None:
    """The file path an offload placeholder names, or ``None``."""
    m = _HOOK_PATH.match(content) or _COMPACT_PATH.match(content)
    return m.group(1) if m else None


@dataclass(frozen=True, kw_only=True)
class SeenCall:
    """A tool call visible in the view, with what the agent can read of its result."""

    position: int
    call_id: str
    name: str
    args: dict[str, Any]
    #: the readable result text (raw, offload preview, or the re-fetched file); ``None`` when no result is visible
    result: str | None
    #: the result is an offload placeholder whose file was not read back in view
    placeholder_path: str | None
    is_error: bool

    def arg(self, key: str) -> str:
        v = self.args.get(key, "")
        return v if isinstance(v, str) else json.dumps(v)


@dataclass(frozen=True, kw_only=True)
class Reading:
    """Everything the agent trusts in one view."""

    system: str
    calls: tuple[SeenCall, ...]
    notes: tuple[str, ...]
    summaries: tuple[str, ...]
    user_texts: tuple[str, ...]
    #: the last visible message (what the agent's note describes)
    last: Message | None

    def texts(self) -> tuple[str, ...]:
        """Every trusted text, oldest first: results, notes, summaries, user messages."""
        results = tuple(c.result for c in self.calls if c.result is not None)
        return self.user_texts + self.summaries + results + self.notes

    def calls_named(self, name: str) -> tuple[SeenCall, ...]:
        return tuple(c for c in self.calls if c.name == name)

    def search(self, pattern: re.Pattern[str]) -> list[re.Match[str]]:
        return [m for t in self.texts() for m in _matches(pattern, t)]


def read_view(messages: tuple[Message, ...], profile: ReaderProfile) -> Reading:
    """Build a :class:`Reading` from the view's messages under ``profile``."""
    system = "\n".join(m.content for m in messages if m.role == "system")
    body = [m for m in messages if m.role != "system"]
    if profile.last_k_messages is not None and len(body) > profile.last_k_messages + 1:
        # primacy and recency: the first message (the task, or the summary standing in for it)
        # and the last k, as attention over a long context is often described
        body = body[:1] + body[-profile.last_k_messages :]
    results: dict[str, Message] = {}
    for m in body:
        if m.is_tool_result and m.tool_call_id not in results:
            results[m.tool_call_id] = m
    # read_file results by path: a re-fetch of an offloaded result stands in for it
    refetched: dict[str, str] = {}
    for m in body:
        if m.is_assistant:
            for tc in m.tool_calls:
                if tc.name == "read_file" and tc.id in results:
                    path = _args(tc.arguments).get("path")
                    r = results[tc.id]
                    if isinstance(path, str) and not r.is_error and offload_path(r.content) is None:
                        refetched.setdefault(path, r.content)
    calls: list[SeenCall] = []
    notes: list[str] = []
    summaries: list[str] = []
    users: list[str] = []
    for i, m in enumerate(body):
        if m.is_assistant:
            if m.content and profile.read_notes:
                notes.append(m.content)
            for tc in m.tool_calls:
                res = results.get(tc.id)
                text = res.content if res is not None else None
                path = offload_path(text) if text is not None else None
                if path is not None and path in refetched:
                    text, path = refetched[path], None
                calls.append(
                    SeenCall(
                        position=i,
                        call_id=tc.id,
                        name=tc.name,
                        args=_args(tc.arguments),
                        result=text,
                        placeholder_path=path,
                        is_error=bool(res is not None and res.is_error),
                    )
                )
        elif m.is_tool_result:
            continue
        elif m.content.lstrip().startswith(COMPACTION_MARKER):
            if profile.read_summaries:
                summaries.append(m.content)
        elif m.role == "user":
            users.append(m.content)
    return Reading(
        system=system,
        calls=tuple(calls),
        notes=tuple(notes),
        summaries=tuple(summaries),
        user_texts=tuple(users),
        last=body[-1] if body else None,
    )


def _args(text: str) -> dict[str, Any]:
    """A tool call's arguments (a fresh copy of the memoised parse: callers may not share it)."""
    return dict(_parsed_args(text))


@functools.lru_cache(maxsize=65_536)
def _matches(pattern: re.Pattern[str], text: str) -> tuple[re.Match[str], ...]:
    """Every match of ``pattern`` in ``text``, memoised: a view's texts recur at every later
    step, and scanning each once keeps a step's cost from growing with the history."""
    return tuple(pattern.finditer(text))


@functools.lru_cache(maxsize=65_536)
def _parsed_args(text: str) -> dict[str, Any]:
    try:
        v = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return v if isinstance(v, dict) else {}
