"""``--request-timeout-s`` / ``--max-retries`` and a sweep spec's ``request_timeout_s`` /
``max_retries`` (issue 28) reach the SDK client of the Anthropic summarizer: against a fake
Messages server on 127.0.0.1 that hangs (the timeout cuts each attempt), answers 529 (each
summary makes exactly ``max_retries + 1`` requests) or 429 with ``retry-after: 3600`` (above
``max_retry_after_s``: the summary falls back at once, naming the cap)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

pytest.importorskip("anthropic")

from h9eval.cli import main  # noqa: E402
from h9eval.core.anthropic import CallLimits  # noqa: E402
from h9eval.core.errors import ConfigError  # noqa: E402

KEY = "sk-ant-h9eval-limits-test-key"


@pytest.fixture
def server() -> Iterator[dict[str, Any]]:
    state: dict[str, Any] = {"mode": "hang", "requests": 0, "url": ""}
    lock = threading.Lock()
    stop = threading.Event()

    class _Fake(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server API)
            self.rfile.read(int(self.headers.get("content-length") or 0))
            with lock:
                state["requests"] += 1
            if state["mode"] == "hang":
                stop.wait(3.0)  # longer than any timeout the tests give; bounded, so the server stops
                return
            if state["mode"] == "429":
                data = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}).encode()
                self.send_response(429)
                self.send_header("content-type", "application/json")
                self.send_header("retry-after", "3600")  # the SDK alone would sleep an hour
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            data = json.dumps(
                {"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}}
            ).encode()
            self.send_response(529)
            self.send_header("content-type", "application/json")
            self.send_header("retry-after-ms", "5")  # the SDK honours it: retries without its backoff
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        yield state
    finally:
        stop.set()
        srv.shutdown()
        srv.server_close()


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def _run(tmp_path: Path, server: dict[str, Any], monkeypatch: pytest.MonkeyPatch, *flags: str) -> Any:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server["url"])
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "--task",
                "synthetic:small:0",
                "--window",
                "16000",
                "--summarizer",
                "anthropic",
                "--out",
                str(out),
                "--breaker-failures",
                "0",
                *flags,
            ]
        )
        == 0
    )  # every summary is sent: the breaker has its own tests
    return pq.read_table(out / "calls.parquet").to_pandas()


def test_the_request_timeout_cuts_a_hung_endpoint(
    tmp_path: Path, server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    t0 = time.monotonic()
    calls = _run(tmp_path, server, monkeypatch, "--request-timeout-s", "0.2", "--max-retries", "0")
    causes = calls.loc[calls["fallback"], "fallback_cause"]
    assert len(causes) >= 2 and all("timed out after 0.2 s per attempt (0 retries)" in c for c in causes), set(causes)
    n = int(calls["summarizer_calls"].sum())
    assert server["requests"] == n  # no retry
    assert time.monotonic() - t0 < 60  # 60 s x 3 attempts per summary without the options


def _within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()``, failing the test when it has not returned after ``seconds`` (it runs in a daemon
    thread: a call that sleeps for an hour must fail the test, not hang it)."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # handed to the test's thread
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still waiting after {seconds:g} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_a_retry_after_above_the_cap_falls_back_at_once_naming_it(
    tmp_path: Path, server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    server["mode"] = "429"
    t0 = time.monotonic()
    calls = _within(60, lambda: _run(tmp_path, server, monkeypatch))  # max_retries 2, cap 60 s: the defaults
    causes = calls.loc[calls["fallback"], "fallback_cause"]
    want = "rate limited: retry-after 3600 s exceeds max_retry_after_s=60; not retried"
    assert len(causes) >= 2 and all(want in c for c in causes), set(causes)
    assert server["requests"] == int(calls["summarizer_calls"].sum())  # none retried
    assert time.monotonic() - t0 < 30


def test_a_sweep_spec_sets_the_retry_after_cap(tmp_path: Path, server: dict[str, Any]) -> None:
    from h9eval.sweeps.sweep import sweep

    server["mode"] = "429"
    spec = {
        "name": "cap",
        "window": 16000,
        "tasks": ["synthetic:small:0"],
        "max_retry_after_s": 5,
        "breaker_failures": 0,
        "policies": [{"kind": "progressive", "params": {"context_window_tokens": 16000}}],
        "summarizer": {"name": "anthropic", "params": {"base_url": server["url"]}},
    }
    r = _within(60, lambda: sweep(spec, out_dir=tmp_path / "a", workers=0, progress=False))
    calls = r.load().calls
    causes = calls.loc[calls["fallback"], "fallback_cause"]
    assert len(causes) >= 2 and causes.str.contains("retry-after 3600 s exceeds max_retry_after_s=5;").all()
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["spec_resolved"]["max_retry_after_s"] == 5 and manifest["cells"][0]["max_retry_after_s"] == 5


@pytest.mark.parametrize("retries", [0, 2])
def test_max_retries_is_the_number_of_extra_attempts(
    tmp_path: Path, server: dict[str, Any], monkeypatch: pytest.MonkeyPatch, retries: int
) -> None:
    server["mode"] = "529"
    calls = _run(tmp_path, server, monkeypatch, "--max-retries", str(retries))
    n = int(calls["summarizer_calls"].sum())
    assert n >= 2 and calls["fallback"].sum() >= 2
    assert server["requests"] == n * (retries + 1)


def test_a_sweep_spec_and_the_command_line_set_the_limits(tmp_path: Path, server: dict[str, Any]) -> None:
    from h9eval.results.store import load_results
    from h9eval.sweeps.sweep import sweep

    server["mode"] = "529"
    spec = {
        "name": "limits",
        "window": 16000,
        "tasks": ["synthetic:small:0"],
        "max_retries": 1,
        "breaker_failures": 0,
        "policies": [{"kind": "progressive", "params": {"context_window_tokens": 16000}}],
        "summarizer": {"name": "anthropic", "params": {"base_url": server["url"]}},
    }
    r = sweep(spec, out_dir=tmp_path / "a", workers=0, progress=False)
    res = load_results(tmp_path / "a")
    n = int(res.calls["summarizer_calls"].sum())
    assert r.ok == 1 and n >= 2 and server["requests"] == 2 * n
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["spec_resolved"]["max_retries"] == 1 and manifest["spec_resolved"]["request_timeout_s"] is None
    assert manifest["cells"][0]["max_retries"] == 1

    server["requests"] = 0  # the command line's value replaces the spec's
    sweep(spec, out_dir=tmp_path / "b", workers=0, progress=False, call_limits=CallLimits(max_retries=0))
    assert server["requests"] == int(load_results(tmp_path / "b").calls["summarizer_calls"].sum())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("request_timeout_s", 0),
        ("request_timeout_s", -1.0),
        ("request_timeout_s", float("inf")),
        ("request_timeout_s", True),
        ("max_retries", -1),
        ("max_retries", 11),
        ("max_retries", 1.5),
        ("max_retry_after_s", -1),
        ("max_retry_after_s", 3601),
        ("max_retry_after_s", float("nan")),
    ],
)
def test_bad_limits_are_refused_naming_the_field(
    tmp_path: Path, field: str, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=rf"^{field} must be"):
        CallLimits(**{field: value})
    from h9eval.sweeps.spec import load_spec

    with pytest.raises(ConfigError, match=rf"request limits: {field} must be"):
        load_spec({"name": "x", "tasks": ["synthetic:small:0"], "policies": [{"kind": "keep_all"}], field: value})
    if not isinstance(value, bool) and (field != "max_retries" or float(value).is_integer()):
        flag = "--" + field.replace("_", "-")
        assert (
            main(
                [
                    "run",
                    "--task",
                    "synthetic:small:0",
                    "--summarizer",
                    "anthropic",
                    flag,
                    str(value),
                    "--out",
                    str(tmp_path / "o"),
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{field} must be" in err, err


def test_a_limit_given_twice_with_two_values_is_refused() -> None:
    from h9eval.summarizers.registry import build_summarizer

    with pytest.raises(ConfigError, match=r"summarizer 'anthropic': max_retries=3 conflicts"):
        build_summarizer("anthropic", call_limits=CallLimits(max_retries=1), max_retries=3)
    assert build_summarizer("offline", call_limits=CallLimits(max_retries=1)) is not None  # makes no request: ignored
