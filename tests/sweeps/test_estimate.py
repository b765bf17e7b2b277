"""``h9eval sweep SPEC --estimate``: an offline dry run of the grid that calls nothing, against the
real run of the same spec on the fake Messages server (127.0.0.1): the estimated model calls are
within 10 % of the requests the server receives."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from h9eval.core.prices import BATCH_PRICE_FRAC  # noqa: E402
from h9eval.cli import main  # noqa: E402
from h9eval.sweeps.estimate import estimate_sweep  # noqa: E402
from tests.fake_messages import FakeMessages, fake_messages_server  # noqa: E402

KEY = "sk-ant-h9eval-estimate-test-key"


def _spec(**summarizer: Any) -> dict[str, Any]:
    return {
        "name": "est",
        "window": 16000,
        "tasks": ["synthetic:small:0", "synthetic:small:1"],
        "history_modes": ["view", "write_back"],
        "policies": [{"kind": "progressive", "grid": {"warn_frac": [0.5, 0.6]}}, {"kind": "keep_all"}],
        "summarizer": {"name": "anthropic", **summarizer},
    }


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessages]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with fake_messages_server() as s:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        yield s


def test_the_estimate_calls_nothing_and_is_within_ten_percent_of_the_real_run(
    tmp_path: Path, server: FakeMessages, monkeypatch: pytest.MonkeyPatch
) -> None:
    from h9eval.sweeps.sweep import sweep

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # the estimate needs no key
    est = estimate_sweep(_spec())
    assert server.requests == 0
    t = est.table.set_index(["policy_name", "grid_json", "history_mode"])
    assert est.model_calls >= 5
    assert t.loc[("keep_all", "{}", "view"), "model_calls"] == 0  # keep_all never summarizes
    # the second grid point asks for the same summaries: the shared response cache answers them
    assert t["cache_hits"].sum() > 0

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    sweep(_spec(), out_dir=tmp_path / "real", workers=0, progress=False)
    assert abs(server.requests - est.model_calls) <= 0.1 * est.model_calls, (server.requests, est.model_calls)
    assert est.usd > 0 and math.isclose(est.usd, float(est.table["usd"].sum()))
    # the input side of the estimate: the same prompts the server received, at bytes / 4
    assert abs(server.input_tokens - int(est.table["input_tokens"].sum())) <= 0.1 * server.input_tokens


def test_an_unpriced_model_is_unpriced_and_the_spec_can_price_it(
    server: FakeMessages, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    est = estimate_sweep({**_spec(params={"model": "qwen3-8b"})})
    assert est.model_calls > 0 and math.isnan(est.usd)
    assert "unpriced" in str(est)
    priced = estimate_sweep({**_spec(params={"model": "qwen3-8b", "prices": {"qwen3-8b": [1.0, 2.0]}})})
    t = priced.table
    expected = (t["input_tokens"].sum() * 1.0 + t["output_tokens"].sum() * 2.0) / 1e6
    assert priced.usd == pytest.approx(expected) and priced.usd > 0
    assert (t["usd_bound"] >= t["usd"]).all()


def test_the_command_prints_the_table_and_a_total(
    tmp_path: Path, server: FakeMessages, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "e"\nwindow = 16000\ntasks = ["synthetic:small:0"]\n[[policies]]\nkind = "progressive"\n'
        '[summarizer]\nvariants = ["anthropic", "offline"]\n'
    )
    assert (
        main(["sweep", str(spec), "--estimate", "--summarizer-model", "claude-haiku-4-5", "--max-cost-usd", "0.0001"])
        == 0
    )
    out = capsys.readouterr().out
    assert "nothing was called" in out and "claude-haiku-4-5" in out and out.count("\ntotal: ") == 1
    assert "max_cost_usd $0.0001 does NOT cover the expected" in out
    assert server.requests == 0 and not (tmp_path / "results").exists()


def test_a_batched_sweep_is_estimated_at_the_batch_price(server: FakeMessages) -> None:
    spec = _spec(params={"model": "qwen3-8b", "prices": {"qwen3-8b": [1.0, 2.0]}})
    direct = estimate_sweep(spec)
    batched = estimate_sweep({**spec, "summarizer": {**spec["summarizer"], "batch": True}})
    assert server.requests == 0 and batched.model_calls == direct.model_calls > 0
    assert batched.usd == pytest.approx(BATCH_PRICE_FRAC * direct.usd)
    assert batched.table["usd_bound"].to_numpy() == pytest.approx(
        BATCH_PRICE_FRAC * direct.table["usd_bound"].to_numpy()
    )
