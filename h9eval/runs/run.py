"""The function behind ``h9eval run``, for notebooks: resolve names and specs once, then replay."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from h9eval.compaction.base import Policy, params_hash, policy_params
from h9eval.compaction.policies import make_policy
from h9eval.compaction.step import run_window
from h9eval.compaction.summary import Summarizer
from h9eval.core.anthropic import CallLimits
from h9eval.core.errors import ConfigError, FormatError
from h9eval.core.messages import Message
from h9eval.core.lock import folder_lock
from h9eval.core.paths import prepare_out_dir, safe_name, write_json_atomic
from h9eval.core.tokens import estimate_tokens, estimate_tool_tokens
from h9eval.probes.drift import DEFAULT_MAX_PROBES, check_probe_budget
from h9eval.probes.placebo import placebo_table, sweep_placebo, with_placebo
from h9eval.probes.runner import ProbeFn, make_probe_fn
from h9eval.results.io import write_table
from h9eval.results.store import PLACEBO_FILE
from h9eval.runs.replay import ReplayConfig, ReplayResult, replay
from h9eval.summarizers.registry import DEFAULT_SUMMARIZER, build_summarizer
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.model import Task


MIN_WINDOW_TOKENS = 1_000
"""The smallest run window (``run --window``, a sweep spec's ``window``) accepted, in tokens.
Below it one ordinary tool result or file read is over the window, so every call ends in
forced truncation and the run measures nothing else; ``window = 1`` is a typo, not a study.
A policy's own ``context_window_tokens`` is not bounded here (unit tests use tiny ones)."""
__all__ = [
    "MIN_WINDOW_TOKENS",
    "fallback_warning",
    "peak_frac_window",
    "run_task",
    "uncompacted_peak_tokens",
    "written_back_peak_tokens",
]


def fallback_warning(summary: Mapping[str, Any]) -> str | None:
    """One line when a run (its :meth:`~h9eval.runs.replay.ReplayResult.summary`) fell back on
    every summary it asked for, else ``None``. A fallback is harness9's: the summary fails and
    the history is truncated instead, so such a run measures the fallback, not the summarizer
    (a bad key, no network, an outage: ``fallback_causes`` says which)."""
    fell = int(summary.get("fallbacks", 0) or 0)
    asked = int(summary.get("summarizer_calls", 0) or 0)
    if fell == 0 or fell < asked:
        return None
    causes = summary.get("fallback_causes") or {}
    why = "; ".join(f"{cause} (x{n})" for cause, n in causes.items()) or "no cause recorded"
    return (
        f"every summary fell back to truncation ({fell} of {max(fell, asked)}): {why}; "
        "these results measure harness9's fallback, not the summarizer"
    )


def uncompacted_peak_tokens(task: Task, *, system_prompt: str | None = None) -> int:
    """The most tokens the uncompacted transcript sends at one call of ``task``: the largest
    ``raw_tokens_sent`` of its replay (every message before its last model call, the system
    prompt the replay prepends when the transcript has none, and the tool schemas). 0 for a
    task without a model call."""
    last = max((i for i, m in enumerate(task.messages) if m.role == "assistant"), default=None)
    if last is None:
        return 0
    head = list(task.messages[:last])
    if not task.messages or task.messages[0].role != "system":
        head.insert(0, Message("system", system_prompt if system_prompt is not None else ReplayConfig().system_prompt))
    return estimate_tokens(head) + estimate_tool_tokens(task.tools)


def _check_peak_frac(peak_frac: float) -> None:
    if isinstance(peak_frac, bool) or not isinstance(peak_frac, int | float) or not 0 < peak_frac <= 1:
        raise ConfigError(f"window peak_frac must be a number in (0, 1], got {peak_frac!r}")


def written_back_peak_tokens(task: Task, *, writeback_rules: str = "v3") -> int:
    """The most tokens ``task`` sends at one call in ``write_back`` mode when harness9's default
    only offloads: its tool-time hook and its warn tier (the head's large tool results moved to
    files) act at every call and are written back, nothing is summarised. What the write-back
    history of harness9's default grows to before its summary tiers have anything left to do:
    in write-back mode the written-back offloads shrink the history for good, so a window sized
    from the uncompacted peak leaves the default at the warn tier on tasks with large tool
    results. Measured by a replay of the default's own code (0 for a task without a model call)."""
    raw = uncompacted_peak_tokens(task)
    if raw == 0:
        return 0
    # a window ten times the peak keeps every ratio under 0.1: above the tiny warn threshold, far
    # below soft, so every call runs the warn tier and nothing else
    window = 10 * raw
    offload_only = make_policy(
        "progressive", warn_frac=1e-9, soft_frac=0.97, full_frac=0.98, emergency_frac=0.99, context_window_tokens=window
    )
    cfg = ReplayConfig(history_mode="write_back", writeback_rules=writeback_rules, context_window_tokens=window)
    r = replay(task, offload_only, summarizer=None, config=cfg, session_store=False)
    return int(r.calls["tokens_sent"].max()) if len(r.calls) else 0


def peak_frac_window(task: Task, peak_frac: float, *, history_mode: str = "view") -> int:
    """A window sized to ``task``: ``peak_frac`` times its peak (rounded up, at least 1 token):
    :func:`uncompacted_peak_tokens` in ``view`` mode, :func:`written_back_peak_tokens` in
    ``write_back`` mode (the history harness9's default writes back is smaller, so the same
    fraction of the uncompacted peak would not exercise its summary tiers there). ``peak_frac``:
    in (0, 1] exercises a policy on every task (0.5: the transcript would need twice the window
    at its end)."""
    _check_peak_frac(peak_frac)
    peak = written_back_peak_tokens(task) if history_mode == "write_back" else uncompacted_peak_tokens(task)
    return max(1, math.ceil(peak * float(peak_frac)))


def _window_was_set(policy: Policy, params: Mapping[str, Any] | None, by_name: bool) -> bool:
    """Whether the policy's window was set by the caller: given in ``params`` (a policy by
    name), or different from its class's default (a policy object)."""
    if by_name:
        return "context_window_tokens" in (params or {})
    return policy.window_tokens() is not None and policy.window_tokens() != type(policy).default_window_tokens()


def run_task(
    task: str | Task,
    policy: str | Policy = "progressive",
    *,
    params: Mapping[str, Any] | None = None,
    summarizer: str | Summarizer | None = DEFAULT_SUMMARIZER,
    summarizer_cache: str | os.PathLike[str] | None = None,
    history_mode: str = "view",
    writeback_rules: str = "v3",
    window: int | None = None,
    window_peak_frac: float | None = None,
    manual_compact_at: Sequence[int] = (),
    probes: Sequence[str] = (),
    probe_every_k: int | None = None,
    max_probes: int = DEFAULT_MAX_PROBES,
    out_dir: str | os.PathLike[str] | None = None,
    ledger: bool = True,
    call_limits: CallLimits | None = None,
) -> list[ReplayResult]:
    """Replay every task a spec names through a policy (by name or object).

    ``summarizer``: a registered name, ``"none"``/``None`` (no summarizer) or a Summarizer.
    ``window``: the run's context window (tokens): a policy with its own
    ``context_window_tokens`` left at the default runs at it, one set to another value is a
    :class:`ConfigError` (the one rule: :func:`~h9eval.compaction.step.run_window`). ``window_peak_frac``: instead of
    ``window``, size each task's window to that fraction of its own uncompacted peak
    (:func:`peak_frac_window`), so every task exercises the policy. ``max_probes``: the most
    probes one task's grid may score (checked for every task before any runs). With several tasks each
    gets ``<out_dir>/<task id>/``; a task id met again (two recorded files of one session) gets
    ``<task id>~2`` (then ``~3``...) as its folder and run id prefix, so no run replaces another.
    ``ledger``: compute the loss ledger of each run (``ReplayResult.ledger``, ``ledger.parquet``).
    ``call_limits``: the request timeout and retries of a model summarizer and the llm scorer.
    A run into ``out_dir`` holds its lock (:func:`~h9eval.core.lock.folder_lock`): a second
    run into the same folder meanwhile is refused.
    """
    if window is not None and window_peak_frac is not None:
        raise ConfigError(f"give window ({window}) or window_peak_frac ({window_peak_frac}), not both")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < MIN_WINDOW_TOKENS):
        raise ConfigError(f"window must be an integer >= {MIN_WINDOW_TOKENS:,} tokens, got {window!r}")
    if window_peak_frac is not None:
        _check_peak_frac(window_peak_frac)
    tasks = load_tasks_from_spec(task) if isinstance(task, str) else [task]
    if not tasks:
        # A folder without sessions used to exit 0 having run nothing: say so instead.
        raise FormatError(
            "no sessions found (expected recorded session files *.jsonl/*.json/*.traj, an OpenHands folder or a task "
            "JSONL)",
            path=str(task),
        )
    pol = make_policy(policy, **(params or {})) if isinstance(policy, str) else policy
    explicit = _window_was_set(pol, params, isinstance(policy, str))
    if window_peak_frac is None:
        pol = run_window(pol, window, explicit=explicit).policy
    elif explicit:
        raise ConfigError(
            f"window_peak_frac {window_peak_frac} sizes each task's window, but {pol.kind}'s context_window_tokens "
            f"was set to {pol.window_tokens()}: a run has one window; drop one of them"
        )
    if isinstance(summarizer, str) or summarizer is None:
        summ = build_summarizer(summarizer, summarizer_cache, call_limits=call_limits)
    else:
        summ = summarizer
    probe_fn = make_probe_fn(probes, cache=summarizer_cache, call_limits=call_limits)
    if probe_fn is not None:  # every task's grid before any task runs
        for t in tasks:
            check_probe_budget(t, probe_every_k, max_probes)
    # One writer per folder, as for sweeps: a second run into it is refused with one line instead of
    # mixing its tables and session store with the first's (both are staged under the same names).
    out = prepare_out_dir(out_dir, what="results folder") if out_dir is not None else None
    with folder_lock(out) if out is not None else contextlib.nullcontext():
        return _run_tasks(
            tasks,
            pol,
            window=window,
            window_peak_frac=window_peak_frac,
            summ=summ,
            probe_fn=probe_fn,
            history_mode=history_mode,
            writeback_rules=writeback_rules,
            manual_compact_at=manual_compact_at,
            probe_every_k=probe_every_k,
            max_probes=max_probes,
            out_dir=out,
            ledger=ledger,
        )


