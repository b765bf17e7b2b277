"""A harness9-compatible SQLite session store (spec §2.3 write-back, §9 session store).

The schema is harness9's own (``internal/memory/manager.go@f8df50e8``), created with the same
``CREATE TABLE IF NOT EXISTS`` statements, so harness9 can open a database written here and this
store can open one written by harness9::

    sessions(id TEXT PRIMARY KEY, created_at INTEGER, updated_at INTEGER [, title TEXT])
    messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT -> sessions(id) ON DELETE
             CASCADE, role TEXT, content TEXT, tool_calls TEXT, tool_call_id TEXT,
             created_at INTEGER)                    + index idx_messages_session(session_id, id)
    session_plans(session_id TEXT PRIMARY KEY -> sessions(id) ON DELETE CASCADE,
                  items TEXT DEFAULT '[]', updated_at INTEGER)

Timestamps are Unix seconds (harness9's ``time.Now().Unix()``). WAL journal, foreign keys on.

Deviations and decisions (each chosen so harness9's SQL keeps working on the file):

* ``sessions.title`` is an h9eval addition (harness9 has no title). It is added with
  ``ALTER TABLE ... ADD COLUMN`` when missing, nullable with default ``''``; harness9 names its
  columns in every statement, so the extra column is invisible to it.
* **Tool results** are stored with role ``user`` (harness9 injects observations as ``user``
  messages, spec §1.1), whatever role the h9eval message had. On load a ``user`` message with a
  non-empty ``tool_call_id`` comes back with role ``tool`` (h9eval's and the conformance
  files' convention); the compaction code recognises tool results by ``tool_call_id`` only, so
  either role behaves the same. Other roles are stored and returned verbatim.
* ``is_error`` and ``meta`` are **not persisted** (harness9 does not persist ``is_error``
  either; after a reload it is ``False``).
* ``tool_calls`` is the JSON list ``[{"id":..,"name":..,"arguments":..}]`` that Go's
  ``json.Marshal([]schema.ToolCall)`` writes, where ``arguments`` is a ``json.RawMessage`` -- a
  JSON *value*, not a string. See :func:`encode_tool_calls` for how h9eval's argument *text*
  maps to it and back exactly.
* :meth:`SessionStore.replace_history` is harness9's non-atomic clear-then-add with a
  rollback, not one transaction, so failure behaviour matches harness9's.

One database per run folder (``<run>/sessions.db``) is how the replay uses it.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from json.decoder import scanstring
from pathlib import Path
from typing import Any

from h9eval.core.errors import FormatError, H9InputError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.tokens import go_json
from h9eval.core.paths import check_db_file
from h9eval.core import storage

__all__ = [
    "SCHEMA_SQL",
    "SessionInfo",
    "SessionStore",
    "UnknownSessionError",
    "encode_tool_calls",
    "decode_tool_calls",
    "json_text",
    "row_to_message",
    "ARGUMENTS_TEXT_FLAG",
]

log = logging.getLogger(__name__)

# harness9's schemaSQL, verbatim (manager.go@f8df50e8); ``title`` is added separately.
SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS sessions (
    id         TEXT    PRIMARY KEY,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id   TEXT    NOT NULL,
    role         TEXT    NOT NULL,
    content      TEXT    NOT NULL,
    tool_calls   TEXT,
    tool_call_id TEXT,
    created_at   INTEGER NOT NULL,
    FOREIGN KEY (session_id) REFERENCES sessions(id) ON DELETE CASCADE
);

CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, id);

CREATE TABLE IF NOT EXISTS session_plans (
    session_id TEXT PRIMARY KEY,
    items      TEXT    NOT NULL DEFAULT '[]',
    updated_at INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (session_id) REFERENCES sessions(id) ON DELETE CASCADE
);
"""

ARGUMENTS_TEXT_FLAG = "h9eval_arguments_text"
"""Extra key on a stored tool call whose ``arguments`` is a JSON string holding h9eval's exact
argument text (used only when that text is not itself embeddable as a JSON value). Go's
``json.Unmarshal`` ignores unknown keys, so harness9 reads such a row (it sees a JSON string)."""

_JSON_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


