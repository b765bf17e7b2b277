"""The versioned reader and writer of results tables (parquet) and manifests.

Every parquet file carries two metadata keys: ``h9eval_table`` (which table it is) and
``h9eval_schema_version`` (that table's version from :mod:`h9eval.results.schema`). A reader
names the table it expects and refuses a file of another table or of a version it does not read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.core.errors import FormatError
from h9eval.core.paths import atomic_write
from h9eval.results.schema import READABLE_MANIFEST_VERSIONS, READABLE_VERSIONS, SCHEMA_VERSIONS

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["write_table", "write_arrow", "read_arrow", "read_table", "check_manifest_version"]


def write_table(df: pd.DataFrame, path: Path, table: str) -> pa.Table:
    """Write ``df`` as results table ``table`` to ``path`` atomically, stamped with its version;
    returns the Arrow table written."""
    import pyarrow as pa

    return write_arrow(pa.Table.from_pandas(df, preserve_index=False), path, table)


def write_arrow(t: pa.Table, path: Path, table: str) -> pa.Table:
    """:func:`write_table` of an Arrow table (converted from pandas with ``preserve_index=False``,
    so its pandas metadata is the one :func:`read_table` restores dtypes from)."""
    import pyarrow.parquet as pq

    meta = dict(t.schema.metadata or {})
    meta[b"h9eval_schema_version"] = str(SCHEMA_VERSIONS[table]).encode()
    meta[b"h9eval_table"] = table.encode()
    t = t.replace_schema_metadata(meta)
    with atomic_write(path) as f:
        pq.write_table(t, f)
    return t


def _versions_line(versions: tuple[int, ...]) -> str:
    return ", ".join(str(x) for x in versions)


def read_arrow(path: Path, table: str) -> pa.Table:
    """Read results table ``table`` from ``path`` as an Arrow table, checking its stamps."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # ParquetFile, not read_table: no pyarrow.dataset import (0.4 s) for one small file.
        with pq.ParquetFile(path) as f:
            t = f.read()
    except (OSError, pa.ArrowException) as e:
        raise FormatError(f"not a readable parquet table ({e})", path=str(path)) from None
    meta = t.schema.metadata or {}
    raw = meta.get(b"h9eval_schema_version")
    if raw is None:
        raise FormatError(
            "parquet file lacks h9eval_schema_version metadata; not an h9eval results table", path=str(path)
        )
    stamped = meta.get(b"h9eval_table", b"").decode(errors="replace")
    if stamped and stamped != table:
        raise FormatError(f"holds the {stamped!r} table; expected the {table!r} table", path=str(path))
    try:
        v: Any = int(raw.decode())
    except ValueError:
        v = raw.decode(errors="replace")
    if v not in READABLE_VERSIONS[table]:
        raise FormatError(
            f"{table} table schema_version {v!r} is not supported; this h9eval reads schema_version "
            + _versions_line(READABLE_VERSIONS[table]),
            path=str(path),
        )
    return t


def read_table(path: Path, table: str) -> pd.DataFrame:
    """:func:`read_arrow` as a DataFrame."""
    return read_arrow(path, table).to_pandas()


def check_manifest_version(v: Any, path: Path) -> None:
    """Refuse a manifest whose ``schema_version`` this h9eval does not read."""
    if v not in READABLE_MANIFEST_VERSIONS:
        raise FormatError(
            f"manifest schema_version {v!r} is not supported; this h9eval reads schema_version "
            + _versions_line(READABLE_MANIFEST_VERSIONS),
            path=str(path),
        )
