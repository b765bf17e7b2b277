"""Recorded-session loaders (issue 3 §3/§4) and their bad-input behaviour (issue 4).

The real sessions live in ``<shared>/data/recorded`` (``H9EVAL_SHARED`` or ``<repo>/../shared``);
the expected counts below are the ones ``SOURCES.md`` states. Small hand-made files cover the
generic OpenAI/Anthropic formats and mini-swe-agent's older text format.
"""

from __future__ import annotations

import copy

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from h9eval.core.errors import ConfigError, FormatError
from h9eval.tasks.keyterms import extract_key_terms
from h9eval.tasks.model import Task
from h9eval.tasks.recorded import FORMATS, detect_format, inspect_task, load_task, load_tasks
from h9eval.tasks.recorded._common import error_summary, shell_edited_paths

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """The same lookup as :func:`h9eval.core.paths.shared_dir`."""
    from h9eval.core.paths import shared_dir as _shared

    return _shared()


RECORDED = shared_dir() / "data" / "recorded"
needs_data = pytest.mark.skipif(not (RECORDED / "SOURCES.md").is_file(), reason=f"no recorded data at {RECORDED}")

CC = "claude-code"
CC_MAIN1 = f"{CC}/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
CC_MAIN2 = f"{CC}/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
CC_SUB = f"{CC}/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl"
CC_COMPACT1 = f"{CC}/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-acompact-946d2b.jsonl"
CC_COMPACT2 = f"{CC}/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-acompact-f46190.jsonl"
CC_EXPLORE = f"{CC}/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl"
MSA_15695 = "mini-swe-agent/deepseek_chat_test_1-100/django__django-15695.traj.json"
MSA_12308 = "mini-swe-agent/deepseek_chat_test_1-100/django__django-12308.traj.json"
MSA_ASTROID = "mini-swe-agent/deepseek_chat_dev/pylint-dev__astroid-1978.traj.json"
MSA_SQLFLUFF = "mini-swe-agent/deepseek_reasoner_dev/sqlfluff__sqlfluff-1763.traj.json"
SWE_PYDICOM = "swe-agent/pydicom__pydicom-1458.traj"
SWE_CTF = "swe-agent/i_got_id_demo.traj"
SWE_FC = (
    "swe-agent/replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source/"
    "marshmallow-code__marshmallow-1867.traj"
)
OH_1 = "openhands/6e57829462844ed99b8f39e7588cdd14"
OH_3 = "openhands/3f3d5850aca74c6db03728ce9d896373"

# path -> (format, messages by role after loading). Roles differ from SOURCES.md's *record*
# counts only where the mapping says so: Claude Code merges per-block assistant records and
# splits tool results out of user records; mini-swe-agent drops the ``exit`` message;
# SWE-agent drops demonstrations and turns text-format observations into ``tool`` results.
EXPECTED: dict[str, tuple[str, dict[str, int]]] = {
    CC_MAIN1: ("claude_code", {"assistant": 217, "tool": 242, "user": 7}),
    CC_MAIN2: ("claude_code", {"assistant": 143, "tool": 177, "user": 3}),
    CC_SUB: ("claude_code", {"assistant": 3, "tool": 12, "user": 1}),
    CC_COMPACT1: ("claude_code", {"assistant": 1, "user": 1}),
    CC_COMPACT2: ("claude_code", {"assistant": 1, "user": 6}),
    CC_EXPLORE: ("claude_code", {"assistant": 12, "tool": 33, "user": 1}),
    MSA_15695: ("mini_swe_agent", {"system": 1, "user": 1, "assistant": 88, "tool": 87}),
    MSA_12308: ("mini_swe_agent", {"system": 1, "user": 1, "assistant": 73, "tool": 72}),
    MSA_ASTROID: ("mini_swe_agent", {"system": 1, "user": 1, "assistant": 65, "tool": 64}),
    MSA_SQLFLUFF: ("mini_swe_agent", {"system": 1, "user": 1, "assistant": 103, "tool": 102}),
    SWE_PYDICOM: ("swe_agent", {"system": 1, "user": 1, "assistant": 12, "tool": 11}),
    SWE_CTF: ("swe_agent", {"system": 1, "user": 1, "assistant": 21, "tool": 20}),
    SWE_FC: ("swe_agent", {"system": 1, "user": 1, "assistant": 13, "tool": 13}),
    OH_1: ("openhands", {"system": 1, "user": 1, "assistant": 59, "tool": 59}),
    OH_3: ("openhands", {"system": 1, "user": 1, "assistant": 90, "tool": 90}),
}

_CACHE: dict[str, Task] = {}


def task(rel: str) -> Task:
    """Each real session is loaded once per test run (the big ones take ~0.1 s)."""
    if rel not in _CACHE:
        _CACHE[rel] = load_task(RECORDED / rel)
    return _CACHE[rel]


# -- every real session --------------------------------------------------------------------
@needs_data
@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_real_session_loads_with_expected_counts(rel: str) -> None:
    fmt, by_role = EXPECTED[rel]
    assert detect_format(RECORDED / rel) == fmt
    t = task(rel)
    assert t.source.kind == "recorded" and t.source.format == fmt and t.source.path == str(RECORDED / rel)
    assert t.task_id.startswith(f"{fmt}:")
    got: dict[str, int] = {}
    for m in t.messages:
        got[m.role] = got.get(m.role, 0) + 1
    assert got == by_role
    assert t.metadata["messages_by_role"] == dict(sorted(by_role.items()))
    assert t.metadata["format"] == fmt and t.metadata["n_messages"] == len(t.messages)
    assert t.intent.statement and t.intent.key_terms == tuple(dict.fromkeys(t.intent.key_terms))
    assert all(f.kind == "derived" and 0 <= f.message_index < len(t.messages) for f in t.facts)
    assert len({f.fact_id for f in t.facts}) == len(t.facts)
    for m in t.messages:
        for tc in m.tool_calls:
            json.loads(tc.arguments)  # arguments are JSON text
    # What a loader produces must survive the task model's own serialisation.
    assert Task.from_dict(json.loads(json.dumps(t.to_dict()))).to_dict() == t.to_dict()


