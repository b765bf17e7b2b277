"""OpenHands agent-sdk (V1) conversation folder → Task.

Layout: ``<conversation>/event_service/base_state.json`` and
``<conversation>/event_service/events/event-NNNNN-<uuid>.json`` (ordered by ``NNNNN``). The
path may be the conversation folder or its ``event_service`` folder.

* ``SystemPromptEvent`` → system message (``system_prompt.text``); its ``tools``
  (``{"type": "function", "function": {name, description, parameters}}``) → ``Task.tools``
  as ``{name, description, input_schema}``.
* ``MessageEvent`` → a user (``source == "user"``) or assistant message with the text blocks
  of ``llm_message.content`` (plus ``extended_content`` text, which the SDK appends).
* ``ActionEvent`` → assistant message: ``thought`` text blocks as content, one tool call
  ``ToolCall(id=tool_call_id, name=tool_name, arguments=tool_call.function.arguments)``.
  Consecutive actions with the same ``llm_response_id`` are one model response (parallel tool
  calls) and are merged into one message. ``reasoning_content``/``thinking_blocks`` are dropped
  and counted.
* ``ObservationEvent`` → ``Message(role="tool", tool_call_id=...)`` whose content is the
  observation's ``output`` (``ExecuteBashObservation``, ``StrReplaceEditorObservation``), else
  ``content`` (``ThinkObservation``), else ``message`` (``FinishObservation``), else its
  ``error``. ``is_error`` is the observation's ``error`` flag/text (a tool error); a non-zero
  ``metadata.exit_code`` is a failed command for the derived facts but not ``is_error``.
  ``AgentErrorEvent``/``UserRejectObservation`` with a ``tool_call_id`` → an ``is_error``
  tool result. This approximates the SDK's ``to_llm_content`` (which adds e.g. the exit code
  and working directory around bash output); the bytes differ slightly.
* ``Condensation`` → ``metadata["condensations"]``: ``message_index`` (messages before it),
  ``event`` (file name), ``summary``, ``summary_offset``, ``n_forgotten_events`` and
  ``forgotten_message_indices`` (the messages it removed from the agent's view).
* Other event kinds are skipped and counted in ``metadata["skipped_records"]``.
"""

from __future__ import annotations

import re
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
    Outcome,
    Transcript,
    blocks_text,
    expect,
    finish_task,
    guarded,
    json_text,
    openai_tool_schema,
    parse_json,
    read_text,
)
from h9eval.tasks.recorded._format import RecordedFormat

__all__ = ["FORMAT", "load_openhands", "find_event_dir", "is_openhands_dir"]

FORMAT = "openhands"
_EXPECTED = "an OpenHands V1 event object with 'kind'"
_EVENT_FILE = re.compile(r"^event-(\d+)-.*\.json$")


def find_event_dir(path: Path) -> Path | None:
    """The ``events`` folder of a conversation folder (or of its ``event_service``)."""
    for cand in (path / "event_service" / "events", path / "events"):
        if cand.is_dir():
            return cand
    if path.name == "events" and path.parent.name == "event_service" and path.is_dir():
        return path
    return None


def is_openhands_dir(path: Path) -> bool:
    """True for a folder that looks like an OpenHands V1 conversation."""
    try:
        ev = find_event_dir(path)
        if ev is None:
            return False
        return (ev.parent / "base_state.json").is_file() or any(_EVENT_FILE.match(p.name) for p in ev.iterdir())
    except OSError:
        return False


def load_openhands(path: str | Path) -> Task:
    """Load one OpenHands V1 conversation folder (see module docstring)."""
    shown = str(path)
    p = Path(path)
    if not p.is_dir():
        raise FormatError("expected an OpenHands conversation folder (with event_service/events/)", path=shown)
    ev_dir = find_event_dir(p)
    if ev_dir is None:
        raise FormatError(
            "folder has no event_service/events/ subfolder; expected an OpenHands V1 conversation folder", path=shown
        )
    cur = Cursor(shown)
    with guarded(FORMAT, cur, _EXPECTED):
        return _load(p, shown, ev_dir, cur)


@dataclass
class _State:
    """What one pass over the conversation's events builds."""

    cur: Cursor
    tr: Transcript = field(default_factory=Transcript)
    tools: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    event_index: dict[str, int] = field(default_factory=dict)  # event id -> its message
    condensations: list[dict[str, Any]] = field(default_factory=list)
    # the assistant response being merged from consecutive actions
    last_resp: str | None = None
    asst_content: str = ""
    asst_calls: list[ToolCall] = field(default_factory=list)
    asst_slot: int | None = None
    finish_at: int | None = None
    finish_msg: str | None = None
    cwd: str | None = None

    def flush(self) -> None:
        if self.asst_slot is not None:
            self.tr.messages[self.asst_slot] = Message("assistant", self.asst_content, tuple(self.asst_calls))
            self.asst_slot = None


