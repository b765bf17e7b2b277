"""SWE-agent ``.traj`` → Task (older text format and the function-calling variant).

``history`` is what the model saw; ``is_demo`` messages (in-context demonstrations) are not
part of the run and are skipped (counted in ``metadata["skipped_records"]["is_demo"]``).

* Function-calling variant (assistant ``tool_calls``, ``role: tool`` + ``tool_call_ids``):
  mapped one to one. Some SWE-agent versions store ``tool_calls``/``tool_call_ids`` as a
  Python ``repr`` string; both forms are read. A tool message answering several ids gets its
  content on the first id and empty results for the others (counted in
  ``metadata["multi_id_tool_messages"]``) so that every call stays paired.
* Text variant (the command is the ``action`` field / the fenced block of the assistant text,
  its output comes back as a ``user`` message): as for mini-swe-agent, the action becomes a
  synthesized ``ToolCall(id=f"call_{i}", name="bash", arguments='{"command": ...}')`` (``i``
  = index in ``history``; SWE-agent's special commands such as ``open``/``edit`` are shell
  functions, hence ``bash``) and the next user message becomes its ``role="tool"`` result.
  ``synthesize_tool_calls=False`` keeps the raw messages.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h9eval.core.errors import FormatError
from h9eval.core.messages import Message, ToolCall
from h9eval.tasks.model import Task
from h9eval.tasks.recorded._common import (
    AgentPass,
    Cursor,
    Outcome,
    blocks_text,
    expect,
    finish_task,
    guarded,
    on_other_message,
    on_system_message,
    on_user_message,
    openai_tool_calls,
    parse_json,
    read_text,
    stem,
)
from h9eval.tasks.recorded._format import RecordedFormat

__all__ = ["FORMAT", "load_swe_agent", "looks_like_swe_agent", "swe_agent_task_from_object"]

FORMAT = "swe_agent"
_EXPECTED = "a SWE-agent trajectory object {environment, trajectory, history, info}"
_FENCED = re.compile(r"```[\w-]*\s*\n(.*?)\n?```", re.DOTALL)


def looks_like_swe_agent(obj: Any) -> bool:
    """True for a parsed SWE-agent ``.traj``."""
    return isinstance(obj, dict) and isinstance(obj.get("history"), list) and ("trajectory" in obj or "info" in obj)


def _truthy(v: Any) -> bool:
    # Old files store is_demo as the *string* "True"; "False" must stay false.
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes")
    return bool(v)


def _literal(v: Any, what: str, cur: Cursor) -> Any:
    """A list stored as a list, as JSON text or as a Python repr string."""
    if not isinstance(v, str):
        return v
    s = v.strip()
    if not s:
        return []
    try:
        return json.loads(s)
    except ValueError:
        pass
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise FormatError(
            f"{what} is a string that is neither JSON nor a Python literal", path=cur.path, where=cur.where
        ) from None


def load_swe_agent(path: str | Path, *, synthesize_tool_calls: bool = True) -> Task:
    """Load one SWE-agent ``.traj`` file.

    ``synthesize_tool_calls``: text variant only; turn actions and their outputs into tool
    calls/results (default ``True``; see module docstring).
    """
    shown = str(path)
    p = Path(path)
    obj = parse_json(read_text(p, shown=shown), path=shown, expected=_EXPECTED)
    cur = Cursor(shown)
    with guarded(FORMAT, cur, _EXPECTED):
        return _load(p, shown, obj, cur, synthesize_tool_calls)


def swe_agent_task_from_object(
    obj: Any, *, shown: str, session: str, fmt: str, n_bytes: int, synthesize_tool_calls: bool = True
) -> Task:
    """A task from an in-memory trajectory object ``{history, info, ...}`` (a dataset row mapped
    to this shape): the same reading as a ``.traj`` file, with the row's name and size."""
    cur = Cursor(shown)
    with guarded(fmt, cur, _EXPECTED):
        return _load(
            Path(shown),
            shown,
            obj,
            cur,
            synthesize_tool_calls,
            origin=_Origin(session=session, fmt=fmt, n_bytes=n_bytes),
        )


@dataclass(frozen=True)
class _Origin:
    """A trajectory that is not a file: its session name, format and size (a dataset row)."""

    session: str
    fmt: str
    n_bytes: int


@dataclass(kw_only=True)
class _State(AgentPass):
    """What one pass over the trajectory's history builds."""

    function_calling: bool
    multi_id: int = 0


def _load(p: Path, shown: str, obj: Any, cur: Cursor, synthesize: bool, *, origin: _Origin | None = None) -> Task:
    expect(isinstance(obj, dict), f"expected a JSON object, got {type(obj).__name__}", cur)
    hist = obj.get("history")
    expect(isinstance(hist, list), "field 'history' must be a list", cur)
    live = [(i, m) for i, m in enumerate(hist) if not (isinstance(m, dict) and _truthy(m.get("is_demo")))]
    fc = any(isinstance(m, dict) and (m.get("tool_calls") or m.get("role") == "tool") for _, m in live)
    st = _State(cur=cur, function_calling=fc, synthesize=synthesize)
    n_demo = len(hist) - len(live)
    if n_demo:
        st.skipped["is_demo"] = n_demo
    for i, m in live:
        cur.where = f"history[{i}]"
        expect(isinstance(m, dict), f"expected a message object, got {type(m).__name__}", cur)
        role = m.get("role")
        expect(isinstance(role, str), "message needs a string 'role'", cur)
        content = blocks_text(m.get("content"), st.counts, what="content", cursor=cur)
        _ROLE_HANDLERS.get(role, on_other_message)(st, i, m, content)
    cur.where = None
    if not st.tr.messages:
        raise FormatError("history has no (non-demo) messages", path=shown, where="history")
    return _task(p, shown, obj, st, n_demo, origin)


