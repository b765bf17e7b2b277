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
* Sidechain (subagent) files load as their own task (id ``claude_code:<sessionId>/agent-<id>``,
  ``metadata["agent_kind"] == "compaction"`` for ``agent-acompact-*``). Sidechain records
  inside a main file, ``progress``, ``file-history-snapshot``, ``queue-operation`` and other
  ``system`` subtypes are skipped and counted in ``metadata["skipped_records"]``.
"""

from __future__ import annotations

from collections import Counter
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

__all__ = ["FORMAT", "load_claude_code", "looks_like_claude_code"]

FORMAT = "claude_code"
_EXPECTED = "one Claude Code session record (a JSON object with 'type') per line"
_CONVERSATION_TYPES = frozenset({"user", "assistant"})
_KNOWN_TYPES = frozenset(
    {"user", "assistant", "system", "progress", "file-history-snapshot", "queue-operation", "summary", "result"}
)
_HARNESS_PREFIXES = (
    "<command-", "<local-command", "<system-reminder>", "<user-prompt-submit-hook>", "Caveat: ", "[Request interrupted",
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


def _load(p: Path, shown: str, text: str, cur: Cursor, keep_summary: bool) -> Task:
    slots: list[Message | _Asst] = []
    returncodes: dict[int, int] = {}
    prompts: list[int] = []
    skipped: Counter[str] = Counter()
    blocks: Counter[str] = Counter()
    models: Counter[str] = Counter()
    compactions: list[dict[str, Any]] = []
    open_asst: _Asst | None = None
    file_sidechain: bool | None = None
    first_conv: dict[str, Any] | None = None
    first_model: str | None = None
    n_records = 0
    by_type: Counter[str] = Counter()

    for n, rec in iter_jsonl(text, path=shown, expected=_EXPECTED):
        cur.where = f"line {n}"
        n_records += 1
        expect(isinstance(rec, dict), f"expected a JSON object, got {type(rec).__name__}", cur)
        rtype = rec.get("type")
        by_type[rtype if isinstance(rtype, str) else "(no type)"] += 1
        if not isinstance(rtype, str):
            skipped["(no type)"] += 1
            continue
        if rtype == "system":
            sub = rec.get("subtype")
            if sub == "compact_boundary":
                cm = rec.get("compactMetadata") if isinstance(rec.get("compactMetadata"), dict) else {}
                compactions.append(
                    {
                        "message_index": len(slots),
                        "record": f"line {n}",
                        "trigger": cm.get("trigger"),
                        "pre_tokens": cm.get("preTokens"),
                        "summary": None,
                    }
                )
            else:
                skipped[f"system/{sub}"] += 1
            continue
        if rtype not in _CONVERSATION_TYPES:
            skipped[rtype] += 1
            continue
        side = bool(rec.get("isSidechain", False))
        if file_sidechain is None:
            file_sidechain = side
            first_conv = rec
        elif side != file_sidechain:
            # Older Claude Code wrote subagent turns into the main file; they are their own task.
            skipped["sidechain" if side else "main_chain"] += 1
            continue
        msg = rec.get("message")
        expect(isinstance(msg, dict), f"{rtype} record needs a 'message' object", cur)
        content = msg.get("content")
        if rtype == "assistant":
            mid = msg.get("id") if isinstance(msg.get("id"), str) else None
            if open_asst is None or mid is None or open_asst.msg_id != mid:
                open_asst = _Asst(mid)
                slots.append(open_asst)
                model = msg.get("model")
                if isinstance(model, str):
                    models[model] += 1
                    first_model = first_model or model
            _assistant_blocks(open_asst, content, blocks, cur)
            continue
        # user record
        if rec.get("isCompactSummary"):
            summary = blocks_text(content, blocks, what="message.content", cursor=cur)
            if compactions and compactions[-1]["summary"] is None:
                entry = compactions[-1]
            else:  # a summary without its boundary record: still a compaction
                entry = {"message_index": len(slots), "record": None, "trigger": None, "pre_tokens": None}
                compactions.append(entry)
            entry.update(message_index=len(slots), summary=summary, summary_record=f"line {n}")
            if keep_summary:
                slots.append(Message("user", summary, meta={"is_compact_summary": True}))
            continue
        is_meta = bool(rec.get("isMeta"))
        if isinstance(content, str):
            slots.append(Message("user", content, meta={"is_meta": True} if is_meta else None))
            if not is_meta and not content.lstrip().startswith(_HARNESS_PREFIXES):
                prompts.append(len(slots) - 1)
            continue
        expect(isinstance(content, list), "user message.content must be a string or a list of blocks", cur)
        other: list[Any] = []
        for b in content:
            expect(isinstance(b, dict), f"content block must be an object, got {type(b).__name__}", cur)
            if b.get("type") != "tool_result":
                other.append(b)
                continue
            tid = b.get("tool_use_id")
            expect(isinstance(tid, str) and tid != "", "tool_result block needs a non-empty string 'tool_use_id'", cur)
            out = blocks_text(b.get("content"), blocks, what="tool_result content", cursor=cur)
            is_error = bool(b.get("is_error"))
            slots.append(Message("tool", out, (), tid, is_error))
            if is_error and (rc := returncode_from_text(out)) is not None:
                returncodes[len(slots) - 1] = rc
        if other:
            txt = blocks_text(other, blocks, what="message.content", cursor=cur)
            slots.append(Message("user", txt, meta={"is_meta": True} if is_meta else None))
            if not is_meta and txt.strip() and not txt.lstrip().startswith(_HARNESS_PREFIXES):
                prompts.append(len(slots) - 1)

    cur.where = None
    if not slots:
        raise FormatError("no user or assistant records; expected a Claude Code session", path=shown)
    tr = Transcript()
    for s in slots:
        tr.add(s.build() if isinstance(s, _Asst) else s)
    tr.returncodes = returncodes
    tr.user_prompts = [(i, tr.messages[i].content) for i in prompts]

    first_conv = first_conv or {}
    tr.cwd = first_conv.get("cwd") if isinstance(first_conv.get("cwd"), str) else None
    session_id = first_conv.get("sessionId") if isinstance(first_conv.get("sessionId"), str) else stem(p)
    agent_id = first_conv.get("agentId") if isinstance(first_conv.get("agentId"), str) else None
    session = session_id
    if file_sidechain:
        session = f"{session_id}/agent-{agent_id or stem(p).removeprefix('agent-')}"
    meta: dict[str, Any] = {
        "agent": "claude-code",
        "variant": "subagent" if file_sidechain else "main",
        "model": first_model,
        "models": dict(sorted(models.items())),
        "claude_code_version": first_conv.get("version"),
        "cwd": first_conv.get("cwd"),
        "git_branch": first_conv.get("gitBranch"),
        "is_sidechain": bool(file_sidechain),
        "agent_id": agent_id,
        "n_records": n_records,
        "records_by_type": dict(sorted(by_type.items())),
        "thinking_blocks": blocks.get("thinking_blocks", 0),
        "content_blocks_dropped": {k: v for k, v in sorted(blocks.items()) if k != "thinking_blocks"},
        "compactions": compactions,
        "compact_summary_in_transcript": keep_summary,
    }
    if file_sidechain:
        meta["agent_kind"] = "compaction" if (agent_id or stem(p)).removeprefix("agent-").startswith("acompact") else "subagent"
    return finish_task(fmt=FORMAT, session=session, path_shown=shown, path=p, tr=tr, metadata=meta, skipped=skipped)


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
