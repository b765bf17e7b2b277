"""run_task and ``h9eval run``: names resolved once at the edge, one window per run (issue 14)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from h9eval.cli import main
from h9eval.compaction import ProgressiveCompactor, make_policy
from h9eval.core.errors import ConfigError
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS
from h9eval.probes.runner import make_probe_fn
from h9eval.compaction.step import run_window
from h9eval.runs.run import run_task
from h9eval.summarizers.registry import build_summarizer

TASK = "synthetic:small:1"  # ~25k tokens: compacts at 8k, never at the 200k default


def test_default_window_has_one_owner() -> None:
    for kind in ("progressive", "summary_single_threshold", "token_budget", "hybrid"):
        assert make_policy(kind).window_tokens() == DEFAULT_CONTEXT_WINDOW_TOKENS == 200_000
    assert make_policy("sliding_window").window_tokens() is None
    (res,) = run_task(TASK, "sliding_window")
    assert set(res.calls["context_window_tokens"]) == {DEFAULT_CONTEXT_WINDOW_TOKENS}


def test_run_window_applies_to_a_policy_with_its_own_window() -> None:
    """The bug: ``window`` was ignored by every policy with ``context_window_tokens`` (the run
    recorded 200,000 and never compacted)."""
    (default,) = run_task(TASK, "progressive")
    (small,) = run_task(TASK, "progressive", window=8000)
    assert set(default.calls["context_window_tokens"]) == {200_000} and not default.calls["compacted"].any()
    assert set(small.calls["context_window_tokens"]) == {8000}
    assert small.calls["compacted"].sum() > 0, "the policy itself must run at the run's window"
    assert small.params["context_window_tokens"] == 8000 and small.params_hash != default.params_hash
    assert small.summary.context_window_tokens == 8000
    # the same as asking the policy for that window directly
    (direct,) = run_task(TASK, "progressive", params={"context_window_tokens": 8000})
    assert direct.run_id == small.run_id and direct.calls.equals(small.calls)


def test_run_window_applies_to_a_policy_object_left_at_its_default() -> None:
    (res,) = run_task(TASK, ProgressiveCompactor(min_tail_messages=4), window=8000)
    assert res.params["context_window_tokens"] == 8000 and res.params["min_tail_messages"] == 4
    assert set(res.calls["context_window_tokens"]) == {8000}


def test_run_window_for_a_policy_without_one_measures_against_it() -> None:
    (res,) = run_task(TASK, "sliding_window", window=9000)
    assert "context_window_tokens" not in res.params
    assert set(res.calls["context_window_tokens"]) == {9000} and res.calls["overflow"].sum() > 0
    assert res.summary.context_window_tokens == 9000


def test_conflicting_windows_are_a_config_error_naming_both() -> None:
    with pytest.raises(ConfigError, match=r"window 9000 conflicts with progressive's context_window_tokens 8000"):
        run_task(TASK, "progressive", params={"context_window_tokens": 8000}, window=9000)
    with pytest.raises(ConfigError, match=r"window 9000 .* context_window_tokens 8000"):
        run_task(TASK, ProgressiveCompactor(context_window_tokens=8000), window=9000)
    # an explicit 200,000 is a choice too, even though it equals the default
    with pytest.raises(ConfigError, match=r"window 9000 .* context_window_tokens 200000"):
        run_task(TASK, "progressive", params={"context_window_tokens": 200_000}, window=9000)
    # both saying the same is not a conflict
    (res,) = run_task(TASK, "progressive", params={"context_window_tokens": 8000}, window=8000)
    assert set(res.calls["context_window_tokens"]) == {8000}


def test_run_window_keeps_the_policy_when_there_is_nothing_to_do() -> None:
    p = ProgressiveCompactor(context_window_tokens=8000)
    assert run_window(p, None, explicit=True) == run_window(p) and run_window(p).policy is p
    assert run_window(p).window_tokens == 8000
    assert run_window(p, 8000, explicit=True).policy is p
    s = make_policy("sliding_window")
    assert run_window(s, 9000, explicit=False).policy is s and run_window(s, 9000).window_tokens == 9000
    assert run_window(s).window_tokens == DEFAULT_CONTEXT_WINDOW_TOKENS
    q = run_window(ProgressiveCompactor(), 8000, explicit=False).policy
    assert isinstance(q, ProgressiveCompactor) and q.context_window_tokens == 8000
    # explicit=None: a policy object's window counts as set when it is not its class's default
    with pytest.raises(ConfigError, match="window 9000 conflicts with progressive's context_window_tokens 8000"):
        run_window(p, 9000)
    assert run_window(ProgressiveCompactor(), 9000).window_tokens == 9000
    for bad in (-1, 0, True, 1.5):
        with pytest.raises(ConfigError, match="window must be a positive number of tokens"):
            run_window(ProgressiveCompactor(), bad)  # type: ignore[arg-type]


def test_cli_run_window_is_used_and_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["run", "--task", TASK, "--policy", "progressive", "--window", "8000", "--out", str(tmp_path / "a")]) == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert "   context_window_tokens: 8000" in out
    assert out.index("   context_window_tokens: 8000") == out.index("            history_mode: view") + 1
    compacted = next(line for line in out if "compactions_by_tier" in line)
    assert compacted != "     compactions_by_tier: {}"
    assert (
        main(
            [
                "run",
                "--task",
                TASK,
                "--set",
                "context_window_tokens=8000",
                "--window",
                "9000",
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "9000" in err and "8000" in err
    assert not (tmp_path / "b").exists()


def test_names_resolved_at_the_edge() -> None:
    assert build_summarizer(None) is None and build_summarizer("none") is None
    assert build_summarizer("offline").summarizer_id.startswith("offline/")  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="did you mean"):
        build_summarizer("ofline")
    assert make_probe_fn(()) is None
    with pytest.raises(ConfigError, match="scorer"):
        make_probe_fn(["recal"])  # refused before any replay runs
    (res,) = run_task(TASK, "progressive", window=8000, summarizer="none")
    # no summarizer: the fallback answers, and (as harness9 with a nil provider) no call is made or logged
    assert res.calls["fallback"].sum() > 0 and res.calls["summarizer_calls"].sum() == 0


def test_write_back_windows_are_sized_from_the_written_back_peak() -> None:
    """In write-back mode the default's written-back offloads shrink the history for good, so the
    window is peak_frac of the written-back peak: harness9's default then reaches its summary tiers
    where, at the same fraction of the uncompacted peak, it stays at warn. Mutant killed: the
    write-back window sized from the uncompacted peak."""
    from h9eval.runs.window import peak_frac_window, uncompacted_peak_tokens, written_back_peak_tokens
    from h9eval.tasks import load_tasks_from_spec

    (task,) = load_tasks_from_spec("synthetic:small:0")
    raw, wb = uncompacted_peak_tokens(task), written_back_peak_tokens(task)
    assert 0 < wb < raw / 2  # this task's large tool results are most of its history
    assert peak_frac_window(task, 0.6, history_mode="write_back") == -(-wb * 6 // 10)
    assert peak_frac_window(task, 0.6) == peak_frac_window(task, 0.6, history_mode="view") == -(-raw * 6 // 10)

    def tiers(res: Any) -> set[str]:
        return set(res.calls.loc[res.calls["compacted"], "tier_name"])

    (res,) = run_task(task, "progressive", history_mode="write_back", window_peak_frac=0.6, ledger=False)
    assert set(res.calls["context_window_tokens"]) == {-(-wb * 6 // 10)}
    assert {"soft", "full"} <= tiers(res) and not res.calls["overflow"].any()
    (old,) = run_task(task, "progressive", history_mode="write_back", window=-(-raw * 6 // 10), ledger=False)
    assert tiers(old) == {"warn"}  # what the sizing is for


def test_window_peak_frac_sizes_each_tasks_window_from_its_own_uncompacted_peak() -> None:
    """window_peak_frac=0.5: the window is half the task's uncompacted peak (its largest
    raw_tokens_sent), so the policy at its default thresholds must compact; the peak is
    checked against the replay's own raw column."""
    from h9eval.runs.window import peak_frac_window, uncompacted_peak_tokens
    from h9eval.tasks import load_tasks_from_spec

    task = load_tasks_from_spec(TASK)[0]
    (keep,) = run_task(task, "keep_all")
    peak = uncompacted_peak_tokens(task)
    assert peak == int(keep.calls["raw_tokens_sent"].max()) > 0
    assert peak_frac_window(task, 0.5) == -(-peak // 2)
    (res,) = run_task(task, "progressive", window_peak_frac=0.5)
    assert set(res.calls["context_window_tokens"]) == {peak_frac_window(task, 0.5)}
    assert res.params["context_window_tokens"] == peak_frac_window(task, 0.5)
    assert res.calls["compacted"].sum() > 0
    for bad in (0, 1.5, True):
        with pytest.raises(ConfigError, match=r"peak_frac must be a number in \(0, 1\]"):
            run_task(task, "progressive", window_peak_frac=bad)
    with pytest.raises(ConfigError, match="not both"):
        run_task(task, "progressive", window=1000, window_peak_frac=0.5)
    with pytest.raises(ConfigError, match="sizes each task's window"):
        run_task(task, "progressive", params={"context_window_tokens": 8000}, window_peak_frac=0.5)
