"""Replay engine invariants (issue 4) on crafted, recorded and synthetic tasks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from h9eval.compaction import ProgressiveCompactor, make_policy
from h9eval.compaction.repair import pairing_problems
from h9eval.core.messages import Message, ToolCall
from h9eval.results.schema import CALL_COLUMNS
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.tasks.model import Intent, Task, TaskSource


def crafted_task(n_turns: int = 30, out_bytes: int = 1200) -> Task:
    msgs = [
        Message("system", "You are a coding agent."),
        Message("user", "Fix the failing test in pkg/store (ticket ACME-42)."),
    ]
    for i in range(n_turns):
        cid = f"c{i}"
        msgs.append(
            Message(
                "assistant",
                f"Step {i}: I'll run the tests next.",
                (ToolCall(cid, "bash", json.dumps({"command": f"pytest -k t{i}"})),),
            )
        )
        msgs.append(Message("tool", f"output {i}\n" + ("log line\n" * (out_bytes // 9)), (), cid))
    msgs.append(Message("assistant", "Done."))
    return Task(
        task_id="crafted",
        source=TaskSource(kind="synthetic", preset="crafted"),
        messages=tuple(msgs),
        intent=Intent(statement=msgs[1].content),
    )


def _check_invariants(task: Task, res, window: int) -> None:
    calls = res.calls
    assert list(calls.columns) == list(CALL_COLUMNS)
    assert len(calls) == task.n_calls
    over = calls[calls["tokens_sent"] > window]
    assert over["overflow"].all(), "tokens above the window must be flagged as overflow"
    assert (calls.loc[~calls["overflow"], "tokens_sent"] <= window).all()
    assert (calls["run_id"] == res.run_id).all()


@pytest.mark.parametrize("mode", ["view", "write_back"])
def test_crafted_invariants(mode: str, tmp_path: Path) -> None:
    task = crafted_task()
    window = 6000
    res = replay(
        task,
        ProgressiveCompactor(context_window_tokens=window, min_tail_messages=4),
        config=ReplayConfig(history_mode=mode, keep_views=True),
        out_dir=tmp_path / mode,
    )
    _check_invariants(task, res, window)
    assert res.calls["compacted"].sum() > 0, "the loop must really compact"
    # every view sent keeps valid tool pairing (the transcript's pairing is valid)
    assert pairing_problems(task.messages) == []
    for v in res.views or []:
        assert pairing_problems(v) == []
    if mode == "view":
        # view mode never loses a transcript message from history
        assert [m.tool_call_id or m.content[:30] for m in res.final_history] == [
            m.tool_call_id or m.content[:30] for m in task.messages
        ]
    for name in ("calls.parquet", "compactions.parquet", "probes.parquet", "manifest.json", "sessions.db"):
        assert (tmp_path / mode / name).exists()
    assert list((tmp_path / mode / "compaction_records").glob("*.jsonl"))


def test_modes_differ_in_summarizer_calls() -> None:
    """View mode re-summarises at every call above the soft threshold (each Soft/Full turn costs
    a summary, spec §2.3); write-back summarises once and the shrunken history stays below."""
    task = crafted_task(n_turns=40)
    pol = ProgressiveCompactor(context_window_tokens=9000, min_tail_messages=4)
    view = replay(task, pol, config=ReplayConfig(history_mode="view"))
    wb = replay(task, pol, config=ReplayConfig(history_mode="write_back"))
    v_calls, w_calls = view.calls["summarizer_calls"].sum(), wb.calls["summarizer_calls"].sum()
    soft_full = int(view.calls["tier_name"].isin(["soft", "full"]).sum())
    assert soft_full >= 5 and v_calls == soft_full, "view mode summarises at every soft/full call"
    assert 0 < w_calls < v_calls / 2
    assert wb.calls["written_back"].sum() >= 1
    assert wb.calls["history_tokens"].iloc[-1] < view.calls["history_tokens"].iloc[-1]


def test_v2_writeback_rules_do_not_write_back_emergency() -> None:
    task = crafted_task(n_turns=30, out_bytes=3000)
    pol = ProgressiveCompactor(context_window_tokens=3000, min_tail_messages=2)
    v3 = replay(task, pol, summarizer=None, config=ReplayConfig(history_mode="write_back", writeback_rules="v3"))
    v2 = replay(task, pol, summarizer=None, config=ReplayConfig(history_mode="write_back", writeback_rules="v2"))
    em3 = v3.calls[v3.calls["tier_name"] == "emergency"]
    em2 = v2.calls[v2.calls["tier_name"] == "emergency"]
    assert len(em2) > 0 and not em2["written_back"].any()
    assert em3["written_back"].any()


def test_manual_compact_rewrites_history() -> None:
    task = crafted_task(n_turns=12)
    res = replay(
        task,
        make_policy("progressive", context_window_tokens=2000, min_tail_messages=2),
        config=ReplayConfig(manual_compact_at=(8,)),
    )
    row = res.calls.iloc[8]
    assert bool(row["manual_compact"]) and bool(row["written_back"])
    assert res.calls.iloc[7]["history_messages"] > row["history_messages"] - 0


def test_replay_is_deterministic(tmp_path: Path) -> None:
    task = crafted_task()
    pol = ProgressiveCompactor(context_window_tokens=6000, min_tail_messages=4)
    digests = []
    for d in ("a", "b"):
        replay(task, pol, config=ReplayConfig(history_mode="write_back"), out_dir=tmp_path / d, run_id="same")
        digests.append(
            [
                hashlib.sha256((tmp_path / d / f).read_bytes()).hexdigest()
                for f in ("calls.parquet", "compactions.parquet")
            ]
            + [
                hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted((tmp_path / d / "compaction_records").iterdir())
            ]
        )
    assert digests[0] == digests[1]


def test_tool_time_offload_happens(tmp_path: Path) -> None:
    task = crafted_task(n_turns=6, out_bytes=20_000)
    res = replay(task, ProgressiveCompactor(context_window_tokens=200_000), out_dir=tmp_path)
    assert res.calls["offloads_tool_time_count"].sum() == 6
    files = list((tmp_path / "work" / ".harness9" / "tool_results").rglob("*.txt"))
    assert len(files) == 6
    assert all(m.content.startswith("[输出已保存至") for m in res.final_history if m.tool_call_id)


def _recorded_paths(shared: Path) -> list[Path]:
    base = shared / "data" / "recorded"
    return [
        *sorted((base / "mini-swe-agent").rglob("*.traj.json")),
        *sorted((base / "swe-agent").rglob("*.traj")),
        *sorted(p for p in (base / "openhands").iterdir() if p.is_dir()),
        *sorted((base / "claude-code").glob("*.jsonl")),
    ]


@pytest.mark.parametrize("mode", ["view", "write_back"])
def test_every_recorded_session_replays(shared: Path, mode: str) -> None:
    from h9eval.tasks.recorded import load_task

    paths = _recorded_paths(shared)
    assert len(paths) >= 10
    for p in paths:
        task = load_task(p)
        window = max(8000, task.estimated_tokens // 2)
        res = replay(task, ProgressiveCompactor(context_window_tokens=window), config=ReplayConfig(history_mode=mode))
        _check_invariants(task, res, window)
        assert res.calls["compacted"].sum() > 0, f"{p.name}: nothing was compacted"


@pytest.mark.parametrize("mode", ["view", "write_back"])
def test_long_synthetic_replays(mode: str) -> None:
    synthetic = pytest.importorskip("h9eval.tasks.synthetic")
    task = synthetic.generate("long", seed=7)
    window = 128_000
    res = replay(task, ProgressiveCompactor(context_window_tokens=window), config=ReplayConfig(history_mode=mode))
    _check_invariants(task, res, window)
    assert res.calls["compacted"].sum() > 0


def test_v1_alias_offload_rewrites_view_mode_history() -> None:
    """harness9 V1's alias bug: offloaded head tool results stay placeholders in the history."""
    task = crafted_task(n_turns=20, out_bytes=5000)
    pol = ProgressiveCompactor(context_window_tokens=40_000, min_tail_messages=4)
    plain = replay(task, pol, config=ReplayConfig(history_mode="view"))
    alias = replay(task, pol, config=ReplayConfig(history_mode="view", v1_alias_offload=True))
    assert plain.calls["offloads_compaction_count"].sum() > 0
    assert not any(m.content.startswith("[offloaded:") for m in plain.final_history)
    assert any(m.content.startswith("[offloaded:") for m in alias.final_history)
    assert alias.calls["history_tokens"].iloc[-1] < plain.calls["history_tokens"].iloc[-1]
    with pytest.raises(Exception, match="needs history_mode='view'"):
        ReplayConfig(history_mode="write_back", v1_alias_offload=True)


