"""Sweeps: run a grid of replays (tasks × policy parameters × history modes × summarizers ×
repeats) in worker processes, resumably, into one results folder.

A sweep is described by a TOML file or the equivalent dict (see :mod:`h9eval.sweeps.spec`).
Every cell (:mod:`h9eval.sweeps.cells`) is one :func:`h9eval.runs.replay.replay`, run by
:mod:`h9eval.sweeps.worker` in this process, a ``ProcessPoolExecutor`` or on Dask
(:mod:`h9eval.sweeps.executors`). An exception fails only its cell; failed and unfinished
cells are rerun on resume, finished ones are kept while their cell hash (which covers the
h9eval version and source) is unchanged. With batching (``[summarizer] batch = true``) the cells
run in rounds around Message Batches (:mod:`h9eval.sweeps.batching`). The manifest (``manifest.json``) records the spec,
every cell with the code that produced it, and each invocation.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from h9eval.core import provenance
from h9eval.core.anthropic import CallLimits
from h9eval.core.budget import SPEND_FILE, Budget, check_max_cost
from h9eval.core.errors import BudgetExceeded, CellsFailed, ConfigError, FormatError, SummarizerError
from h9eval.core.lock import LOCK_NAME, folder_lock
from h9eval.core.paths import prepare_out_dir, refuse_symlink, write_json_atomic
from h9eval.probes.placebo import DEFAULT_PLACEBO_PARTNERS, PLACEBO_FALSE_PASS_RATE, sweep_placebo
from h9eval.results.schema import MANIFEST, MANIFEST_SCHEMA_VERSION
from h9eval.results.store import (
    PLACEBO_FILE,
    Consolidation,
    Results,
    load_results,
    read_cell_row,
    read_manifest,
    write_manifest,
)
from h9eval.runs.execute import fallback_warning
from h9eval.summarizers.batches import (
    DEFAULT_BATCH_DEADLINE_S,
    DEFAULT_POLL_INTERVAL_S,
    BatchSettings,
    is_batchable,
    stderr_log,
)
from h9eval.sweeps.batching import run_batched
from h9eval.sweeps.cells import Cell, DuplicateTask, SkippedCell, expand_cells
from h9eval.sweeps.executors import execute
from h9eval.sweeps.worker import STOPPED
from h9eval.core.progress import Progress, make_progress
from h9eval.sweeps.spec import SweepSpec, check_call_limits, load_spec
from h9eval.tasks import load_tasks_from_spec

__all__ = ["SweepResult", "SweepFailed", "sweep", "min_cell_count", "DEFAULT_MAX_CELLS", "ON_FAILURE"]

DEFAULT_MAX_CELLS = 100_000
"""The most cells a sweep plans unless ``max_cells`` (``--max-cells``) raises it."""


def min_cell_count(sp: SweepSpec) -> int:
    """The least number of cells ``sp`` gives, computed without loading a task or building a
    cell (each recorded path or task spec counted as one task): a 10^6-cell grid is refused
    before planning it takes minutes or all the memory."""
    tasks = sum(len(s.seeds) for s in sp.synthetic) + len(sp.recorded) + len(sp.specs)
    points = 0
    for g in sp.policies:
        n = 1
        for values in g.grid.values():
            n *= max(1, len(values))
        points += n
    return tasks * points * max(1, len(sp.summarizers)) * max(1, len(sp.history_modes)) * max(1, sp.repeats)


@dataclass
class SweepResult:
    """What :func:`sweep` did. ``ok``/``failed``: cells in that state after this call (reused
    ones included); ``ran``: cells run by this call; ``reused``: finished cells kept from an
    earlier call; ``skipped``: invalid grid cells; ``failures``: ``(run_id, error)`` of failed
    cells; ``wall_time_s``: seconds."""

    name: str
    out_dir: Path
    n_cells: int
    ok: int
    failed: int
    ran: int
    reused: int
    skipped: list[SkippedCell]
    failures: list[tuple[str, str]]
    wall_time_s: float
    interrupted: bool = False
    stopped: str = ""
    """Why the spending cap (``max_cost_usd``) stopped the sweep (``""``: it did not); the
    unfinished cells run when the sweep is run again."""
    spent_usd: float | None = None
    """What this invocation's model calls cost, by the cap's ledger (``None``: no cap)."""
    fell_back: list[str] = field(default_factory=list)
    """Run ids of ok cells that fell back on every summary they asked for (a bad key, no
    network): their numbers measure harness9's truncation fallback, not the summarizer."""
    duplicates: list[DuplicateTask] = field(default_factory=list)
    """Tasks left out because an earlier task of the spec has the same transcript (one task once)."""

    def load(self) -> Results:
        """The results as DataFrames (:func:`h9eval.results.store.load_results`)."""
        return load_results(self.out_dir)

    def __str__(self) -> str:
        return (
            f"sweep {self.name}: {self.n_cells} cells: {self.ok} ok, {self.failed} failed, "
            f"{len(self.skipped)} skipped (invalid); {self.ran} run now, {self.reused} reused; "
            f"{self.wall_time_s:.1f} s -> {self.out_dir}"
        ) + (f"\nwarning: {duplicates_line(self.duplicates)}" if self.duplicates else "")


