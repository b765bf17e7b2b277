"""The billing model against the real bills of the shipped Claude Code sessions."""

from __future__ import annotations

import pytest

from h9eval.studies.bills import (
    READ_SHARE_TOLERANCE_POINTS,
    WRITE_SHARE_TOLERANCE_FACTOR,
    check_bill_files,
    check_bills,
)
from h9eval.cli import main
from h9eval.core.errors import ConfigError
from h9eval.core.paths import shared_dir
from h9eval.tasks.recorded.claude_code import load_claude_code
from h9eval.tasks.synthetic import generate

CC = shared_dir() / "data" / "recorded" / "claude-code"
SESSIONS = sorted(CC.glob("*.jsonl"))
needs_data = pytest.mark.skipif(not SESSIONS, reason=f"no Claude Code sessions at {CC}")


@pytest.fixture(scope="module")
def checks() -> dict:
    return {c.task_id: c for c in check_bill_files([CC])}


@needs_data
def test_every_shipped_session_agrees_with_its_recorded_bill(checks: dict) -> None:
    assert len(checks) == len(SESSIONS) >= 2
    for chk in checks.values():
        s = chk.summary()
        # the recorded shares are ~98 % reads and 1.4-1.7 % writes
        assert 0.97 < s["recorded_read_share"] < 0.99 and 0.01 < s["recorded_write_share"] < 0.025
        assert s["read_share_diff_points"] <= READ_SHARE_TOLERANCE_POINTS, s
        assert s["write_share_factor"] <= WRITE_SHARE_TOLERANCE_FACTOR, s
        # the call after the real compaction is a miss, predicted and recorded
        assert s["compactions"] == 1 and s["miss_after_compaction_predicted"] and s["miss_after_compaction_recorded"]
        (b,) = chk.boundaries
        assert b["rec_read"] < 0.2 * b["rec_read_before"] and b["recorded_rewrite_usd"] > 0
        assert s["passes"]


@needs_data
def test_claude_codes_own_compaction_calls(checks: dict) -> None:
    calls = {cc["file"]: cc for chk in checks.values() for cc in chk.compaction_calls}
    assert len(calls) == 2
    hit = calls["agent-acompact-f46190.jsonl"]  # 72 s after the last call, 1-hour cache: a hit
    assert abs(hit["pred_read_share"] - hit["rec_read_share"]) < 0.05 and hit["rec_read_share"] > 0.95
    miss = calls["agent-acompact-946d2b.jsonl"]  # Opus's cache expired during the Haiku stretch
    assert miss["pred_read_share"] < 0.2 and miss["rec_read_share"] < 0.2


@needs_data
def test_disagreeing_calls_name_a_reason(checks: dict) -> None:
    for chk in checks.values():
        bad = chk.calls[chk.calls["reason"] != ""]
        assert 0 < len(bad) <= 5
        assert bad["reason"].iloc[0].startswith("first call")  # the cross-session cache


@needs_data
def test_a_model_that_caches_nothing_fails(checks: dict) -> None:
    task = load_claude_code(SESSIONS[0])
    nothing = check_bills(task, placement="none").summary()
    assert nothing["predicted_read_share"] == 0 and not nothing["passes"]
    # without the harness prefix the record lacks, the agreement is looser but still within bounds
    bare = check_bills(task, prefix_tokens=0).summary()
    assert bare["read_share_diff_points"] > checks[task.task_id].summary()["read_share_diff_points"]


def test_a_task_without_recorded_bills_is_refused() -> None:
    with pytest.raises(ConfigError, match="no recorded bills"):
        check_bills(generate("small", 0))


@needs_data
def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bills", str(SESSIONS[0]), "--calls"]) == 0
    out = capsys.readouterr().out
    assert "passes" in out and "compaction (" in out and "call 0:" in out
    assert main(["bills", str(CC / "missing.jsonl")]) == 2