# -- the loop's named values and outputs (issue 14) ---------------------------------------------


def test_summary_keys_have_one_owner() -> None:
    from h9eval.results.schema import RUN_COLUMNS, RUN_SUMMARY_KEYS

    res = replay(crafted_task(), ProgressiveCompactor(context_window_tokens=6000, min_tail_messages=4))
    s = res.summary()
    head = ["run_id", "task_id", "policy", "history_mode", "context_window_tokens"]
    assert list(s) == head + list(RUN_SUMMARY_KEYS)
    assert (
        s["context_window_tokens"] == 6000
        and s["compactions_by_tier"]
        and s["peak_tokens_sent"] == res.calls["tokens_sent"].max()
    )
    # the sweep's run row takes every scalar headline number, under the same name
    assert [k for k in RUN_SUMMARY_KEYS if k not in RUN_COLUMNS] == [
        "compactions",
        "compactions_by_tier",
        "fallback_causes",
    ]  # n_compactions there; two dicts


def test_summary_of_a_run_without_calls_names_the_run() -> None:
    msgs = (Message("system", "s"), Message("user", "only a question"))
    task = Task(
        task_id="empty",
        source=TaskSource(kind="synthetic", preset="crafted"),
        messages=msgs,
        intent=Intent(statement="q"),
    )
    s = replay(task, make_policy("keep_all")).summary()
    assert s == {
        "run_id": s["run_id"],
        "task_id": "empty",
        "policy": "keep_all",
        "history_mode": "view",
        "context_window_tokens": 200_000,
        "calls": 0,
    }


