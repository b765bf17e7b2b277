"""Model API faults during a replay (issue 9): the real ``anthropic`` SDK over a fake transport.

A small synthetic task (``synthetic.generate("small", seed=0)``) is replayed through the
progressive compactor with a 16,000-token window (so Soft/Full summaries are needed) and the
``anthropic`` summarizer, whose HTTP client is an ``httpx2.Client`` with a ``MockTransport``:
never the network. Each fault (timeout, 429, 500, 529, a body that is not JSON, an empty content
list) must be

* retried exactly as the SDK does (``max_retries=1``: 2 requests per summary for retryable
  failures, 1 for a bad 200 reply) — counted at the transport;
* turned into harness9's fallback (``fallback`` true, ``fallback_error`` "LLM summary failed
  in TierSoft/TierFull"), and
* the run continues to its last call.

Retries are kept fast as in tests/test_anthropic_summarizer.py: ``retry-after-ms: 1`` on error
responses; for timeouts (no response, so no header) the SDK's backoff is patched to 0.

The sweep-level counterpart (a cell that raises fails only its cell) is in tests/test_sweep.py
(``test_monkeypatched_crash_fails_only_its_cell``, ``test_failed_cell_is_recorded_and_rerun_on_resume``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2")
anthropic_sdk = pytest.importorskip("anthropic")

from h9eval.compaction.policies import make_policy
from h9eval.runs.replay import replay  # noqa: E402
from h9eval.summarizers.registry import make_summarizer  # noqa: E402
from h9eval.tasks.synthetic import generate  # noqa: E402

KEY = "sk-ant-FAKE-faults-0123456789"
MODEL = "claude-haiku-4-5"
WINDOW = 16_000
FAST = {"retry-after-ms": "1"}
MAX_RETRIES = 1
FALLBACK = re.compile(r"^LLM summary failed in Tier(Warn|Soft|Full)$")

REPLY = (
    "## Anchors\n\n### User Intent\nFix the failing test\n\n### Execution Progress\n- Read the code\n\n"
    "### Key Decisions\n- Keep the API\n\n### Tried Solutions\n- N/A\n\n### Next Steps\n- Run tests\n\n"
    "## Summary\nWork in progress."
)


def ok_body(content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": REPLY}] if content is None else content,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1000, "output_tokens": 200},
    }


def status(code: int, kind: str) -> Callable[[Any], Any]:
    return lambda r: httpx2.Response(
        code, json={"type": "error", "error": {"type": kind, "message": f"fake {kind}"}}, headers=FAST
    )


def timeout(r: Any) -> Any:
    raise httpx2.ReadTimeout("read timed out", request=r)


def not_json(r: Any) -> Any:
    return httpx2.Response(200, content=b'{"id": "msg_1", "content": [', headers={"content-type": "application/json"})


def empty_content(r: Any) -> Any:
    return httpx2.Response(200, json=ok_body([]))


def ok(r: Any) -> Any:
    return httpx2.Response(200, json=ok_body())


class Transport:
    """Answers every request with ``step`` (after the scripted ``first`` ones); counts them."""

    def __init__(self, step: Callable[[Any], Any], first: tuple[Callable[[Any], Any], ...] = ()) -> None:
        self.step = step
        self.first = list(first)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        return (self.first.pop(0) if self.first else self.step)(request)


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    # A timeout has no retry-after header: without this the SDK would sleep ~0.5-1 s per retry.
    monkeypatch.setattr(anthropic_sdk._base_client.SyncAPIClient, "_calculate_retry_timeout", lambda *a, **k: 0.0)


def run_with(transport: Transport) -> Any:
    summ = make_summarizer(
        "anthropic",
        api_key=KEY,
        model=MODEL,
        base_url="http://fake.invalid",
        http_client=httpx2.Client(transport=httpx2.MockTransport(transport)),
        max_retries=MAX_RETRIES,
        breaker_failures=0,  # every summary is sent: the breaker has its own tests (test_breaker.py)
    )
    task = generate("small", seed=0)
    res = replay(task, make_policy("progressive", context_window_tokens=WINDOW), summarizer=summ)
    assert len(res.calls) == task.n_calls, "the run must reach its last model call"
    return res


# name -> (handler, requests per summary: 1 + max_retries when the SDK retries it)
FAULTS: dict[str, tuple[Callable[[Any], Any], int]] = {
    "timeout": (timeout, 1 + MAX_RETRIES),
    "429-rate-limit": (status(429, "rate_limit_error"), 1 + MAX_RETRIES),
    "500-api-error": (status(500, "api_error"), 1 + MAX_RETRIES),
    "529-overloaded": (status(529, "overloaded_error"), 1 + MAX_RETRIES),
    "malformed-json": (not_json, 1),  # a 200 is not retried
    "empty-content": (empty_content, 1),  # harness9's nil message, not an HTTP failure
}
N_FAULT_KINDS = len(FAULTS)
"""Quoted in docs/RELIABILITY.md."""


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_is_retried_then_falls_back_and_the_run_finishes(fault: str) -> None:
    handler, per_call = FAULTS[fault]
    t = Transport(handler)
    res = run_with(t)
    c = res.calls
    n_summaries = int(c["summarizer_calls"].sum())
    assert n_summaries >= 3, "the window must be small enough that several summaries are asked for"
    assert len(t.requests) == n_summaries * per_call
    if per_call > 1:  # the SDK's own retry header on the second attempt
        assert {r.headers.get("x-stainless-retry-count") for r in t.requests} == {"0", "1"}
    fb = c[c["fallback"]]
    assert len(fb) == n_summaries, "every failed summary becomes harness9's fallback"
    assert all(FALLBACK.match(e) for e in fb["fallback_error"]), fb["fallback_error"].unique()
    assert (c.loc[~c["fallback"], "fallback_error"] == "").all()
    # The fallback still compacts: the run never overflows because of a failed summary.
    assert not c["overflow"].any()
    # No summary text from the failed calls made it into a record.
    assert all(r.summary_text == "" or "Work in progress" not in r.summary_text for r in res.records)


@pytest.mark.parametrize("fault", ["429-rate-limit", "529-overloaded", "timeout"])
def test_one_transient_failure_is_absorbed_by_the_retry(fault: str) -> None:
    handler, _ = FAULTS[fault]
    t = Transport(ok, first=(handler,))
    c = run_with(t).calls
    n_summaries = int(c["summarizer_calls"].sum())
    assert n_summaries >= 3
    assert len(t.requests) == n_summaries + 1  # the first summary needed one retry
    assert not c["fallback"].any()


def test_fault_midway_then_recovery() -> None:
    """Healthy, then an outage (every request 529), then healthy again: only the summaries
    asked during the outage fall back, and the replay goes on."""
    state = {"n": 0}

    def flaky(r: Any) -> Any:
        state["n"] += 1
        return status(529, "overloaded_error")(r) if 2 <= state["n"] <= 5 else ok(r)

    t = Transport(flaky)
    c = run_with(t).calls
    n_fb = int(c["fallback"].sum())
    assert n_fb >= 1 and n_fb < int(c["summarizer_calls"].sum())
    assert len(t.requests) == int(c["summarizer_calls"].sum()) + n_fb * MAX_RETRIES
