"""Closed-loop episodes are billed like replays (no uncompacted transcript: raw dollars NaN)."""

from __future__ import annotations

import math

import pytest

from h9eval.closedloop.rows import episode_bills, episode_calls_frame
from h9eval.runs.world import run_world
from h9eval.core.billing import BillingConfig


def test_episode_calls_carry_bills() -> None:
    keep = run_world("fact_chain:3", policy="keep_all", oracle=False).episode
    masked = run_world(
        "fact_chain:3", policy="observation_masking", params={"keep_recent_turns": 1}, oracle=False
    ).episode
    for ep in (keep, masked):
        c = episode_calls_frame(ep, run_id="r", task_id="t")
        assert len(c) == len(ep.steps) > 3
        assert c["cost_usd"].notna().all() and c["priced"].all() and c["raw_cost_usd"].isna().all()
        billed = c[
            ["uncached_input_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens", "cache_read_tokens"]
        ].sum(axis=1)
        # every token sent is billed in exactly one class (the view plus the tool schemas; the bill
        # floors bytes/4 per message, the estimate once over the view: at most one token per message apart)
        gap = c["tokens_sent"] - billed
        assert all(0 <= g <= len(v) for g, v in zip(gap, ep.views))
    # a model that caches any prefix (these short episodes stay under Sonnet's 1,024-token minimum)
    tiny = BillingConfig(
        model="m",
        models={
            "m": {
                "provider": "anthropic",
                "input_usd_per_mtok": 3.0,
                "output_usd_per_mtok": 15.0,
                "cache_read_frac": 0.1,
                "cache_write_5m_frac": 1.25,
                "min_cacheable_tokens": 0,
            }
        },
    )
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


def test_the_episodes_row_carries_its_calls_billed_dollars(tmp_path) -> None:
    """The episodes row's billed columns are its calls' totals, computed here again by hand: dollars
    summed, the cache-read share as reads over every billed input token; NaN (not $0) when a call is
    unpriced or unbilled. Mutants killed: a row that reads $0 for an unpriced episode, a share over the
    tokens sent, the billing configuration of the calls not reaching the row."""
    from h9eval.closedloop.rows import EPISODE_BILL_KEYS, episode_row
    from h9eval.results.io import read_table

    run = run_world(
        "fact_chain:3",
        policy="observation_masking",
        params={"keep_recent_turns": 1},
        oracle=False,
        out_dir=tmp_path / "ep",
    )
    calls = read_table(tmp_path / "ep" / "calls.parquet", "calls")
    row = read_table(tmp_path / "ep" / "episodes.parquet", "episodes").iloc[0]
    inputs = ["uncached_input_tokens", "cache_write_5m_tokens", "cache_write_1h_tokens", "cache_read_tokens"]
    assert row["cost_usd"] == pytest.approx(sum(calls["cost_usd"]), abs=1e-6) and row["cost_usd"] > 0
    assert row["summarizer_bill_usd"] == pytest.approx(sum(calls["summarizer_bill_usd"]), abs=1e-6)
    assert row["invalidation_usd"] == pytest.approx(sum(calls["invalidation_usd"]), abs=1e-6)
    assert row["cache_read_share"] == pytest.approx(
        sum(calls["cache_read_tokens"]) / sum(calls[inputs].sum()), abs=1e-4
    )
    # a billing that caches from the first token: the share moves with the billing the calls were built with
    tiny = BillingConfig(
        model="m",
        models={
            "m": {
                "provider": "anthropic",
                "input_usd_per_mtok": 3.0,
                "output_usd_per_mtok": 15.0,
                "cache_read_frac": 0.1,
                "cache_write_5m_frac": 1.25,
                "min_cacheable_tokens": 0,
            }
        },
    )
    ep = run.episode
    billed = episode_calls_frame(ep, run_id="r", task_id="t", billing=tiny)
    r2 = episode_row(ep, oracle_steps=None, run_id="r", task_id="t", calls=billed)
    assert r2["cache_read_share"] > 0 == row["cache_read_share"]
    # an unpriced model: unknown, never $0
    unpriced = BillingConfig(model="kimi-k3")
    r3 = episode_row(
        ep,
        oracle_steps=None,
        run_id="r",
        task_id="t",
        calls=episode_calls_frame(ep, run_id="r", task_id="t", billing=unpriced),
    )
    assert all(math.isnan(r3[k]) for k in ("cost_usd", "invalidation_usd"))
    assert set(EPISODE_BILL_KEYS) <= set(r3)


def test_a_version_1_episodes_part_reads_with_unknown_dollars(tmp_path) -> None:
    """A sweep folder written before the billed episode columns: read, those columns NaN."""
    import pyarrow.parquet as pq

    from h9eval.closedloop.rows import EPISODE_BILL_KEYS
    from h9eval.results import load_results
    from h9eval import sweep

    spec = {
        "name": "v1",
        "tasks": {"worlds": [{"kind": "fact_chain", "seeds": [3]}]},
        "policies": [{"kind": "keep_all"}],
    }
    sweep(spec, out_dir=tmp_path / "s", workers=0, progress=False)
    first = load_results(tmp_path / "s")
    assert first.episodes["cost_usd"].notna().all()
    # the cell's run row carries the same billed dollars (no uncompacted transcript in the closed loop)
    ep_runs = first.runs.set_index("run_id").loc[first.episodes["run_id"]]
    assert ep_runs["cost_usd"].tolist() == pytest.approx(first.episodes["cost_usd"].tolist())
    assert ep_runs["raw_cost_usd"].isna().all()
    (part,) = (tmp_path / "s" / "cells").rglob("episodes.parquet")
    t = pq.read_table(part)
    t = t.drop_columns(list(EPISODE_BILL_KEYS))
    meta = dict(t.schema.metadata)
    meta[b"h9eval_schema_version"] = b"1"
    pq.write_table(t.replace_schema_metadata(meta), part)
    for f in (tmp_path / "s").glob("*.parquet"):  # the consolidated tables are rebuilt from the cells
        f.unlink()
    (tmp_path / "s" / "consolidated.json").unlink(missing_ok=True)
    ep = load_results(tmp_path / "s").episodes
    assert len(ep) == 1 and all(ep[k].isna().all() for k in EPISODE_BILL_KEYS)
