"""The speed benchmark's functions run on tiny inputs (the benchmark itself never runs in tests)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_speed as bs  # noqa: E402

from h9eval.harness9.conformance import run_case  # noqa: E402
from h9eval.tasks.synthetic import generate  # noqa: E402


def test_synthetic_replay_case_crosses_every_tier() -> None:
    case = bs.synthetic_replay_case(1, 40, preset="small")
    assert len(case["input"]["steps"]) == 40
    with pytest.raises(ValueError):
        bs.window_crossing_all_tiers([10, 10_000])
    tiers = {s["record"]["tier"] for s in run_case(case)["steps"] if s["record"]}
    assert {"warn", "soft", "full", "emergency"} <= tiers


def test_truncate_calls_cuts_before_the_next_call() -> None:
    task = generate("small", seed=0)
    cut = bs.truncate_calls(task, 5)
    assert cut.n_calls == 5 and task.messages[len(cut.messages)].role == "assistant"
    assert bs.truncate_calls(task, 10**6) is task


def test_targets_report_met_and_not_met() -> None:
    t = bs.Target("x", 2.0, 1.2, "x")
    assert not t.met and "NOT met" in t.row()[1]
    assert bs.Target("y", 1.0, 1.2, "x").met
    assert not bs.Target("z", 1.5, 1.8, "x", at_least=True).met and bs.Target("z", 1.9, 1.8, "x", at_least=True).met
    assert bs.Target("i", 9.0, None, "x").met


def test_sweep_bench_runs_on_a_tiny_sweep(tmp_path: Path) -> None:
    ts = bs.bench_sweeps(tmp_path, None, n_tasks=1, n_turns=60, dask=False, repeat=1)
    assert ts[0].name.startswith("sweep speed-up, 2 workers vs 1 (8 cells)") and ts[0].value > 0


@pytest.mark.parametrize("fn", ["synthetic", "ratio"])
def test_bench_functions_run_on_tiny_sizes(fn: str) -> None:
    if fn == "synthetic":
        (t,) = bs.bench_synthetic_replays([1], steps=40, repeat=1)
        assert t.value > 0 and "40 steps" in t.notes
    else:
        ts = bs.bench_per_call_ratio(5, 10, preset="small", window=4_000, policies=["keep_all"], modes=["write_back"])
        assert [t.name for t in ts] == ["per-call time 10/5 calls: keep_all, write_back"]


def test_long_replay_timed_cold_and_warm(tmp_path: Path) -> None:
    case = bs.synthetic_replay_case(1, 30, preset="small")
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    (t,) = bs.bench_long_replays([path], repeat=1)
    assert t.value > 0 and t.limit is None and "fresh processes" in t.notes and "warm" in t.notes
    assert "no Go figure" in t.notes


def test_startup_bench_runs(tmp_path: Path) -> None:
    names = [t.name for t in bs.bench_startup(tmp_path, repeat=1)]
    assert names[0] == "start-up: import h9eval" and len(names) == 3


def test_long_replay_against_a_go_driver_timed_in_the_same_run(tmp_path: Path) -> None:
    """With a Go driver (any executable printing the timing line), its wall time is the target's
    base and the row says it was timed in this run; each kind runs ``repeat`` times."""
    case = bs.synthetic_replay_case(1, 20, preset="small")
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    log = tmp_path / "calls.txt"
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(sys.argv[1] + '\\n')\n"
        "print(json.dumps({'case': 'x', 'steps': 20, 'compaction_ns': 4_000_000, 'compaction_cpu_ns': 3_000_000,"
        " 'tier_median_ns': {'none': 1000}}))\n"
    )
    driver.chmod(0o755)
    wrapper = tmp_path / "go-driver"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {driver} "$@"\n')
    wrapper.chmod(0o755)
    (t,) = bs.bench_long_replays([path], repeat=2, go_driver=str(wrapper))
    assert t.limit == pytest.approx(8.0) and "Go 4.00 ms wall (3.00 CPU), timed in this run" in t.notes
    assert "prompts read" in t.notes and log.read_text().splitlines() == [str(path)] * 2


def test_recorded_replay_without_a_system_message_gets_one() -> None:
    """harness9's compactor leaves a history without a system message untouched: the replay of
    such a session (Claude Code's) starts with the replay's system prompt, so it compacts."""
    from h9eval.core.paths import recorded_dir
    from h9eval.runs.replay import ReplayConfig

    src = recorded_dir() / bs.RECORDED_LONG_REPLAYS[0][0]
    if not src.exists():
        pytest.skip("recorded sessions not present")
    case = bs.recorded_replay_case(src, "cc")
    first = [s["messages"][0] for s in case["input"]["steps"]]
    assert all(m == {"role": "system", "content": ReplayConfig().system_prompt} for m in first)
    tiers = {s["record"]["tier"] for s in run_case(case)["steps"]}
    assert {"warn", "soft", "full", "emergency"} <= tiers
