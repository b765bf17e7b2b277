"""SIGKILL of a sweep's parent leaves no process behind (issue 21): the pool's workers (and the
fork server they come from) exit when the sweep that started them dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _descendants(pid: int) -> set[int]:
    seen: set[int] = set()
    todo = [pid]
    while todo:
        for c in _children(todo.pop()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def _a_cell_finished(out: Path) -> bool:
    """Whether any cell has written its marker. Only the cells folder is listed: a recursive walk of
    the output also enters the workers' scratch folders, which they delete while it runs."""
    try:
        return any(out.glob("cells/*/run.parquet"))
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for a reaper."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    state = next((x for x in status.splitlines() if x.startswith("State:")), "")
    return "Z" not in state.split()[1:2] and "zombie" not in state


SCRIPT = textwrap.dedent(
    """
    import sys
    from h9eval.sweeps.sweep import sweep
    spec = {
        "name": "orphans",
        "window": 8000,
        "tasks": {"synthetic": [{"preset": "small", "seeds": list(range(60))}]},
        "policies": [{"kind": "progressive", "grid": {"warn_frac": [0.5, 0.6]}}],
    }
    sweep(spec, out_dir=sys.argv[1], workers=2, progress=False)
    """
)


def test_sigkill_of_the_sweep_parent_leaves_no_worker(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "out")],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # wait until the pool is up and working: the fork server, the resource tracker, 2 workers
        deadline = time.monotonic() + 60
        kids: set[int] = set()
        while time.monotonic() < deadline and p.poll() is None:
            kids = _descendants(p.pid)
            if len(kids) >= 4 and _a_cell_finished(tmp_path / "out"):
                break
            time.sleep(0.1)
        assert p.poll() is None, "the sweep finished before it could be killed: give it more cells"
        assert len(kids) >= 4, f"the pool never started: {kids}"
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(k) for k in kids):
            time.sleep(0.1)
        survivors = {k for k in kids if _alive(k)}
        assert not survivors, f"processes outlived the sweep: {survivors}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for k in _descendants(p.pid) | kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
