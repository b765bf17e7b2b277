"""Record the shipped provider-side compaction cassettes against a fake local server.

    python -m scripts.provider_compaction_cassettes            # rewrite h9eval/data/cassettes/*.jsonl
    python -m scripts.provider_compaction_cassettes --check    # exit 1 if a rerun would change them

:class:`FakeProviderServer` is a loopback HTTP server that answers, in the providers' documented
shapes, the two requests the policies send through the real SDKs:

* Anthropic ``POST /v1/messages`` with ``context_management.edits = [compact_20260112]`` (beta
  header ``compact-2026-01-12``): past the trigger, a ``compaction`` block first in ``content`` and
  the compaction step as a ``usage.iterations`` entry of type ``compaction``;
* OpenAI ``POST /v1/responses/compact``: ``object: "response.compaction"``, ``output`` = the user
  messages followed by one ``compaction`` item whose ``encrypted_content`` is opaque (here a
  reversible encoding only this server reads back, as only the service reads its own), and the
  pass's ``usage`` (cached input as OpenAI's automatic caching would count it).

The summary is h9eval's offline extractive summary of the conversation (the demo's stand-in), not
a model's; token counts are the request's and summary's bytes / 4. Everything is deterministic, so
recording the same tasks gives byte-identical cassettes (lines sorted by request hash). The
policies are run through :func:`h9eval.runs.run.run_task` with ``record=true`` against the server;
the tasks and windows covered are :data:`COVERAGE`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import tempfile
import threading
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from h9eval.compaction.policies._server import CASSETTE_DIR, shipped_cassette
from h9eval.compaction.prompts import DEFAULT_PROMPTS
from h9eval.compaction.summary import summary_request
from h9eval.core.messages import Message, ToolCall
from h9eval.summarizers.offline import OfflineSummarizer

KINDS = ("anthropic_server_compaction", "openai_server_compaction")
#: (task spec, run_task keyword arguments) the shipped cassettes cover: the demo's synthetic tasks at
#: the demo's window (0.6 of each task's peak) and synthetic:small:0 at 40,000 tokens (the README's example)
COVERAGE: tuple[tuple[str, dict[str, Any]], ...] = (
    *((f"synthetic:small:{s}", {"window_peak_frac": 0.6}) for s in range(4)),
    *((f"synthetic:medium:{s}", {"window_peak_frac": 0.6}) for s in range(2)),
    ("synthetic:small:0", {"window": 40_000}),
)
HISTORY_MODES = ("view", "write_back")
FAKE_KEYS = {"ANTHROPIC_API_KEY": "sk-ant-fake-cassette-recorder", "OPENAI_API_KEY": "sk-fake-cassette-recorder"}
_ENC_PREFIX = "gAAAAB"  # the encrypted items look like Fernet tokens; this server's are zlib + base64


def _summary(messages: list[Message], previous: str | None) -> str:
    req = summary_request(DEFAULT_PROMPTS, messages, None, previous or "", None, (), 60.0)
    text = OfflineSummarizer().summarize(req).text or ""
    return text if previous is None else f"{previous}\n\n{text}"


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


# -- Anthropic --------------------------------------------------------------------------------------
def anthropic_view(body: Mapping[str, Any]) -> tuple[list[Message], str | None]:
    """The conversation a Messages request carries, from its latest compaction block on (the
    server drops the blocks before it), and that block's summary."""
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "".join(b.get("text", "") for b in system)
    msgs: list[Message] = [Message("system", system)] if system else []
    previous: str | None = None
    for m in body.get("messages") or []:
        content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        text, calls = [], []
        for b in content:
            if b["type"] == "compaction":
                msgs, previous, text, calls = msgs[:1] if system else [], b.get("content"), [], []
            elif b["type"] == "text":
                text.append(b["text"])
            elif b["type"] == "tool_use":
                calls.append(ToolCall(b["id"], b["name"], json.dumps(b["input"], sort_keys=True)))
            elif b["type"] == "tool_result":
                msgs.append(Message("user", str(b.get("content", "")), (), b["tool_use_id"], bool(b.get("is_error"))))
        if text or calls:
            msgs.append(Message(m["role"], "".join(text), tuple(calls)))
    return msgs, previous


