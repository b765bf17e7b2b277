"""Anthropic's server-side compaction as a policy: recorded through the SDK against a local server
that answers with the documented ``compaction`` block, then replayed offline from the cassette
(a miss is an error), with the compaction step's usage in the summarizer columns."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import h9eval.compaction.policies.anthropic_server_compaction  # noqa: F401  (registers the policy)
from h9eval.core.errors import ConfigError
from h9eval.runs.run import run_task

SEEN: list[dict] = []


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        SEEN.append({"beta": self.headers.get("anthropic-beta"), "body": body})
        text = json.dumps(body["messages"])[:400]
        reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                 "content": [{"type": "compaction", "content": f"Summary of the work so far: {text}"},
                             {"type": "text", "text": "."}],
                 "stop_reason": "max_tokens", "stop_sequence": None,
                 "usage": {"input_tokens": 900, "output_tokens": 1,
                           "iterations": [{"type": "compaction", "input_tokens": 12000, "output_tokens": 350},
                                          {"type": "message", "input_tokens": 900, "output_tokens": 1}]}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_record_then_replay_offline(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cassette = tmp_path / "server.jsonl"
    params = {"context_window_tokens": 12000, "trigger_tokens": 8000, "cassette": str(cassette)}
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-123456")
    [rec] = run_task("synthetic:small:0", "anthropic_server_compaction", params={**params, "record": True,
                                                                                 "base_url": server})
    n = int(rec.calls["compacted"].sum())
    assert n > 0 and len(SEEN) >= n
    assert SEEN[0]["beta"] == "compact-2026-01-12"
    assert SEEN[0]["body"]["context_management"]["edits"][0]["trigger"] == {"type": "input_tokens", "value": 8000}
    assert int(rec.calls["summarizer_input_tokens"].sum()) == 12000 * n  # the compaction iteration is billed
    assert "sk-ant" not in cassette.read_text()
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    SEEN.clear()
    [again] = run_task("synthetic:small:0", "anthropic_server_compaction", params=params)  # replay: no server, no key
    assert not SEEN
    assert list(again.calls["tokens_sent"]) == list(rec.calls["tokens_sent"])
    assert int(again.calls["compacted"].sum()) == n
    with pytest.raises(ConfigError, match="no recorded reply"):
        run_task("synthetic:small:1", "anthropic_server_compaction", params=params)


def test_the_cassette_is_required_and_the_trigger_below_the_window() -> None:
    from h9eval.compaction.policies import make_policy

    with pytest.raises(ConfigError, match="cassette is required"):
        make_policy("anthropic_server_compaction")
    with pytest.raises(ConfigError, match="trigger_tokens"):
        make_policy("anthropic_server_compaction", cassette="x.jsonl", context_window_tokens=1000, trigger_tokens=2000)
