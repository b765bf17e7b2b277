"""Public trajectory datasets as tasks: sources, adapters, seeded samples, filters, skip counts.

A :class:`DatasetSource` names a dataset (a Hub id, or a local parquet/JSONL/JSON/Arrow file, a
folder of such files, or a ``save_to_disk`` folder), a split, a seeded sample size and filters.
:func:`iter_dataset_tasks` opens it through :mod:`datasets` (a Hub id is streamed, so a sample of
500 rows never downloads the whole dataset; local files are memory-mapped), picks the adapter
that knows its columns (:data:`ADAPTERS`, one module per dataset), and turns each sampled row
into a :class:`~h9eval.tasks.model.Task` with provenance (dataset, revision or file hash, row).

A row that does not match its adapter's documented schema is skipped and counted with the
reason (:class:`DatasetSample.skipped`), never a traceback; so is a row nested deeper than
:data:`~h9eval.tasks.datasets._screen.MAX_ROW_DEPTH` or not UTF-8, which is measured before any
JSON library sees it (:mod:`._screen`). A dataset whose columns do not match any adapter at all is
one line naming the dataset and the missing column.
"""

from __future__ import annotations

import hashlib
import json
import os
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from h9eval.core.errors import ConfigError, FormatError, H9InputError
from h9eval.core.registry import Registry
from h9eval.core.tokens import estimate_tokens
from h9eval.tasks.datasets._screen import DEEP_REASON, NOT_UTF8_REASON, screen_json_files, value_too_deep
from h9eval.tasks.model import Task

__all__ = [
    "ADAPTERS",
    "DatasetAdapter",
    "DatasetSample",
    "DatasetSource",
    "RowContext",
    "RowSkip",
    "dataset_cache_dir",
    "dataset_row_task",
    "is_streamed",
    "iter_dataset_tasks",
    "materialize_sample",
    "load_dataset_tasks",
    "parse_dataset_spec",
]

DATASET_SPEC_PREFIX = "dataset:"
_LOCAL_SUFFIXES = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".arrow": "arrow"}
STREAM_SHUFFLE_BUFFER_ROWS = 1_000
"""Rows a streamed Hub dataset is shuffled within (``IterableDataset.shuffle``'s buffer): a seeded
sample reads about this many rows beyond the ones it keeps, not the whole dataset."""


class RowSkip(Exception):
    """A row an adapter cannot turn into a task; ``reason`` is counted in the sample's skips."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class RowContext:
    """What an adapter needs to name a row's task: where it came from and how large it is."""

    shown: str
    """How errors and ``TaskSource.path`` show the row: ``DATASET:SPLIT#ROW``."""
    session: str
    """The task's session name (``task_id`` is ``<adapter>:<session>``): the row's own id."""
    n_bytes: int
    provenance: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class DatasetAdapter:
    """How one dataset's rows become tasks (each adapter module builds one and registers it)."""

    name: str
    hub_ids: tuple[str, ...]
    """Hub ids this adapter is for (matched case-insensitively); others are found by columns."""
    required_columns: tuple[tuple[str, ...], ...]
    """Each entry: alternatives of which one column must exist (``("trajectory", "messages")``)."""
    id_columns: tuple[str, ...]
    """Columns whose values name a row (the first present non-empty one is used)."""
    resolved_column: str | None
    """The column that says whether the run resolved its instance (for ``resolved=``)."""
    model_column: str | None
    row_to_task: Callable[[Mapping[str, Any], RowContext], Task]
    description: str

    def missing_columns(self, columns: set[str]) -> list[str]:
        return [" or ".join(alt) for alt in self.required_columns if not any(c in columns for c in alt)]


ADAPTERS: Registry[DatasetAdapter] = Registry("dataset adapter")
"""Every dataset adapter by name (the modules of :mod:`h9eval.tasks.datasets` register them)."""


