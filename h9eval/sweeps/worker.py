"""The worker side of a sweep: run one :class:`~h9eval.sweeps.cells.Cell` and write its rows.

Each worker process loads its task from the cell's spec (so transcripts are never pickled),
with a small per-process cache, and keeps one summarizer per variant open (its SQLite cache
connection); it writes the cell's rows under ``cells/`` and its run row last (see
:mod:`h9eval.results.store`).
"""

from __future__ import annotations

import json
import time
import traceback
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from h9eval.compaction.policies import make_policy
from h9eval.core.errors import FormatError
from h9eval.results.schema import MANIFEST_SCHEMA_VERSION
from h9eval.results.store import write_cell
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.probes.runner import make_probe_fn
from h9eval.results.schema import RUN_COLUMNS, RUN_SUMMARY_KEYS
from h9eval.summarizers.registry import build_summarizer
from h9eval.sweeps.cells import Cell
from h9eval.tasks import Task, load_tasks_from_spec

__all__ = ["failed_row", "run_cell", "run_batch"]

_TASK_CACHE: OrderedDict[str, list[Task]] = OrderedDict()
_TASK_CACHE_SIZE = 4  # task lists per process: a few, since recorded sessions can be MBs each
_SUMMARIZERS: dict[str, Any] = {}

# The replay summary's keys copied into the run row, in order.


def _load_task(cell: Cell) -> Task:
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


def _summarizer(cell: Cell) -> Any:
    key = json.dumps([cell.summarizer, cell.summarizer_params, cell.summarizer_cache], sort_keys=True)
    if key not in _SUMMARIZERS:  # one per process: keeps its SQLite connection open
        _SUMMARIZERS[key] = build_summarizer(cell.summarizer, cell.summarizer_cache, **cell.summarizer_params)
    return _SUMMARIZERS[key]


def _headline(summary: Mapping[str, Any], calls: Any) -> dict[str, Any]:
    tiers = summary.get("compactions_by_tier", {})
    hits = int(calls["summarizer_cache_hits"].sum()) if len(calls) else 0
    row = {k: summary.get(k, 0) for k in RUN_SUMMARY_KEYS if k in RUN_COLUMNS}
    row.update({
        "n_compactions": int(sum(tiers.values())),
        **{f"compactions_{t}": int(tiers.get(t, 0)) for t in ("warn", "soft", "full", "emergency")},
        "summarizer_cache_hits": hits,
    })
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


def run_cell(cell: Cell, out_dir: str) -> dict[str, Any]:
    """Run one cell and write it under ``<out_dir>/cells/`` (parts first, run row last).

    Never raises for a failure of the cell itself: the exception's type and message go to the
    run row's ``error`` with status ``failed``. Returns the run row.
    """
    out = Path(out_dir)
    t0 = time.perf_counter()
    row = _identity_row(cell)
    try:
        task = _load_task(cell)
        policy = make_policy(cell.policy_kind, **cell.spec_params)
        cfg = ReplayConfig(
            history_mode=cell.history_mode,
            writeback_rules=cell.writeback_rules,
            context_window_tokens=cell.window,
            seed=cell.repeat,
        )
        res = replay(
            task,
            policy,
            summarizer=_summarizer(cell),
            config=cfg,
            run_id=cell.run_id,
            probe_fn=make_probe_fn(cell.scorers, cache=cell.summarizer_cache),
            probe_every_k=cell.probe_every_k,
            session_store=False,
            # Offload placeholders name the session folder; one session id per task (not per
            # cell) keeps summary requests equal across cells, so the shared cache can hit.
            session_id=cell.task_id,
        )
        row.update(_headline(res.summary(), res.calls))
        row.update(status="ok", error="", probe_rows=len(res.probes), wall_time_s=time.perf_counter() - t0)
        parts = {"calls": res.calls, "compactions": res.compactions, "probes": res.probes}
    except Exception as e:  # a cell's crash fails only that cell
        tb = traceback.extract_tb(e.__traceback__)
        at = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
        row.update(status="failed", error=f"{type(e).__name__}: {e}{at}", wall_time_s=time.perf_counter() - t0)
        parts = None
    write_cell(out, cell.run_id, row, parts)
    return row


def run_batch(cells: list[Cell], out_dir: str) -> list[dict[str, Any]]:
    """:func:`run_cell` for each of ``cells`` in turn, in one worker call: a batch of cells of
    the same task loads it once and pays one round trip to the pool. Returns the run rows."""
    return [run_cell(c, out_dir) for c in cells]


def failed_row(cell: Cell, out: Path, error: str) -> dict[str, Any]:
    """A failed run row written by the parent, when the worker could not write its own."""
    row = {**_identity_row(cell), "status": "failed", "error": error, "wall_time_s": None}
    write_cell(out, cell.run_id, row, None)
    return row
