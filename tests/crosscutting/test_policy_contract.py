"""The contract every registered compaction policy keeps, checked over generated transcripts.

For every policy in ``registry()`` (with small windows so that compaction really triggers):
tool pairs stay valid, the input is never mutated, the system message stays first, the budget
holds when the policy claims one, results are deterministic, records agree with the views; and
an agent-loop test asserts that compaction actually happened (except for ``keep_all``, which
must never change anything).
"""

from __future__ import annotations

import atexit
import copy
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from h9eval.compaction.base import Compaction, CompactionEnv, Compactor, LogicalClock, Policy, PolicyRun
from h9eval.compaction.policies import make_policy, registry
from h9eval.compaction.records import Tier
from h9eval.compaction.repair import pairing_problems
from h9eval.core.messages import Message, ToolCall
from h9eval.compaction.summary import SummaryReply, SummaryRequest
from h9eval.core.errors import ConfigError
from h9eval.core.tokens import estimate_tokens
from scripts.provider_compaction_cassettes import FAKE_KEYS, FakeProviderServer

# -- configurations ------------------------------------------------------------------------

#: the provider-side compaction policies record what these generated transcripts send from a fake
#: local provider (loopback; its replies follow the documented shapes) into a throw-away cassette
_PROVIDER = FakeProviderServer()
_CASSETTES = Path(tempfile.mkdtemp(prefix="h9eval-contract-cassettes-"))
atexit.register(shutil.rmtree, _CASSETTES, ignore_errors=True)


def _provider_side(kind: str) -> dict[str, Any]:
    return {
        "context_window_tokens": 2000,
        "record": True,
        "cassette": str(_CASSETTES / f"{kind}.jsonl"),
        "base_url": _PROVIDER.base_url(kind),
    }


