"""A fake Anthropic API on 127.0.0.1 that speaks the Messages and the Message Batches endpoints,
for tests that run the real ``anthropic`` SDK (in this process or a subprocess) against it.

Endpoints (shapes as the API documents them):

* ``POST /v1/messages``: a message whose text is an anchored summary, with usage computed from
  the request (input: body bytes / 4; output: 100), the same for the same body.
* ``POST /v1/messages/batches``: a ``message_batch`` ``in_progress``; its requests are kept.
* ``GET /v1/messages/batches/{id}``: ``in_progress`` for the first ``polls_before_end``
  retrieves (and while ``hold`` is set), then ``ended`` with ``request_counts`` and a
  ``results_url``.
* ``POST /v1/messages/batches/{id}/cancel``: the batch as it is (its id listed in ``cancels``).
* ``GET /v1/messages/batches/{id}/results``: JSONL, one ``{"custom_id", "result"}`` per request,
  in reverse order of submission (the API guarantees no order); ``result`` is ``succeeded``
  with the message ``POST /v1/messages`` would give, or ``errored`` for a custom id in
  ``errored``.

With ``echo_key`` every reply's text ends with the key the request was sent with. ``hang``
names the endpoints (``"create"``, ``"retrieve"``) that answer nothing for 3 s (longer than any
request timeout the tests give), then drop the connection.
``cut_results = N`` cuts the next results download after ``N`` bytes (the connection closed
before the body its ``content-length`` announced). ``FakeAnthropic.creates`` lists every batch
create (its custom ids), ``messages`` every direct call, ``keys`` every key sent; ``requests``
counts all HTTP requests.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = (
    "## Anchors\n\n### User Intent\nFix the bug\n\n### Execution Progress\n- Read code\n\n"
    "### Key Decisions\n- Keep API\n\n### Tried Solutions\n- N/A\n\n### Next Steps\n- Test\n\n"
    "## Summary\nOngoing ({tag})."
)
CREATED_AT = "2026-01-01T00:00:00Z"
EXPIRES_AT = "2026-01-02T00:00:00Z"


def message_for(params: dict[str, Any], echo: str = "") -> dict[str, Any]:
    """The message the fake answers ``params`` with (deterministic in the body); ``echo`` is
    put in its text (a proxy that echoes the key it was sent: h9eval must redact it)."""
    blob = json.dumps(params, sort_keys=True, separators=(",", ":")).encode()
    tag = hashlib.sha256(blob).hexdigest()[:8]
    return {
        "id": f"msg_{tag}",
        "type": "message",
        "role": "assistant",
        "model": str(params.get("model", "")),
        "content": [{"type": "text", "text": REPLY.format(tag=tag) + echo}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": max(1, len(blob) // 4), "output_tokens": 100},
    }


class FakeAnthropic:
    def __init__(self, *, polls_before_end: int = 1, echo_key: bool = False) -> None:
        self.polls_before_end = polls_before_end
        self.echo_key = echo_key
        self.hold = False
        self.hang: set[str] = set()
        self.stop = threading.Event()
        self.cut_results: int | None = None  # the next results download stops after this many bytes
        self.errored: set[str] = set()
        self.batches: dict[str, dict[str, Any]] = {}
        self.creates: list[list[str]] = []
        self.messages: list[dict[str, Any]] = []
        self.retrieves = 0
        self.cancels: list[str] = []
        self.requests = 0
        self.keys: set[str] = set()
        self.url = ""
        self.lock = threading.Lock()

    def batch_body(self, batch_id: str) -> dict[str, Any]:
        b = self.batches[batch_id]
        ended = not self.hold and b["polls"] > self.polls_before_end
        n = len(b["requests"])
        n_err = sum(1 for r in b["requests"] if r["custom_id"] in self.errored)
        return {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": 0 if ended else n,
                "succeeded": n - n_err if ended else 0,
                "errored": n_err if ended else 0,
                "canceled": 0,
                "expired": 0,
            },
            "created_at": CREATED_AT,
            "expires_at": EXPIRES_AT,
            "ended_at": CREATED_AT if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{batch_id}/results" if ended else None,
        }

    def results_lines(self, batch_id: str) -> bytes:
        out = []
        for r in reversed(self.batches[batch_id]["requests"]):
            cid = r["custom_id"]
            if cid in self.errored:
                result: dict[str, Any] = {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": "fake: this request is invalid"},
                    },
                }
            else:
                echo = f" (key {self.batches[batch_id]['key']})" if self.echo_key else ""
                result = {"type": "succeeded", "message": message_for(r["params"], echo)}
            out.append(json.dumps({"custom_id": cid, "result": result}))
        return ("\n".join(out) + "\n").encode()


def _handler(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _key(self) -> str:
            key = self.headers.get("x-api-key") or self.headers.get("authorization", "").removeprefix("Bearer ")
            with fake.lock:
                fake.requests += 1
                fake.keys.add(key)
            return key

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            key = self._key()
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            path = self.path.split("?")[0]
            if path == "/v1/messages/batches" and "create" in fake.hang:
                fake.stop.wait(3.0)  # bounded, so the server stops
                return
            parts = path.strip("/").split("/")
            if len(parts) == 5 and parts[:3] == ["v1", "messages", "batches"] and parts[4] == "cancel":
                if parts[3] in fake.batches:
                    with fake.lock:
                        fake.cancels.append(parts[3])
                        data = fake.batch_body(parts[3])
                    self._send(200, json.dumps(data).encode())
                    return
            if path == "/v1/messages":
                with fake.lock:
                    fake.messages.append(body)
                self._send(200, json.dumps(message_for(body, f" (key {key})" if fake.echo_key else "")).encode())
            elif path == "/v1/messages/batches":
                with fake.lock:
                    batch_id = f"msgbatch_fake{len(fake.batches):04d}"
                    fake.batches[batch_id] = {"requests": body["requests"], "polls": 0, "key": key}
                    fake.creates.append([r["custom_id"] for r in body["requests"]])
                    data = fake.batch_body(batch_id)
                self._send(200, json.dumps(data).encode())
            else:
                self._send(
                    404, json.dumps({"type": "error", "error": {"type": "not_found_error", "message": path}}).encode()
                )

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._key()
            parts = self.path.split("?")[0].strip("/").split("/")
            if parts[:3] != ["v1", "messages", "batches"] or len(parts) not in (4, 5) or parts[3] not in fake.batches:
                self._send(
                    404,
                    json.dumps({"type": "error", "error": {"type": "not_found_error", "message": self.path}}).encode(),
                )
                return
            batch_id = parts[3]
            if len(parts) == 4 and "retrieve" in fake.hang:
                with fake.lock:
                    fake.retrieves += 1
                fake.stop.wait(3.0)
                return
            with fake.lock:
                if len(parts) == 5:
                    body = fake.results_lines(batch_id)
                    if fake.cut_results is not None:  # a dropped connection: fewer bytes than content-length says
                        cut, fake.cut_results = fake.cut_results, None
                        self.send_response(200)
                        self.send_header("content-type", "application/binary")
                        self.send_header("content-length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body[:cut])
                        self.close_connection = True
                        return
                    self._send(200, body, "application/binary")
                    return
                fake.retrieves += 1
                fake.batches[batch_id]["polls"] += 1
                data = fake.batch_body(batch_id)
            self._send(200, json.dumps(data).encode())

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serve(**kw: Any) -> Iterator[FakeAnthropic]:
    """A running :class:`FakeAnthropic` (``fake.url`` its base URL), stopped on exit."""
    fake = FakeAnthropic(**kw)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    srv.daemon_threads = True
    fake.url = f"http://127.0.0.1:{srv.server_address[1]}"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield fake
    finally:
        fake.stop.set()
        srv.shutdown()
        srv.server_close()
