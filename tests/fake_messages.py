"""A fake Anthropic Messages endpoint on 127.0.0.1 for tests of the real-model path.

``POST /v1/messages`` answers by ``server.mode``: ``ok`` (a text reply whose usage is the request's
UTF-8 bytes / 4 in and ``reply_tokens`` out), ``hang`` (no answer until the server stops, so the
client's timeout cuts it) or ``529`` (overloaded, with a 5 ms ``retry-after-ms``). It counts the
requests it receives and keeps each request's body, so a test checks what was (not) sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeMessages:
    url: str = ""
    mode: str = "ok"
    reply_tokens: int = 60
    requests: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)


def _reply(server: FakeMessages, body: dict[str, Any]) -> dict[str, Any]:
    text_in = str(body.get("system", "")) + json.dumps(body.get("messages", []))
    tin = len(text_in.encode("utf-8")) // 4
    tout = min(server.reply_tokens, int(body.get("max_tokens", server.reply_tokens)))
    text = "## Summary\n" + " ".join(["done"] * max(tout - 3, 1))
    with server.lock:
        server.input_tokens += tin
        server.output_tokens += tout
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": tin, "output_tokens": tout},
    }


@contextmanager
def fake_messages_server() -> Iterator[FakeMessages]:
    server = FakeMessages()

    class _Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server API)
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            with server.lock:
                server.requests += 1
                server.bodies.append(body)
            if server.mode == "hang":
                server.stop.wait(5.0)  # longer than any timeout the tests give; bounded, so the server stops
                return
            status, data = (
                (529, {"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}})
                if server.mode == "529"
                else (200, _reply(server, body))
            )
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("retry-after-ms", "5")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    server.url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        yield server
    finally:
        server.stop.set()
        srv.shutdown()
        srv.server_close()
