"""Read what harness9 leaves on disk: its SQLite session database and its compaction records.

* :func:`list_sessions`, :func:`load_session_task`, :func:`load_db_tasks` read a harness9
  session database (``sessions`` + ``messages`` tables, spec §9) into h9eval :class:`Task`\\ s.
  The database is opened **read-only**; nothing is written next to it.
* :func:`read_records_dir` reads ``compaction_records/<session>.jsonl`` files (spec §8) into the
  tidy ``compactions`` table; :func:`records_to_frame` builds the same table from in-memory
  :class:`CompactionRecord`\\ s, so h9eval's replay and harness9's own logs compare row for row.

What a stored session is: harness9 never persists the system prompt, and with write-back
(spec §2.3) a compaction *replaces* the stored history. A session whose messages contain a
``[Context Compaction]`` message is therefore the post-write-back history, not the original
transcript; :func:`load_session_task` says so in ``metadata["compacted_history"]``. A history
cut by the Emergency tier or the token-budget fallback carries no marker; only the
compaction records show those.
"""

from __future__ import annotations

import difflib
import json
import os
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from h9eval.compaction.anchors import COMPACTION_MARKER, parse_anchors_and_summary
from h9eval.compaction.records import CompactionRecord, read_records
from h9eval.errors import FormatError, H9InputError, did_you_mean
from h9eval.messages import Message
from h9eval.session_store import row_to_message
from h9eval.tasks.model import Intent, IntentChange, Task, TaskSource
from h9eval.tokens import estimate_tokens

__all__ = [
    "COMPACTION_COLUMNS",
    "COMPACTIONS_SCHEMA_VERSION",
    "FIRST_MESSAGE_CHARS",
    "list_sessions",
    "load_session_task",
    "load_db_tasks",
    "records_to_frame",
    "read_records_dir",
    "is_compaction_message",
]

FORMAT = "harness9_db"
FIRST_MESSAGE_CHARS = 200
"""Characters (not bytes) of the first user message shown by :func:`list_sessions`."""

COMPACTIONS_SCHEMA_VERSION = 1
"""Version of the ``compactions`` table layout below (bump when a column changes meaning)."""

COMPACTION_COLUMNS: tuple[str, ...] = (
    "schema_version",  # int, COMPACTIONS_SCHEMA_VERSION
    "run_id",  # str: h9eval run id, or "harness9:<session>" for harness9's own records
    "session_id",  # str: the session the records belong to (file name for harness9's files)
    "record_index",  # int: 0-based position in the session's record sequence
    "record_id",  # str: the record's UUID ("" when unset)
    "timestamp",  # str: RFC 3339 with nanoseconds, as written (not parsed: offsets vary)
    "tier",  # int: 0 none .. 4 emergency
    "tier_name",  # str: none, warn, soft, full, emergency
    "tokens_before",  # int: harness9 estimate of the input
    "tokens_after",  # int: harness9 estimate of the output
    "msgs_before",  # int: messages in
    "msgs_after",  # int: messages out
    "n_anchors",  # int: anchors in the record (0 when null)
    "anchors_json",  # str | None: JSON list of {type, content}; None where harness9 wrote null
    "n_offloaded",  # int: offloaded tool results (0 when null)
    "offloaded_bytes",  # int: sum of the offloaded entries' bytes
    "offloaded_json",  # str | None: JSON list of offload entries; None where harness9 wrote null
    "summarized",  # int: messages summarised
    "preserved_tail",  # int: messages kept verbatim
    "summary_text",  # str
    "compression_ratio",  # float: tokens_after / tokens_before, 0 when before is 0
    "duration_ns",  # int: nanoseconds
    "error",  # str: "" when none
)

_INT_COLUMNS = (
    "schema_version",
    "record_index",
    "tier",
    "tokens_before",
    "tokens_after",
    "msgs_before",
    "msgs_after",
    "n_anchors",
    "n_offloaded",
    "offloaded_bytes",
    "summarized",
    "preserved_tail",
    "duration_ns",
)

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
        except (ValueError, UnicodeDecodeError) as e:
            raise FormatError(f"bad tool_calls in session {session_id!r}: {e}", path=shown, where=f"messages.id {r[0]}") from None
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


def _intent(msgs: Sequence[Message], compaction_idx: Sequence[int]) -> tuple[Intent, str]:
    """Statement = first user prompt (not a tool result, not a compaction message); each later
    prompt (a new harness9 interaction) refines it cumulatively. Without any prompt (everything
    before the tail was compacted) the stored ``User Intent`` anchor is used instead."""
    prompts = [
        (i, m.content)
        for i, m in enumerate(msgs)
        if m.role == "user" and not m.is_tool_result and not is_compaction_message(m)
    ]
    if not prompts:
        if compaction_idx:
            anchors, _ = parse_anchors_and_summary(msgs[compaction_idx[0]].content.lstrip()[len(COMPACTION_MARKER):])
            for a in anchors:
                if a.type == "user_intent" and a.content not in ("", "N/A"):
                    return Intent(statement=a.content), "compaction_anchor"
        return Intent(statement=""), "none"
    statement = prompts[0][1]
    changes, cur = [], statement
    for i, text in prompts[1:]:
        if not text.strip():
            continue
        cur = f"{cur}\n\n{text}"
        changes.append(IntentChange(message_index=i, statement=cur))
    return Intent(statement=statement, changes=tuple(changes)), "first_user_message"


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
                msg += f" ({len(ids)} sessions; see h9eval.harness9_data.list_sessions)"
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
        for sid in _session_ids(con):
            msgs = _messages(con, shown, sid)
            if msgs or include_empty:
                out.append(_task(shown, sid, msgs))
        return out
    finally:
        con.close()


