"""Two ``h9eval run``s into one ``--out`` (issue 28): either both land whole or the second is
refused with one line; and the folder lock itself (filelock underneath) refuses a planted
symbolic or hard link at its file name without writing through it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from h9eval.core.errors import FormatError
from h9eval.core.lock import LOCK_NAME, folder_lock

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _run_cmd(out: Path, policy: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "h9eval",
        "run",
        "--task",
        "synthetic:small:1",
        "--window",
        "16000",
        "--policy",
        policy,
        "--out",
        str(out),
    ]


def _assert_whole(out: Path) -> str:
    """The folder holds one run: its manifest, every table and the session store agree on it."""
    manifest = json.loads((out / "manifest.json").read_text())
    rid = manifest["run_id"]
    for name in ("calls", "compactions", "probes"):
        ids = set(pq.read_table(out / f"{name}.parquet", columns=["run_id"]).column("run_id").to_pylist())
        assert ids <= {rid}, (name, ids, rid)
    assert set(pq.read_table(out / "calls.parquet", columns=["run_id"]).column("run_id").to_pylist()) == {rid}
    n_calls = pq.read_metadata(out / "calls.parquet").num_rows
    assert n_calls == manifest["summary"]["calls"]
    con = sqlite3.connect(f"file:{out / 'sessions.db'}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 1
    finally:
        con.close()
    assert not [p.name for p in out.iterdir() if p.name.endswith((".staged", ".tmp"))]
    return rid


def test_a_run_into_a_folder_another_process_holds_is_refused_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from h9eval.core.lock import folder_lock\n"
            f"with folder_lock({str(out)!r}):\n print('held', flush=True); sys.stdin.readline()",
        ],
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        r = subprocess.run(_run_cmd(out, "progressive"), env=ENV, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r
        assert r.stderr.count("\n") == 1 and f"another h9eval process (pid {holder.pid})" in r.stderr, r.stderr
        assert str(out) in r.stderr and "Traceback" not in r.stderr
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing of the refused run
    finally:
        holder.communicate("\n", timeout=30)
    r = subprocess.run(_run_cmd(out, "progressive"), env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    _assert_whole(out)


def test_two_concurrent_runs_into_one_folder_both_whole_or_one_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    procs = [
        subprocess.Popen(_run_cmd(out, pol), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for pol in ("progressive", "observation_masking")
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes[0] == 0, outs
    assert codes[1] in (0, 2), outs
    if codes[1] == 2:  # they overlapped: the second got the one-line refusal
        err = next(e for (_, e), p in zip(outs, procs) if p.returncode == 2)
        assert err.count("\n") == 1 and "another h9eval process" in err, err
    rid = _assert_whole(out)
    winners = [o for (o, _), p in zip(outs, procs) if p.returncode == 0]
    assert any(rid in o for o in winners)


def test_the_lock_file_is_never_written_through_a_link(tmp_path: Path) -> None:
    out = tmp_path / "f"
    out.mkdir()
    target = tmp_path / "precious.txt"
    target.write_text("precious")
    os.link(target, out / LOCK_NAME)  # a hard link: the old lock truncated the target
    with pytest.raises(FormatError, match="another hard link"):
        with folder_lock(out):
            pass
    assert target.read_text() == "precious"
    os.unlink(out / LOCK_NAME)
    os.symlink(target, out / LOCK_NAME)
    with pytest.raises(FormatError, match="symbolic link"):
        with folder_lock(out):
            pass
    assert target.read_text() == "precious"
    os.unlink(out / LOCK_NAME)
    with folder_lock(out) as p:  # a fresh lock file, holding this pid while held, empty after
        assert p.read_text() == f"{os.getpid()}\n" and os.stat(p).st_nlink == 1
        with pytest.raises(FormatError, match=rf"another h9eval process \(pid {os.getpid()}\)"):
            with folder_lock(out):
                pass
    assert (out / LOCK_NAME).read_text() == ""


def test_a_stale_lock_file_left_by_a_killed_run_does_not_block(tmp_path: Path) -> None:
    out = tmp_path / "f"
    out.mkdir()
    (out / LOCK_NAME).write_text("999999\n")
    t0 = time.monotonic()
    with folder_lock(out) as p:
        assert p.read_text() == f"{os.getpid()}\n"
    assert time.monotonic() - t0 < 5
