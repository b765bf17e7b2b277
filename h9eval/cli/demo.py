"""``h9eval demo``, the main job behind ``make demo``: conformance, a step-by-step compaction table, then the
demo sweep (harness9's defaults, threshold variants, h9eval's options and the peer policies
over the recorded sessions and synthetic tasks) and its HTML report. Offline throughout."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TextIO

from h9eval.cli import add_command
from h9eval.analysis.report import write_report
from h9eval.compaction.policies import ProgressiveCompactor
from h9eval.core.paths import conformance_dir, recorded_dir, repo_root
from h9eval.harness9.conformance import run_conformance
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.sweeps.sweep import sweep
from h9eval.tasks.model import Task
from h9eval.tasks.recorded import load_task
from h9eval.tasks.synthetic import generate

__all__ = ["run_demo", "step_table", "DEMO_SPEC", "CLOSEDLOOP_SPEC", "register"]

DEMO_SPEC = repo_root() / "examples" / "demo.toml"
CLOSEDLOOP_SPEC = repo_root() / "examples" / "closedloop.toml"
"""The closed-loop demo sweep (step 4), written to ``<out>/closedloop`` with its own report."""


def step_table(task: Task | str | os.PathLike[str], window: int = 30_000, mode: str = "write_back") -> str:
    """Replay one task (a Task, or a recorded session's path) under harness9's defaults and
    return a text table of every compacting call (and every tenth call)."""
    if not isinstance(task, Task):
        task = load_task(task)
    res = replay(task, ProgressiveCompactor(context_window_tokens=window), config=ReplayConfig(history_mode=mode))
    c = res.calls
    lines = [
        f"{task.task_id}: {len(task.messages)} messages, {task.n_calls} model calls, window {window} tokens, history "
        f"mode {mode}",
        f"{'call':>5} {'history_tok':>11} {'sent_tok':>9} {'ratio':>6} {'tier':>9} {'msgs_before':>11} "
        f"{'msgs_after':>10} {'summaries':>9}",
    ]
    for r in c.itertuples():
        if r.tier_name == "none" and r.call_index % 10:
            continue
        lines.append(
            f"{r.call_index:>5} {r.history_tokens:>11} {r.tokens_sent:>9} {r.ratio_to_window:>6.2f} {r.tier_name:>9} "
            f"{r.msgs_before:>11} {r.msgs_after:>10} {r.summarizer_calls:>9}"
        )
    s = res.summary()
    lines.append(
        f"compactions by tier {s['compactions_by_tier']}, peak sent {s['peak_tokens_sent']}, summaries "
        f"{s['summarizer_calls']}, overflows {s['overflows']}"
    )
    return "\n".join(lines)


def run_demo(
    out_dir: str | Path = "results/demo", *, workers: int | None = None, out: TextIO = sys.stdout
) -> Path | None:
    """Run the demo; returns the report path (or ``None`` when the report could not be made)."""
    t0 = time.perf_counter()
    print("== 1. harness9 conformance cases", file=out, flush=True)
    rep = run_conformance([conformance_dir()])
    print(rep.summary_line(), file=out, flush=True)
    print("\n== 2. step-by-step compaction of a recorded session (offline summarizer)", file=out, flush=True)
    print(
        step_table(recorded_dir() / "mini-swe-agent" / "deepseek_chat_test_1-100" / "django__django-15695.traj.json"),
        file=out,
        flush=True,
    )
    print("\n== 2b. the same for a synthetic task (preset small, seed 0)", file=out, flush=True)
    print(step_table(generate("small", seed=0), window=12_000), file=out, flush=True)
    print("\n== 3. demo sweep and report", file=out, flush=True)
    res = sweep(DEMO_SPEC, out_dir=out_dir, workers=workers)
    print(res, file=out, flush=True)
    paths = write_report(out_dir, out_dir=out_dir)
    html = Path(paths.html).resolve()
    print(
        "\n== 4. closed loop: the agent acts on the compacted view (three worlds, offline scripted agent)",
        file=out,
        flush=True,
    )
    cl_dir = Path(out_dir) / "closedloop"
    print(sweep(CLOSEDLOOP_SPEC, out_dir=cl_dir, workers=workers), file=out, flush=True)
    cl_html = Path(write_report(cl_dir, out_dir=cl_dir).html).resolve()
    print(
        f"\nreport: {html}\nclosed-loop report: {cl_html}\n(finished in {time.perf_counter() - t0:.0f} s)",
        file=out,
        flush=True,
    )
    return html


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "demo")
    p.add_argument("--out", default="results/demo", help="results folder (default results/demo)")
    p.add_argument("--workers", type=int, default=None)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    run_demo(args.out, workers=args.workers)
    return 0