def test_call_stats_is_a_frozen_named_value_of_calls_columns() -> None:
    import dataclasses

    from h9eval.compaction.step import CallStats

    names = [f.name for f in dataclasses.fields(CallStats)]
    assert set(names) <= set(CALL_COLUMNS) and "tokens_sent" in names and len(names) == 31
    assert all(f.kw_only for f in dataclasses.fields(CallStats))
    res = replay(crafted_task(), make_policy("keep_all"))
    stats = res.calls.iloc[0][names].to_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        CallStats(**stats).tokens_sent = 1  # type: ignore[misc]


def test_record_extra_keys_feed_the_calls_table_and_never_the_jsonl(tmp_path: Path) -> None:
    from h9eval.compaction.records import EXTRA_MASKED, EXTRA_SUMMARY_CALLS

    masking = ProgressiveCompactor(context_window_tokens=6000, min_tail_messages=4, mask_observations_keep_turns=2)
    res = replay(crafted_task(), masking, out_dir=tmp_path / "m")
    masked = sum(int(r.extra.get(EXTRA_MASKED, 0)) for r in res.records)
    assert masked > 0 and res.calls["masked_results"].sum() == masked
    res = replay(
        crafted_task(), ProgressiveCompactor(context_window_tokens=6000, min_tail_messages=4), out_dir=tmp_path / "s"
    )
    summaries = sum(len(r.extra.get(EXTRA_SUMMARY_CALLS, [])) for r in res.records)
    assert summaries > 0 and res.calls["summarizer_calls"].sum() == summaries
    text = "".join(p.read_text() for p in tmp_path.glob("*/compaction_records/*.jsonl"))
    assert (
        text.count("\n") > 2
        and '"extra"' not in text
        and f'"{EXTRA_MASKED}"' not in text
        and EXTRA_SUMMARY_CALLS not in text
    )


