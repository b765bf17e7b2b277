"""The batch discount is owned by the model table (h9eval.core.prices) and applied by the billing
model (h9eval.core.billing) and the Anthropic summarizer's own cost (issue 33)."""

from __future__ import annotations

import pytest

from h9eval.core.billing import BillingConfig, SessionBiller, SummaryUsage, call_cost_usd
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.core.prices import BATCH_PRICE_FRAC, MODELS, batch_price_frac, models_with


def test_a_batched_call_costs_the_models_batch_fraction() -> None:
    info = MODELS["claude-haiku-4-5"]
    assert BATCH_PRICE_FRAC == 0.5 and info.batch_price_frac == 0.5
    full = call_cost_usd(info, uncached=1_000_000, output=1_000_000)
    assert full == pytest.approx(1.0 + 5.0)  # $1 in, $5 out per million
    assert call_cost_usd(info, uncached=1_000_000, output=1_000_000, batched=True) == pytest.approx(3.0)
    assert call_cost_usd(MODELS["kimi-k3"], uncached=10, batched=True) is None  # unpriced stays unpriced
    custom = models_with({"claude-haiku-4-5": {"batch_price_frac": 0.25}})
    assert call_cost_usd(custom["claude-haiku-4-5"], uncached=1_000_000, batched=True) == pytest.approx(0.25)
    assert (
        batch_price_frac("claude-haiku-4-5-20251001") == 0.5 and batch_price_frac("my-local-model") == BATCH_PRICE_FRAC
    )
    with pytest.raises(ConfigError, match="batch_price_frac must be a number >= 0"):
        models_with({"m": {"batch_price_frac": -1}})


def test_the_biller_bills_batched_summaries_at_the_batch_price() -> None:
    def bill(*calls: object) -> float:
        b = SessionBiller(BillingConfig(model="claude-sonnet-4-6"), prefix_tokens=0)
        bills = b.call(
            0,
            view=[Message("user", "x" * 400)],
            raw_view=None,
            output=Message("assistant", "ok"),
            previous_output=None,
            appended_tokens=100,
            summarizer_calls=calls,
        )  # type: ignore[arg-type]
        return sum(s.cost_usd or 0.0 for s in bills.summarizer)

    plain = bill((10_000, 500), SummaryUsage(10_000, 500))
    assert plain == pytest.approx(2 * (10_000 * 3.0 + 500 * 15.0) / 1e6)
    assert bill(SummaryUsage(10_000, 500, batched=True), (10_000, 500)) == pytest.approx(0.75 * plain)
