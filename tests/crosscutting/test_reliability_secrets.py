"""Secrets written nowhere (issue 20 §3): a key given as a sweep's summarizer parameter, and a
successful reply that echoes the key (stored in the cache, the compactions table, the records
and ``sessions.db`` before the fix)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("anthropic")

from h9eval.compaction.policies import make_policy  # noqa: E402
from h9eval.core.anthropic import is_secret_name, redact_secret_params  # noqa: E402
from h9eval.runs.replay import replay  # noqa: E402
from h9eval.tasks.synthetic import generate  # noqa: E402

from test_secrets import KEY, MODEL, REPLY, Fake, assert_no_secret_in_files, summarizer  # noqa: E402


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def echoing(r: Any) -> Any:
    """A 200 whose summary quotes the key, in plain, upper case and base64."""
    import base64

    text = REPLY + f"\nconfig: ANTHROPIC_API_KEY={KEY} / {KEY.upper()} / {base64.b64encode(KEY.encode()).decode()}"
    body = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 900, "output_tokens": 100},
    }
    return httpx2.Response(200, json=body)


def test_a_reply_echoing_the_key_is_stored_redacted(tmp_path: Path) -> None:
    task = generate("small", seed=0)
    pol = make_policy("progressive", context_window_tokens=16_000)
    fake = Fake(echoing)
    res = replay(task, pol, summarizer=summarizer(fake, tmp_path / "cache.sqlite"), out_dir=tmp_path / "run")
    assert fake.requests and not res.calls["fallback"].any() and res.calls["summarizer_calls"].sum() >= 3
    assert any("[redacted]" in r.summary_text for r in res.records)  # the reply was used, redacted
    assert assert_no_secret_in_files(tmp_path) >= 6  # cache, tables, records, sessions.db, manifest


def test_secret_parameters_never_reach_a_manifest(tmp_path: Path) -> None:
    from h9eval.sweeps.sweep import sweep

    spec = {
        "name": "secrets",
        "tasks": {"specs": ["synthetic:small:0"]},
        "policies": [{"kind": "progressive", "params": {"context_window_tokens": 16000}}],
        "summarizer": {
            "name": "anthropic",
            "params": {"api_key": KEY, "base_url": "http://127.0.0.1:9", "max_retries": 0, "model": MODEL},
        },
    }
    r = sweep(spec, out_dir=tmp_path / "sweep", workers=0, progress=False)
    assert r.ok == 1
    text = (tmp_path / "sweep" / "manifest.json").read_text()
    assert KEY not in text and text.count("[redacted]") >= 3  # spec, resolved spec, the cell
    assert_no_secret_in_files(tmp_path)


def test_secret_names() -> None:
    for n in (
        "api_key",
        "apiKey",
        "ANTHROPIC_API_KEY",
        "auth_token",
        "token",
        "password",
        "client_secret",
        "private_key",
    ):
        assert is_secret_name(n), n
    for n in ("max_tokens", "context_window_tokens", "max_output_tokens", "model", "base_url", "tokenizer"):
        assert not is_secret_name(n), n
    assert redact_secret_params({"a": [{"api_key": "x", "n": 1}], "token": ""}) == {
        "a": [{"api_key": "[redacted]", "n": 1}],
        "token": "",
    }
    json.dumps(redact_secret_params({"t": (1, 2)}))


# -- every encoding of the key (issue: percent-encoded and hex echoes were stored) ------------------
ODD_KEY = "sk-ant-h9eval/SECRET+TEST KEY:123="
"""A key with characters that percent-encoding, JSON and base64 change (real keys have few)."""


def encodings(key: str) -> list[str]:
    """Every form of ``key`` that h9eval must never store or print."""
    import base64
    from urllib.parse import quote, quote_plus

    raw = key.encode()
    b64 = [base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()]
    return [
        key,
        key.upper(),
        key.lower(),
        *b64,
        *(b.rstrip("=") for b in b64),
        quote(key, safe=""),
        quote_plus(key, safe=""),
        "".join(f"%{b:02X}" for b in raw),  # every byte encoded (as some proxies log a header)
        raw.hex(),
        raw.hex().upper(),
        json.dumps(key)[1:-1],
        "".join(f"\\u{ord(c):04x}" for c in key),  # a JSON encoder escaping every character
        quote(b64[0], safe=""),
    ]


def assert_no_encoding_in_files(root: Path, key: str) -> int:
    """Read every file under ``root`` as bytes and look for every encoding of ``key``."""
    needles = {f.encode() for f in encodings(key)}
    n = 0
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            n += 1
            for needle in needles:
                found = needle in data  # not in the assert: pytest would print the file's bytes
                assert not found, f"{needle[:12]!r}... found in {p}"
    return n


@pytest.mark.parametrize("key", [KEY, ODD_KEY])
def test_redact_replaces_every_encoding_of_the_key(key: str) -> None:
    from h9eval.core.anthropic import redact

    for form in encodings(key):
        assert redact(f"got <{form}> back", key) == "got <[redacted]> back", form
    # a mix, character by character (half plain, half percent-encoded), is an encoding too
    mixed = key[:10] + "".join(f"%{b:02x}" for b in key[10:].encode())
    assert redact(mixed, key) == "[redacted]"
    # walking an object keeps its JSON valid, whatever escaped form it held
    from h9eval.core.anthropic import redact_obj

    obj = {"a": [f"x {form} y" for form in encodings(key)], encodings(key)[-2]: 1}
    out = json.loads(json.dumps(redact_obj(obj, key)))
    assert out == {"a": ["x [redacted] y"] * len(encodings(key)), "[redacted]": 1}
    assert redact("ordinary text: sk-ant, 736b, %73", key) == "ordinary text: sk-ant, 736b, %73"


# -- batch errors: redacted before they are cut ------------------------------------------------------
def no_key_prefix(text: str, key: str = KEY) -> bool:
    """Whether ``text`` holds no part of ``key`` of 12 characters or more from its start (a cut key)."""
    return all(key[:n] not in text for n in range(12, len(key) + 1))


def batch_api(respond: Any) -> Any:
    from h9eval.core.anthropic import AnthropicAPI
    from h9eval.core.errors import SummarizerError

    return AnthropicAPI(
        api_key=None,
        who="anthropic summarizer (test)",
        error=SummarizerError,
        max_retries=0,
        base_url="http://fake.invalid",
        http_client=httpx2.Client(transport=httpx2.MockTransport(Fake(respond))),
    )


def test_a_batch_status_echoing_the_key_shows_no_key_prefix(tmp_path: Path) -> None:
    from h9eval.core.errors import SummarizerError
    from h9eval.summarizers.batches import BatchClient, BatchSettings, BatchStore

    def status_echo(r: Any) -> Any:
        # a proxy answering with a status that quotes the key past the 40 characters h9eval shows
        body = {"id": "msgbatch_1", "type": "message_batch", "processing_status": f"unknown (key {KEY})"}
        return httpx2.Response(200, json=body)

    client = BatchClient(
        batch_api(status_echo), BatchStore(tmp_path / "batches"), BatchSettings(), sleep=lambda s: None
    )
    with pytest.raises(SummarizerError, match="unexpected processing_status") as ei:
        client.wait("msgbatch_1")
    text = str(ei.value) + repr(ei.value)
    assert "[redacted]" in text and no_key_prefix(text), text


def test_a_stored_batch_error_echoing_the_key_shows_no_key_prefix(tmp_path: Path) -> None:
    """A result stored unredacted (by an h9eval whose redaction missed an encoding) is redacted
    before its message is cut to 200 characters."""
    from h9eval.core.errors import SummarizerError
    from h9eval.summarizers.batches import BatchingSummarizer, BatchStore

    store = BatchStore(tmp_path / "batches")
    inner = summarizer(Fake(lambda r: httpx2.Response(500)))
    bs = BatchingSummarizer(inner, store, run_id="r1")
    err = {"type": KEY.encode().hex(), "message": "x" * 190 + KEY}
    store.put_result("c" * 64, batch_id="b", paid_by="r1", result={"type": "errored", "error": {"error": err}})
    with pytest.raises(SummarizerError, match="errored") as ei:
        bs._reply("c" * 64, store.result("c" * 64) or {})
    text = str(ei.value)
    assert "[redacted]" in text and no_key_prefix(text) and KEY.encode().hex() not in text, text


# -- an echoed key, in every encoding, lands in no file ----------------------------------------------
def echo_of(key: str) -> str:
    """What a proxy that echoes the key in every encoding puts in a reply."""
    return " / ".join(encodings(key))


def test_an_echo_in_every_encoding_lands_in_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary cache and a replay's tables, records and sessions.db; a batched sweep's
    requests, records and results; both providers' cassettes: written while every reply echoed
    the key percent-encoded, hex, escaped and base64, and scanned as bytes for each form."""
    import scripts.provider_compaction_cassettes as provider
    import tests.fake_anthropic as fake_anthropic
    from h9eval.runs.run import run_task
    from h9eval.sweeps.sweep import sweep

    monkeypatch.setenv("ANTHROPIC_API_KEY", ODD_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", ODD_KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")

    # 1. a replay through the summary cache: every summary ends with the echo
    def echo_reply(r: Any) -> Any:
        body = json.loads(echoing(r).content)
        body["content"][0]["text"] += "\n" + echo_of(r.headers.get("x-api-key") or ODD_KEY)
        body["model"] = f"{MODEL} {echo_of(ODD_KEY)}"
        return httpx2.Response(200, json=body)

    fake = Fake(echo_reply)
    res = replay(
        generate("small", seed=0),
        make_policy("progressive", context_window_tokens=16_000),
        summarizer=summarizer(fake, tmp_path / "cache.sqlite"),
        out_dir=tmp_path / "run",
    )
    assert fake.requests and not res.calls["fallback"].any()
    assert any("[redacted]" in r.summary_text for r in res.records)  # the echo was there, and redacted

    # 2. a batched sweep: every batch result's message echoes
    message_for = fake_anthropic.message_for
    monkeypatch.setattr(
        fake_anthropic, "message_for", lambda params, echo="": message_for(params, echo and " " + echo_of(ODD_KEY))
    )
    with fake_anthropic.serve(echo_key=True) as server:
        spec = {
            "name": "secrets-encoded",
            "tasks": {"specs": ["synthetic:small:2"]},
            "policies": [{"kind": "progressive", "params": {"context_window_tokens": 24000}}],
            "summarizer": {
                "name": "anthropic",
                "params": {"base_url": server.url, "max_retries": 0, "model": MODEL},
                "batch": True,
                "batch_poll_interval_s": 0.01,
            },
        }
        r = sweep(spec, out_dir=tmp_path / "sweep", workers=0, progress=False)
    assert r.ok == 1 and server.keys == {ODD_KEY}
    results = list((tmp_path / "sweep" / "batches" / "results").glob("*.json"))
    assert results and all("[redacted]" in p.read_text() for p in results)

    # 3. both providers' cassettes, recorded against a server whose every reply echoes
    for name in ("anthropic_reply", "openai_reply"):
        reply = getattr(provider, name)
        monkeypatch.setattr(provider, name, lambda body, reply=reply: {**reply(body), "echoed": echo_of(ODD_KEY)})
    with provider.fake_provider() as srv:
        for kind in provider.KINDS:
            params = {"cassette": str(tmp_path / f"{kind}.jsonl"), "record": True, "base_url": srv.base_url(kind)}
            [rec] = run_task(
                "synthetic:small:2", kind, params=params, window=20_000, summarizer=None, out_dir=tmp_path / kind
            )
            assert int(rec.calls["compacted"].sum()) > 0
    assert all("[redacted]" in (tmp_path / f"{kind}.jsonl").read_text() for kind in provider.KINDS)

    assert assert_no_encoding_in_files(tmp_path, ODD_KEY) >= 15


