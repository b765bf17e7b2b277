"""harness9_data: tasks from a harness9 sessions.db and the compactions table from its records."""

from __future__ import annotations

from pathlib import Path

import json
import sqlite3

import pandas as pd
import pytest

from h9eval.compaction.anchors import Anchor
from h9eval.compaction.records import CompactionRecord, OffloadEntry, Tier
from h9eval.core.errors import FormatError, H9InputError
from h9eval.harness9.records_dir import read_records_dir
from h9eval.results.schema import COMPACTION_COLUMNS
from h9eval.results.tables import records_to_frame
from h9eval.tasks.recorded.harness9_db import list_sessions, load_db_tasks, load_session_task
from h9eval.core.messages import Message, ToolCall
from h9eval.harness9.session_store import SessionStore
from h9eval.core.tokens import estimate_tokens

from test_session_store import HARNESS9_DDL, transcript

COMPACTION_MSG = (
    "[Context Compaction]\n## Anchors\n\n### User Intent\nMake the API tests pass\n\n"
    "### Execution Progress\nN/A\n\n## Summary\nRan pytest; one KeyError."
)


def _insert(con, sid, role, content, tool_calls=None, tool_call_id=None):
    # The INSERT harness9's AddMessages runs, with Go's NULLs for empty tool_calls/tool_call_id.
    con.execute(
        "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, created_at) VALUES (?, ?, ?, ?, "
        "?, ?)",
        (sid, role, content, tool_calls, tool_call_id, 1_700_000_000),
    )


@pytest.fixture
def h9_db(tmp_path):
    """A database laid out exactly as harness9 writes it (its DDL, its rows)."""
    path = tmp_path / "sessions.db"
    con = sqlite3.connect(path)
    con.executescript("PRAGMA journal_mode=WAL;" + HARNESS9_DDL)
    for sid, t in (("plain", 300), ("compacted", 200), ("empty", 100), ("only-compaction", 50)):
        con.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES (?, ?, ?)", (sid, t, t))
    _insert(con, "plain", "user", "Fix the KeyError in tests/test_api.py " + "x" * 300)
    _insert(con, "plain", "assistant", "", '[{"id":"c1","name":"bash","arguments":{"command":"pytest"}}]')
    _insert(con, "plain", "user", "1 failed", None, "c1")
    _insert(con, "plain", "assistant", "Fixed.")
    _insert(con, "plain", "user", "Now also add a regression test")
    _insert(con, "plain", "assistant", "Added.")
    # Post-write-back history: the compaction message replaced the head.
    _insert(con, "compacted", "user", COMPACTION_MSG)
    _insert(con, "compacted", "assistant", "", '[{"id":"c9","name":"bash","arguments":{}}]')
    _insert(con, "compacted", "user", "ok", None, "c9")
    _insert(con, "compacted", "user", "Also update the changelog")
    _insert(con, "only-compaction", "user", COMPACTION_MSG)
    _insert(con, "only-compaction", "assistant", "Continuing.")
    con.commit()
    con.close()
    return path


PLAIN = [
    Message("user", "Fix the KeyError in tests/test_api.py " + "x" * 300),
    Message("assistant", "", (ToolCall("c1", "bash", '{"command":"pytest"}'),)),
    Message("tool", "1 failed", (), "c1"),
    Message("assistant", "Fixed."),
    Message("user", "Now also add a regression test"),
    Message("assistant", "Added."),
]


# -- sessions -------------------------------------------------------------------------------
def test_list_sessions(h9_db):
    rows = list_sessions(h9_db)
    assert [r["id"] for r in rows] == ["plain", "compacted", "empty", "only-compaction"]  # updated_at DESC
    plain = rows[0]
    assert plain["message_count"] == 6
    assert plain["estimated_tokens"] == estimate_tokens(PLAIN)
    assert plain["first_user_message"] == PLAIN[0].content[:200]
    assert len(plain["first_user_message"]) == 200
    assert rows[1]["first_user_message"] == "Also update the changelog"  # the compaction message is skipped
    assert [r["compacted_history"] for r in rows] == [False, True, False, True]
    assert rows[2] == {
        "id": "empty",
        "message_count": 0,
        "estimated_tokens": 0,
        "first_user_message": "",
        "compacted_history": False,
    }


