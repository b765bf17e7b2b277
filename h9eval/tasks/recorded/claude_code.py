"""Claude Code session JSONL (``~/.claude/projects/<project>/<sessionId>.jsonl``) → Task.

Mapping (decisions documented here, tested in ``tests/test_recorded.py``):

* ``assistant`` records sharing ``message.id`` are one API response split one content block
  per record; they become **one** assistant message placed where the first block appeared.
  Claude Code starts running a tool as soon as its ``tool_use`` block has streamed, so tool
  results can sit *between* blocks of the same response; merging restores what the model saw on
  its next call (all calls, then all results). Text blocks are joined with a blank line
  (whitespace-only blocks dropped); ``tool_use`` → :class:`ToolCall` with ``input`` as compact
  JSON text; ``thinking`` blocks are dropped and counted in ``metadata["thinking_blocks"]``.
* ``user`` records: a string is a user message (the first one that is not harness text, i.e.
  not ``isMeta`` and not ``<command-...>``/``<local-command-...>``/``<system-reminder>``/
  ``[Request interrupted``, is the task; later ones are intent refinements); ``isMeta`` text
  (skill bodies, caveats) is kept with ``meta={"is_meta": True}``; ``tool_result`` blocks →
  ``Message(role="tool", tool_call_id=tool_use_id, is_error=...)`` (list content: text joined,
  images as ``[image]``); other blocks of the same record → one user message after the results.
* Compaction: the ``system``/``compact_boundary`` record and the following ``isCompactSummary``
  user record go to ``metadata["compactions"]`` (``message_index`` of the summary, ``summary``,
  ``trigger``, ``pre_tokens``, ``record``). The summary message is **kept** in the transcript
  with ``meta={"is_compact_summary": True}`` by default, because every later turn was
  produced after the model read it; pass ``keep_compact_summary=False`` to drop it (then
  ``message_index`` is where it would have been).
* Bills: every assistant response's recorded ``message.usage`` (``input_tokens``,
  ``cache_creation_input_tokens`` with its 5m/1h split, ``cache_read_input_tokens``,
  ``output_tokens``), its model and the timestamp of its first record go to
  ``metadata["recorded_calls"]`` (one entry per response, ``message_index`` of the merged
  assistant message); a compaction entry also has its boundary's ``timestamp``. The billing
  model's validation (:mod:`h9eval.studies.bills`) compares its predictions with these.
* Sidechain (subagent) files load as their own task (id ``claude_code:<sessionId>/agent-<id>``,
  ``metadata["agent_kind"] == "compaction"`` for ``agent-acompact-*``). Sidechain records
  inside a main file, ``progress``, ``file-history-snapshot``, ``queue-operation`` and other
  ``system`` subtypes are skipped and counted in ``metadata["skipped_records"]``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
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
    read_text,
    returncode_from_text,
    stem,
)
from h9eval.tasks.recorded._format import RecordedFormat

__all__ = ["COMPACTION_CALL_PREFIX", "FORMAT", "is_compaction_call_file", "load_claude_code", "looks_like_claude_code"]

FORMAT = "claude_code"
COMPACTION_CALL_PREFIX = "agent-acompact-"
"""File-name prefix of Claude Code's own compaction calls (``subagents/agent-acompact-*.jsonl``):
the summarisation prompt and its reply, not an agent's work."""


def is_compaction_call_file(path: str | Path) -> bool:
    """Whether ``path`` is one of Claude Code's own compaction-call transcripts: folder
    discovery leaves them out (a compaction call is not a task to compact); naming the file
    still loads it (``metadata["agent_kind"] == "compaction"``)."""
    return Path(path).name.startswith(COMPACTION_CALL_PREFIX)


_EXPECTED = "one Claude Code session record (a JSON object with 'type') per line"
_CONVERSATION_TYPES = frozenset({"user", "assistant"})
_KNOWN_TYPES = frozenset(
    {"user", "assistant", "system", "progress", "file-history-snapshot", "queue-operation", "summary", "result"}
)
_HARNESS_PREFIXES = (
    "<command-",
    "<local-command",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "Caveat: ",
    "[Request interrupted",
)


