"""The worker side of a sweep: run one :class:`~h9eval.sweeps.cells.Cell` and write its rows.

Each worker process loads its task from the cell's spec (so transcripts are never pickled),
with a small per-process cache, and keeps one summarizer per variant open (its SQLite cache
connection); it writes the cell's rows under ``cells/`` and its run row last (see
:mod:`h9eval.results.store`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from h9eval.closedloop.agents import Agent, make_agent
from h9eval.closedloop.episode import Episode, run_episode, run_oracle, stress_settings
from h9eval.closedloop.ledger import episode_ledger
from h9eval.closedloop.run import episode_calls_frame, episode_row, world_task
from h9eval.closedloop.worlds import make_world
from h9eval.compaction.policies import make_policy
from h9eval.compaction.step import run_window
from h9eval.core.anthropic import CallLimits
from h9eval.compaction.user import install
from h9eval.core.budget import SPEND_FILE, Budget
from h9eval.core.errors import BudgetExceeded, FormatError
from h9eval.core.paths import cell_work_dir
from h9eval.core.progress import silence
from h9eval.results.schema import MANIFEST_SCHEMA_VERSION
from h9eval.results.store import write_cell
from h9eval.results.tables import episodes_table, ledger_table, records_to_frame
from h9eval.results.schema import PROBE_COLUMNS
from h9eval.core.billing import billing_config_from_dict
from h9eval.runs.replay import ReplayConfig, ReplayResult, replay
from h9eval.probes.runner import make_probe_fn
from h9eval.results.schema import RUN_COLUMNS, RUN_SUMMARY_KEYS
from h9eval.summarizers.batches import BatchingSummarizer, SummaryDeferred
from h9eval.summarizers.registry import build_summarizer
from h9eval.sweeps.cells import Cell
from h9eval.tasks import Task, load_tasks_from_spec

__all__ = [
    "STOPPED",
    "WAITING",
    "cell_budget",
    "failed_row",
    "load_cell_task",
    "replay_cell",
    "run_cell",
    "run_cell_written",
    "run_batch",
    "run_episode_cell",
]

STOPPED = "stopped"
"""The status of a cell the spending cap kept from finishing: never written, so it runs on resume."""
WAITING = "waiting"
"""The status of a batched sweep's cell that stopped for a reply (never written: not a result)."""

WAITING = "waiting"
"""The status of a batched sweep's cell that stopped for a reply (never written: not a result)."""

_TASK_CACHE: OrderedDict[str, list[Task]] = OrderedDict()
_TASK_CACHE_SIZE = 4  # task lists per process: a few, since recorded sessions can be MBs each
_SUMMARIZERS: dict[str, Any] = {}

# The replay summary's keys copied into the run row, in order.


def load_cell_task(cell: Cell) -> Task:
    """The task of a replay cell, as its worker loads it (a small per-process cache)."""
    if cell.world_kind:  # an exported world: its keep_all episode, rebuilt (deterministic, fast)
        return _world_task(cell)
    for spec in dict.fromkeys((cell.task_source, cell.task_spec)):
        if spec in _TASK_CACHE:
            _TASK_CACHE.move_to_end(spec)
            tasks = _TASK_CACHE[spec]
        else:
            tasks = load_tasks_from_spec(spec)
            _TASK_CACHE[spec] = tasks
            while len(_TASK_CACHE) > _TASK_CACHE_SIZE:
                _TASK_CACHE.popitem(last=False)
        for t in tasks:
            if t.task_id == cell.task_id:
                return t
    raise FormatError(f"task {cell.task_id!r} not found (it was there when the sweep was planned)", path=cell.task_spec)


def _limits(cell: Cell) -> CallLimits:
    return CallLimits(
        request_timeout_s=cell.request_timeout_s,
        max_retries=cell.max_retries,
        breaker_failures=cell.breaker_failures,
        **cell.endpoint,
    )


def cell_budget(cell: Cell, out_dir: str | os.PathLike[str]) -> Budget | None:
    """The spending cap the cell's model calls share with the sweep's other cells (its ledger in
    ``out_dir``), or ``None`` without ``max_cost_usd``."""
    return None if cell.max_cost_usd is None else Budget(str(Path(out_dir) / SPEND_FILE), cell.max_cost_usd)


