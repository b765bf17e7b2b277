"""The circuit breaker (``--breaker-failures``, a spec's ``breaker_failures``): after N consecutive
timeouts or 5xx the Anthropic client stops calling for the rest of the run, every later summary
falls back at once, and the calls and runs tables count the refused summaries. Against the fake
Messages server on 127.0.0.1, whose received requests are counted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

pytest.importorskip("anthropic")

from h9eval.cli import main  # noqa: E402
from h9eval.core.anthropic import CallLimits, CircuitBreaker  # noqa: E402
from h9eval.core.errors import ConfigError  # noqa: E402
from tests.fake_messages import FakeMessages, fake_messages_server  # noqa: E402

KEY = "sk-ant-h9eval-breaker-test-key"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessages]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with fake_messages_server() as s:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        yield s


def _run(tmp_path: Path, *flags: str) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / "run"
    args = ["run", "--task", "synthetic:small:0", "--window", "16000", "--summarizer", "anthropic", "--out", str(out)]
    assert main([*args, *flags]) == 0
    summary = json.loads((out / "manifest.json").read_text()).get("summary", {})
    return pq.read_table(out / "calls.parquet").to_pandas(), summary


def test_a_hung_server_stops_being_called_after_the_breaker_trips(tmp_path: Path, server: FakeMessages) -> None:
    server.mode = "hang"
    calls, _ = _run(tmp_path, "--request-timeout-s", "0.2", "--max-retries", "0", "--breaker-failures", "2")
    asked = int(calls["summarizer_calls"].sum())
    skipped = int(calls["summarizer_breaker_skips"].sum())
    assert asked >= 4, "the run must ask for more summaries than the breaker lets through"
    assert server.requests == 2  # two timed-out calls, then nothing
    assert skipped == asked - 2
    after = calls[calls["summarizer_breaker_skips"] > 0]
    assert after["fallback"].all() and after["fallback_cause"].str.contains("circuit breaker open after 2").all()


def test_without_the_breaker_every_summary_is_sent(tmp_path: Path, server: FakeMessages) -> None:
    server.mode = "hang"
    calls, _ = _run(tmp_path, "--request-timeout-s", "0.2", "--max-retries", "0", "--breaker-failures", "0")
    assert server.requests == int(calls["summarizer_calls"].sum()) >= 4
    assert int(calls["summarizer_breaker_skips"].sum()) == 0


def test_5xx_counts_once_per_call_after_its_retries(tmp_path: Path, server: FakeMessages) -> None:
    server.mode = "529"
    calls, _ = _run(tmp_path, "--max-retries", "1")  # the default breaker: 3 failed calls
    assert server.requests == 3 * 2
    assert int(calls["summarizer_breaker_skips"].sum()) == int(calls["summarizer_calls"].sum()) - 3


def test_a_sweep_spec_sets_the_breaker_and_the_runs_table_counts_the_skips(
    tmp_path: Path, server: FakeMessages
) -> None:
    from h9eval.results.store import load_results
    from h9eval.sweeps.sweep import sweep

    server.mode = "529"
    spec = {
        "name": "breaker",
        "window": 16000,
        "tasks": ["synthetic:small:0"],
        "max_retries": 0,
        "breaker_failures": 1,
        "policies": [{"kind": "progressive"}],
        "summarizer": {"name": "anthropic"},
    }
    sweep(spec, out_dir=tmp_path / "s", workers=0, progress=False)
    res = load_results(tmp_path / "s")
    assert server.requests == 1
    n = int(res.calls["summarizer_calls"].sum())
    assert n >= 2 and int(res.runs["summarizer_breaker_skips"].iloc[0]) == n - 1


def test_breaker_state_resets_on_an_answer() -> None:
    b = CircuitBreaker(failures=2)
    b.failed()
    b.answered()
    b.failed()
    assert not b.open
    b.failed()
    assert b.open
    never = CircuitBreaker(failures=0)
    for _ in range(50):
        never.failed()
    assert not never.open


@pytest.mark.parametrize("value", [-1, 1001, 1.5, True])
def test_bad_breaker_values_are_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^breaker_failures must be an integer in \[0, 1000\]"):
        CallLimits(breaker_failures=value)