def looks_like_claude_code(first: Any) -> bool:
    """True for a first JSONL record written by Claude Code."""
    if not isinstance(first, dict) or not isinstance(first.get("type"), str):
        return False
    if first["type"] not in _KNOWN_TYPES:
        return False
    return any(k in first for k in ("sessionId", "uuid", "parentUuid", "leafUuid", "messageId", "isSidechain"))


@dataclass
class _Asst:
    """An assistant response being merged from its per-block records."""

    msg_id: str | None
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)

    def build(self) -> Message:
        text = "\n\n".join(t for t in self.texts if t.strip())
        return Message("assistant", text, tuple(self.calls))


def load_claude_code(path: str | Path, *, keep_compact_summary: bool = True) -> Task:
    """Load one Claude Code session (or subagent) JSONL file.

    ``keep_compact_summary``: keep the ``isCompactSummary`` user message in the transcript
    (default ``True``; see module docstring).
    """
    shown = str(path)
    p = Path(path)
    text = read_text(p, shown=shown)
    cur = Cursor(shown)
    with guarded(FORMAT, cur, _EXPECTED):
        return _load(p, shown, text, cur, keep_compact_summary)


@dataclass
class _State:
    """What one pass over the session's records builds."""

    cur: Cursor
    keep_summary: bool
    slots: list[Message | _Asst] = field(default_factory=list)
    returncodes: dict[int, int] = field(default_factory=dict)
    prompts: list[int] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    blocks: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    recorded_calls: list[dict[str, Any]] = field(default_factory=list)
    open_asst: _Asst | None = None
    file_sidechain: bool | None = None
    first_conv: dict[str, Any] | None = None
    first_model: str | None = None
    n_records: int = 0
    by_type: Counter[str] = field(default_factory=Counter)


def _load(p: Path, shown: str, text: str, cur: Cursor, keep_summary: bool) -> Task:
    st = _State(cur, keep_summary)
    for n, rec in iter_jsonl(text, path=shown, expected=_EXPECTED):
        cur.where = f"line {n}"
        st.n_records += 1
        expect(isinstance(rec, dict), f"expected a JSON object, got {type(rec).__name__}", cur)
        rtype = rec.get("type")
        st.by_type[rtype if isinstance(rtype, str) else "(no type)"] += 1
        if not isinstance(rtype, str):
            st.skipped["(no type)"] += 1
            continue
        handler = _RECORD_HANDLERS.get(rtype)
        if handler is None:
            st.skipped[rtype] += 1
            continue
        handler(st, n, rec)
    cur.where = None
    if not st.slots:
        raise FormatError("no user or assistant records; expected a Claude Code session", path=shown)
    return _task(p, shown, st)


def _on_system(st: _State, n: int, rec: Any) -> None:
    sub = rec.get("subtype")
    if sub != "compact_boundary":
        st.skipped[f"system/{sub}"] += 1
        return
    cm = rec.get("compactMetadata") if isinstance(rec.get("compactMetadata"), dict) else {}
    st.compactions.append(
        {
            "message_index": len(st.slots),
            "record": f"line {n}",
            "trigger": cm.get("trigger"),
            "pre_tokens": cm.get("preTokens"),
            "summary": None,
            "timestamp": rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None,
        }
    )


def _message_of(st: _State, rec: Any, rtype: str) -> Any:
    """The ``message`` of a user/assistant record, or ``None`` for a record of the other chain."""
    side = bool(rec.get("isSidechain", False))
    if st.file_sidechain is None:
        st.file_sidechain = side
        st.first_conv = rec
    elif side != st.file_sidechain:
        # Older Claude Code wrote subagent turns into the main file; they are their own task.
        st.skipped["sidechain" if side else "main_chain"] += 1
        return None
    msg = rec.get("message")
    expect(isinstance(msg, dict), f"{rtype} record needs a 'message' object", st.cur)
    return msg


