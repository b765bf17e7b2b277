"""Tasks from a harness9 session database.

:func:`list_sessions`, :func:`load_session_task`, :func:`load_db_tasks` read a harness9 session
database (``sessions`` + ``messages`` tables, spec §9) into h9eval :class:`Task`\\ s. The
database is opened **read-only**; nothing is written next to it.

What a stored session is: harness9 never persists the system prompt, and with write-back
(spec §2.3) a compaction *replaces* the stored history. A session whose messages contain a
``[Context Compaction]`` message is therefore the post-write-back history, not the original
transcript; :func:`load_session_task` says so in ``metadata["compacted_history"]``. A history
cut by the Emergency tier or the token-budget fallback carries no marker; only the
compaction records show those.
"""

from __future__ import annotations

import difflib
import os
import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from h9eval.compaction.anchors import COMPACTION_MARKER, parse_anchors_and_summary
from h9eval.core.errors import FormatError, H9InputError, did_you_mean
from h9eval.core.messages import Message
from h9eval.core.progress import QUIET_DELAY_S, make_progress
from h9eval.harness9.session_store import row_to_message
from h9eval.tasks.model import Intent, IntentChange, Task, TaskSource
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "FIRST_MESSAGE_CHARS",
    "list_sessions",
    "load_session_task",
    "load_db_tasks",
    "is_compaction_message",
]

FORMAT = "harness9_db"
FIRST_MESSAGE_CHARS = 200
"""Characters (not bytes) of the first user message shown by :func:`list_sessions`."""

"""Version of the ``compactions`` table layout below (bump when a column changes meaning)."""


_SQLITE_MAGIC = b"SQLite format 3\x00"
_REQUIRED_COLUMNS = {
    "sessions": ("id",),
    "messages": ("id", "session_id", "role", "content", "tool_calls", "tool_call_id"),
}


