"""All h9eval benchmarks in one table (``make bench``; never run by ``make test``).

Prints ONE markdown table and writes it into ``benchmarks/README.md`` and ``docs/benchmarks.md`` (between the
``<!-- bench:begin -->`` / ``<!-- bench:end -->`` markers) with the machine it ran on:

* replay time per call for synthetic sessions of 250, 1,000 and 4,000 calls, with
  ``keep_all`` (the replay's own overhead) and ``progressive`` (write-back, a window small
  enough that it compacts), and the per-call ratio 4000/250 (≈ 1 means linear total time);
* the largest recorded session: replay time relative to the time just to load it;
* sweep throughput (cells per second, pool start-up included) with 1 and 2 workers;
* summarizer calls saved by the shared cache on a grid that varies only a parameter no
  summary depends on (cache hits / summarizer calls);
* the synthetic generator's own benchmark (``benchmarks/bench_synthetic.py``), when present,
  run as a subprocess.

First the speed targets (``bench_speed.py``): each printed with its measured value, its limit
and "met" or "NOT met".

Usage: ``python benchmarks/run_all.py [--quick] [--no-write]``. ``--quick`` uses 250/1,000
calls only (a smoke run).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from bench_speed import best_seconds  # noqa: E402  (beside this file, found through the path above)

Row = tuple[str, str, str]  # benchmark, value, notes


def machine() -> str:
    """nproc, CPU model (from /proc/cpuinfo), Python version and platform."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or cpu
    return (
        f"{os.cpu_count()} CPUs (nproc), {cpu}; Python {platform.python_version()} on {platform.system()} "
        f"{platform.release()}"
    )


def bench_replay_scaling(sizes: list[int]) -> list[Row]:
    from h9eval.compaction.policies import make_policy
    from h9eval.runs.replay import ReplayConfig, replay
    from h9eval.summarizers.offline import clear_caches
    from h9eval.tasks.synthetic import generate

    rows: list[Row] = []
    per_call: dict[tuple[str, int], float] = {}
    for n in sizes:
        task = generate("small", seed=0, n_turns=n)
        calls = sum(1 for m in task.messages if m.role == "assistant")
        tokens = sum(m.nbytes for m in task.messages) // 4
        for label, pol, cfg in (
            ("keep_all", make_policy("keep_all"), ReplayConfig()),
            # A 100k window against 0.2M-4M tokens: compacts all along (write-back keeps it O(n)).
            (
                "progressive",
                make_policy("progressive", context_window_tokens=100_000),
                ReplayConfig(history_mode="write_back"),
            ),
        ):
            res_holder: list[Any] = []
            t = best_seconds(
                lambda: (clear_caches(), res_holder.append(replay(task, pol, config=cfg))), 3 if n <= 1000 else 1
            )
            res = res_holder[-1]
            n_comp = int(res.calls["compacted"].sum())
            per_call[(label, n)] = t / calls
            rows.append(
                (
                    f"replay {label}, synthetic {n:,} calls",
                    f"{1e3 * t / calls:.3f} ms/call",
                    f"{t:.2f} s total; {tokens:,} tokens; {n_comp} compactions",
                )
            )
    lo, hi = min(sizes), max(sizes)
    for label in ("keep_all", "progressive"):
        ratio = per_call[(label, hi)] / per_call[(label, lo)]
        rows.append(
            (f"replay {label}: per-call time {hi}/{lo}", f"{ratio:.2f}x", "≈ 1 = linear total time (O(1) per call)")
        )
    return rows


