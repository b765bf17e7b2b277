"""progressive's minimum-gain rule: defer a summary that would not repay the cache it destroys."""

from __future__ import annotations

import pytest

from h9eval.compaction.policies import make_policy
from h9eval.compaction.records import EXTRA_MIN_GAIN_DEFERRED, Tier
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.runs.replay import replay
from h9eval.tasks.synthetic import generate


def _history() -> list[Message]:
    # 10 x 1000-token user/assistant pairs after a system message: 20,000 tokens + the system
    msgs = [Message("system", "s" * 40)]
    for i in range(10):
        msgs += [Message("user", f"{i}" * 4000), Message("assistant", f"{i}" * 4000)]
    return msgs


def _decision(horizon: int) -> bool:
    # window 25,000: 20,010 tokens is 0.80 of it, the full tier
    policy = make_policy("progressive", context_window_tokens=25_000, min_gain_horizon_calls=horizon)
    run = policy.start()
    c = run.compact(_history())
    return c.tier != Tier.NONE


def test_the_rule_by_hand() -> None:
    # H = 20,010; tail = 6 messages = 6,000; S = H // 20 = 1,000; V = 7,000 (sonnet: r 0.1, w 1.25, o 5)
    # keep = N * 0.1 * 20,010; compact = 20,010 + 5 * 1,000 + 1.25 * 7,000 + (N - 1) * 0.1 * 7,000
    # compact < keep  <=>  N > (20,010 + 5,000 + 8,750 - 700) / (2,001 - 700) = 25.4
    assert not _decision(25)
    assert _decision(26)


def test_deferred_calls_are_marked_and_default_is_unchanged() -> None:
    task = generate("small", 0)
    base = replay(task, make_policy("progressive", context_window_tokens=16_000)).calls
    assert (~base["min_gain_deferred"]).all()
    short = replay(task, make_policy("progressive", context_window_tokens=16_000, min_gain_horizon_calls=1)).calls
    assert short["min_gain_deferred"].any()
    assert short["compacted"].sum() < base["compacted"].sum()
    long = replay(task, make_policy("progressive", context_window_tokens=16_000, min_gain_horizon_calls=10_000)).calls
    assert not long["min_gain_deferred"].any() and long["compacted"].sum() == base["compacted"].sum()


def test_validation() -> None:
    with pytest.raises(ConfigError, match="min_gain_horizon_calls"):
        make_policy("progressive", min_gain_horizon_calls=0)
    with pytest.raises(ConfigError, match="min_gain_model"):
        make_policy("progressive", min_gain_model="kimi-k3")
    assert EXTRA_MIN_GAIN_DEFERRED == "min_gain_deferred"