def duplicates_line(dups: Sequence[DuplicateTask], *, shown: int = 3) -> str:
    """One line naming the tasks left out as the same transcript as an earlier one."""
    listed = "; ".join(d.line() for d in dups[:shown]) + (
        f"; and {len(dups) - shown} more" if len(dups) > shown else ""
    )
    return f"{len(dups)} task(s) left out, each the same transcript as an earlier task (one task once): {listed}"


ON_FAILURE = ("raise", "return")
"""What :func:`sweep` does when cells failed: raise :class:`SweepFailed` (default) or return."""


class SweepFailed(CellsFailed):
    """Some cells of a sweep failed. The other cells' results are written and kept (rerun the
    same sweep to retry only the failed ones); ``result`` is the :class:`SweepResult`."""

    def __init__(self, result: SweepResult) -> None:
        self.result = result
        first = result.failures[0] if result.failures else ("?", "?")
        more = f" (and {result.failed - 1} more)" if result.failed > 1 else ""
        super().__init__(
            f"sweep {result.name}: {result.failed} of {result.n_cells} cells failed; first: {first[0]}: "
            f"{first[1]}{more}. "
            f"The {result.ok} ok cells are kept in {result.out_dir}; run the sweep again to retry the failed ones, "
            "or pass on_failure='return' to get the result without raising"
        )


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _prepare_out(out: Path) -> dict[str, Any] | None:
    """Check ``out`` is absent, empty or a sweep folder; returns its manifest when it has one."""
    if out.exists():
        if not out.is_dir():
            raise FormatError("results path exists and is not a folder", path=str(out))
        if (out / MANIFEST).exists():
            return read_manifest(out)
        if any(x.name != LOCK_NAME for x in out.iterdir()):
            raise FormatError(
                "folder exists, is not empty and has no manifest.json; refusing to write a sweep into it", path=str(out)
            )
    return None


def _default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def _summarizer_independent(sp: SweepSpec, cells: Sequence[Cell]) -> dict[str, Any]:
    """The manifest's note on the policies that use no summarizer: run once, not once per variant."""
    names = sorted({c.policy_name for c in cells if len(c.summarizer_variants) > 1})
    return {
        "policies": names,
        "ran_with": sp.summarizers[0] if names else None,
        "stands_for": list(sp.summarizers) if names else [],
        "note": (
            "these policies never call the summarizer: each cell ran once, with the first variant, and stands "
            "for every variant"
        )
        if names
        else "",
    }


def _manifest(
    sp: SweepSpec,
    cells: Sequence[Cell],
    skipped: Sequence[SkippedCell],
    old: Mapping[str, Any] | None,
    invocation: dict[str, Any],
    duplicates: Sequence[DuplicateTask] = (),
) -> dict[str, Any]:
    """The manifest at the start of a sweep (status ``running``); earlier invocations kept."""
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "kind": "sweep",
        "name": sp.name,
        "h9eval_version": provenance.h9eval_version(),
        "source_hash": provenance.source_hash(),
        "created": (old or {}).get("created", _now()),
        "provenance": provenance.provenance(),
        "spec_path": sp.source_path,
        "spec": sp.source,
        "spec_resolved": {**sp.to_dict(), "summarizer_cache": cells[0].summarizer_cache},
        "cells": [c.to_dict() for c in cells],
        "skipped": [s.to_dict() for s in skipped],
        "duplicate_tasks": [d.to_dict() for d in duplicates],
        "summarizer_independent": _summarizer_independent(sp, cells),
        "invocations": [*(old or {}).get("invocations", []), invocation],
        "status": {"state": "running"},
    }


