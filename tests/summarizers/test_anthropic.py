"""AnthropicSummarizer against a fake HTTP transport (``httpx2.MockTransport``): never the network.

The fake is injected as ``http_client=httpx2.Client(transport=httpx2.MockTransport(handler))``;
the SDK's retries are kept fast with ``retry-after-ms: 1`` headers (the SDK ignores a value
of 0 and falls back to its 0.5 s backoff) or, for failures without a response, by patching the
SDK's backoff computation to 0.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Callable
from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2")
anthropic_sdk = pytest.importorskip("anthropic")

from h9eval.compaction.anchors import NA, parse_anchors_and_summary  # noqa: E402
from h9eval.core.errors import ConfigError, SummarizerError  # noqa: E402
from h9eval.core.messages import assistant, user  # noqa: E402
from h9eval.summarizers.anthropic import (  # noqa: E402
    AnthropicFreeTextSummarizer,
    AnthropicSummarizer,
    price_for,
    DEFAULT_PRICES_USD_PER_MTOK,
)
from h9eval.compaction.summary import SummaryRequest  # noqa: E402

KEY = "sk-ant-api03-TESTKEY-do-not-leak-0123456789"
MODEL = "claude-haiku-4-5"
FAST = {"retry-after-ms": "1"}

ANCHOR_REPLY = (
    "## Anchors\n\n### User Intent\nBuild a web server\n\n### Execution Progress\n- Set up project\n\n"
    "### Key Decisions\n- Using net/http\n\n### Tried Solutions\n- Tried gin: too heavy\n\n"
    "### Next Steps\n- Add tests\n\n## Summary\nProject uses Go 1.25 stdlib."
)


def message_body(content: list[dict[str, Any]] | None = None, **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": ANCHOR_REPLY}] if content is None else content,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1000, "output_tokens": 500},
    }
    body.update(kw)
    return body


def error_body(status: int) -> dict[str, Any]:
    kind = {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error", 401: "authentication_error"}[status]
    return {"type": "error", "error": {"type": kind, "message": f"fake {kind}"}}


class Fake:
    """A scripted transport: each call pops the next response (or exception) factory."""

    def __init__(self, *steps: Callable[[Any], Any]) -> None:
        self.steps = list(steps)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        return step(request)

    def client(self) -> Any:
        return httpx2.Client(transport=httpx2.MockTransport(self))

    def sent(self, i: int = 0) -> dict[str, Any]:
        return json.loads(self.requests[i].content)


def ok(body: dict[str, Any] | None = None) -> Callable[[Any], Any]:
    return lambda r: httpx2.Response(200, json=body if body is not None else message_body())


def status(code: int, headers: dict[str, str] | None = None) -> Callable[[Any], Any]:
    return lambda r: httpx2.Response(code, json=error_body(code), headers=headers if headers is not None else FAST)


def make(fake: Fake, cls: type[AnthropicSummarizer] = AnthropicSummarizer, **kw: Any) -> AnthropicSummarizer:
    params: dict[str, Any] = {
        "api_key": KEY,
        "model": MODEL,
        "base_url": "http://fake.invalid",
        "http_client": fake.client(),
    }
    params.update(kw)
    return cls(**params)


def request(**kw: Any) -> SummaryRequest:
    fields: dict[str, Any] = dict(
        system_prompt="You are a context compaction engine.",
        user_prompt="Produce a structured compaction.\n\nConversation:\n[user]: build a server",
        template="first",
        previous_compaction=None,
        conversation="[user]: build a server",
        head=(user("build a server"), assistant("ok")),
        max_output_tokens=777,
    )
    fields.update(kw)
    return SummaryRequest(**fields)


def assert_no_key(err: BaseException) -> None:
    assert KEY not in str(err) and KEY not in repr(err)
    # The SDK exception holds the request (and its auth header): it is not chained.
    assert err.__cause__ is None and (err.__context__ is None or err.__suppress_context__)


# ---------------------------------------------------------------------------------------------


def test_success_request_shape_and_reply() -> None:
    fake = Fake(ok())
    s = make(fake)
    reply = s.summarize(request())
    body = fake.sent()
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert body["max_tokens"] == 777  # from the request by default
    assert body["system"] == "You are a context compaction engine."
    assert body["messages"] == [{"role": "user", "content": request().user_prompt}]
    assert fake.requests[0].url.path == "/v1/messages"
    # Per-attempt timeout = request.timeout_s (harness9's 60 s).
    assert float(fake.requests[0].headers["x-stainless-read-timeout"]) == 60.0
    assert reply.text == ANCHOR_REPLY
    anchors, summary = parse_anchors_and_summary(reply.text)
    assert anchors[0].content == "Build a web server" and summary == "Project uses Go 1.25 stdlib."
    assert (reply.input_tokens, reply.output_tokens) == (1000, 500)
    assert reply.cost_usd == pytest.approx((1000 * 1.0 + 500 * 5.0) / 1e6)
    assert reply.model == MODEL and not reply.cache_hit and reply.latency_s >= 0
    assert reply.extra["stop_reason"] == "end_turn" and reply.extra["cost_known"] is True


def test_params_max_tokens_temperature_timeout_and_id() -> None:
    fake = Fake(ok())
    s = make(fake, max_tokens=64, temperature=None, timeout_s=5.0)
    s.summarize(request())
    body = fake.sent()
    assert body["max_tokens"] == 64 and "temperature" not in body
    assert float(fake.requests[0].headers["x-stainless-read-timeout"]) == 5.0
    sid = s.summarizer_id
    assert sid.startswith("anthropic{") and MODEL in sid and '"max_tokens":64' in sid and KEY not in sid
    assert KEY not in repr(s)
    assert make(Fake(ok()), model="claude-opus-4-5").summarizer_id != sid


def test_text_blocks_are_concatenated_and_other_blocks_ignored() -> None:
    content = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "## Summary\n"},
        {"type": "text", "text": "part two"},
    ]
    assert make(Fake(ok(message_body(content)))).summarize(request()).text == "## Summary\npart two"


def test_empty_content_is_a_nil_message_with_usage() -> None:
    reply = make(Fake(ok(message_body([])))).summarize(request())
    assert reply.text is None  # harness9 "summarizer returned nil message", decided by the compactor
    assert reply.input_tokens == 1000 and reply.cost_usd > 0
    only_thinking = [{"type": "thinking", "thinking": "x", "signature": "s"}]
    assert make(Fake(ok(message_body(only_thinking)))).summarize(request()).text is None
    # An empty text block is a valid empty reply, not nil.
    assert make(Fake(ok(message_body([{"type": "text", "text": ""}])))).summarize(request()).text == ""


def test_429_then_success_uses_sdk_retry() -> None:
    fake = Fake(status(429), ok())
    reply = make(fake, max_retries=2).summarize(request())
    assert reply.text == ANCHOR_REPLY
    assert len(fake.requests) == 2
    assert fake.requests[1].headers["x-stainless-retry-count"] == "1"


@pytest.mark.parametrize(("code", "kind"), [(529, "overloaded_error"), (500, "api_error")])
def test_server_errors_after_retries(code: int, kind: str) -> None:
    fake = Fake(status(code))
    with pytest.raises(SummarizerError) as ei:
        make(fake, max_retries=2).summarize(request())
    assert len(fake.requests) == 3  # 1 + max_retries
    msg = str(ei.value)
    assert f"HTTP {code} {kind}" in msg and MODEL in msg and f"fake {kind}" in msg
    assert_no_key(ei.value)


def test_529_then_success() -> None:
    fake = Fake(status(529), status(529), ok())
    assert make(fake, max_retries=2).summarize(request()).text == ANCHOR_REPLY
    assert len(fake.requests) == 3


def test_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(r: Any) -> Any:
        raise httpx2.ReadTimeout("read timed out", request=r)

    fake = Fake(boom)
    with pytest.raises(SummarizerError, match=r"timed out after 60 s") as ei:
        make(fake, max_retries=0).summarize(request())
    assert len(fake.requests) == 1
    assert_no_key(ei.value)
    # With retries the SDK tries again; its backoff (no response, so no retry-after) is patched
    # to 0 to keep the test fast.
    monkeypatch.setattr(anthropic_sdk._base_client.SyncAPIClient, "_calculate_retry_timeout", lambda *a, **k: 0.0)
    fake2 = Fake(boom, ok())
    assert make(fake2, max_retries=1).summarize(request()).text == ANCHOR_REPLY
    assert len(fake2.requests) == 2


def test_connection_error() -> None:
    def refused(r: Any) -> Any:
        raise httpx2.ConnectError("connection refused", request=r)

    with pytest.raises(SummarizerError, match="connection error") as ei:
        make(Fake(refused), max_retries=0).summarize(request())
    assert_no_key(ei.value)


@pytest.mark.parametrize(
    "response",
    [
        lambda r: httpx2.Response(200, content=b"{not json", headers={"content-type": "application/json"}),
        lambda r: httpx2.Response(200, content=b"<html>gateway</html>", headers={"content-type": "text/html"}),
        lambda r: httpx2.Response(200, json={"unexpected": True}),
        lambda r: httpx2.Response(200, json=message_body(content="not a list")),  # type: ignore[arg-type]
    ],
    ids=["bad-json", "html", "no-content", "content-not-list"],
)
def test_malformed_responses(response: Callable[[Any], Any]) -> None:
    with pytest.raises(SummarizerError, match="malformed response") as ei:
        make(Fake(response)).summarize(request())
    assert_no_key(ei.value)


def test_missing_key_is_a_config_error_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicSummarizer()
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicFreeTextSummarizer(api_key="")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    fake = Fake(ok())
    s = AnthropicSummarizer(model=MODEL, base_url="http://fake.invalid", http_client=fake.client())
    s.summarize(request())
    sent_headers = fake.requests[0].headers
    assert KEY in sent_headers.get("x-api-key", "") + sent_headers.get("authorization", "")


def test_invalid_params() -> None:
    with pytest.raises(ConfigError, match="max_tokens"):
        AnthropicSummarizer(api_key=KEY, max_tokens=0)
    with pytest.raises(ConfigError, match="max_retries"):
        AnthropicSummarizer(api_key=KEY, max_retries=-1)


def test_key_echoed_by_the_api_is_redacted() -> None:
    def echo(r: Any) -> Any:
        body = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key: {KEY}"}}
        return httpx2.Response(401, json=body)

    with pytest.raises(SummarizerError, match=r"HTTP 401 authentication_error") as ei:
        make(Fake(echo)).summarize(request())
    assert "[redacted]" in str(ei.value)
    assert_no_key(ei.value)


def test_cost_table_and_override() -> None:
    assert price_for("claude-haiku-4-5-20251001", DEFAULT_PRICES_USD_PER_MTOK) == (1.0, 5.0)
    assert price_for("claude-opus-4-7", DEFAULT_PRICES_USD_PER_MTOK) is None  # no prefix guessing (not claude-opus-4)
    unknown = make(Fake(ok()), model="my-local-model").summarize(request())
    # an unknown model's cost is unknown, never $0 (as the billed columns say "unpriced")
    assert math.isnan(unknown.cost_usd) and unknown.extra["cost_known"] is False
    custom = make(Fake(ok()), model="my-local-model", prices={"my-local-model": (2.0, 10.0)})
    assert custom.summarize(request()).cost_usd == pytest.approx((1000 * 2 + 500 * 10) / 1e6)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_default_model() -> None:
    fake = Fake(ok())
    s = AnthropicSummarizer(api_key=KEY, base_url="http://fake.invalid", http_client=fake.client())
    r = s.summarize(request())
    assert fake.sent()["model"] == "claude-sonnet-4-6"
    assert r.cost_usd == pytest.approx((1000 * 3 + 500 * 15) / 1e6)


def test_free_text_variant() -> None:
    fake = Fake(ok(message_body([{"type": "text", "text": "## Summary\nThe user wants a server; net/http chosen."}])))
    s = make(fake, cls=AnthropicFreeTextSummarizer)
    reply = s.summarize(request(previous_summary="Earlier: project set up."))
    body = fake.sent()
    prompt = body["messages"][0]["content"]
    assert "plain prose" in prompt and "777 tokens" in prompt
    assert "<previous-summary>\nEarlier: project set up.\n</previous-summary>" in prompt
    assert prompt.endswith("Conversation:\n[user]: build a server")
    assert "Produce a structured compaction" not in prompt  # the anchor template is not used
    assert body["system"].startswith("You are a context compaction engine")
    assert reply.text == "## Summary\nThe user wants a server; net/http chosen."  # one header only
    anchors, summary = parse_anchors_and_summary(reply.text or "")
    assert all(a.content == NA for a in anchors) and summary.startswith("The user wants")
    plain = make(Fake(ok(message_body([{"type": "text", "text": "Plain text."}]))), cls=AnthropicFreeTextSummarizer)
    assert plain.summarize(request()).text == "## Summary\nPlain text."
    assert plain.summarizer_id.startswith("anthropic_free_text{")


def test_picklable_without_the_client() -> None:
    s = make(Fake(ok()))
    s2 = pickle.loads(pickle.dumps(s))
    assert s2.summarizer_id == s.summarizer_id and s2._api._client is None
