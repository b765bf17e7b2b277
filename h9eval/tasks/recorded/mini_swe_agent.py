"""mini-swe-agent ``.traj.json`` → Task (tool-calling ``mini-swe-agent-1.1`` and older text format).

Tool-calling variant: ``system``/``user``/``assistant``/``tool`` messages map one to one
(``tool_calls[].function.arguments`` kept as recorded JSON text); ``reasoning_content`` is
dropped from the transcript and counted in ``metadata["reasoning_blocks"]``; the final
``role: exit`` message is not something the model saw, so it is left out and becomes the
outcome (``info.exit_status`` / ``info.submission``).

Text variant (commands in a fenced ```` ```bash ```` block, output back as a user message):
by default the command becomes a synthesized ``ToolCall(id=f"call_{i}", name="bash",
arguments='{"command": ...}')`` on the assistant message at history index ``i`` (its text is
kept verbatim), and the user message right after it becomes ``Message(role="tool",
tool_call_id=f"call_{i}")``. Why: harness9 and every compactor recognise tool results only by
``tool_call_id``; left raw, observation masking and tool-result clearing would see no tool
results at all in these sessions, and the comparison with tool-calling sessions would be
meaningless. Only a reply with exactly one block is an action (mini-swe-agent rejects others
with a format error, which stays a user message). ``synthesize_tool_calls=False`` keeps the raw
messages. The synthesized arguments add their bytes to the estimate (the command is counted
twice, as in a tool-calling transcript it would be once in the call).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h9eval.core.errors import FormatError
from h9eval.core.messages import Message, ToolCall
from h9eval.tasks.model import Task
from h9eval.tasks.recorded._common import (
    AgentPass,
    Cursor,
    Outcome,
    blocks_text,
    expect,
    finish_task,
    guarded,
    on_other_message,
    on_system_message,
    on_user_message,
    openai_tool_calls,
    openai_tool_schema,
    parse_json,
    read_text,
    returncode_from_text,
    stem,
)
from h9eval.tasks.recorded._format import RecordedFormat

__all__ = ["FORMAT", "load_mini_swe_agent", "looks_like_mini_swe_agent", "ACTION_REGEX"]

FORMAT = "mini_swe_agent"
_EXPECTED = "a mini-swe-agent trajectory object {info, messages, trajectory_format}"
ACTION_REGEX = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
"""mini-swe-agent's text-format action pattern (its ``action_regex`` default)."""


def looks_like_mini_swe_agent(obj: Any) -> bool:
    """True for a parsed mini-swe-agent trajectory."""
    if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
        return False
    tf = obj.get("trajectory_format")
    if isinstance(tf, str) and tf.startswith("mini-swe-agent"):
        return True
    info = obj.get("info")
    return isinstance(info, dict) and (
        "mini_version" in info or isinstance(info.get("config"), dict) and "agent" in info["config"]
    )


def load_mini_swe_agent(path: str | Path, *, synthesize_tool_calls: bool = True) -> Task:
    """Load one mini-swe-agent ``.traj.json`` file.

    ``synthesize_tool_calls``: text format only; turn fenced commands and their outputs into
    tool calls/results (default ``True``; see module docstring).
    """
    shown = str(path)
    p = Path(path)
    obj = parse_json(read_text(p, shown=shown), path=shown, expected=_EXPECTED)
    cur = Cursor(shown)
    with guarded(FORMAT, cur, _EXPECTED):
        return _load(p, shown, obj, cur, synthesize_tool_calls)


@dataclass(kw_only=True)
class _State(AgentPass):
    """What one pass over the trajectory's messages builds."""

    tool_calling: bool
    exit_content: str | None = None