def _on_assistant(st: _State, n: int, rec: Any) -> None:
    msg = _message_of(st, rec, "assistant")
    if msg is None:
        return
    mid = msg.get("id") if isinstance(msg.get("id"), str) else None
    if st.open_asst is None or mid is None or st.open_asst.msg_id != mid:
        st.open_asst = _Asst(mid)
        st.slots.append(st.open_asst)
        model = msg.get("model")
        if isinstance(model, str):
            st.models[model] += 1
            st.first_model = st.first_model or model
        st.recorded_calls.append(_recorded_call(len(st.slots) - 1, rec, msg))
    _assistant_blocks(st.open_asst, msg.get("content"), st.blocks, st.cur)


def _on_user(st: _State, n: int, rec: Any) -> None:
    msg = _message_of(st, rec, "user")
    if msg is None:
        return
    content = msg.get("content")
    if rec.get("isCompactSummary"):
        _compact_summary(st, n, content)
        return
    is_meta = bool(rec.get("isMeta"))
    if isinstance(content, str):
        st.slots.append(Message("user", content, meta={"is_meta": True} if is_meta else None))
        if not is_meta and not content.lstrip().startswith(_HARNESS_PREFIXES):
            st.prompts.append(len(st.slots) - 1)
        return
    expect(isinstance(content, list), "user message.content must be a string or a list of blocks", st.cur)
    _user_blocks(st, content, is_meta)


def _compact_summary(st: _State, n: int, content: Any) -> None:
    summary = blocks_text(content, st.blocks, what="message.content", cursor=st.cur)
    if st.compactions and st.compactions[-1]["summary"] is None:
        entry = st.compactions[-1]
    else:  # a summary without its boundary record: still a compaction
        entry = {"message_index": len(st.slots), "record": None, "trigger": None, "pre_tokens": None}
        st.compactions.append(entry)
    entry.update(message_index=len(st.slots), summary=summary, summary_record=f"line {n}")
    if st.keep_summary:
        st.slots.append(Message("user", summary, meta={"is_compact_summary": True}))


def _user_blocks(st: _State, content: list[Any], is_meta: bool) -> None:
    """``tool_result`` blocks become tool messages; the other blocks one user message after them."""
    cur = st.cur
    other: list[Any] = []
    for b in content:
        expect(isinstance(b, dict), f"content block must be an object, got {type(b).__name__}", cur)
        if b.get("type") != "tool_result":
            other.append(b)
            continue
        tid = b.get("tool_use_id")
        expect(isinstance(tid, str) and tid != "", "tool_result block needs a non-empty string 'tool_use_id'", cur)
        out = blocks_text(b.get("content"), st.blocks, what="tool_result content", cursor=cur)
        is_error = bool(b.get("is_error"))
        st.slots.append(Message("tool", out, (), tid, is_error))
        if is_error and (rc := returncode_from_text(out)) is not None:
            st.returncodes[len(st.slots) - 1] = rc
    if other:
        txt = blocks_text(other, st.blocks, what="message.content", cursor=cur)
        st.slots.append(Message("user", txt, meta={"is_meta": True} if is_meta else None))
        if not is_meta and txt.strip() and not txt.lstrip().startswith(_HARNESS_PREFIXES):
            st.prompts.append(len(st.slots) - 1)


def _recorded_call(message_index: int, rec: Any, msg: Any) -> dict[str, Any]:
    """One response's recorded bill: model, timestamp and usage (``None`` where not recorded)."""
    usage = msg.get("usage") if isinstance(msg.get("usage"), dict) else {}
    split = usage.get("cache_creation") if isinstance(usage.get("cache_creation"), dict) else {}

    def count(d: Any, key: str) -> int | None:
        v = d.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return {
        "message_index": message_index,
        "timestamp": rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None,
        "model": msg.get("model") if isinstance(msg.get("model"), str) else None,
        "input_tokens": count(usage, "input_tokens"),
        "cache_creation_input_tokens": count(usage, "cache_creation_input_tokens"),
        "cache_creation_5m_tokens": count(split, "ephemeral_5m_input_tokens"),
        "cache_creation_1h_tokens": count(split, "ephemeral_1h_input_tokens"),
        "cache_read_input_tokens": count(usage, "cache_read_input_tokens"),
        "output_tokens": count(usage, "output_tokens"),
    }


