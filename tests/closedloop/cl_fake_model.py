"""A fake Anthropic Messages endpoint for the live agent's tests: an ``httpx2.MockTransport``
handler that turns each request back into an h9eval view and answers with the scripted agent's
action as a ``tool_use`` reply, with made-up but deterministic usage numbers.

The cassette shipped in ``data/`` was recorded through this fake transport, not a real API
(``test_recording_reproduces_the_shipped_cassette`` re-records it and compares the bytes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from h9eval.closedloop.agents import ScriptedAgent, serialize_view
from h9eval.core.messages import Message, ToolCall

DATA = Path(__file__).parent / "data"
CASSETTE = DATA / "live_fact_chain_seed3.jsonl"
#: the episode the shipped cassette holds
CASSETTE_WORLD = {"kind": "fact_chain", "hops": 3, "gap_steps": 1, "padding_bytes": 900}
CASSETTE_SEED = 3
CASSETTE_POLICY = {"kind": "progressive", "context_window_tokens": 1300}
KEY = "sk-ant-api03-FAKE-closed-loop-key-0000"
MODEL = "claude-haiku-4-5"


def view_from_request(body: dict[str, Any]) -> str:
    msgs: list[Message] = []
    system = "".join(b["text"] for b in body.get("system", []))
    if system:
        msgs.append(Message("system", system))
    for m in body["messages"]:
        if m["role"] == "assistant":
            text = "".join(b["text"] for b in m["content"] if b["type"] == "text")
            calls = tuple(
                ToolCall(
                    b["id"],
                    b["name"],
                    json.dumps(b["input"], sort_keys=True, separators=(",", ":"), ensure_ascii=False),
                )
                for b in m["content"]
                if b["type"] == "tool_use"
            )
            msgs.append(Message("assistant", "" if text == "(empty)" else text, calls))
            continue
        for b in m["content"]:
            if b["type"] == "tool_result":
                msgs.append(Message("user", b["content"], (), b["tool_use_id"], bool(b.get("is_error", False))))
            elif b["text"] != "(earlier context was compacted)":
                msgs.append(Message("user", b["text"]))
    tools = [{k: v for k, v in t.items() if k != "cache_control"} for t in body.get("tools", [])]
    return serialize_view(msgs, tools)


class FakeModel:
    """The handler: counts requests and answers like the scripted agent would."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.agent = ScriptedAgent("full")

    def __call__(self, request: Any) -> Any:
        import httpx2

        body = json.loads(request.content)
        self.requests.append(body)
        action = self.agent.act(view_from_request(body))
        n = len(self.requests)
        content: list[dict[str, Any]] = [{"type": "text", "text": action.note}] if action.note else []
        if not action.done:
            content.append({"type": "tool_use", "id": f"toolu_fake_{n:03d}", "name": action.tool, "input": action.args})
        prefix = len(json.dumps(body.get("system", [])) + json.dumps(body.get("tools", []))) // 4
        usage = {
            "input_tokens": len(request.content) // 4 - prefix,
            "output_tokens": 10 + len(action.note) // 4,
            "cache_creation_input_tokens": prefix if n == 1 else 0,
            "cache_read_input_tokens": prefix if n > 1 else 0,
        }
        return httpx2.Response(
            200,
            json={
                "id": f"msg_fake_{n:03d}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "end_turn" if action.done else "tool_use",
                "stop_sequence": None,
                "usage": usage,
            },
        )

    def client(self) -> Any:
        import httpx2

        return httpx2.Client(transport=httpx2.MockTransport(self))
