"""The API key never reaches a file, a log or an error message (issue 9).

A recognisable fake key is put in ``ANTHROPIC_API_KEY``; the Anthropic summarizer runs through
a fake transport in a replay with ``out_dir`` and a response cache, then a tiny sweep (with the
Anthropic summarizer pointed at a closed loopback port, so every summary falls back) and its
report. Every file written under ``tmp_path`` (parquet, SQLite and its ``-wal``/``-shm``,
JSONL, JSON, HTML, Markdown, PNG, logs) is then read as bytes: neither the key nor a distinctive
part of it may appear, in UTF-8, UTF-16 or base64. Error messages of a 401 that echoes the key
are checked too.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("anthropic")

from h9eval.compaction.policies import make_policy
from h9eval.core.errors import SummarizerError  # noqa: E402
from h9eval.runs.replay import replay  # noqa: E402
from h9eval.summarizers.registry import make_summarizer  # noqa: E402
from h9eval.tasks.synthetic import generate  # noqa: E402

KEY = "sk-ant-h9eval-SECRET-TEST-KEY-123"
NEEDLES = (KEY, "SECRET-TEST-KEY", "h9eval-SECRET")  # the key and distinctive parts of it
MODEL = "claude-haiku-4-5"

REPLY = (
    "## Anchors\n\n### User Intent\nFix the bug\n\n### Execution Progress\n- Read code\n\n"
    "### Key Decisions\n- Keep API\n\n### Tried Solutions\n- N/A\n\n### Next Steps\n- Test\n\n## Summary\nOngoing."
)


def forms(s: str) -> list[bytes]:
    b = s.encode()
    return [
        b,
        s.encode("utf-16-le"),
        s.encode("utf-16-be"),
        base64.b64encode(b)[:-4] if len(b) % 3 else base64.b64encode(b),
    ]


def assert_no_secret_in_files(root: Path) -> int:
    """Read every file under ``root`` as bytes; returns how many were checked."""
    n = 0
    for d, _, files in os.walk(root, followlinks=False):
        for name in files:
            p = Path(d) / name
            if p.is_symlink():
                continue
            data = p.read_bytes()
            n += 1
            for needle in NEEDLES:
                for f in forms(needle):
                    assert f not in data, f"{needle!r} found in {p}"
    return n


class Fake:
    def __init__(self, respond: Any) -> None:
        self.respond = respond
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        return self.respond(request)


def ok(r: Any) -> Any:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": REPLY}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 900, "output_tokens": 100},
    }
    return httpx2.Response(200, json=body)


def sent_key(r: Any) -> str:
    # SDK 2.x sends "authorization: Bearer <key>"; older ones sent "x-api-key".
    return r.headers.get("x-api-key") or r.headers.get("authorization", "").removeprefix("Bearer ")


def echo_401(r: Any) -> Any:
    # A proxy that echoes the key it was given (it happens): the error must be redacted.
    key = sent_key(r)
    assert key == KEY
    body = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key: {key}"}}
    return httpx2.Response(401, json=body)


def summarizer(fake: Fake, cache: Path | None = None) -> Any:
    # No api_key argument: the key comes from the environment, as it would for a user.
    return make_summarizer(
        "anthropic",
        cache=cache,
        model=MODEL,
        base_url="http://fake.invalid",
        http_client=httpx2.Client(transport=httpx2.MockTransport(fake)),
        max_retries=0,
    )


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def test_key_never_written_by_replay_sweep_or_report(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)  # the SDK logs requests at debug level: they must not carry the key either
    task = generate("small", seed=0)
    policy = make_policy("progressive", context_window_tokens=16_000)

    # 1. A replay with out_dir and a response cache, summaries answered.
    fake = Fake(ok)
    res = replay(
        task, policy, summarizer=summarizer(fake, tmp_path / "cache" / "summaries.sqlite"), out_dir=tmp_path / "run"
    )
    assert res.calls["summarizer_calls"].sum() >= 3 and not res.calls["fallback"].any()
    # The key was really in use (else this test proves nothing).
    assert fake.requests and all(sent_key(r) == KEY for r in fake.requests)
    # 2. The same with the cache warm (hits) and with every call failing with a key-echoing 401.
    replay(
        task,
        policy,
        summarizer=summarizer(Fake(ok), tmp_path / "cache" / "summaries.sqlite"),
        out_dir=tmp_path / "run-cached",
    )
    bad = replay(
        task,
        policy,
        summarizer=summarizer(Fake(echo_401), tmp_path / "cache" / "401.sqlite"),
        out_dir=tmp_path / "run-401",
    )
    assert bad.calls["fallback"].sum() == bad.calls["summarizer_calls"].sum() > 0  # every summary failed

    # 3. A tiny sweep with the Anthropic summarizer (a closed loopback port: connection refused,
    #    fallback) and its report: manifests hold specs, provenance and environment details.
    try:
        from h9eval.sweeps.sweep import sweep
    except ImportError:  # pragma: no cover - sweep not installed
        sweep = None  # type: ignore[assignment]
    if sweep is not None:
        spec = {
            "name": "secrets",
            "tasks": {"specs": ["synthetic:small:0"]},
            "policies": [{"kind": "progressive", "params": {"context_window_tokens": 16000}}],
            "summarizer": {"name": "anthropic", "params": {"max_retries": 0, "model": MODEL}},
            # the stored fields of the real-model path: the endpoint (spec_resolved, the cells), the
            # breaker's skips and messages (calls, runs), the spending ledger (spend.json)
            "base_url": "http://127.0.0.1:9",
            "breaker_failures": 1,
            "max_cost_usd": 5.0,
        }
        r = sweep(spec, out_dir=tmp_path / "sweep", workers=0, progress=False)
        assert r.ok == 1, r.failures
        assert (tmp_path / "sweep" / "spend.json").exists() and int(r.load().runs["summarizer_breaker_skips"].sum()) > 0
        try:
            from h9eval.analysis.report import write_report
        except ImportError:  # pragma: no cover
            write_report = None  # type: ignore[assignment]
        if write_report is not None:
            paths = write_report(tmp_path / "sweep", tmp_path / "report", n_boot=50)
            assert Path(paths.html).exists()

    # 4. Every file written, as bytes; also what was printed and logged.
    n = assert_no_secret_in_files(tmp_path)
    kinds = {p.suffix for p in tmp_path.rglob("*") if p.is_file()}
    assert {".parquet", ".jsonl", ".json", ".sqlite", ".db"} <= kinds, kinds
    if (tmp_path / "report").exists():
        assert {".html", ".md", ".png"} <= kinds, kinds
    assert n >= 15
    print(f"\nsecrets: {n} files checked ({', '.join(sorted(kinds))})")
    out, err = capsys.readouterr()
    for needle in NEEDLES:
        assert needle not in out + err
        leaks = [
            f"{rec.name}:{rec.levelname}: {rec.getMessage()[:300]}"
            for rec in caplog.records
            if needle in rec.getMessage()
        ]
        assert not leaks, leaks[:3]


def test_sqlite_wal_files_hold_no_key(tmp_path: Path) -> None:
    """Checked while the cache connection is still open, so its -wal file exists."""
    from h9eval.summarizers.cache import CachedSummarizer

    s = summarizer(Fake(ok), tmp_path / "c.sqlite")
    assert isinstance(s, CachedSummarizer)
    replay(
        generate("small", seed=0),
        make_policy("progressive", context_window_tokens=16_000),
        summarizer=s,
        out_dir=tmp_path / "o",
    )
    names = {p.name for p in tmp_path.rglob("*")}
    assert "c.sqlite-wal" in names
    assert_no_secret_in_files(tmp_path)


def test_error_messages_never_carry_the_key() -> None:
    from h9eval.compaction.summary import SummaryRequest
    from h9eval.core.messages import Message

    s = summarizer(Fake(echo_401))
    req = SummaryRequest(
        system_prompt="sys",
        user_prompt="user",
        template="first",
        previous_compaction=None,
        conversation="[user]: hi",
        head=(Message("user", "hi"),),
        max_output_tokens=100,
    )
    with pytest.raises(SummarizerError) as ei:
        s.summarize(req)
    e = ei.value
    text = "".join([str(e), repr(e), json.dumps(e.args, default=str)])
    assert "HTTP 401 authentication_error" in str(e) and "[redacted]" in str(e)
    for needle in NEEDLES:
        assert needle not in text
    assert e.__cause__ is None and (e.__context__ is None or e.__suppress_context__)
    # The summarizer's own repr, id and pickled state for worker processes.

    for needle in NEEDLES:
        assert needle not in repr(s) and needle not in getattr(s, "summarizer_id", "")
    # Pickling for worker processes carries the key on purpose (the worker must call the API);
    # it is never written to a file: the sweep pickles cells, not summarizers.


N_SECRET_NEEDLES = len(NEEDLES)


def test_key_never_written_by_a_batched_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Message Batches path (issue 33): requests, batch records, results and the tables of a
    batched sweep, against a fake server whose replies echo the key (interrupted while polling
    once, so the in-flight record is checked too)."""
    from h9eval.summarizers.batches import BatchClient
    from h9eval.sweeps.sweep import sweep
    from tests.fake_anthropic import serve

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with serve(echo_key=True) as fake:
        spec = {
            "name": "secrets-batched",
            "tasks": {"specs": ["synthetic:small:2"]},
            "policies": [{"kind": "progressive", "params": {"context_window_tokens": 24000}}],
            "summarizer": {
                "name": "anthropic",
                "params": {"base_url": fake.url, "max_retries": 0, "model": MODEL},
                "batch": True,
                "batch_poll_interval_s": 0.01,
            },
        }
        with monkeypatch.context() as m:
            m.setattr(BatchClient, "wait", lambda self, batch_id: (_ for _ in ()).throw(KeyboardInterrupt()))
            with pytest.raises(KeyboardInterrupt):
                sweep(spec, out_dir=tmp_path / "sweep", workers=0, progress=False)
        assert_no_secret_in_files(tmp_path)  # the in-flight record and the waiting requests
        r = sweep(spec, out_dir=tmp_path / "sweep", workers=0, progress=False)
    assert r.ok == 1 and fake.creates and fake.keys == {KEY}  # the key was really in use
    assert r.load().calls["summarizer_batched_calls"].sum() == 2
    results = list((tmp_path / "sweep" / "batches" / "results").glob("*.json"))
    assert results and all("[redacted]" in p.read_text() for p in results)  # the echo was there, and redacted
    n = assert_no_secret_in_files(tmp_path)
    folders = {p.name for p in (tmp_path / "sweep" / "batches").iterdir()}
    assert n >= 8 and {"requests", "submitted", "results"} <= folders