# -- compaction records -----------------------------------------------------------------------
def _frame(rows: list[dict[str, Any]]) -> Any:
    """Build the table with fixed dtypes: int64, float64 for the ratio, and ``object`` for the
    text columns so that a missing JSON list stays ``None`` (pandas 3 would infer its ``str``
    dtype and turn ``None`` into NaN) and an empty table has the same dtypes as a full one."""
    import pandas as pd

    def dtype(c: str) -> str:
        return "int64" if c in _INT_COLUMNS else "float64" if c == "compression_ratio" else "object"

    return pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=dtype(c)) for c in COMPACTION_COLUMNS})


def _row(rec: CompactionRecord, *, run_id: str, session_id: str, index: int) -> dict[str, Any]:
    anchors = [a.to_json() for a in rec.anchors] if rec.anchors is not None else None
    off = [o.to_json() for o in rec.offloaded] if rec.offloaded is not None else None
    return {
        "schema_version": COMPACTIONS_SCHEMA_VERSION,
        "run_id": run_id,
        "session_id": session_id,
        "record_index": index,
        "record_id": rec.id,
        "timestamp": rec.timestamp,
        "tier": int(rec.tier),
        "tier_name": rec.tier.label,
        "tokens_before": rec.tokens_before,
        "tokens_after": rec.tokens_after,
        "msgs_before": rec.msgs_before,
        "msgs_after": rec.msgs_after,
        "n_anchors": len(anchors or ()),
        "anchors_json": json.dumps(anchors, ensure_ascii=False) if anchors is not None else None,
        "n_offloaded": len(off or ()),
        "offloaded_bytes": sum(o.bytes for o in rec.offloaded or ()),
        "offloaded_json": json.dumps(off, ensure_ascii=False) if off is not None else None,
        "summarized": rec.summarized,
        "preserved_tail": rec.preserved_tail,
        "summary_text": rec.summary_text,
        "compression_ratio": float(rec.compression_ratio),
        "duration_ns": rec.duration_ns,
        "error": rec.error,
    }


def records_to_frame(records: Iterable[CompactionRecord], *, run_id: str, session_id: str) -> Any:
    """The ``compactions`` table (:data:`COMPACTION_COLUMNS`, one row per record, in order) for
    one session's records. ``session_id`` is the column value; the records' own ``session_id``
    field is not used (harness9's compactor may leave it empty)."""
    return _frame([_row(r, run_id=run_id, session_id=session_id, index=i) for i, r in enumerate(records)])


def _session_of(path: Path) -> str:
    # harness9 names the file after the raw session id; an empty id gives ".jsonl".
    return path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.stem


def read_records_dir(path: str | os.PathLike[str], *, run_id: str | None = None) -> Any:
    """harness9's compaction records as the ``compactions`` table.

    ``path``: one ``<session>.jsonl`` file, a folder of them (e.g. ``compaction_records/``),
    or a folder holding a ``compaction_records/`` subfolder. Files are read in name order;
    ``session_id`` is the file name without ``.jsonl``.
    ``run_id``: column value; default ``harness9:<session>`` per file.

    Strict: a line that is not JSON or lacks a required field raises :class:`FormatError`
    naming the file and line (harness9's own ``List`` would skip it silently).
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.glob("*.jsonl") if f.is_file())
        sub = p / "compaction_records"
        if not files and sub.is_dir():
            files = sorted(f for f in sub.glob("*.jsonl") if f.is_file())
    elif p.is_file():
        files = [p]
    else:
        raise FormatError("no such record file or folder", path=str(path))
    frames = []
    for f in files:
        try:
            recs = read_records(f, strict=True)
        except OSError as e:
            raise FormatError(f"cannot read record file: {e.strerror}", path=str(f)) from None
        except UnicodeDecodeError as e:
            raise FormatError(f"record file is not UTF-8 ({e.reason} at byte {e.start})", path=str(f)) from None
        sid = _session_of(f)
        frames.append(records_to_frame(recs, run_id=run_id if run_id is not None else f"harness9:{sid}", session_id=sid))
    frames = [f for f in frames if len(f)]  # pandas warns when concatenating empty frames
    if not frames:
        return _frame([])
    import pandas as pd

    return pd.concat(frames, ignore_index=True)
