"""``h9eval report`` and ``h9eval ledger`` draw from the stored tables alone: on a results folder whose task
files were deleted after the sweep, with the replay and the episode made to raise, both succeed (runs keep
what the pages show: the ledger, the compaction diffs, the episodes)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from h9eval.core.paths import shared_dir
from h9eval.cli import main
from h9eval.results.store import load_results
from h9eval.sweeps.sweep import sweep

SHARED = shared_dir()  # the shared data wherever it is, not beside this checkout


def _forbid(*_: Any, **__: Any) -> Any:
    raise AssertionError("a page ran a replay or an episode")


def _forbid_running(monkeypatch: pytest.MonkeyPatch) -> int:
    """Every binding of the replay, the episode and execute() in every loaded module raises (a module that
    imported the function by name holds its own reference). Returns how many bindings were replaced."""
    import h9eval.closedloop.episode as episode
    import h9eval.runs.execute as execute
    import h9eval.runs.replay as replay

    targets = {id(f) for f in (replay.replay, episode.run_episode, execute.execute)}
    n = 0
    for mod in [m for name, m in sys.modules.items() if name.startswith("h9eval")]:
        for attr, value in list(vars(mod).items()):
            if id(value) in targets:
                monkeypatch.setattr(mod, attr, _forbid)
                n += 1
    return n


def test_the_guard_replaces_the_bindings_a_page_could_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    import h9eval.analysis.report  # noqa: F401 - the report's own imports, loaded
    import h9eval.runs.run  # noqa: F401 - imports execute by name

    assert _forbid_running(monkeypatch) >= 4
    from h9eval.runs.run import run_task

    with pytest.raises(AssertionError, match="ran a replay or an episode"):
        run_task("synthetic:small:0", "keep_all")


def test_report_and_ledger_need_neither_the_task_files_nor_a_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "sessions"
    tasks.mkdir()
    src = SHARED / "data" / "recorded" / "swe-agent"
    for p in sorted(src.glob("*.traj"))[:2]:
        shutil.copy(p, tasks / p.name)
    spec = {
        "name": "deleted-tasks",
        "window": 12_000,
        "history_modes": ["view", "write_back"],
        "tasks": {"specs": [str(tasks), "synthetic:small:0"], "worlds": [
            {"kind": "fact_chain", "seeds": [0], "max_steps": 6}]},
        "probes": {"scorers": ["recall"]},
        "policies": [{"kind": "keep_all"}, {"kind": "progressive"}, {"kind": "observation_masking"}],
    }  # fmt: skip
    out = tmp_path / "res"
    assert sweep(spec, out_dir=out, workers=0, progress=False).failed == 0
    shutil.rmtree(tasks)
    _forbid_running(monkeypatch)
    capsys.readouterr()
    assert main(["report", str(out)]) == 0, capsys.readouterr().err
    assert (out / "report.html").stat().st_size > 0
    runs = load_results(out).runs
    rid = runs.loc[(runs["policy_kind"] == "progressive") & runs["task_id"].str.contains("pydicom"), "run_id"].iloc[0]
    assert main(["ledger", str(out), "--run-id", rid, "--out", str(tmp_path / "l.html")]) == 0
    assert "pydicom" in (tmp_path / "l.html").read_text(encoding="utf-8")
