"""CPU time of one `none`-tier call of harness9's ProgressiveCompactor (the no-op path).

Two shapes of input: the same history list growing by one message per call (as a replay passes
it, here without the token count a replay also passes; between n and 2n messages) and a fresh list
of fresh message objects each call (as the conformance cases do). Prints
microseconds of process CPU time per call (median of rounds) and the 1-minute load average, since
on a shared machine CPU time is the figure to read.

    python benchmarks/bench_none_tier.py [--messages 100] [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from h9eval.compaction.base import CompactionEnv, LogicalClock
from h9eval.compaction.policies.progressive import ProgressiveCompactor
from h9eval.core.messages import Message


def _history(n: int) -> list[Message]:
    msgs = [Message("system", "You are a coding agent.")]
    for i in range(1, n):
        msgs.append(Message("user" if i % 2 else "assistant", f"message {i}: " + "lorem ipsum dolor " * 8))
    return msgs


def _round(n_msgs: int, calls: int, *, fresh: bool) -> float:
    """Microseconds of CPU per call over ``calls`` no-op calls."""
    policy = ProgressiveCompactor(context_window_tokens=10_000_000)
    run = policy.start(CompactionEnv(session_id="bench", clock=LogicalClock(), seed=1))
    base = _history(n_msgs)
    grown = list(base)
    # the fresh shape: prebuilt copies, so building them is not timed
    copies = [[Message(m.role, m.content) for m in base] for _ in range(calls)] if fresh else []
    t0 = time.process_time()
    for i in range(calls):
        if fresh:
            out = run.compact(copies[i])
        else:
            if i % n_msgs == 0:
                grown = list(base)  # keep the history between n and 2n messages
            grown.append(base[1 + i % (n_msgs - 1)])
            out = run.compact(grown)
        assert out.record is not None and out.record.tier == 0
    return (time.process_time() - t0) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    load = os.getloadavg()[0]
    for fresh in (False, True):
        times = [_round(a.messages, a.calls, fresh=fresh) for _ in range(a.rounds)]
        shape = "fresh messages per call" if fresh else "one growing history"
        print(
            f"{shape:>24}: {statistics.median(times):6.2f} us CPU per call (median of {a.rounds}; "
            f"min {min(times):.2f}), {a.messages} messages, load {load:.1f}"
        )


if __name__ == "__main__":
    main()
