"""The on-disk results of a sweep, and the reader notebooks use (``load_results``).

Layout of ``results/<sweep-name>/``::

    manifest.json                 schema_version, provenance, spec as passed and resolved,
                                  the cell list, skipped cells, status counts
    cells/<run-id-safe>/          one folder per cell, written by the worker that ran it:
        calls.parquet             \\
        compactions.parquet        > the cell's rows (only when the cell succeeded)
        probes.parquet            /
        run.parquet               the cell's one ``runs`` row, written LAST: it is the
                                  completion marker (status ``ok`` or ``failed``)
    runs.parquet, calls.parquet,  the consolidated tables: every cell's parts, rows sorted
    compactions.parquet,          by ``run_id`` (then ``call_index`` / ``record_index``)
    probes.parquet
    consolidated.json             fingerprint of the cell markers the tables were built from
    summary_cache.sqlite          the summarizer response cache shared by all cells (default)

Every file is written to a temporary name and ``os.replace``-d, so a killed sweep leaves
either a whole file or none. A cell without ``run.parquet`` never finished; one whose
``run.parquet`` says ``failed`` is rerun on resume, like one that never finished.
:func:`load_results` reads the consolidated tables when their fingerprint matches the cell
markers, else it rebuilds them from the cell parts (a sweep still running, or killed).

Determinism: a sweep of the same spec gives equal tables except the execution-dependent
columns listed in :data:`EXECUTION_COLUMNS` (wall times, summarizer latencies, and cache hits,
which depend on which cell asked first); :func:`drop_execution_columns` removes them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.core.anthropic import redact_secret_params
from h9eval.core.errors import FormatError
from h9eval.core.paths import prepare_out_dir, refuse_symlink, safe_name, write_json_atomic
from h9eval.results.io import check_manifest_version, read_arrow, read_table, write_arrow, write_table
from h9eval.results.schema import (
    SORT_KEYS,
    CALL_COLUMNS,
    CELL_PARTS,
    EPISODE_COLUMNS,
    CONSOLIDATED,
    DIFFS_COLUMNS,
    EXECUTION_COLUMNS,
    LEDGER_COLUMNS,
    MANIFEST,
    MANIFEST_SCHEMA_VERSION,
    MARKER,
    OPTIONAL_TABLES,
    PROBE_COLUMNS,
    RUN_COLUMNS,
    TABLES,
)
from h9eval.results.tables import diffs_table, episodes_table, ledger_table, records_to_frame

__all__ = [
    "Results",
    "load_results",
    "require_finished",
    "drop_execution_columns",
    "cell_dir_name",
    "Consolidation",
]

"""Version of the folder layout, ``manifest.json`` and the ``runs`` table (bump on a change of
meaning). The per-call tables carry :data:`h9eval.runs.replay.RESULTS_SCHEMA_VERSION` in their
parquet metadata."""

"""The manifest and parquet schema versions :func:`load_results` reads."""


"""Columns whose values depend on the machine or the execution order, not on the spec."""


def cell_dir_name(run_id: str) -> str:
    """The folder name of a cell under ``cells/`` (``run_id`` made a safe path component)."""
    return safe_name(run_id, allow_empty=False)


def drop_execution_columns(df: Any, table: str) -> Any:
    """``df`` without the :data:`EXECUTION_COLUMNS` of ``table`` (to compare two sweeps)."""
    return df.drop(columns=[c for c in EXECUTION_COLUMNS.get(table, ()) if c in df.columns])


# -- writing ----------------------------------------------------------------------------------
def write_manifest(out: Path, manifest: Mapping[str, Any]) -> None:
    """Write ``manifest.json`` atomically."""
    # A key given as a summarizer parameter (``params = { api_key = ... }``) is never written.
    write_json_atomic(out / MANIFEST, redact_secret_params(dict(manifest)))


def runs_frame(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The ``runs`` table from row dicts, with :data:`RUN_COLUMNS` order and dtypes."""
    import pandas as pd

    df = pd.DataFrame([{c: r.get(c) for c in RUN_COLUMNS} for r in rows], columns=list(RUN_COLUMNS))
    df = df.astype(RUN_COLUMNS)
    return df.sort_values("run_id", kind="stable").reset_index(drop=True)