class UnknownSessionError(H9InputError):
    """A session id that is not in the ``sessions`` table."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One row of :meth:`SessionStore.list_sessions`; times are Unix seconds."""

    id: str
    title: str
    created_at: int
    updated_at: int
    message_count: int


# -- tool_calls column ------------------------------------------------------------------------
def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; Go's does not, so such text is not a JSON value here.
    raise ValueError(f"{name} is not JSON")


def _embeddable(text: str) -> bool:
    """True if ``text`` can be written as-is as the ``arguments`` JSON value and extracted back
    byte for byte: strict JSON, no surrounding whitespace (a raw span excludes it), and not
    ``null`` (which stands for empty arguments, as in harness9)."""
    if not text or text != text.strip(_JSON_WS) or text == "null":
        return False
    try:
        json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        return False
    return True


def encode_tool_calls(calls: Sequence[ToolCall]) -> str | None:
    """The ``tool_calls`` column text for ``calls``; ``None`` (SQL NULL) when there are none.

    Argument text → stored JSON value:

    * ``""`` → ``null`` (what Go writes for a nil ``json.RawMessage``);
    * text that is a JSON value (and not ``null``, no surrounding whitespace) → embedded
      verbatim. Go would compact it and escape ``<>&``; h9eval keeps the exact bytes because
      harness9's token estimate counts them;
    * anything else (not JSON, padded with whitespace, the literal ``null``) → a JSON string
      of the text plus ``"h9eval_arguments_text": true``. harness9 cannot produce such text
      (``json.Marshal`` rejects an invalid ``RawMessage``); it reads it as a JSON string.

    :func:`decode_tool_calls` inverts all three exactly.
    """
    if not calls:
        return None
    parts = []
    for tc in calls:
        head = '{"id":' + go_json(tc.id) + ',"name":' + go_json(tc.name) + ',"arguments":'
        if tc.arguments == "":
            parts.append(head + "null}")
        elif _embeddable(tc.arguments):
            parts.append(head + tc.arguments + "}")
        else:
            parts.append(head + go_json(tc.arguments) + ',"' + ARGUMENTS_TEXT_FLAG + '":true}')
    return "[" + ",".join(parts) + "]"


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in _JSON_WS:
        i += 1
    return i


def _object_pairs_raw(s: str, i: int) -> tuple[list[tuple[str, str]], int]:
    """Parse the JSON object starting at ``s[i] == '{'``; return (key, raw value text) pairs
    in order, and the index after the object. Raw text is the exact span of the value."""
    pairs: list[tuple[str, str]] = []
    i = _skip_ws(s, i + 1)
    if i < len(s) and s[i] == "}":
        return pairs, i + 1
    while True:
        if i >= len(s) or s[i] != '"':
            raise ValueError(f"expected a key at offset {i}")
        key, i = scanstring(s, i + 1)
        i = _skip_ws(s, i)
        if i >= len(s) or s[i] != ":":
            raise ValueError(f"expected ':' at offset {i}")
        i = _skip_ws(s, i + 1)
        _, end = _DECODER.raw_decode(s, i)
        pairs.append((key, s[i:end]))
        i = _skip_ws(s, end)
        if i < len(s) and s[i] == ",":
            i = _skip_ws(s, i + 1)
            continue
        if i < len(s) and s[i] == "}":
            return pairs, i + 1
        raise ValueError(f"expected ',' or '}}' at offset {i}")


def _go_field(pairs: list[tuple[str, str]], name: str) -> str | None:
    # Go's decoder matches keys case-insensitively and the last matching key wins.
    found = None
    for k, v in pairs:
        if k.casefold() == name:
            found = v
    return found


def _go_string(raw: str | None, field: str) -> str:
    if raw is None:
        return ""
    v = json.loads(raw)
    if v is None:  # Go leaves a string field unchanged (empty) on null
        return ""
    if not isinstance(v, str):
        raise ValueError(f"tool call field {field!r} must be a string, got {type(v).__name__}")
    return v