# -- the session database ---------------------------------------------------------------------
def _connect(db_path: str | os.PathLike[str]) -> tuple[sqlite3.Connection, str]:
    """Open read-only and check harness9's tables; FormatError names the file on any problem."""
    p = Path(db_path)
    shown = str(db_path)
    if not p.is_file():
        raise FormatError("no such database file", path=shown)
    try:
        with open(p, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as e:
        raise FormatError(f"cannot read database: {e.strerror}", path=shown) from None
    # An empty file is a valid empty database to SQLite; it fails below as "missing table".
    if head and head != _SQLITE_MAGIC:
        raise FormatError("not an SQLite database (bad file header); expected a harness9 sessions.db", path=shown)
    # Read-only. With no -wal/-journal beside the file every committed page is in the file
    # itself, so it is opened "immutable": SQLite then creates no -wal/-shm files next to it.
    # Otherwise (e.g. harness9 is running) a plain read-only open sees the pending WAL pages.
    side = any(Path(str(p) + ext).exists() for ext in ("-wal", "-journal"))
    uri = p.resolve().as_uri() + ("?mode=ro" if side else "?mode=ro&immutable=1")
    try:
        con = sqlite3.connect(uri, uri=True)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as e:
        if "locked" in str(e) or "busy" in str(e):  # a writer holds it: the file is fine
            raise FormatError(
                f"database is locked by another process ({e}); try again when it is done", path=shown
            ) from None
        raise FormatError(f"not a readable SQLite database ({e})", path=shown) from None
    try:
        for table, cols in _REQUIRED_COLUMNS.items():
            if table not in tables:
                raise FormatError(
                    f"missing table {table!r}; not a harness9 session database"
                    f" (tables found: {', '.join(sorted(tables)) or 'none'})",
                    path=shown,
                )
            have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            missing = [c for c in cols if c not in have]
            if missing:
                raise FormatError(f"table {table!r} lacks column(s) {', '.join(missing)}", path=shown)
    except BaseException:
        con.close()
        raise
    return con, shown


def _session_ids(con: sqlite3.Connection) -> list[str]:
    # harness9's ListSessions order: most recently updated first (ties by id, for determinism).
    cols = {r[1] for r in con.execute("PRAGMA table_info(sessions)")}
    order = "updated_at DESC, id" if "updated_at" in cols else "id"
    return [r[0] for r in con.execute(f"SELECT id FROM sessions ORDER BY {order}")]


def _messages(con: sqlite3.Connection, shown: str, session_id: str) -> list[Message]:
    out = []
    rows = con.execute(
        "SELECT id, role, content, tool_calls, tool_call_id FROM messages WHERE session_id = ? ORDER BY id",
        (session_id,),
    )
    for r in rows:
        try:
            out.append(row_to_message(*r[1:]))
        except ValueError as e:  # the message names the column
            raise FormatError(
                f"bad message in session {session_id!r}: {e}", path=shown, where=f"messages.id {r[0]}"
            ) from None
    return out


def is_compaction_message(m: Message) -> bool:
    """A ProgressiveCompactor summary message (``[Context Compaction]`` first, not a tool result)."""
    return not m.is_tool_result and m.content.lstrip().startswith(COMPACTION_MARKER)


def _first_user_message(msgs: Sequence[Message]) -> str:
    for m in msgs:
        if m.role == "user" and not m.is_tool_result and not is_compaction_message(m):
            return m.content
    return ""


def list_sessions(db_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One dict per session, most recently updated first: ``id``, ``message_count``,
    ``estimated_tokens`` (harness9's bytes/4 estimate of the stored messages, no system prompt,
    no tool schemas), ``first_user_message`` (its first 200 characters; ``""`` if none),
    ``compacted_history`` (a ``[Context Compaction]`` message is stored)."""
    con, shown = _connect(db_path)
    try:
        out = []
        for sid in _session_ids(con):
            msgs = _messages(con, shown, sid)
            out.append(
                {
                    "id": sid,
                    "message_count": len(msgs),
                    "estimated_tokens": estimate_tokens(msgs),
                    "first_user_message": _first_user_message(msgs)[:FIRST_MESSAGE_CHARS],
                    "compacted_history": any(is_compaction_message(m) for m in msgs),
                }
            )
        return out
    finally:
        con.close()


def _anchor_intent(msg: Message) -> str:
    anchors, _ = parse_anchors_and_summary(msg.content.lstrip()[len(COMPACTION_MARKER) :])
    for a in anchors:
        if a.type == "user_intent" and a.content not in ("", "N/A"):
            return a.content
    return ""


def _intent(msgs: Sequence[Message], compaction_idx: Sequence[int]) -> tuple[Intent, str]:
    """Statement = the first user request (not a tool result, not a compaction message) when it
    survives, i.e. comes before the first ``[Context Compaction]`` message; each later prompt (a
    new harness9 interaction) refines it cumulatively. When the history starts with a compaction
    (write-back summarised the first request away) the prompts after it are later refinements,
    not the task: the compaction's ``User Intent`` anchor is the statement then, and those
    prompts its refinements."""
    prompts = [
        (i, m.content)
        for i, m in enumerate(msgs)
        if m.role == "user" and not m.is_tool_result and not is_compaction_message(m)
    ]
    first_comp = compaction_idx[0] if compaction_idx else None
    if first_comp is not None and (not prompts or prompts[0][0] > first_comp):
        anchored = _anchor_intent(msgs[first_comp])
        if anchored:
            return _refined(anchored, prompts), "compaction_anchor"
    if not prompts:
        return Intent(statement=""), "none"
    return _refined(prompts[0][1], prompts[1:]), "first_user_message"


def _refined(statement: str, later: Sequence[tuple[int, str]]) -> Intent:
    """Each later prompt (not blank) appends to the statement in force (:class:`IntentChange`)."""
    changes = [IntentChange(message_index=i, statement=text, appends=True) for i, text in later if text.strip()]
    return Intent(statement=statement, changes=tuple(changes))


def _task(shown: str, session_id: str, msgs: list[Message]) -> Task:
    comp = [i for i, m in enumerate(msgs) if is_compaction_message(m)]
    intent, intent_source = _intent(msgs, comp)
    meta: dict[str, Any] = {
        "format": FORMAT,
        "session": session_id,
        "n_messages": len(msgs),
        "messages_by_role": dict(sorted(Counter(m.role for m in msgs).items())),
        "intent_source": intent_source,
        "system_prompt_stored": False,  # harness9 never persists it; the replay supplies one
        "compacted_history": bool(comp),
    }
    if comp:
        # what summarize_task (and so `h9eval tasks inspect`) counts as the session's compactions
        meta["compactions"] = [{"message_index": i, "marker": COMPACTION_MARKER} for i in comp]
        meta["compaction_message_index"] = comp[0]
        meta["compaction_message_indices"] = comp
        meta["compaction_note"] = (
            "the stored session is harness9's post-write-back history (a compacted view replaced "
            "the original messages), not the original transcript; messages before "
            f"index {comp[0]} are summarised in the [Context Compaction] message"
        )
    return Task(
        task_id=f"{FORMAT}:{session_id}",
        source=TaskSource(kind=FORMAT, path=shown, format="harness9_sqlite", session=session_id),
        messages=tuple(msgs),
        intent=intent,
        metadata=meta,
    )


def load_session_task(db_path: str | os.PathLike[str], session_id: str) -> Task:
    """One stored session as a :class:`Task` (``task_id`` ``harness9_db:<session>``).

    Tool results come back with role ``tool``, ``is_error`` is ``False`` (not persisted) and
    there is no system message and no tool schema (harness9 stores neither).
    """
    con, shown = _connect(db_path)
    try:
        ids = _session_ids(con)
        if session_id not in ids:
            if len(ids) <= 20:
                msg = did_you_mean(session_id, ids, what="session")
            else:  # a long list helps nobody: name the close matches and how to list the rest
                close = difflib.get_close_matches(session_id, ids, n=3, cutoff=0.6)
                msg = f"unknown session {session_id!r}"
                msg += ("; did you mean " + " or ".join(map(repr, close)) + "?") if close else ""
                msg += f" ({len(ids)} sessions; see h9eval.tasks.recorded.harness9_db.list_sessions)"
            raise H9InputError(f"{shown}: {msg}")
        return _task(shown, session_id, _messages(con, shown, session_id))
    finally:
        con.close()


def load_db_tasks(db_path: str | os.PathLike[str], *, include_empty: bool = False) -> list[Task]:
    """Every session as a :class:`Task`, most recently updated first.

    ``include_empty``: default ``False`` skips sessions without messages (nothing to replay).
    """
    con, shown = _connect(db_path)
    try:
        out = []
        ids = _session_ids(con)
        # a database of many long sessions takes a while: say so, after a quiet moment
        bar = make_progress(
            total=len(ids), desc=f"loading {shown}", unit="session", delay_s=QUIET_DELAY_S, enabled=len(ids) > 1
        )
        for sid in ids:
            bar.update(1)
            msgs = _messages(con, shown, sid)
            if msgs or include_empty:
                out.append(_task(shown, sid, msgs))
        bar.close()
        return out
    finally:
        con.close()
