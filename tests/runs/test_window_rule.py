"""One window rule for every entry point (compaction.step.run_window): run_task, run_world and a
sweep's cells run every registered policy at the same window for the same ``window`` value, and
an explicit other value is one error naming both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from h9eval.runs.world import run_world
from h9eval.compaction.policies import make_policy, registry
from h9eval.core.errors import ConfigError
from h9eval.results.store import load_results
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.runs.run import run_task
from h9eval.sweeps.sweep import sweep
from h9eval.tasks import load_tasks_from_spec

WINDOW = 40_000  # below every policy's default, above claude_code_compact's reserve and buffer
TASK = "synthetic:small:0"
WORLD = "fact_chain:0"


def _buildable(kind: str) -> bool:
    """Policies that run with their defaults (not one that needs a cassette file)."""
    try:
        make_policy(kind)
    except ConfigError:
        return False
    return True


KINDS = sorted(k for k in registry() if _buildable(k))


def _windowed(kind: str) -> bool:
    return make_policy(kind).window_tokens() is not None


def test_the_registry_has_windowed_and_windowless_policies() -> None:
    # the loops below must cover both sides of the rule
    assert {"progressive", "hybrid"} <= {k for k in KINDS if _windowed(k)}
    assert "observation_masking" in {k for k in KINDS if not _windowed(k)}


@pytest.mark.parametrize("kind", KINDS)
def test_run_task_runs_every_policy_at_the_window(kind: str) -> None:
    (res,) = run_task(TASK, kind, window=WINDOW)
    assert set(res.calls["context_window_tokens"]) == {WINDOW} and res.context_window_tokens == WINDOW
    if _windowed(kind):
        assert res.params["context_window_tokens"] == WINDOW, "the policy itself must run at the run's window"


@pytest.mark.parametrize("kind", KINDS)
def test_run_world_runs_every_policy_at_the_window(kind: str) -> None:
    """The bug: a world ran progressive at its default 200,000 whatever ``window`` said."""
    run = run_world(WORLD, policy=kind, window=WINDOW, max_steps=4, oracle=False)
    assert run.episode.context_window_tokens == WINDOW
    assert {s.tokens_sent for s in run.episode.steps}, "the episode must have made calls"
    if _windowed(kind):
        assert run.episode.policy_params["context_window_tokens"] == WINDOW


def test_a_sweep_window_means_what_run_window_means_for_every_policy(tmp_path: Path) -> None:
    """A sweep's ``window = N`` recorded N on the cell while the replay ran a policy's own 200,000."""
    spec = {
        "name": "window-rule",
        "window": WINDOW,
        "tasks": {
            "synthetic": [{"preset": "small", "seeds": [0]}],
            "worlds": [{"kind": "fact_chain", "seeds": [0], "max_steps": 4, "open_loop": False}],
        },
        "policies": [{"kind": k} for k in KINDS],
    }
    r = sweep(spec, out_dir=tmp_path / "out", workers=0, progress=False)
    assert r.failed == 0
    res = load_results(tmp_path / "out")
    assert set(res.calls["context_window_tokens"]) == {WINDOW}
    assert set(res.episodes["context_window_tokens"]) == {WINDOW} and len(res.episodes) == len(KINDS)
    for kind in KINDS:
        for table in (res.runs, res.episodes):
            params = json.loads(table.loc[table["policy_kind"] == kind, "params_json"].iloc[0])
            assert params.get("context_window_tokens") == (WINDOW if _windowed(kind) else None), (kind, params)
    # the cells replayed what a replay at the window gives (the sweep names offload folders by task)
    task = load_tasks_from_spec(TASK)[0]
    compacting = 0
    for kind in KINDS:
        cfg = ReplayConfig(context_window_tokens=WINDOW)
        direct = replay(task, make_policy(kind), config=cfg, session_id=task.task_id)
        by_sweep = res.calls[(res.calls["policy_kind"] == kind) & (res.calls["task_id"] == task.task_id)]
        assert by_sweep["tokens_sent"].tolist() == direct.calls["tokens_sent"].tolist(), kind
        compacting += int(_windowed(kind) and direct.calls["compacted"].any())
    assert compacting >= 2, "some windowed policies must compact at the window (none does at its default)"


def test_the_same_calls_at_the_same_window_from_every_entry_point() -> None:
    """run_task's window, a window in params and a policy object at that window are one run."""
    (by_window,) = run_task(TASK, "hybrid", window=12_000)
    (by_param,) = run_task(TASK, "hybrid", params={"context_window_tokens": 12_000})
    (by_object,) = run_task(TASK, make_policy("hybrid").at_window(12_000))
    assert by_window.calls["compacted"].sum() > 0
    assert by_window.calls.equals(by_param.calls) and by_window.calls.equals(by_object.calls)
    w = run_world(WORLD, policy="progressive", window=1500, oracle=False)
    p = run_world(WORLD, policy="progressive", params={"context_window_tokens": 1500}, oracle=False)
    assert w.episode.n_compactions > 0 and w.episode.steps == p.episode.steps


