"""The notebook and CLI entry point of open-loop runs: :func:`run_task`. It builds one
:class:`~h9eval.runs.spec.RunSpec` per task (:func:`task_specs`) and runs each with
:func:`~h9eval.runs.execute.execute`, so a run started here has the spec and run id a sweep cell of the
same inputs has. The closed loop's entry points are :mod:`h9eval.runs.world`'s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from h9eval.compaction.base import Policy
from h9eval.compaction.summary import Summarizer
from h9eval.core.anthropic import CallLimits
from h9eval.core.errors import ConfigError, FormatError
from h9eval.core.lock import folder_lock
from h9eval.core.paths import prepare_out_dir, safe_name, write_json_atomic
from h9eval.probes.drift import DEFAULT_MAX_PROBES, check_probe_budget
from h9eval.probes.placebo import placebo_table, sweep_placebo, with_placebo
from h9eval.results.io import write_table
from h9eval.results.store import PLACEBO_FILE
from h9eval.runs.execute import KEEP, RunEnv, RunObjects, RunResult, execute
from h9eval.runs.spec import PolicyRef, ProbeSpec, RunSpec, SummarizerRef, TaskRef, specs_run_ids
from h9eval.runs.window import window_value
from h9eval.summarizers.registry import DEFAULT_SUMMARIZER, NO_SUMMARIZER, SUMMARIZERS
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.model import Task

__all__ = ["apply_placebo", "policy_ref", "run_task", "summarizer_ref", "task_specs"]


# -- building specs ------------------------------------------------------------------------------
def policy_ref(
    policy: str | Policy, params: Mapping[str, Any] | None = None, *, name: str = ""
) -> tuple[PolicyRef, Policy | None]:
    """A policy given by name and parameters, or as an object, as a reference (and the object itself,
    for a class the registry cannot rebuild from the reference).

    Args:
        policy: a registered kind, or a policy object.
        params: its parameters as given (with a kind only).
        name: the label results carry.

    Returns:
        ``(reference, object or None)``.
    """
    if isinstance(policy, str):
        ref = PolicyRef(kind=policy, params=dict(params or {}), name=name)
        ref.build()  # an unknown kind or parameter is refused here, before anything runs
        return ref, None
    if params:
        raise ConfigError("give params only with a policy name, not with a policy object")
    return PolicyRef.of(policy, name=name), policy


def summarizer_ref(summarizer: str | Summarizer | None) -> tuple[SummarizerRef, Summarizer | None | Any]:
    """A summarizer given by name (``None``/``"none"``: no summarizer) or as an object, as a reference
    (and the object, which the run uses as it is).

    Args:
        summarizer: a registered name, ``None``, or a summarizer object.

    Returns:
        ``(reference, object)``: the object is :data:`~h9eval.runs.execute.KEEP` for a name (built
        when the run starts).
    """
    if summarizer is None or summarizer == NO_SUMMARIZER:
        return SummarizerRef(name=NO_SUMMARIZER), None
    if isinstance(summarizer, str):
        SUMMARIZERS.get(summarizer)  # an unknown name gets its did-you-mean now
        return SummarizerRef(name=summarizer), KEEP
    name = next((n for n, cls in SUMMARIZERS.items() if type(summarizer) is cls), type(summarizer).__name__)
    return SummarizerRef(name=name), summarizer


def task_specs(
    task: str | Task,
    policy: str | Policy = "progressive",
    *,
    params: Mapping[str, Any] | None = None,
    name: str = "",
    summarizer: str | Summarizer | None = DEFAULT_SUMMARIZER,
    history_mode: str = "view",
    writeback_rules: str = "v3",
    window: int | None = None,
    window_peak_frac: float | None = None,
    manual_compact_at: Sequence[int] = (),
    probes: Sequence[str] = (),
    probe_every_k: int | None = None,
    max_probes: int = DEFAULT_MAX_PROBES,
    ledger: bool = True,
    billing: Mapping[str, Any] | None = None,
    repeat: int = 0,
) -> tuple[list[RunSpec], list[Task], RunObjects]:
    """The run specs of :func:`run_task` (one per task the spec loads), the tasks, and the objects the
    caller gave; every check made before anything runs.

    Args:
        task: a task spec (``synthetic:P:S``, a recorded session file or folder, ...) or a task.
        policy: a registered kind or a policy object; ``params``: its parameters (with a kind).
        name: the label results carry (default: the kind).
        summarizer: a registered name, ``None``/``"none"``, or a summarizer object.
        history_mode: ``view`` or ``write_back``; ``writeback_rules``: ``v3`` or ``v2``.
        window: the run's window in tokens; ``window_peak_frac``: instead, a fraction of each task's peak.
        manual_compact_at: call indices for a manual ``/compact``.
        probes: scorer names; ``probe_every_k``: probe every k-th call; ``max_probes``: the most one task may score.
        ledger: compute the loss ledger and the compaction diffs.
        billing: the ``[billing]`` table.
        repeat: the repeat index.

    Returns:
        ``(specs, tasks, objects)``.

    Raises:
        ConfigError: an invalid name, parameter or window.
        FormatError: a spec that loads no task.
    """
    pref, pobj = policy_ref(policy, params, name=name)
    sref, sobj = summarizer_ref(summarizer)
    w = window_value(window, window_peak_frac)
    tasks = load_tasks_from_spec(task) if isinstance(task, str) else [task]
    if not tasks:
        # A folder without sessions used to exit 0 having run nothing: say so instead.
        raise FormatError(
            "no sessions found (expected recorded session files *.jsonl/*.json/*.traj, an OpenHands folder or a task "
            "JSONL)",
            path=str(task),
        )
    listed = task if isinstance(task, str) else ""
    seen: dict[str, int] = {}
    specs = []
    for t in tasks:
        seen[t.task_id] = seen.get(t.task_id, 0) + 1
        key = "" if seen[t.task_id] == 1 else f"{t.task_id}~{seen[t.task_id]}"
        specs.append(
            RunSpec(
                task=TaskRef.of(t, listed_as=listed, key=key),
                policy=pref,
                window=w,
                history_mode=history_mode,
                writeback_rules=writeback_rules,
                summarizer=sref,
                probes=ProbeSpec(scorers=tuple(probes), every_k=probe_every_k, max_probes=max_probes),
                ledger=ledger,
                billing=dict(billing or {}),
                repeat=repeat,
                manual_compact_at=tuple(manual_compact_at),
            )
        )
    specs_run_ids(specs)  # every spec's window and parameters checked before any task runs
    return specs, tasks, RunObjects(policy=pobj, summarizer=sobj)


def run_task(
    task: str | Task,
    policy: str | Policy = "progressive",
    *,
    params: Mapping[str, Any] | None = None,
    name: str = "",
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
    billing: Mapping[str, Any] | None = None,
) -> list[RunResult]:
    """Replay every task a spec names through a policy (by name or object).

    Builds the runs' specs (:func:`task_specs`: every argument checked before any task runs) and runs
    each with :func:`~h9eval.runs.execute.execute`. With several tasks each gets ``<out_dir>/<task id>/``;
    a task id met again (two recorded files of one session) gets ``<task id>~2`` as its folder and run
    id key. With probes, each task's probes get the placebo control against every other task given and
    generated synthetic partners (:func:`apply_placebo`). A run into ``out_dir`` holds its lock
    (:func:`~h9eval.core.lock.folder_lock`): a second run into the same folder meanwhile is refused.

    Args:
        task, policy, params, name, summarizer, history_mode, writeback_rules, window, window_peak_frac,
            manual_compact_at, probes, probe_every_k, max_probes, ledger, billing: as :func:`task_specs`.
        summarizer_cache: the SQLite response cache of a model summarizer and the llm scorer.
        out_dir: the results folder.
        call_limits: the request timeout, retries and breaker of model calls.

    Returns:
        One :class:`~h9eval.runs.execute.RunResult` per task.
    """
    specs, tasks, objects = task_specs(
        task,
        policy,
        params=params,
        name=name,
        summarizer=summarizer,
        history_mode=history_mode,
        writeback_rules=writeback_rules,
        window=window,
        window_peak_frac=window_peak_frac,
        manual_compact_at=manual_compact_at,
        probes=probes,
        probe_every_k=probe_every_k,
        max_probes=max_probes,
        ledger=ledger,
        billing=billing,
    )
    cache = None if summarizer_cache is None else str(summarizer_cache)
    if specs[0].probes.scorers:  # every task's grid before any task runs
        for t in tasks:
            check_probe_budget(t, probe_every_k, max_probes)
    # One writer per folder, as for sweeps: a second run into it is refused with one line instead of
    # mixing its tables and session store with the first's (both are staged under the same names).
    out = prepare_out_dir(out_dir, what="results folder") if out_dir is not None else None
    results = []
    with folder_lock(out) if out is not None else contextlib.nullcontext():
        for spec, t in zip(specs, tasks):
            folder = None if out is None else out if len(specs) == 1 else out / safe_name(spec.task.run_key)
            env = RunEnv(
                out_dir=folder,
                summarizer_cache=cache,
                call_limits=call_limits,
                # the task names the session, as in a sweep's cells: offload placeholders (so the views
                # sent) are the same whichever entry point ran the spec
                session_id=spec.task.run_key,
                objects=RunObjects(task=t, policy=objects.policy, summarizer=objects.summarizer),
            )
            results.append(execute(spec, env))
        if specs[0].probes.scorers:
            apply_placebo(tasks, results)
    return results


def apply_placebo(tasks: Sequence[Task], results: Sequence[RunResult]) -> None:
    """The placebo control of a run, as a sweep applies it: every task's probes against every unrelated
    task given and generated synthetic partners up to 8 (:func:`~h9eval.probes.placebo.sweep_placebo`);
    each result's probe rows get their ``placebo_rate``/``placebo_excluded``, rewritten (atomically) in
    its folder beside a ``placebo.json`` of its task's probes.

    Args:
        tasks: the runs' tasks.
        results: the runs.
    """
    unique = list({t.task_id: t for t in tasks}.values())
    table = placebo_table(sweep_placebo(unique))
    for r in results:
        r.probes = with_placebo(r.probes, table)
        if r.replay is not None:
            r.replay.probes = r.probes
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