@needs_data
def test_load_tasks_finds_every_session_in_sorted_order() -> None:
    tasks = load_tasks(RECORDED)
    paths = [t.source.path for t in tasks]
    # Claude Code's own compaction calls are not tasks: left out of folder discovery
    found = [rel for rel in EXPECTED if rel not in (CC_COMPACT1, CC_COMPACT2)]
    assert sorted(paths) == sorted(str(RECORDED / rel) for rel in found)
    assert len({t.task_id for t in tasks}) == len(tasks) == 13
    again = load_tasks(RECORDED)
    assert [t.content_hash() for t in again] == [t.content_hash() for t in tasks]


@needs_data
def test_claude_code_main_session() -> None:
    t = task(CC_MAIN1)
    md = t.metadata
    assert md["records_by_type"]["user"] == 249 and md["records_by_type"]["assistant"] == 408
    assert md["n_records"] == 2385
    assert md["n_tool_calls"] == 242 and md["n_tool_results"] == 242
    assert md["unmatched_tool_calls"] == 0 and md["orphan_tool_results"] == 0
    assert md["skipped_records"]["progress"] == 1697 and md["skipped_records"]["file-history-snapshot"] == 26
    assert md["thinking_blocks"] == 6 and md["model"] == "claude-opus-4-6"
    assert t.task_id == "claude_code:ae4a77f8-aedd-4bc1-888f-c94edc91af04"
    assert t.intent.statement.startswith("Work on bead spotter-4te")
    # The bead id is in every command's working directory: extracted, then dropped as a term
    # most messages repeat (it measures nothing about memory).
    assert "spotter-4te" in extract_key_terms(t.intent.statement) and "spotter-4te" not in t.intent.key_terms
    assert [t.intent.statement_of(k).endswith("continue implementation") for k in range(len(t.intent.changes))] == [
        True
    ]
    # One compaction: boundary + summary, the summary kept in place and flagged.
    (comp,) = md["compactions"]
    assert comp["trigger"] == "manual" and comp["pre_tokens"] == 142431
    summary_msg = t.messages[comp["message_index"]]
    assert summary_msg.role == "user" and summary_msg.meta == {"is_compact_summary": True}
    assert summary_msg.content == comp["summary"] and comp["summary"].startswith("This session is being continued")
    # Merging: every tool result follows the assistant message holding its call.
    call_at = {tc.id: i for i, m in enumerate(t.messages) for tc in m.tool_calls}
    assert all(call_at[m.tool_call_id] < i for i, m in enumerate(t.messages) if m.is_tool_result)
    assert max(len(m.tool_calls) for m in t.messages) > 1  # parallel calls were merged
    assert any(f.fact_id.startswith("edited_file_") and f.answer.endswith("mix.exs") for f in t.facts)
    n_fail_facts = sum(f.fact_id.startswith("failed_command_") for f in t.facts)
    assert (
        md["n_failed_commands"] == 12
        and n_fail_facts == 12 - md["n_generic_failures"] - md["n_duplicate_failures"] < 12
    )
    without = load_task(RECORDED / CC_MAIN1, keep_compact_summary=False)
    assert len(without.messages) == len(t.messages) - 1
    assert not any(m.meta and m.meta.get("is_compact_summary") for m in without.messages)


@needs_data
def test_claude_code_second_session_and_subagents() -> None:
    t = task(CC_MAIN2)
    assert (t.metadata["n_tool_calls"], t.metadata["n_tool_results"]) == (177, 177)
    assert t.metadata["records_by_type"]["user"] == 180 and t.metadata["records_by_type"]["assistant"] == 278
    assert len(t.metadata["compactions"]) == 1
    sub = task(CC_SUB)
    assert sub.task_id == "claude_code:ae4a77f8-aedd-4bc1-888f-c94edc91af04/agent-aac57f5"
    assert sub.metadata["is_sidechain"] and sub.metadata["agent_kind"] == "subagent"
    assert sub.metadata["n_tool_calls"] == 12 and sub.metadata["records_by_type"] == {
        "assistant": 15,
        "progress": 12,
        "user": 13,
    }
    assert sub.intent.statement.startswith("Search hex.pm")
    comp = task(CC_COMPACT1)
    assert comp.metadata["agent_kind"] == "compaction" and comp.messages[-1].role == "assistant"
    ex = task(CC_EXPLORE)
    assert ex.metadata["n_tool_calls"] == 33 and ex.metadata["model"].startswith("claude-sonnet-4-5")
    assert ex.intent.statement.startswith("Very thorough exploration")


@needs_data
def test_mini_swe_agent_tool_calling() -> None:
    t = task(MSA_15695)
    md = t.metadata
    assert md["variant"] == "tool_calling" and md["model"] == "deepseek/deepseek-chat"
    assert md["has_exit_message"] and all(m.role != "exit" for m in t.messages)
    assert md["unmatched_tool_calls"] == 1  # the submit call's output became the exit message
    assert t.intent.statement.startswith("RenameIndex() crashes")
    assert "<pr_description>" not in t.intent.statement and "RenameIndex" in t.intent.key_terms
    facts = {f.fact_id: f for f in t.facts}
    assert facts["outcome_exit_status"].answer == "Submitted"
    assert facts["outcome_patch_files"].answer == "django/db/migrations/operations/models.py"
    assert "django/db/migrations/operations/models.py" in md["edited_files"]
    failures = [f for f in t.facts if f.fact_id.startswith("failed_command_")]
    assert md["n_failed_commands"] == 9 and len(failures) == 9 - md["n_generic_failures"] - md["n_duplicate_failures"]
    # Only the specific error line answers: never the bare class name or an exit code.
    assert any(f.answer.startswith("ModuleNotFoundError: No module named") for f in failures)
    assert all(not f.variants for f in failures) and len({f.answer for f in failures}) == len(failures)
    assert task(MSA_SQLFLUFF).metadata["reasoning_blocks"] == 103


