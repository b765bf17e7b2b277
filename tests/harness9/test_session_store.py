"""SessionStore: harness9's SQLite schema, exact round trips, GetMessages(limit), write-back rollback."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h9eval.core.errors import FormatError, H9InputError
from h9eval.core.messages import Message, ToolCall
from h9eval.harness9.session_store import (
    ARGUMENTS_TEXT_FLAG,
    SessionStore,
    UnknownSessionError,
    decode_tool_calls,
    encode_tool_calls,
)

# harness9's schema exactly as manager.go@f8df50e8 creates it (kept here, independent of the
# module under test, so a drift in SCHEMA_SQL shows up as a failure).
HARNESS9_DDL = """
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
# The SQL harness9's GetMessages(limit=0) runs.
HARNESS9_SELECT = "SELECT role, content, tool_calls, tool_call_id FROM messages WHERE session_id = ? ORDER BY id"


def transcript() -> list[Message]:
    return [
        Message("user", "修复 tests/test_api.py 里的 KeyError"),
        Message(
            "assistant",
            "",
            (
                ToolCall("c1", "bash", '{"command": "pytest -x", "timeout": 60}'),  # spaces kept
                ToolCall("c2", "read_file", '{"path":"a<b>&c.py"}'),  # Go would escape <>&; we keep it
            ),
        ),
        Message("tool", "1 failed", (), "c1"),
        Message("tool", "", (), "c2"),
        Message("assistant", "retry", (ToolCall("c3", "noargs", ""), ToolCall("c4", "weird", "not json {"))),
        Message("tool", "ok", (), "c3"),
        Message("tool", "bad", (), "c4"),
        Message("assistant", "done"),
    ]


@pytest.fixture
def store(tmp_path):
    s = SessionStore(tmp_path / "run" / "sessions.db", clock=lambda: 1_700_000_000)
    yield s
    s.close()


# -- schema ---------------------------------------------------------------------------------
def test_schema_is_harness9s_plus_title(store):
    db = store._db
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    cols = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in ("sessions", "messages", "session_plans")}
    assert cols["sessions"] == ["id", "created_at", "updated_at", "title"]
    assert cols["messages"] == ["id", "session_id", "role", "content", "tool_calls", "tool_call_id", "created_at"]
    assert cols["session_plans"] == ["session_id", "items", "updated_at"]
    fks = db.execute("PRAGMA foreign_key_list(messages)").fetchall()
    assert [(f[2], f[3], f[4], f[6]) for f in fks] == [("sessions", "session_id", "id", "CASCADE")]


def test_database_created_by_harness9_ddl_opens_and_stays_writable_by_harness9(tmp_path):
    path = tmp_path / "h9.db"
    con = sqlite3.connect(path)
    con.executescript(HARNESS9_DDL)
    con.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('s1', 1, 1)")
    con.execute(
        "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, created_at) VALUES (?,?,?,?,?,?)",
        ("s1", "assistant", "", '[{"id":"c1","name":"bash","arguments":{"command":"ls"}}]', None, 1),
    )
    con.execute(
        "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, created_at) VALUES (?,?,?,?,?,?)",
        ("s1", "user", "a.py", None, "c1", 1),
    )
    con.commit()
    con.close()
    with SessionStore(path) as s:
        assert s.get_messages("s1") == [
            Message("assistant", "", (ToolCall("c1", "bash", '{"command":"ls"}'),)),
            Message("tool", "a.py", (), "c1"),
        ]
        assert [i.title for i in s.list_sessions()] == [""]
    # harness9's own statements (which name their columns) still work after the title column.
    con = sqlite3.connect(path)
    con.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('s2', 2, 2)")
    con.commit()
    con.close()


def test_not_a_database_is_a_format_error(tmp_path):
    p = tmp_path / "notes.db"
    p.write_text("this is not sqlite\n" * 100)
    with pytest.raises(FormatError, match=r"notes\.db"):
        SessionStore(p)


# -- round trips ----------------------------------------------------------------------------
def test_round_trip_is_exact(store):
    sid = store.create_session("s1", title="demo")
    msgs = transcript()
    store.add_messages(sid, msgs)
    back = store.get_messages(sid)
    assert back == msgs
    for a, b in zip(back, msgs):  # equality covers these; spelled out for the tool-call text
        assert [tc.arguments for tc in a.tool_calls] == [tc.arguments for tc in b.tool_calls]
        assert a.nbytes == b.nbytes  # harness9's token estimate is unchanged by persistence


