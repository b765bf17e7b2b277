"""Where a sweep's cells run: in this process, in a local process pool, or on Dask.

Every executor calls ``record(row)`` once per cell, in completion order, with the cell's run
row (in this process also with the tables the cell wrote, so they are not read back). A cell
whose worker could not write its own row (a lost worker, a pickling error) gets a failed row
written by the parent, so it is rerun on resume.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from h9eval.compaction.user import ship
from h9eval.core.errors import ConfigError
from h9eval.sweeps.cells import Cell
from h9eval.sweeps.worker import failed_row, run_batch, run_cell_written

__all__ = ["Record", "execute", "batches", "MAX_BATCH"]


class Record(Protocol):
    """Called with each finished cell's run row, and the Arrow tables it wrote when this
    process wrote them (:func:`~h9eval.sweeps.worker.run_cell_written`)."""

    def __call__(self, row: dict[str, Any], written: Mapping[str, Any] | None = None, /) -> None: ...


DASK_ADDRESS_SCHEMES = ("tcp://", "tls://", "ucx://", "inproc://")

# Imported once in the fork server, then inherited by every worker it forks (saves ~1 s of
# imports per worker). pandas/pyarrow start no threads at import, so forking after is safe.
_PRELOAD = [
    "pandas",
    "pyarrow.parquet",
    "h9eval.sweeps.worker",
    "h9eval.runs.replay",
    "h9eval.runs.run",
    "h9eval.results.store",
    "h9eval.results.tables",
    "h9eval.compaction.policies",
    "h9eval.summarizers.offline",
    "h9eval.summarizers.cache",
]


def execute(pending: Sequence[Cell], out: Path, *, workers: int, scheduler: str | None, record: Record) -> None:
    """Run ``pending``: ``workers == 0`` in this process, serially; else ``scheduler`` ``None``
    (a process pool of ``workers``), ``"local"`` (a Dask ``LocalCluster``) or a Dask address."""
    if not pending:
        return
    if workers == 0:
        run_in_process(pending, out, record)
        return
    # A policy the user defined (notebook, script, own module) is sent to the workers by value;
    # one that cannot be is refused here, before any cell runs.
    policies = ship({c.policy_kind for c in pending})
    if scheduler is None:
        run_pool(pending, out, min(workers, len(pending)), record, policies)
    else:
        run_dask(pending, out, scheduler, max(1, workers), record, policies)


def run_in_process(pending: Sequence[Cell], out: Path, record: Record) -> None:
    """For debugging, and the only mode where monkeypatches apply."""
    for c in pending:
        record(*run_cell_written(c, str(out)))


# multiprocessing and concurrent.futures are imported by the functions that start processes:
# together they are a tenth of ``import h9eval``, which every command pays.


def _mp_context() -> Any:
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    # Never "fork": the parent may hold threads (tqdm, SQLite, Jupyter) and forked locks.
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return mp.get_context("spawn")


TAIL_SPLIT = 2
"""Each batch takes ``1 / (TAIL_SPLIT * workers)`` of the cells still to hand out, so batches
shrink towards the end of the sweep (guided scheduling): the first ones are large (cells of one
task together), the last ones a cell or two, so no worker sits idle while another works through
a long last batch."""


MAX_BATCH = 16
"""The most cells in one batch. A batch's cells are recorded (and the progress moves) only when
the whole batch is back: without a cap the first batches of the 672-cell demo held 168 cells
each, and its progress bar sat at 0 for minutes."""


def batches(pending: Sequence[Cell], n_workers: int) -> list[list[Cell]]:
    """``pending`` in batches for ``n_workers``, in the order to hand them out: cells of the
    same task next to each other (so a worker loads each task once), each batch
    ``1 / (TAIL_SPLIT * n_workers)`` of the cells not yet in a batch (at least one, at most
    :data:`MAX_BATCH`)."""
    ordered = sorted(pending, key=lambda c: (c.task_spec, c.task_id))  # stable: spec order within a task
    out: list[list[Cell]] = []
    i = 0
    while i < len(ordered):
        size = min(MAX_BATCH, max(1, -(-(len(ordered) - i) // (TAIL_SPLIT * max(1, n_workers)))))
        out.append(ordered[i : i + size])
        i += size
    return out


def _record_batch(
    batch: Sequence[Cell], out: Path, get_rows: Callable[[], list[dict[str, Any]]], record: Record
) -> None:
    from concurrent.futures.process import BrokenProcessPool

    try:
        rows = get_rows()
    except BrokenProcessPool as e:
        rows = [failed_row(c, out, f"worker process died: {e}") for c in batch]
    except Exception as e:  # pickling or writing errors outside the cells' own try, a lost worker
        rows = [failed_row(c, out, f"{type(e).__name__}: {e}") for c in batch]
    for row in rows:
        record(row)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WATCH_EVERY_S = 0.5


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (the pid was reused)
        return False
    return True


def _watch_parent(sweep_pid: int, ppid: int) -> None:
    while True:
        time.sleep(_WATCH_EVERY_S)
        if os.getppid() != ppid or not _pid_alive(sweep_pid):
            os._exit(1)  # the sweep is gone: nobody will ever read this worker's result


def die_with_parent(sweep_pid: int) -> None:
    """A pool worker's initializer: exit when the sweep process dies, even by SIGKILL (a pool
    worker otherwise waits forever on its call queue). The worker's own parent is the fork
    server, not the sweep, so ``PR_SET_PDEATHSIG`` (Linux) covers the fork server's death and a
    watchdog thread the sweep's."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watchdog below still applies
    threading.Thread(
        target=_watch_parent, args=(sweep_pid, os.getppid()), name="h9eval-parent-watch", daemon=True
    ).start()


