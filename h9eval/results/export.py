"""Results as a Hugging Face dataset: the tables of a sweep as one :class:`datasets.DatasetDict`.

:func:`export_dataset` writes ``runs``, ``calls``, ``compactions``, ``probes`` and ``episodes``
as the splits of a ``DatasetDict`` saved with ``save_to_disk`` (``datasets.load_from_disk``
reads it back, table for table), with the sweep's manifest as each split's ``info.description``
(JSON) and beside the splits as ``manifest.json``. An empty table (``episodes`` of an open-loop
sweep) is left out of the folder, as ``datasets`` cannot reload a split of no rows;
:func:`dataset_tables` gives it back as the empty table of its schema. Sharing it is the user's
``DatasetDict.push_to_hub(...)`` on the loaded object (h9eval never uploads anything).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.core.paths import check_export_target, new_export_tmp, replace_export_dir
from h9eval.results.schema import SCHEMA_VERSIONS, TABLES
from h9eval.results.store import Results, empty_table, load_results

if TYPE_CHECKING:
    import datasets

__all__ = ["EXPORT_FORMATS", "dataset_tables", "export_dataset", "results_dataset"]

EXPORT_FORMATS = ("dataset",)
EXPORT_DTYPES = "h9eval_dtypes.json"


def results_dataset(results: Results | str | os.PathLike[str]) -> datasets.DatasetDict:
    """The tables of ``results`` (a :class:`Results` or its folder) as a ``DatasetDict`` in memory,
    one split per table, columns and dtypes as the parquet tables have them."""
    import datasets
    import pyarrow as pa

    res = results if isinstance(results, Results) else load_results(results)
    manifest = json.dumps(res.manifest, sort_keys=True, default=str)
    splits = {}
    for name in TABLES:
        frame = getattr(res, name)
        if not len(frame):
            continue
        table = pa.Table.from_pandas(frame, preserve_index=False)
        info = datasets.DatasetInfo(
            description=manifest,
            version=datasets.Version(f"{SCHEMA_VERSIONS[name]}.0.0"),
        )
        splits[name] = datasets.Dataset(table, info=info, split=datasets.NamedSplit(name))
    return datasets.DatasetDict(splits)


def export_dataset(
    results: Results | str | os.PathLike[str], out_dir: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write ``results`` as a ``DatasetDict`` folder at ``out_dir`` (see the module docstring).

    A folder that already exists is refused unless ``overwrite``, and then replaced whole (so no table
    of an earlier export is left beside the new ones) only if an earlier dataset export wrote it
    (:func:`~h9eval.core.paths.check_export_target`); the results folder itself, a folder inside it
    or one that holds it is always refused.
    """
    sources = (results.path,) if isinstance(results, Results) else (results,)
    out = check_export_target(out_dir, kind="dataset", sources=sources, overwrite=overwrite)
    res = results if isinstance(results, Results) else load_results(results)
    ds = results_dataset(res)
    res_manifest = res.manifest
    tmp = new_export_tmp(out)
    import datasets

    was_disabled = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # one line per split would bury the command's own line
    try:
        ds.save_to_disk(str(tmp))
        (tmp / "manifest.json").write_text(
            json.dumps(res_manifest, indent=2, sort_keys=True, default=str), encoding="utf-8"
        )
        # datasets keeps Arrow types, not pandas' nullable dtypes (Int64 comes back int64): the
        # dtypes are written beside the splits so dataset_tables gives back the very same frames.
        dtypes = {name: {c: str(t) for c, t in getattr(res, name).dtypes.items()} for name in TABLES}
        (tmp / EXPORT_DTYPES).write_text(json.dumps(dtypes, indent=2, sort_keys=True), encoding="utf-8")
        replace_export_dir(tmp, out, kind="dataset")
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def dataset_tables(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The tables of an exported folder as DataFrames (``load_from_disk`` and ``to_pandas``);
    a table the export left out for having no rows is the empty table of its schema."""
    import datasets

    dd = datasets.load_from_disk(str(path))
    dtypes_file = Path(path) / EXPORT_DTYPES
    dtypes = json.loads(dtypes_file.read_text(encoding="utf-8")) if dtypes_file.is_file() else {}
    out = {}
    for name in TABLES:
        frame = dd[name].to_pandas() if name in dd else empty_table(name)
        out[name] = frame.astype(dtypes[name]) if name in dtypes and len(frame) else frame
    return out
