"""The speed targets of ``make bench`` (each printed with its measured value and met / not met).

* the long replays (the shared harness9 progressive case, 88 steps, and five recorded sessions
  replayed like it) timed inside their compaction calls in fresh processes, against harness9's
  Go code on the same case (timed in the same run when a Go driver is given, else its recorded
  figure from this machine);
* long synthetic replays built like it (one progressive conformance-format case per seed, one
  step per assistant message, each step the full history before it, a window small enough that
  the steps cross every tier), timed the same way;
* per-call time at 4,000 calls over 250 calls, for every registered policy in both history
  modes, through ``h9eval run``'s code path (``run_task`` with an ``out_dir``: the session
  store and the parquet tables included);
* the largest recorded session: its load time over its JSON parse time, and a replay with a
  window small enough to compact over its load time.

Each function takes its sizes as arguments so a smoke test can run it on tiny inputs.
"""

from __future__ import annotations

import dataclasses
import json
import lzma
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h9eval.compaction.policies import task_independent_registry
from h9eval.core.messages import messages_to_json
from h9eval.harness9.conformance import CaseTimer, load_case, run_case
from h9eval.tasks.model import Task

__all__ = [
    "Target",
    "GO_SHARED_REPLAY_MS",
    "time_case",
    "synthetic_replay_case",
    "window_crossing_all_tiers",
    "truncate_calls",
    "bench_shared_replay",
    "recorded_replay_case",
    "long_replay_cases",
    "compare_cold",
    "ReplayComparison",
    "GO_REPLAY_MS",
    "GO_DRIVER_ENV",
    "bench_long_replays",
    "bench_startup",
    "bench_synthetic_replays",
    "bench_per_call_ratio",
    "bench_recorded_load",
    "bench_sweeps",
    "sweep_bench_spec",
    "machine_parallelism",
    "best_seconds",
]

GO_REPLAY_MS = {
    "replay-mini-w50k-t6": 11.84,
    "replay-claude-code-8463c716": 27.27,
    "replay-claude-code-ae4a77f8": 34.88,
    "replay-mini-sqlfluff-1763": 4.97,
    "replay-openhands-3f3d5850": 11.36,
    "replay-openhands-6e578294": 4.63,
}
"""harness9's Go code on each long replay: wall ms inside its compaction calls, the median of 9
fresh processes, measured on 2026-12-02 on this 2-core machine, otherwise idle (load 0.5-0.8),
alternating with h9eval's processes (from run to run the machine's speed moved these by up to a
third: a ratio is best read against Go timed in the same run). The Go code: harness9's
``internal/memory`` package at the commits the spec names (progressive compactor 8dc290f6, the
V2 line the cases pin), built with Go 1.27.3 and a driver for the case format; it gave the
Go-produced ``expected`` of all seven progressive reference cases exactly, the 88-step shared
replay among them. Set :data:`GO_DRIVER_ENV` to time such a driver in the same run instead."""
GO_SHARED_REPLAY_MS = GO_REPLAY_MS["replay-mini-w50k-t6"]
"""The shared long replay's Go figure (the issue's was 25 ms, on a machine loaded by other jobs)."""
GO_DRIVER_ENV = "H9EVAL_GO_DRIVER"
"""An executable that replays a progressive case file with harness9's Go code and prints the
timing line ``h9eval conformance --timing`` prints (``compaction_ns``, ``compaction_cpu_ns``):
when set, the long replays time it in the same run, alternating with h9eval's processes."""

_ANCHOR_REPLY = (
    "## Anchors\n\n### 用户意图\nFix the failing build.\n\n### 执行进度\n- step {n} done\n\n"
    "### 关键决策\n- keep the public API\n\n### 已尝试方案\n- N/A\n\n### 下一步\n- run the tests\n\n"
    "## Summary\nSummary number {n} of the work so far."
)


