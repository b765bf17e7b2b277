"""The billing model against bills computed by hand (prices: h9eval.core.prices.MODELS)."""

from __future__ import annotations

import pytest

from h9eval.core.billing import (
    CachePlacement,
    CallTiming,
    PromptCache,
    Request,
    Segment,
    bill_requests,
    call_cost_usd,
    message_segments,
    placement,
)
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.prices import MODELS, model_entry, models_with, price_of

SONNET = "claude-sonnet-4-6"  # $3 in / $15 out, min 1024, reads 0.1x, 5m writes 1.25x
SYS = Segment("sys", 2000, 1, True)
A, B, C = Segment("a", 1000), Segment("b", 500), Segment("c", 200)


def req(at_s: float, *segs: Segment, model: str = SONNET, out: int = 0, where: CachePlacement | None = None) -> Request:
    return Request(model=model, segments=segs, at_s=at_s, output_tokens=out, placement=where or CachePlacement())


def classes(b) -> tuple[int, int, int, int]:
    return b.cache_read_tokens, b.cache_write_5m_tokens, b.cache_write_1h_tokens, b.uncached_input_tokens


def test_prefix_reuse_reads_what_the_previous_call_wrote() -> None:
    first, second = bill_requests([req(0, SYS, A, out=100), req(10, SYS, A, B, out=50)])
    # call 1: breakpoints after the system (2000) and on A (3000): all written
    assert classes(first) == (0, 3000, 0, 0)
    assert first.cost_usd == pytest.approx((3000 * 3 * 1.25 + 100 * 15) / 1e6)
    # call 2: reads the 3000 call 1 wrote at A's breakpoint (lookback from B), writes B
    assert classes(second) == (3000, 500, 0, 0)
    assert second.cost_usd == pytest.approx((3000 * 3 * 0.1 + 500 * 3 * 1.25 + 50 * 15) / 1e6)
    assert second.input_tokens == 3500


def test_expiry_between_calls_loses_the_cache() -> None:
    bills = bill_requests([req(0, SYS, A), req(10, SYS, A, B), req(10 + 301, SYS, A, B, C)])
    assert classes(bills[2]) == (0, 3700, 0, 0)  # 5 minutes and a second later: all written again


def test_a_read_refreshes_the_lifetime() -> None:
    # the system prefix written at 0 is read at 200 (alive until 500 then), read again at 450
    bills = bill_requests([req(0, SYS, A), req(200, SYS, B), req(450, SYS, C)])
    assert bills[1].cache_read_tokens == 2000
    assert bills[2].cache_read_tokens == 2000


def test_one_hour_lifetime_outlives_a_pause() -> None:
    hour = placement("claude_code_1h")
    bills = bill_requests([req(0, SYS, A, where=hour), req(1800, SYS, A, B, where=hour)])
    assert classes(bills[0]) == (0, 0, 3000, 0)
    assert classes(bills[1]) == (3000, 0, 500, 0)
    assert bills[1].cost_usd == pytest.approx((3000 * 0.3 + 500 * 6.0) / 1e6)


def test_a_compaction_in_the_middle_rewrites_all_but_the_system_prefix() -> None:
    summary = Segment("summary", 800)
    bills = bill_requests([req(0, SYS, A), req(10, SYS, A, B), req(20, SYS, summary, B)])
    assert classes(bills[2]) == (2000, 1300, 0, 0)  # the system prefix read, summary and tail written


def test_minimum_cacheable_length_per_model() -> None:
    haiku = "claude-haiku-4-5"  # 4096 minimum: a 3000-token prefix is never cached
    bills = bill_requests([req(0, SYS, A, model=haiku), req(5, SYS, A, B, model=haiku)])
    assert [classes(b) for b in bills] == [(0, 0, 0, 3000), (0, 0, 0, 3500)]


def test_the_cache_is_per_model() -> None:
    bills = bill_requests([req(0, SYS, A), req(5, SYS, A, B, model="claude-opus-4-1")])
    assert bills[1].cache_read_tokens == 0


