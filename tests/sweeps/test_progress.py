"""Sweep progress (issue 21): plain periodic lines when stderr is not a terminal, the bar only on
a terminal or in a notebook."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from h9eval.core.progress import LINE_EVERY_S, PlainProgress, in_notebook, make_progress

ROOT = Path(__file__).resolve().parents[2]


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_plain_lines_every_tenth() -> None:
    out = io.StringIO()
    p = PlainProgress(total=100, desc="sweep x", stream=out, clock=_Clock())
    for i in range(100):
        p.set_postfix(ok=i + 1, failed=0, refresh=False)
        p.update(1)
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 11, lines  # the start and one per tenth; close adds nothing new
    assert lines[0] == "sweep x: 0/100 cells (0%), 0 s"
    assert lines[-1] == "sweep x: 100/100 cells (100%), ok=100 failed=0, 0 s"
    assert "\r" not in out.getvalue() and max(map(len, lines)) < 100


def test_plain_lines_every_30_seconds_when_cells_are_slow() -> None:
    out, clock = io.StringIO(), _Clock()
    p = PlainProgress(total=1000, desc="d", stream=out, clock=clock)
    p.update(1)  # 1 of 1000 after 0 s: no line
    clock.t = LINE_EVERY_S + 1
    p.update(1)  # 2 of 1000 after 31 s: a line
    p.close()
    lines = out.getvalue().splitlines()
    assert lines == ["d: 0/1000 cells (0%), 0 s", "d: 2/1000 cells (0%), 31 s"]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_only_on_a_terminal() -> None:
    assert isinstance(make_progress(total=3, initial=0, desc="d", stream=io.StringIO()), PlainProgress)
    bar = make_progress(total=3, initial=0, desc="d", stream=_Tty())
    assert type(bar).__name__ == "tqdm"
    bar.close()
    assert not in_notebook()


def test_a_sweep_with_stderr_in_a_file_writes_short_lines(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "p"\nwindow = 16000\n[tasks]\nsynthetic = [{ preset = "small", seeds = [0, 1] }]\n'
        '[[policies]]\nkind = "progressive"\ngrid = { warn_frac = [0.5, 0.6] }\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    err = tmp_path / "stderr.txt"
    with err.open("w") as f:
        r = subprocess.run(
            [sys.executable, "-m", "h9eval", "sweep", str(spec), "--workers", "0", "--out", str(tmp_path / "out")],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=f,
            env=env,
            timeout=120,
            text=True,
        )
    assert r.returncode == 0, err.read_text()
    text = err.read_text()
    lines = [x for x in text.splitlines() if x.startswith("sweep p:")]
    assert lines and lines[-1].startswith("sweep p: 4/4 cells (100%), ok=4 failed=0 remaining=0,"), (
        text
    )  # the counts of the last cell
    assert "\r" not in text and max(len(x) for x in text.splitlines()) < 200


def test_a_delayed_step_is_silent_when_quick_and_speaks_once_slow() -> None:
    """Task loading, reports and the tuner pass a delay: a quick step prints nothing at all."""
    out, clock = io.StringIO(), _Clock()
    quick = PlainProgress(total=3, desc="loading x", stream=out, unit="file", delay_s=2.0, clock=clock)
    for _ in range(3):
        quick.update(1)
    quick.close()
    assert out.getvalue() == ""
    slow = PlainProgress(total=3, desc="report r", stream=out, unit="section", delay_s=2.0, clock=clock)
    slow.update(1)
    clock.t = 2.5
    slow.update(1)  # past the delay: the first line
    slow.update(1)
    slow.close()
    assert out.getvalue().splitlines() == ["report r: 2/3 sections (66%), 2 s", "report r: 3/3 sections (100%), 2 s"]


def test_silenced_processes_and_disabled_steps_show_nothing(monkeypatch: Any) -> None:
    import h9eval.core.progress as progress

    assert type(make_progress(total=3, desc="d", stream=_Tty(), enabled=False)).__name__ == "NullProgress"
    monkeypatch.setattr(progress, "_SILENT", False)
    progress.silence()
    assert type(make_progress(total=3, desc="d", stream=_Tty())).__name__ == "NullProgress"


def test_batches_are_small_enough_for_the_progress_to_move() -> None:
    """Cells are recorded a batch at a time: the 672-cell demo's first batches held 168 cells."""
    from h9eval.sweeps.executors import MAX_BATCH, batches
    from h9eval.sweeps.cells import expand_cells
    from h9eval.sweeps.spec import load_spec

    spec = load_spec(
        {
            "name": "b",
            "window": 16000,
            "tasks": {"synthetic": [{"preset": "small", "seeds": [0, 1, 2]}]},
            "policies": [{"kind": "window", "grid": {"keep_last": list(range(5, 65))}}],
        }
    )
    cells, _ = expand_cells(spec, out_dir=ROOT / "results" / "never-written")
    got = batches(cells, 2)
    assert len(cells) == 180 and max(map(len, got)) == MAX_BATCH <= 16 and len(got[-1]) == 1
    assert sorted(c.run_id for b in got for c in b) == sorted(c.run_id for c in cells)


def test_the_bars_last_state_shows_the_last_cells_counts(tmp_path: Path) -> None:
    """The sweep sets the counts before it moves the bar: the last line is never one cell behind."""
    spec = {
        "name": "q",
        "window": 16000,
        "history_modes": ["view"],
        "tasks": {"synthetic": [{"preset": "small", "seeds": [0]}]},
        "policies": [{"kind": "keep_all"}, {"kind": "drop_all"}],
    }
    from h9eval.sweeps import sweep as sweep_module

    tty = _Tty()
    real = sweep_module.make_progress
    sweep_module.make_progress = lambda **kw: real(**kw, stream=tty)  # type: ignore[assignment]
    try:
        sweep_module.sweep(spec, out_dir=tmp_path / "o", workers=0)
    finally:
        sweep_module.make_progress = real  # type: ignore[assignment]
    last = tty.getvalue().split("\r")[-1]
    assert "2/2" in last and "ok=2" in last and "remaining=0" in last, tty.getvalue()
