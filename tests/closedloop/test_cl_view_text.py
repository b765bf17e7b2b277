"""The per-episode view serialiser and the scripted agent's incremental parse give exactly what
the whole-view forms give (the speed-up changes no result)."""

from __future__ import annotations

import json
import random

from h9eval.closedloop.agents.base import ViewSerializer, serialize_view
from h9eval.closedloop.agents.scripted import ScriptedAgent
from h9eval.core.messages import Message, ToolCall

TOOLS = [{"name": "lookup", "description": "find <&> ]", "input_schema": {"b": 1, "a": ["x"]}}]


def _messages(n: int) -> list[Message]:
    out = [Message("system", "sys"), Message("user", 'TASK t: "quoted" ],"tools": é \u2028')]
    for k in range(n):
        call = ToolCall(f"c{k}", "lookup", json.dumps({"key": f"K-{k}"}))
        out.append(Message("assistant", f"note {k}", (call,)))
        out.append(Message("user", f"result {k} ]" + "x" * k, (), f"c{k}", k % 3 == 0))
    return out


def _reference(view: list[Message]) -> str:
    # the form before the serialiser: the whole object dumped at once
    return json.dumps(
        {"messages": [m.to_json() for m in view], "tools": TOOLS},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )


def test_serializer_and_incremental_parse_match_whole_view_forms() -> None:
    msgs = _messages(30)
    rng = random.Random(3)
    ser, agent = ViewSerializer(TOOLS), ScriptedAgent()
    views = [msgs[:k] for k in range(len(msgs) + 1)]
    # growing views, then rewrites (a compaction drops the middle, a summary replaces the head)
    views += [msgs[:2] + msgs[20:], [Message("user", "[Context Compaction] s")] + msgs[40:], msgs[:1], []]
    views += [[msgs[i] for i in sorted(rng.sample(range(len(msgs)), 12))] for _ in range(5)]
    fresh_agent_views = 0
    for view in views:
        text = ser(view)
        assert text == serialize_view(view, TOOLS) == _reference(view)
        assert agent._messages(text) == tuple(view)
        fresh_agent_views += agent._messages(text) == ScriptedAgent()._messages(text)
    assert fresh_agent_views == len(views)


def test_incremental_parse_decodes_only_the_new_messages(monkeypatch: object) -> None:
    msgs = _messages(10)
    agent = ScriptedAgent()
    agent._messages(serialize_view(msgs[:10], TOOLS))
    decoded: list[int] = []
    original = agent._message
    agent._message = lambda obj, i: decoded.append(i) or original(obj, i)  # type: ignore[method-assign]
    assert agent._messages(serialize_view(msgs[:13], TOOLS)) == tuple(msgs[:13])
    assert decoded == [10, 11, 12]
    decoded.clear()
    # a rewritten head: the whole view again
    assert agent._messages(serialize_view(msgs[1:13], TOOLS)) == tuple(msgs[1:13])
    assert decoded == list(range(12))