@pytest.fixture(autouse=True, scope="module")
def provider_keys() -> Iterator[None]:
    """The fake keys the recording SDK clients send (the fake provider wants one)."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in FAKE_KEYS.items():
            mp.setenv(k, v)
        yield


#: small-window parameters per kind (a list = several variants); a kind missing here is run
#: with ``context_window_tokens=2000`` when it has that field, else with its defaults.
SMALL: dict[str, list[dict[str, Any]]] = {
    "progressive": [
        {"context_window_tokens": 2000},
        {"context_window_tokens": 8000, "forced_truncation": "legacy_last1"},
    ],
    "token_budget": [
        {"context_window_tokens": 2000},
        {"context_window_tokens": 2000, "forced_truncation": "legacy_last1"},
    ],
    "observation_masking": [
        {"keep_recent_turns": 2},
        {
            "keep_recent_turns": 2,
            "window_unit": "tool_results",
            "placeholder": "Old environment output: ({lines} lines omitted)",
        },
        {"keep_recent_turns": 1, "send_masked_calls": False},
    ],
    "clear_tool_uses": [
        {"trigger_tokens": 1500, "keep_tool_uses": 2},
        {
            "trigger_tokens": 1000,
            "keep_tool_uses": 1,
            "clear_tool_inputs": True,
            "exclude_tools": ("memory",),
            "clear_at_least_tokens": 300,
        },
        {"trigger_tool_uses": 3, "keep_tool_uses": 2, "clear_tool_inputs": ("bash", "edit")},
    ],
    "window": [{"keep_first": 1, "keep_last": 6}, {"amortized": True, "max_messages": 12, "keep_first": 2}],
    "summary_single_threshold": [
        {"context_window_tokens": 2000},
        {"context_window_tokens": 2000, "keep_last_messages": 3, "anchors": False},
    ],
    "hybrid": [
        {"context_window_tokens": 2000, "keep_recent_turns": 2},
        {
            "style": "jetbrains",
            "summarize_every_turns": 4,
            "keep_last_turns": 2,
            "keep_recent_turns": 2,
            "window_unit": "tool_results",
        },
        {
            "style": "jetbrains",
            "summarize_every_turns": 40,
            "keep_last_turns": 3,
            "token_trigger": True,
            "context_window_tokens": 2000,
        },
    ],
    "codex_compact": [{"context_window_tokens": 2000}, {"context_window_tokens": 4000, "user_message_max_tokens": 60}],
    "claude_code_compact": [
        {"context_window_tokens": 2000, "output_reserve_tokens": 200, "buffer_tokens": 300},
        {
            "context_window_tokens": 4000,
            "output_reserve_tokens": 500,
            "buffer_tokens": 500,
            "read_tools": ("read_file",),
            "todo_tools": ("memory",),
            "max_file_tokens": 600,
        },
    ],
    "openhands_condenser": [{"max_size": 12, "keep_first": 2}, {"max_size": 60, "keep_first": 3, "max_tokens": 1500}],
    "sliding_window": [{"max_messages": 8}, {"max_messages": 2}],
    "keep_all": [{}],
    "drop_all": [{}],
    "as_recorded": [{}],
    "anthropic_server_compaction": [_provider_side("anthropic_server_compaction")],
    "openai_server_compaction": [_provider_side("openai_server_compaction")],
}
#: policies that never compact a history without recorded compaction summaries (``as_recorded``
#: has its own loop test over marked summaries in tests/compaction/test_as_recorded.py)
NEVER_COMPACT_HERE = {"keep_all", "as_recorded"}

#: harness9's own compactors repair pairs by id *sets* over the whole list (spec §6), as harness9
#: does; with reused call ids that repair cannot tell two calls of one id apart, so the pairing
#: property is only required of them on transcripts with unique ids (a faithful port keeps it).
GLOBAL_ID_REPAIR = {"progressive", "token_budget", "sliding_window"}
#: policies whose forced compaction follows an API that returns no record (harness9's).
FORCE_WITHOUT_RECORD = {"progressive"}
#: the three ways into ``Compactor.compact``
MODES = ("auto", "force", "manual")


def _compact(runner: Compactor, mode: str, history: list[Message]) -> Compaction:
    return runner.compact(history, force=mode == "force", manual=mode == "manual")


def _configs() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for kind, cls in registry().items():
        variants = SMALL.get(kind)
        if variants is None:
            names = {f for f in getattr(cls, "__dataclass_fields__", {})}
            variants = [{"context_window_tokens": 2000} if "context_window_tokens" in names else {}]
        out += [(kind, v) for v in variants]
    return out


CONFIGS = _configs()
CONFIG_IDS = [f"{k}-{i}" for i, (k, _) in enumerate(CONFIGS)]


class FakeSummarizer:
    """Deterministic, tiny: a well-formed anchor reply naming how many messages it saw."""

    summarizer_id = "fake"

    def __init__(self) -> None:
        self.calls: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        self.calls.append(request)
        n = len(request.head)
        text = (
            "## Anchors\n\n### User Intent\nfix the failing test\n\n"
            f"### Execution Progress\n- looked at {n} messages\n\n"
            "### Key Decisions\n- N/A\n\n### Tried Solutions\n- N/A\n\n### Next Steps\n- run the tests\n\n"
            f"## Summary\nSummary of {n} messages ({len(request.conversation)} chars), template {request.template}."
        )
        return SummaryReply(text=text, input_tokens=len(request.user_prompt) // 4, output_tokens=len(text) // 4)


def _offline_summarizer() -> Any:
    from h9eval.summarizers.offline import OfflineSummarizer

    return OfflineSummarizer()


SUMMARIZERS: dict[str, Callable[[], Any]] = {"fake": FakeSummarizer, "offline": _offline_summarizer}


def make_env(summarizer: str | None = "fake") -> CompactionEnv:
    """A reproducible env; ``summarizer=None`` injects none (every summary fails)."""
    s = SUMMARIZERS[summarizer]() if summarizer is not None else None
    return CompactionEnv(summarizer=s, session_id="contract", clock=LogicalClock(), seed=7)


# -- generated transcripts -----------------------------------------------------------------

TOOLS = ("bash", "read_file", "memory", "edit")


def _text(tag: str, n: int) -> str:
    return (tag + " " + "lorem ipsum dolor sit amet " * (n // 27 + 1))[:n]


@st.composite
def transcripts(draw: st.DrawFn) -> list[Message]:
    """System + random user / assistant / tool-call rounds with valid pairing; outputs range
    from empty to 8,000 bytes so that small windows overflow. Some transcripts reuse call ids
    across messages as some providers do (every message's calls ``call_0``, ``call_1``...)."""
    msgs = [Message("system", _text("system prompt", draw(st.integers(5, 300))))]
    reuse_ids = draw(st.sampled_from((False, False, True)))
    n_steps = draw(st.integers(0, 22))
    cid = 0
    for step in range(n_steps):
        kind = draw(st.sampled_from(("user", "text", "tools", "tools", "tools")))
        if kind == "user":
            msgs.append(Message("user", _text(f"user {step}", draw(st.integers(0, 1500)))))
        elif kind == "text":
            msgs.append(Message("assistant", _text(f"thinking {step}", draw(st.integers(0, 800)))))
        else:
            k = draw(st.integers(1, 3))
            calls = []
            for _ in range(k):
                cid += 1
                args = '{"cmd": "' + _text("x", draw(st.integers(0, 300))) + '"}'
                call_id = f"call_{len(calls)}" if reuse_ids else f"call_{cid}"
                calls.append(ToolCall(call_id, draw(st.sampled_from(TOOLS)), args))
            msgs.append(Message("assistant", _text(f"step {step}", draw(st.integers(0, 200))), tuple(calls)))
            role = draw(st.sampled_from(("tool", "user")))
            for tc in calls:
                size = draw(st.one_of(st.integers(0, 400), st.sampled_from((2000, 6000, 8000))))
                msgs.append(Message(role, _text(f"out {tc.id}", size), (), tc.id, draw(st.booleans())))
    return msgs


# -- the checks ----------------------------------------------------------------------------


def check_compaction(
    kind: str, policy: Policy, history: list[Message], c: Compaction, method: str, *, fresh: bool
) -> None:
    """Every property a single compaction result must have."""
    assert isinstance(c, Compaction) and isinstance(c.view, tuple)
    view = list(c.view)
    if history and history[0].role == "system":
        assert view and view[0] == history[0], "the system message must stay first"
    ids = [tc.id for m in history if m.role == "assistant" for tc in m.tool_calls]
    reused = len(ids) != len(set(ids))
    if not pairing_problems(history) and not (reused and kind in GLOBAL_ID_REPAIR):
        assert pairing_problems(view) == [], f"{kind}.{method} broke tool pairing"
    if policy.claims_budget:
        budget = policy.budget_tokens()
        assert budget is not None and estimate_tokens(view) <= budget
    rec = c.record
    if rec is None:
        assert method == "force" and kind in FORCE_WITHOUT_RECORD, f"{kind}.{method} returned no record"
        return
    assert rec.msgs_before == len(history)
    assert rec.msgs_after == len(view)
    assert rec.tokens_before == estimate_tokens(history)
    assert rec.tokens_after == estimate_tokens(view)
    assert isinstance(rec.tier, Tier)
    if fresh and rec.tier == Tier.NONE:
        assert view == history, f"{kind}.{method}: tier NONE on a fresh runner must leave the input as is"


@pytest.mark.parametrize(("kind", "params"), CONFIGS, ids=CONFIG_IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=transcripts())
def test_contract(kind: str, params: dict[str, Any], history: list[Message]) -> None:
    policy = make_policy(kind, **params)
    assert pairing_problems(history) == []
    for method in MODES:
        snapshot = copy.deepcopy(history)
        c1 = _compact(policy.start(make_env()), method, history)
        assert history == snapshot, f"{kind}.{method} mutated its input"
        check_compaction(kind, policy, history, c1, method, fresh=True)
        c2 = _compact(policy.start(make_env()), method, list(snapshot))
        assert c1.view == c2.view, f"{kind}.{method} is not deterministic"
        if c1.record is not None and c2.record is not None:
            assert c1.record.to_json() == c2.record.to_json()
    # a precomputed token count gives the same result
    c3 = policy.start(make_env()).compact(history, tokens=estimate_tokens(history))
    assert c3.view == policy.start(make_env()).compact(history).view
    # a stateful runner called twice (view mode: the history grows; write-back: it starts
    # with the previous view) keeps the contract too
    cut = len(history) // 2
    while cut < len(history) and history[cut].tool_call_id:
        cut += 1  # an agent loop never compacts between a call and its results
    for write_back in (False, True):
        runner = policy.start(make_env())
        first = runner.compact(history[:cut])
        second_input = (list(first.view) + history[cut:]) if write_back else list(history)
        snapshot = copy.deepcopy(second_input)
        c4 = runner.compact(second_input)
        assert second_input == snapshot
        check_compaction(kind, policy, second_input, c4, "auto", fresh=False)


@pytest.mark.parametrize(("kind", "params"), CONFIGS, ids=CONFIG_IDS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=transcripts())
def test_contract_when_every_summary_fails(kind: str, params: dict[str, Any], history: list[Message]) -> None:
    """The summary policies' fallbacks keep the same contract."""
    policy = make_policy(kind, **params)
    for method in ("auto", "force"):
        snapshot = copy.deepcopy(history)
        c = _compact(policy.start(make_env(None)), method, history)
        assert history == snapshot
        check_compaction(kind, policy, history, c, method, fresh=True)


@pytest.mark.parametrize("kind", sorted(registry()))
def test_one_entry_point_and_force_excludes_manual(kind: str) -> None:
    runner = make_policy(kind).start(CompactionEnv())
    assert isinstance(runner, PolicyRun), f"{kind} runner does not dispatch through PolicyRun.compact"
    history = [Message("system", "s"), Message("user", "u")]
    with pytest.raises(ConfigError, match="force and manual exclude each other"):
        runner.compact(history, force=True, manual=True)


def test_progressive_dispatch_follows_harness9() -> None:
    """force is CompactForce (no record), manual is /compact (CompactWithRecord, tier by usage)."""
    history = [Message("system", "s"), *(Message("user", f"u{i}") for i in range(10))]
    runner = make_policy("progressive", context_window_tokens=2000).start(make_env())
    assert runner.compact(history, force=True).record is None
    manual = runner.compact(history, manual=True)
    assert manual.record is not None and manual.tier == Tier.NONE and list(manual.view) == history


def test_every_registered_policy_is_covered_and_described() -> None:
    kinds = {k for k, _ in CONFIGS}
    assert kinds == set(registry())
    for k in (
        "progressive",
        "token_budget",
        "observation_masking",
        "clear_tool_uses",
        "window",
        "summary_single_threshold",
        "hybrid",
        "keep_all",
        "drop_all",
    ):
        assert k in registry()
    for k, cls in registry().items():
        assert cls.kind == k and cls.source, f"{k} lacks a source line"
        assert cls.__doc__ and len(cls.__doc__.strip()) > 20, f"{k} lacks a docstring"


# -- the agent loop ------------------------------------------------------------------------


def agent_turns(seed: int, n_turns: int = 40) -> tuple[list[Message], list[list[Message]]]:
    """A deterministic agent transcript: the start ([system, task]) and the messages each turn
    appends (an assistant message, its tool results, sometimes a user follow-up)."""
    rng = random.Random(seed)
    start = [
        Message("system", "You are a coding agent."),
        Message("user", "Fix the failing test in tests/test_io.py; never touch setup.py."),
    ]
    turns: list[list[Message]] = []
    cid = 0
    for t in range(n_turns):
        calls = []
        for _ in range(rng.choice((0, 1, 1, 1, 2))):
            cid += 1
            calls.append(ToolCall(f"t{cid}", rng.choice(TOOLS), '{"command": "grep -n foo src/mod_%d.py"}' % t))
        turn = [Message("assistant", _text(f"turn {t}: I'll check the next file", rng.randint(20, 300)), tuple(calls))]
        for tc in calls:
            turn.append(Message("tool", _text(f"output of {tc.id}", rng.choice((100, 800, 2500, 4000))), (), tc.id))
        if rng.random() < 0.1:
            turn.append(Message("user", _text(f"also remember detail {t}", 120)))
        turns.append(turn)
    return start, turns


LOOP_PARAMS: dict[str, dict[str, Any]] = {k: v[0] for k, v in SMALL.items()}
LOOP_PARAMS["window"] = {"keep_first": 1, "keep_last": 10}


def _loop_config(kind: str) -> dict[str, Any]:
    return LOOP_PARAMS.get(kind, dict(next(p for k, p in CONFIGS if k == kind)))


def _summarizer_available(name: str) -> bool:
    try:
        SUMMARIZERS[name]()
    except Exception:  # noqa: BLE001 - the offline summarizer is optional while it is written
        return False
    return True


@pytest.mark.parametrize("summarizer", ["fake", "offline"])
@pytest.mark.parametrize("write_back", [False, True], ids=["view_mode", "write_back"])
@pytest.mark.parametrize("kind", sorted(registry()))
def test_agent_loop_really_compacts(kind: str, write_back: bool, summarizer: str) -> None:
    if not _summarizer_available(summarizer):
        pytest.skip(f"summarizer {summarizer!r} not available")
    policy = make_policy(kind, **_loop_config(kind))
    runner = policy.start(make_env(summarizer))
    start, turns = agent_turns(seed=11)
    history = list(start)
    effective = 0
    for turn in turns:
        # like an agent loop: compact before each assistant message
        c = runner.compact(history)
        check_compaction(kind, policy, history, c, "auto", fresh=False)
        assert c.record is not None
        view = list(c.view)
        if c.record.tier != Tier.NONE and (
            len(view) < len(history) or estimate_tokens(view) < estimate_tokens(history)
        ):
            effective += 1
        if kind in NEVER_COMPACT_HERE:
            assert view == history and c.record.tier == Tier.NONE
        history = (view if write_back else history) + turn
    c = runner.compact(history, manual=True)
    check_compaction(kind, policy, history, c, "manual", fresh=False)
    if kind in NEVER_COMPACT_HERE:
        assert effective == 0 and list(c.view) == history
    else:
        assert effective > 0, f"{kind} never compacted in a {len(turns)}-turn loop"
