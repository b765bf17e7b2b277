"""A model summarizer is built per process and settings, and the environment it reads when built is
one of them: a run after ``ANTHROPIC_BASE_URL`` or ``ANTHROPIC_API_KEY`` changed (a notebook's next
cell, the next test) calls the new endpoint with the new key, never the client of an earlier run."""

from __future__ import annotations

import pytest

pytest.importorskip("anthropic")

from h9eval.runs.run import run_task  # noqa: E402
from tests.fake_messages import fake_messages_server  # noqa: E402


def test_a_changed_endpoint_is_called_by_the_next_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with fake_messages_server() as first, fake_messages_server() as second:
        for server, key in ((first, "sk-ant-h9eval-env-one"), (second, "sk-ant-h9eval-env-two")):
            monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
            monkeypatch.setenv("ANTHROPIC_API_KEY", key)
            (r,) = run_task("synthetic:small:0", window=16_000, summarizer="anthropic")
            assert int(r.calls["summarizer_calls"].sum()) > 0
            assert not r.calls["fallback"].any(), set(r.calls["fallback_cause"])
        assert first.requests > 0 and second.requests == first.requests  # each run reached its own server