@dataclass(frozen=True, kw_only=True)
class DatasetSource:
    """A dataset sample: where, which split, how many rows (seeded) and which rows qualify."""

    path: str
    """A Hub id (``nebius/SWE-agent-trajectories``) or a local file or folder."""
    split: str = "train"
    n: int | None = None
    """Rows to sample (``None``: every qualifying row, in order)."""
    seed: int = 0
    where: Mapping[str, Any] = field(default_factory=dict)
    """Column filters: ``{column: value}`` (a list value: any of them)."""
    resolved: bool | None = None
    """Keep only resolved (``True``) or unresolved (``False``) runs, per the adapter's column."""
    model: str | None = None
    min_turns: int = 0
    """Least number of model calls (assistant messages) a task must have."""
    min_tokens: int = 0
    """Least estimated tokens of a task's whole transcript."""
    adapter: str | None = None
    """An adapter name; default: by Hub id, else the one whose columns the dataset has."""
    revision: str | None = None
    streaming: bool | None = None
    """Default: stream Hub ids, memory-map local files."""

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ConfigError(f"dataset path must be a non-empty string, got {self.path!r}")
        if self.n is not None and (not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1):
            raise ConfigError(f"dataset {self.path!r}: n must be an integer >= 1, got {self.n!r}")
        for name in ("seed", "min_turns", "min_tokens"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"dataset {self.path!r}: {name} must be an integer >= 0, got {v!r}")
        if self.adapter is not None:
            ADAPTERS.get(self.adapter)
        if not isinstance(self.where, Mapping):
            raise ConfigError(f"dataset {self.path!r}: where must be a table of column = value, got {self.where!r}")

    @property
    def is_local(self) -> bool:
        return Path(self.path).exists()

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True, kw_only=True)
class DatasetSample:
    """The tasks of a sample and what was left out: ``skipped`` counts rows by reason."""

    tasks: tuple[Task, ...]
    skipped: Mapping[str, int]
    filtered: Mapping[str, int]
    """Rows that converted but failed a filter (``min_turns`` ...), by filter."""
    rows_read: int
    adapter: str
    provenance: Mapping[str, Any]


# -- opening ---------------------------------------------------------------------------------------
def _local_kind(p: Path) -> tuple[str, list[str]] | None:
    """``(builder, data files)`` for a local file or folder of files, or ``None`` for a
    ``save_to_disk`` folder."""
    if p.is_dir():
        if (p / "dataset_dict.json").exists() or (p / "state.json").exists():
            return None
        for suffix, builder in _LOCAL_SUFFIXES.items():
            files = sorted(str(f) for f in p.rglob(f"*{suffix}") if f.is_file() and not f.name.startswith("."))
            if files:
                return builder, files
        raise ConfigError(
            f"dataset {str(p)!r}: folder holds no .parquet, .jsonl, .json or .arrow file "
            "and is not a save_to_disk folder"
        )
    builder = _LOCAL_SUFFIXES.get(p.suffix.lower())
    if builder is None:
        raise ConfigError(
            f"dataset {str(p)!r}: expected a .parquet, .jsonl, .json or .arrow file, "
            "a folder of them, a save_to_disk folder or a Hub id"
        )
    return builder, [str(p)]


def _file_hash(files: list[str]) -> str:
    """SHA-256 of the files' bytes, in order (the provenance's ``file_sha256``)."""
    return _hash_of_versions(tuple((f, _stat_signature(f)) for f in files))


def _stat_signature(path: str) -> tuple[int, int, int, int]:
    """What changes whenever a file's bytes are rewritten: ``cp -p``, ``rsync -a`` and ``tar x``
    restore the mtime, but no user-space tool can restore the ctime, which every write updates."""
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@lru_cache(maxsize=64)
def _hash_of_versions(versions: tuple[tuple[str, tuple[int, int, int, int]], ...]) -> str:
    # Memoised per file version (path + stat signature) so a sweep worker reloading one row per
    # cell does not re-read a large dataset for every cell; any rewrite changes the signature.
    h = hashlib.sha256()
    for f, _ in versions:
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _local_content(p: Path) -> tuple[int, str]:
    """``(total bytes, SHA-256)`` of the files a local dataset is read from: what its caches are
    keyed on, so a rewrite that keeps the mtime is read anew."""
    kind = _local_kind(p)
    if kind is not None:
        files = kind[1]
    else:  # a save_to_disk folder: its Arrow files and the state that names them
        files = sorted(str(f) for f in p.rglob("*") if f.is_file())
    return sum(os.stat(f).st_size for f in files), _file_hash(files)