def clear_cell(out: Path, run_id: str) -> Path:
    """Remove a cell's marker and parts (marker first: a half-cleared cell is "not done")."""
    d = out / "cells" / cell_dir_name(run_id)
    # Never clear through a link: it would delete files wherever the link points.
    refuse_symlink(out / "cells", what="cells folder")
    refuse_symlink(d, what="cell folder")
    if d.exists() and not d.is_dir():
        raise FormatError("cell folder path exists and is not a folder", path=str(d))
    for name in (MARKER, *(f"{p}.parquet" for p in (*CELL_PARTS, *OPTIONAL_TABLES))):
        try:
            (d / name).unlink()
        except FileNotFoundError:
            pass
    return d


_RUN_SCHEMA: list[Any] = []  # the marker's Arrow schema, built once per process


def _run_arrow(row: Mapping[str, Any]) -> Any:
    """``runs_frame([row])`` as an Arrow table, without pandas' per-column casts (most of a
    cell's write time); the cast path is kept for any value the direct conversion refuses."""
    import pyarrow as pa

    if not _RUN_SCHEMA:
        _RUN_SCHEMA.append(pa.Table.from_pandas(runs_frame([]), preserve_index=False).schema)
    values = {c: (None if isinstance(v, float) and v != v else v) for c in RUN_COLUMNS for v in (row.get(c),)}
    try:
        return pa.Table.from_pylist([values], schema=_RUN_SCHEMA[0])
    except (pa.ArrowException, TypeError, ValueError):
        return pa.Table.from_pandas(runs_frame([row]), preserve_index=False)


def write_cell(out: Path, run_id: str, row: Mapping[str, Any], parts: Mapping[str, Any] | None) -> dict[str, Any]:
    """Write a cell's part tables, then its run row (the completion marker) last. Returns the
    Arrow tables written, by table name (``"runs"``: the marker), for :meth:`Consolidation.add`."""
    d = clear_cell(out, run_id)
    prepare_out_dir(out / "cells", what="cells folder")
    prepare_out_dir(d, what="cell folder")
    written = {name: write_table(df, d / f"{name}.parquet", name) for name, df in (parts or {}).items()}
    written["runs"] = write_arrow(_run_arrow(row), d / MARKER, "runs")
    return written


def read_cell_row(out: Path, run_id: str) -> dict[str, Any] | None:
    """The cell's run row, or ``None`` when it has no readable marker (never finished)."""
    p = out / "cells" / cell_dir_name(run_id) / MARKER
    if not p.exists():
        return None
    try:
        df = read_table(p, "runs")
    except FormatError:
        return None
    if len(df) != 1:
        return None
    return {str(k): (None if _isna(v) else v) for k, v in df.iloc[0].to_dict().items()}


