"""A recorded-session format is one file: a module of ``h9eval.tasks.recorded`` declaring ``RECORDED_FORMATS``.
The package finds it, detection runs its declared test in its declared order, and ``load_tasks`` loads it,
with no list edited anywhere."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import h9eval.tasks.recorded as recorded
from h9eval.tasks.recorded import RecordedFormat

MODULE = '''
"""A made-up agent's session: {"fancy_agent": [{"who": "user"|"bot", "said": "..."}]}."""
from pathlib import Path

from h9eval.core.messages import Message
from h9eval.tasks.model import Task, TaskSource
from h9eval.tasks.recorded._format import RecordedFormat


def load(path, **_):
    turns = __import__("json").loads(Path(path).read_text())["fancy_agent"]
    msgs = [Message(role="user" if t["who"] == "user" else "assistant", content=t["said"]) for t in turns]
    return Task(task_id=Path(path).stem, intent=msgs[0].content, messages=msgs,
                source=TaskSource(kind="recorded", path=str(path), format="fancy_agent"))


RECORDED_FORMATS = (
    RecordedFormat(name="fancy_agent", described="a fancy agent session", detect_order=5, load=load,
                   matches_json=lambda obj: isinstance(obj, dict) and "fancy_agent" in obj),
)
'''


@pytest.fixture
def fancy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "extra"
    pkg.mkdir()
    (pkg / "fancy_agent.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.setattr(recorded, "__path__", [*recorded.__path__, str(pkg)])
    monkeypatch.delitem(sys.modules, "h9eval.tasks.recorded.fancy_agent", raising=False)
    monkeypatch.setattr(recorded, "REGISTRY", recorded._declared())
    session = tmp_path / "s" / "one.json"
    session.parent.mkdir()
    session.write_text(
        json.dumps({"fancy_agent": [{"who": "user", "said": "fix the bug"}, {"who": "bot", "said": "ok"}]})
    )
    return session


def test_a_new_format_file_is_found_detected_and_loaded(fancy: Path) -> None:
    assert "fancy_agent" in recorded.REGISTRY
    assert recorded.detect_format(fancy) == "fancy_agent"
    [task] = recorded.load_tasks(fancy.parent)
    assert task.task_id == "one" and [m.role for m in task.messages] == ["user", "assistant"]
    assert recorded.load_task(fancy, "fancy_agent").intent == "fix the bug"


def test_every_shipped_format_is_declared_once_in_a_stated_order() -> None:
    reg = recorded.REGISTRY
    assert set(recorded.FORMATS) == {
        "claude_code", "mini_swe_agent", "swe_agent", "openhands", "openai_chat", "anthropic_messages"
    }  # fmt: skip
    assert all(isinstance(f, RecordedFormat) for f in reg.values())
    order = list(reg)
    # h9eval's task lines hold "messages" too: they are tested before the chat formats
    assert order.index("h9eval_task_jsonl") < order.index("openai_chat") < order.index("claude_code")


def test_a_name_declared_twice_is_refused(fancy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    again = tmp_path / "again"
    again.mkdir()
    (again / "fancy_agent_copy.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.setattr(recorded, "__path__", [*recorded.__path__, str(again)])
    with pytest.raises(RuntimeError, match="'fancy_agent' is declared by two modules"):
        recorded._declared()