def decode_tool_calls(text: str | None) -> tuple[ToolCall, ...]:
    """Parse a ``tool_calls`` column as harness9 does, keeping each ``arguments`` value's exact
    raw text (Go's ``json.RawMessage`` semantics). ``NULL``/``""``/``null`` → no calls.

    A stored ``null`` argument becomes ``""`` (the text harness9 had before persisting; after a
    reload harness9 itself would hold the 4 bytes ``null``). Raises :class:`ValueError` on
    malformed JSON or a non-string id/name; callers add file and row context.
    """
    if text is None or text == "":
        return ()
    data = json.loads(text, parse_constant=_reject_constant)  # validates the whole text first
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ValueError(f"tool_calls must be a JSON list, got {type(data).__name__}")
    out = []
    i = _skip_ws(text, 0) + 1  # past '['
    for n in range(len(data)):
        i = _skip_ws(text, i)
        if text[i] == ",":
            i = _skip_ws(text, i + 1)
        if text[i] != "{":
            raise ValueError(f"tool_calls[{n}] must be an object")
        pairs, i = _object_pairs_raw(text, i)
        raw_args = _go_field(pairs, "arguments")
        flag = _go_field(pairs, ARGUMENTS_TEXT_FLAG)
        if raw_args is None or raw_args == "null":
            args = ""
        elif flag == "true" and raw_args.startswith('"'):
            args = json.loads(raw_args)
        else:
            args = raw_args
        out.append(
            ToolCall(_go_string(_go_field(pairs, "id"), "id"), _go_string(_go_field(pairs, "name"), "name"), args)
        )
    return tuple(out)


def _text(v: Any, column: str) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):  # a BLOB written by another client; harness9 writes TEXT
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"column {column}: a BLOB that is not UTF-8 ({e.reason} at byte {e.start})") from None
    return str(v)  # an INTEGER or REAL: Go's database/sql scans it into a string the same way


