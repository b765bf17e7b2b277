"""No lost data and no silently wrong results (issue 20 §2).

Two sweeps into one folder, a stale lock, a full disk while re-running into an existing run
folder (an injected ``ENOSPC`` / ``database or disk is full``), duplicate tool call ids, two
recorded files of one session in one ``run --task FOLDER``, a cell part copied from another
cell, and killed sweeps' offload folders.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.compaction.offload import CompactionOffloader, OffloadHook, ToolOutput
from h9eval.core.errors import FormatError
from h9eval.core.lock import LOCK_NAME, folder_lock
from h9eval.core.messages import Message, ToolCall
from h9eval.core.paths import shared_dir
from h9eval.harness9.session_store import SessionStore
from h9eval.results.store import cell_dir_name, load_results
from h9eval.sweeps.sweep import sweep
from h9eval.tasks.recorded import summarize_task
from h9eval.tasks.model import Intent, Task, TaskSource

TWO_CELLS = {
    "name": "two",
    "window": 16000,
    "history_modes": ["view"],
    "tasks": {"synthetic": [{"preset": "small", "seeds": [0, 1]}]},
    "policies": [{"kind": "progressive", "params": {"context_window_tokens": 16000}}],
}


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


# -- the results-folder lock ---------------------------------------------------------------
def test_a_second_sweep_into_a_locked_folder_gets_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "two"
    out.mkdir()
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "two"\nwindow = 16000\nhistory_modes = ["view"]\n[tasks]\nsynthetic = [{ preset = "small", seeds = [0] '
        "}]\n"
        '[[policies]]\nkind = "keep_all"\n'
    )
    with folder_lock(out):  # another sweep holds the folder (flock: per open file, so in-process works)
        with pytest.raises(
            FormatError, match=rf"another h9eval process \(pid {os.getpid()}\) is writing this results folder"
        ):
            sweep(TWO_CELLS, out_dir=out, workers=0, progress=False)
        assert main(["sweep", str(spec), "--out", str(out), "--workers", "0", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "another h9eval process" in err
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # the second sweep wrote nothing
    r = sweep(TWO_CELLS, out_dir=out, workers=0, progress=False)  # released: the folder is usable
    assert r.ok == 2 and (out / LOCK_NAME).read_text() == ""


def test_a_stale_lock_of_a_dead_process_is_recovered(tmp_path: Path) -> None:
    out = tmp_path / "two"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / LOCK_NAME).write_text(f"{dead.pid}\n")  # left by a killed sweep: its flock went with it
    r = sweep(TWO_CELLS, out_dir=out, workers=0, progress=False)
    assert r.ok == 2 and r.failed == 0


def test_two_concurrent_sweeps_one_refused_the_folder_intact(tmp_path: Path) -> None:
    out = tmp_path / "two"
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "two"\nwindow = 16000\nhistory_modes = ["view"]\n[tasks]\nsynthetic = [{ preset = "small", seeds = [0, '
        "1, 2] }]\n"
        '[[policies]]\nkind = "progressive"\nparams = { context_window_tokens = 16000 }\n'
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cmd = [sys.executable, "-m", "h9eval", "sweep", str(spec), "--out", str(out), "--workers", "0", "--no-progress"]
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes[0] == 0, outs
    if codes[1] == 2:  # they overlapped: the second got the one-line refusal
        err = next(e for (o, e), p in zip(outs, procs) if p.returncode == 2)
        assert err.count("\n") == 1 and "another h9eval process" in err
    res = load_results(out)  # whatever the timing, the folder reads back whole
    assert len(res.runs) == 3 and set(res.runs["status"]) == {"ok"}
    assert set(res.calls["run_id"]) == set(res.runs["run_id"])


# -- full disk while re-running into an existing folder ----------------------------------------
def _messages(db: Path) -> list[tuple[object, ...]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT * FROM messages ORDER BY rowid").fetchall()
    finally:
        con.close()


def _files(out: Path) -> dict[str, str]:
    """Every file's digest but the session store's (opening SQLite rewrites its header; its rows are compared)."""
    return {p.name: _digest(p) for p in out.iterdir() if p.is_file() and not p.name.startswith("sessions.db")}


def _run(out: Path, seed: int = 1) -> list[str]:
    return ["run", "--task", f"synthetic:small:{seed}", "--window", "16000", "--out", str(out)]


def test_disk_full_in_the_session_store_keeps_the_earlier_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(_run(out)) == 0
    before = _files(out)
    records = {p.name: _digest(p) for p in (out / "compaction_records").iterdir()}
    n = _messages(out / "sessions.db")
    assert len(n) > 50
    capsys.readouterr()

    def full(self: SessionStore, *a: object, **k: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(SessionStore, "add_messages", full)
    assert main(_run(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "database or disk is full" in err and "Traceback" not in err
    assert _messages(out / "sessions.db") == n  # the earlier history is all there
    assert _files(out) == before
    assert {p.name: _digest(p) for p in (out / "compaction_records").iterdir()} == records


def test_disk_full_writing_the_tables_keeps_the_earlier_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import h9eval.runs.replay as rp

    out = tmp_path / "run"
    assert main(_run(out)) == 0
    before = _files(out)
    n = _messages(out / "sessions.db")
    capsys.readouterr()
    real = rp.write_table
    written: list[str] = []

    def enospc(df: object, path: Path, table: str) -> None:
        written.append(table)
        if len(written) == 2:  # the first table went through; the second finds the disk full
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(df, path, table)  # type: ignore[arg-type]

    monkeypatch.setattr(rp, "write_table", enospc)
    assert main(_run(out, seed=2)) == 2  # another task into the same folder
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err
    assert _files(out) == before  # no mix of two runs
    assert _messages(out / "sessions.db") == n


# -- duplicate ids -----------------------------------------------------------------------------
def test_duplicate_tool_call_ids_offload_to_distinct_files(tmp_path: Path) -> None:
    a, b = "first output\n" * 1000, "second output\n" * 1000
    hook = OffloadHook(tmp_path / "h", "s", threshold_bytes=100)
    tc = ToolCall("dup", "bash", "{}")
    pa, pb = hook.after_execute(tc, ToolOutput("dup", a)), hook.after_execute(tc, ToolOutput("dup", b))
    files = sorted((tmp_path / "h").rglob("*.txt"))
    assert len(files) == 2 and {f.read_text() for f in files} == {a, b}
    ea, eb = hook.offloaded
    assert ea.file_path != eb.file_path and ea.file_path in pa.output and eb.file_path in pb.output
    assert ea.file_path.endswith("/dup.txt")  # the first keeps harness9's name
    assert hook.after_execute(tc, ToolOutput("dup", a)).output == pa.output  # same output, same file

    off = CompactionOffloader(tmp_path / "c", "s", threshold_bytes=100)
    oa = off.offload_tool_result(Message("user", a, (), "dup"))
    ob = off.offload_tool_result(Message("user", b, (), "dup"))
    assert oa.entry.file_path != ob.entry.file_path
    assert (tmp_path / "c" / oa.entry.file_path).read_text() == a and (
        tmp_path / "c" / ob.entry.file_path
    ).read_text() == b


def test_tasks_inspect_reports_duplicate_tool_call_ids(tmp_path: Path) -> None:
    msgs = [Message("system", "s"), Message("user", "go")]
    for i in range(3):
        msgs += [
            Message("assistant", "", (ToolCall("call_1" if i < 2 else "call_2", "bash", "{}"),)),
            Message("user", f"out {i}", (), "call_1" if i < 2 else "call_2"),
        ]
    t = Task(task_id="t", messages=tuple(msgs), intent=Intent(statement="go"), source=TaskSource(kind="synthetic"))
    info = summarize_task(t)
    assert info["n_duplicate_tool_call_ids"] == 1 and info["duplicate_tool_call_ids"] == ["call_1"]


def test_two_recorded_files_of_one_session_get_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = shared_dir() / "data/recorded/claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    if not src.is_file():
        pytest.skip("shared recorded data not available")
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    d = tmp_path / "sessions"
    d.mkdir()
    (d / "a.jsonl").write_text("".join(lines[:60]), encoding="utf-8")
    (d / "b.jsonl").write_text("".join(lines[:120]), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["run", "--task", str(d), "--window", "16000", "--out", str(out)]) == 0
    runs = [ln.split()[1] for ln in capsys.readouterr().out.splitlines() if ln.startswith("run ")]
    assert len(runs) == 2 and len(set(runs)) == 2  # before: one run id, the second replaced the first
    folders = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(folders) == 2
    import pandas as pd

    calls = [len(pd.read_parquet(f / "calls.parquet")) for f in folders]
    assert sorted(calls) == sorted(set(calls)) and len(set(calls)) == 2  # each folder holds its own file's run


# -- consolidation checks ----------------------------------------------------------------------
def test_a_cell_part_copied_from_another_cell_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "two"
    r = sweep(TWO_CELLS, out_dir=out, workers=0, progress=False)
    assert r.ok == 2
    a, b = sorted((out / "cells").iterdir())
    shutil.copyfile(a / "calls.parquet", b / "calls.parquet")
    (out / "consolidated.json").unlink()
    with pytest.raises(FormatError, match=r"calls\.parquet: cell part holds rows of run .*; expected only"):
        load_results(out)


def test_a_stale_cell_marker_is_not_read_as_this_cell(tmp_path: Path) -> None:
    """A marker whose cell hash is not the manifest's (other inputs or code) is not this cell's."""
    import json

    out = tmp_path / "two"
    sweep(TWO_CELLS, out_dir=out, workers=0, progress=False)
    m = json.loads((out / "manifest.json").read_text())
    m["cells"][0]["cell_hash"] = "0" * 16
    (out / "manifest.json").write_text(json.dumps(m))
    (out / "consolidated.json").unlink()
    res = load_results(out)
    assert list(res.runs["run_id"]) == [m["cells"][1]["run_id"]]
    assert set(res.calls["run_id"]) == {m["cells"][1]["run_id"]}


# -- offload folders of killed sweeps ----------------------------------------------------------
def test_sweep_offload_folders_stay_in_the_results_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    tmp = tmp_path / "systemp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    out = tmp_path / "two"
    assert sweep(TWO_CELLS, out_dir=out, workers=0, progress=False).ok == 2
    assert not any(p.name.startswith("h9eval-offload-") for p in tmp.iterdir())
    left = out / "work" / cell_dir_name("killed-earlier")
    left.mkdir(parents=True)
    (left / "copy-of-a-tool-output.txt").write_text("private\n")
    (out / "work" / "x").mkdir()
    r = sweep(TWO_CELLS, out_dir=out, workers=0, progress=False, resume=True)
    assert r.ok == 2
    assert not any(p.name.startswith("h9eval-offload-") for p in tmp.iterdir())
    assert not (out / "work").exists() or not any((out / "work").iterdir())  # a killed cell's copies are gone


# -- a full offload folder, a cache that cannot be written -------------------------------------
def _enospc_on_offload(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every offload file write finds the disk full (as a small file system would)."""
    import h9eval.compaction.offload as off

    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd: int) -> None:
            self.f = real_fdopen(fd, "w")

        def __enter__(self) -> "Full":
            return self

        def __exit__(self, *a: object) -> None:
            self.f.close()

        def write(self, s: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    class FullOs:  # the offload module's ``os``, with a full disk behind fdopen
        def __getattr__(self, name: str) -> object:
            return getattr(os, name)

        @staticmethod
        def fdopen(fd: int, *a: object, **k: object) -> Full:
            return Full(fd)

    monkeypatch.setattr(off, "os", FullOs())


def test_a_full_offload_folder_is_recorded_and_the_cell_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from h9eval.compaction.policies import make_policy
    from h9eval.runs.replay import replay
    from h9eval.tasks.synthetic import generate

    task = generate("small", seed=1)
    pol = make_policy("progressive", context_window_tokens=16000)
    ok = replay(task, pol)
    assert ok.summary()["offloads_compaction"] > 0 and not ok.offload_write_failures
    _enospc_on_offload(monkeypatch)
    full = replay(task, pol)
    assert full.offload_write_failures and set(full.offload_write_failures) == {"No space left on device"}
    assert full.summary()["offload_write_failures"] == len(full.offload_write_failures)
    # each call says how many of its offloads failed, and the calls table keeps it
    assert int(full.calls["offload_write_failures"].sum()) == len(full.offload_write_failures)
    assert int(ok.calls["offload_write_failures"].sum()) == 0
    r = sweep(TWO_CELLS, out_dir=tmp_path / "two", workers=0, progress=False)
    res = load_results(tmp_path / "two")
    assert r.ok == 2 and all(
        e.startswith("offload writes failed: ") and "No space left" in e for e in res.runs["error"]
    )
    assert (res.calls.groupby("run_id")["offload_write_failures"].sum() > 0).all()
    assert not list((tmp_path / "two").rglob("*.txt"))  # no half-written offload file left behind


def test_a_cache_write_failure_never_changes_the_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from h9eval.compaction.policies import make_policy
    from h9eval.runs.replay import replay
    from h9eval.summarizers.cache import CachedSummarizer, ResponseCache
    from h9eval.summarizers.offline import OfflineSummarizer
    from h9eval.tasks.synthetic import generate

    task = generate("small", seed=1)
    pol = make_policy("progressive", context_window_tokens=16000)
    plain = replay(task, pol, summarizer=OfflineSummarizer())
    cache = ResponseCache(tmp_path / "c.sqlite")

    def full(*a: object, **k: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(cache, "_insert", full)
    with pytest.warns(RuntimeWarning, match="cannot store replies .*going on uncached"):
        cached = replay(task, pol, summarizer=CachedSummarizer(OfflineSummarizer(), cache))
    assert cache.write_failures > 0 and len(cache) == 0
    assert int(cached.calls["fallback"].sum()) == 0
    cols = [c for c in plain.calls.columns if c not in ("summarizer_latency_s", "summarizer_cache_hits")]
    assert plain.calls[cols].equals(cached.calls[cols])  # same replies, same run


def test_a_cache_locked_at_start_is_one_line_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cache another process keeps locked stalled the run for the 30 s busy timeout and then
    failed with a traceback; opening now waits a few seconds at most and says what is wrong."""
    from h9eval.core.errors import ConfigError
    from h9eval.summarizers.cache import ResponseCache

    p = tmp_path / "c.sqlite"
    ResponseCache(p).close()
    holder = sqlite3.connect(p, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(ConfigError, match="is locked by another process"):
            ResponseCache(p, start_timeout_s=0.2)
        assert (
            main(["run", "--task", "synthetic:small:0", "--summarizer-cache", str(p), "--out", str(tmp_path / "o")])
            == 2
        )
        err = capsys.readouterr().err
        assert (
            err.count("\n") == 1 and "is locked by another process (still after 5 s)" in err and "Traceback" not in err
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(ResponseCache(p)) == 0  # usable again once released


def test_a_read_only_cache_serves_its_hits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from h9eval.compaction.summary import SummaryReply
    from h9eval.summarizers.cache import ResponseCache

    p = tmp_path / "c.sqlite"
    w = ResponseCache(p)
    w.put("k", SummaryReply(text="stored", input_tokens=1, output_tokens=1), summarizer_id="x")
    w.close()
    for q in tmp_path.iterdir():
        if q.name != "c.sqlite":
            q.unlink()
    monkeypatch.setattr(
        ResponseCache, "read_only", property(lambda self: True)
    )  # tests run as root: chmod would not bite
    before = _digest(p)
    r = ResponseCache(p)
    assert r.get("k").text == "stored"  # type: ignore[union-attr]
    with pytest.warns(RuntimeWarning, match="read-only"):
        r.put("k2", SummaryReply(text="new"), summarizer_id="x")
    assert r.get("k2") is None and _digest(p) == before
    assert sorted(q.name for q in tmp_path.iterdir()) == ["c.sqlite"]  # no -wal/-shm beside it