def test_load_session_task(h9_db):
    task = load_session_task(h9_db, "plain")
    assert task.task_id == "harness9_db:plain"
    assert task.source.kind == "harness9_db"
    assert task.source.session == "plain"
    assert task.source.path == str(h9_db)
    assert list(task.messages) == PLAIN
    assert task.intent.statement == PLAIN[0].content
    assert [(c.message_index, task.intent.at(c.message_index).statement) for c in task.intent.changes] == [
        (4, PLAIN[0].content + "\n\nNow also add a regression test")
    ]
    # stored as what the prompt adds, not the whole statement again (linear in the prompts)
    assert [(c.statement, c.appends) for c in task.intent.changes] == [("Now also add a regression test", True)]
    assert task.metadata["compacted_history"] is False
    assert task.metadata["intent_source"] == "first_user_message"
    assert "compaction_message_index" not in task.metadata


def test_compacted_history_is_flagged(h9_db):
    task = load_session_task(h9_db, "compacted")
    md = task.metadata
    assert md["compacted_history"] is True
    assert md["compaction_message_index"] == 0
    assert md["compaction_message_indices"] == [0]
    assert "post-write-back" in md["compaction_note"] and "not the original" in md["compaction_note"]
    # The first request was summarised away: the prompt after the compaction is a later
    # refinement, the compaction's User Intent anchor is the task (issue 21).
    assert task.intent.statement == "Make the API tests pass"
    assert [task.intent.statement_of(k) for k in range(len(task.intent.changes))] == [
        "Make the API tests pass\n\nAlso update the changelog"
    ]
    assert md["intent_source"] == "compaction_anchor"
    assert md["compactions"] == [{"message_index": 0, "marker": "[Context Compaction]"}]
    # With no user prompt left, the intent comes from the stored User Intent anchor.
    only = load_session_task(h9_db, "only-compaction")
    assert only.intent.statement == "Make the API tests pass"
    assert only.metadata["intent_source"] == "compaction_anchor"


def test_load_db_tasks(h9_db):
    assert [t.source.session for t in load_db_tasks(h9_db)] == ["plain", "compacted", "only-compaction"]
    assert len(load_db_tasks(h9_db, include_empty=True)) == 4


def test_unknown_session_suggests(h9_db):
    with pytest.raises(H9InputError, match=r"unknown session 'plian'; did you mean 'plain'"):
        load_session_task(h9_db, "plian")


def test_reader_is_read_only(h9_db):
    before = sorted(p.name for p in h9_db.parent.iterdir())
    data = h9_db.read_bytes()
    load_db_tasks(h9_db)
    assert sorted(p.name for p in h9_db.parent.iterdir()) == before
    assert h9_db.read_bytes() == data


def test_database_written_by_session_store(tmp_path):
    path = tmp_path / "run" / "sessions.db"
    with SessionStore(path) as s:
        s.create_session("s1")
        s.add_messages("s1", transcript())
    task = load_session_task(path, "s1")
    assert list(task.messages) == transcript()
    assert task.intent.statement == transcript()[0].content


# -- bad databases --------------------------------------------------------------------------
def test_database_without_tables(tmp_path):
    p = tmp_path / "other.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE notes (x)")
    con.commit()
    con.close()
    with pytest.raises(FormatError, match=r"other\.db: missing table 'sessions'"):
        list_sessions(p)


def test_database_without_messages_table(tmp_path):
    p = tmp_path / "half.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at INTEGER, updated_at INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(FormatError, match=r"half\.db: missing table 'messages'"):
        load_db_tasks(p)


def test_messages_table_lacking_a_column(tmp_path):
    p = tmp_path / "old.db"
    con = sqlite3.connect(p)
    con.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT);"
    )
    con.close()
    with pytest.raises(FormatError, match=r"old\.db: table 'messages' lacks column\(s\) tool_calls, tool_call_id"):
        load_db_tasks(p)


def test_not_a_database(tmp_path):
    p = tmp_path / "records.jsonl"
    p.write_text('{"a": 1}\n')
    with pytest.raises(FormatError, match=r"records\.jsonl: not an SQLite database"):
        list_sessions(p)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(FormatError, match=r"empty\.db: missing table 'sessions'"):
        list_sessions(empty)
    with pytest.raises(FormatError, match=r"absent\.db: no such database file"):
        list_sessions(tmp_path / "absent.db")


def test_bad_tool_calls_cell(h9_db):
    con = sqlite3.connect(h9_db)
    _insert(con, "plain", "assistant", "", "{not json")
    con.commit()
    con.close()
    with pytest.raises(
        FormatError, match=r"sessions\.db:messages\.id 13: bad message in session 'plain': column tool_calls"
    ):
        load_session_task(h9_db, "plain")


