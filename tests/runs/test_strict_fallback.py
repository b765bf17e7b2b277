"""A run that fell back on every summary says so in one warning line, and ``--strict`` makes it
exit 1 (issue 27): with a key and no working API the results would otherwise measure harness9's
truncation fallback while the exit status said all was well. The API is a local server that
refuses the key (401, not retried), never the network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from h9eval.runs.execute import fallback_warning

ROOT = Path(__file__).resolve().parents[2]


class _Refuse(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps(
            {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
        ).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def refusing_api() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Refuse)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_warning_only_when_every_summary_fell_back() -> None:
    assert fallback_warning({"summarizer_calls": 7, "fallbacks": 7, "fallback_causes": {"connection error": 7}}) == (
        "every summary fell back to truncation (7 of 7): connection error (x7); these results measure harness9's "
        "fallback, not the summarizer"
    )
    assert (
        fallback_warning({"summarizer_calls": 7, "fallbacks": 6, "fallback_causes": {"timed out": 6}}) is None
    )  # one got through
    assert fallback_warning({"summarizer_calls": 0, "fallbacks": 0}) is None
    assert fallback_warning({"summarizer_calls": 0, "fallbacks": 3}) is not None  # no summarizer at all


def _run(tmp_path: Path, api: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ANTHROPIC_API_KEY": "sk-ant-FAKE-strict-0123456789",
        "ANTHROPIC_BASE_URL": api,
        "NO_PROXY": "127.0.0.1",
        "no_proxy": "127.0.0.1",
    }
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
    cmd = [
        sys.executable,
        "-m",
        "h9eval",
        "run",
        "--task",
        "synthetic:small",
        "--window",
        "16000",
        "--summarizer",
        "anthropic",
        "--out",
        str(out),
        *extra,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_strict_exits_1_on_a_run_that_fell_back_everywhere(tmp_path: Path, refusing_api: str) -> None:
    plain = _run(tmp_path, refusing_api)
    assert plain.returncode == 0, plain.stderr
    warnings = [x for x in plain.stderr.splitlines() if x.startswith("WARNING:")]
    assert (
        len(warnings) == 1
        and "every summary fell back to truncation" in warnings[0]
        and "HTTP 401 authentication_error" in warnings[0]
    ), plain.stderr
    assert "fallback_causes: {" in plain.stdout and "sk-ant-FAKE" not in plain.stdout + plain.stderr
    strict = _run(tmp_path, refusing_api, "--strict")
    assert strict.returncode == 1 and "every summary fell back" in strict.stderr


def test_a_sweep_names_its_cells_that_fell_back_everywhere_and_strict_fails(tmp_path: Path, refusing_api: str) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "fb"\nwindow = 16000\nhistory_modes = ["view"]\n[tasks]\nsynthetic = [{ preset = "small", seeds = [0] '
        "}]\n"
        '[[policies]]\nkind = "progressive"\nparams = { context_window_tokens = 16000 }\n'
        '[[policies]]\nkind = "observation_masking"\n[summarizer]\nname = "anthropic"\n'
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ANTHROPIC_API_KEY": "sk-ant-FAKE-strict-0123456789",
        "ANTHROPIC_BASE_URL": refusing_api,
        "NO_PROXY": "127.0.0.1",
        "no_proxy": "127.0.0.1",
    }
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "h9eval",
            "sweep",
            str(spec),
            "--workers",
            "0",
            "--strict",
            "--out",
            str(tmp_path / "o"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "2 ok, 0 failed" in r.stdout, r.stdout + r.stderr
    warnings = [x for x in r.stderr.splitlines() if x.startswith("WARNING:")]
    # the masking cell asked for no summary: only harness9's default fell back everywhere
    assert (
        len(warnings) == 1
        and "1 of 2 ok cells fell back on every summary" in warnings[0]
        and "progressive" in warnings[0]
    ), r.stderr
