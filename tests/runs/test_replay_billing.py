"""The replay's bills, computed by hand on a crafted task (prices: claude-sonnet-4-6, $3/$15)."""

from __future__ import annotations

import math

import pytest

from h9eval.analysis.metrics import cost_metrics
from h9eval.compaction.policies import make_policy
from h9eval.core.billing import BillingConfig
from h9eval.core.messages import Message
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.tasks.model import Intent, Task, TaskSource
from h9eval.tasks.synthetic import generate

PIN, POUT = 3.0 / 1e6, 15.0 / 1e6
W, R = 1.25 * PIN, 0.1 * PIN


def _task() -> Task:
    # tokens (bytes / 4): user 2000, reply 100, user 1000, reply 100
    msgs = (
        Message("user", "u" * 8000),
        Message("assistant", "a" * 400),
        Message("user", "v" * 4000),
        Message("assistant", "b" * 400),
    )
    return Task(
        task_id="bill",
        source=TaskSource(kind="synthetic", preset="crafted"),
        messages=msgs,
        intent=Intent(statement="u"),
    )


# a 1000-token system prompt: below the 1024-token minimum, so never cached on its own
CFG = ReplayConfig(system_prompt="s" * 4000, billing=BillingConfig(model="claude-sonnet-4-6"))


def test_keep_all_reads_what_the_previous_call_wrote() -> None:
    c = replay(_task(), make_policy("keep_all"), config=CFG).calls
    assert list(c["cache_write_5m_tokens"]) == [3000, 1100]
    assert list(c["cache_read_tokens"]) == [0, 3000]
    assert list(c["uncached_input_tokens"]) == [0, 0]
    assert c["cost_usd"].tolist() == pytest.approx([3000 * W + 100 * POUT, 3000 * R + 1100 * W + 100 * POUT])
    assert c["raw_cost_usd"].tolist() == pytest.approx(c["cost_usd"].tolist())  # keep_all sends the raw transcript
    assert c["invalidation_usd"].tolist() == pytest.approx([0.0, 0.0])
    assert c["call_at_s"].tolist() == pytest.approx([0.0, 2.0 + 0.02 * 100])  # the stated timing model


def test_a_compaction_rewrites_the_prefix_and_is_charged_for_it() -> None:
    c = replay(_task(), make_policy("drop_all"), config=CFG).calls
    # call 1 sends system + the last user message: nothing of it was cached (the system prompt
    # alone is below the minimum), 2000 tokens written although only 1100 joined the history
    assert c["cache_read_tokens"].iloc[1] == 0 and c["cache_write_5m_tokens"].iloc[1] == 2000
    assert c["invalidation_usd"].iloc[1] == pytest.approx(900 * (W - R))
    assert c["raw_cost_usd"].iloc[1] == pytest.approx(3000 * R + 1100 * W + 100 * POUT)
    m = cost_metrics(c).iloc[0]
    assert m["cost_saved_usd"] == pytest.approx(m["raw_cost_usd"] - m["cost_usd"])
    assert m["cache_read_share"] == 0.0


def test_the_summarizer_calls_are_billed_uncached_as_the_agent_model() -> None:
    res = replay(generate("small", 0), make_policy("progressive", context_window_tokens=16_000))
    c = res.calls
    assert c["summarizer_calls"].sum() > 0
    expected = c["summarizer_input_tokens"] * PIN + c["summarizer_output_tokens"] * POUT
    assert c["summarizer_bill_usd"].tolist() == pytest.approx(expected.tolist())
    assert c["cost_usd"].tolist() == pytest.approx((c["agent_cost_usd"] + c["summarizer_bill_usd"]).tolist())
    s = res.summary()
    assert s["cost_usd"] == pytest.approx(float(c["cost_usd"].sum()), abs=1e-6) and 0 <= s["cache_read_share"] <= 1
    from h9eval.analysis.metrics import summarizer_usage

    u = summarizer_usage(c, by="run_id")
    assert u["billed_usd_per_run"].iloc[0] == pytest.approx(float(c["summarizer_bill_usd"].sum()))


def test_unpriced_models_give_nan_dollars_never_zero() -> None:
    cfg = ReplayConfig(billing=BillingConfig(model="kimi-k3"))
    res = replay(_task(), make_policy("keep_all"), config=cfg)
    c = res.calls
    assert c["cost_usd"].isna().all() and not c["priced"].any()
    assert res.summary()["cost_usd"] is None
    m = cost_metrics(c).iloc[0]
    assert math.isnan(m["cost_usd"]) and m["unpriced_calls"] == 2


def test_a_prompt_under_the_minimum_has_no_cache_to_lose() -> None:
    # claude-haiku-4-5 caches nothing under 4096 tokens: the same rewrite costs no invalidation
    cfg = ReplayConfig(system_prompt="s" * 4000, billing=BillingConfig(model="claude-haiku-4-5"))
    c = replay(_task(), make_policy("drop_all"), config=cfg).calls
    assert c["uncached_input_tokens"].iloc[1] == 2000 and c["cache_write_5m_tokens"].iloc[1] == 0
    assert c["invalidation_usd"].iloc[1] == 0.0


def test_automatic_caching_counts_uncached_repeats() -> None:
    # gpt-4o: call 1 of drop_all sends 2000 tokens, 1100 of them new; nothing shared with call 0
    cfg = ReplayConfig(system_prompt="s" * 4000, billing=BillingConfig(model="gpt-4o"))
    c = replay(_task(), make_policy("drop_all"), config=cfg).calls
    assert c["cache_read_tokens"].iloc[1] == 0 and c["uncached_input_tokens"].iloc[1] == 2000
    assert c["invalidation_usd"].iloc[1] == pytest.approx(900 * 2.5 / 1e6 * (1 - 0.5))


def test_each_compaction_carries_its_invalidation() -> None:
    from h9eval.analysis.metrics import compaction_invalidation

    c = replay(_task(), make_policy("drop_all"), config=CFG).calls
    assert not c["compacted"].iloc[0] and c["compacted"].iloc[1]
    inv = compaction_invalidation(c)
    assert list(inv["call_index"]) == [1] and inv["calls_until_next"].iloc[0] == 1
    assert inv["invalidation_usd"].iloc[0] == pytest.approx(900 * (W - R))