def _summarizer(cell: Cell, budget: Budget | None = None) -> Any:
    key = json.dumps(
        [
            cell.summarizer,
            cell.summarizer_params,
            cell.summarizer_cache,
            cell.request_timeout_s,
            cell.max_retries,
            cell.breaker_failures,
            cell.endpoint,
            None if budget is None else [budget.path, budget.max_cost_usd],
        ],
        sort_keys=True,
    )
    if key not in _SUMMARIZERS:  # one per process: keeps its SQLite connection open
        _SUMMARIZERS[key] = build_summarizer(
            cell.summarizer, cell.summarizer_cache, call_limits=_limits(cell), budget=budget, **cell.summarizer_params
        )
    if cell.batch_dir:  # a batched sweep: this cell's replies come from batches (h9eval.summarizers.batches)
        # a repeat > 0 has its own response cache, so its own requests (not repeat 0's replies)
        scope = f"r{cell.repeat}" if cell.repeat else ""
        return BatchingSummarizer.wrap(_SUMMARIZERS[key], cell.batch_dir, run_id=cell.run_id, scope=scope)
    return _SUMMARIZERS[key]


def _headline(summary: Mapping[str, Any], calls: Any) -> dict[str, Any]:
    tiers = summary.get("compactions_by_tier", {})
    hits = int(calls["summarizer_cache_hits"].sum()) if len(calls) else 0
    row = {k: summary.get(k, 0) for k in RUN_SUMMARY_KEYS if k in RUN_COLUMNS}
    row.update(
        {
            "n_compactions": int(sum(tiers.values())),
            **{f"compactions_{t}": int(tiers.get(t, 0)) for t in ("warn", "soft", "full", "emergency")},
            "summarizer_cache_hits": hits,
        }
    )
    return row


def _identity_row(cell: Cell) -> dict[str, Any]:
    """The run row's columns that name the cell (the same whether it ran or failed)."""
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "sweep": cell.sweep,
        "run_id": cell.run_id,
        "cell_hash": cell.cell_hash,
        "task_id": cell.task_id,
        "task_spec": cell.task_spec,
        "policy_name": cell.policy_name,
        "policy_kind": cell.policy_kind,
        "params_json": json.dumps(cell.params, sort_keys=True),
        "grid_json": json.dumps(cell.grid, sort_keys=True),
        "params_hash": cell.params_hash,
        "history_mode": cell.history_mode,
        "summarizer": cell.summarizer,
        "repeat": cell.repeat,
    }


_ORACLE_STEPS: OrderedDict[str, int] = OrderedDict()
_WORLD_TASKS: OrderedDict[str, Task] = OrderedDict()
_WORLD_CACHE_SIZE = 64  # per process: a world's keep_all episode is shared by every cell of that world


def _cached(cache: OrderedDict[str, Any], key: str, make: Any) -> Any:
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    cache[key] = value = make()
    while len(cache) > _WORLD_CACHE_SIZE:
        cache.popitem(last=False)
    return value


def _world_task(cell: Cell) -> Task:
    key = json.dumps([cell.world_kind, cell.world_params, cell.world_seed, cell.max_steps], sort_keys=True)
    return _cached(
        _WORLD_TASKS,
        key,
        lambda: world_task(cell.world_kind, cell.world_params, int(cell.world_seed or 0), max_steps=cell.max_steps),
    )


def _episode_common(cell: Cell) -> dict[str, Any]:
    return {
        "seed": int(cell.world_seed or 0),
        "history_mode": cell.history_mode,
        "writeback_rules": cell.writeback_rules,
        "context_window_tokens": cell.window,
        "max_steps": cell.max_steps,
        "stress": stress_settings(cell.stress),
    }


def run_episode_cell(
    cell: Cell, agent: Agent | None = None, *, summarizer: Any = None, budget: Budget | None = None
) -> Episode:
    """An episode cell's episode, as the sweep runs it (the ledger page runs one again: the
    episode is deterministic with a scripted agent or a cassette). ``summarizer``: another in the
    cell's (a sweep's estimate counts the requests its model summarizer would send); ``budget``:
    the sweep's spending cap."""
    agent = agent if agent is not None else make_agent(cell.agent, call_limits=_limits(cell))
    # the cell's window for every policy, or the world's own (``policy_window``) for the policies
    # whose entry leaves theirs unset (the spec refused a conflicting explicit one)
    window = cell.policy_window if cell.policy_window is not None else cell.window
    policy = run_window(
        make_policy(cell.policy_kind, **cell.spec_params),
        window,
        explicit="context_window_tokens" in cell.spec_params if cell.policy_window is not None else False,
    ).policy
    world = make_world(cell.world_kind, **cell.world_params)
    return run_episode(
        world,
        agent,
        policy,
        summarizer=summarizer if summarizer is not None else _summarizer(cell, budget),
        **_episode_common(cell),
    )