def test_rows_as_harness9_reads_them(store):
    sid = store.create_session("s1")
    store.add_messages(sid, transcript()[:4])
    rows = store._db.execute(HARNESS9_SELECT, (sid,)).fetchall()
    assert rows == [
        ("user", "修复 tests/test_api.py 里的 KeyError", None, None),
        (
            "assistant",
            "",
            '[{"id":"c1","name":"bash","arguments":{"command": "pytest -x", "timeout": 60}},'
            '{"id":"c2","name":"read_file","arguments":{"path":"a<b>&c.py"}}]',
            None,
        ),
        ("user", "1 failed", None, "c1"),  # tool results are harness9 "user" messages
        ("user", "", None, "c2"),
    ]


def test_empty_and_non_json_arguments_encoding():
    text = encode_tool_calls([ToolCall("c3", "noargs", ""), ToolCall("c4", "weird", "not json {")])
    # "" is Go's nil RawMessage (null); non-JSON text is a string plus h9eval's flag.
    assert text == (
        '[{"id":"c3","name":"noargs","arguments":null},'
        '{"id":"c4","name":"weird","arguments":"not json {","' + ARGUMENTS_TEXT_FLAG + '":true}]'
    )
    assert encode_tool_calls([]) is None


@pytest.mark.parametrize(
    "stored, expected",
    [
        ('[{"id":"c1","name":"bash","arguments":{"a":1}}]', '{"a":1}'),
        ('[ { "id" : "c1" , "name":"bash" , "arguments" : [ 1 , 2 ] } ]', "[ 1 , 2 ]"),  # raw span
        ('[{"id":"c1","name":"bash","arguments":"{\\"a\\":1}"}]', '"{\\"a\\":1}"'),  # a JSON string stays raw
        ('[{"ID":"c1","Name":"bash","Arguments":{}}]', "{}"),  # Go matches keys case-insensitively
        ('[{"id":"c1","name":"bash","arguments":null}]', ""),
        ('[{"id":"c1","name":"bash"}]', ""),
    ],
)
def test_decode_keeps_raw_argument_text(stored, expected):
    (tc,) = decode_tool_calls(stored)
    assert (tc.id, tc.name, tc.arguments) == ("c1", "bash", expected)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_any_argument_text_round_trips(args):
    (tc,) = decode_tool_calls(encode_tool_calls([ToolCall("id", "name", args)]))
    assert tc.arguments == args


def test_is_error_and_user_role_of_tool_results_are_not_persisted(store):
    sid = store.create_session("s1")
    store.add_messages(
        sid, [Message("assistant", "", (ToolCall("c1", "x", "{}"),)), Message("user", "boom", (), "c1", True)]
    )
    back = store.get_messages(sid)
    # harness9 drops is_error; a stored tool result always reloads with role "tool".
    assert back[1] == Message("tool", "boom", (), "c1", False)


def test_get_messages_limit_returns_newest_in_ascending_order(store):
    sid = store.create_session("s1")
    msgs = [Message("user", f"m{i}") for i in range(5)]
    store.add_messages(sid, msgs[:3])
    store.add_messages(sid, msgs[3:])
    assert [m.content for m in store.get_messages(sid, limit=2)] == ["m3", "m4"]
    assert store.get_messages(sid, limit=10) == msgs
    assert store.get_messages(sid, limit=0) == msgs
    assert store.get_messages(sid, limit=-1) == msgs
    assert store.get_messages("nobody") == []


def test_add_messages_is_transactional(store):
    sid = store.create_session("s1")
    store.add_messages(sid, [Message("user", "keep")])
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate cannot be stored as UTF-8
        store.add_messages(sid, [Message("user", "a"), Message("user", "bad \ud800")])
    assert [m.content for m in store.get_messages(sid)] == ["keep"]


def test_unknown_and_duplicate_sessions(store):
    with pytest.raises(UnknownSessionError, match="'ghost'"):
        store.add_messages("ghost", [Message("user", "x")])
    store.add_messages("ghost", [])  # harness9: empty input is a no-op, no error
    store.create_session("s1")
    with pytest.raises(H9InputError, match="already exists"):
        store.create_session("s1")
    assert store.create_session("s1", exist_ok=True) == "s1"
    assert len(store.create_session()) == 36  # a UUID, as harness9's NewSession


