"""A sweep's cells run in rounds around Message Batches (see :mod:`h9eval.summarizers.batches`).

:func:`run_batched` is what :func:`h9eval.sweeps.sweep.sweep` runs instead of one pass of its
executor when the spec says ``[summarizer] batch = true`` (``--batch``): each round runs the
cells still to finish on the sweep's own executor (pool, Dask or this process), records the
ones that finished, submits the requests the others wait for as one batch (several when the
API's limits cut it), polls it, stores its results, and runs the waiting cells again.
"""

from __future__ import annotations

import time

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from h9eval.core.anthropic import DEFAULT_REQUEST_TIMEOUT_S, CallLimits
from h9eval.core.budget import Budget
from h9eval.core.errors import H9Error
from h9eval.summarizers.batches import (
    BATCH_DIR_NAME,
    BatchClient,
    BatchSettings,
    BatchStore,
    is_batchable,
    pending_owners,
)
from h9eval.summarizers.registry import build_summarizer
from h9eval.sweeps.cells import Cell
from h9eval.sweeps.executors import Record
from h9eval.sweeps.worker import WAITING

__all__ = ["run_batched"]

Runner = Callable[[Sequence[Cell], Record], None]
"""Runs cells and calls the record function with each one's row (the sweep's executor)."""


def _client(
    cell: Cell,
    store: BatchStore,
    settings: BatchSettings,
    log: Callable[[str], None] | None,
    sleep: Callable[[float], None] | None,
    budget: Budget | None,
) -> BatchClient:
    """The batch client of the sweep: the API of its Anthropic summarizer (every variant of a
    spec shares its ``params``, so one key and one endpoint) and its request timeout (the spec's
    ``request_timeout_s``, else the summarizer's ``timeout_s``, else the default 60 s) for every
    Batches API call."""
    limits = CallLimits(
        request_timeout_s=cell.request_timeout_s,
        max_retries=cell.max_retries,
        max_retry_after_s=cell.max_retry_after_s,
    )
    summarizer: Any = build_summarizer(cell.summarizer, None, call_limits=limits, **cell.spec.summarizer.params)
    timeout = summarizer.timeout_s if summarizer.timeout_s is not None else DEFAULT_REQUEST_TIMEOUT_S
    return BatchClient(
        summarizer.api, store, settings, log=log, budget=budget, timeout_s=timeout, sleep=sleep or time.sleep
    )


def run_batched(
    pending: Sequence[Cell],
    out: Path,
    settings: BatchSettings,
    *,
    run: Runner,
    record: Record,
    log: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] | None = None,
    budget: Budget | None = None,
) -> int:
    """Run ``pending`` in rounds (module docstring) with ``run`` (the sweep's executor); each
    finished cell's row goes to ``record``. A batch a killed sweep left in flight is collected
    first, by its recorded id. Returns the number of batches submitted by this call.

    Cells whose summarizer is not an Anthropic one run as usual (in the first round). ``budget``:
    the sweep's spending cap, which holds each batch's bound before it is sent
    (:class:`~h9eval.core.errors.BudgetExceeded` then stops the sweep with the cells waiting)."""
    if not pending:
        return 0
    store = BatchStore(out / BATCH_DIR_NAME)
    cells = [dataclasses.replace(c, batch_dir=str(store.root)) if is_batchable(c.summarizer) else c for c in pending]
    batched = [c for c in cells if c.batch_dir]
    client = _client(batched[0], store, settings, log, sleep, budget) if batched else None
    if client is not None:
        for rec in store.in_flight():  # a killed sweep's batch: fetched by its id, never sent again
            if log is not None:
                log(f"batch {rec.get('batch_id')}: in flight when the sweep stopped; fetching its results")
            client.collect(rec)
    submitted = 0
    waiting: list[tuple[str, str]] = []  # (run id, custom_id) of the round's cells that wait

    def on_row(row: dict[str, Any], written: Any = None) -> None:
        if row.get("status") == WAITING:
            waiting.append((str(row["run_id"]), str(row["batch_request"])))
        else:
            record(row, written)

    while cells:
        waiting.clear()
        run(cells, on_row)
        if not waiting:
            break
        owners = pending_owners(waiting, store)
        if not owners or client is None:
            # a cell that waits for a reply already stored would wait for ever
            raise H9Error(
                f"batched sweep: {len(waiting)} cell(s) wait for replies that are already stored "
                f"(first: {min(waiting)[0]}); the batches folder {store.root} may be damaged"
            )
        submitted += len(client.run(owners))
        by_id = {c.run_id: c for c in cells}
        cells = [by_id[rid] for rid in sorted({rid for rid, _ in waiting})]
    return submitted