def _episode_parts(cell: Cell, budget: Budget | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run an episode cell and its keep_all oracle: (run-row headline, the cell's parts)."""
    import pandas as pd

    common = _episode_common(cell)
    agent = make_agent(cell.agent, call_limits=_limits(cell))
    ep = run_episode_cell(cell, agent, budget=budget)
    key = json.dumps(
        [cell.world_kind, cell.world_params, cell.agent, {**common, "stress": cell.stress}], sort_keys=True
    )
    # a live agent's oracle would be a second paid episode (and is not in its cassette)
    oracle_steps = (
        ep.n_steps
        if cell.policy_kind == "keep_all"
        else None
        if not cell.agent.startswith("scripted")
        else _cached(
            _ORACLE_STEPS,
            key,
            lambda: run_oracle(make_world(cell.world_kind, **cell.world_params), agent, **common).n_steps,
        )
    )
    calls = episode_calls_frame(
        ep, run_id=cell.run_id, task_id=cell.task_id, billing=billing_config_from_dict(cell.billing)
    )
    row = episode_row(
        ep,
        oracle_steps=oracle_steps,
        run_id=cell.run_id,
        task_id=cell.task_id,
        policy_name=cell.policy_name,
        params_json=json.dumps(cell.params, sort_keys=True),
        summarizer=cell.summarizer,
        repeat=cell.repeat,
        calls=calls,
    )
    sent = [s.tokens_sent for s in ep.steps]
    tiers = [s.tier_name for s in ep.steps if s.compacted]
    head = {
        "calls": ep.n_steps,
        "n_compactions": ep.n_compactions,
        **{f"compactions_{t}": tiers.count(t) for t in ("warn", "soft", "full", "emergency")},
        "peak_tokens_sent": max(sent, default=0),
        "final_tokens_sent": sent[-1] if sent else 0,
        "peak_history_tokens": max((s.history_tokens for s in ep.steps), default=0),
        "offloads_tool_time": row["offloads_tool_time"],
        "offloads_compaction": 0,
        "summarizer_calls": row["summarizer_calls"],
        "summarizer_cache_hits": 0,
        "summarizer_cost_usd": row["summarizer_cost_usd"],
        "fallbacks": 0,
        "forced_truncations": sum(1 for s in ep.steps if s.forced_compactions),
        "overflows": sum(1 for s in ep.steps if s.tokens_sent > ep.context_window_tokens),
        "probe_rows": 0,
        # the run row's billed numbers, as the episode row has them (no uncompacted transcript: raw unknown)
        **{k: None if row[k] != row[k] else row[k] for k in ("cost_usd", "cache_read_share", "invalidation_usd")},
        "raw_cost_usd": None,
    }
    parts = {
        "episodes": episodes_table([row]),
        "calls": calls,
        "compactions": records_to_frame([], run_id="", session_id=""),
        "probes": pd.DataFrame(columns=list(PROBE_COLUMNS)),
        "ledger": ledger_table(episode_ledger(ep, run_id=cell.run_id, task_id=cell.task_id)),
    }
    return head, parts


def run_cell(cell: Cell, out_dir: str) -> dict[str, Any]:
    """Run one cell and write it under ``<out_dir>/cells/`` (parts first, run row last).

    Never raises for a failure of the cell itself: the exception's type and message go to the
    run row's ``error`` with status ``failed``. Returns the run row.
    """
    return run_cell_written(cell, out_dir)[0]


def replay_cell(
    cell: Cell,
    *,
    offload_root: str | os.PathLike[str],
    keep_views: bool = False,
    budget: Budget | None = None,
    summarizer: Any = None,
    probes: bool = True,
    ledger: bool = True,
) -> ReplayResult:
    """Replay a replay cell's task as the sweep does (its policy, window, mode, summarizer, probes
    and ledger), without writing the cell: the worker writes it; the ledger page replays one again
    with ``keep_views`` to show what each compaction took out of the view. ``budget``: the
    sweep's spending cap; ``summarizer``: another summarizer in the cell's (a sweep's estimate
    counts the requests its model summarizer would send); ``probes``/``ledger``: ``False`` skips
    them (an estimate needs neither)."""
    task = load_cell_task(cell)
    # the cell's window, for every policy (the spec refused a conflicting explicit one)
    policy = run_window(make_policy(cell.policy_kind, **cell.spec_params), cell.window, explicit=False).policy
    cfg = ReplayConfig(
        history_mode=cell.history_mode,
        writeback_rules=cell.writeback_rules,
        context_window_tokens=cell.window,
        seed=cell.repeat,
        keep_views=keep_views,
        billing=billing_config_from_dict(cell.billing),
    )
    return replay(
        task,
        policy,
        summarizer=summarizer if summarizer is not None else _summarizer(cell, budget),
        config=cfg,
        run_id=cell.run_id,
        probe_fn=make_probe_fn(cell.scorers, cache=cell.summarizer_cache, call_limits=_limits(cell))
        if probes
        else None,
        probe_every_k=cell.probe_every_k,
        session_store=False,
        offload_root=offload_root,
        # Offload placeholders name the session folder; one session id per task (not per
        # cell) keeps summary requests equal across cells, so the shared cache can hit.
        session_id=cell.task_id,
        ledger=ledger,
    )


def run_cell_written(cell: Cell, out_dir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`run_cell`, also returning the Arrow tables written (see
    :func:`~h9eval.results.store.write_cell`): a sweep run in this process consolidates them
    without reading them back."""
    out = Path(out_dir)
    t0 = time.perf_counter()
    row = _identity_row(cell)
    budget = cell_budget(cell, out)
    stopped = budget.stopped() if budget is not None else ""
    if stopped:  # the cap stopped the sweep: the cell stays unfinished (run on resume), nothing written
        return {**row, "status": STOPPED, "error": stopped, "wall_time_s": 0.0}, {}
    # The offload files (copies of tool outputs) live inside the results folder, never in the
    # system temp folder: a killed cell's are removed when the cell is rerun, and here.
    work = cell_work_dir(out, cell.run_id)
    try:
        if cell.cell_kind == "episode":
            head, parts = _episode_parts(cell, budget)
            row.update(head)
            row.update(status="ok", error="", wall_time_s=time.perf_counter() - t0)
            return row, write_cell(out, cell.run_id, row, parts)
        res = replay_cell(cell, offload_root=work, budget=budget)
        row.update(_headline(res.summary(), res.calls))
        # An offload the disk refused is harness9's fail-open path: the cell is ok, but says so.
        flag = (
            f"offload writes failed: {len(res.offload_write_failures)} ({res.offload_write_failures[0]})"
            if res.offload_write_failures
            else ""
        )
        row.update(status="ok", error=flag, probe_rows=len(res.probes), wall_time_s=time.perf_counter() - t0)
        parts = {"calls": res.calls, "compactions": res.compactions, "probes": res.probes, "ledger": res.ledger}
    except BudgetExceeded as e:  # not a failure: the cell is left unfinished, to run on resume
        return {**row, "status": STOPPED, "error": str(e), "wall_time_s": time.perf_counter() - t0}, {}
    except SummaryDeferred as wait:
        # a batched sweep's cell that needs a reply no batch has given yet: nothing is written,
        # the sweep submits the request and runs the cell again (h9eval.sweeps.batching)
        return {**row, "status": WAITING, "batch_request": wait.custom_id}, {}
    except Exception as e:  # a cell's crash fails only that cell
        tb = traceback.extract_tb(e.__traceback__)
        at = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
        row.update(status="failed", error=f"{type(e).__name__}: {e}{at}", wall_time_s=time.perf_counter() - t0)
        parts = None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return row, write_cell(out, cell.run_id, row, parts)


def run_batch(cells: list[Cell], out_dir: str, policies: Mapping[str, bytes] | None = None) -> list[dict[str, Any]]:
    """:func:`run_cell` for each of ``cells`` in turn, in one worker call: a batch of cells of
    the same task loads it once and pays one round trip to the pool. ``policies``: the user
    policies the cells need, as :func:`h9eval.compaction.user.ship` sent them (registered here
    first). Returns the run rows."""
    silence()  # the sweep shows the progress; a worker's own (loading a folder of sessions) would be noise
    install(policies or {})
    return [run_cell(c, out_dir) for c in cells]


def failed_row(cell: Cell, out: Path, error: str) -> dict[str, Any]:
    """A failed run row written by the parent, when the worker could not write its own."""
    row = {**_identity_row(cell), "status": "failed", "error": error, "wall_time_s": None}
    write_cell(out, cell.run_id, row, None)
    return row
