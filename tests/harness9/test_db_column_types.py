"""A harness9 database whose JSON columns hold something other than text (issue 28): an
INTEGER or REAL ``tool_calls`` (a ``TypeError`` traceback and exit 1 before), a BLOB that is not
UTF-8, an INTEGER plan: one line naming the file, the row and the column, exit 2, through both
``tasks inspect`` and ``run``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.core.errors import FormatError
from h9eval.harness9.session_store import SessionStore
from h9eval.tasks.recorded.harness9_db import load_db_tasks


# Columns without a declared type (no affinity): SQLite keeps an INTEGER an INTEGER there, where
# harness9's own TEXT columns would turn it into text. Another writer's table can look like this.
UNTYPED_DDL = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at, updated_at);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, role, content, tool_calls, tool_call_id,
                       created_at);
CREATE TABLE session_plans (session_id TEXT PRIMARY KEY, items, updated_at);
"""


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "sessions.db"
    con = sqlite3.connect(db)
    with con:
        con.executescript(UNTYPED_DDL)
        con.execute("INSERT INTO sessions VALUES ('s1', 1, 1)")
        for row in (
            ("user", "fix the test", None, None),
            ("assistant", "", '[{"id":"c1","name":"bash","arguments":{}}]', None),
            ("tool", "FAIL", None, "c1"),
            ("assistant", "done", None, None),
        ):
            con.execute(
                "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, created_at) VALUES ('s1', "
                "?, ?, ?, ?, 1)",
                row,
            )
    con.close()
    assert len(load_db_tasks(db)[0].messages) == 4  # readable as it is
    return db


def _set(db: Path, sql: str, *args: object) -> None:
    con = sqlite3.connect(db)
    with con:
        con.execute(sql, args)
    con.close()


def _msg_id(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT id FROM messages WHERE tool_calls IS NOT NULL").fetchone()[0])
    finally:
        con.close()


@pytest.mark.parametrize(("value", "kind"), [(5, "an INTEGER"), (1.5, "a REAL")])
@pytest.mark.parametrize("command", ["inspect", "run"])
def test_a_non_text_tool_calls_is_one_line_naming_row_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object, kind: str, command: str
) -> None:
    db = _db(tmp_path)
    mid = _msg_id(db)
    _set(db, "UPDATE messages SET tool_calls = ? WHERE id = ?", value, mid)
    argv = (
        ["tasks", "inspect", str(db)]
        if command == "inspect"
        else ["run", "--task", str(db), "--out", str(tmp_path / "out")]
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"{db}:messages.id {mid}:" in err and "column tool_calls" in err and f"got {kind}" in err, err


def test_a_blob_that_is_not_utf8_names_its_column(tmp_path: Path) -> None:
    db = _db(tmp_path)
    _set(db, "UPDATE messages SET content = ? WHERE role = 'user'", b"\xff\xfe bad")
    with pytest.raises(
        FormatError, match=r"messages\.id 1: bad message in session 's1': column content: a BLOB that is not UTF-8"
    ):
        load_db_tasks(db)


def test_a_non_text_plan_names_its_column(tmp_path: Path) -> None:
    db = _db(tmp_path)
    _set(db, "INSERT INTO session_plans VALUES ('s1', 7, 1)")
    with (
        SessionStore(db) as s,
        pytest.raises(FormatError, match=r"session_plans: plan of session 's1': column items: expected JSON text"),
    ):
        s.get_plan("s1")
    _set(db, "UPDATE session_plans SET items = ?", "[" * 100_000 + "]" * 100_000)
    with SessionStore(db) as s, pytest.raises(FormatError, match="nested too deeply"):
        s.get_plan("s1")
