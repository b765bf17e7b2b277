"""The provider-side compaction policies (Anthropic's ``compact_20260112``, OpenAI's
``responses.compact``): replayed offline from the shipped cassettes, recorded through the real SDKs
against the fake local provider (``scripts/provider_compaction_cassettes.py``), the provider's item
sent back verbatim, the compaction step billed at list prices with each provider's cache rule, a
cassette miss one line (exit 2 from the CLI), and no key in any file written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.compaction.base import CompactionEnv
from h9eval.compaction.policies import make_policy
from h9eval.compaction.policies._server import PROVIDER_ITEM, shipped_cassette
from h9eval.compaction.policies.anthropic_server_compaction import compaction_request
from h9eval.compaction.policies.openai_server_compaction import compact_request
from h9eval.core.cassette import Cassette, request_hash
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.prices import MODELS
from h9eval.runs.run import run_task
from scripts.provider_compaction_cassettes import COVERAGE, FAKE_KEYS, KINDS, FakeProviderServer, fake_provider, record
from tests.crosscutting.test_secrets import KEY, assert_no_secret_in_files

TASK, WINDOW = "synthetic:small:0", 40_000  # covered by the shipped cassettes (the README's example)


def _summary_messages(views: list[tuple[Message, ...]]) -> list[Message]:
    return [m for v in views for m in v if (m.meta or {}).get(PROVIDER_ITEM)]


@pytest.mark.parametrize("kind", KINDS)
def test_replay_from_the_shipped_cassette_offline_with_the_step_billed(kind: str) -> None:
    """No server, no key: the default cassette answers; the compaction step's tokens and dollars
    are the summarizer columns, and equal what the recorded usage costs at the model's list prices."""
    assert (TASK, {"window": WINDOW}) in COVERAGE
    [res] = run_task(TASK, kind, window=WINDOW, summarizer=None)
    calls = res.calls
    n = int(calls["compacted"].sum())
    assert n > 0 and res.params["cassette"] == "shipped"
    assert {"summarizer_input_tokens", "summarizer_output_tokens", "summarizer_cost_usd"} <= set(calls.columns)
    # the cost recomputed from the cassette's usage, independently of the policy's reading
    info = MODELS[res.params["model"]]
    cassette = Cassette(shipped_cassette(kind))
    texts = [r.summary_text for r in res.records if r.summary_text]
    assert len(texts) == n
    expected = 0.0
    for rec in res.records:
        if not rec.summary_text:
            continue
        found = [r for _, r in cassette.items() if _item_text(kind, r) in rec.summary_text]
        assert found, "the transcript holds the item as the provider returned it"
        usage = found[0]["usage"]
        if kind.startswith("anthropic"):
            it = next(i for i in usage["iterations"] if i["type"] == "compaction")
            expected += (
                it["input_tokens"] * info.input_usd_per_mtok + it["output_tokens"] * info.output_usd_per_mtok
            ) / 1e6
        else:
            cached = usage["input_tokens_details"]["cached_tokens"]
            pin = info.input_usd_per_mtok
            expected += (
                (usage["input_tokens"] - cached) * pin
                + cached * pin * info.cache_read_frac
                + usage["output_tokens"] * info.output_usd_per_mtok
            ) / 1e6
    assert calls["summarizer_cost_usd"].sum() == pytest.approx(expected, rel=1e-9) and expected > 0


def _item_text(kind: str, response: dict) -> str:
    if kind.startswith("anthropic"):
        return next(b["content"] for b in response["content"] if b["type"] == "compaction")
    return next(i["encrypted_content"] for i in response["output"] if i["type"] == "compaction")


def test_the_openai_item_stays_opaque_in_the_transcript() -> None:
    [res] = run_task(TASK, "openai_server_compaction", window=WINDOW, summarizer=None)
    [rec] = [r for r in res.records if r.summary_text]
    item = json.loads(rec.summary_text)
    assert item["type"] == "compaction" and item["encrypted_content"].startswith("gAAAA")
    assert "TestFlush" not in rec.summary_text  # the summary inside is not readable here


