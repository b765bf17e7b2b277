"""``h9eval tasks inspect`` (issue 21): a file written by ``tasks generate`` is reported as
h9eval's task JSONL format with the task's own id; a harness9 session stored after write-back
reports its compaction markers and takes the task statement from the first real user request
where one survives, else from the compaction's User Intent anchor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.compaction.policies import make_policy
from h9eval.harness9.session_store import SessionStore
from h9eval.core.messages import Message
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.model import TASK_JSONL_FORMAT, tasks_to_jsonl
from h9eval.tasks.recorded import detect_format, inspect_task, load_task, load_tasks, summarize_task
from h9eval.tasks.synthetic import generate


def _inspect(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["tasks", "inspect", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_generated_task_file_is_its_own_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    assert main(["tasks", "generate", "--preset", "small", "--seed", "3", "--out", str(out)]) == 0
    capsys.readouterr()
    info = _inspect(capsys, str(out))
    t = generate("small", seed=3)
    assert info["format"] == TASK_JSONL_FORMAT and info["task_id"] == t.task_id
    assert info["source_kind"] == "synthetic" and info["n_facts"] == len(t.facts) > 0
    assert not info["task_id"].startswith("openai_chat")
    assert detect_format(out) == TASK_JSONL_FORMAT
    assert load_task(out).to_dict() == t.to_dict() == load_tasks(out)[0].to_dict()


def test_a_task_file_of_several_tasks(tmp_path: Path) -> None:
    out = tasks_to_jsonl([generate("small", seed=0), generate("small", seed=1)], tmp_path / "two.jsonl")
    info = inspect_task(out)
    assert info["format"] == TASK_JSONL_FORMAT and info["n_tasks"] == 2
    assert [x["task_id"] for x in info["tasks"]] == ["synthetic-small-0", "synthetic-small-1"]
    assert len(load_tasks(out)) == 2 == len(load_tasks_from_spec(str(out)))


def test_a_session_stored_after_write_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = generate("small", seed=0)
    res = replay(
        task,
        make_policy("progressive", context_window_tokens=16_000),
        config=ReplayConfig(history_mode="write_back"),
        out_dir=tmp_path / "run",
        run_id="wb",
    )
    assert res.calls["written_back"].any(), "the session must have been rewritten"
    info = _inspect(capsys, str(tmp_path / "run" / "sessions.db"), "--session", "wb")
    assert info["compacted_history"] is True and info["n_compactions"] == len(info["compaction_message_indices"]) >= 1
    assert info["intent_source"] == "compaction_anchor"
    # the original request, as the compaction's anchor kept it, not a later "change of plan"
    assert info["task_statement"].startswith(task.intent.statement[:60])


def test_a_first_request_that_survives_is_the_statement(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionStore(db) as st:
        st.create_session("s", title="t")
        st.add_messages(
            "s",
            [
                Message("user", "Fix the flaky test in pkg/store"),
                Message("user", "[Context Compaction]\n## Anchors\n\n### User Intent\nFix a test\n\n## Summary\nx"),
                Message("user", "Also update the changelog"),
            ],
        )
    info = summarize_task(load_tasks_from_spec(f"{db}#s")[0])
    assert info["task_statement"] == "Fix the flaky test in pkg/store" and info["n_compactions"] == 1