def _event_files(p: Path, shown: str, ev_dir: Path, skipped: Counter[str]) -> list[tuple[int, str, Path]]:
    """``(number, name, path)`` of the event files, in event order."""
    files: list[tuple[int, str, Path]] = []
    for f in ev_dir.iterdir():
        m = _EVENT_FILE.match(f.name)
        if m and f.is_file():
            files.append((int(m.group(1)), f.name, f))
        else:
            skipped["non_event_file"] += 1
    files.sort()
    if not files:
        raise FormatError("no event-NNNNN-*.json files in events/", path=shown, where=str(ev_dir.relative_to(p)))
    return files


def _load(p: Path, shown: str, ev_dir: Path, cur: Cursor) -> Task:
    st = _State(cur)
    files = _event_files(p, shown, ev_dir, st.skipped)
    base: dict[str, Any] = {}
    base_path = ev_dir.parent / "base_state.json"
    if base_path.is_file():
        cur.where = "base_state.json"
        b = parse_json(
            read_text(base_path, shown=shown),
            path=shown,
            where="base_state.json",
            expected="the conversation state object",
        )
        expect(isinstance(b, dict), "base_state.json must be a JSON object", cur)
        base = b

    kinds: Counter[str] = Counter()
    for _, name, f in files:
        cur.where = name
        ev = parse_json(read_text(f, shown=shown), path=shown, where=name, expected=_EXPECTED)
        expect(isinstance(ev, dict), f"expected an event object, got {type(ev).__name__}", cur)
        kind = ev.get("kind")
        expect(isinstance(kind, str), "event needs a string 'kind'", cur)
        kinds[kind] += 1
        eid = ev.get("id") if isinstance(ev.get("id"), str) else name
        if kind not in _CONTINUES_RESPONSE:
            st.flush()
            st.last_resp = None
        handler = _EVENT_HANDLERS.get(kind)
        if handler is None:
            st.skipped[kind] += 1
        else:
            handler(st, ev, kind, eid, name)
    st.flush()
    cur.where = None
    if not st.tr.messages:
        raise FormatError("conversation has no LLM-visible events", path=shown)
    st.tr.cwd = st.cwd
    return _task(p, shown, st, base, len(files), kinds)


def _on_action(st: _State, ev: Any, kind: str, eid: str, name: str) -> None:
    cur = st.cur
    resp = ev.get("llm_response_id")
    tc = ev.get("tool_call") if isinstance(ev.get("tool_call"), dict) else {}
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
    tid = ev.get("tool_call_id") or tc.get("id")
    tname = ev.get("tool_name") or fn.get("name")
    expect(isinstance(tid, str) and tid != "", "ActionEvent needs a non-empty string 'tool_call_id'", cur)
    expect(isinstance(tname, str), "ActionEvent needs a string 'tool_name'", cur)
    call = ToolCall(tid, tname, json_text(fn.get("arguments")))
    if ev.get("reasoning_content"):
        st.counts["reasoning_blocks"] += 1
    tbs = ev.get("thinking_blocks") or []
    st.counts["thinking_blocks"] += len(tbs) if isinstance(tbs, list) else 1
    if st.asst_slot is not None and isinstance(resp, str) and resp == st.last_resp:
        st.asst_calls.append(call)  # parallel tool call of the same response
    else:
        st.flush()
        st.asst_content = blocks_text(ev.get("thought") or [], st.counts, what="thought", cursor=cur)
        st.asst_calls = [call]
        st.asst_slot = st.tr.add(Message("assistant", st.asst_content))
    st.tr.messages[st.asst_slot] = Message("assistant", st.asst_content, tuple(st.asst_calls))
    st.last_resp = resp if isinstance(resp, str) else None
    st.event_index[eid] = st.asst_slot
    action = ev.get("action") if isinstance(ev.get("action"), dict) else {}
    if action.get("kind") == "FinishAction":
        st.finish_at = st.asst_slot
        st.finish_msg = action.get("message") if isinstance(action.get("message"), str) else None


def _on_system_prompt(st: _State, ev: Any, kind: str, eid: str, name: str) -> None:
    sp = ev.get("system_prompt")
    text = sp.get("text") if isinstance(sp, dict) else sp
    expect(isinstance(text, str), "SystemPromptEvent needs 'system_prompt.text' (a string)", st.cur)
    st.event_index[eid] = st.tr.add(Message("system", text))
    raw_tools = ev.get("tools") or []
    expect(isinstance(raw_tools, list), "SystemPromptEvent 'tools' must be a list", st.cur)
    st.tools.extend(t for t in (openai_tool_schema(x) for x in raw_tools) if t)


def _on_message(st: _State, ev: Any, kind: str, eid: str, name: str) -> None:
    cur = st.cur
    lm = ev.get("llm_message")
    expect(isinstance(lm, dict), "MessageEvent needs an 'llm_message' object", cur)
    text = blocks_text(lm.get("content"), st.counts, what="llm_message.content", cursor=cur)
    ext = ev.get("extended_content") or []
    if ext:
        extra = blocks_text(ext, st.counts, what="extended_content", cursor=cur)
        text = f"{text}\n\n{extra}" if text and extra else text or extra
    role = (
        lm.get("role") if isinstance(lm.get("role"), str) else ("user" if ev.get("source") == "user" else "assistant")
    )
    msg = Message(role, text)
    st.event_index[eid] = st.tr.add_prompt(msg) if role == "user" else st.tr.add(msg)


