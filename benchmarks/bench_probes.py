"""How probing scales with the session's length (issue 28): recall probes every 20 calls on
synthetic tasks of growing length, timed apart from the replay, and the growth exponent between
sizes (1.0 = linear in the number of turns, 2.0 = quadratic).

Run: ``python benchmarks/bench_probes.py [TURNS ...]`` (default 1250 2500 5000). Not part of the
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
Now the views of a replay share one :class:`h9eval.tasks.text.ViewTexts`: whether a term is
in a message (or a fuzzy alignment of it reaches the threshold there) is kept per message, and
each checkpoint searches only the messages its view did not hold before (results identical: 84
probe tables, 691,180 rows, of 7 synthetic and recorded tasks x 7 policies x both history modes
were byte-identical before and after). What remains quadratic is inherent in the workload: the
probe count per checkpoint grows with the session (facts accumulate), and each term that is
absent from the view is still compared with each new message once.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import NamedTuple

from h9eval.compaction.policies import make_policy
from h9eval.probes.runner import make_probe_fn
from h9eval.runs.replay import replay
from h9eval.tasks.synthetic import generate

EVERY_K = 20
WINDOW_TOKENS = 100_000


class ProbeTiming(NamedTuple):
    """One size's figures: wall and CPU seconds of the replay with probes and without."""

    wall_s: float
    bare_wall_s: float
    cpu_s: float
    bare_cpu_s: float
    rows: int


def probe_seconds(n_turns: int, *, seed: int = 0) -> ProbeTiming:
    """Timings of a ``long``-preset task of ``n_turns`` turns under harness9's default policy at
    a 100,000-token window, replayed without probes and with recall probes every 20 calls."""
    task = generate("long", seed=seed, n_turns=n_turns)
    pol = make_policy("progressive", context_window_tokens=WINDOW_TOKENS)
    w0, c0 = time.perf_counter(), time.process_time()
    replay(task, pol)
    w1, c1 = time.perf_counter(), time.process_time()
    res = replay(task, pol, probe_fn=make_probe_fn(["recall"]), probe_every_k=EVERY_K, max_probes=10**9)
    w2, c2 = time.perf_counter(), time.process_time()
    return ProbeTiming(w2 - w1, w1 - w0, c2 - c1, c1 - c0, len(res.probes))


def main(argv: list[str]) -> int:
    """Print one row per size: wall and CPU seconds with probes, of the replay alone, of the
    probes (the difference), rows, the growth exponent of the probes' CPU seconds from the size
    before, and the 1-minute load average when the row was done (the machine is shared)."""
    sizes = [int(a) for a in argv] or [1250, 2500, 5000]
    print(
        f"{'turns':>6} {'wall s':>7} {'CPU s':>6} {'replay CPU s':>13} {'probes CPU s':>13} {'rows':>8} "
        f"{'exponent':>9} {'load':>5}"
    )
    prev: tuple[int, float] | None = None
    for n in sizes:
        t = probe_seconds(n)
        probes = max(t.cpu_s - t.bare_cpu_s, 1e-9)
        exp = "" if prev is None else f"{math.log(probes / prev[1]) / math.log(n / prev[0]):.2f}"
        print(
            f"{n:>6} {t.wall_s:>7.1f} {t.cpu_s:>6.1f} {t.bare_cpu_s:>13.1f} {probes:>13.1f} {t.rows:>8} {exp:>9} "
            f"{os.getloadavg()[0]:>5.1f}",
            flush=True,
        )
        prev = (n, probes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