def test_an_explicit_conflicting_window_is_one_error_naming_both(tmp_path: Path) -> None:
    msg = r"window 40000 conflicts with progressive's context_window_tokens 30000"
    with pytest.raises(ConfigError, match=msg):
        run_task(TASK, "progressive", params={"context_window_tokens": 30_000}, window=WINDOW)
    with pytest.raises(ConfigError, match=msg):
        run_world(WORLD, policy="progressive", params={"context_window_tokens": 30_000}, window=WINDOW)
    with pytest.raises(ConfigError, match=msg):
        run_world(WORLD, policy=make_policy("progressive", context_window_tokens=30_000), window=WINDOW)
    # a window given by name is a choice even when it equals the default
    for entry in (run_task, lambda *a, **k: run_world(WORLD, policy=a[1], **k)):
        with pytest.raises(ConfigError, match=r"window 40000 conflicts with hybrid's context_window_tokens 200000"):
            entry(TASK, "hybrid", params={"context_window_tokens": 200_000}, window=WINDOW)
    spec = {
        "name": "conflict",
        "window": WINDOW,
        "tasks": {"synthetic": [{"preset": "small", "seeds": [0]}]},
        "policies": [{"kind": "progressive", "params": {"context_window_tokens": 30_000}}],
    }
    with pytest.raises(ConfigError, match=r"policies\[0\] .*" + msg):
        sweep(spec, out_dir=tmp_path / "o", workers=0, progress=False)


def test_the_loops_themselves_apply_the_rule() -> None:
    """replay() and run_episode() resolve the window too, for callers that skip the entry points."""
    from h9eval.closedloop.agents import make_agent
    from h9eval.closedloop.episode import run_episode

    agent = make_agent("scripted")
    ep = run_episode("fact_chain", agent, make_policy("progressive"), seed=0, context_window_tokens=1500)
    assert ep.context_window_tokens == 1500 and ep.policy_params["context_window_tokens"] == 1500
    assert ep.n_compactions > 0
    task = load_tasks_from_spec(TASK)[0]
    res = replay(task, make_policy("token_budget"), config=ReplayConfig(context_window_tokens=12_000))
    assert res.params["context_window_tokens"] == 12_000 and res.calls["compacted"].any()
    with pytest.raises(ConfigError, match="window 1500 conflicts with progressive's context_window_tokens 3000"):
        run_episode(
            "fact_chain",
            agent,
            make_policy("progressive", context_window_tokens=3000),
            seed=0,
            context_window_tokens=1500,
        )


def test_cli_window_on_both_paths_and_the_tokens_saved_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from h9eval.analysis.metrics import tokens_saved
    from h9eval.cli import main
    from h9eval.results.io import read_table

    out_dir = str(tmp_path / "t")
    assert main(["run", "--task", TASK, "--policy", "observation_masking", "--window", "12000", "--out", out_dir]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if x.strip().startswith("tokens_saved:"))
    calls = read_table(tmp_path / "t" / "calls.parquet", "calls")
    saved = float(tokens_saved(calls)["tokens_saved"].iloc[0])
    sent = int(calls["tokens_sent"].sum())
    assert 0 < saved < 1 and line.split(": ", 1)[1].startswith(f"{saved:.3f} (sent {sent:,} of")
    assert main(["run", "--world", WORLD, "--policy", "progressive", "--window", "1500", "--max-steps", "3"]) == 0
    params = {"context_window_tokens": 1500}
    at_window = run_world(WORLD, policy="progressive", params=params, max_steps=3, oracle=False)
    assert f"episode {at_window.run_id}" in capsys.readouterr().out  # the run id carries the policy's parameters' hash
    assert main(["run", "--world", WORLD, "--window-peak-frac", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--window-peak-frac" in err
