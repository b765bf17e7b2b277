"""Closed-loop speed: one long scripted episode at a 128k window (steps per second, and whether the
per-step cost stays flat as the history grows).

``python benchmarks/bench_closedloop.py`` runs ``fact_chain`` at its default scale with more
hops (about 200 steps) under harness9's default policy at a 128,000-token window and under
``keep_all``, timing each agent step (compaction, serialisation, the agent, the world), and prints
steps/s and the median step time of the first and last quarter of the episode.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from h9eval.closedloop.agents import ScriptedAgent
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
    ep = run_episode(make_world("fact_chain", **params), agent, policy, seed=seed, max_steps=400, summarizer="offline", history_mode="write_back")
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
    }


if __name__ == "__main__":
    for name, pol in (("harness9-default@128k", {"kind": "progressive", "context_window_tokens": 128_000}),
                      ("harness9-default@32k", {"kind": "progressive", "context_window_tokens": 32_000}), ("keep_all", "keep_all")):
        m = measure(pol)
        print(f"{name}: {m['steps']:.0f} steps in {m['seconds']:.2f} s ({m['steps_per_s']:.0f} steps/s); median step "
              f"{m['first_quarter_ms']:.1f} ms in the first quarter, {m['last_quarter_ms']:.1f} ms in the last "
              f"({m['first_quarter_ms_per_10k_tokens']:.1f} and {m['last_quarter_ms_per_10k_tokens']:.1f} ms per 10k tokens of view); "
              f"peak {m['peak_tokens_sent']:.0f} tokens")