@dataclass(frozen=True)
class Target:
    """One benchmark target: what was measured, its value, the limit and whether it is met
    (``at_least``: the value must reach the limit; ``limit=None``: shown for information)."""

    name: str
    value: float
    limit: float | None
    unit: str
    notes: str = ""
    at_least: bool = False

    @property
    def met(self) -> bool:
        if self.limit is None:
            return True
        return self.value >= self.limit if self.at_least else self.value <= self.limit

    def row(self) -> tuple[str, str, str]:
        if self.limit is None:
            return (self.name, f"{self.value:.2f} {self.unit}", self.notes)
        verdict = "met" if self.met else "NOT met"
        rel = ">=" if self.at_least else "<="
        return (self.name, f"{self.value:.2f} {self.unit} (target {rel} {self.limit:g}: {verdict})", self.notes)


def time_case(case: dict[str, Any], repeat: int) -> tuple[float, dict[str, int], int]:
    """Median over ``repeat`` runs of the time inside the compaction calls (ms), the tier medians
    of the median run (ns) and the number of steps."""
    runs = []
    for _ in range(repeat):
        timer = CaseTimer()
        run_case(case, timer=timer)
        t = timer.timing("case")
        runs.append((t.compaction_ns, t))
    runs.sort(key=lambda r: r[0])
    _, mid = runs[len(runs) // 2]
    return statistics.median(r[0] for r in runs) / 1e6, mid.tier_median_ns, mid.steps


def _progressive_case(
    history: Sequence[Any], window: int, n_replies: int, name: str, fail_every: int = 0
) -> dict[str, Any]:
    msgs = messages_to_json(history, harness9_roles=True)
    steps = [{"messages": msgs[:i]} for i, m in enumerate(history) if m.role == "assistant"]
    return {
        "kind": "progressive",
        "name": name,
        "tags": ["compact_force:legacy_last1"],
        "input": {
            "config": {
                "context_window": window,
                "warn_threshold": 0.6,
                "soft_threshold": 0.7,
                "full_threshold": 0.8,
                "emergency_threshold": 0.95,
                "min_tail_messages": 6,
                "offloader": True,
                "session_id": name,
            },
            "summarizer": {
                "responses": [_ANCHOR_REPLY.format(n=i) for i in range(n_replies)],
                "fail_on_calls": list(range(fail_every, n_replies + 1, fail_every)) if fail_every else [],
            },
            "steps": steps,
        },
        "expected": {},
    }


def truncate_calls(task: Task, n_calls: int) -> Task:
    """``task`` cut just before its ``n_calls + 1``-th assistant message."""
    seen = 0
    for i, m in enumerate(task.messages):
        if m.role == "assistant":
            seen += 1
            if seen > n_calls:
                return dataclasses.replace(task, messages=task.messages[:i])
    return task


_BANDS = (0.0, 0.60, 0.70, 0.80, 0.95)  # none, warn, soft, full, emergency at default thresholds


def window_crossing_all_tiers(step_tokens: Sequence[int]) -> int:
    """The largest window at which the steps' token counts fall in every tier's band (the final
    step above the emergency threshold); one large tool output can jump a band at some windows."""
    final = step_tokens[-1]
    for i in range(200):
        window = max(1, int(final / (1.0 / 0.95 + 0.01 * i)))
        hit = {sum(t >= b * window for b in _BANDS) for t in step_tokens}
        if hit == {1, 2, 3, 4, 5}:
            return window
    raise ValueError("no window puts a step in every tier band (too few steps?)")


def synthetic_replay_case(seed: int, steps: int, *, preset: str = "long") -> dict[str, Any]:
    """A progressive case like the shared long replay from a synthetic history of ``steps``
    assistant messages, at a window at which the steps cross none, warn, soft, full and
    emergency (:func:`window_crossing_all_tiers`)."""
    from h9eval.tasks.synthetic import generate

    task = truncate_calls(generate(preset, seed=seed), steps)
    step_tokens, total = [], 0
    for m in task.messages:
        if m.role == "assistant":
            step_tokens.append(total // 4)
        total += m.nbytes
    window = window_crossing_all_tiers(step_tokens)
    return _progressive_case(task.messages, window, n_replies=steps, name=f"synthetic-{preset}-{seed}")


def _step_tokens(messages: Sequence[Any]) -> list[int]:
    out, total = [], 0
    for m in messages:
        if m.role == "assistant":
            out.append(total // 4)
        total += m.nbytes
    return out


def recorded_replay_case(path: str | Path, name: str) -> dict[str, Any]:
    """A progressive case like the shared long replay from a recorded session (its longest
    task): one step per assistant message, each the whole history before it, the offloader on,
    every 7th summary failing (the shared case has failures and fallbacks too), at the largest
    window at which the steps cross every tier."""
    from h9eval.core.messages import Message
    from h9eval.runs.replay import ReplayConfig
    from h9eval.tasks import load_tasks_from_spec

    task = max(load_tasks_from_spec(str(path)), key=lambda t: len(t.messages))
    messages = list(task.messages)
    if not messages or messages[0].role != "system":
        # As in a replay (and in harness9's engine), the system prompt goes first when the session
        # has none: harness9's compactor returns a list without one untouched, at every tier, so
        # without it the replay would time no compaction at all.
        messages.insert(0, Message("system", ReplayConfig().system_prompt))
    window = window_crossing_all_tiers(_step_tokens(messages))
    return _progressive_case(messages, window, n_replies=task.n_calls, name=name, fail_every=7)


#: recorded sessions (under shared/data/recorded) replayed like the shared long replay
RECORDED_LONG_REPLAYS = (
    ("claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "replay-claude-code-8463c716"),
    ("claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", "replay-claude-code-ae4a77f8"),
    ("openhands/3f3d5850aca74c6db03728ce9d896373", "replay-openhands-3f3d5850"),
    ("openhands/6e57829462844ed99b8f39e7588cdd14", "replay-openhands-6e578294"),
    ("mini-swe-agent/deepseek_reasoner_dev/sqlfluff__sqlfluff-1763.traj.json", "replay-mini-sqlfluff-1763"),
)


def long_replay_cases(out_dir: Path, shared: Sequence[Path], recorded_root: Path | None) -> list[Path]:
    """The six long replays as case files under ``out_dir``: the shared case(s) (expanded, with
    Go's expectations) and the recorded sessions of :data:`RECORDED_LONG_REPLAYS` that exist."""
    paths = []
    for p in shared:
        dest = out_dir / p.name.removesuffix(".xz")
        dest.write_bytes(lzma.decompress(p.read_bytes()) if p.name.endswith(".xz") else p.read_bytes())
        paths.append(dest)
    for rel, name in RECORDED_LONG_REPLAYS if recorded_root is not None else ():
        src = recorded_root / rel
        if src.exists():
            dest = out_dir / f"{name}.json"
            dest.write_text(json.dumps(recorded_replay_case(src, name)), encoding="utf-8")
            paths.append(dest)
    return paths


@dataclass(frozen=True)
class ColdTiming:
    """Medians over fresh processes of the time inside the compaction calls (ms)."""

    wall_ms: float
    cpu_ms: float
    min_wall_ms: float
    tier_median_ns: dict[str, int]
    steps: int


def _cold_timing(runs: list[dict[str, Any]]) -> ColdTiming:
    runs = sorted(runs, key=lambda r: r["compaction_cpu_ns"])
    mid = runs[len(runs) // 2]
    med = statistics.median
    return ColdTiming(
        wall_ms=med(r["compaction_ns"] for r in runs) / 1e6,
        cpu_ms=med(r["compaction_cpu_ns"] for r in runs) / 1e6,
        min_wall_ms=min(r["compaction_ns"] for r in runs) / 1e6,
        tier_median_ns=mid["tier_median_ns"],
        steps=mid["steps"],
    )


def _timing_line(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env, timeout=600)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("{")), None)
    if line is None:
        raise RuntimeError(f"no timing line from {cmd}: {proc.stdout[-300:]} {proc.stderr[-300:]}")
    return dict(json.loads(line))


def _h9eval_cmd(path: Path, read_prompts: bool) -> list[str]:
    return [sys.executable, "-m", "h9eval", "conformance", "--timing", str(path)] + (
        ["--read-prompts"] if read_prompts else []
    )


def _h9eval_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return env


@dataclass(frozen=True)
class ReplayComparison:
    """One long replay timed in fresh processes, the three kinds alternating round by round:
    h9eval as the scripted summarizer runs it (no prompt built), h9eval with every prompt read
    (as a model client reads it), and harness9's Go code when a driver is given."""

    port: ColdTiming
    port_read: ColdTiming
    go: ColdTiming | None


def compare_cold(path: Path, repeat: int, go_driver: str | None = None) -> ReplayComparison:
    """As :func:`time_case`, but each run in a fresh process (as harness9's Go code is timed:
    nothing warm from an earlier session), h9eval's with the bytecode cache on (as installed):
    ``h9eval conformance --timing``, the same with ``--read-prompts``, and ``go_driver``."""
    env = _h9eval_env()
    kinds: list[tuple[str, list[str], dict[str, str] | None]] = [
        ("port", _h9eval_cmd(path, False), env),
        ("read", _h9eval_cmd(path, True), env),
    ]
    if go_driver:
        kinds.append(("go", [go_driver, str(path)], None))
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k, _, _ in kinds}
    for r in range(repeat):
        # rotate the order so that no kind always runs first (or after the same neighbour)
        for k, cmd, e in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
            runs[k].append(_timing_line(cmd, e))
    return ReplayComparison(
        _cold_timing(runs["port"]), _cold_timing(runs["read"]), _cold_timing(runs["go"]) if go_driver else None
    )


def bench_long_replays(paths: Sequence[Path], repeat: int, go_driver: str | None = None) -> list[Target]:
    """Per long replay: the time inside compaction in fresh processes (CPU, the median of
    ``repeat``: the wall time an idle core gives; the wall time measured on this machine beside
    it), the same with every summary prompt read, and the warm in-process figure (the case
    repeated in this process, caches warm from the earlier runs). The target is 2x Go's time:
    timed in this run when ``go_driver`` (default: the :data:`GO_DRIVER_ENV` variable) is given,
    else the figure recorded in :data:`GO_REPLAY_MS` (none for other cases: no target)."""
    go_driver = go_driver if go_driver is not None else os.environ.get(GO_DRIVER_ENV) or None
    out = []
    for p in paths:
        case = load_case(p)
        name = case.get("name", p.name)
        cmp = compare_cold(p, repeat, go_driver)
        cold, read = cmp.port, cmp.port_read
        time_case(case, 1)  # warm the process's caches first: the warm figure is the best case
        warm, _, _ = time_case(case, repeat)
        if cmp.go is not None:
            go_ms: float | None = cmp.go.wall_ms
            go = f"Go {go_ms:.2f} ms wall ({cmp.go.cpu_ms:.2f} CPU), timed in this run"
        else:
            go_ms = GO_REPLAY_MS.get(name)
            go = f"Go {go_ms:g} ms wall, recorded 2026-12-02 on this machine" if go_ms else "no Go figure recorded"
        ratio = f": {cold.cpu_ms / go_ms:.2f}x Go, prompts read {read.cpu_ms / go_ms:.2f}x Go" if go_ms else ""
        out.append(
            Target(
                f"long replay {name}: time inside compaction, cold process",
                cold.cpu_ms,
                2 * go_ms if go_ms else None,
                "ms CPU",
                f"{cold.steps} steps, median of {repeat} fresh processes; wall {cold.wall_ms:.1f} ms median, "
                f"{cold.min_wall_ms:.1f} ms best; every summary prompt read (as a model client reads it; the "
                f"scripted summarizer reads none, so none is built) {read.cpu_ms:.1f} ms CPU; warm (in-process, "
                f"repeated) {warm:.1f} ms wall; {go}{ratio}; cold tier medians (us, wall): "
                + ", ".join(f"{k} {v / 1e3:.0f}" for k, v in cold.tier_median_ns.items()),
            )
        )
    return out


def bench_shared_replay(paths: Sequence[Path], repeat: int) -> list[Target]:
    out = []
    for p in paths:
        case = load_case(p)
        ms, tiers, steps = time_case(case, repeat)
        out.append(
            Target(
                f"shared long replay {case.get('name', p.name)}: time inside compaction",
                ms,
                2 * GO_SHARED_REPLAY_MS,
                "ms",
                f"{steps} steps, median of {repeat}; Go {GO_SHARED_REPLAY_MS:g} ms on 2 cores, limit 2x; "
                "tier medians (us): " + ", ".join(f"{k} {v / 1e3:.0f}" for k, v in tiers.items()),
            )
        )
    return out


def bench_synthetic_replays(seeds: Sequence[int], steps: int, repeat: int) -> list[Target]:
    """Per seed: the synthetic case's time inside compaction, per step, against the shared
    case's Go figure per step, times 2 (the same work ratio as the shared target)."""
    out = []
    go_per_step_ms = GO_SHARED_REPLAY_MS / 88
    for s in seeds:
        case = synthetic_replay_case(s, steps)
        ms, tiers, n = time_case(case, repeat)
        out.append(
            Target(
                f"synthetic long replay seed {s}: time inside compaction per step",
                ms / n,
                2 * go_per_step_ms,
                "ms/step",
                f"{n} steps, {ms:.0f} ms in all, median of {repeat}; limit 2x Go's per-step figure on the shared case; "
                "tier medians (us): " + ", ".join(f"{k} {v / 1e3:.0f}" for k, v in tiers.items()),
            )
        )
    return out


def _run_seconds(task: Task, policy: str, mode: str, window: int, tmp: Path) -> float:
    from h9eval.runs.run import run_task
    from h9eval.summarizers.offline import clear_caches

    out = tmp / f"{policy}-{mode}-{task.n_calls}"
    # Each run from cold, as one run of a user's: the offline summarizer remembers the texts it
    # analysed, and the sizes share their first 250 calls.
    clear_caches()
    t0 = time.perf_counter()
    run_task(task, policy, summarizer="offline", history_mode=mode, window=window, out_dir=out)
    return time.perf_counter() - t0


def bench_per_call_ratio(
    small_calls: int = 250,
    large_calls: int = 4_000,
    *,
    preset: str = "marathon",
    window: int = 100_000,
    policies: Sequence[str] | None = None,
    modes: Sequence[str] = ("view", "write_back"),
    on_result: Callable[[Target], None] | None = None,
) -> list[Target]:
    """Per-call time at ``large_calls`` over ``small_calls`` through ``run_task`` (one synthetic
    task truncated to each size; a fresh results folder each run; by default every policy that
    runs on any task)."""
    from h9eval.tasks.synthetic import generate

    full = generate(preset, seed=0)
    small, large = truncate_calls(full, small_calls), truncate_calls(full, large_calls)
    out = []
    with tempfile.TemporaryDirectory(prefix="h9eval-bench-") as d:
        tmp = Path(d)
        for pol in policies or sorted(task_independent_registry()):
            for mode in modes:
                # best of 5 and of 3: a 250-call run takes ~50 ms, where one pause of a shared
                # machine shows (best of 2 for both moved a ratio between 0.95x and 1.5x)
                t_small = min(_run_seconds(small, pol, mode, window, tmp) for _ in range(5))
                t_large = min(_run_seconds(large, pol, mode, window, tmp) for _ in range(3))
                ratio = (t_large / large.n_calls) / (t_small / small.n_calls)
                tg = Target(
                    f"per-call time {large.n_calls}/{small.n_calls} calls: {pol}, {mode}",
                    ratio,
                    1.2,
                    "x",
                    f"{1e3 * t_small / small.n_calls:.3f} vs {1e3 * t_large / large.n_calls:.3f} ms/call; window "
                    f"{window:,}",
                )
                out.append(tg)
                if on_result is not None:
                    on_result(tg)
    return out


def _parse_json_file(p: Path) -> int:
    raw = p.read_bytes()
    if p.suffix == ".jsonl":
        return sum(1 for line in raw.splitlines() if line.strip() and json.loads(line) is not None)
    if p.name.endswith(".xz"):
        raw = lzma.decompress(raw)
    json.loads(raw)
    return 1


def best_seconds(fn: Callable[[], Any], repeat: int) -> float:
    """The shortest of ``repeat`` wall-clock timings of ``fn()``, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_recorded_load(path: Path, repeat: int = 5) -> list[Target]:
    """Load over JSON parse, and a compacting replay over load, for one recorded session file."""
    from h9eval.compaction.policies import make_policy
    from h9eval.runs.replay import replay
    from h9eval.summarizers.offline import clear_caches
    from h9eval.tasks import load_tasks_from_spec

    t_parse = best_seconds(lambda: _parse_json_file(path), repeat)
    holder: list[Any] = []
    t_load = best_seconds(lambda: holder.append(load_tasks_from_spec(str(path))), repeat)
    task = max(holder[-1], key=lambda t: len(t.messages))
    tokens = sum(m.nbytes for m in task.messages) // 4
    window = max(1_000, tokens // 2)
    pol = make_policy("progressive", context_window_tokens=window)
    # from cold each time: what one run's summaries share, not what earlier runs analysed
    t_replay = best_seconds(lambda: (clear_caches(), replay(task, pol)), repeat)
    size = f"{path.name} ({path.stat().st_size / 1e6:.1f} MB, {task.n_calls} calls)"
    return [
        Target(
            "largest recorded session: load / JSON parse",
            t_load / t_parse,
            3.0,
            "x",
            f"{size}: parse {t_parse * 1e3:.1f} ms, load {t_load * 1e3:.1f} ms",
        ),
        Target(
            f"largest recorded session: replay (window {window:,}) / load",
            t_replay / t_load,
            1.0,
            "x",
            f"progressive, replay {t_replay * 1e3:.1f} ms, load {t_load * 1e3:.1f} ms",
        ),
    ]


def _timed_sweep(spec: Any, out: Path, workers: int, scheduler: str | None = None) -> tuple[float, Any]:
    from h9eval.sweeps.sweep import sweep

    t0 = time.perf_counter()
    r = sweep(spec, out_dir=out, workers=workers, scheduler=scheduler, progress=False, resume=False)
    if r.failed:
        raise RuntimeError(f"benchmark sweep had {r.failed} failed cells: {r.failures}")
    return time.perf_counter() - t0, r


def _timed_inproc_sweep(spec: Any, out: Path) -> tuple[float, Any, float]:
    """An in-process sweep: (wall time, result, seconds inside the cells). A cell's time here
    includes writing its rows (a cell's ``wall_time_s`` stops before), so the rest of the wall
    time is start-up (planning, manifest) and consolidation, the cells' own output excluded."""
    import h9eval.sweeps.executors as ex

    inner = ex.run_cell_written
    spent = [0.0]

    def timed(cell: Any, out_dir: str) -> Any:
        t = time.perf_counter()
        try:
            return inner(cell, out_dir)
        finally:
            spent[0] += time.perf_counter() - t

    ex.run_cell_written = timed  # type: ignore[assignment]
    try:
        t0, r = _timed_sweep(spec, out, 0)
    finally:
        ex.run_cell_written = inner  # type: ignore[assignment]
    return t0, r, spent[0]


def sweep_bench_spec(tmp: Path, n_tasks: int = 4, n_turns: int = 1500) -> dict[str, Any]:
    """A sweep of ``n_tasks`` synthetic tasks of ``n_turns`` turns x a 2x2 progressive grid x
    2 history modes: 32 cells of about 2 s each by default (the target speaks of cells of at least
    1 s; a 2-worker sweep of smaller cells loses a larger share to start-up and hand-over). Cells
    change with h9eval's speed: 3,000 turns gave 17-20 s cells while the loss ledger rescanned
    every later call per item, about 5 s after."""
    from h9eval.tasks import tasks_to_jsonl
    from h9eval.tasks.synthetic import generate

    path = tmp / "bench-tasks.jsonl"
    tasks_to_jsonl([generate("long", seed=s, n_turns=n_turns) for s in range(n_tasks)], path)
    return {
        "name": "bench-scaling",
        "window": 16_000,
        "tasks": {"specs": [str(path)]},
        "policies": [
            {
                "kind": "progressive",
                "params": {"context_window_tokens": 16_000},
                "grid": {"warn_frac": [0.5, 0.6], "min_tail_messages": [4, 8]},
            }
        ],
        "history_modes": ["view", "write_back"],
    }


def _burn(barrier: Any, results: Any) -> None:
    barrier.wait()
    t, x = time.perf_counter(), 0
    for i in range(3_000_000):
        x += i * i
    results.put(time.perf_counter() - t)


def machine_parallelism() -> float:
    """A pure-Python loop's throughput on 2 processes over 1, measured now (spawned, started
    together): what this machine gives a 2-worker sweep at best, at this moment (2.0 on two
    free cores; less when other jobs hold them)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    times = []
    for n in (1, 2):
        barrier, results = ctx.Barrier(n), ctx.Queue()
        procs = [ctx.Process(target=_burn, args=(barrier, results)) for _ in range(n)]
        for p in procs:
            p.start()
        times.append(max(results.get() for _ in procs))
        for p in procs:
            p.join()
    return 2 * times[0] / times[1]


def bench_sweeps(
    tmp: Path, small_toml: Path | None, *, n_tasks: int = 4, n_turns: int = 1500, dask: bool = True, repeat: int = 2
) -> list[Target]:
    """2 workers over 1 on the scaling sweep, Dask (local cluster) over the process pool, and
    the share of start-up plus consolidation in ``small_toml``'s wall time (in-process run:
    wall time minus the time inside the cells, their rows' writing included).

    The scaling arms run ``repeat`` times, interleaved, and each keeps its best time: on a
    machine shared with other jobs one run of an arm can be 1.5x another, which a single run
    per arm would read as a ratio."""
    spec = sweep_bench_spec(tmp, n_tasks, n_turns)
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        dask = False
    t1 = t2 = td = float("inf")
    par = []
    for i in range(repeat):
        par.append(machine_parallelism())
        t, r1 = _timed_sweep(spec, tmp / f"w1-{i}", 1)
        t1 = min(t1, t)
        t2 = min(t2, _timed_sweep(spec, tmp / f"w2-{i}", 2)[0])
        if dask:
            td = min(td, _timed_sweep(spec, tmp / f"dask-{i}", 2, "local")[0])
    cell_s = r1.load().runs["wall_time_s"].astype(float)
    out = [
        Target(
            f"sweep speed-up, 2 workers vs 1 ({r1.n_cells} cells)",
            t1 / t2,
            1.8,
            "x",
            f"1 worker {t1:.1f} s, 2 workers {t2:.1f} s, best of {repeat}; cells {cell_s.median():.2f} s median; "
            f"this machine's own 2-process capacity then (a pure-Python loop on 2 processes over 1): "
            f"{', '.join(f'{p:.2f}x' for p in par)}",
            at_least=True,
        )
    ]
    if dask:
        out.append(
            Target(
                "sweep Dask local (2 workers) / process pool (2 workers)",
                td / t2,
                1.10,
                "x",
                f"Dask {td:.1f} s, pool {t2:.1f} s, same sweep, best of {repeat}",
            )
        )
    if small_toml is not None and small_toml.exists():
        t0, r0, cells_written = _timed_inproc_sweep(small_toml, tmp / "small-inproc")
        cells = float(r0.load().runs["wall_time_s"].astype(float).sum())
        out.append(
            Target(
                f"sweep {small_toml.name}: start-up + consolidation / wall time (in process)",
                100 * (t0 - cells_written) / t0,
                15.0,
                "%",
                f"wall {t0:.2f} s, cells {cells_written:.2f} s of which {cells_written - cells:.2f} s writing "
                f"their rows, {r0.n_cells} cells",
            )
        )
        for w in (1, 2):
            tw, _ = _timed_sweep(small_toml, tmp / f"small-{w}", w)
            out.append(
                Target(
                    f"sweep {small_toml.name}: wall time with {w} worker(s) / in process",
                    tw / t0,
                    None,
                    "x",
                    f"{tw:.2f} s vs {t0:.2f} s in process (informational)",
                )
            )
    return out


def _child_seconds(args: Sequence[str], cwd: Path) -> tuple[float, float, str]:
    """(wall, CPU user+system) seconds of one fresh ``python args`` process, and its stdout.
    Bytecode caching is on, as for an installed package (an environment that turns it off would
    time the compilation of every module instead)."""
    import resource

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(cwd)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"python {' '.join(args)} failed: {proc.stderr[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def bench_startup(tmp: Path, repeat: int = 5) -> list[Target]:
    """Start-up as a user meets it, each the median of ``repeat`` fresh processes (after one
    that writes the bytecode cache): ``import h9eval`` (the import alone, timed inside the
    process), ``h9eval --help`` (the whole process) and a 10-call ``h9eval run`` with a results
    folder (the whole process). The values are CPU seconds, what the wall time is on an idle
    machine; the notes give the wall time, which on a machine shared with other jobs is longer."""
    from h9eval.tasks import tasks_to_jsonl
    from h9eval.tasks.synthetic import generate

    root = Path(__file__).resolve().parents[1]
    probe = (
        "import sys, time; t, c = time.perf_counter(), time.process_time(); import h9eval; "
        "print(time.perf_counter() - t, time.process_time() - c)"
    )
    task_file = tmp / "ten-calls.jsonl"
    tasks_to_jsonl([truncate_calls(generate("small", seed=0), 10)], task_file)
    run_args = ["-m", "h9eval", "run", "--task", str(task_file), "--out"]
    _child_seconds([*run_args, str(tmp / "run-warm")], root)  # writes the bytecode cache
    imports = [tuple(map(float, _child_seconds(["-c", probe], root)[2].split())) for _ in range(repeat)]
    helps = [_child_seconds(["-m", "h9eval", "--help"], root)[:2] for _ in range(repeat)]
    runs = [_child_seconds([*run_args, str(tmp / f"run-{i}")], root)[:2] for i in range(repeat)]
    med = statistics.median

    def target(name: str, limit: float, pairs: list[tuple[float, ...]], what: str) -> Target:
        walls, cpus = [p[0] for p in pairs], [p[1] for p in pairs]
        return Target(
            name,
            med(cpus),
            limit,
            "s CPU",
            f"median of {repeat} fresh processes, {what}; CPU range {min(cpus):.2f}-{max(cpus):.2f} s; "
            f"wall {med(walls):.2f} s median on this shared machine",
        )

    return [
        target("start-up: import h9eval", 0.3, imports, "the import alone"),
        target("start-up: h9eval --help", 0.3, helps, "the whole process"),
        target("start-up: 10-call h9eval run with --out", 1.0, runs, "the whole process"),
    ]