def _isna(v: Any) -> bool:
    try:
        import pandas as pd

        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _fingerprint(out: Path, run_ids: Iterable[str]) -> str:
    """A hash over the cells' markers (name, size, mtime): changes when any cell is rewritten."""
    h = hashlib.sha256()
    for rid in sorted(run_ids):
        p = out / "cells" / cell_dir_name(rid) / MARKER
        try:
            st = p.stat()
            h.update(f"{rid}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except FileNotFoundError:
            h.update(f"{rid}\0-\n".encode())
    return h.hexdigest()


def consolidate(out: Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Build the top-level tables from the cell parts and write them atomically.

    ``consolidated.json`` (the markers' fingerprint) is written last, so a kill half-way leaves
    stale tables that :func:`load_results` recognises and bypasses. Returns the tables.
    """
    return Consolidation(out, manifest).finish()


class Consolidation:
    """:func:`consolidate`, streamed: each cell's tables are taken in by :meth:`add` as the
    cell is recorded (while the other cells still run), so :meth:`finish` reads only the cells
    never added (those reused from an earlier call) and gives the same tables, byte for byte,
    as a consolidation of the finished folder.

    A cell added is not expected to change afterwards: the sweep holds the folder lock, and a
    cell rewritten by the sweep itself (a failed row for a lost worker) is added again."""

    def __init__(self, out: Path, manifest: Mapping[str, Any]) -> None:
        self.out = out
        self.run_ids = [c["run_id"] for c in manifest.get("cells", [])]
        self.hashes = _cell_hashes(manifest)
        self._cells: dict[str, CellTables | None] = {}

    def add(self, run_id: str, written: Mapping[str, Any] | None = None) -> None:
        """Take in cell ``run_id``: ``written`` is the Arrow tables its worker wrote (by table
        name, ``"runs"`` the marker; :func:`write_cell` returns them), when this process holds
        them, else they are read from the cell's folder."""
        self._cells.pop(run_id, None)
        d = self.out / "cells" / cell_dir_name(run_id)
        try:
            if written is None:
                self._cells[run_id] = _read_cell(self.out, run_id, self.hashes)
            else:
                self._cells[run_id] = _checked_cell(
                    run_id, written["runs"], lambda n, _p: written.get(n), d, self.hashes
                )
        except FormatError:
            pass  # not taken in: finish() reads it again and raises then, where consolidate() would

    def finish(self) -> dict[str, Any]:
        """Write the consolidated tables, then ``consolidated.json``; returns the tables. The
        probe rows' placebo columns come from ``placebo.json`` when the sweep wrote one
        (:func:`fill_placebo`: the control needs every task of the sweep, so no cell can)."""
        out = self.out
        fp = _fingerprint(out, self.run_ids)
        cells = (
            self._cells[rid] if rid in self._cells else _read_cell(out, rid, self.hashes)
            for rid in sorted(self.run_ids)
        )
        tables = _assemble(cells)
        tables["probes"] = fill_placebo(tables["probes"], out / PLACEBO_FILE)
        try:
            (out / CONSOLIDATED).unlink()
        except FileNotFoundError:
            pass
        for name in TABLES:
            write_table(tables[name], out / f"{name}.parquet", name)
        write_json_atomic(
            out / CONSOLIDATED,
            {"schema_version": MANIFEST_SCHEMA_VERSION, "fingerprint": fp, "cells": len(self.run_ids)},
        )
        return tables


PLACEBO_FILE = "placebo.json"
"""The sweep's placebo control, one entry per (task, probe): written by the sweep before it
consolidates, read by every consolidation (``{"rows": [[task_id, probe_id, placebo_rate,
excluded], ...], ...}`` plus the settings that produced it)."""


def fill_placebo(probes: Any, path: Path) -> Any:
    """``probes`` with ``placebo_rate``/``placebo_excluded`` from the placebo file at ``path``
    (rows of probes it does not list: NaN / False); unchanged when there is no such file."""
    if not path.exists() or len(probes) == 0:
        return probes
    try:
        rows = json.loads(path.read_text())["rows"]
        look = {(str(t), str(p)): (float(r), bool(e)) for t, p, r, e in rows}
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(f"placebo file is not readable ({type(e).__name__}: {e})", path=str(path)) from None
    keys = zip(probes["task_id"].astype(str), probes["probe_id"].astype(str))
    got = [look.get(k, (float("nan"), False)) for k in keys]
    out = probes.copy()
    out["placebo_rate"] = [g[0] for g in got]
    out["placebo_excluded"] = [g[1] for g in got]
    return out


def empty_table(name: str) -> Any:
    """The table `name` with its columns and no rows (a table a folder lacks, or an export left out)."""
    import pandas as pd

    if name == "calls":
        return pd.DataFrame(columns=list(CALL_COLUMNS))
    if name == "compactions":
        return records_to_frame([], run_id="", session_id="")
    if name == "probes":
        return pd.DataFrame(columns=list(PROBE_COLUMNS))
    if name == "episodes":
        return episodes_table([])
    if name == "ledger":
        return ledger_table([])
    if name == "diffs":
        return diffs_table([])
    return runs_frame([])


def _cell_hashes(manifest: Mapping[str, Any]) -> dict[str, str]:
    return {c["run_id"]: c["cell_hash"] for c in manifest.get("cells", []) if isinstance(c.get("cell_hash"), str)}


def _check_part(t: Any, rid: str, path: Path) -> None:
    """A part copied from another cell would add its rows under the wrong cell: refuse it."""
    if "run_id" not in t.column_names:
        raise FormatError("cell part has no run_id column", path=str(path))
    found = {v for v in t.column("run_id").unique().to_pylist()}
    if found - {rid}:
        raise FormatError(
            f"cell part holds rows of run {sorted(map(str, found - {rid}))[0]!r}; expected only {rid!r}", path=str(path)
        )


CellTables = tuple[Any, dict[str, Any]]
"""A cell's Arrow tables as consolidation uses them: (its one-row run table, its parts by name;
no parts for a failed cell)."""


def _checked_cell(
    rid: str, run: Any, part: Callable[[str, Path], Any], d: Path, hashes: Mapping[str, str] | None
) -> CellTables | None:
    """``(run, parts)`` after the checks every cell's tables pass, whether read from ``d`` or
    handed over by the process that wrote them (``part(name, path)``: the part, ``None`` when
    absent; called in order, so the first problem found is the same either way); ``None`` for a
    cell written for other inputs."""
    if run.num_rows != 1 or "run_id" not in run.column_names or run.column("run_id")[0].as_py() != rid:
        raise FormatError(f"expected one run row for {rid!r}", path=str(d / MARKER))
    want = (hashes or {}).get(rid)
    if want is not None and "cell_hash" in run.column_names and run.column("cell_hash")[0].as_py() not in (want, None):
        return None  # written for other inputs or code (a resume not yet past it): not this cell's rows
    if run.column("status")[0].as_py() != "ok":
        return run, {}
    kept: dict[str, Any] = {}
    for n in (*CELL_PARTS, *OPTIONAL_TABLES):  # an episode cell's extra part; replay cells have none
        p = d / f"{n}.parquet"
        t = part(n, p)
        if t is None:
            if n in CELL_PARTS:
                raise FormatError(f"cell marked ok but its {n} part is missing", path=str(p))
            continue
        _check_part(t, rid, p)
        kept[n] = t
    return run, kept


def _read_part(name: str, path: Path) -> Any:
    return read_arrow(path, name) if path.exists() else None


def _read_cell(out: Path, rid: str, hashes: Mapping[str, str] | None) -> CellTables | None:
    """The cell's tables read from its folder; ``None`` when it has no marker (never finished)."""
    d = out / "cells" / cell_dir_name(rid)
    marker = d / MARKER
    if not marker.exists():
        return None
    return _checked_cell(rid, read_arrow(marker, "runs"), _read_part, d, hashes)


def _tables_from_cells(out: Path, run_ids: Sequence[str], hashes: Mapping[str, str] | None = None) -> dict[str, Any]:
    tables = _assemble(_read_cell(out, rid, hashes) for rid in sorted(run_ids))
    tables["probes"] = fill_placebo(tables["probes"], out / PLACEBO_FILE)
    return tables


def _assemble(cells: Iterable[CellTables | None]) -> dict[str, Any]:
    """The tables from the cells' tables, given in ``run_id`` order (so the tables' row order
    does not depend on timing)."""
    import pyarrow as pa

    runs: list[Any] = []
    parts: dict[str, list[Any]] = {n: [] for n in (*CELL_PARTS, *OPTIONAL_TABLES)}
    for cell in cells:
        if cell is None:
            continue
        runs.append(cell[0])
        for n, t in cell[1].items():
            parts[n].append(t)
    # Concatenating in Arrow, then converting once, is ~10x faster than per-part pandas frames;
    # "permissive" promotes a column that is all-null in one part to the type it has elsewhere.
    tables: dict[str, Any] = {}
    tables["runs"] = (
        runs_frame(pa.concat_tables(runs, promote_options="permissive").to_pylist()) if runs else runs_frame([])
    )
    for n in (*CELL_PARTS, *OPTIONAL_TABLES):
        frames = [t for t in parts[n] if t.num_rows]
        if not frames:
            tables[n] = parts[n][0].to_pandas() if parts[n] else empty_table(n)
            continue
        df = pa.concat_tables(frames, promote_options="permissive").to_pandas()
        keys = [k for k in SORT_KEYS[n] if k in df.columns]
        tables[n] = df.sort_values(keys, kind="stable").reset_index(drop=True) if keys else df
    if len(tables["episodes"]):
        ep = tables["episodes"]
        # a version-1 part lacks the billed columns: unknown, not $0
        ep = ep.assign(**{k: math.nan for k in EPISODE_COLUMNS if k not in ep.columns})
        tables["episodes"] = ep.astype({k: v for k, v in EPISODE_COLUMNS.items() if k in ep.columns})
    if len(tables["ledger"]):
        tables["ledger"] = tables["ledger"].astype(LEDGER_COLUMNS)
    if len(tables["diffs"]):
        tables["diffs"] = tables["diffs"].astype(DIFFS_COLUMNS)
    return tables


# -- reading ----------------------------------------------------------------------------------
def read_manifest(folder: Path) -> dict[str, Any]:
    """Read and check ``manifest.json``; :class:`FormatError` names the file on any problem."""
    p = folder / MANIFEST
    if not folder.is_dir():
        raise FormatError("no such results folder", path=str(folder))
    if not p.is_file():
        raise FormatError("no manifest.json; not an h9eval sweep results folder", path=str(folder))
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise FormatError(f"cannot read manifest ({e})", path=str(p)) from None
    except json.JSONDecodeError as e:
        raise FormatError(f"manifest is not JSON ({e.msg})", path=str(p), where=f"line {e.lineno}") from None
    if not isinstance(m, dict) or "schema_version" not in m:
        raise FormatError("not an h9eval manifest (no schema_version)", path=str(p))
    check_manifest_version(m["schema_version"], p)
    if m.get("kind") != "sweep" or not isinstance(m.get("cells"), list):
        raise FormatError(
            f"not an h9eval sweep manifest (kind {m.get('kind')!r}; expected 'sweep' with a cell list)", path=str(p)
        )
    for i, c in enumerate(m["cells"]):
        if not isinstance(c, dict) or not isinstance(c.get("run_id"), str):
            raise FormatError("cell entry lacks a run_id", path=str(p), where=f"cells[{i}]")
    return m


@dataclass
class Results:
    """A sweep's results as DataFrames (see the module docstring for the columns).

    ``runs``: one row per cell that finished (ok or failed). ``calls``, ``compactions``,
    ``probes``: tidy rows of the ok cells, joined to ``runs`` on ``run_id``. ``episodes``: one
    row per closed-loop episode cell (:data:`~h9eval.results.schema.EPISODE_COLUMNS`; empty for
    a sweep without ``[tasks] worlds`` and for folders written before them). ``manifest``: the
    parsed ``manifest.json``. ``from_parts``: True when the consolidated tables were stale or
    missing and the tables were rebuilt from the cell parts.
    """

    path: Path
    manifest: dict[str, Any]
    runs: Any
    calls: Any
    compactions: Any
    probes: Any
    from_parts: bool = False
    skipped: list[dict[str, Any]] = field(default_factory=list)
    episodes: Any = None
    ledger: Any = None
    """The loss ledger (:data:`~h9eval.results.schema.LEDGER_COLUMNS`): one row per compaction round
    and live item of the replay cells; empty for folders written before it."""
    diffs: Any = None
    """What each compaction round took out of each run's view (:data:`~h9eval.results.schema.DIFFS_COLUMNS`;
    :func:`~h9eval.results.tables.decode_diffs` decodes its JSON columns); empty for folders written
    before run specs."""

    def __post_init__(self) -> None:
        if self.episodes is None:
            self.episodes = episodes_table([])
        if self.ledger is None:
            self.ledger = ledger_table([])
        if self.diffs is None:
            self.diffs = diffs_table([])

    @property
    def ok(self) -> Any:
        """The ``runs`` rows with status ``ok``."""
        return self.runs[self.runs["status"] == "ok"]

    @property
    def failed(self) -> Any:
        """The ``runs`` rows with status ``failed`` (see the ``error`` column)."""
        return self.runs[self.runs["status"] == "failed"]

    def pending(self) -> list[str]:
        """Run ids in the manifest that have no run row yet (never finished)."""
        have = set(self.runs["run_id"])
        return [c["run_id"] for c in self.manifest["cells"] if c["run_id"] not in have]

    def runs_with_params(self, which: str = "grid") -> Any:
        """``runs`` with one column per parameter, prefixed ``param.``: the grid point
        (``which="grid"``, default) or every resolved parameter (``which="params"``)."""
        import pandas as pd

        col = "grid_json" if which == "grid" else "params_json"
        wide = pd.DataFrame(
            [json.loads(s) if isinstance(s, str) and s else {} for s in self.runs[col]], index=self.runs.index
        )
        return pd.concat([self.runs, wide.add_prefix("param.")], axis=1)

    def __repr__(self) -> str:
        n_ok = int((self.runs["status"] == "ok").sum()) if len(self.runs) else 0
        return (
            f"Results({str(self.path)!r}: {len(self.manifest['cells'])} cells, {n_ok} ok, "
            f"{len(self.runs) - n_ok} failed, {len(self.skipped)} skipped; {len(self.calls)} calls)"
        )


def load_results(path: str | os.PathLike[str]) -> Results:
    """Read ``results/<sweep>/`` into a :class:`Results`.

    Uses the consolidated tables when they match the cell markers, else rebuilds them from the
    cell parts (a sweep still running or killed). Raises :class:`~h9eval.core.errors.FormatError`
    naming the file for a folder that is not a sweep's, a corrupted file, or a schema version
    this h9eval does not read.
    """
    folder = Path(path)
    m = read_manifest(folder)
    run_ids = [c["run_id"] for c in m["cells"]]
    tables: dict[str, Any] | None = None
    cons = folder / CONSOLIDATED
    required = [n for n in TABLES if n not in OPTIONAL_TABLES]
    if cons.is_file() and all((folder / f"{n}.parquet").is_file() for n in required):
        try:
            stamp = json.loads(cons.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise FormatError(f"cannot read consolidation stamp ({e})", path=str(cons)) from None
        if isinstance(stamp, dict) and stamp.get("fingerprint") == _fingerprint(folder, run_ids):
            tables = {n: read_table(folder / f"{n}.parquet", n) for n in TABLES if (folder / f"{n}.parquet").is_file()}
            for n in OPTIONAL_TABLES:
                tables.setdefault(n, empty_table(n))
    from_parts = tables is None
    if tables is None:
        tables = _tables_from_cells(folder, run_ids, _cell_hashes(m))
    return Results(
        path=folder,
        manifest=m,
        runs=tables["runs"],
        calls=tables["calls"],
        compactions=tables["compactions"],
        probes=tables["probes"],
        from_parts=from_parts,
        skipped=list(m.get("skipped", [])),
        episodes=tables["episodes"],
        ledger=tables["ledger"],
        diffs=tables["diffs"],
    )


def require_finished(res: Results) -> Results:
    """``res`` when at least one of its cells finished; else a :class:`FormatError` naming the folder.

    :func:`load_results` reads a folder whose cells have not finished (a sweep just started, or one
    whose tables were lost) as empty tables, which is right for :meth:`Results.pending`; an analysis
    of it (``report``, ``compare``) would fail deep inside pandas on the empty, untyped columns, so
    it asks for finished cells first.
    """
    if len(res.runs):
        return res
    tables = ", ".join(f"{n}.parquet" for n in TABLES if n not in OPTIONAL_TABLES)
    raise FormatError(
        f"has {MANIFEST} but no results tables ({tables}) and no finished cell (cells/*/{MARKER}); "
        "expected a sweep with at least one finished cell (run or resume it: h9eval sweep SPEC --out FOLDER)",
        path=str(res.path),
    )