# -- ANTHROPIC_LOG=debug: the SDK's own log would print response headers -----------------------------
_LOGGED_CALL = f"""
import sys
import httpx2
from h9eval.core.errors import H9Error
from h9eval.summarizers.registry import make_summarizer
from h9eval.compaction.summary import SummaryRequest
from h9eval.core.messages import Message


def respond(r):
    # a proxy that echoes the key in a response header (the SDK's debug log prints every header)
    key = r.headers.get("x-api-key") or r.headers.get("authorization", "").removeprefix("Bearer ")
    body = {{"id": "m", "type": "message", "role": "assistant", "model": {MODEL!r},
            "content": [{{"type": "text", "text": "ok"}}], "stop_reason": "end_turn",
            "usage": {{"input_tokens": 1, "output_tokens": 1}}}}
    return httpx2.Response(200, json=body, headers={{"x-echo-key": key}})


req = SummaryRequest(system_prompt="s", user_prompt="u", template="first", previous_compaction=None,
                     conversation="[user]: hi", head=(Message("user", "hi"),), max_output_tokens=10)
try:
    s = make_summarizer("anthropic", model={MODEL!r}, base_url="http://fake.invalid", max_retries=0,
                        http_client=httpx2.Client(transport=httpx2.MockTransport(respond)))
    s.summarize(req)
except H9Error as e:
    print(f"error: {{e}} [{{type(e).__name__}}]", file=sys.stderr)
    sys.exit(2)
print("summarized")
"""


@pytest.mark.parametrize("level", ["debug", "info"])
def test_sdk_logging_never_prints_the_key(tmp_path: Path, level: str) -> None:
    """A subprocess, as the SDK reads ``ANTHROPIC_LOG`` once, when it is imported."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_LOG": level, "PYTHONPATH": os.getcwd()}
    p = subprocess.run([sys.executable, "-c", _LOGGED_CALL], env=env, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert no_key_prefix(out) and "SECRET-TEST-KEY" not in out, out[-2000:]
    # refused, in one line that names the variable and why
    assert p.returncode == 2 and "ANTHROPIC_LOG" in p.stderr and "[ConfigError]" in p.stderr, out[-2000:]
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