def _on_observation(st: _State, ev: Any, kind: str, eid: str, name: str) -> None:
    tid = ev.get("tool_call_id")
    expect(isinstance(tid, str) and tid != "", f"{kind} needs a non-empty string 'tool_call_id'", st.cur)
    content, is_error, rc, wd = _observation(ev, kind, st.counts, st.cur)
    st.cwd = st.cwd or wd
    st.event_index[eid] = st.tr.add(Message("tool", content, (), tid, is_error), returncode=rc)


def _on_condensation(st: _State, ev: Any, kind: str, eid: str, name: str) -> None:
    forgotten = ev.get("forgotten_event_ids") or []
    expect(isinstance(forgotten, list), "Condensation 'forgotten_event_ids' must be a list", st.cur)
    st.condensations.append(
        {
            "message_index": len(st.tr.messages),
            "event": name,
            "summary": ev.get("summary") if isinstance(ev.get("summary"), str) else None,
            "summary_offset": ev.get("summary_offset"),
            "n_forgotten_events": len(forgotten),
            "forgotten_message_indices": sorted({st.event_index[x] for x in forgotten if x in st.event_index}),
        }
    )


_EVENT_HANDLERS: dict[str, Callable[[_State, Any, str, str, str], None]] = {
    "ActionEvent": _on_action,
    "SystemPromptEvent": _on_system_prompt,
    "MessageEvent": _on_message,
    "ObservationEvent": _on_observation,
    "AgentErrorEvent": _on_observation,
    "UserRejectObservation": _on_observation,
    "Condensation": _on_condensation,
}
"""The handler of each event kind; other kinds are skipped and counted."""

_CONTINUES_RESPONSE = frozenset({"ActionEvent"})
"""Event kinds that may continue the open assistant response; any other event ends it."""


def _task(p: Path, shown: str, st: _State, base: dict[str, Any], n_events: int, kinds: Counter[str]) -> Task:
    """The task of a read conversation: outcome and metadata from ``base_state.json``."""
    agent = base.get("agent") if isinstance(base.get("agent"), dict) else {}
    llm = agent.get("llm") if isinstance(agent.get("llm"), dict) else {}
    status = base.get("agent_status") if isinstance(base.get("agent_status"), str) else None
    session = p.name if p.name != "event_service" else p.parent.name
    meta: dict[str, Any] = {
        "agent": "openhands",
        "variant": "agent-sdk-v1",
        "model": llm.get("model"),
        "conversation_id": base.get("id"),
        "agent_status": status,
        "max_iterations": base.get("max_iterations"),
        "n_events": n_events,
        "events_by_kind": dict(sorted(kinds.items())),
        "condensations": st.condensations,
        "thinking_blocks": st.counts.get("thinking_blocks", 0),
        "reasoning_blocks": st.counts.get("reasoning_blocks", 0),
    }
    outcome = Outcome(exit_status=status, message_index=st.finish_at, finish_message=st.finish_msg)
    return finish_task(
        fmt=FORMAT,
        session=session,
        path_shown=shown,
        path=p,
        tr=st.tr,
        tools=st.tools,
        outcome=outcome,
        metadata=meta,
        skipped=st.skipped,
    )


def _observation(ev: Any, kind: str, counts: Counter[str], cur: Cursor) -> tuple[str, bool, int | None, str | None]:
    """(content, is_error, exit code, working dir) of an observation-like event."""
    if kind != "ObservationEvent":
        text = ev.get("error") or ev.get("rejection_reason") or ev.get("message") or ""
        return (text if isinstance(text, str) else str(text)), True, None, None
    obs = ev.get("observation")
    expect(isinstance(obs, dict), "ObservationEvent needs an 'observation' object", cur)
    content = ""
    for key in ("output", "content", "message"):
        v = obs.get(key)
        if isinstance(v, (str, list)) and v:
            content = blocks_text(v, counts, what=f"observation.{key}", cursor=cur)
            break
    err = obs.get("error")
    is_error = bool(err) if not isinstance(err, str) else err.strip().lower() not in ("", "false")
    if isinstance(err, str) and is_error and err not in content:
        content = f"{content}\n{err}" if content else err
    md = obs.get("metadata") if isinstance(obs.get("metadata"), dict) else {}
    rc = md.get("exit_code")
    rc = rc if isinstance(rc, int) and not isinstance(rc, bool) and rc >= 0 else None  # -1 = still running
    wd = md.get("working_dir") if isinstance(md.get("working_dir"), str) else None
    return content, is_error, rc, wd


def _single_event(obj: Any) -> str | None:
    if isinstance(obj, dict) and isinstance(obj.get("kind"), str) and "source" in obj:
        return "this is a single OpenHands event; pass the conversation folder (the one holding event_service/)"
    return None


RECORDED_FORMATS = (
    RecordedFormat(
        name=FORMAT,
        described="an OpenHands conversation folder",
        detect_order=50,
        listed_order=40,
        load=load_openhands,
        matches_dir=is_openhands_dir,
        near_miss_json=_single_event,
    ),
)
