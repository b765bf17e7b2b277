"""Differential test: the default behaviour of every policy is unchanged unless an option is set.

``tests/golden/policy_defaults.json`` holds one digest per (policy configuration, transcript
seed): the views, tiers and records (summary-call logs aside) of single compactions, of the
three entry points and of an agent loop in view mode and write-back mode, with a summarizer
and without one. The digests were computed on the commit *before* the peer-fidelity options
were added, so a changed default shows up here as a failure naming the configuration.

The transcripts give every tool call its own id: a reused id is the case whose behaviour was
deliberately corrected (selection by position) and is tested in ``test_peer_references``.
Regenerate (only after a deliberate change of a default) with ``H9EVAL_REGEN_GOLDEN=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from h9eval.compaction.base import Compaction, CompactionEnv, LogicalClock
from h9eval.compaction.policies import make_policy, registry
from h9eval.core.messages import Message, ToolCall, messages_to_json
from h9eval.compaction.summary import SummaryReply, SummaryRequest

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "policy_defaults.json"
SEEDS = (1, 2, 3, 4, 5, 6)
TOOLS = ("bash", "read_file", "memory", "edit")

#: configurations per kind: sizes only (small windows so that compaction triggers), plus the
#: options that existed before the peer-fidelity work
CONFIGS: dict[str, list[dict[str, Any]]] = {
    "progressive": [
        {"context_window_tokens": 3000},
        {"context_window_tokens": 8000, "forced_truncation": "legacy_last1"},
    ],
    "token_budget": [
        {"context_window_tokens": 3000},
        {"context_window_tokens": 3000, "forced_truncation": "legacy_last1"},
    ],
    "observation_masking": [{}, {"keep_recent_turns": 2}, {"keep_recent_turns": 0, "placeholder": "[gone]"}],
    "clear_tool_uses": [
        {"trigger_tokens": 1500, "keep_tool_uses": 2},
        {
            "trigger_tokens": 1000,
            "keep_tool_uses": 1,
            "clear_tool_inputs": True,
            "exclude_tools": ("memory",),
            "clear_at_least_tokens": 300,
        },
    ],
    "window": [{"keep_first": 1, "keep_last": 6}, {"amortized": True, "max_messages": 12, "keep_first": 2}],
    "summary_single_threshold": [
        {"context_window_tokens": 3000},
        {"context_window_tokens": 3000, "keep_last_messages": 3, "anchors": False},
    ],
    "hybrid": [{"context_window_tokens": 3000, "keep_recent_turns": 2}, {"context_window_tokens": 6000}],
    "sliding_window": [{"max_messages": 8}, {"max_messages": 2}],
    "keep_all": [{}],
    "drop_all": [{}],
}


class _Summarizer:
    """Deterministic anchor replies naming what they saw (so the digest pins the head)."""

    summarizer_id = "golden"

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        h = hashlib.sha256(request.user_prompt.encode()).hexdigest()[:10]
        text = (
            "## Anchors\n\n### User Intent\nfix the failing test\n\n"
            f"### Execution Progress\n- saw {len(request.head)} messages\n\n"
            "### Key Decisions\n- N/A\n\n### Tried Solutions\n- N/A\n\n### Next Steps\n- run the tests\n\n"
            f"## Summary\n{request.template} summary {h}"
        )
        return SummaryReply(text=text, input_tokens=len(request.user_prompt) // 4, output_tokens=len(text) // 4)


def _text(tag: str, n: int) -> str:
    return (tag + " " + "lorem ipsum dolor sit amet\n" * (n // 27 + 1))[:n]


def transcript(seed: int, n_turns: int = 36) -> tuple[list[Message], list[list[Message]]]:
    """``(start, turns)``: a system message and a task, then turns of an assistant message with
    0-3 calls (unique ids), their results (role ``tool`` or ``user``), sometimes a user message."""
    rng = random.Random(seed)
    start = [
        Message("system", _text("system prompt", rng.randint(20, 300))),
        Message("user", "Fix the failing test; never touch setup.py."),
    ]
    turns: list[list[Message]] = []
    cid = 0
    for t in range(n_turns):
        calls = []
        for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
            cid += 1
            calls.append(
                ToolCall(f"call_{cid}", rng.choice(TOOLS), json.dumps({"cmd": _text("x", rng.randint(0, 200))}))
            )
        turn = [Message("assistant", _text(f"turn {t}", rng.randint(0, 400)), tuple(calls))]
        role = rng.choice(("tool", "user"))
        for tc in calls:
            size = rng.choice((0, 30, 300, 900, 2500, 6000))
            turn.append(Message(role, _text(f"out {tc.id}", size), (), tc.id, rng.random() < 0.1))
        if rng.random() < 0.15:
            turn.append(Message("user", _text(f"follow-up {t}", rng.randint(10, 600))))
        turns.append(turn)
    return start, turns


def _env(summarizer: bool) -> CompactionEnv:
    return CompactionEnv(
        summarizer=_Summarizer() if summarizer else None, session_id="golden", clock=LogicalClock(), seed=3
    )  # type: ignore[arg-type]


def _state(c: Compaction) -> Any:
    rec = None
    if c.record is not None:
        extra = {k: v for k, v in c.record.extra.items() if k != "summary_calls"}
        rec = [c.record.to_json(), json.loads(json.dumps(extra, sort_keys=True, default=str))]
    return [messages_to_json(c.view), rec]


def digest(kind: str, params: dict[str, Any], seed: int) -> str:
    policy = make_policy(kind, **params)
    start, turns = transcript(seed)
    full = start + [m for t in turns for m in t]
    out: list[Any] = []
    for summ in (True, False):
        for force, manual in ((False, False), (True, False), (False, True)):
            out.append(_state(policy.start(_env(summ)).compact(full, force=force, manual=manual)))
        for write_back in (False, True):
            runner = policy.start(_env(summ))
            history = list(start)
            for turn in turns:
                c = runner.compact(history)
                out.append(_state(c))
                history = (list(c.view) if write_back else history) + turn
            out.append(_state(runner.compact(history, manual=True)))
    blob = json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _cases() -> list[tuple[str, int, dict[str, Any], int]]:
    return [
        (kind, i, params, seed)
        for kind, variants in CONFIGS.items()
        for i, params in enumerate(variants)
        for seed in SEEDS
    ]


def _key(kind: str, i: int, seed: int) -> str:
    return f"{kind}[{i}] seed={seed}"


def _load() -> dict[str, str]:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize(("kind", "i", "params", "seed"), _cases(), ids=[_key(k, i, s) for k, i, _, s in _cases()])
def test_default_behaviour_is_unchanged(kind: str, i: int, params: dict[str, Any], seed: int) -> None:
    got = digest(kind, params, seed)
    if os.environ.get("H9EVAL_REGEN_GOLDEN"):
        golden = _load()
        golden[_key(kind, i, seed)] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(dict(sorted(golden.items())), indent=1) + "\n")
        return
    golden = _load()
    assert _key(kind, i, seed) in golden, f"no golden digest for {_key(kind, i, seed)} (regenerate deliberately)"
    assert got == golden[_key(kind, i, seed)], f"{kind} {params} changed its default behaviour on seed {seed}"


def test_golden_covers_the_policies_it_names() -> None:
    assert set(CONFIGS) <= set(registry())
    golden = _load()
    assert len(golden) == len(_cases())


def test_transcripts_reach_the_interesting_states() -> None:
    """The digests are only worth something if the loops really compact: check a few."""
    start, turns = transcript(1)
    full = start + [m for t in turns for m in t]
    assert len({m.tool_call_id for m in full if m.tool_call_id}) == sum(1 for m in full if m.tool_call_id)
    for kind, params in (
        ("hybrid", CONFIGS["hybrid"][0]),
        ("summary_single_threshold", CONFIGS["summary_single_threshold"][0]),
        ("observation_masking", {}),
    ):
        c = make_policy(kind, **params).start(_env(True)).compact(full)
        assert c.record is not None and int(c.record.tier) > 0, kind