@needs_data
def test_swe_agent_demo_skipping_and_variants() -> None:
    t = task(SWE_PYDICOM)
    assert t.metadata["demo_messages_skipped"] == 1 and t.metadata["skipped_records"] == {"is_demo": 1}
    assert not any("--- DEMONSTRATION ---" in m.content for m in t.messages)
    assert t.intent.statement.startswith("Pixel Representation attribute should be optional")
    assert t.metadata["variant"] == "text" and t.metadata["synthesized_tool_calls"] == 12
    first_call = t.messages[2].tool_calls[0]
    assert first_call.id == "call_3" and json.loads(first_call.arguments) == {"command": "create reproduce_bug.py"}
    assert t.messages[3].tool_call_id == "call_3" and t.messages[3].role == "tool"
    assert (
        "pydicom/pixel_data_handlers/numpy_handler.py" in t.metadata["edited_files"]
    )  # SWE-agent `edit` on the open file
    fc = task(SWE_FC)
    assert fc.metadata["variant"] == "function_calling" and fc.metadata["unmatched_tool_calls"] == 0
    assert fc.messages[2].tool_calls[0].id == "call_9diWc1DYm4RLmPfHgIaP2wd"
    ctf = task(SWE_CTF)
    assert {f.fact_id: f.answer for f in ctf.facts}["outcome_submission"] == "FLAG{p3rl_6_iz_EVEN_BETTER!!1}"


@needs_data
def test_openhands_conversation() -> None:
    t = task(OH_1)
    md = t.metadata
    assert md["events_by_kind"] == {
        "ActionEvent": 59,
        "Condensation": 1,
        "MessageEvent": 1,
        "ObservationEvent": 59,
        "SystemPromptEvent": 1,
    }
    assert md["n_tool_calls"] == 59 and md["n_tool_results"] == 59 and md["unmatched_tool_calls"] == 0
    (cond,) = md["condensations"]
    assert cond["summary"].startswith("USER_CONTEXT") and cond["n_forgotten_events"] > 0
    assert all(i < cond["message_index"] for i in cond["forgotten_message_indices"])
    names = [x["name"] for x in t.tools]
    assert "execute_bash" in names and all("input_schema" in x for x in t.tools)
    assert t.intent.statement.startswith("caplog fixture doesn't restore log level")
    assert md["agent_status"] == "finished" and md["model"].endswith("claude-sonnet-4-20250514")
    # SOURCES.md's "largest observation" is the event file (it also stores old/new file content);
    # only the LLM-visible output is in the transcript.
    assert inspect_task(RECORDED / OH_1)["largest_tool_result_bytes"] < 65_000
    assert len(task(OH_3).metadata["condensations"]) == 3
    # The event_service folder itself is accepted too.
    assert load_task(RECORDED / OH_1 / "event_service").messages == t.messages


@needs_data
def test_inspect_task_fields() -> None:
    d = inspect_task(RECORDED / MSA_15695)
    for key in (
        "format",
        "n_messages",
        "messages_by_role",
        "n_tool_calls",
        "n_tool_results",
        "estimated_tokens",
        "largest_tool_result_bytes",
        "task_statement",
        "unmatched_tool_calls",
        "n_compactions",
    ):
        assert key in d
    assert d["format"] == "mini_swe_agent" and d["n_messages"] == 177 and d["n_tool_calls"] == 88
    assert 10_000 < d["largest_tool_result_bytes"] < 11_000  # SOURCES.md: 10.6 KB
    assert len(d["task_statement"]) <= 200 and d["estimated_tokens"] == task(MSA_15695).estimated_tokens
    assert inspect_task(RECORDED / CC_MAIN1)["n_compactions"] == 1


# -- hand-made files: generic formats and mini-swe-agent's text format -----------------------
def _write(p: Path, obj: Any) -> Path:
    p.write_text(json.dumps(obj), encoding="utf-8")
    return p


OPENAI_MSGS = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the crash in `parse_config` (src/app/config.py): KeyError 'port'."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "python -m app"}'}},
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "bash", "arguments": {"command": "sed -i 's/a/b/' src/app/config.py"}},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "Traceback...\nKeyError: 'port'", "is_error": True},
    {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "ok"}]},
    {"role": "assistant", "content": "Fixed."},
    {"role": "user", "content": "Also add a test."},
]


def test_openai_chat_list_object_and_jsonl(tmp_path: Path) -> None:
    a = _write(tmp_path / "conv.json", OPENAI_MSGS)
    assert detect_format(a) == "openai_chat"
    t = load_task(a)
    assert t.task_id == "openai_chat:conv" and [m.role for m in t.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert t.messages[2].tool_calls[1].arguments == '{"command":"sed -i \'s/a/b/\' src/app/config.py"}'
    assert t.messages[3].is_error and t.messages[4].content == "ok"
    assert "src/app/config.py" in t.intent.key_terms and "parse_config" in t.intent.key_terms
    assert t.intent.changes[0].message_index == 6
    facts = {f.fact_id: f for f in t.facts}
    assert facts["edited_file_01"].answer == "src/app/config.py"
    assert facts["failed_command_01"].answer == "KeyError: 'port'"
    b = _write(
        tmp_path / "obj.json",
        {
            "messages": OPENAI_MSGS,
            "model": "gpt-x",
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}},
                }
            ],
        },
    )
    tb = load_task(b)
    assert tb.tools == ({"name": "bash", "description": "run", "input_schema": {"type": "object"}},)
    assert tb.metadata["model"] == "gpt-x" and tb.messages == t.messages
    c = tmp_path / "lines.jsonl"
    c.write_text("\n".join(json.dumps(m) for m in OPENAI_MSGS) + "\n", encoding="utf-8")
    assert detect_format(c) == "openai_chat" and load_task(c).messages == t.messages
    many = tmp_path / "many.jsonl"
    many.write_text("\n".join(json.dumps({"id": k, "messages": OPENAI_MSGS[:2]}) for k in ("a", "b")), encoding="utf-8")
    tasks = load_tasks(many)
    assert [x.task_id for x in tasks] == ["openai_chat:many#a", "openai_chat:many#b"]
    with pytest.raises(FormatError, match="2 conversations"):
        load_task(many)


