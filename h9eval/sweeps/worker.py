"""The worker side of a sweep: run one :class:`~h9eval.sweeps.cells.Cell` and write its rows.

A cell is its :class:`~h9eval.runs.spec.RunSpec` run by :func:`~h9eval.runs.execute.execute` (the one
path for replays and episodes alike), in an environment the cell gives (its response cache, request
limits, the sweep's spending cap and batch folder, offload files inside the results folder). Each
worker process keeps its tasks and summarizers in :mod:`h9eval.runs.execute`'s per-process caches; it
writes the cell's tables under ``cells/`` and its run row last (see :mod:`h9eval.results.store`).
"""

from __future__ import annotations

import os
import shutil
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from h9eval.compaction.user import install
from h9eval.core.budget import SPEND_FILE, Budget
from h9eval.core.errors import BudgetExceeded
from h9eval.core.paths import cell_work_dir
from h9eval.core.progress import silence
from h9eval.results.store import write_cell
from h9eval.runs.execute import RunEnv, RunResult, execute, run_row
from h9eval.summarizers.batches import SummaryDeferred
from h9eval.sweeps.cells import Cell

__all__ = [
    "STOPPED",
    "WAITING",
    "cell_budget",
    "cell_env",
    "failed_row",
    "run_batch",
    "run_cell",
    "run_cell_written",
]

STOPPED = "stopped"
"""The status of a cell the spending cap kept from finishing: never written, so it runs on resume."""
WAITING = "waiting"
"""The status of a batched sweep's cell that stopped for a reply (never written: not a result)."""


def cell_budget(cell: Cell, out_dir: str | os.PathLike[str]) -> Budget | None:
    """The spending cap the cell's model calls share with the sweep's other cells (its ledger in
    ``out_dir``), or ``None`` without ``max_cost_usd``."""
    return None if cell.max_cost_usd is None else Budget(str(Path(out_dir) / SPEND_FILE), cell.max_cost_usd)


def cell_env(cell: Cell, *, offload_root: str | os.PathLike[str] | None = None, **more: Any) -> RunEnv:
    """The environment a cell runs in: its response cache, request limits and batch folder; one
    session id per task (not per cell), so offload placeholders, and so summary requests, are equal
    across cells and the shared cache can hit; ``more``: other :class:`~h9eval.runs.execute.RunEnv`
    fields (the spending cap, ``keep_views``, objects)."""
    return RunEnv(
        summarizer_cache=cell.summarizer_cache,
        call_limits=cell.call_limits,
        batch_dir=cell.batch_dir,
        offload_root=offload_root,
        session_id=cell.task_id,
        session_store=False,
        **more,
    )


def _identity_row(cell: Cell) -> dict[str, Any]:
    """The run row's columns that name the cell (the same whether it ran or failed)."""
    row = run_row(cell.spec, sweep=cell.sweep, cell_hash=cell.cell_hash, grid=cell.grid)
    for k in ("status", "error", "wall_time_s"):
        row.pop(k)
    return row


def run_cell(cell: Cell, out_dir: str) -> dict[str, Any]:
    """Run one cell and write it under ``<out_dir>/cells/`` (parts first, run row last).

    Never raises for a failure of the cell itself: the exception's type and message go to the
    run row's ``error`` with status ``failed``. Returns the run row.
    """
    return run_cell_written(cell, out_dir)[0]


def _flag(res: RunResult) -> str:
    """An offload the disk refused is harness9's fail-open path: the cell is ok, but says so."""
    failures = res.replay.offload_write_failures if res.replay is not None else ()
    return f"offload writes failed: {len(failures)} ({failures[0]})" if failures else ""


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
        res = execute(cell.spec, cell_env(cell, offload_root=work, budget=budget))
        row.update(res.summary.row())
        row.update(status="ok", error=_flag(res), wall_time_s=time.perf_counter() - t0)
        parts: dict[str, Any] | None = res.parts()
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
