"""Every error line names the file (and line or key path) it concerns (issue 28): input nested
past Python's recursion limit (a JSONL line 100,000 deep through ``run``, a spec 3,000 deep or
with 5,000 dotted key parts), a full disk said as "disk full" (SQLite's ``disk I/O error`` and
``cannot rollback`` included), and specs that refuse a string ``history_modes`` and a window
below the stated minimum."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.core import storage
from h9eval.runs.spec import MIN_WINDOW_TOKENS

SPEC_TAIL = '[tasks]\nspecs = ["synthetic:small:0"]\n[[policies]]\nkind = "keep_all"\n'


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# -- nesting past the recursion limit -----------------------------------------------------------
@pytest.mark.parametrize(
    "line", ["[" * 100_000 + "]" * 100_000, '{"role": "user", "content": ' + "[" * 100_000 + "]" * 100_000 + "}"]
)
def test_a_jsonl_line_nested_100000_deep_through_run_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    p = tmp_path / "deep.jsonl"
    p.write_text(line + "\n")
    assert main(["run", "--task", str(p), "--out", str(tmp_path / "out")]) == 2
    err = _one_line(capsys)
    assert f"{p}:line 1: JSON nested too deeply" in err and "RecursionError" not in err


def test_a_task_jsonl_nested_deep_on_a_later_line_names_that_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from h9eval.tasks import tasks_to_jsonl
    from h9eval.tasks.synthetic import generate

    p = tmp_path / "tasks.jsonl"
    tasks_to_jsonl([generate("small", seed=0)], p)
    with open(p, "a") as f:
        f.write("[" * 100_000 + "]" * 100_000 + "\n")
    assert main(["run", "--task", str(p), "--out", str(tmp_path / "out")]) == 2
    assert f"{p}:line 2: JSON nested too deeply" in _one_line(capsys)


def _spec(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


def _sweep(p: Path, tmp_path: Path) -> int:
    return main(["sweep", str(p), "--out", str(tmp_path / "out"), "--workers", "0", "--no-progress"])


def test_a_spec_nested_3000_deep_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _spec(
        tmp_path,
        'name = "x"\n' + SPEC_TAIL + '[summarizer]\nname = "offline"\n' + "v = " + "[" * 3000 + "]" * 3000 + "\n",
    )
    assert _sweep(p, tmp_path) == 2
    err = _one_line(capsys)
    assert f"{p}:line 8: TOML nested too deeply" in err and "RecursionError" not in err, err


def test_a_spec_key_of_5000_dotted_parts_names_file_and_key_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _spec(tmp_path, 'name = "x"\n' + ".".join(f"k{i}" for i in range(5000)) + " = 1\n" + SPEC_TAIL)
    assert _sweep(p, tmp_path) == 2
    err = _one_line(capsys)
    assert f"{p}: k0.k1.k2.k3.k4.k5.k6.k7...: nested more than 32 levels deep" in err, err


def test_a_dict_spec_nested_deep_names_the_key_path() -> None:
    from h9eval.core.errors import ConfigError
    from h9eval.sweeps.spec import load_spec

    deep: dict[str, object] = {}
    cur = deep
    for _ in range(3000):
        cur["a"] = {}
        cur = cur["a"]  # type: ignore[assignment]
    with pytest.raises(ConfigError, match=r"^summarizer\.params\.a\.a\.a\.a\.a\.a\.\.\.: nested more than 32"):
        load_spec(
            {
                "name": "x",
                "tasks": ["synthetic:small:0"],
                "policies": [{"kind": "keep_all"}],
                "summarizer": {"name": "offline", "params": deep},
            }
        )


# -- spec values --------------------------------------------------------------------------------
def test_a_string_history_modes_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _spec(tmp_path, 'name = "x"\nhistory_modes = "view"\n' + SPEC_TAIL)
    assert _sweep(p, tmp_path) == 2
    err = _one_line(capsys)
    assert f"{p}: history_modes: expected a list of history modes" in err and "got 'view'" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("window", [1, MIN_WINDOW_TOKENS - 1])
def test_a_window_below_the_minimum_is_refused_in_a_spec_and_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], window: int
) -> None:
    p = _spec(tmp_path, f'name = "x"\nwindow = {window}\n' + SPEC_TAIL)
    assert _sweep(p, tmp_path) == 2
    err = _one_line(capsys)
    assert f"{p}: window: must be an integer >= {MIN_WINDOW_TOKENS:,}" in err and f"got {window}" in err, err
    assert main(["run", "--task", "synthetic:small:0", "--window", str(window), "--out", str(tmp_path / "run")]) == 2
    assert f"window must be an integer >= {MIN_WINDOW_TOKENS:,} tokens, got {window}" in _one_line(capsys)
    p.write_text(f'name = "x"\nwindow = {MIN_WINDOW_TOKENS}\n' + SPEC_TAIL)  # the minimum itself is accepted
    assert _sweep(p, tmp_path) == 0


# -- a full disk --------------------------------------------------------------------------------
@pytest.mark.parametrize("message", ["disk I/O error", "cannot rollback - no transaction is active"])
def test_an_ambiguous_sqlite_error_on_a_full_file_system_is_said_as_disk_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, message: str
) -> None:
    e = sqlite3.OperationalError(message)
    storage.tag_path(e, tmp_path / "sessions.db")
    monkeypatch.setattr(storage, "free_bytes", lambda p: 4096)
    line = storage.storage_error_line(e)
    assert line == f"{tmp_path / 'sessions.db'}: disk full (4,096 bytes left on its file system; {message})"
    monkeypatch.setattr(storage, "free_bytes", lambda p: 10 * storage.DISK_FULL_BYTES)  # room left: not a full disk
    assert storage.storage_error_line(e) == f"{tmp_path / 'sessions.db'}: {message}"


def test_enospc_and_sqlite_full_are_disk_full_and_name_the_file(tmp_path: Path) -> None:
    e = OSError(errno.ENOSPC, "No space left on device")
    storage.tag_path(e, tmp_path / "a.jsonl")
    assert storage.storage_error_line(e).startswith(f"{tmp_path / 'a.jsonl'}: disk full (")
    e2 = sqlite3.OperationalError("database or disk is full")
    storage.tag_path(e2, tmp_path / "c.sqlite")
    assert storage.storage_error_line(e2).startswith(f"{tmp_path / 'c.sqlite'}: disk full (")


def test_an_sqlite_error_names_its_database(tmp_path: Path) -> None:
    con = storage.connect(tmp_path / "x.sqlite")
    with pytest.raises(sqlite3.OperationalError) as got:
        con.execute("SELECT * FROM missing")
    con.close()
    assert storage.storage_error_line(got.value) == f"{tmp_path / 'x.sqlite'}: no such table: missing"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 300 KiB tmpfs (root only: skipped where mounting is not allowed)."""
    d = tmp_path / "small"
    d.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(d)], capture_output=True).returncode
    ):
        pytest.skip("needs root and mount to make a small file system")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


@pytest.mark.parametrize("pad_bytes", [0, 150_000, 230_000, 280_000])
def test_a_run_on_a_full_disk_says_disk_full_and_names_the_file(
    small_fs: Path, capsys: pytest.CaptureFixture[str], pad_bytes: int
) -> None:
    (small_fs / "pad").write_bytes(b"\0" * pad_bytes)  # how full the disk is decides what fails first
    assert main(["run", "--task", "synthetic:small:1", "--window", "16000", "--out", str(small_fs / "run")]) == 2
    err = _one_line(capsys)
    assert "disk full (" in err and f"{small_fs}/run/" in err, err
    assert "cannot rollback" not in err and "cannot open as a harness9 session database" not in err, err