# -- compaction records ---------------------------------------------------------------------
def _records(session: str) -> list[CompactionRecord]:
    return [
        CompactionRecord(
            id="11111111-2222-4333-8444-555555555555",
            session_id=session,
            timestamp="2026-09-15T10:00:00.123456789+08:00",
            tier=Tier.WARN,
            tokens_before=1000,
            tokens_after=700,
            msgs_before=10,
            msgs_after=10,
            offloaded=[
                OffloadEntry("c1", "bash", f"{session}/c1.txt", 1200, 30),
                OffloadEntry("c2", "grep", "x", 34, 2),
            ],
            compression_ratio=0.7,
            duration_ns=1500,
        ),
        CompactionRecord(
            id="r2",
            session_id=session,
            timestamp="2026-09-15T10:00:01.5+08:00",
            tier=Tier.SOFT,
            tokens_before=1300,
            tokens_after=400,
            msgs_before=14,
            msgs_after=7,
            anchors=[Anchor("user_intent", "fix <it> & ship"), Anchor("next_steps", "N/A")],
            summarized=5,
            preserved_tail=6,
            summary_text="did things",
            compression_ratio=400 / 1300,
            duration_ns=2_000_000_000,
        ),
        CompactionRecord(
            id="r3",
            session_id=session,
            tier=Tier.EMERGENCY,
            tokens_before=5000,
            tokens_after=900,
            msgs_before=40,
            msgs_after=3,
            compression_ratio=0.18,
            error="emergency fallback: forced truncation",
        ),
    ]


def _write(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.to_jsonl_line() for r in records), encoding="utf-8")


def test_read_records_dir(tmp_path):
    d = tmp_path / "compaction_records"
    _write(d / "s-b.jsonl", _records("s-b"))
    _write(d / "s-a.jsonl", _records("s-a")[:1])
    df = read_records_dir(d)
    assert tuple(df.columns) == COMPACTION_COLUMNS
    assert list(zip(df.session_id, df.record_index)) == [("s-a", 0), ("s-b", 0), ("s-b", 1), ("s-b", 2)]
    assert set(df.run_id) == {"harness9:s-a", "harness9:s-b"}
    b = df[df.session_id == "s-b"].reset_index(drop=True)
    assert list(b.tier) == [1, 2, 4]
    assert list(b.tier_name) == ["warn", "soft", "emergency"]
    assert list(b.n_offloaded) == [2, 0, 0]
    assert list(b.offloaded_bytes) == [1234, 0, 0]
    assert json.loads(b.offloaded_json[0])[0] == {
        "tool_call_id": "c1",
        "tool_name": "bash",
        "file_path": "s-b/c1.txt",
        "bytes": 1200,
        "lines": 30,
    }
    assert b.offloaded_json[1] is None and b.anchors_json[0] is None  # harness9's null kept as missing
    assert list(b.n_anchors) == [0, 2, 0]
    assert json.loads(b.anchors_json[1])[0] == {"type": "user_intent", "content": "fix <it> & ship"}
    assert list(b.error) == ["", "", "emergency fallback: forced truncation"]
    assert list(b.duration_ns) == [1500, 2_000_000_000, 0]
    assert b.timestamp[0] == "2026-09-15T10:00:00.123456789+08:00"
    assert b.compression_ratio[1] == pytest.approx(400 / 1300)
    assert str(df.tier.dtype) == "int64" and str(df.compression_ratio.dtype) == "float64"


def test_records_to_frame_matches_the_file_reader(tmp_path):
    recs = _records("s1")
    _write(tmp_path / "s1.jsonl", recs)
    from_file = read_records_dir(tmp_path / "s1.jsonl", run_id="run-7")
    in_memory = records_to_frame(recs, run_id="run-7", session_id="s1")
    pd.testing.assert_frame_equal(from_file, in_memory)


def test_go_written_line_is_read(tmp_path):
    # A line as harness9's Go encoder writes it (HTML-escaped session id, null anchors, no error).
    line = (
        '{"id":"9f1c-…","session_id":"s\\u003c1\\u003e","timestamp":"2026-09-15T10:00:00.000000001+08:00",'
        '"tier":1,"tokens_before":100,"tokens_after":100,"msgs_before":4,"msgs_after":4,"anchors":null,'
        '"offloaded":null,"summarized":0,"preserved_tail":0,"summary_text":"","compression_ratio":1,"duration":42}\n'
    )
    (tmp_path / "s<1>.jsonl").write_text(line, encoding="utf-8")
    df = read_records_dir(tmp_path)
    assert df.to_dict("records")[0] == {
        "schema_version": 1,
        "run_id": "harness9:s<1>",
        "session_id": "s<1>",
        "record_index": 0,
        "record_id": "9f1c-…",
        "timestamp": "2026-09-15T10:00:00.000000001+08:00",
        "tier": 1,
        "tier_name": "warn",
        "tokens_before": 100,
        "tokens_after": 100,
        "msgs_before": 4,
        "msgs_after": 4,
        "n_anchors": 0,
        "anchors_json": None,
        "n_offloaded": 0,
        "offloaded_bytes": 0,
        "offloaded_json": None,
        "summarized": 0,
        "preserved_tail": 0,
        "summary_text": "",
        "compression_ratio": 1.0,
        "duration_ns": 42,
        "error": "",
    }