ANTHROPIC_REQ = {
    "model": "claude-x",
    "system": [{"type": "text", "text": "You are helpful."}],
    "tools": [{"name": "Read", "description": "read a file", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "Why does tests/test_io.py fail with ValueError?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "x"},
                {"type": "text", "text": "Let me read it."},
                {"type": "tool_use", "id": "tu1", "name": "Read", "input": {"file_path": "tests/test_io.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "def test(): ..."}]},
                {"type": "text", "text": "Please hurry."},
            ],
        },
        {"role": "assistant", "content": "It fails because..."},
    ],
}


def test_anthropic_messages(tmp_path: Path) -> None:
    p = _write(tmp_path / "req.json", ANTHROPIC_REQ)
    assert detect_format(p) == "anthropic_messages"
    t = load_task(p)
    assert [m.role for m in t.messages] == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert (
        t.messages[2].content == "Let me read it."
        and t.messages[2].tool_calls[0].arguments == '{"file_path":"tests/test_io.py"}'
    )
    assert t.messages[3].tool_call_id == "tu1" and t.messages[3].content == "def test(): ..."
    assert t.metadata["thinking_blocks"] == 1 and t.tools[0]["name"] == "Read"
    assert t.intent.statement.startswith("Why does") and "ValueError" in t.intent.key_terms
    assert t.metadata["unmatched_tool_calls"] == 0


MSA_TEXT = {
    "trajectory_format": "mini-swe-agent-1",
    "info": {
        "exit_status": "Submitted",
        "submission": "diff --git a/src/foo.py b/src/foo.py\n--- a/src/foo.py\n+++ b/src/foo.py\n",
        "mini_version": "1.9.0",
        "model_stats": {"api_calls": 4, "instance_cost": 0.01},
        "config": {"agent": {"step_limit": 0}, "model": {"model_name": "gpt-4o"}, "environment": {"cwd": "/testbed"}},
    },
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {
            "role": "user",
            "content": "<pr_description>\nConsider the following PR description:\nfoo() raises ZeroDivisionError in "
            "src/foo.py\n</pr_description>\n\n<instructions>...</instructions>",
        },
        {"role": "assistant", "content": "THOUGHT: run it.\n\n```bash\npython -c 'import foo; foo.foo()'\n```"},
        {
            "role": "user",
            "content": "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
            "ZeroDivisionError: division by zero\n</output>",
        },
        {"role": "assistant", "content": "I will fix it, but forgot the block."},
        {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."},
        {"role": "assistant", "content": "THOUGHT: fix.\n\n```bash\nsed -i 's/1\\/0/0/' src/foo.py\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
        {
            "role": "assistant",
            "content": "THOUGHT: done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```",
        },
        {"role": "user", "content": "diff --git a/src/foo.py b/src/foo.py\n"},
    ],
}


def test_mini_swe_agent_text_format_survives_a_stray_tool_message(tmp_path: Path) -> None:
    """One tool message inserted into a text-format file used to make it "tool calling", so the
    synthesized calls were dropped and the file had 0 calls; now it is skipped and counted."""
    obj = copy.deepcopy(MSA_TEXT)
    obj["messages"].insert(4, {"role": "tool", "tool_call_id": "call_x", "content": "stray"})
    t = load_task(_write(tmp_path / "x__y-1.traj.json", obj))
    assert t.metadata["variant"] == "text" and t.metadata["synthesized_tool_calls"] == 3 and t.n_calls == 4
    assert sum(len(m.tool_calls) for m in t.messages) == 3 and not any(m.content == "stray" for m in t.messages)
    assert t.metadata["skipped_records"] == {"role:tool (text format)": 1}


def test_mini_swe_agent_text_format(tmp_path: Path) -> None:
    p = _write(tmp_path / "x__y-1.traj.json", MSA_TEXT)
    assert detect_format(p) == "mini_swe_agent"
    t = load_task(p)
    assert t.task_id == "mini_swe_agent:x__y-1" and t.metadata["variant"] == "text"
    assert [m.role for m in t.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert t.messages[2].tool_calls == (t.messages[2].tool_calls[0],) and t.messages[2].tool_calls[0].id == "call_2"
    assert json.loads(t.messages[2].tool_calls[0].arguments) == {"command": "python -c 'import foo; foo.foo()'"}
    assert t.messages[3].tool_call_id == "call_2" and t.messages[4].tool_calls == ()
    assert t.metadata["synthesized_tool_calls"] == 3 and t.metadata["unmatched_tool_calls"] == 0
    assert t.intent.statement == "foo() raises ZeroDivisionError in src/foo.py"
    facts = {f.fact_id: f for f in t.facts}
    assert facts["failed_command_01"].answer == "ZeroDivisionError: division by zero"
    assert facts["failed_command_01"].variants == ()  # "ZeroDivisionError"/"exit code 1" fit any failure
    assert facts["edited_file_01"].answer == "src/foo.py" and facts["edited_file_01"].message_index == 6
    assert facts["outcome_patch_files"].answer == "src/foo.py"
    raw = load_task(p, synthesize_tool_calls=False)
    assert [m.role for m in raw.messages].count("tool") == 0 and raw.metadata["n_tool_calls"] == 0


# -- derived-fact helpers and key terms ----------------------------------------------------
def test_shell_edit_detection() -> None:
    assert shell_edited_paths("sed -i 's/a/b/g' a.py b.py && cat a.py") == ["a.py", "b.py"]
    assert shell_edited_paths("cat > new.py << 'EOF'\nprint(1) > 2\nEOF\npython new.py 2>&1") == ["new.py"]
    assert shell_edited_paths("python - <<'EOF'\nopen('pkg/mod.py', 'w').write(s)\nEOF") == ["pkg/mod.py"]
    assert shell_edited_paths("git apply <<'EOF'\n--- a/x/y.py\n+++ b/x/y.py\nEOF") == ["x/y.py"]
    assert shell_edited_paths("grep -rn foo . > /dev/null; echo hi | tee -a log.txt") == ["log.txt"]
    assert shell_edited_paths("echo 'unbalanced") == []


def test_error_summary() -> None:
    assert error_summary("a\nTraceback\n  File x\nValueError: bad\n", 1) == (
        "ValueError: bad",
        ("ValueError", "exit code 1"),
    )
    assert error_summary("", 2) == ("exit code 2", ())
    assert error_summary("grep: foo: No such file or directory", None)[0] == "grep: foo: No such file or directory"


def test_key_terms() -> None:
    text = (
        "RenameIndex() crashes in django/db/migrations/operations/models.py with "
        "django.db.utils.ProgrammingError; see `unique_together` and https://example.com/a/b.py v4.1.2 #123."
    )
    terms = extract_key_terms(text)
    assert terms == extract_key_terms(text)
    assert terms[0] == "django/db/migrations/operations/models.py" and terms[1] == "ProgrammingError"
    assert {"RenameIndex", "unique_together", "django.db.utils.ProgrammingError", "v4.1.2", "#123"} <= set(terms)
    assert not any("example.com" in x for x in terms) and "models" not in terms
    assert len(extract_key_terms(" ".join(f"name_{i}" for i in range(50)))) == 20
    assert extract_key_terms(text, max_terms=2) == terms[:2] and extract_key_terms("") == ()
    assert "spotter-fum" in extract_key_terms("Work on bead spotter-fum. Run bd show spotter-fum.")
    assert not {"and/or", "issues/tasks/epics"} & set(extract_key_terms("and/or issues/tasks/epics"))


# -- bad input ---------------------------------------------------------------------------------
CC_LINE = {
    "type": "user",
    "sessionId": "s1",
    "uuid": "u1",
    "isSidechain": False,
    "message": {"role": "user", "content": "do it"},
}


def _lines(p: Path, *objs: Any) -> Path:
    p.write_text("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n", encoding="utf-8")
    return p


def test_bad_input_claude_code(tmp_path: Path) -> None:
    p = _lines(tmp_path / "s.jsonl", CC_LINE, {"type": "progress", "sessionId": "s1"}, '{"type": "assistant", "mess')
    with pytest.raises(FormatError, match=r"s\.jsonl:line 3: not valid JSON"):
        load_task(p)
    p = _lines(tmp_path / "s2.jsonl", CC_LINE, "[1, 2]")
    with pytest.raises(FormatError, match=r"line 2: expected a JSON object, got list"):
        load_task(p, format="claude_code")
    bad_result = {**CC_LINE, "message": {"role": "user", "content": [{"type": "tool_result", "content": "x"}]}}
    p = _lines(tmp_path / "s3.jsonl", CC_LINE, bad_result)
    with pytest.raises(FormatError, match=r"line 2: tool_result block needs a non-empty string 'tool_use_id'"):
        load_task(p)
    p = _lines(tmp_path / "s4.jsonl", CC_LINE, {"type": "assistant", "sessionId": "s1", "message": "oops"})
    with pytest.raises(FormatError, match=r"line 2: assistant record needs a 'message' object"):
        load_task(p)
    p = _lines(tmp_path / "s5.jsonl", {"type": "file-history-snapshot", "messageId": "m"})
    with pytest.raises(FormatError, match="no user or assistant records"):
        load_task(p)
    # Unknown record types are skipped and counted, not fatal.
    p = _lines(tmp_path / "s6.jsonl", CC_LINE, {"type": "brand-new", "sessionId": "s1"}, {"sessionId": "s1"})
    assert load_task(p).metadata["skipped_records"] == {"(no type)": 1, "brand-new": 1}


def test_bad_input_trajectories(tmp_path: Path) -> None:
    p = tmp_path / "t.traj.json"
    p.write_text(json.dumps(MSA_TEXT, indent=1)[:500], encoding="utf-8")
    with pytest.raises(FormatError, match=r"t\.traj\.json:line \d+ column \d+: not valid JSON"):
        load_task(p)
    with pytest.raises(FormatError, match=r"not valid JSON .*expected a mini-swe-agent trajectory"):
        load_task(p, format="mini_swe_agent")
    p = _write(tmp_path / "m.traj.json", {**MSA_TEXT, "messages": [{"role": "system", "content": "x"}, "oops"]})
    with pytest.raises(FormatError, match=r"messages\[1\]: expected a message object, got str"):
        load_task(p)
    p = _write(tmp_path / "tc.traj.json", {**MSA_TEXT, "messages": [{"role": "tool", "content": "x"}]})
    with pytest.raises(FormatError, match=r"messages\[0\]: tool message needs a non-empty string 'tool_call_id'"):
        load_task(p, format="mini_swe_agent")
    p = _write(tmp_path / "s.traj", {"history": [{"role": "user", "content": "x"}, 3], "trajectory": [], "info": {}})
    with pytest.raises(FormatError, match=r"history\[1\]: expected a message object, got int"):
        load_task(p)
    p = _write(tmp_path / "s2.traj", {"history": "nope", "trajectory": []})
    with pytest.raises(FormatError, match="field 'history' must be a list"):
        load_task(p, format="swe_agent")
    p = _write(tmp_path / "oa.json", [{"role": "assistant", "tool_calls": [{"function": {"name": "x"}}]}])
    with pytest.raises(FormatError, match=r"messages\[0\]: tool_calls\[0\] needs a non-empty string 'id'"):
        load_task(p)


def test_bad_input_unknown_and_unreadable(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="unknown format"):
        detect_format(_write(tmp_path / "x.json", {"foo": 1}))
    with pytest.raises(FormatError, match="unknown JSONL format"):
        detect_format(_lines(tmp_path / "x.jsonl", {"foo": 1}, {"bar": 2}))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(FormatError, match="file is empty"):
        load_task(tmp_path / "empty.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b'{"type": "user"}\n\xff\xfe')
    with pytest.raises(FormatError, match=r"line 2: not valid UTF-8"):
        load_task(tmp_path / "bin.jsonl")
    with pytest.raises(FormatError, match="no such file"):
        load_task(tmp_path / "missing.json")
    with pytest.raises(FormatError, match="not an OpenHands conversation"):
        load_task(tmp_path)
    with pytest.raises(ConfigError, match="did you mean 'openhands'"):
        load_task(tmp_path / "x.json", format="openhand")
    with pytest.raises(ConfigError, match="not accepted by the openai_chat loader"):
        load_task(_write(tmp_path / "c.json", OPENAI_MSGS), keep_compact_summary=False)
    with pytest.raises(FormatError, match="single OpenHands event"):
        detect_format(_write(tmp_path / "event-00001-x.json", {"kind": "ActionEvent", "source": "agent"}))
    assert set(FORMATS) == {
        "claude_code",
        "mini_swe_agent",
        "swe_agent",
        "openhands",
        "openai_chat",
        "anthropic_messages",
    }


def test_load_tasks_collects_errors(tmp_path: Path) -> None:
    _write(tmp_path / "good.json", OPENAI_MSGS)
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub" / "bad.json", {"foo": 1})
    (tmp_path / "notes.md").write_text("ignored", encoding="utf-8")
    with pytest.raises(FormatError, match="bad.json"):
        load_tasks(tmp_path)
    errors: list[FormatError] = []
    tasks = load_tasks(tmp_path, errors=errors)
    assert [t.task_id for t in tasks] == ["openai_chat:good"] and len(errors) == 1 and "bad.json" in str(errors[0])


def _openhands_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "conv"
    src = RECORDED / OH_1 / "event_service"
    (dst / "event_service" / "events").mkdir(parents=True)
    shutil.copy(src / "base_state.json", dst / "event_service" / "base_state.json")
    for f in sorted((src / "events").iterdir())[:6]:
        shutil.copy(f, dst / "event_service" / "events" / f.name)
    return dst


@needs_data
def test_bad_input_openhands(tmp_path: Path) -> None:
    conv = _openhands_copy(tmp_path)
    assert detect_format(conv) == "openhands" and len(load_task(conv).messages) == 6
    events = sorted((conv / "event_service" / "events").iterdir())
    victim = events[4]
    victim.write_text(victim.read_text(encoding="utf-8")[:100], encoding="utf-8")
    with pytest.raises(FormatError, match=rf"conv:{victim.name}: not valid JSON"):
        load_task(conv)
    victim.write_text(json.dumps({"id": "x"}), encoding="utf-8")
    with pytest.raises(FormatError, match=rf"{victim.name}: event needs a string 'kind'"):
        load_task(conv)
    victim.write_text(json.dumps({"kind": "ObservationEvent", "id": "x", "tool_call_id": "t"}), encoding="utf-8")
    with pytest.raises(FormatError, match=rf"{victim.name}: ObservationEvent needs an 'observation' object"):
        load_task(conv)
    empty = tmp_path / "empty" / "event_service" / "events"
    empty.mkdir(parents=True)
    with pytest.raises(FormatError, match="no event-NNNNN"):
        load_task(tmp_path / "empty", format="openhands")
    (tmp_path / "plain").mkdir()
    with pytest.raises(FormatError, match="no event_service/events/"):
        load_task(tmp_path / "plain", format="openhands")
    with pytest.raises(FormatError, match="expected an OpenHands conversation folder"):
        load_task(victim, format="openhands")


@needs_data
def test_truncation_at_and_inside_a_line(tmp_path: Path) -> None:
    lines = (RECORDED / CC_SUB).read_bytes().split(b"\n")
    p = tmp_path / "agent-aac57f5.jsonl"
    p.write_bytes(b"\n".join(lines[:20]))  # a session cut between records is still a session
    t = load_task(p)
    assert 0 < len(t.messages) < len(task(CC_SUB).messages)
    p.write_bytes(b"\n".join(lines[:20]) + b"\n" + lines[20][:30])
    with pytest.raises(FormatError, match=r"agent-aac57f5\.jsonl:line 21: not valid JSON"):
        load_task(p)


def test_summarize_task_on_any_task(tmp_path: Path) -> None:
    from h9eval.tasks.recorded import summarize_task

    t = load_task(_write(tmp_path / "conv.json", OPENAI_MSGS))
    d = summarize_task(t)
    assert d["n_tool_calls"] == 2 and d["n_tool_results"] == 2 and d["largest_tool_result_index"] == 3
    assert d["messages_by_role"] == {"assistant": 2, "system": 1, "tool": 2, "user": 2}
    assert d == inspect_task(tmp_path / "conv.json")


# -- random truncation / corruption of real files ------------------------------------------
_FUZZ_SOURCES = [CC_SUB, SWE_PYDICOM, CC_COMPACT1]


def _load_or_format_error(p: Path) -> None:
    try:
        t = load_task(p)
    except FormatError:
        return
    assert isinstance(t, Task)


@needs_data
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.sampled_from(_FUZZ_SOURCES),
    cut=st.floats(0.0, 1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=3),
)
def test_truncated_or_corrupted_real_files_raise_only_format_error(
    tmp_path: Path, which: str, cut: float, flips: list[tuple[float, int]]
) -> None:
    data = bytearray((RECORDED / which).read_bytes())
    data = data[: int(len(data) * cut)]
    for pos, byte in flips:
        if data:
            data[min(int(pos * len(data)), len(data) - 1)] = byte
    p = tmp_path / Path(which).name
    p.write_bytes(bytes(data))
    _load_or_format_error(p)


@needs_data
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0.0, 1.0), event=st.integers(0, 5), byte=st.integers(0, 255), pos=st.floats(0.0, 1.0))
def test_corrupted_openhands_event_raises_only_format_error(
    tmp_path: Path, cut: float, event: int, byte: int, pos: float
) -> None:
    conv = tmp_path / f"c{abs(hash((cut, event, byte, pos)))}"
    if conv.exists():
        shutil.rmtree(conv)
    src = _openhands_copy(tmp_path / "src") if not (tmp_path / "src" / "conv").exists() else tmp_path / "src" / "conv"
    shutil.copytree(src, conv)
    f = sorted((conv / "event_service" / "events").iterdir())[event]
    data = bytearray(f.read_bytes())[: max(1, int(len(f.read_bytes()) * cut))]
    data[min(int(pos * len(data)), len(data) - 1)] = byte
    f.write_bytes(bytes(data))
    _load_or_format_error(conv)


@pytest.mark.parametrize(
    "obj",
    [
        {"messages": [{"role": "user", "content": 5}]},
        {"messages": [{"role": "assistant", "tool_calls": "x"}]},
        {"system": 3, "messages": [{"role": "user", "content": [{"type": "tool_use"}]}]},
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 1}]}],
        [{"role": "user", "content": [7]}],
    ],
)
def test_malformed_chat_values_raise_format_error(tmp_path: Path, obj: Any) -> None:
    with pytest.raises(FormatError):
        load_task(_write(tmp_path / "c.json", obj))


