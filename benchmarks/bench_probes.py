"""How probing scales with the session's length (issue 28): recall probes every 20 calls on
synthetic tasks of growing length, timed apart from the replay, and the growth exponent between
sizes (1.0 = linear in the number of turns, 2.0 = quadratic).

Run: ``python benchmarks/bench_probes.py [TURNS ...]`` (default 250 500 1000). Not part of the
test suite; the figures depend on the machine's load (2 shared cores here).

What a profile (cProfile, 600 and 1,250 turns) showed: almost all probe time was the fuzzy
matcher (``TextIndex.fuzzy_present``: rapidfuzz ``partial_ratio_alignment`` over a whole text),
in two places. (1) Marking probes answerable against the uncompacted history at each
checkpoint: exact matches were already found once in the whole transcript (``TranscriptText``),
but a term not exactly present was aligned against the whole prefix again at every checkpoint:
O(probes x prefix) per checkpoint, cubic in the turns over a replay (measured exponent 3.05
between 500 and 1,000 turns, 47 s of probing at 1,000). Now each term is aligned against each
chunk of the transcript once (``TranscriptText.fuzzy_in_prefix``). (2) Scoring recall on the
view: O(probes x view) per checkpoint, the view bounded by the window; over a replay this grows
with the number of live facts times the checkpoints, so it is still quadratic in the turns
(what remains: a fuzzy index searched per message and cached across checkpoints, since most of
a view's messages recur in the next checkpoint's view).
"""

from __future__ import annotations

import math
import sys
import time

from h9eval.compaction.policies import make_policy
from h9eval.probes.runner import make_probe_fn
from h9eval.runs.replay import replay
from h9eval.tasks.synthetic import generate

EVERY_K = 20
WINDOW_TOKENS = 100_000


def probe_seconds(n_turns: int, *, seed: int = 0) -> tuple[float, float, int]:
    """(replay wall seconds with probes, without, probe rows) for a ``long``-preset task of
    ``n_turns`` turns under harness9's default policy at a 100,000-token window."""
    task = generate("long", seed=seed, n_turns=n_turns)
    pol = make_policy("progressive", context_window_tokens=WINDOW_TOKENS)
    t0 = time.perf_counter()
    replay(task, pol)
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = replay(task, pol, probe_fn=make_probe_fn(["recall"]), probe_every_k=EVERY_K, max_probes=10**9)
    return time.perf_counter() - t0, bare, len(res.probes)


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [250, 500, 1000]
    print(f"{'turns':>6} {'with probes s':>14} {'replay s':>9} {'probes s':>9} {'rows':>7} {'exponent':>9}")
    prev: tuple[int, float] | None = None
    for n in sizes:
        total, bare, rows = probe_seconds(n)
        probes = max(total - bare, 1e-9)
        exp = "" if prev is None else f"{math.log(probes / prev[1]) / math.log(n / prev[0]):.2f}"
        print(f"{n:>6} {total:>14.1f} {bare:>9.1f} {probes:>9.1f} {rows:>7} {exp:>9}")
        prev = (n, probes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
