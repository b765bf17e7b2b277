"""Write the small dataset fixtures of this folder from the recorded sessions in ``shared/``.

Each fixture follows one public dataset's documented row schema (see ``README.md`` here); its
rows are the shipped recorded sessions converted to that schema, plus a few rows that break the
schema on purpose (they must be skipped and counted, never crash a load). Run from the repository
root: ``python examples/datasets/make_fixtures.py`` (deterministic: the same files each time).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from h9eval.core.messages import Message
from h9eval.core.paths import shared_dir
from h9eval.tasks.model import Task
from h9eval.tasks.recorded import load_tasks

HERE = Path(__file__).resolve().parent
SOURCES = [
    "mini-swe-agent/deepseek_chat_dev",
    "mini-swe-agent/deepseek_reasoner_dev",
    "swe-agent/pydicom__pydicom-1458.traj",
    "swe-agent/replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source",
    "openhands/6e57829462844ed99b8f39e7588cdd14",
]


def _tasks() -> list[Task]:
    root = shared_dir() / "data" / "recorded"
    out: list[Task] = []
    for rel in SOURCES:
        out.extend(load_tasks(root / rel))
    return out


def _instance(t: Task, k: int) -> str:
    return f"{t.source.format}__{t.source.session}"[:80] or f"task{k}"


def _openai(m: Message) -> dict[str, Any]:
    d: dict[str, Any] = {"role": m.role, "content": m.content, "tool_calls": None, "tool_call_id": None, "name": None}
    if m.tool_calls:
        d["tool_calls"] = [
            {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
            for tc in m.tool_calls
        ]
    if m.role == "tool":
        d["tool_call_id"] = m.tool_call_id
    return d


def _command(args: str) -> str:
    try:
        parsed = json.loads(args)
    except ValueError:
        return args
    if isinstance(parsed, dict) and isinstance(parsed.get("command"), str):
        return parsed["command"]
    return args


def _swe_agent_text(t: Task) -> list[dict[str, Any]]:
    """SWE-agent's text format: actions as the fenced block of an ``ai`` message, outputs as ``user``."""
    steps: list[dict[str, Any]] = []
    for m in t.messages:
        base = {"system_prompt": None, "mask": False, "cutoff_date": "2024-06-01"}
        if m.role == "system":
            steps.append({**base, "role": "system", "text": "", "system_prompt": m.content})
        elif m.role == "assistant":
            text = m.content
            for tc in m.tool_calls[:1]:  # SWE-agent's text format runs one action per turn
                shown = _command(tc.arguments) if tc.name == "bash" else tc.name + " " + tc.arguments
                text = f"{text}\n\n```\n{shown}\n```"
            steps.append({**base, "role": "ai", "text": text, "mask": True})
        elif m.role in ("tool", "user"):
            if m.role == "tool" and steps and steps[-1]["role"] == "user":
                continue  # a second result of a multi-call turn: the text format has one output per action
            steps.append({**base, "role": "user", "text": m.content})
    return steps


def _tools(t: Task) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": s.get("name", ""),
                "description": s.get("description", ""),
                "parameters": json.dumps(s.get("input_schema", {})),
            },
        }
        for s in t.tools
    ]


def _write(name: str, rows: list[dict[str, Any]], *, also: Iterable[str] = ()) -> None:
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, HERE / f"{name}.parquet", compression="zstd")
    if "jsonl" in also:
        with open(HERE / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{name}: {len(rows)} rows")


def main() -> int:
    tasks = _tasks()
    # nebius/SWE-agent-trajectories
    rows = []
    for k, t in enumerate(tasks):
        rows.append(
            {
                "instance_id": _instance(t, k),
                "model_name": "recorded",
                "target": k % 2 == 0,
                "trajectory": _swe_agent_text(t),
                "exit_status": "submitted",
                "generated_patch": "",
                "eval_logs": "",
            }
        )
    bad = dict(rows[0])
    rows.append(
        {
            **bad,
            "instance_id": "broken__role",
            "trajectory": [
                {"role": "robot", "text": "hi", "system_prompt": None, "mask": False, "cutoff_date": "2024-06-01"}
            ],
        }
    )
    rows.append({**bad, "instance_id": "broken__empty", "trajectory": []})
    _write("nebius_swe_agent", rows, also=["jsonl"])

    # SWE-bench/SWE-smith-trajectories: function-calling SWE-agent messages, as JSON text
    rows = []
    for k, t in enumerate(tasks):
        msgs = []
        for m in t.messages:
            d: dict[str, Any] = {"role": m.role, "content": m.content}
            if m.tool_calls:
                d["tool_calls"] = [
                    {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
                    for tc in m.tool_calls
                ]
            if m.role == "tool":
                d["tool_call_ids"] = [m.tool_call_id]
            msgs.append(d)
        rows.append(
            {
                "instance_id": _instance(t, k),
                "traj_id": f"{_instance(t, k)}.recorded",
                "model": "recorded",
                "resolved": k % 3 != 0,
                "patch": "",
                "messages": json.dumps(msgs, ensure_ascii=False),
            }
        )
    rows.append({**rows[0], "traj_id": "broken.not_json", "messages": "{not json"})
    _write("swe_smith", rows)

    # nebius/SWE-rebench-openhands-trajectories
    rows = []
    for k, t in enumerate(tasks):
        rows.append(
            {
                "trajectory_id": f"traj-{k:04d}",
                "instance_id": _instance(t, k),
                "repo": "recorded/session",
                "trajectory": [_openai(m) for m in t.messages],
                "tools": _tools(t),
                "model_patch": "",
                "exit_status": "submit",
                "resolved": k % 2,
            }
        )
    broken = [dict(m) for m in rows[0]["trajectory"]]
    for m in broken:
        if m["tool_calls"]:
            m["tool_calls"] = [{**m["tool_calls"][0], "id": None}]
            break
    rows.append({**rows[0], "trajectory_id": "traj-broken-call", "trajectory": broken})
    _write("swe_rebench_openhands", rows, also=["jsonl"])

    # nvidia/SWE-Zero-openhands-trajectories and SWE-Gym/OpenHands-Sampled-Trajectories: `messages`
    rows = []
    for k, t in enumerate(tasks):
        rows.append(
            {
                "instance_id": _instance(t, k),
                "trajectory_id": f"zero-{k:04d}",
                "repo": "recorded/session",
                "messages": [_openai(m) for m in t.messages],
                "tools": [json.dumps(x) for x in _tools(t)],
                "resolved": [1, 0, -1][k % 3],
            }
        )
    _write("swe_zero_openhands", rows)
    rows = [
        {"instance_id": r["instance_id"], "run_id": f"gym-{k}", "messages": r["messages"], "resolved": bool(k % 2)}
        for k, r in enumerate(rows)
    ]
    _write("swe_gym_openhands", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
