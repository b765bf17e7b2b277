"""Closed-loop episodes are billed like replays (no uncompacted transcript: raw dollars NaN)."""

from __future__ import annotations

import math

import pytest

from h9eval.closedloop.run import episode_bills, episode_calls_frame, run_world
from h9eval.core.billing import BillingConfig


def test_episode_calls_carry_bills() -> None:
    keep = run_world("fact_chain:3", policy="keep_all", oracle=False).episode
    masked = run_world("fact_chain:3", policy="observation_masking", params={"keep_recent_turns": 1}, oracle=False).episode
    for ep in (keep, masked):
        c = episode_calls_frame(ep, run_id="r", task_id="t")
        assert len(c) == len(ep.steps) > 3
        assert c["cost_usd"].notna().all() and c["priced"].all() and c["raw_cost_usd"].isna().all()
        billed = c[["uncached_input_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens", "cache_read_tokens"]].sum(axis=1)
        # every token sent is billed in exactly one class (the view plus the tool schemas; the bill
        # floors bytes/4 per message, the estimate once over the view: at most one token per message apart)
        gap = c["tokens_sent"] - billed
        assert all(0 <= g <= len(v) for g, v in zip(gap, ep.views))
    # a model that caches any prefix (these short episodes stay under Sonnet's 1,024-token minimum)
    tiny = BillingConfig(model="m", models={"m": {"provider": "anthropic", "input_usd_per_mtok": 3.0, "output_usd_per_mtok": 15.0,
                                                   "cache_read_frac": 0.1, "cache_write_5m_frac": 1.25, "min_cacheable_tokens": 0}})
    kb, mb = episode_bills(keep, tiny), episode_bills(masked, tiny)

    def read_share(bills: list) -> float:
        return sum(b.agent.cache_read_tokens for b in bills) / sum(b.agent.input_tokens for b in bills)

    assert read_share(kb) > 0.5 > read_share(mb)  # masking rewrites old outputs at every step
    assert sum(b.invalidation_usd for b in kb) == pytest.approx(0.0, abs=1e-12)
    assert sum(b.invalidation_usd for b in mb) > 0


def test_an_episode_without_views_has_no_bills() -> None:
    import dataclasses

    ep = run_world("fact_chain:3", policy="keep_all", oracle=False).episode
    bare = dataclasses.replace(ep, views=())
    assert episode_bills(bare) == []
    c = episode_calls_frame(bare, run_id="r", task_id="t")
    assert c["cost_usd"].map(math.isnan).all() and not c["priced"].any()