def run_pool(
    pending: Sequence[Cell], out: Path, n: int, record: Record, policies: Mapping[str, bytes] | None = None
) -> None:
    """A ``ProcessPoolExecutor`` of ``n`` processes (``forkserver`` where available, else
    ``spawn``), fed :func:`batches` of cells, each worker exiting when this process dies
    (:func:`die_with_parent`). When a worker dies, every cell of its batch gets a failed row (so
    it is rerun on resume), even one that had finished."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ex = ProcessPoolExecutor(
        max_workers=n, mp_context=_mp_context(), initializer=die_with_parent, initargs=(os.getpid(),)
    )
    try:
        futs = {ex.submit(run_batch, b, str(out), policies): b for b in batches(pending, n)}
        left = set(futs)
        while left:
            finished, left = wait(left, return_when=FIRST_COMPLETED)
            for f in finished:
                _record_batch(futs[f], out, f.result, record)
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)


def run_dask(
    pending: Sequence[Cell],
    out: Path,
    scheduler: str,
    n: int,
    record: Record,
    policies: Mapping[str, bytes] | None = None,
) -> None:
    """On Dask: ``"local"`` starts a ``LocalCluster`` of ``n`` single-threaded processes; an
    address (``tcp://host:8786``) uses that scheduler, whose workers must see ``out``."""
    try:
        import dask
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ConfigError("scheduler needs Dask: pip install 'h9eval[dist]'") from None
    if scheduler != "local" and not scheduler.startswith(DASK_ADDRESS_SCHEMES):
        raise ConfigError(f"scheduler must be 'local' or a Dask address like tcp://host:8786, got {scheduler!r}")
    with contextlib.ExitStack() as stack:
        cluster = None
        if scheduler == "local":
            # The statistical profiler samples the cells' stacks every 10 ms, for a dashboard
            # that is not started: pure-Python cells lose several percent to it.
            stack.enter_context(dask.config.set({"distributed.worker.profile.enabled": False}))
            if _mp_context().get_start_method() == "forkserver":
                # Local workers forked from the pool's preloaded fork server skip ~1 s of imports
                # each and exit at once on close (spawned ones take ~0.6 s). Started here, with
                # h9eval's preload: Dask would otherwise start it with its own list of modules.
                import multiprocessing.forkserver

                multiprocessing.forkserver.ensure_running()  # type: ignore[attr-defined]
                stack.enter_context(dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}))
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(scheduler)
        _run_on_client(client, cluster, pending, out, n, record, as_completed, policies or {})


def _run_on_client(
    client: Any,
    cluster: Any,
    pending: Sequence[Cell],
    out: Path,
    n: int,
    record: Record,
    as_completed: Any,
    policies: Mapping[str, bytes],
) -> None:
    try:
        futs = {}
        for b in batches(pending, n):
            f = client.submit(
                run_batch,
                b,
                str(out),
                policies,
                pure=False,
                key=f"h9eval-cells-{b[0].cell_dir}-{b[0].cell_hash}-{len(b)}",
            )
            futs[f.key] = (f, b)
        for f in as_completed([v[0] for v in futs.values()]):
            # a worker lost: the batch's cells fail, and are rerun on resume
            _record_batch(futs[f.key][1], out, f.result, record)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
