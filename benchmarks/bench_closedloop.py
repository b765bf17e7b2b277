"""Closed-loop speed: one long scripted episode at a 128k window (steps per second, and whether the
per-step cost stays flat as the history grows).

``python benchmarks/bench_closedloop.py`` runs ``fact_chain`` at its default scale with more
hops (about 200 steps) under harness9's default policy at a 128,000-token window and under
``keep_all``, timing each agent step (compaction, serialisation, the agent, the world), and prints
steps/s and the median step time of the first and last quarter of the episode. It then times, over
the same episode's views, the whole-view serialisation (``serialize_view``, what every step paid
before) against the per-episode ``ViewSerializer`` (each message serialised once), and the scripted
agent's parse of each view text whole (``json.loads``) against its incremental parse (only the
messages a view adds to the previous one): first and last quarter, in ms per step.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from h9eval.closedloop.agents import ScriptedAgent
from h9eval.closedloop.agents.base import ViewSerializer, serialize_view
from h9eval.closedloop.episode import run_episode
from h9eval.closedloop.worlds import FactChain, make_world


class _TimedAgent(ScriptedAgent):
    """The scripted agent, recording the wall time between its calls (one episode step each)."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps: list[float] = []

    def act(self, view_json: str) -> Any:
        self.stamps.append(time.perf_counter())
        return super().act(view_json)


def measure(policy: Any, *, hops: int = 110, gap_steps: int = 88, seed: int = 1) -> dict[str, float]:
    params = {**FactChain.scale.params, "hops": hops, "gap_steps": gap_steps}
    agent = _TimedAgent()
    t0 = time.perf_counter()
    ep = run_episode(
        make_world("fact_chain", **params),
        agent,
        policy,
        seed=seed,
        max_steps=400,
        summarizer="offline",
        history_mode="write_back",
    )
    total = time.perf_counter() - t0
    steps = [b - a for a, b in zip(agent.stamps, agent.stamps[1:])]
    q = max(len(steps) // 4, 1)
    # the view is serialised, parsed and scanned at every step: cost per 10k tokens of view
    per_10k = [d / max(s.tokens_sent, 1) * 1e4 * 1e3 for d, s in zip(steps, ep.steps)]
    return {
        "steps": ep.n_steps,
        "seconds": total,
        "steps_per_s": ep.n_steps / total,
        "first_quarter_ms": statistics.median(steps[:q]) * 1e3,
        "last_quarter_ms": statistics.median(steps[-q:]) * 1e3,
        "first_quarter_ms_per_10k_tokens": statistics.median(per_10k[:q]),
        "last_quarter_ms_per_10k_tokens": statistics.median(per_10k[-q:]),
        "peak_tokens_sent": max(s.tokens_sent for s in ep.steps),
        "success": float(ep.success),
        **_view_text_costs(ep.views, ep.tools),
    }


def _quarters(prefix: str, times: list[float]) -> dict[str, float]:
    q = max(len(times) // 4, 1)
    return {
        f"{prefix}_first_ms": statistics.median(times[:q]) * 1e3,
        f"{prefix}_last_ms": statistics.median(times[-q:]) * 1e3,
    }


def _view_text_costs(views: Any, tools: Any) -> dict[str, float]:
    """Per-step time of the whole-view and the incremental forms over one episode's views."""
    whole, incremental, loads, parse = [], [], [], []
    ser, agent = ViewSerializer(tools), ScriptedAgent()
    for view in views:
        t0 = time.perf_counter()
        text = serialize_view(view, tools)
        t1 = time.perf_counter()
        assert ser(view) == text  # the incremental form is the same text
        t2 = time.perf_counter()
        json.loads(text)
        t3 = time.perf_counter()
        agent._messages(text)
        t4 = time.perf_counter()
        whole.append(t1 - t0)
        incremental.append(t2 - t1)
        loads.append(t3 - t2)
        parse.append(t4 - t3)
    return {
        **_quarters("serialize_whole", whole),
        **_quarters("serialize_incremental", incremental),
        **_quarters("parse_whole", loads),
        **_quarters("parse_incremental", parse),
    }


if __name__ == "__main__":
    for name, pol in (
        ("harness9-default@128k", {"kind": "progressive", "context_window_tokens": 128_000}),
        ("harness9-default@32k", {"kind": "progressive", "context_window_tokens": 32_000}),
        ("keep_all", "keep_all"),
    ):
        m = measure(pol)
        print(
            f"{name}: {m['steps']:.0f} steps in {m['seconds']:.2f} s ({m['steps_per_s']:.0f} steps/s); median step "
            f"{m['first_quarter_ms']:.1f} ms in the first quarter, {m['last_quarter_ms']:.1f} ms in the last "
            f"({m['first_quarter_ms_per_10k_tokens']:.1f} and {m['last_quarter_ms_per_10k_tokens']:.1f} ms per 10k "
            "tokens of view); "
            f"peak {m['peak_tokens_sent']:.0f} tokens"
        )
        print(
            f"  view text per step, first -> last quarter (ms): serialise whole {m['serialize_whole_first_ms']:.2f} "
            f"-> {m['serialize_whole_last_ms']:.2f}, incremental {m['serialize_incremental_first_ms']:.2f} -> "
            f"{m['serialize_incremental_last_ms']:.2f}; agent parse whole {m['parse_whole_first_ms']:.2f} -> "
            f"{m['parse_whole_last_ms']:.2f}, incremental {m['parse_incremental_first_ms']:.2f} -> "
            f"{m['parse_incremental_last_ms']:.2f}"
        )