def _on_assistant(st: _State, i: int, m: Any, content: str) -> None:
    calls: tuple[ToolCall, ...] = ()
    if st.function_calling:
        calls = openai_tool_calls(_literal(m.get("tool_calls") or [], "tool_calls", st.cur), st.cur)
    elif st.synthesize:
        action = m.get("action")
        if not isinstance(action, str):
            blocks = _FENCED.findall(content)
            action = blocks[-1] if blocks else None
        if action and action.strip():
            st.pending = f"call_{i}"
            calls = (ToolCall(st.pending, "bash", json.dumps({"command": action.strip()}, ensure_ascii=False)),)
            st.n_synth += 1
        else:
            st.pending = None
    st.tr.add(Message("assistant", content, calls))


def _on_tool(st: _State, i: int, m: Any, content: str) -> None:
    ids = _literal(m.get("tool_call_ids") or m.get("tool_call_id") or [], "tool_call_ids", st.cur)
    if isinstance(ids, str):
        ids = [ids]
    expect(
        isinstance(ids, list) and len(ids) > 0 and all(isinstance(x, str) and x for x in ids),
        "tool message needs 'tool_call_ids' (a non-empty list of strings)",
        st.cur,
    )
    st.tr.add(Message("tool", content, (), ids[0]))
    if len(ids) > 1:
        st.multi_id += 1
        for extra in ids[1:]:
            st.tr.add(Message("tool", "", (), extra))


def _on_user(st: _State, i: int, m: Any, content: str) -> None:
    on_user_message(st, content)


_ROLE_HANDLERS: dict[str, Callable[[_State, int, Any, str], None]] = {
    "assistant": _on_assistant,
    "tool": _on_tool,
    "user": _on_user,
    "system": on_system_message,
}
"""The handler of each message role; other roles are skipped and counted (``on_other_message``)."""


def _task(p: Path, shown: str, obj: Any, st: _State, n_demo: int, origin: _Origin | None) -> Task:
    """The task of a read trajectory: model, outcome and metadata from the other fields."""
    tr = st.tr
    info = obj.get("info") if isinstance(obj.get("info"), dict) else {}
    replay = obj.get("replay_config")
    if isinstance(replay, str):
        try:
            replay = json.loads(replay)
        except ValueError:
            replay = None
    model = None
    if isinstance(replay, dict):
        agent_cfg = replay.get("agent") if isinstance(replay.get("agent"), dict) else {}
        model_cfg = agent_cfg.get("model") if isinstance(agent_cfg.get("model"), dict) else {}
        model = model_cfg.get("name")
    stats = info.get("model_stats")
    if isinstance(stats, str):
        stats = _literal_or_none(stats)
    stats = stats if isinstance(stats, dict) else {}
    traj = obj.get("trajectory")
    meta: dict[str, Any] = {
        "agent": "swe-agent",
        "variant": "function_calling" if st.function_calling else "text",
        "model": model,
        "environment": obj.get("environment") if isinstance(obj.get("environment"), str) else None,
        "n_steps": len(traj) if isinstance(traj, list) else None,
        "api_calls": stats.get("api_calls"),
        "demo_messages_skipped": n_demo,
        "synthesized_tool_calls": st.n_synth,
        "multi_id_tool_messages": st.multi_id,
    }
    outcome = Outcome(
        exit_status=info.get("exit_status") if isinstance(info.get("exit_status"), str) else None,
        submission=info.get("submission") if isinstance(info.get("submission"), str) else None,
        message_index=len(tr.messages) - 1,
    )
    if origin is not None:
        return finish_task(
            fmt=origin.fmt,
            session=origin.session,
            path_shown=shown,
            path=p,
            tr=tr,
            outcome=outcome,
            metadata=meta,
            skipped=st.skipped,
            source_kind="dataset",
            n_bytes=origin.n_bytes,
        )
    return finish_task(
        fmt=FORMAT, session=stem(p), path_shown=shown, path=p, tr=tr, outcome=outcome, metadata=meta, skipped=st.skipped
    )


def _literal_or_none(s: str) -> Any:
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


RECORDED_FORMATS = (
    RecordedFormat(
        name=FORMAT,
        described="a SWE-agent .traj",
        detect_order=20,  # before mini-swe-agent, whose test a SWE-agent trajectory's shape could also pass
        listed_order=30,
        load=load_swe_agent,
        options=frozenset({"synthesize_tool_calls"}),
        matches_json=looks_like_swe_agent,
    ),
)