@dataclass(frozen=True)
class _Opened:
    rows: Any  # datasets.Dataset (random access) or datasets.IterableDataset (streamed)
    columns: frozenset[str]
    provenance: Mapping[str, Any]
    streamed: bool
    screened: Mapping[int, str] = field(default_factory=dict)
    """Rows left out of ``rows`` when the files were screened, by their number in the files (which
    ``#ROW`` and the provenance keep using), with the reason."""

    @cached_property
    def _screened_order(self) -> tuple[int, ...]:
        return tuple(sorted(self.screened))

    def n_rows(self) -> int:
        return len(self.rows) + len(self.screened)

    def row(self, index: int) -> Mapping[str, Any]:
        """Row ``index`` as numbered in the files, of a random-access dataset; :class:`RowSkip` for a
        screened row or one whose text pyarrow cannot decode (a string column that is not UTF-8)."""
        reason = self.screened.get(index)
        if reason is not None:
            raise RowSkip(reason)
        before = bisect_left(self._screened_order, index)
        try:
            return self.rows[index - before]
        except UnicodeDecodeError:
            raise RowSkip(NOT_UTF8_REASON) from None


def _datasets_error(source: DatasetSource, e: Exception) -> ConfigError:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return ConfigError(f"dataset {source.path!r} (split {source.split!r}) could not be opened: {text[:300]}")


def _open(source: DatasetSource) -> _Opened:
    import datasets

    # The library's own progress bars ("Generating train split") would interleave with h9eval's
    # lines on every open; they are switched off while h9eval opens a dataset, then restored.
    was_disabled = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        return _open_quietly(source)
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()


def _open_quietly(source: DatasetSource) -> _Opened:
    import datasets

    p = Path(source.path)
    try:
        if p.exists():
            kind = _local_kind(p)
            if kind is None:
                loaded = datasets.load_from_disk(str(p))
                if isinstance(loaded, datasets.DatasetDict):
                    if source.split not in loaded:
                        raise ConfigError(
                            f"dataset {source.path!r}: no split {source.split!r}; has {', '.join(sorted(loaded))}"
                        )
                    loaded = loaded[source.split]
                prov = {"dataset": str(p), "fingerprint": loaded._fingerprint, "split": source.split}
                return _Opened(loaded, frozenset(loaded.column_names), prov, False)
            builder, files = kind
            streamed = bool(source.streaming)
            sha = _file_hash(files)
            # datasets keys its Arrow cache of a local file on path and mtime, so a rewrite that
            # kept the mtime would replay the old rows: one cache folder per content instead.
            content_dir = Path(datasets.config.HF_DATASETS_CACHE) / "h9eval-local" / sha[:16]
            screened: Mapping[int, str] = {}
            if builder == "json":
                # The JSON builder segfaults on a row nested ~10,000 deep and refuses a whole file for
                # one non-UTF-8 row: such rows are taken out before it reads the files.
                kept = screen_json_files(files, content_dir / "screened")
                files, screened = kept.files, kept.rows
            cache_dir = None if streamed else str(content_dir)
            ds = datasets.load_dataset(
                builder, data_files=files, split="train", streaming=streamed, cache_dir=cache_dir
            )
            prov = {"dataset": str(p), "file_sha256": sha, "split": source.split}
            return _Opened(ds, _columns(ds), prov, streamed, screened)
        streamed = True if source.streaming is None else source.streaming
        ds = datasets.load_dataset(source.path, split=source.split, streaming=streamed, revision=source.revision)
        prov = {"dataset": source.path, "revision": source.revision or "main", "split": source.split}
        return _Opened(ds, _columns(ds), prov, streamed)
    except H9InputError:  # already one line naming the dataset (or the file and line)
        raise
    except Exception as e:  # the datasets library raises many types (network, schema, file); one line each
        raise _datasets_error(source, e) from None