def _load(p: Path, shown: str, obj: Any, cur: Cursor, synthesize: bool) -> Task:
    expect(isinstance(obj, dict), f"expected a JSON object, got {type(obj).__name__}", cur)
    raw = obj.get("messages")
    expect(isinstance(raw, list), "field 'messages' must be a list", cur)
    # The variant is the assistant's: a stray tool message in a text-format file must not turn
    # every synthesized call off (one would flip a whole trajectory to zero calls).
    tool_calling = any(isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls") for m in raw)
    st = _State(cur=cur, tool_calling=tool_calling, synthesize=synthesize)
    for i, m in enumerate(raw):
        cur.where = f"messages[{i}]"
        expect(isinstance(m, dict), f"expected a message object, got {type(m).__name__}", cur)
        role = m.get("role")
        expect(isinstance(role, str), "message needs a string 'role'", cur)
        content = blocks_text(m.get("content"), st.counts, what="content", cursor=cur)
        if role != "exit" and m.get("reasoning_content"):
            st.counts["reasoning_blocks"] += 1
        _ROLE_HANDLERS.get(role, on_other_message)(st, i, m, content)
    cur.where = None
    if not st.tr.messages:
        raise FormatError("trajectory has no messages", path=shown, where="messages")
    return _task(p, shown, obj, st)


def _on_exit(st: _State, i: int, m: Any, content: str) -> None:
    st.exit_content = content


def _on_assistant(st: _State, i: int, m: Any, content: str) -> None:
    calls = openai_tool_calls(m.get("tool_calls") or [], st.cur) if st.tool_calling else ()
    if not st.tool_calling and st.synthesize:
        actions = ACTION_REGEX.findall(content)
        if len(actions) == 1:
            st.pending = f"call_{i}"
            calls = (ToolCall(st.pending, "bash", json.dumps({"command": actions[0]}, ensure_ascii=False)),)
            st.n_synth += 1
        else:
            st.pending = None
    st.tr.add(Message("assistant", content, calls))


def _on_tool(st: _State, i: int, m: Any, content: str) -> None:
    tid = m.get("tool_call_id")
    expect(isinstance(tid, str) and tid != "", "tool message needs a non-empty string 'tool_call_id'", st.cur)
    if not st.tool_calling:  # no assistant message called a tool: nothing this could answer
        st.pending = None
        st.skipped["role:tool (text format)"] += 1
        return
    st.tr.add(Message("tool", content, (), tid), returncode=_returncode(m, content))


def _on_user(st: _State, i: int, m: Any, content: str) -> None:
    on_user_message(st, content, returncode=returncode_from_text)  # the observation states the return code


_ROLE_HANDLERS: dict[str, Callable[[_State, int, Any, str], None]] = {
    "exit": _on_exit,
    "assistant": _on_assistant,
    "tool": _on_tool,
    "user": _on_user,
    "system": on_system_message,
}
"""The handler of each message role; other roles are skipped and counted (``on_other_message``)."""


def _task(p: Path, shown: str, obj: Any, st: _State) -> Task:
    """The task of a read trajectory: tools, outcome and metadata from ``info``."""
    tr = st.tr
    info = obj.get("info") if isinstance(obj.get("info"), dict) else {}
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    model_cfg = config.get("model") if isinstance(config.get("model"), dict) else {}
    env_cfg = config.get("environment") if isinstance(config.get("environment"), dict) else {}
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    tools_raw = model_cfg.get("tools") or (model_cfg.get("model_kwargs") or {}).get("tools") or []
    tools = [t for t in (openai_tool_schema(x) for x in tools_raw if isinstance(tools_raw, list)) if t]
    tr.cwd = env_cfg.get("cwd") if isinstance(env_cfg.get("cwd"), str) else None
    exit_status = info.get("exit_status") if isinstance(info.get("exit_status"), str) else None
    submission = info.get("submission") if isinstance(info.get("submission"), str) else st.exit_content
    instance = obj.get("instance_id") if isinstance(obj.get("instance_id"), str) else stem(p)
    meta: dict[str, Any] = {
        "agent": "mini-swe-agent",
        "variant": "tool_calling" if st.tool_calling else "text",
        "model": model_cfg.get("model_name"),
        "mini_version": info.get("mini_version"),
        "trajectory_format": obj.get("trajectory_format"),
        "instance_id": instance,
        "api_calls": stats.get("api_calls"),
        "instance_cost": stats.get("instance_cost"),
        "reasoning_blocks": st.counts.get("reasoning_blocks", 0),
        "synthesized_tool_calls": st.n_synth,
        "has_exit_message": st.exit_content is not None,
        "tools_known": bool(tools),
    }
    outcome = Outcome(exit_status=exit_status, submission=submission, message_index=len(tr.messages) - 1)
    return finish_task(
        fmt=FORMAT,
        session=instance,
        path_shown=shown,
        path=p,
        tr=tr,
        tools=tools,
        outcome=outcome,
        metadata=meta,
        skipped=st.skipped,
    )


def _returncode(m: Any, content: str) -> int | None:
    extra = m.get("extra") if isinstance(m.get("extra"), dict) else {}
    rc = extra.get("returncode")
    if isinstance(rc, int) and not isinstance(rc, bool):
        return rc
    if isinstance(rc, str) and re.fullmatch(r"-?\d+", rc.strip()):
        return int(rc)
    return returncode_from_text(content)


RECORDED_FORMATS = (
    RecordedFormat(
        name=FORMAT,
        described="a mini-swe-agent .traj.json",
        detect_order=30,
        listed_order=20,
        load=load_mini_swe_agent,
        options=frozenset({"synthesize_tool_calls"}),
        matches_json=looks_like_mini_swe_agent,
    ),
)