def bench_recorded() -> list[Row]:
    from h9eval.compaction.policies import make_policy
    from h9eval.core.paths import recorded_dir
    from h9eval.runs.replay import replay
    from h9eval.summarizers.offline import clear_caches
    from h9eval.tasks import load_tasks_from_spec

    files = [p for p in recorded_dir().rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json", ".traj")]
    if not files:
        return [("largest recorded session", "n/a", f"no recorded sessions under {recorded_dir()}")]
    biggest = max(files, key=lambda p: p.stat().st_size)
    tasks: list[Any] = []
    t_load = best_seconds(lambda: tasks.append(load_tasks_from_spec(str(biggest))), 3)
    task = max(tasks[-1], key=lambda t: len(t.messages))
    calls = sum(1 for m in task.messages if m.role == "assistant")
    rows: list[Row] = []
    for label in ("keep_all", "progressive"):
        pol = make_policy(label)
        t = best_seconds(lambda: (clear_caches(), replay(task, pol)), 3)  # from cold each time
        rows.append(
            (
                f"replay {label} / load, largest recorded session",
                f"{t / t_load:.2f}x",
                f"{biggest.relative_to(recorded_dir())} ({biggest.stat().st_size / 1e6:.1f} MB, {calls} calls): "
                f"load {t_load * 1e3:.0f} ms, replay {t * 1e3:.0f} ms",
            )
        )
    return rows


def _sweep_spec(name: str, seeds: list[int], grid: dict[str, list[Any]], window: int = 16_000) -> dict[str, Any]:
    return {
        "name": name,
        "window": window,
        "tasks": {"synthetic": [{"preset": "small", "seeds": seeds}]},
        "policies": [{"kind": "progressive", "params": {"context_window_tokens": window}, "grid": grid}],
        "history_modes": ["view", "write_back"],
    }


def bench_sweep(tmp: Path) -> list[Row]:
    from h9eval.sweeps.sweep import sweep

    rows: list[Row] = []
    spec = _sweep_spec("bench-throughput", [0, 1, 2, 3], {"warn_frac": [0.5, 0.6], "min_tail_messages": [4, 6]})
    for workers in (1, 2):
        out = tmp / f"throughput-{workers}"
        t0 = time.perf_counter()
        r = sweep(spec, out_dir=out, workers=workers, progress=False, resume=False)
        t = time.perf_counter() - t0
        assert r.failed == 0, r.failures
        rows.append(
            (
                f"sweep throughput, {workers} worker{'s' if workers > 1 else ''}",
                f"{r.n_cells / t:.1f} cells/s",
                f"{r.n_cells} cells (synthetic small × progressive grid × 2 modes) in {t:.1f} s, start-up and "
                "consolidation included",
            )
        )
    # Only summary_timeout_s varies (no summary depends on it), so every summary request could
    # repeat across cells. With offloads on, placeholders name the per-run session folder and
    # the requests differ; with both offload thresholds above every output they do not.
    for label, fixed in (
        ("offloads on", {}),
        ("offloads off", {"offload_threshold_bytes": 10**9, "offload_hook_threshold_bytes": 10**9}),
    ):
        spec = _sweep_spec(f"bench-cache-{len(fixed)}", [0, 1], {"summary_timeout_s": [60.0, 90.0, 120.0, 150.0]})
        spec["policies"][0]["params"].update(fixed)
        r = sweep(spec, out_dir=tmp / f"cache-{len(fixed)}", workers=1, progress=False)
        calls = r.load().calls
        hits, total = int(calls["summarizer_cache_hits"].sum()), int(calls["summarizer_calls"].sum())
        rows.append(
            (
                f"summarizer calls saved by the cache ({label})",
                f"{hits / total:.0%}" if total else "n/a",
                f"{hits} hits / {total} summarizer calls; {r.n_cells} cells varying only summary_timeout_s (4 "
                "values), 1 worker",
            )
        )
    return rows


def bench_synthetic_generator() -> tuple[list[Row], str]:
    script = HERE / "bench_synthetic.py"
    if not script.exists():
        return [], ""
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if proc.returncode != 0:
        return [
            ("synthetic generator", "failed", proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "")
        ], ""
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    rows: list[Row] = []
    header = lines[0].split() if lines else []
    for ln in lines[1:]:
        cells = ln.split()
        if len(cells) != len(header):
            continue
        d = dict(zip(header, cells))
        if {"preset", "seconds", "turns"} <= set(d):
            rows.append(
                (
                    f"synthetic generator, preset {d['preset']}",
                    f"{float(d['seconds']):.3f} s/task",
                    f"{d['turns']} turns, {d.get('MB', '?')} MB, {d.get('turns/s', '?')} turns/s "
                    "(benchmarks/bench_synthetic.py)",
                )
            )
    return rows, proc.stdout


def speed_targets(*, quick: bool = False) -> list[Any]:
    """The targets of the speed issue (``bench_speed``), each with its value and met / not met."""
    import bench_speed as bs
    from h9eval.core.paths import recorded_dir, shared_dir

    # the long replays: the shared case (Go's expectations and Go's time) and recorded sessions
    # replayed like it, each timed in fresh processes (as a user meets it) and warm in this one
    replays = sorted((shared_dir() / "reference" / "replay").glob("*.json.xz"))
    with tempfile.TemporaryDirectory(prefix="h9eval-bench-replays-") as d:
        cases = bs.long_replay_cases(Path(d), replays, recorded_dir())
        targets = bs.bench_long_replays(cases[:2] if quick else cases, repeat=3 if quick else 7)
    with tempfile.TemporaryDirectory(prefix="h9eval-bench-startup-") as d:
        targets += bs.bench_startup(Path(d), repeat=3 if quick else 5)
    targets += bs.bench_synthetic_replays([1, 2] if quick else [1, 2, 3], steps=140, repeat=3 if quick else 5)
    # Every registered policy in both modes through run_task; quick: the two sizes are smaller.
    small, large = (100, 400) if quick else (250, 4_000)
    targets += bs.bench_per_call_ratio(
        small, large, on_result=lambda t: print(" | ".join(t.row()), file=sys.stderr, flush=True)
    )
    files = [p for p in recorded_dir().rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json", ".traj")]
    if files:
        targets += bs.bench_recorded_load(max(files, key=lambda p: p.stat().st_size))
    with tempfile.TemporaryDirectory(prefix="h9eval-bench-sweeps-") as d:
        targets += bs.bench_sweeps(Path(d), ROOT / "examples" / "sweep-small.toml", n_tasks=2 if quick else 4)
    return targets


def table(rows: list[Row]) -> str:
    out = ["| benchmark | value | notes |", "|---|---:|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(out)


def write_readme(text: str) -> None:
    """The table into ``benchmarks/README.md`` and, between the same markers, the project's
    benchmarks page (``docs/benchmarks.md``, linked from the README)."""
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    top = ROOT / "docs" / "benchmarks.md"
    if top.exists() and begin in top.read_text():
        old = top.read_text()
        top.write_text(
            re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: f"{begin}\n{text}\n{end}", old, flags=re.S)
        )
    readme = HERE / "README.md"
    if readme.exists() and begin in readme.read_text():
        old = readme.read_text()
        new = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: f"{begin}\n{text}\n{end}", old, flags=re.S)
    else:
        new = (
            "# Benchmarks\n\n"
            "Run with `make bench` (or `python benchmarks/run_all.py`); never part of `make test`.\n"
            "`run_all.py` rewrites the table below. Times are the best of 3 runs where cheap enough.\n\n"
            f"{begin}\n{text}\n{end}\n"
        )
    readme.write_text(new)


def main() -> int:
    ap = argparse.ArgumentParser(description="Run every h9eval benchmark and print one table.")
    ap.add_argument("--quick", action="store_true", help="smaller sessions (250 and 1,000 calls)")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite benchmarks/README.md")
    args = ap.parse_args()

    rows: list[Row] = []
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    rows += [t.row() for t in speed_targets(quick=args.quick)]
    rows += bench_replay_scaling([250, 1000] if args.quick else [250, 1000, 4000])
    rows += bench_recorded()
    with tempfile.TemporaryDirectory(prefix="h9eval-bench-") as d:
        rows += bench_sweep(Path(d))
        shutil.rmtree(d, ignore_errors=True)
    gen_rows, _ = bench_synthetic_generator()
    rows += gen_rows
    from h9eval.core.provenance import git_state

    g = git_state()
    text = (
        f"Machine: {machine()}.  \n"
        f"h9eval commit {(g['git_commit'] or 'unknown')[:12]}{' (dirty)' if g['git_dirty'] else ''}; "
        f"{time.strftime('%Y-%m-%d')}; all benchmarks took {time.perf_counter() - started:.0f} s; 1-minute load "
        f"average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after (2.0 would be two busy cores).\n\n"
        + table(rows)
    )
    print(text)
    if not args.no_write:
        write_readme(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