def _run_tasks(
    tasks: Sequence[Task],
    pol: Policy,
    *,
    window: int | None,
    window_peak_frac: float | None,
    summ: Summarizer | None,
    probe_fn: ProbeFn | None,
    history_mode: str,
    writeback_rules: str,
    manual_compact_at: Sequence[int],
    probe_every_k: int | None,
    max_probes: int,
    out_dir: Path | None,
    ledger: bool,
) -> list[ReplayResult]:
    """:func:`run_task`'s loop over its resolved tasks (under the folder's lock when it writes)."""
    results = []
    seen: dict[str, int] = {}
    for t in tasks:
        w = peak_frac_window(t, window_peak_frac, history_mode=history_mode) if window_peak_frac is not None else window
        cfg = ReplayConfig(
            history_mode=history_mode,
            writeback_rules=writeback_rules,
            manual_compact_at=tuple(manual_compact_at),
            context_window_tokens=w,
        )
        run_pol = run_window(pol, w, explicit=False).policy
        seen[t.task_id] = seen.get(t.task_id, 0) + 1
        key = t.task_id if seen[t.task_id] == 1 else f"{t.task_id}~{seen[t.task_id]}"
        run_id = None
        if key != t.task_id:
            run_id = f"{key}--{run_pol.kind}-{params_hash(run_pol.kind, policy_params(run_pol))}-{cfg.history_mode}"
        out = None
        if out_dir is not None:
            out = out_dir if len(tasks) == 1 else out_dir / safe_name(key)
        results.append(
            replay(
                t,
                run_pol,
                summarizer=summ,
                config=cfg,
                out_dir=out,
                run_id=run_id,
                probe_fn=probe_fn,
                probe_every_k=probe_every_k,
                max_probes=max_probes,
                ledger=ledger,
            )
        )
    if probe_fn is not None:
        apply_placebo(tasks, results)
    return results


def apply_placebo(tasks: Sequence[Task], results: Sequence[ReplayResult]) -> None:
    """The placebo control of a run, as a sweep applies it: every task's probes against every
    unrelated task given and generated synthetic partners up to 8
    (:func:`~h9eval.probes.placebo.sweep_placebo`); each result's probe rows get their
    ``placebo_rate``/``placebo_excluded``, rewritten (atomically) in its folder beside a
    ``placebo.json`` of its task's probes."""
    unique = list({t.task_id: t for t in tasks}.values())
    table = placebo_table(sweep_placebo(unique))
    for r in results:
        r.probes = with_placebo(r.probes, table)
        if r.out_dir is not None and Path(r.out_dir, "probes.parquet").exists():
            write_table(r.probes, Path(r.out_dir) / "probes.parquet", "probes")
            mine = table[table["task_id"] == r.task_id]
            rows = [
                [t, p, float(x), bool(e)]
                for t, p, x, e in zip(mine["task_id"], mine["probe_id"], mine["placebo_rate"], mine["excluded"])
            ]
            write_json_atomic(
                Path(r.out_dir) / PLACEBO_FILE,
                {"n_partners": sorted({int(n) for n in mine["n_partners"]}), "rows": rows},
            )