def _columns(ds: Any) -> frozenset[str]:
    names = getattr(ds, "column_names", None)
    if names:
        return frozenset(names)
    for row in ds.take(1) if hasattr(ds, "take") else []:
        return frozenset(row)
    return frozenset()


def _pick_adapter(source: DatasetSource, columns: frozenset[str]) -> DatasetAdapter:
    if source.adapter is not None:
        adapter = ADAPTERS.get(source.adapter)
        missing = adapter.missing_columns(set(columns))
        if missing:
            raise FormatError(
                f"column {missing[0]!r} missing for adapter {adapter.name!r} "
                f"(the dataset has: {', '.join(sorted(columns)) or 'no columns'})",
                path=source.path,
            )
        return adapter
    for _, adapter in ADAPTERS.items():
        if source.path.lower() in (h.lower() for h in adapter.hub_ids) and not adapter.missing_columns(set(columns)):
            return adapter
    fitting = [a for _, a in ADAPTERS.items() if not a.missing_columns(set(columns))]
    if fitting:
        # The most specific adapter (the one that requires the most columns); datasets of one row
        # shape (OpenHands messages) are told apart by the path naming the dataset or the adapter.
        most = max(len(a.required_columns) for a in fitting)
        fitting = [a for a in fitting if len(a.required_columns) == most]
        named = [a for a in fitting if _path_names(source.path, a)]
        return sorted(named or fitting, key=lambda a: a.name)[0]
    closest = min((a for _, a in ADAPTERS.items()), key=lambda a: (len(a.missing_columns(set(columns))), a.name))
    raise FormatError(
        f"no dataset adapter fits: column {closest.missing_columns(set(columns))[0]!r} missing for the closest, "
        f"{closest.name!r} (the dataset has: {', '.join(sorted(columns)) or 'no columns'})",
        path=source.path,
    )


def _norm(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalnum())


def _path_names(path: str, adapter: DatasetAdapter) -> bool:
    """Whether a local path names ``adapter`` or one of its Hub datasets (its file or folder names)."""
    text = _norm(path)
    return _norm(adapter.name) in text or any(_norm(h.rpartition("/")[2]) in text for h in adapter.hub_ids)


# -- rows ----------------------------------------------------------------------------------------
def _row_order(n_rows: int, source: DatasetSource) -> Iterator[int]:
    if source.n is None:
        return iter(range(n_rows))
    import numpy as np

    return iter(np.random.default_rng(source.seed).permutation(n_rows).tolist())


def _check_where(source: DatasetSource, columns: frozenset[str]) -> None:
    for col in source.where:
        if col not in columns:
            raise ConfigError(
                f"dataset {source.path!r}: where names column {col!r}, which it does not have "
                f"(it has: {', '.join(sorted(columns))})"
            )