def test_run_folder_and_empty_folder(tmp_path):
    _write(tmp_path / "run" / "compaction_records" / "s1.jsonl", _records("s1"))
    assert len(read_records_dir(tmp_path / "run")) == 3
    (tmp_path / "nothing").mkdir()
    empty = read_records_dir(tmp_path / "nothing")
    assert tuple(empty.columns) == COMPACTION_COLUMNS and len(empty) == 0
    pd.testing.assert_frame_equal(empty, records_to_frame([], run_id="r", session_id="s"))
    with pytest.raises(FormatError, match="no such record file"):
        read_records_dir(tmp_path / "missing")


def test_record_line_not_json(tmp_path):
    p = tmp_path / "sess-1.jsonl"
    p.write_text(_records("sess-1")[0].to_jsonl_line() + "{truncated\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"sess-1\.jsonl:line 2: line is not JSON"):
        read_records_dir(tmp_path)


def test_record_lacking_fields(tmp_path):
    p = tmp_path / "sess-2.jsonl"
    d = _records("sess-2")[1].to_json()
    del d["tokens_after"]
    p.write_text(_records("sess-2")[0].to_jsonl_line() + "\n" + json.dumps(d) + "\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"sess-2\.jsonl:line 3: record lacks field 'tokens_after'"):
        read_records_dir(p)


def test_reads_pending_wal_pages_of_a_live_database(tmp_path):
    # harness9 keeps its connection open while running: committed rows may still sit in -wal.
    path = tmp_path / "live.db"
    with SessionStore(path) as s:
        s.create_session("s1")
        s.add_messages("s1", transcript())
        assert (tmp_path / "live.db-wal").exists()
        assert list(load_session_task(path, "s1").messages) == transcript()


def test_unknown_session_among_many_does_not_list_them_all(tmp_path):
    path = tmp_path / "many.db"
    with SessionStore(path) as s:
        for i in range(30):
            s.create_session(f"session-{i:02d}")
    with pytest.raises(H9InputError, match=r"unknown session 'session-5'; did you mean .*\(30 sessions; see") as ei:
        load_session_task(path, "session-5")
    assert "session-29" not in str(ei.value)


def test_replay_outputs_read_back_as_harness9_data(tmp_path: Path) -> None:
    """A replay writes harness9's formats: its records read back into the same compactions
    table, its session database loads as the written-back history with harness9's own SQL."""
    import sqlite3

    import pandas as pd

    from h9eval.compaction import ProgressiveCompactor
    from h9eval.harness9.records_dir import read_records_dir
    from h9eval.tasks.recorded.harness9_db import list_sessions, load_session_task
    from h9eval.runs.replay import ReplayConfig, replay
    from h9eval.tasks.synthetic import generate

    task = generate("small", seed=1)
    res = replay(
        task,
        ProgressiveCompactor(context_window_tokens=16000),
        config=ReplayConfig(history_mode="write_back"),
        out_dir=tmp_path / "run",
        run_id="rt",
    )
    assert len(res.compactions) > 0
    back = read_records_dir(tmp_path / "run" / "compaction_records", run_id="rt")
    pd.testing.assert_frame_equal(
        back.reset_index(drop=True), res.compactions.reset_index(drop=True), check_dtype=False
    )
    db = tmp_path / "run" / "sessions.db"
    (info,) = list_sessions(db)
    loaded = load_session_task(db, info["id"])
    expected = [m for m in res.final_history if m.role != "system"]  # harness9 never persists it
    assert [(m.content, m.tool_call_id, m.tool_calls) for m in loaded.messages] == [
        (m.content, m.tool_call_id, m.tool_calls) for m in expected
    ]
    assert loaded.metadata.get("compacted_history") is True
    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT role, content, tool_calls, tool_call_id FROM messages WHERE session_id = ? ORDER BY id",
            (info["id"],),
        )
        .fetchall()
    )
    assert len(rows) == len(expected) and all(r[0] in ("user", "assistant") for r in rows)
