"""Corpus scale: a sweep over 1,000 dataset tasks on the process pool and on a local Dask cluster.

The corpus is a parquet file in ``nebius/SWE-rebench-openhands-trajectories``' row schema, made of
seeded synthetic sessions (preset ``small``: 40 calls, ~38k tokens each), so the benchmark needs no
download. Each configuration runs as its own fresh process (as a user runs ``h9eval sweep``) and
reports its wall time, tasks per minute, the parent's peak resident memory and the largest
worker's (``ru_maxrss`` of the process and of its children). Parent memory should stay flat in the
number of tasks: the parent reads one row at a time to plan the cells and consolidates the tables
streaming.

Usage: ``python benchmarks/bench_corpus.py [--sizes 250,1000] [--no-dask] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

_RUN = r"""
import json, resource, sys, time
from h9eval.sweeps.sweep import sweep
spec, out, workers, scheduler = json.loads(sys.argv[1])
t0 = time.perf_counter()
r = sweep(spec, out_dir=out, workers=workers, scheduler=scheduler, progress=False, resume=False)
wall = time.perf_counter() - t0
if r.failed:
    raise SystemExit(f"{r.failed} cells failed: {r.failures[:2]}")
me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"wall_s": wall, "cells": r.n_cells, "parent_mb": me, "worker_mb": kids}))
"""


def make_corpus(path: Path, n: int) -> None:
    """``n`` synthetic sessions as rows of the SWE-rebench OpenHands schema (OpenAI messages)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from h9eval.tasks.synthetic import generate

    rows = []
    for seed in range(n):
        t = generate("small", seed=seed)
        msgs = []
        for m in t.messages:
            calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls
            ] or None
            msgs.append(
                {
                    "role": m.role,
                    "content": m.content,
                    "tool_calls": calls,
                    "tool_call_id": m.tool_call_id if m.role == "tool" else None,
                    "name": None,
                }
            )
        rows.append(
            {
                "trajectory_id": f"synthetic-small-{seed}",
                "instance_id": f"synthetic__small-{seed}",
                "repo": "h9eval/synthetic",
                "trajectory": msgs,
                "tools": [],
                "model_patch": "",
                "exit_status": "submit",
                "resolved": seed % 2,
            }
        )
    pq.write_table(pa.Table.from_pylist(rows), path, compression="zstd")


def _spec(corpus: Path, n: int) -> dict[str, Any]:
    return {
        "name": f"corpus-{n}",
        "window": {"peak_frac": 0.5},
        "tasks": {"datasets": [{"path": str(corpus), "n": n, "seed": 0}]},
        "policies": [{"kind": "progressive"}],
    }


def run_one(corpus: Path, n: int, workers: int, scheduler: str | None, tmp: Path) -> dict[str, Any]:
    out = tmp / f"out-{n}-{workers}-{scheduler or 'pool'}"
    arg = json.dumps([_spec(corpus, n), str(out), workers, scheduler])
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _RUN, arg], capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"corpus sweep failed: {p.stderr[-2000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res.update(
        n_tasks=n,
        workers=workers,
        executor=scheduler or "pool",
        process_s=time.perf_counter() - t0,
        tasks_per_min=60 * n / res["wall_s"],
    )
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="250,1000", help="task counts (comma-separated); the largest is timed fully")
    ap.add_argument("--no-dask", action="store_true", help="skip the Dask run")
    ap.add_argument("--json", action="store_true", help="print one JSON list instead of a table")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    big = sizes[-1]
    results = []
    with tempfile.TemporaryDirectory(prefix="h9eval-corpus-") as td:
        tmp = Path(td)
        corpus = tmp / "swe_rebench_openhands-corpus.parquet"
        t0 = time.perf_counter()
        make_corpus(corpus, big)
        made = time.perf_counter() - t0
        os.environ["H9EVAL_DATASET_CACHE"] = str(tmp / "cache")
        for n in sizes[:-1]:
            results.append(run_one(corpus, n, 2, None, tmp))
        results.append(run_one(corpus, big, 1, None, tmp))
        results.append(run_one(corpus, big, 2, None, tmp))
        if not args.no_dask:
            results.append(run_one(corpus, big, 2, "local", tmp))
    if args.json:
        print(json.dumps({"corpus_build_s": made, "runs": results}, indent=2))
        return 0
    print(f"corpus of {big} tasks built in {made:.1f} s; {os.cpu_count()} CPUs")
    print("| tasks | executor | workers | wall s | tasks/min | parent peak MB | largest worker MB |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['n_tasks']} | {r['executor']} | {r['workers']} | {r['wall_s']:.1f} | {r['tasks_per_min']:.0f} "
            f"| {r['parent_mb']:.0f} | {r['worker_mb']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