def test_lookback_is_limited_to_twenty_blocks() -> None:
    many = [Segment(f"m{i}", 10) for i in range(20)]
    few = many[:19]
    # 20 new blocks after the last breakpoint: its write is 20 blocks back, out of reach
    far = bill_requests([req(0, SYS, A), req(5, SYS, A, *many)])[1]
    assert far.cache_read_tokens == 2000  # only the system breakpoint hits
    near = bill_requests([req(0, SYS, A), req(5, SYS, A, *few)])[1]
    assert near.cache_read_tokens == 3000


def test_summarizer_call_without_breakpoints_is_uncached() -> None:
    none = placement("none")
    bills = bill_requests(
        [req(0, Segment("prompt", 5000), out=400, where=none)] * 1 + [req(1, Segment("prompt", 5000), where=none)]
    )
    assert classes(bills[0]) == (0, 0, 0, 5000)
    assert bills[0].cost_usd == pytest.approx((5000 * 3 + 400 * 15) / 1e6)
    assert classes(bills[1]) == (0, 0, 0, 5000)


def test_openai_automatic_prefix_caching() -> None:
    bills = bill_requests([req(0, SYS, A, model="gpt-4o"), req(10, SYS, A, B, model="gpt-4o")])
    assert classes(bills[0]) == (0, 0, 0, 3000)
    # the shared 3000 tokens, in 128-token steps past 1024: 1024 + 15 * 128 = 2944
    assert classes(bills[1]) == (2944, 0, 0, 556)
    assert bills[1].cost_usd == pytest.approx((556 * 2.5 + 2944 * 1.25) / 1e6)
    late = bill_requests([req(0, SYS, A, model="gpt-4o"), req(400, SYS, A, B, model="gpt-4o")])
    assert late[1].cache_read_tokens == 0


def test_unpriced_models_are_none_not_zero() -> None:
    (b,) = bill_requests([req(0, SYS, A, model="kimi-k3")])
    assert b.cost_usd is None and not b.priced
    (u,) = bill_requests([req(0, SYS, A, model="no-such-model")])
    assert u.cost_usd is None and u.uncached_input_tokens == 3000
    assert price_of("kimi-k3") is None
    assert call_cost_usd(None, uncached=10) is None


def test_dated_ids_and_overrides() -> None:
    assert model_entry("claude-haiku-4-5-20251001") is MODELS["claude-haiku-4-5"]
    assert model_entry("claude-opus-4-7") is None
    table = models_with({"kimi-k3": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0}, "mine": 1000})
    assert table["kimi-k3"].priced and table["kimi-k3"].context_window_tokens == 1_048_576
    assert table["mine"].context_window_tokens == 1000 and not table["mine"].priced
    with pytest.raises(ConfigError, match=r"models.x: .*'input_usd_per_mtk'.*did you mean 'input_usd_per_mtok'"):
        models_with({"x": {"input_usd_per_mtk": 1.0}})
    with pytest.raises(ConfigError, match="cache placement 'claude'"):
        placement("claude")


def test_time_order_is_enforced_and_timing_model_is_stated() -> None:
    cache = PromptCache()
    cache.bill(req(10, SYS))
    with pytest.raises(ConfigError, match="time order"):
        cache.bill(req(5, SYS))
    t = CallTiming(base_s=1.0, s_per_output_token=0.5, tool_s=10.0)
    out = Message("assistant", "x" * 8, (ToolCall("c", "bash", "{}"),))
    assert t.gap_s(out) == pytest.approx(1.0 + 0.5 * (out.nbytes // 4) + 10.0)
    assert t.gap_s(None) == 0.0


def test_message_segments_count_blocks_and_the_system_prefix() -> None:
    msgs = [
        Message("system", "s" * 40),
        Message("assistant", "hi", (ToolCall("1", "a", "{}"), ToolCall("2", "b", "{}"))),
    ]
    segs = message_segments(msgs, prefix_tokens=100)
    assert [s.system for s in segs] == [True, True, False]
    assert [s.blocks for s in segs] == [1, 1, 3]
    assert segs[1].tokens == 10