def test_a_cassette_miss_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for kind in KINDS:
        code = main(
            ["run", "--task", "synthetic:small:1", "--policy", kind, "--window", "20000", "--out", str(tmp_path / kind)]
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2
        line = err[-1]
        assert str(shipped_cassette(kind)) in line and f"no recorded reply for the {kind} request" in line, line
        assert "Traceback" not in "\n".join(err)


def test_record_through_the_sdks_then_replay_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted key goes to the fake server (which echoes it back in every reply) and into no
    file written: cassettes, run folders."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_provider(echo_key=True) as srv:
        for kind in KINDS:
            params = {"cassette": str(tmp_path / f"{kind}.jsonl"), "record": True, "base_url": srv.base_url(kind)}
            [rec] = run_task(
                "synthetic:small:2",
                kind,
                params=params,
                window=20_000,
                summarizer=None,
                out_dir=tmp_path / "runs" / kind,
            )
            assert int(rec.calls["compacted"].sum()) > 0
            route = "/messages" if kind.startswith("anthropic") else "/compact"
            mine = [s for s in srv.seen if s["path"].endswith(route)]
            assert mine and all(s["key"] == KEY for s in mine)  # the key was really in use
            # offline again: no server, no key
            with monkeypatch.context() as mp:
                mp.delenv("ANTHROPIC_API_KEY")
                mp.delenv("OPENAI_API_KEY")
                n_seen = len(srv.seen)
                [again] = run_task(
                    "synthetic:small:2",
                    kind,
                    params={"cassette": params["cassette"]},
                    window=20_000,
                    summarizer=None,
                    out_dir=tmp_path / "replay" / kind,
                )
                assert len(srv.seen) == n_seen
                assert list(again.calls["tokens_sent"]) == list(rec.calls["tokens_sent"])
                assert again.calls["summarizer_cost_usd"].sum() == rec.calls["summarizer_cost_usd"].sum() > 0
    anthropic = [s for s in srv.seen if s["path"].endswith("/v1/messages")]
    assert anthropic[0]["beta"] == "compact-2026-01-12"
    assert anthropic[0]["body"]["context_management"]["edits"][0] == {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 15_000},
    }
    assert "[redacted]" in (tmp_path / "openai_server_compaction.jsonl").read_text()
    assert assert_no_secret_in_files(tmp_path) >= 10


