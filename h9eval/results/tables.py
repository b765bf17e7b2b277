"""Result rows built from h9eval's own values (compaction records -> the ``compactions`` table)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from h9eval.compaction.records import CompactionRecord
from h9eval.results.schema import (
    COMPACTION_COLUMNS,
    COMPACTION_INT_COLUMNS,
    COMPACTIONS_SCHEMA_VERSION,
    DIFFS_COLUMNS,
    DIFFS_SCHEMA_VERSION,
    DIFFS_STRUCTURED,
    EPISODE_COLUMNS,
    LEDGER_COLUMNS,
    LEDGER_SCHEMA_VERSION,
)

__all__ = ["decode_diffs", "diffs_table", "episodes_table", "ledger_table", "records_to_frame"]


# -- compaction records -----------------------------------------------------------------------
def compactions_frame(rows: list[dict[str, Any]]) -> Any:
    """Build the table with fixed dtypes: int64, float64 for the ratio, and ``object`` for the
    text columns so that a missing JSON list stays ``None`` (pandas 3 would infer its ``str``
    dtype and turn ``None`` into NaN) and an empty table has the same dtypes as a full one."""
    import pandas as pd

    def dtype(c: str) -> str:
        return "int64" if c in COMPACTION_INT_COLUMNS else "float64" if c == "compression_ratio" else "object"

    return pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=dtype(c)) for c in COMPACTION_COLUMNS})


def _row(rec: CompactionRecord, *, run_id: str, session_id: str, index: int) -> dict[str, Any]:
    anchors = [a.to_json() for a in rec.anchors] if rec.anchors is not None else None
    off = [o.to_json() for o in rec.offloaded] if rec.offloaded is not None else None
    return {
        "schema_version": COMPACTIONS_SCHEMA_VERSION,
        "run_id": run_id,
        "session_id": session_id,
        "record_index": index,
        "record_id": rec.id,
        "timestamp": rec.timestamp,
        "tier": int(rec.tier),
        "tier_name": rec.tier.label,
        "tokens_before": rec.tokens_before,
        "tokens_after": rec.tokens_after,
        "msgs_before": rec.msgs_before,
        "msgs_after": rec.msgs_after,
        "n_anchors": len(anchors or ()),
        "anchors_json": json.dumps(anchors, ensure_ascii=False) if anchors is not None else None,
        "n_offloaded": len(off or ()),
        "offloaded_bytes": sum(o.bytes for o in rec.offloaded or ()),
        "offloaded_json": json.dumps(off, ensure_ascii=False) if off is not None else None,
        "summarized": rec.summarized,
        "preserved_tail": rec.preserved_tail,
        "summary_text": rec.summary_text,
        "compression_ratio": float(rec.compression_ratio),
        "duration_ns": rec.duration_ns,
        "error": rec.error,
    }


def records_to_frame(records: Iterable[CompactionRecord], *, run_id: str, session_id: str) -> Any:
    """The ``compactions`` table (:data:`COMPACTION_COLUMNS`, one row per record, in order) for
    one session's records. ``session_id`` is the column value; the records' own ``session_id``
    field is not used (harness9's compactor may leave it empty)."""
    return compactions_frame([_row(r, run_id=run_id, session_id=session_id, index=i) for i, r in enumerate(records)])


# -- closed-loop episodes ---------------------------------------------------------------------
def episodes_table(rows: Iterable[dict[str, Any]]) -> Any:
    """The ``episodes`` table (:data:`EPISODE_COLUMNS` order and dtypes) from row dicts; a
    column a row lacks is null (a replay-only caller has no sweep identity)."""
    import pandas as pd

    rows = list(rows)
    # column by column: one astype of the whole frame costs ~50 ms, a cell's budget
    return pd.DataFrame({c: pd.Series([r.get(c) for r in rows], dtype=t) for c, t in EPISODE_COLUMNS.items()})


# -- the loss ledger --------------------------------------------------------------------------
def ledger_table(rows: Iterable[dict[str, Any]]) -> Any:
    """The ``ledger`` table (:data:`LEDGER_COLUMNS` order and dtypes) from :func:`h9eval.probes.ledger.ledger_rows`
    rows; ``schema_version`` is filled in."""
    import pandas as pd

    rows = list(rows)
    data = {c: pd.Series([r.get(c) for r in rows], dtype=t) for c, t in LEDGER_COLUMNS.items() if c != "schema_version"}
    return pd.DataFrame({"schema_version": pd.Series([LEDGER_SCHEMA_VERSION] * len(rows), dtype="Int64"), **data})


# -- compaction diffs -------------------------------------------------------------------------
def diffs_table(rows: Iterable[dict[str, Any]]) -> Any:
    """The ``diffs`` table from :func:`h9eval.probes.diffs.compaction_diffs` rows (lists and mappings
    stored as JSON text, :data:`~h9eval.results.schema.DIFFS_COLUMNS`)."""
    import pandas as pd

    out = []
    for r in rows:
        row = {"schema_version": DIFFS_SCHEMA_VERSION, **{k: v for k, v in r.items() if k not in DIFFS_STRUCTURED}}
        for k in DIFFS_STRUCTURED:
            row[f"{k}_json"] = json.dumps(r[k], ensure_ascii=False, sort_keys=isinstance(r[k], dict))
        out.append(row)
    df = pd.DataFrame([{c: r.get(c) for c in DIFFS_COLUMNS} for r in out], columns=list(DIFFS_COLUMNS))
    return df.astype(DIFFS_COLUMNS)


def decode_diffs(df: Any) -> Any:
    """A ``diffs`` table with its JSON columns decoded (``left``, ``anchors_after``, ... as lists and dicts)."""
    out = df.drop(columns=[f"{k}_json" for k in DIFFS_STRUCTURED if f"{k}_json" in df.columns]).copy()
    for k in DIFFS_STRUCTURED:
        col = f"{k}_json"
        if col in df.columns:
            out[k] = [json.loads(v) if isinstance(v, str) else ([] if k not in _DICT_DIFFS else {}) for v in df[col]]
    return out


_DICT_DIFFS = ("anchors_before", "anchors_after", "used_later", "touched")