def test_a_failing_loop_closes_its_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The outputs context manager removes the temporary offload folder and closes the session
    store when the loop raises; nothing is half-written as a finished run."""
    import sys
    import tempfile

    from h9eval.compaction.policies.progressive import ProgressiveCompactor as PC

    made: list[str] = []
    real = tempfile.TemporaryDirectory

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, *a: object, **k: object) -> None:
            super().__init__(*a, **k)  # type: ignore[arg-type]
            made.append(self.name)

    monkeypatch.setattr(sys.modules["h9eval.runs.replay"].tempfile, "TemporaryDirectory", Recording)
    calls = {"n": 0}

    def boom(self: object, history: object, *, tokens: int | None = None) -> object:
        calls["n"] += 1
        raise RuntimeError("compactor broke")

    pol = PC(context_window_tokens=6000)
    comp_cls = type(pol.start())
    monkeypatch.setattr(comp_cls, "compact", boom)
    with pytest.raises(RuntimeError, match="compactor broke"):
        replay(crafted_task(), pol)
    assert calls["n"] == 1 and len(made) == 1 and not Path(made[0]).exists()
    from h9eval.harness9.session_store import SessionStore

    closed: list[object] = []
    real_close = SessionStore.close

    def close(self: SessionStore) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(SessionStore, "close", close)
    with pytest.raises(RuntimeError, match="compactor broke"):
        replay(crafted_task(), pol, out_dir=tmp_path / "run")
    # The session store of an unfinished run is a copy that is dropped: nothing is left of it.
    assert len(closed) == 1 and not (tmp_path / "run" / "sessions.db").exists()
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.startswith(".sessions.db")]
    assert not (tmp_path / "run" / "manifest.json").exists() and not (tmp_path / "run" / "calls.parquet").exists()


def test_raw_tokens_sent_is_the_uncompacted_transcript_in_every_mode() -> None:
    """The baseline of tokens saved: keep_all in view mode without the hook sends exactly the
    raw transcript; a write-back run (history shrunk, results offloaded at tool time) has the
    same raw column, call by call, and sends less than it once it compacted."""
    from h9eval.core.tokens import estimate_tokens, estimate_tool_tokens

    task = crafted_task()
    window = 6000
    keep = replay(task, make_policy("keep_all"), config=ReplayConfig(context_window_tokens=window))
    assert (keep.calls["tokens_sent"] == keep.calls["raw_tokens_sent"]).all()
    wb = replay(
        task,
        ProgressiveCompactor(context_window_tokens=window, min_tail_messages=4),
        config=ReplayConfig(history_mode="write_back"),
    )
    assert wb.calls["written_back"].any()
    assert list(wb.calls["raw_tokens_sent"]) == list(keep.calls["raw_tokens_sent"])
    # an independent count: every message before the call's output, plus the tool schemas
    schema = estimate_tool_tokens(task.tools)
    idx = list(wb.calls["message_index"])
    assert list(wb.calls["raw_tokens_sent"]) == [estimate_tokens(task.messages[:i]) + schema for i in idx]
    after = wb.calls[wb.calls["call_index"] > wb.calls.loc[wb.calls["written_back"], "call_index"].min()]
    assert (after["tokens_sent"] < after["raw_tokens_sent"]).all()
    assert (wb.calls["history_tokens"] < wb.calls["raw_tokens_sent"] - schema).any()


def test_write_back_session_store_holds_the_final_history(tmp_path: Path) -> None:
    from h9eval.harness9.session_store import SessionStore
    from h9eval.tasks.synthetic import generate

    task = generate("small", seed=3)
    res = replay(
        task,
        make_policy("progressive", context_window_tokens=6_000),
        config=ReplayConfig(history_mode="write_back"),
        out_dir=tmp_path / "run",
    )
    assert res.calls["written_back"].sum() >= 3  # several write-backs, each writing only the changed span
    with SessionStore(tmp_path / "run" / "sessions.db") as s:
        (info,) = s.list_sessions()
        stored = s.get_messages(info.id)
    want = [m for m in res.final_history if m.role != "system"]
    assert [(m.content, m.tool_call_id, m.tool_calls) for m in stored] == [
        (m.content, m.tool_call_id, m.tool_calls) for m in want
    ]