def json_text(v: Any, column: str) -> str | None:
    """A JSON column's value as text (``None`` for NULL). An INTEGER or REAL (``tool_calls = 5``)
    is a :class:`ValueError` naming the column: it is not JSON text, and harness9 would fail
    to unmarshal it too."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return _text(v, column)
    kind = {int: "an INTEGER", float: "a REAL"}.get(type(v), f"a {type(v).__name__}")
    raise ValueError(f"column {column}: expected JSON text or NULL, got {kind}")


def row_to_message(role: Any, content: Any, tool_calls: Any, tool_call_id: Any) -> Message:
    """One ``messages`` row (harness9's ``SELECT role, content, tool_calls, tool_call_id``) as
    an h9eval :class:`Message`; a ``user`` tool result comes back with role ``tool``. A bad
    value is a :class:`ValueError` whose message starts with ``column <name>:``."""
    role_s, tcid = _text(role, "role"), _text(tool_call_id, "tool_call_id")
    if tcid and role_s == "user":
        role_s = "tool"
    raw_calls = json_text(tool_calls, "tool_calls")
    try:
        calls = decode_tool_calls(raw_calls)
    except RecursionError:  # JSON nested thousands deep: no tool call looks like that
        raise ValueError("column tool_calls: JSON nested too deeply") from None
    except ValueError as e:
        raise ValueError(f"column tool_calls: {e}") from None
    text = _text(content, "content")
    try:
        return Message(role_s, text, calls, tcid)
    except ValueError as e:
        raise ValueError(f"column role/content: {e}") from None


def _strip_system(msgs: Sequence[Message]) -> list[Message]:
    msgs = list(msgs)
    if msgs and msgs[0].role == "system":
        return msgs[1:]
    return msgs


# -- the store --------------------------------------------------------------------------------
class SessionStore:
    """harness9's ``Manager`` + ``SQLiteSession`` over one SQLite file.

    ``path``: database file (parent folders are created, 0700 as in harness9) or ``":memory:"``.
    ``clock``: returns the Unix time in seconds stamped on rows; default :func:`time.time`
    (inject a fixed clock for byte-stable test databases).
    ``timeout_s``: seconds to wait for a lock held by another connection; default 5.
    ``sync_each_commit``: default True, every commit reaches the disk before it returns (SQLite's
    ``synchronous=FULL``). False (``synchronous=NORMAL``, still safe in WAL mode: a crash loses
    the newest commits, never the database) suits a replay's results folder, which writes a
    session back at every compaction and is rerun rather than recovered.

    Not thread-safe (one ``sqlite3`` connection); open one store per thread or process.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        timeout_s: float = 5.0,
        sync_each_commit: bool = True,
    ) -> None:
        self.path = str(path)
        self._clock = clock
        if self.path != ":memory:":
            check_db_file(self.path, what="session database")
            Path(self.path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Autocommit mode: every statement commits on its own unless inside an explicit BEGIN,
        # which is how Go's database/sql behaves and what harness9's Clear/AddMessages rely on.
        self._db = storage.connect(self.path, isolation_level=None, timeout=timeout_s)  # its errors name the file
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            if not sync_each_commit:
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(SCHEMA_SQL)
            cols = {r[1] for r in self._db.execute("PRAGMA table_info(sessions)")}
            if "title" not in cols:
                self._db.execute("ALTER TABLE sessions ADD COLUMN title TEXT NOT NULL DEFAULT ''")
        except sqlite3.DatabaseError as e:
            self._db.close()
            if storage.is_disk_full(e, self.path):
                raise  # the disk, not the file: said as such by the CLI (core.storage)
            raise FormatError(f"cannot open as a harness9 session database: {e}", path=self.path) from None

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._db.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self) -> int:
        return int(self._clock())

    # -- sessions -----------------------------------------------------------------------------
    def create_session(self, id: str | None = None, title: str = "", *, exist_ok: bool = False) -> str:
        """Insert a session row and return its id.

        ``id``: default a random UUIDv4 (harness9's ``NewSession``). ``title``: h9eval-only
        label, default ``""``. ``exist_ok``: default ``False`` raises
        :class:`H9InputError` for an existing id; ``True`` leaves the row untouched.
        """
        sid = str(uuid.uuid4()) if id is None else id
        now = self._now()
        try:
            self._db.execute(
                "INSERT INTO sessions (id, created_at, updated_at, title) VALUES (?, ?, ?, ?)", (sid, now, now, title)
            )
        except sqlite3.IntegrityError:
            if not exist_ok:
                raise H9InputError(f"session {sid!r} already exists in {self.path}") from None
        return sid

    def has_session(self, session_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None

    def _require(self, session_id: str) -> None:
        if not self.has_session(session_id):
            raise UnknownSessionError(f"unknown session {session_id!r} in {self.path}; create it with create_session()")

    def list_sessions(self) -> list[SessionInfo]:
        """All sessions with their message counts, most recently updated first (harness9's
        ``ListSessions`` order; ties by id so the order is deterministic)."""
        rows = self._db.execute(
            """SELECT s.id, s.title, s.created_at, s.updated_at, COUNT(msg.id)
               FROM sessions s LEFT JOIN messages msg ON msg.session_id = s.id
               GROUP BY s.id ORDER BY s.updated_at DESC, s.id"""
        ).fetchall()
        return [SessionInfo(r[0], r[1] or "", int(r[2]), int(r[3]), int(r[4])) for r in rows]

    def delete_session(self, session_id: str) -> None:
        """Delete a session; its messages and plan go with it (``ON DELETE CASCADE``)."""
        self._db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    # -- messages -----------------------------------------------------------------------------
    def add_messages(self, session_id: str, msgs: Iterable[Message]) -> None:
        """Append ``msgs`` in one transaction and bump ``updated_at`` (harness9's
        ``AddMessages``). Nothing is written if any row fails. Empty input is a no-op."""
        rows = []
        now = self._now()
        for m in msgs:
            role = "user" if m.tool_call_id and m.role == "tool" else m.role
            rows.append((session_id, role, m.content, encode_tool_calls(m.tool_calls), m.tool_call_id or None, now))
        if not rows:
            return
        self._require(session_id)
        self._db.execute("BEGIN")
        try:
            self._db.executemany(
                "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
            self._db.execute("COMMIT")
        except BaseException as e:
            # SQLite has already rolled back after some errors (a full disk): the ROLLBACK's
            # "no transaction is active" must not replace the error that says what happened.
            if self._db.in_transaction:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error as rb:
                    e.add_note(f"the rollback also failed: {rb}")
            raise

    def get_messages(self, session_id: str, limit: int = 0) -> list[Message]:
        """The session's messages in insertion order (harness9's ``GetMessages``).

        ``limit``: ``0`` (default) or negative → all; ``> 0`` → the newest ``limit`` messages,
        still in ascending order. An unknown session gives ``[]``, as in harness9.
        A malformed ``tool_calls`` cell raises :class:`FormatError` naming the row id.
        """
        if limit > 0:
            rows = self._db.execute(
                "SELECT id, role, content, tool_calls, tool_call_id FROM messages WHERE session_id = ?"
                " ORDER BY id DESC LIMIT ?",
                (session_id, limit),
            ).fetchall()
            rows.reverse()
        else:
            rows = self._db.execute(
                "SELECT id, role, content, tool_calls, tool_call_id FROM messages WHERE session_id = ? ORDER BY id ASC",
                (session_id,),
            ).fetchall()
        out = []
        for r in rows:
            try:
                out.append(row_to_message(*r[1:]))
            except ValueError as e:
                raise FormatError(
                    f"bad message in session {session_id!r}: {e}", path=self.path, where=f"messages.id {r[0]}"
                ) from None
        return out

    def clear(self, session_id: str) -> None:
        """Delete the session's messages; the session row stays (harness9's ``Clear``)."""
        self._db.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))

    def replace_history(
        self, session_id: str, msgs: Sequence[Message], *, prefix: Sequence[Message] | None = None
    ) -> None:
        """harness9's write-back ``persist(compacted, prefix)`` (spec §2.3).

        A leading system message is stripped from ``msgs`` and ``prefix`` (harness9 never
        persists it); the session is cleared; ``msgs`` are added. If that add fails, the
        previous history is re-added and the original error re-raised (a failed rollback is
        logged and attached as a note). ``prefix``: the history to restore on failure; default
        the session's stored messages read just before clearing, which is what harness9's
        ``history[:startLen]`` holds in practice. Like harness9 this is two steps, not one
        transaction, so a crash between them leaves the session empty.
        """
        self._require(session_id)
        new = _strip_system(msgs)
        prev = _strip_system(prefix) if prefix is not None else self.get_messages(session_id)
        self.clear(session_id)
        try:
            self.add_messages(session_id, new)
        except Exception as err:
            try:
                self.add_messages(session_id, prev)
            except Exception as rb:  # harness9 logs a failed rollback and returns the first error
                log.error("session %s: write-back rollback failed: %r", session_id, rb)
                err.add_note(f"rollback of session {session_id!r} also failed: {rb!r}")
            raise

    # -- plans --------------------------------------------------------------------------------
    def save_plan(self, session_id: str, items: Sequence[Any]) -> None:
        """Upsert the session's plan as one JSON list (harness9's ``SavePlan``)."""
        self._require(session_id)
        js = json.dumps(list(items), ensure_ascii=False) if items else "[]"
        self._db.execute(
            "INSERT INTO session_plans (session_id, items, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT(session_id) DO UPDATE SET items = excluded.items, updated_at = excluded.updated_at",
            (session_id, js, self._now()),
        )

    def get_plan(self, session_id: str) -> list[Any] | None:
        """The stored plan items, or ``None`` when no plan row exists (harness9's ``GetPlan``)."""
        r = self._db.execute("SELECT items FROM session_plans WHERE session_id = ?", (session_id,)).fetchone()
        if r is None or not r[0]:
            return None
        try:
            items = json.loads(json_text(r[0], "items") or "")
        except json.JSONDecodeError as e:
            raise FormatError(
                f"plan of session {session_id!r} is not JSON ({e.msg})", path=self.path, where="session_plans"
            ) from None
        except RecursionError:
            raise FormatError(
                f"plan of session {session_id!r}: JSON nested too deeply", path=self.path, where="session_plans"
            ) from None
        except ValueError as e:  # an INTEGER or REAL items, named by json_text
            raise FormatError(f"plan of session {session_id!r}: {e}", path=self.path, where="session_plans") from None
        if not isinstance(items, list):
            raise FormatError(
                f"plan of session {session_id!r} is not a JSON list", path=self.path, where="session_plans"
            )
        return items