def test_list_sessions_order_and_counts(tmp_path):
    t = [100]
    with SessionStore(tmp_path / "s.db", clock=lambda: t[0]) as s:
        s.create_session("a", title="first")
        s.create_session("b")
        t[0] = 200
        s.add_messages("a", [Message("user", "x"), Message("assistant", "y")])
        info = s.list_sessions()
        assert [(i.id, i.title, i.created_at, i.updated_at, i.message_count) for i in info] == [
            ("a", "first", 100, 200, 2),
            ("b", "", 100, 100, 0),
        ]
        s.clear("a")  # harness9's Clear keeps the session row and does not bump updated_at
        assert [(i.id, i.updated_at, i.message_count) for i in s.list_sessions()] == [("a", 200, 0), ("b", 100, 0)]


def test_delete_cascades_and_plans(store):
    sid = store.create_session("s1")
    store.add_messages(sid, transcript())
    assert store.get_plan(sid) is None
    store.save_plan(sid, [{"id": "1", "content": "fix", "status": "pending"}])
    assert store.get_plan(sid) == [{"id": "1", "content": "fix", "status": "pending"}]
    store.delete_session(sid)
    assert store._db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    assert store._db.execute("SELECT COUNT(*) FROM session_plans").fetchone()[0] == 0


def test_bad_tool_calls_cell_names_the_row(store):
    sid = store.create_session("s1")
    store._db.execute(
        "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, created_at)"
        " VALUES (?, 'assistant', '', '[{\"id\":', NULL, 0)",
        (sid,),
    )
    with pytest.raises(FormatError, match=r"sessions\.db:messages\.id 1: bad message in session .*: column tool_calls"):
        store.get_messages(sid)


# -- write-back (spec §2.3) -----------------------------------------------------------------
def test_replace_history_strips_system_and_replaces(store):
    sid = store.create_session("s1")
    store.add_messages(sid, transcript())
    compacted = [Message("system", "sys"), Message("user", "[Context Compaction]\n## Summary\nx"), *transcript()[-2:]]
    store.replace_history(sid, compacted)
    assert store.get_messages(sid) == compacted[1:]


def test_replace_history_rolls_back_when_add_fails(store, monkeypatch):
    sid = store.create_session("s1")
    original = transcript()
    store.add_messages(sid, original)
    calls = []
    real_add = store.add_messages

    def failing_once(session_id, msgs):
        calls.append(list(msgs))
        if len(calls) == 1:
            raise sqlite3.OperationalError("disk I/O error (simulated)")
        return real_add(session_id, msgs)

    monkeypatch.setattr(store, "add_messages", failing_once)
    with pytest.raises(sqlite3.OperationalError, match="simulated"):
        store.replace_history(sid, [Message("system", "s"), Message("user", "compacted")])
    assert len(calls) == 2  # the failed add, then the rollback (harness9's test asserts the same)
    assert calls[0] == [Message("user", "compacted")]
    assert store.get_messages(sid) == original


def test_replace_history_rolls_back_on_a_real_insert_failure(store):
    sid = store.create_session("s1")
    original = transcript()
    store.add_messages(sid, original)
    with pytest.raises(UnicodeEncodeError):
        store.replace_history(sid, [Message("user", "ok"), Message("user", "\udfff")])
    assert store.get_messages(sid) == original


def test_replace_history_restores_an_explicit_prefix(store, monkeypatch):
    sid = store.create_session("s1")
    store.add_messages(sid, transcript())
    prefix = [Message("system", "s"), Message("user", "the prefix")]
    real_add = store.add_messages
    n = [0]

    def failing_once(session_id, msgs):
        n[0] += 1
        if n[0] == 1:
            raise RuntimeError("boom")
        return real_add(session_id, msgs)

    monkeypatch.setattr(store, "add_messages", failing_once)
    with pytest.raises(RuntimeError, match="boom"):
        store.replace_history(sid, [Message("user", "compacted")], prefix=prefix)
    assert store.get_messages(sid) == prefix[1:]


def test_failed_rollback_keeps_the_first_error_and_notes_the_second(store, monkeypatch):
    sid = store.create_session("s1")
    store.add_messages(sid, [Message("user", "x")])

    def always_fail(session_id, msgs):
        raise RuntimeError(f"fail {len(msgs)}")

    monkeypatch.setattr(store, "add_messages", always_fail)
    with pytest.raises(RuntimeError, match="fail 2") as ei:
        store.replace_history(sid, [Message("user", "a"), Message("user", "b")])
    assert any("rollback" in n and "fail 1" in n for n in ei.value.__notes__)
    assert store.get_messages(sid) == []  # as in harness9: cleared, nothing restored


def test_replace_history_of_unknown_session_clears_nothing(store):
    with pytest.raises(UnknownSessionError):
        store.replace_history("ghost", [Message("user", "x")])