def _matches(row: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    for col, want in where.items():
        got = row.get(col)
        if isinstance(want, list):
            if got not in want:
                return False
        elif got != want:
            return False
    return True


def truthy_resolved(v: Any) -> bool | None:
    """A resolved flag as datasets store it: bool, 0/1 (-1: not evaluated), "true"/"false"."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return None if v < 0 else v > 0
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "1", "yes", "resolved"):
            return True
        if s in ("false", "0", "no", "unresolved"):
            return False
    return None


def _row_key(row: Mapping[str, Any], row_json: bytes, adapter: DatasetAdapter, index: int) -> str:
    base = next((str(row[c]) for c in adapter.id_columns if row.get(c) not in (None, "")), f"row{index}")
    # Datasets hold several runs per instance: the row's own content keeps the key unique and stable
    # whether the row was read from a local file or streamed from the Hub.
    return f"{base}@{hashlib.sha256(row_json).hexdigest()[:8]}"


def _convert(
    row: Mapping[str, Any], index: int, source: DatasetSource, adapter: DatasetAdapter, opened: _Opened
) -> Task:
    shown = f"{source.path}:{source.split}#{index}"
    if value_too_deep(row):  # before json.dumps or an adapter recurses into it
        raise RowSkip(DEEP_REASON)
    row_json = json.dumps(row, sort_keys=True, default=str, ensure_ascii=False).encode()
    ctx = RowContext(
        shown=shown,
        session=_row_key(row, row_json, adapter, index),
        n_bytes=len(row_json),
        provenance={**opened.provenance, "row": index, "adapter": adapter.name},
    )
    task = adapter.row_to_task(row, ctx)
    meta = dict(task.metadata)
    meta["dataset"] = dict(ctx.provenance)
    if adapter.resolved_column is not None:
        meta["resolved"] = truthy_resolved(row.get(adapter.resolved_column))
    if adapter.model_column is not None and isinstance(row.get(adapter.model_column), str):
        meta["model"] = row[adapter.model_column]
    return replace(task, metadata=meta)


def _skip_reason(e: Exception) -> str:
    if isinstance(e, RowSkip):
        return e.reason
    text = str(e)
    if isinstance(e, FormatError) and e.path is not None:
        # drop "<dataset>:<split>#<row>:<where>: ": the count is per reason, the row is in the log line
        text = text.split(": ", 1)[1] if ": " in text else text
    return text[:160]


@dataclass
class _Opening:
    """An ``on_open`` callback that keeps what it is told: the adapter's name and the provenance
    (empty until the dataset is open)."""

    adapter: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)

    def __call__(self, adapter: str, provenance: Mapping[str, Any]) -> None:
        self.adapter, self.provenance = adapter, dict(provenance)


def _iter_rows(
    source: DatasetSource,
    skipped: Counter[str],
    filtered: Counter[str],
    on_open: Callable[[str, Mapping[str, Any]], None] | None,
) -> Iterator[tuple[int, Mapping[str, Any], Task]]:
    opened = _open(source)
    adapter = _pick_adapter(source, opened.columns)
    _check_where(source, opened.columns)
    if on_open is not None:
        on_open(adapter.name, opened.provenance)
    rows: Iterator[tuple[int, Mapping[str, Any] | str]]
    if opened.streamed:
        stream = (
            opened.rows.shuffle(seed=source.seed, buffer_size=STREAM_SHUFFLE_BUFFER_ROWS)
            if source.n is not None
            else opened.rows
        )
        # A stream has no row numbers to skip by: its screened rows were left out of the files it
        # reads, and are counted once, here.
        skipped.update(opened.screened.values())
        rows = _streamed_rows(stream, source)
    else:
        rows = _local_rows(opened, source)
    kept = 0
    for index, row in rows:
        if source.n is not None and kept >= source.n:
            break
        if isinstance(row, str):  # a row that could not be read: the reason
            skipped[row] += 1
            continue
        if not _matches(row, source.where):
            filtered["where"] += 1
            continue
        if source.resolved is not None and adapter.resolved_column is not None:
            if truthy_resolved(row.get(adapter.resolved_column)) is not source.resolved:
                filtered["resolved"] += 1
                continue
        if source.model is not None and (adapter.model_column is None or row.get(adapter.model_column) != source.model):
            filtered["model"] += 1
            continue
        try:
            task = _convert(row, index, source, adapter, opened)
        except (RowSkip, FormatError) as e:
            skipped[_skip_reason(e)] += 1
            continue
        except RecursionError:  # a last guard: a converter recursing deeper than the interpreter allows
            skipped["row nested too deep to convert"] += 1
            continue
        if task.n_calls < source.min_turns:
            filtered["min_turns"] += 1
            continue
        if source.min_tokens and estimate_tokens(task.messages) < source.min_tokens:
            filtered["min_tokens"] += 1
            continue
        kept += 1
        yield index, row, task


def _local_rows(opened: _Opened, source: DatasetSource) -> Iterator[tuple[int, Mapping[str, Any] | str]]:
    """``(row number, row)`` of a random-access dataset in sample order; a row that cannot be read
    comes as its skip reason instead."""
    for i in _row_order(opened.n_rows(), source):
        try:
            yield i, opened.row(i)
        except RowSkip as e:
            yield i, e.reason


def _streamed_rows(stream: Any, source: DatasetSource) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``(rows read so far, row)`` of a stream. A row pyarrow cannot decode ends the stream (its
    iterator cannot go on past an error), so it is one line naming the dataset and the row."""
    rows = iter(stream)
    index = 0
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except UnicodeDecodeError:
            raise FormatError(
                f"{NOT_UTF8_REASON}; a streamed dataset cannot be read past it "
                "(a local file read without streaming skips such rows)",
                path=f"{source.path}:{source.split}#{index}",
            ) from None
        yield index, row
        index += 1


def iter_dataset_tasks(
    source: DatasetSource,
    *,
    skipped: Counter[str] | None = None,
    filtered: Counter[str] | None = None,
    on_open: Callable[[str, Mapping[str, Any]], None] | None = None,
) -> Iterator[tuple[int, Task]]:
    """``(row index, task)`` for each sampled row that converts and passes the filters, lazily.

    Local datasets are sampled by a seeded permutation of row indices (the index is the row's
    ``#ROW`` in a task spec); a streamed one by a seeded shuffle buffer, its index counting rows
    as read. ``skipped``/``filtered`` (if given) count rows left out by reason. ``on_open`` gets
    the adapter's name and the provenance once the dataset is open.
    """
    skipped = Counter() if skipped is None else skipped
    filtered = Counter() if filtered is None else filtered
    for index, _, task in _iter_rows(source, skipped, filtered, on_open):
        yield index, task


def dataset_cache_dir() -> Path:
    """Where streamed samples are saved for sweeps: ``$H9EVAL_DATASET_CACHE``, else
    ``~/.cache/h9eval/datasets``."""
    return Path(os.environ.get("H9EVAL_DATASET_CACHE") or Path.home() / ".cache" / "h9eval" / "datasets")


def is_streamed(source: DatasetSource) -> bool:
    """Whether ``source`` is read as a stream (a Hub id by default, or ``streaming = true``)."""
    return bool(source.streaming) if source.streaming is not None else not source.is_local


def materialize_sample(source: DatasetSource, cache_dir: str | os.PathLike[str] | None = None) -> DatasetSource:
    """A streamed sample saved once as a local parquet file (named by the adapter and a hash of
    the source), returned as a local source of exactly the sampled rows in sample order.

    Sweep workers reload a task by its row index, which a stream cannot give; the file is the
    sample's cache: a resumed sweep, or a second sweep of the same source, reads it again
    instead of streaming. The rows are written as read (raw), so the file has the dataset's
    own schema and every row passes through the same adapter again.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    described: dict[str, Any] = source.to_dict()
    if source.is_local:
        # A local file streamed for a sweep and changed before the next one must be sampled
        # again: its content is part of what names the saved sample.
        described["content"] = _local_content(Path(source.path))
    key = hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()[:16]
    folder = Path(cache_dir) if cache_dir is not None else dataset_cache_dir()
    existing = sorted(folder.glob(f"*-{key}.parquet")) if folder.is_dir() else []
    if existing:
        adapter = existing[0].name[: -len(f"-{key}.parquet")]
        return DatasetSource(path=str(existing[0]), split="train", adapter=adapter, streaming=False)
    opening = _Opening()
    rows = [dict(row) for _, row, _ in _iter_rows(source, Counter(), Counter(), opening)]
    if not rows:
        raise ConfigError(f"dataset {source.path!r}: the sample is empty (no row passed the filters)")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{opening.adapter}-{key}.parquet"
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(pa.Table.from_pylist(rows), tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return DatasetSource(path=str(target), split="train", adapter=opening.adapter, streaming=False)


def load_dataset_tasks(source: DatasetSource) -> DatasetSample:
    """The whole sample of ``source`` at once (see :func:`iter_dataset_tasks`)."""
    skipped: Counter[str] = Counter()
    filtered: Counter[str] = Counter()
    opening = _Opening()
    tasks = tuple(t for _, t in iter_dataset_tasks(source, skipped=skipped, filtered=filtered, on_open=opening))
    rows_read = len(tasks) + sum(skipped.values()) + sum(filtered.values())
    return DatasetSample(
        tasks=tasks,
        skipped=dict(sorted(skipped.items())),
        filtered=dict(sorted(filtered.items())),
        rows_read=rows_read,
        adapter=opening.adapter,
        provenance=opening.provenance,
    )


# -- one row, by index (what a sweep worker reloads) -------------------------------------------------
@dataclass(frozen=True)
class _LocalDataset:
    """A local dataset opened for reloading rows by index: its source, rows and adapter."""

    source: DatasetSource
    opened: _Opened
    adapter: DatasetAdapter


@lru_cache(maxsize=8)
def _opened_local(path: str, split: str, adapter: str | None, content: tuple[int, str]) -> _LocalDataset:
    # ``content`` (size, SHA-256) is only the cache key: a rewritten file is opened again.
    source = DatasetSource(path=path, split=split, adapter=adapter, streaming=False)
    opened = _open(source)
    return _LocalDataset(source, opened, _pick_adapter(source, opened.columns))


def dataset_row_task(path: str, split: str, index: int, *, adapter: str | None = None) -> Task:
    """The task of row ``index`` of a local dataset (a sweep worker's reload of one cell's task).

    The opened dataset is kept per process (memory-mapped) by its files' size and content hash,
    so a worker running many cells of one dataset opens it once, and a rewritten file anew.
    """
    p = Path(path)
    if not p.exists():
        raise ConfigError(
            f"dataset {path!r}: a row can be loaded by index only from a local dataset "
            "(sweeps save a Hub sample to a local file first)"
        )
    local = _opened_local(path, split, adapter, _local_content(p))
    n_rows = local.opened.n_rows()
    if not 0 <= index < n_rows:
        raise ConfigError(f"dataset {path!r} (split {split!r}): row {index} out of range (it has {n_rows} rows)")
    try:
        return _convert(local.opened.row(index), index, local.source, local.adapter, local.opened)
    except RowSkip as e:
        raise FormatError(f"row cannot be replayed: {e.reason}", path=f"{path}:{split}#{index}") from None
    except RecursionError:  # as in a sample: a converter recursing deeper than the interpreter allows
        raise FormatError(
            "row cannot be replayed: nested too deep to convert", path=f"{path}:{split}#{index}"
        ) from None


def parse_dataset_spec(spec: str) -> tuple[str, str, int | None]:
    """``dataset:PATH_OR_ID[:SPLIT][#ROW]`` -> ``(path, split, row)``; split defaults to ``train``."""
    body = spec[len(DATASET_SPEC_PREFIX) :] if spec.startswith(DATASET_SPEC_PREFIX) else spec
    row: int | None = None
    head, hash_, tail = body.rpartition("#")
    if hash_ and not Path(body).exists():
        try:
            row = int(tail)
        except ValueError:
            raise ConfigError(f"task spec {spec!r}: the row after '#' must be an integer, got {tail!r}") from None
        if row < 0:
            raise ConfigError(f"task spec {spec!r}: the row after '#' must be >= 0, got {row}")
        body = head
    split = "train"
    if not Path(body).exists():
        path_part, colon, split_part = body.rpartition(":")
        if colon and path_part and "/" not in split_part:
            body, split = path_part, split_part
    if not body:
        raise ConfigError(f"task spec {spec!r}: expected dataset:PATH_OR_ID[:SPLIT][#ROW]")
    return body, split, row
