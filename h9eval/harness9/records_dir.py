"""Read harness9's compaction-records folders (``compaction_records/<session>.jsonl``, spec §8)
into the tidy ``compactions`` table, the same table :func:`h9eval.results.tables.records_to_frame`
builds from in-memory records, so h9eval's replay and harness9's own logs compare row for row."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from h9eval.compaction.records import read_records
from h9eval.core.errors import FormatError
from h9eval.results.tables import compactions_frame, records_to_frame

__all__ = ["read_records_dir"]


def _session_of(path: Path) -> str:
    # harness9 names the file after the raw session id; an empty id gives ".jsonl".
    return path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.stem


def read_records_dir(path: str | os.PathLike[str], *, run_id: str | None = None) -> Any:
    """harness9's compaction records as the ``compactions`` table.

    ``path``: one ``<session>.jsonl`` file, a folder of them (e.g. ``compaction_records/``),
    or a folder holding a ``compaction_records/`` subfolder. Files are read in name order;
    ``session_id`` is the file name without ``.jsonl``.
    ``run_id``: column value; default ``harness9:<session>`` per file.

    Strict: a line that is not JSON or lacks a required field raises :class:`FormatError`
    naming the file and line (harness9's own ``List`` would skip it silently).
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.glob("*.jsonl") if f.is_file())
        sub = p / "compaction_records"
        if not files and sub.is_dir():
            files = sorted(f for f in sub.glob("*.jsonl") if f.is_file())
    elif p.is_file():
        files = [p]
    else:
        raise FormatError("no such record file or folder", path=str(path))
    frames = []
    for f in files:
        try:
            recs = read_records(f, strict=True)
        except OSError as e:
            raise FormatError(f"cannot read record file: {e.strerror}", path=str(f)) from None
        except UnicodeDecodeError as e:
            raise FormatError(f"record file is not UTF-8 ({e.reason} at byte {e.start})", path=str(f)) from None
        sid = _session_of(f)
        frames.append(
            records_to_frame(recs, run_id=run_id if run_id is not None else f"harness9:{sid}", session_id=sid)
        )
    frames = [f for f in frames if len(f)]  # pandas warns when concatenating empty frames
    if not frames:
        return compactions_frame([])
    import pandas as pd

    return pd.concat(frames, ignore_index=True)