def _reusable(out: Path, cells: Sequence[Cell], resume: bool) -> tuple[dict[str, dict[str, Any]], list[Cell]]:
    """(run rows of the cells kept from an earlier run, the cells to run): a cell is kept when
    it finished ``ok`` with the same cell hash, i.e. the same inputs and the same code."""
    done: dict[str, dict[str, Any]] = {}
    pending: list[Cell] = []
    for c in cells:
        row = read_cell_row(out, c.run_id) if resume else None
        if row is not None and row.get("status") == "ok" and row.get("cell_hash") == c.cell_hash:
            done[c.run_id] = row
        else:
            pending.append(c)
    return done, pending


def sweep(
    spec: SweepSpec | Mapping[str, Any] | str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    resume: bool = True,
    progress: bool = True,
    skip_invalid: bool = False,
    max_cells: int = DEFAULT_MAX_CELLS,
    call_limits: CallLimits | None = None,
    max_cost_usd: float | None = None,
    on_failure: str = "raise",
    batch: bool | None = None,
    batch_poll_interval_s: float | None = None,
    batch_deadline_s: float | None = None,
) -> SweepResult:
    """Run a sweep (see :mod:`h9eval.sweeps.spec` for the spec) and consolidate its results.

    ``out_dir``: default ``results/<name>`` (relative to the current folder). ``workers``:
    processes (default ``min(2, cpu count)``; ``0`` runs the cells in this process, serially:
    for debugging, and the only mode where monkeypatches apply). ``scheduler``: ``None``
    (local process pool), ``"local"`` (a Dask ``LocalCluster`` of ``workers`` processes) or a
    Dask scheduler address ``tcp://host:port`` (its workers must see ``out_dir`` at the same
    path). ``resume``: keep cells that finished ``ok`` with the same cell hash (default); with
    ``False`` every cell is rerun. ``progress``: a tqdm bar on a terminal or in a notebook,
    plain periodic lines on a stderr that is neither (:mod:`h9eval.core.progress`). ``skip_invalid``:
    skip grid cells the policy rejects (also the spec key ``skip_invalid``). ``max_cells``: a
    spec of more cells is refused (:class:`ConfigError`) before it is planned. ``call_limits``:
    request timeout and retries of every model request, over the spec's ``request_timeout_s`` /
    ``max_retries`` (each given one replaces the spec's). ``max_cost_usd``: what this invocation
    may spend on model calls, over the spec's (:mod:`h9eval.core.budget`): the call that would
    pass it is not made, the sweep stops with its unfinished cells pending (``result.stopped``
    says why; run it again to continue). ``batch``: send the summaries through
    the Message Batches API, batched across cells (:mod:`h9eval.summarizers.batches`; over the
    spec's ``[summarizer] batch``; ``None``: the spec's), polled every ``batch_poll_interval_s``
    seconds (over the spec's; default 60) for at most ``batch_deadline_s`` seconds after its
    submission (over the spec's; default 24 h: then its summaries fall back). ``on_failure``:
    when cells failed, ``"raise"`` (default) raises :class:`SweepFailed` after the sweep ends
    (holding the result; the ok cells are kept), ``"return"`` returns the result, whose
    ``failed`` and ``failures`` say which.

    Raises :class:`ConfigError` for an invalid spec (before anything runs). A cell that raises
    is recorded as failed; a KeyboardInterrupt stops the sweep, keeping finished cells. The
    results folder is locked for the whole call: a second sweep into it gets one
    :class:`FormatError` naming the holder's pid.
    """
    t0 = time.perf_counter()
    if on_failure not in ON_FAILURE:
        raise ConfigError(f"on_failure must be one of {', '.join(ON_FAILURE)}, got {on_failure!r}")
    sp = with_batch(load_spec(spec), batch, batch_poll_interval_s, batch_deadline_s)
    if call_limits is not None:
        given = {k: v for k, v in dataclasses.asdict(call_limits).items() if v is not None}
        sp = dataclasses.replace(sp, call_limits=dataclasses.replace(sp.call_limits, **given))
        check_call_limits(sp.call_limits, sp.summarizer_params)
    if max_cost_usd is not None:
        sp = dataclasses.replace(sp, max_cost_usd=check_max_cost(max_cost_usd))
    out = Path(out_dir) if out_dir is not None else Path("results") / sp.name
    refuse_symlink(out, what="results folder")  # before resolve(), which would follow it
    out = out.resolve()
    _prepare_out(out)  # before planning: a foreign folder is refused at once
    n_min = min_cell_count(sp)
    if n_min > max_cells:
        raise ConfigError(
            f"the spec gives at least {n_min:,} cells, above max_cells={max_cells:,}; "
            "shrink the grid, seeds or repeats, or raise the limit (--max-cells)"
        )
    if progress and n_min > 1000:  # planning a large grid takes a while: say what is coming
        print(f"sweep {sp.name}: planning at least {n_min:,} cells", file=sys.stderr)
    dups: list[DuplicateTask] = []
    cells, skipped = expand_cells(sp, out_dir=out, skip_invalid=skip_invalid or sp.skip_invalid, duplicates=dups)
    if dups and progress:
        print(f"sweep {sp.name}: warning: {duplicates_line(dups)}", file=sys.stderr)
    if len(cells) > max_cells:
        raise ConfigError(
            f"the spec gives {len(cells):,} cells, above max_cells={max_cells:,}; raise the limit (--max-cells)"
        )
    n_workers = _default_workers() if workers is None else workers
    if not isinstance(n_workers, int) or isinstance(n_workers, bool) or n_workers < 0:
        raise ConfigError(f"workers must be an integer >= 0, got {n_workers!r}")
    if scheduler is not None and n_workers == 0:
        raise ConfigError("workers=0 (in-process) cannot be combined with a Dask scheduler")
    prepare_out_dir(out, what="results folder")
    with folder_lock(out):
        result = _sweep_locked(
            sp,
            out,
            t0,
            cells,
            skipped,
            n_workers,
            scheduler=scheduler,
            resume=resume,
            progress=progress,
            duplicates=dups,
        )
    if result.failed and on_failure == "raise":
        raise SweepFailed(result)
    return result