def anthropic_reply(body: Mapping[str, Any]) -> dict[str, Any]:
    edits = (body.get("context_management") or {}).get("edits") or []
    trigger = next((e["trigger"]["value"] for e in edits if e.get("type") == "compact_20260112"), None)
    n_in = len(json.dumps([body.get("system"), body.get("messages")])) // 4
    content: list[dict[str, Any]] = [{"type": "text", "text": "."}]
    usage: dict[str, Any] = {
        "input_tokens": n_in,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if trigger is not None and n_in >= trigger:
        msgs, previous = anthropic_view(body)
        summary = _summary(msgs, previous)
        content.insert(0, {"type": "compaction", "content": summary})
        n_after = len(json.dumps([body.get("system"), summary])) // 4
        usage = {
            "input_tokens": n_after,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "iterations": [
                {
                    "type": "compaction",
                    "input_tokens": n_in,
                    "output_tokens": len(summary) // 4,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
                {
                    "type": "message",
                    "input_tokens": n_after,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            ],
        }
    return {
        "id": f"msg_fake_{_digest(body)[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": "max_tokens",
        "stop_sequence": None,
        "usage": usage,
        "context_management": {"applied_edits": [{"type": "compact_20260112"}] if len(content) > 1 else []},
    }


# -- OpenAI ---------------------------------------------------------------------------------------
def encrypt(text: str) -> str:
    return _ENC_PREFIX + base64.urlsafe_b64encode(zlib.compress(text.encode(), 9)).decode()


def decrypt(token: str) -> str:
    return zlib.decompress(base64.urlsafe_b64decode(token[len(_ENC_PREFIX) :])).decode()


def openai_view(body: Mapping[str, Any]) -> tuple[list[Message], str | None]:
    """The conversation a compact request carries, and the summary of its compaction item."""
    msgs: list[Message] = [Message("system", body["instructions"])] if body.get("instructions") else []
    previous: str | None = None
    for it in body.get("input") or []:
        t = it.get("type", "message")
        if t == "compaction":
            previous = decrypt(it["encrypted_content"])
        elif t == "function_call":
            msgs.append(Message("assistant", "", (ToolCall(it["call_id"], it["name"], it["arguments"]),)))
        elif t == "function_call_output":
            msgs.append(Message("user", str(it["output"]), (), it["call_id"]))
        else:
            parts = it["content"] if isinstance(it["content"], list) else [{"text": it["content"]}]
            msgs.append(Message(it["role"], "".join(p.get("text", "") for p in parts)))
    return msgs, previous


def openai_reply(body: Mapping[str, Any]) -> dict[str, Any]:
    msgs, previous = openai_view(body)
    summary = _summary(msgs, previous)
    digest = _digest(body)
    users = [
        it for it in body.get("input") or [] if it.get("type", "message") == "message" and it.get("role") == "user"
    ]
    output: list[dict[str, Any]] = [
        {
            "id": f"msg_fake_{digest[:16]}_{i}",
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": it["content"],
        }
        for i, it in enumerate(users)
    ]
    output.append(
        {
            "id": f"cmp_fake_{digest[:24]}",
            "type": "compaction",
            "encrypted_content": encrypt(summary),
            "created_by": "fake-server",
        }
    )
    n_in = len(json.dumps([body.get("instructions"), body.get("input")])) // 4
    # OpenAI caches prompt prefixes automatically: all but the newest item was sent before
    seen = len(json.dumps([body.get("instructions"), (body.get("input") or [])[:-1]])) // 4
    cached = seen // 128 * 128 if seen >= 1024 else 0
    n_out = len(summary) // 4
    return {
        "id": f"resp_fake_{digest[:24]}",
        "object": "response.compaction",
        "created_at": 1767225600,
        "model": body["model"],
        "output": output,
        "usage": {
            "input_tokens": n_in,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens": n_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": n_in + n_out,
        },
    }


# -- the server ------------------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    server: FakeProviderServer

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = self.headers.get("x-api-key") or self.headers.get("authorization", "").removeprefix("Bearer ")
        self.server.seen.append(
            {"path": self.path, "beta": self.headers.get("anthropic-beta"), "key": key, "body": body}
        )
        if not key:
            status, reply = 401, {"type": "error", "error": {"type": "authentication_error", "message": "no key"}}
        elif self.path.endswith("/v1/messages") and "compact-2026-01-12" in (self.headers.get("anthropic-beta") or ""):
            status, reply = 200, anthropic_reply(body)
        elif self.path.endswith("/v1/responses/compact"):
            status, reply = 200, openai_reply(body)
        else:
            status, reply = 404, {"error": {"type": "not_found", "message": f"no route {self.path}"}}
        if self.server.echo_key and status == 200:
            reply["echo"] = f"request made with key {key}"  # a proxy that echoes the key: it must be redacted
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class FakeProviderServer(ThreadingHTTPServer):
    """The fake Anthropic + OpenAI server on 127.0.0.1 (a free port); ``seen`` lists the requests."""

    daemon_threads = True

    def __init__(self, *, echo_key: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[dict[str, Any]] = []
        self.echo_key = echo_key
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def base_url(self, kind: str) -> str:
        """The SDK's ``base_url`` for policy ``kind`` (OpenAI's includes ``/v1``)."""
        return f"{self.url}/v1" if kind.startswith("openai") else self.url


@contextmanager
def fake_provider(*, echo_key: bool = False) -> Iterator[FakeProviderServer]:
    srv = FakeProviderServer(echo_key=echo_key)
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


# -- recording ---------------------------------------------------------------------------------------
def record(out_dir: Path) -> dict[str, Path]:
    """Record the cassette of every provider-side policy over :data:`COVERAGE` into ``out_dir``."""
    from h9eval.runs.run import run_task

    out: dict[str, Path] = {}
    saved = {k: os.environ.get(k) for k in FAKE_KEYS}
    os.environ.update(FAKE_KEYS)
    try:
        with fake_provider() as srv:
            for kind in KINDS:
                path = out_dir / f"{kind}.jsonl"
                params = {"cassette": str(path), "record": True, "base_url": srv.base_url(kind)}
                for task, window in COVERAGE:
                    for mode in HISTORY_MODES:
                        run_task(task, kind, params=params, summarizer=None, history_mode=mode, ledger=False, **window)
                lines = sorted(path.read_text(encoding="utf-8").splitlines()) if path.exists() else []
                path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
                out[kind] = path
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if recording again would change a shipped cassette")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = record(Path(tmp))
        changed = [
            k
            for k, p in fresh.items()
            if not shipped_cassette(k).exists() or shipped_cassette(k).read_bytes() != p.read_bytes()
        ]
        if args.check:
            for k in changed:
                print(
                    f"{shipped_cassette(k)}: differs from a fresh recording; "
                    "rerun python -m scripts.provider_compaction_cassettes"
                )
            return 1 if changed else 0
        CASSETTE_DIR.mkdir(parents=True, exist_ok=True)
        for k, p in fresh.items():
            shipped_cassette(k).write_bytes(p.read_bytes())
            print(f"{shipped_cassette(k)}: {len(p.read_text().splitlines())} replies")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
