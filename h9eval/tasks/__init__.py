"""Tasks: the model, the synthetic generator, recorded-session loaders, and one resolver.

``load_tasks_from_spec("synthetic:long:7")``, a recorded session file or folder, an h9eval task
JSONL file, a harness9 session database (``.db``/``.sqlite``, optionally ``DB#session``) or a
trajectory dataset (``dataset:PATH_OR_ID[:SPLIT][#ROW]``, see :mod:`h9eval.tasks.datasets`) all
give a list of :class:`Task`.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from h9eval.core.errors import ConfigError, FormatError
from h9eval.core.paths import check_input_path
from h9eval.tasks.model import (
    AnchorTruth,
    Fact,
    Intent,
    IntentChange,
    Task,
    TaskSource,
    tasks_from_dataframe,
    tasks_from_dataset,
    is_task_jsonl_record,
    tasks_from_jsonl,
    tasks_to_dataframe,
    tasks_to_dataset,
    tasks_to_jsonl,
)

__all__ = [
    "AnchorTruth",
    "Fact",
    "Intent",
    "IntentChange",
    "Task",
    "TaskSource",
    "load_tasks_from_spec",
    "tasks_from_dataframe",
    "tasks_from_dataset",
    "tasks_from_jsonl",
    "tasks_to_dataframe",
    "tasks_to_dataset",
    "tasks_to_jsonl",
]


#: the loader of each kind of input, imported when that kind is met: a run of a task file needs none
#: of the recorded formats' parsers or the datasets adapters (a twentieth of a short run's CPU)
_LOADERS = {
    "synthetic": "h9eval.tasks.synthetic",
    "recorded": "h9eval.tasks.recorded",
    "harness9_db": "h9eval.tasks.recorded.harness9_db",
    "datasets": "h9eval.tasks.datasets",
}


def _loader(kind: str) -> Any:
    return importlib.import_module(_LOADERS[kind])


def _is_task_jsonl(p: Path) -> bool:
    if p.suffix != ".jsonl" or not p.is_file():
        return False
    with open(p, encoding="utf-8", errors="replace") as f:
        first = f.readline()
    try:
        d = json.loads(first)
    except json.JSONDecodeError:
        return False
    except RecursionError:  # no record of any format is nested that deeply
        raise FormatError("JSON nested too deeply", path=str(p), where="line 1") from None
    return is_task_jsonl_record(d)


def is_sqlite(p: Path) -> bool:
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def load_tasks_from_spec(spec: str) -> list[Task]:
    """Resolve a task spec (see the module docstring) to tasks."""
    if spec.startswith("dataset:"):
        return _dataset_tasks(spec)
    if spec.startswith("synthetic:"):
        parts = spec.split(":")
        if len(parts) not in (2, 3) or not parts[1]:
            raise ConfigError(f"task spec {spec!r}: expected synthetic:PRESET or synthetic:PRESET:SEED")
        seed = 0
        if len(parts) == 3:
            try:
                seed = int(parts[2])
            except ValueError:
                raise ConfigError(f"task spec {spec!r}: seed must be an integer, got {parts[2]!r}") from None
        return [_loader("synthetic").generate(parts[1], seed=seed)]
    # ``FILE#SESSION`` names a session of a database; a path that itself holds a ``#`` is used whole.
    path_s, _, session = ("", "", "") if Path(spec).exists() else spec.rpartition("#")
    if not path_s:
        path_s, session = spec, ""
    p = Path(path_s)
    if not p.exists():
        raise FormatError("no such file or folder", path=path_s)
    check_input_path(p, what="task")
    if is_sqlite(p):
        db = _loader("harness9_db")
        return [db.load_session_task(p, session)] if session else db.load_db_tasks(p)
    if _is_task_jsonl(p):
        return tasks_from_jsonl(p)
    return _loader("recorded").load_tasks(p)  # type: ignore[no-any-return]


def _dataset_tasks(spec: str) -> list[Task]:
    # the datasets library itself is imported only when a dataset is opened
    datasets = _loader("datasets")
    path, split, row = datasets.parse_dataset_spec(spec)
    if row is not None:
        return [datasets.dataset_row_task(path, split, row)]
    return list(datasets.load_dataset_tasks(datasets.DatasetSource(path=path, split=split)).tasks)