def with_batch(
    sp: SweepSpec, batch: bool | None, poll_interval_s: float | None, deadline_s: float | None = None
) -> SweepSpec:
    """``sp`` with the command's batch settings over the spec's (``None``: the spec's)."""
    on = sp.batch is not None if batch is None else batch
    if not on:
        for key, v in (("batch_poll_interval_s", poll_interval_s), ("batch_deadline_s", deadline_s)):
            if v is not None:
                flag = "--" + key.replace("_", "-")
                raise ConfigError(f"{key} ({flag}) goes with batching (--batch, or [summarizer] batch = true)")
        return dataclasses.replace(sp, batch=None)
    if not any(is_batchable(v) for v in sp.summarizers):
        names = ", ".join(sp.summarizers)
        raise ConfigError(f"batching (--batch) needs an Anthropic summarizer; the spec's are {names}")
    poll = DEFAULT_POLL_INTERVAL_S if sp.batch is None else sp.batch.poll_interval_s
    if poll_interval_s is not None:
        poll = poll_interval_s
    deadline = DEFAULT_BATCH_DEADLINE_S if sp.batch is None else sp.batch.deadline_s
    if deadline_s is not None:
        deadline = deadline_s
    return dataclasses.replace(sp, batch=BatchSettings(poll_interval_s=poll, deadline_s=deadline))


def _write_placebo(sp: SweepSpec, out: Path, manifest: dict[str, Any], *, progress: bool) -> None:
    """Write ``placebo.json`` (read by consolidation into the probe rows; removed for a sweep
    without probes or tasks): every task of the sweep scored against every task of another
    family, and generated synthetic tasks up to
    :data:`~h9eval.probes.placebo.DEFAULT_PLACEBO_PARTNERS`
    (:func:`~h9eval.probes.placebo.sweep_placebo`); a summary goes in the manifest."""
    path = out / PLACEBO_FILE
    if not sp.scorers or not sp.task_specs():
        path.unlink(missing_ok=True)
        return
    tasks = {t.task_id: t for _, ts in sp.task_specs() for t in load_tasks_from_spec(ts)}
    if progress:
        print(f"sweep {sp.name}: placebo control, {len(tasks)} task(s) against unrelated histories", file=sys.stderr)
    results = sweep_placebo(list(tasks.values()))
    settings = {
        "min_partners": DEFAULT_PLACEBO_PARTNERS,
        "false_pass_rate": PLACEBO_FALSE_PASS_RATE,
        "n_tasks": len(tasks),
        "partners_per_task": sorted({r.n_partners for r in results}),
        "n_probes": len(results),
        "n_excluded": sum(r.excluded for r in results),
    }
    rows = [[r.task_id, r.probe_id, r.placebo_rate, r.excluded] for r in results]
    write_json_atomic(path, {**settings, "rows": rows})
    manifest["placebo"] = settings


