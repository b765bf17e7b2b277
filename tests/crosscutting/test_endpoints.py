"""Endpoints and models of the summarizer, the llm scorer and the live agent, from the command line,
a sweep spec and ``ANTHROPIC_BASE_URL`` (precedence: command line, spec, environment, default), checked
by what the fake Messages server on 127.0.0.1 receives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("anthropic")

from h9eval.cli import main  # noqa: E402
from h9eval.core.anthropic import CallLimits  # noqa: E402
from h9eval.core.errors import ConfigError  # noqa: E402
from tests.fake_messages import FakeMessages, fake_messages_server  # noqa: E402

KEY = "sk-ant-h9eval-endpoint-test-key"
RUN = ["run", "--task", "synthetic:small:0", "--window", "16000", "--summarizer", "anthropic"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessages]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with fake_messages_server() as s:
        yield s


def test_base_url_and_model_from_the_command_line(
    tmp_path: Path, server: FakeMessages, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*RUN, "--out", str(tmp_path / "o"), "--base-url", server.url, "--summarizer-model", "qwen3-8b"]) == 0
    assert server.requests >= 2 and {b["model"] for b in server.bodies} == {"qwen3-8b"}
    # a model without a price is said to be unpriced, never $0
    assert "summarizer_cost_usd: unpriced" in capsys.readouterr().out


def test_the_environment_gives_the_endpoint_and_the_command_line_wins(
    tmp_path: Path, server: FakeMessages, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    assert main([*RUN, "--out", str(tmp_path / "env")]) == 0
    n = server.requests
    assert n >= 2 and {b["model"] for b in server.bodies} == {"claude-sonnet-4-6"}
    with fake_messages_server() as other:
        assert main([*RUN, "--out", str(tmp_path / "cli"), "--base-url", other.url]) == 0
        assert other.requests >= 2
    assert server.requests == n  # the command line's endpoint replaced the environment's


def test_the_scorer_model_reaches_the_llm_scorer(tmp_path: Path, server: FakeMessages) -> None:
    argv = [
        "run",
        "--task",
        "synthetic:small:0",
        "--window",
        "16000",
        "--summarizer",
        "offline",
        "--probes",
        "llm",
        "--probe-every",
        "1000",
        "--out",
        str(tmp_path / "p"),
        "--base-url",
        server.url,
        "--scorer-model",
        "judge-1",
    ]
    assert main(argv) == 0
    assert server.requests > 0 and {b["model"] for b in server.bodies} == {"judge-1"}


def test_a_spec_sets_the_endpoint_and_models_and_the_command_line_replaces_them(
    tmp_path: Path, server: FakeMessages
) -> None:
    from h9eval.sweeps.sweep import sweep

    spec = {
        "name": "ep",
        "window": 16000,
        "tasks": ["synthetic:small:0"],
        "policies": [{"kind": "progressive"}],
        "summarizer": "anthropic",
        "base_url": server.url,
        "summarizer_model": "llama-3.1-8b",
    }
    sweep(spec, out_dir=tmp_path / "a", workers=0, progress=False)
    assert server.requests >= 2 and {b["model"] for b in server.bodies} == {"llama-3.1-8b"}
    server.bodies.clear()
    sweep(spec, out_dir=tmp_path / "b", workers=0, progress=False, call_limits=CallLimits(summarizer_model="gemma-3"))
    assert server.bodies and {b["model"] for b in server.bodies} == {"gemma-3"}


def test_a_model_given_twice_with_two_values_is_refused_before_anything_runs(
    tmp_path: Path, server: FakeMessages
) -> None:
    from h9eval.sweeps.spec import load_spec

    spec = {
        "name": "ep",
        "tasks": ["synthetic:small:0"],
        "policies": [{"kind": "keep_all"}],
        "summarizer": {"name": "anthropic", "params": {"model": "a"}},
        "summarizer_model": "b",
    }
    with pytest.raises(
        ConfigError, match=r"summarizer.params: model='a' conflicts with the command's or spec's summarizer_model 'b'"
    ):
        load_spec(spec)
    assert server.requests == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("base_url", "localhost:8000"), ("base_url", ""), ("summarizer_model", " "), ("agent_model", 3)],
)
def test_bad_endpoints_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"^{field} must be"):
        CallLimits(**{field: value})
