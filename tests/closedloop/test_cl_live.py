"""The live Anthropic agent, driven through the real SDK with a fake HTTP transport (never the
network), and the cassette that replays a recorded episode offline.

The shipped cassette ``data/live_fact_chain_seed3.jsonl`` was recorded through the fake
transport of ``cl_fake_model`` (a scripted model behind the real SDK), not from the real API:
it proves the record/replay machinery and the request shape, not a model's behaviour.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("anthropic")

from cl_fake_model import (
    CASSETTE,
    CASSETTE_POLICY,
    CASSETTE_SEED,
    CASSETTE_WORLD,
    KEY,
    MODEL,
    FakeModel,
)

from h9eval.closedloop.agents import AgentError, AnthropicAgent, Cassette, ScriptedAgent
from h9eval.closedloop.agents.live import action_from_response, request_hash
from h9eval.closedloop.episode import Episode, run_episode
from h9eval.closedloop.worlds import make_world
from h9eval.core.errors import ConfigError, FormatError


def cassette_episode(agent: object, seed: int = CASSETTE_SEED) -> Episode:
    params = {k: v for k, v in CASSETTE_WORLD.items() if k != "kind"}
    return run_episode(
        make_world(str(CASSETTE_WORLD["kind"]), **params), agent, CASSETTE_POLICY, seed=seed, max_steps=30
    )  # type: ignore[arg-type]


def recording_agent(path: Path, fake: FakeModel, mode: str = "record") -> AnthropicAgent:
    return AnthropicAgent(
        model=MODEL,
        mode=mode,
        cassette=path,
        api_key=KEY,
        base_url="http://fake.invalid",
        http_client=fake.client(),
        max_tokens=512,
    )


def test_request_shape_caching_and_usage(tmp_path: Path) -> None:
    fake = FakeModel()
    ep = cassette_episode(recording_agent(tmp_path / "c.jsonl", fake))
    assert ep.success and ep.n_compactions > 0 and len(fake.requests) == ep.n_steps
    body = fake.requests[1]
    assert body["model"] == MODEL and body["temperature"] == 0 and body["max_tokens"] == 512
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in body["tools"][0]
    assert body["messages"][0]["role"] == "user" and body["messages"][1]["content"][-1]["type"] == "tool_use"
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "call_001",
        "content": ep.history[3].content,
    }
    s = ep.summary()
    assert s["agent_input_tokens"] > 0 and s["agent_cache_creation_tokens"] > 0 and s["agent_cache_read_tokens"] > 0
    assert ep.steps[0].agent_cache_read_tokens == 0 and ep.steps[1].agent_cache_read_tokens > 0
    u = ep.steps[1]  # claude-haiku-4-5: $1 in / $5 out per million; cache reads 0.1x, writes 1.25x
    assert u.agent_cost_usd == pytest.approx(
        (u.agent_input_tokens * 1.0 + u.agent_cache_read_tokens * 0.1 + u.agent_output_tokens * 5.0) / 1e6
    )
    assert s["agent_cost_usd"] > 0
    # the live loop acts exactly as the scripted agent behind the fake does
    scripted = cassette_episode(ScriptedAgent())
    assert [(x.tool, x.arguments) for x in ep.steps] == [(x.tool, x.arguments) for x in scripted.steps]


def test_shipped_cassette_replays_offline() -> None:
    agent = AnthropicAgent(model=MODEL, mode="replay", cassette=CASSETTE, max_tokens=512)
    ep = cassette_episode(agent)
    assert ep.success and ep.terminated_by == "done" and ep.n_compactions > 0
    assert ep.n_steps == len(Cassette(CASSETTE))
    assert ep.agent_id == 'anthropic{"max_tokens":512,"model":"claude-haiku-4-5","temperature":0.0}'
    assert ep.summary()["agent_output_tokens"] > 0


def test_replay_miss_is_an_error_never_a_call() -> None:
    agent = AnthropicAgent(model=MODEL, mode="replay", cassette=CASSETTE, max_tokens=512)
    with pytest.raises(AgentError, match=r"no recorded response for request \w+ \(replay mode never calls the API"):
        cassette_episode(agent, seed=CASSETTE_SEED + 1)  # other nonces: the first request differs


def test_recording_reproduces_the_shipped_cassette(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    fake = FakeModel()
    first = cassette_episode(recording_agent(path, fake))
    assert path.read_bytes() == CASSETTE.read_bytes()
    # a second recording run is served from the cassette: no request at all
    again = FakeModel()
    second = cassette_episode(recording_agent(path, again))
    assert again.requests == [] and second == first


def test_bad_agent_configuration_and_cassette_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="needs an API key"):
        AnthropicAgent(mode="live")
    with pytest.raises(ConfigError, match="needs a cassette path"):
        AnthropicAgent(mode="replay")
    with pytest.raises(ConfigError, match="mode must be one of replay, record, live"):
        AnthropicAgent(mode="play", cassette=tmp_path / "x.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"request_hash": "a", "response": {}}\nnot json\n')
    with pytest.raises(FormatError, match="bad.jsonl:line 2: line is not JSON"):
        Cassette(bad)
    bad.write_text('{"request_hash": 1}\n')
    with pytest.raises(FormatError, match="line 1: expected an object with a string 'request_hash'"):
        Cassette(bad)
    assert request_hash({"a": 1, "b": [2]}) == request_hash({"b": [2], "a": 1})


def test_api_errors_and_odd_replies(tmp_path: Path) -> None:
    def fail(request: object) -> object:
        return httpx2.Response(
            400,
            json={
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "tool_result without tool_use"},
            },
        )

    agent = AnthropicAgent(
        model=MODEL,
        mode="live",
        api_key=KEY,
        base_url="http://fake.invalid",
        http_client=httpx2.Client(transport=httpx2.MockTransport(fail)),
        max_retries=0,
    )
    with pytest.raises(AgentError, match="HTTP 400") as ei:
        cassette_episode(agent)
    assert KEY not in str(ei.value)
    done = action_from_response(
        {"content": [{"type": "text", "text": "all done"}], "usage": {"input_tokens": 3, "output_tokens": 2}}
    )
    assert done.done and done.note == "all done" and done.usage is not None and done.usage.input_tokens == 3
    two = action_from_response(
        {
            "content": [
                {"type": "tool_use", "name": "a", "input": {"x": "1"}},
                {"type": "tool_use", "name": "b", "input": {}},
            ]
        }
    )
    assert two.tool == "a" and json.loads(two.arguments) == {"x": "1"}
    with pytest.raises(AgentError, match="no content list"):
        action_from_response({"usage": {}})


@pytest.mark.parametrize("kind", ["fact_chain", "mini_repo", "ticket_queue"])
def test_live_loop_through_the_sdk_matches_the_scripted_agent(kind: str, tmp_path: Path) -> None:
    """Summaries, offload placeholders, a mid-episode correction (two user messages in a row,
    merged into one API turn) and array arguments all survive the round trip through the SDK."""
    policy = {"kind": "progressive", "context_window_tokens": 1500}
    live = run_episode(
        make_world(kind, padding_bytes=600),
        recording_agent(tmp_path / "c.jsonl", FakeModel(), mode="live"),
        policy,
        seed=1,
    )
    scripted = run_episode(make_world(kind, padding_bytes=600), ScriptedAgent(), policy, seed=1)
    assert live.n_compactions > 0 and live.success == scripted.success
    assert [(x.tool, x.arguments) for x in live.steps] == [(x.tool, x.arguments) for x in scripted.steps]
    assert not (tmp_path / "c.jsonl").exists()  # live mode records nothing


def test_server_side_context_editing_goes_through_the_beta_endpoint(tmp_path: Path) -> None:
    fake = FakeModel()
    seen: list[object] = []

    def handler(request: object) -> object:
        seen.append(request)
        return fake(request)

    cm = {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 2}}]}
    agent = AnthropicAgent(
        model=MODEL,
        mode="record",
        cassette=tmp_path / "cm.jsonl",
        api_key=KEY,
        base_url="http://fake.invalid",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        context_management=cm,
    )
    ep = cassette_episode(agent)
    assert ep.success and "context_management" in ep.agent_id
    assert fake.requests[0]["context_management"] == cm
    assert "context-management-2025-06-27" in seen[0].headers["anthropic-beta"]  # type: ignore[attr-defined]
    assert "betas" not in fake.requests[0]  # sent as the header, not in the body
    with pytest.raises(ConfigError, match="must have an 'edits' list"):
        AnthropicAgent(mode="replay", cassette=tmp_path / "cm.jsonl", context_management={"clear": True})


def test_call_cost_is_priced_from_the_model_table_and_unpriced_is_nan(tmp_path: Path) -> None:
    from h9eval.closedloop.agents.base import CallUsage
    from h9eval.closedloop.agents.live import call_cost_usd
    from h9eval.core.prices import ModelInfo, price_of

    usage = CallUsage(
        input_tokens=1000, output_tokens=200, cache_read_input_tokens=10_000, cache_creation_input_tokens=2000
    )
    # a model of the table's own multipliers (reads 0.5x, writes 3x): nothing hard-wired in the agent
    odd = ModelInfo(
        provider="openai", input_usd_per_mtok=2.0, output_usd_per_mtok=8.0, cache_read_frac=0.5, cache_write_5m_frac=3.0
    )
    assert call_cost_usd(usage, odd) == pytest.approx((1000 * 2 + 10_000 * 2 * 0.5 + 2000 * 2 * 3 + 200 * 8) / 1e6)
    assert math.isnan(call_cost_usd(usage, None))
    assert price_of("no-such-model-1") is None
    resp = {"content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 5, "output_tokens": 1}}
    assert math.isnan(action_from_response(resp, price=None).usage.cost_usd)  # type: ignore[union-attr]
    fake = FakeModel()
    agent = AnthropicAgent(
        model="no-such-model-1",
        mode="record",
        cassette=tmp_path / "c.jsonl",
        api_key=KEY,
        base_url="http://fake.invalid",
        http_client=fake.client(),
        max_tokens=512,
    )
    ep = cassette_episode(agent)
    assert ep.n_steps > 0 and all(math.isnan(x.agent_cost_usd) for x in ep.steps)
    assert math.isnan(ep.summary()["agent_cost_usd"])