def _sweep_locked(
    sp: SweepSpec,
    out: Path,
    t0: float,
    cells: list[Cell],
    skipped: list[SkippedCell],
    n_workers: int,
    *,
    scheduler: str | None,
    resume: bool,
    progress: bool,
    duplicates: Sequence[DuplicateTask] = (),
) -> SweepResult:
    old = _prepare_out(out)  # read again under the lock: another sweep may have just finished
    work = out / "work"  # offload copies of tool outputs left by killed cells: no cell is running now
    if work.is_dir() and not work.is_symlink():
        shutil.rmtree(work, ignore_errors=True)
    manifest = _manifest(
        sp,
        cells,
        skipped,
        old,
        duplicates=duplicates,
        invocation={
            "started": _now(),
            "workers": n_workers,
            "scheduler": scheduler,
            "resume": resume,
            "argv": list(sys.argv),
        },
    )
    write_manifest(out, manifest)

    done, pending = _reusable(out, cells, resume)
    reused = len(done)
    budget = Budget(str(out / SPEND_FILE), sp.max_cost_usd) if sp.max_cost_usd is not None else None
    if budget is not None:
        budget.start()  # each invocation gets the whole cap
    stopped: dict[str, str] = {}
    bar: Progress | None = None
    if progress and pending:
        bar = make_progress(total=len(cells), initial=reused, desc=f"sweep {sp.name}")
    n_ok = reused
    n_failed = 0
    interrupted = False
    stopped_by: SummarizerError | None = None
    # Each cell's tables are taken in as it is recorded, while the other cells run: the end of
    # the sweep reads only the cells reused from an earlier call.
    tables = Consolidation(out, manifest)

    def record(row: dict[str, Any], written: Mapping[str, Any] | None = None) -> None:
        nonlocal n_ok, n_failed
        if row.get("status") == STOPPED:  # not run: pending for the next invocation
            stopped[row["run_id"]] = str(row.get("error", ""))
            return
        done[row["run_id"]] = row
        tables.add(row["run_id"], written)
        if row.get("status") == "ok":
            n_ok += 1
        else:
            n_failed += 1
        if bar is not None:
            # the counts first: the update writes the line (or redraws the bar) that shows them
            bar.set_postfix(ok=n_ok, failed=n_failed, remaining=len(cells) - n_ok - n_failed, refresh=False)
            bar.update(1)

    try:
        if sp.batch is not None:
            run_batched(
                pending,
                out,
                sp.batch,
                record=record,
                log=stderr_log if progress else None,
                budget=budget,
                run=lambda cs, rec: execute(cs, out, workers=n_workers, scheduler=scheduler, record=rec),
            )
        else:
            execute(pending, out, workers=n_workers, scheduler=scheduler, record=record)
    except KeyboardInterrupt:
        interrupted = True
    except BudgetExceeded:  # a batch held its bound and would pass the cap: the ledger says why
        pass
    except SummarizerError as e:  # the Batches API failed (a bad key, an outage): stop as if interrupted
        interrupted, stopped_by = True, e
    finally:
        if bar is not None:
            bar.close()

    failures = sorted((rid, str(r.get("error", ""))) for rid, r in done.items() if r.get("status") != "ok")
    why_stopped = budget.stopped() if budget is not None else ""
    if not interrupted and not why_stopped:
        _write_placebo(sp, out, manifest, progress=progress)
        tables.finish()
    spent = budget.state()["spent_usd"] if budget is not None else None
    manifest["status"] = {
        "state": "interrupted" if interrupted else STOPPED if why_stopped else "finished",
        **({"stopped": why_stopped, "spent_usd": spent} if budget is not None else {}),
        "ok": n_ok,
        "failed": n_failed,
        "pending": len(cells) - n_ok - n_failed,
        "skipped": len(skipped),
    }
    manifest["invocations"][-1]["finished"] = _now()
    write_manifest(out, manifest)
    result = SweepResult(
        name=sp.name,
        out_dir=out,
        n_cells=len(cells),
        ok=n_ok,
        failed=n_failed,
        ran=len(done) - reused,
        reused=reused,
        skipped=list(skipped),
        failures=failures,
        wall_time_s=time.perf_counter() - t0,
        interrupted=interrupted,
        stopped=why_stopped,
        spent_usd=spent,
        fell_back=sorted(rid for rid, r in done.items() if r.get("status") == "ok" and fallback_warning(r)),
        duplicates=list(duplicates),
    )
    if stopped_by is not None:
        raise SummarizerError(f"{stopped_by}; the sweep stopped, its finished cells are kept: run it again to resume")
    if interrupted:
        raise KeyboardInterrupt(str(result))
    return result
