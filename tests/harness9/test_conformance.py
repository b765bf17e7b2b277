"""Every shipped conformance case and the long replay pass, through the CLI and the API."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from h9eval.harness9.conformance import compare, discover_cases, load_case, run_case, run_conformance


def _cases(shared: Path) -> list[Path]:
    return discover_cases([shared / "reference" / "conformance"])


def test_shipped_cases_pass(shared: Path) -> None:
    report = run_conformance([shared / "reference" / "conformance"])
    assert report.n_failed == 0, [r.one_line() for r in report.results if not r.passed]
    assert report.n_passed >= 20


def test_long_replay_passes(shared: Path) -> None:
    path = shared / "reference" / "replay" / "progressive-replay-mini-w50k-t6.json.xz"
    case = load_case(path)
    actual = run_case(case, str(path))
    assert len(actual["steps"]) == 88
    assert list(compare(case["expected"], actual)) == []


def test_a_wrong_expectation_is_reported(shared: Path, tmp_path: Path) -> None:
    src = shared / "reference" / "conformance" / "progressive-soft-even-head.json"
    case = json.loads(src.read_text())
    case["expected"]["steps"][0]["record"]["tier"] = "full"
    bad = tmp_path / "progressive-tampered.json"
    bad.write_text(json.dumps(case))
    shutil.copy(shared / "reference" / "conformance" / "merge_anchors-na-keeps-old.json", tmp_path)
    p = subprocess.run([sys.executable, "-m", "h9eval", "conformance", str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 1
    lines = p.stdout.strip().splitlines()
    assert lines[-1] == "1 passed, 1 failed"
    assert "progressive-tampered.json" in lines[0] and 'expected "full", got "soft"' in lines[0]


@pytest.mark.parametrize(
    "content", ["{not json", "[1, 2]", '{"kind": "nope", "input": {}, "expected": {}}', '{"kind": "estimate_tokens"}']
)
def test_unreadable_case_exits_2(tmp_path: Path, content: str) -> None:
    f = tmp_path / "broken.json"
    f.write_text(content)
    p = subprocess.run([sys.executable, "-m", "h9eval", "conformance", str(f)], capture_output=True, text=True)
    assert p.returncode == 2 and "broken.json" in p.stderr and "Traceback" not in p.stderr


def test_timing_prints_one_json_line_per_case_before_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """``--timing``: one JSON line per case (steps, nanoseconds inside the compaction calls, wall
    and this process's CPU, a median per tier), then the usual summary line;
    the replay case's steps are its 88 calls."""
    import json

    from h9eval.cli import main
    from h9eval.core.paths import conformance_dir, shared_dir

    replay_case = shared_dir() / "reference" / "replay"
    assert main(["conformance", "--timing", str(conformance_dir()), str(replay_case)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "21 passed, 0 failed"
    rows = [json.loads(line) for line in lines[:-1]]
    keys = {"case", "steps", "compaction_ns", "compaction_cpu_ns", "tier_median_ns"}
    assert len(rows) == 21 and all(set(r) == keys for r in rows)
    replay = next(r for r in rows if r["case"].startswith("replay-"))
    assert replay["steps"] == 88 and replay["compaction_ns"] > 0 and replay["compaction_cpu_ns"] > 0
    assert set(replay["tier_median_ns"]) == {"none", "warn", "soft", "full", "emergency"}
    estimate = next(r for r in rows if r["case"] == "ascii-conversation")
    assert estimate["steps"] == 0 and estimate["compaction_ns"] == 0


def test_read_prompts_changes_the_timing_not_the_results(shared: Path) -> None:
    """``--read-prompts`` makes the scripted summarizer build every prompt inside the timed call;
    the outputs compared with Go's are the same either way."""
    folder = shared / "reference" / "conformance"
    plain = run_conformance([folder])
    read = run_conformance([folder], read_prompts=True)
    assert plain.n_failed == read.n_failed == 0
    assert [r.name for r in plain.results] == [r.name for r in read.results]
    proc = subprocess.run(
        [sys.executable, "-m", "h9eval", "conformance", "--timing", "--read-prompts", str(folder)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout.count('"compaction_cpu_ns"') == len(read.results)


def test_no_step_input_is_freed_inside_a_timed_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A progressive case's step inputs live until the case ends (a session's history does; the
    Go driver keeps its inputs): the compactor letting go of the previous step's history must not
    free it inside the next, timed, call."""
    import h9eval.harness9.conformance as conf
    from h9eval.compaction.policies.progressive import ProgressiveRun
    from h9eval.core.messages import Message

    state = {"in_call": False, "freed_in_call": 0, "freed": 0}

    class _Tracked(Message):
        __slots__ = ()

        def __del__(self) -> None:
            state["freed"] += 1
            state["freed_in_call"] += state["in_call"]

    real_in, real_compact = conf._msgs_in, ProgressiveRun.compact

    def tracked_in(*a: object) -> list[Message]:
        return [_Tracked(m.role, m.content, m.tool_calls, m.tool_call_id, m.is_error) for m in real_in(*a)]

    def timed_compact(self: ProgressiveRun, *a: object, **k: object) -> object:
        state["in_call"] = True
        try:
            return real_compact(self, *a, **k)  # type: ignore[arg-type]
        finally:
            state["in_call"] = False

    monkeypatch.setattr(conf, "_msgs_in", tracked_in)
    monkeypatch.setattr(ProgressiveRun, "compact", timed_compact)
    case = {
        "kind": "progressive",
        "name": "x",
        "input": {
            "config": {
                "context_window": 60,
                "warn_threshold": 0.6,
                "soft_threshold": 0.7,
                "full_threshold": 0.8,
                "emergency_threshold": 0.95,
                "min_tail_messages": 2,
                "offloader": False,
                "session_id": "s",
            },
            "summarizer": {"responses": ["## Summary\nok"] * 20},
            "steps": [
                {"messages": [{"role": "system", "content": "s"}] + [{"role": "user", "content": "x" * 30}] * n}
                for n in range(1, 12)
            ],
        },
    }
    run_case(case)
    assert state["freed"] > 0 and state["freed_in_call"] == 0
