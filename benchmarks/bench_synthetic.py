"""Generation speed and size of the synthetic presets (a plain script; never run by the tests).

Usage: ``python benchmarks/bench_synthetic.py [--seeds N] [--presets small,long,marathon]``.
Prints one row per preset: turns, messages, MB (UTF-8 bytes harness9 counts), estimated tokens
(harness9's bytes/4), tool outputs above 10,000 / between 4,000 and 10,000 bytes, seconds per
task (best of N seeds) and turns per second.
"""

from __future__ import annotations

import argparse
import time

from h9eval.tasks.synthetic import PRESETS, generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds per preset (default 3); the time is the best run")
    ap.add_argument("--presets", default=",".join(PRESETS), help="comma-separated preset names")
    args = ap.parse_args()
    print(
        f"{'preset':<9} {'turns':>6} {'messages':>9} {'MB':>7} {'est_tokens':>11} {'>10k':>5} {'4k-10k':>6} "
        f"{'seconds':>8} {'turns/s':>9}"
    )
    for name in args.presets.split(","):
        best = float("inf")
        task = None
        for seed in range(args.seeds):
            t0 = time.perf_counter()
            task = generate(name, seed)
            best = min(best, time.perf_counter() - t0)
        assert task is not None
        md = task.metadata
        print(
            f"{name:<9} {md['n_turns']:>6} {md['n_messages']:>9} {md['total_bytes'] / 1e6:>7.2f} "
            f"{md['estimated_tokens']:>11,} "
            f"{md['n_outputs_over_10000_bytes']:>5} {md['n_outputs_4000_to_10000_bytes']:>6} {best:>8.3f} "
            f"{md['n_turns'] / best:>9,.0f}"
        )


if __name__ == "__main__":
    main()