# -- one OpenAI tool_calls parser; one handler per event kind ---------------------------------
_TOOL_CALLS = [
    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
    {"id": "c2", "name": "read_file", "arguments": {"path": "a.py"}},  # the flat form
]


def _three_openai_style_files(tmp_path: Path, calls: Any) -> dict[str, Path]:
    """The same assistant ``tool_calls`` in a mini-swe-agent, a SWE-agent and an OpenAI chat file."""
    msgs = [{"role": "user", "content": "do it"}, {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]  # fmt: skip
    swe = [dict(m) for m in msgs]
    swe[2] = {"role": "tool", "tool_call_ids": ["c1"], "content": "ok"}
    return {
        "mini_swe_agent": _write(
            tmp_path / "m.traj.json", {"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": msgs}
        ),
        "swe_agent": _write(tmp_path / "s.traj", {"history": swe, "trajectory": [], "info": {}}),
        "openai_chat": _write(tmp_path / "c.json", {"messages": msgs}),
    }


def test_one_tool_calls_parser_for_every_openai_style_format(tmp_path: Path) -> None:
    files = _three_openai_style_files(tmp_path, _TOOL_CALLS)
    calls = {fmt: load_task(p, format=fmt).messages[1].tool_calls for fmt, p in files.items()}
    assert [(c.id, c.name, c.arguments) for c in calls["openai_chat"]] == [
        ("c1", "bash", '{"command": "ls"}'),
        ("c2", "read_file", '{"path":"a.py"}'),
    ]
    assert calls["mini_swe_agent"] == calls["swe_agent"] == calls["openai_chat"]
    # SWE-agent may store the list as its Python repr: the same calls come out.
    p = files["swe_agent"]
    obj = json.loads(p.read_text(encoding="utf-8"))
    obj["history"][1]["tool_calls"] = repr(_TOOL_CALLS)
    _write(p, obj)
    assert load_task(p, format="swe_agent").messages[1].tool_calls == calls["openai_chat"]
    # A broken entry gives the same message in every format.
    for fmt, p in _three_openai_style_files(tmp_path, [{"id": "c1", "function": {"arguments": "{}"}}]).items():
        with pytest.raises(FormatError, match=r"(messages|history)\[1\]: tool_calls\[0\] needs a string function name"):
            load_task(p, format=fmt)
    for fmt, p in _three_openai_style_files(tmp_path, "not a list").items():
        with pytest.raises(FormatError, match=r"\[1\]: "):
            load_task(p, format=fmt)


def _oh_event(kind: str, n: int, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "id": f"e{n}", "source": "agent", **fields}


def _oh_action(n: int, call_id: str, resp: str) -> dict[str, Any]:
    return _oh_event("ActionEvent", n, tool_call_id=call_id, tool_name="bash", llm_response_id=resp,
                     thought=[{"type": "text", "text": f"step {n}"}],
                     tool_call={"id": call_id, "function": {"name": "bash", "arguments": "{}"}})  # fmt: skip


def _oh_obs(n: int, call_id: str) -> dict[str, Any]:
    return _oh_event("ObservationEvent", n, tool_call_id=call_id, observation={"output": f"out {call_id}"})


def _openhands_conv(tmp_path: Path, *events: dict[str, Any]) -> Path:
    ev_dir = tmp_path / "conv" / "event_service" / "events"
    ev_dir.mkdir(parents=True)
    for n, ev in enumerate(events):
        _write(ev_dir / f"event-{n:05d}-x.json", ev)
    return tmp_path / "conv"


def test_openhands_parallel_actions_merge_until_another_event(tmp_path: Path) -> None:
    user = _oh_event(
        "MessageEvent", 0, source="user", llm_message={"role": "user", "content": [{"type": "text", "text": "go"}]}
    )
    # Two actions of one response are one assistant message with two calls.
    conv = _openhands_conv(
        tmp_path / "a", user, _oh_action(1, "t1", "r1"), _oh_action(2, "t2", "r1"), _oh_obs(3, "t1"), _oh_obs(4, "t2")
    )
    t = load_task(conv)
    assert [m.role for m in t.messages] == ["user", "assistant", "tool", "tool"]
    assert [c.id for c in t.messages[1].tool_calls] == ["t1", "t2"] and t.messages[1].content == "step 1"
    # Any other event between them, even an unknown (skipped) kind, ends the response.
    conv = _openhands_conv(tmp_path / "b", user, _oh_action(1, "t1", "r1"), _oh_event("BrandNewEvent", 2),
                           _oh_action(3, "t2", "r1"), _oh_obs(4, "t1"), _oh_obs(5, "t2"))  # fmt: skip
    t = load_task(conv)
    assert [m.role for m in t.messages] == ["user", "assistant", "assistant", "tool", "tool"]
    assert [[c.id for c in m.tool_calls] for m in t.messages[1:3]] == [["t1"], ["t2"]]
    assert t.metadata["skipped_records"] == {"BrandNewEvent": 1}
    assert t.metadata["events_by_kind"] == {
        "ActionEvent": 2,
        "BrandNewEvent": 1,
        "MessageEvent": 1,
        "ObservationEvent": 2,
    }


def test_claude_code_response_merges_across_tool_results_and_skipped_records(tmp_path: Path) -> None:
    def asst(block: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "assistant",
            "sessionId": "s1",
            "message": {"id": "m1", "model": "claude-x", "content": [block]},
        }

    result = {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "u1", "content": "r1"}]}}  # fmt: skip
    p = _lines(tmp_path / "s.jsonl", CC_LINE,
               asst({"type": "tool_use", "id": "u1", "name": "Bash", "input": {"command": "ls"}}),
               result, {"type": "progress", "sessionId": "s1"}, {"type": "system", "subtype": "info"},
               asst({"type": "tool_use", "id": "u2", "name": "Bash", "input": {}}),
               {**result, "message": {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": "u2", "content": "r2"}]}})  # fmt: skip
    t = load_task(p)
    assert [m.role for m in t.messages] == ["user", "assistant", "tool", "tool"]
    assert [c.id for c in t.messages[1].tool_calls] == ["u1", "u2"]
    assert t.metadata["skipped_records"] == {"progress": 1, "system/info": 1} and t.metadata["models"] == {
        "claude-x": 1
    }


def test_anthropic_system_file_with_a_late_non_object_message_is_a_format_error(tmp_path: Path) -> None:
    """Format detection looked at every message's role without checking past the first 20."""
    msgs: list[Any] = [{"role": "user", "content": "hi"}] * 21 + [5]
    p = _write(tmp_path / "c.json", {"system": "s", "messages": msgs})
    assert detect_format(p) == "anthropic_messages"
    with pytest.raises(FormatError, match=r"c\.json:messages\[21\]: expected a message object, got int"):
        load_tasks(p)


@needs_data
def test_folder_discovery_leaves_out_claude_codes_own_compaction_calls() -> None:
    """A Claude Code folder holds sessions, subagents and ``agent-acompact-*`` files (Claude
    Code's summarisation calls): the last are not tasks. Named explicitly, one still loads."""
    from h9eval.tasks.recorded import load_tasks

    tasks = load_tasks(RECORDED / CC)
    ids = [t.task_id for t in tasks]
    assert ids and not any("acompact" in i for i in ids)
    assert any("agent-aac57f5" in i for i in ids) and any(
        i.endswith("ae4a77f8-aedd-4bc1-888f-c94edc91af04") for i in ids
    )
    assert all(t.metadata.get("agent_kind") != "compaction" for t in tasks)
    (one,) = load_tasks(RECORDED / CC_COMPACT1)
    assert one.metadata["agent_kind"] == "compaction"


def test_jsonl_lines_split_on_newlines_only(tmp_path: Path) -> None:
    """JSON allows a raw U+2028 or form feed inside a string; str.splitlines cut the record there
    and the session failed to load ("not valid JSON")."""
    text = "do it\u2028now\x0cplease"
    line = {**CC_LINE, "message": {"role": "user", "content": text}}
    p = tmp_path / "s.jsonl"
    p.write_text(
        json.dumps(line, ensure_ascii=False) + "\n" + json.dumps({**CC_LINE, "uuid": "u2"}) + "\n", encoding="utf-8"
    )
    assert "\u2028" in p.read_text(encoding="utf-8")
    t = load_task(p)
    assert t.messages[0].content == text


def test_a_session_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Detecting the format and loading used to read and decode the file twice."""
    p = _lines(tmp_path / "s.jsonl", CC_LINE, {**CC_LINE, "uuid": "u2"})
    reads: list[Path] = []
    orig = Path.read_bytes

    def counting(self: Path) -> bytes:
        reads.append(self)
        return orig(self)

    monkeypatch.setattr(Path, "read_bytes", counting)
    load_tasks(str(p))
    assert reads.count(p) == 1
    p.write_text(p.read_text() + json.dumps({**CC_LINE, "uuid": "u3"}) + "\n")  # changed: read again
    assert len(load_task(p).messages) == 3
