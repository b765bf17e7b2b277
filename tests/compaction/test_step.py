"""compaction.step: harness9's write-back predicate, the step's retries and statistics, the calls
row builder, and what every policy declares to a run (its window and its hook threshold)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from h9eval.compaction.base import CompactionEnv, WindowedPolicy
from h9eval.compaction.policies import make_policy, registry
from h9eval.compaction.records import CompactionRecord, OffloadEntry, Tier
from h9eval.compaction.step import CallStep, StepRules, tool_time_hook, writes_back
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message, ToolCall
from h9eval.results.schema import CALL_COLUMNS, CALL_DTYPES, call_row, calls_frame

VIEW = (Message("user", "x"),)


def _rec(
    *,
    tier: Tier = Tier.SOFT,
    error: str = "",
    msgs: tuple[int, int] = (10, 10),
    tokens: tuple[int, int] = (100, 100),
    offloaded: bool = False,
) -> CompactionRecord:
    entry = OffloadEntry(tool_call_id="c", tool_name="bash", file_path="p", bytes=5, lines=1)
    return CompactionRecord(
        tier=tier,
        tokens_before=tokens[0],
        tokens_after=tokens[1],
        msgs_before=msgs[0],
        msgs_after=msgs[1],
        error=error,
        offloaded=[entry] if offloaded else None,
    )


@pytest.mark.parametrize(
    ("rec", "v3", "v2"),
    [
        (None, False, False),
        (_rec(), False, False),  # nothing changed
        (_rec(msgs=(10, 6)), True, True),
        (_rec(tokens=(100, 90)), True, False),  # tokens only: V3's addition
        (_rec(offloaded=True), True, True),
        (_rec(msgs=(10, 6), error="LLM summary failed: x"), False, False),  # a failed summary's fallback
        (_rec(msgs=(10, 6), tier=Tier.EMERGENCY, error="forced truncation"), True, False),  # V3 writes emergencies back
    ],
)
def test_write_back_predicate_of_spec_2_3(rec: CompactionRecord | None, v3: bool, v2: bool) -> None:
    assert writes_back(rec, VIEW, "v3") is v3
    assert writes_back(rec, VIEW, "v2") is v2
    assert writes_back(rec, (), "v3") is False  # an empty view is never written back


def test_rules_are_validated_with_the_field_named() -> None:
    for bad, field in (
        ({"history_mode": "both"}, "history_mode"),
        ({"writeback_rules": "v4"}, "writeback_rules"),
        ({"overflow_retries": -1}, "overflow_retries"),
    ):
        with pytest.raises(ConfigError, match=f"StepRules.{field}"):
            StepRules(**bad)  # type: ignore[arg-type]


def test_forced_retries_stop_at_the_rule_and_are_counted() -> None:
    history = [Message("system", "s"), Message("user", "u" * 4000)]
    for retries in (0, 2):
        step = CallStep(
            make_policy("keep_all").start(CompactionEnv()),
            StepRules(overflow_retries=retries),
            window_tokens=100,
            tool_schema_tokens=7,
            hook=None,
            history=history,
        )
        req = step.before_call()
        assert req.forced_compactions == retries and len(req.compactions) == 1 + retries
        assert req.stats.tokens_sent == req.stats.view_tokens + 7 > 100 and not req.stats.compacted
    many = [Message("system", "s"), *(Message("user", "u" * 400) for _ in range(10)), Message("user", "q")]
    rules = StepRules(overflow_retries=2, history_mode="write_back")
    step = CallStep(
        make_policy("drop_all").start(CompactionEnv()),
        rules,
        window_tokens=100,
        tool_schema_tokens=0,
        hook=None,
        history=many,
    )
    req = step.before_call()
    assert req.forced_compactions == 0 and req.stats.compacted and req.stats.written_back
    assert step.history == list(req.view) and step.history_bytes == sum(m.nbytes for m in req.view)


def test_a_tool_result_meets_the_hook_with_the_call_it_answers(tmp_path: Path) -> None:
    env = CompactionEnv(offload_root=str(tmp_path), session_id="s")
    policy = make_policy("progressive", offload_hook_threshold_bytes=100)
    hook = tool_time_hook(policy, StepRules(), env)
    assert hook is not None and hook.threshold_bytes == 100
    assert tool_time_hook(make_policy("observation_masking"), StepRules(), env) is None
    assert tool_time_hook(make_policy("observation_masking"), StepRules(tool_time_offload=True), env) is not None
    assert tool_time_hook(policy, StepRules(tool_time_offload=False), env) is None
    step = CallStep(policy.start(env), StepRules(), window_tokens=10_000, tool_schema_tokens=0, hook=hook)
    step.arrive(Message("assistant", "", (ToolCall("c1", "bash", "{}"),)))
    assert step.arrive(Message("user", "y" * 500, (), "c1")) is True
    assert step.arrive(Message("user", "short", (), "c1")) is False
    assert step.before_call().stats.offloads_tool_time_count == 1
    assert step.before_call().stats.offloads_tool_time_count == 0  # counted since the previous call


def test_every_policy_declares_its_window_and_hook_threshold() -> None:
    """A policy with a window field is a WindowedPolicy (a run can set it); the hook threshold
    field, when a policy has one, is what it declares."""
    for kind, cls in registry().items():
        fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        assert ("context_window_tokens" in fields) == issubclass(cls, WindowedPolicy), kind
        try:
            p = make_policy(kind)
        except ConfigError:  # a policy with a required parameter (a cassette): its class is checked above
            continue
        if "context_window_tokens" in fields:
            own = p.context_window_tokens  # type: ignore[attr-defined]
            assert p.window_tokens() == own == cls.default_window_tokens()
            assert p.at_window(90_000).window_tokens() == 90_000 and p.at_window(p.window_tokens()) is p
        else:
            assert p.window_tokens() is None and p.at_window(90_000) is p
        expected = getattr(p, "offload_hook_threshold_bytes", None)
        assert p.hook_threshold_bytes() == expected, kind


def test_call_row_derives_the_shared_columns_and_refuses_unknown_keys() -> None:
    row = call_row({"tokens_sent": 150, "context_window_tokens": 100, "tier_name": "soft", "tier": 2})
    assert list(row) == list(CALL_COLUMNS)
    assert row["ratio_to_window"] == 1.5 and row["overflow"] is True and row["overflow_tokens"] == 50
    assert row["fallback"] is False and row["fallback_error"] == "" and row["summarizer_cost_usd"] == 0.0
    with pytest.raises(KeyError, match="tokens_sentt"):
        call_row({"tokens_sent": 1, "context_window_tokens": 1, "tokens_sentt": 1})
    with pytest.raises(KeyError, match="overflow"):
        call_row({"tokens_sent": 1, "context_window_tokens": 1, "overflow": False})
    frame = calls_frame([row])
    assert {c: str(t) for c, t in frame.dtypes.items()} == CALL_DTYPES
    assert list(calls_frame([]).columns) == list(CALL_COLUMNS)