def test_the_item_goes_back_verbatim_in_the_next_request() -> None:
    sys_msg, task = Message("system", "be brief"), Message("user", "fix the bug " * 50)
    anthropic_block = {"type": "compaction", "content": "so far: read a.py", "encrypted_content": "opaque=="}
    openai_item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-opaque", "created_by": "x"}
    call = Message("assistant", "next", (ToolCall("c1", "bash", '{"cmd": "ls"}'),))
    result = Message("tool", "a.py", (), "c1")
    marker = "[Context Compaction] x"
    a = compaction_request(
        [sys_msg, Message("user", marker, meta={PROVIDER_ITEM: anthropic_block}), call, result],
        model="claude-sonnet-4-6",
        trigger_tokens=1000,
    )
    assert a["system"] == "be brief"
    assert [m["role"] for m in a["messages"]] == ["user", "assistant", "user"]
    assert a["messages"][1]["content"][0] == anthropic_block and a["messages"][1]["content"][2]["type"] == "tool_use"
    o = compact_request(
        [sys_msg, task, Message("user", marker, meta={PROVIDER_ITEM: openai_item}), call, result], model="gpt-5"
    )
    assert o["instructions"] == "be brief"
    types = [i["type"] for i in o["input"]]
    assert types == ["message", "compaction", "message", "function_call", "function_call_output"]
    assert o["input"][1] == {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-opaque"}


def _one_reply_cassette(tmp_path: Path, body: dict, response: dict) -> str:
    path = tmp_path / "c.jsonl"
    Cassette(path).put(request_hash(body), response)
    return str(path)


def test_billing_follows_each_providers_cache_rule(tmp_path: Path) -> None:
    """Anthropic: the compaction iteration's uncached, cache-write and cache-read input at 1, 1.25
    and 0.1 of the input price; OpenAI: cached input at the model's cache_read_frac (0.1 for gpt-5)."""
    view = [Message("system", "s"), Message("user", "x" * 8000), Message("assistant", "y" * 8000)]
    body = compaction_request(view, model="claude-sonnet-4-6", trigger_tokens=1000)
    usage = {
        "iterations": [
            {
                "type": "compaction",
                "input_tokens": 1000,
                "cache_creation_input_tokens": 2000,
                "cache_read_input_tokens": 8000,
                "output_tokens": 300,
            },
            {"type": "message", "input_tokens": 50, "output_tokens": 1},
        ]
    }
    reply = {"content": [{"type": "compaction", "content": "summary"}], "usage": usage}
    p = make_policy(
        "anthropic_server_compaction",
        context_window_tokens=3000,
        trigger_tokens=1000,
        cassette=_one_reply_cassette(tmp_path / "a", body, reply),
    )
    c = p.start(CompactionEnv()).compact(view)
    [call] = c.record.extra["summary_calls"]
    assert call.input_tokens == 11_000 and call.output_tokens == 300
    assert call.cost_usd == pytest.approx((1000 * 3 + 2000 * 3 * 1.25 + 8000 * 3 * 0.1 + 300 * 15) / 1e6)
    assert [m.role for m in c.view] == ["system", "user"] and c.view[1].content.endswith("\nsummary")

    body = compact_request(view, model="gpt-5")
    usage = {"input_tokens": 10_000, "input_tokens_details": {"cached_tokens": 4096}, "output_tokens": 500}
    reply = {
        "output": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x" * 8000}]},
            {"type": "compaction", "id": "cmp_2", "encrypted_content": "gAAAAB-z"},
        ],
        "usage": usage,
    }
    p = make_policy(
        "openai_server_compaction",
        context_window_tokens=3000,
        trigger_tokens=1000,
        cassette=_one_reply_cassette(tmp_path / "o", body, reply),
    )
    c = p.start(CompactionEnv()).compact(view)
    [call] = c.record.extra["summary_calls"]
    assert call.input_tokens == 10_000
    assert call.cost_usd == pytest.approx((5904 * 1.25 + 4096 * 1.25 * 0.1 + 500 * 10.0) / 1e6)
    assert [m.role for m in c.view] == ["system", "user", "user"] and c.view[1].content == "x" * 8000
    assert (c.view[2].meta or {})[PROVIDER_ITEM]["id"] == "cmp_2"


def test_the_shipped_cassettes_are_what_the_script_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording the README's task again gives replies already in the shipped cassettes, byte for
    byte (the whole set: ``python -m scripts.provider_compaction_cassettes --check``)."""
    monkeypatch.setattr("scripts.provider_compaction_cassettes.COVERAGE", ((TASK, {"window": WINDOW}),))
    monkeypatch.setattr("scripts.provider_compaction_cassettes.HISTORY_MODES", ("view",))
    for kind, path in record(tmp_path).items():
        fresh = path.read_text().splitlines()
        assert fresh and set(fresh) <= set(shipped_cassette(kind).read_text().splitlines()), kind
    assert FAKE_KEYS["OPENAI_API_KEY"] not in "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))


def test_parameters_are_checked_at_construction() -> None:
    for kind in KINDS:
        with pytest.raises(ConfigError, match="trigger_tokens must be > 0 and < context_window_tokens"):
            make_policy(kind, context_window_tokens=1000, trigger_tokens=2000)
        with pytest.raises(ConfigError, match="cassette must be a file of your own with record=true"):
            make_policy(kind, record=True)
        with pytest.raises(ConfigError, match="model must have list prices"):
            make_policy(kind, model="my-local-model")
        p = make_policy(kind)
        assert p.trigger == 150_000 and p.at_window(40_000).trigger == 30_000


def test_a_recording_without_a_key_says_which_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    srv = FakeProviderServer()
    try:
        p = make_policy(
            "openai_server_compaction",
            context_window_tokens=3000,
            trigger_tokens=1000,
            record=True,
            cassette=str(tmp_path / "c.jsonl"),
            base_url=srv.base_url("openai_server_compaction"),
        )
        with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
            p.start(CompactionEnv()).compact([Message("user", "x" * 8000)])
    finally:
        srv.shutdown()
        srv.server_close()
