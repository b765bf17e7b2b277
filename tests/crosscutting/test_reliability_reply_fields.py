"""The key planted in every field of a Messages reply never reaches a file or the terminal
(issue 28): ``h9eval run`` with the Anthropic summarizer against a fake Messages server on
127.0.0.1 whose replies echo the key in their id, model, stop reason, stop sequence, text and
extra fields, or in place of each usage count. Every file written (summary cache, tables,
records, sessions.db, manifest) and stdout/stderr are read as bytes for the key."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

pytest.importorskip("anthropic")

from h9eval.cli import main  # noqa: E402
from test_secrets import KEY, MODEL, NEEDLES, REPLY, assert_no_secret_in_files, forms  # noqa: E402

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _body(mode: str) -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": 900, "output_tokens": 100}
    body: dict[str, Any] = {
        "id": f"msg_{KEY}",
        "type": "message",
        "role": "assistant",
        "model": f"{MODEL}-{KEY}",
        "content": [{"type": "text", "text": REPLY + f"\nkey: {KEY}", "citations": None}],
        "stop_reason": f"end_turn {KEY}",
        "stop_sequence": KEY,
        "usage": usage,
        "echo": KEY,
    }
    if mode in USAGE_FIELDS:
        usage[mode] = KEY  # a usage count that is the key itself
    elif mode == "usage_float":
        usage["input_tokens"] = 900.5
    return body


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, str]]]:
    state = {"mode": "strings"}

    class _Fake(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server API)
            self.rfile.read(int(self.headers.get("content-length") or 0))
            data = json.dumps(_body(state["mode"])).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", state
    finally:
        srv.shutdown()
        srv.server_close()


def _run(
    tmp_path: Path, base_url: str, name: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> tuple[int, bytes]:
    """``h9eval run`` in this process (the CLI's own entry point); its exit code and everything it printed."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.delenv("H9EVAL_DEBUG", raising=False)
    rc = main(
        [
            "run",
            "--task",
            "synthetic:small:0",
            "--window",
            "16000",
            "--summarizer",
            "anthropic",
            "--summarizer-cache",
            str(tmp_path / "cache.sqlite"),
            "--out",
            str(tmp_path / name),
        ]
    )
    out, err = capfd.readouterr()
    return rc, (out + err).encode()


def _no_key(data: bytes, where: str) -> None:
    for needle in NEEDLES:
        for f in forms(needle):
            assert f not in data, f"{needle!r} found in {where}"


def test_the_key_in_every_string_field_of_a_reply_is_stored_redacted(
    tmp_path: Path,
    server: tuple[str, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    url, state = server
    state["mode"] = "strings"
    rc, printed = _run(tmp_path, url, "run", monkeypatch, capfd)
    assert rc == 0, printed
    _no_key(printed, "stdout/stderr")
    calls = pq.read_table(tmp_path / "run" / "calls.parquet").to_pandas()
    assert calls["summarizer_calls"].sum() >= 3 and not calls["fallback"].any()  # the replies were used
    assert assert_no_secret_in_files(tmp_path) >= 8
    cache = b"".join(p.read_bytes() for p in tmp_path.glob("cache.sqlite*"))  # its WAL too (the store is still open)
    assert b"[redacted]" in cache and MODEL.encode() in cache  # the model field was stored, redacted


@pytest.mark.parametrize("field", [*USAGE_FIELDS, "usage_float"])
def test_a_bad_usage_count_is_a_typed_fallback_naming_the_field_not_the_value(
    tmp_path: Path,
    server: tuple[str, dict[str, str]],
    field: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    url, state = server
    state["mode"] = field
    rc, printed = _run(tmp_path, url, "run", monkeypatch, capfd)
    assert rc == 0, printed
    _no_key(printed, "stdout/stderr")
    assert assert_no_secret_in_files(tmp_path) >= 6
    calls = pq.read_table(tmp_path / "run" / "calls.parquet").to_pandas()
    causes = set(calls.loc[calls["fallback"], "fallback_cause"])
    name = "input_tokens" if field == "usage_float" else field
    got = "a float" if field == "usage_float" else "a str"
    assert causes and all(f"usage.{name} is not a non-negative integer (got {got})" in c for c in causes), causes
    assert all("SummarizerError" in c or "malformed response" in c for c in causes), causes
    manifest = (tmp_path / "run" / "manifest.json").read_text()
    assert f"usage.{name}" in manifest