_RECORD_HANDLERS: dict[str, Callable[[_State, int, Any], None]] = {
    "system": _on_system,
    "assistant": _on_assistant,
    "user": _on_user,
}
"""The handler of each record type; other types are skipped and counted."""


def _task(p: Path, shown: str, st: _State) -> Task:
    """The task of a read session: the merged transcript, session id and metadata."""
    tr = Transcript()
    for s in st.slots:
        tr.add(s.build() if isinstance(s, _Asst) else s)
    tr.returncodes = st.returncodes
    tr.user_prompts = [(i, tr.messages[i].content) for i in st.prompts]

    file_sidechain = st.file_sidechain
    first_conv = st.first_conv or {}
    tr.cwd = first_conv.get("cwd") if isinstance(first_conv.get("cwd"), str) else None
    session_id = first_conv.get("sessionId") if isinstance(first_conv.get("sessionId"), str) else stem(p)
    agent_id = first_conv.get("agentId") if isinstance(first_conv.get("agentId"), str) else None
    session = session_id
    if file_sidechain:
        session = f"{session_id}/agent-{agent_id or stem(p).removeprefix('agent-')}"
    meta: dict[str, Any] = {
        "agent": "claude-code",
        "variant": "subagent" if file_sidechain else "main",
        "model": st.first_model,
        "models": dict(sorted(st.models.items())),
        "claude_code_version": first_conv.get("version"),
        "cwd": first_conv.get("cwd"),
        "git_branch": first_conv.get("gitBranch"),
        "is_sidechain": bool(file_sidechain),
        "agent_id": agent_id,
        "n_records": st.n_records,
        "records_by_type": dict(sorted(st.by_type.items())),
        "thinking_blocks": st.blocks.get("thinking_blocks", 0),
        "content_blocks_dropped": {k: v for k, v in sorted(st.blocks.items()) if k != "thinking_blocks"},
        "compactions": st.compactions,
        "recorded_calls": st.recorded_calls,
        "compact_summary_in_transcript": st.keep_summary,
    }
    if file_sidechain:
        meta["agent_kind"] = (
            "compaction" if (agent_id or stem(p)).removeprefix("agent-").startswith("acompact") else "subagent"
        )
    return finish_task(fmt=FORMAT, session=session, path_shown=shown, path=p, tr=tr, metadata=meta, skipped=st.skipped)


def _assistant_blocks(a: _Asst, content: Any, counts: Counter[str], cur: Cursor) -> None:
    if isinstance(content, str):
        a.texts.append(content)
        return
    expect(isinstance(content, list), "assistant message.content must be a list of blocks", cur)
    for b in content:
        expect(isinstance(b, dict), f"content block must be an object, got {type(b).__name__}", cur)
        t = b.get("type")
        if t == "text":
            txt = b.get("text", "")
            expect(isinstance(txt, str), "text block needs a string 'text'", cur)
            a.texts.append(txt)
        elif t == "tool_use":
            tid, name = b.get("id"), b.get("name")
            expect(isinstance(tid, str) and tid != "", "tool_use block needs a non-empty string 'id'", cur)
            expect(isinstance(name, str), "tool_use block needs a string 'name'", cur)
            a.calls.append(ToolCall(tid, name, json_text(b.get("input", {}))))
        elif t in ("thinking", "redacted_thinking"):
            counts["thinking_blocks"] += 1
        else:
            counts[f"assistant:{t}"] += 1


RECORDED_FORMATS = (
    RecordedFormat(
        name=FORMAT,
        described="a Claude Code JSONL session",
        # after every JSON format's own test: a one-record Claude Code file is the least specific shape
        detect_order=90,
        listed_order=10,
        load=load_claude_code,
        options=frozenset({"keep_compact_summary"}),
        matches_json=looks_like_claude_code,
        matches_jsonl=lambda first, _path: looks_like_claude_code(first),
        skip_file=is_compaction_call_file,
    ),
)
