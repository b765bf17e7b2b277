"""Public agent-trajectory datasets as tasks, through :mod:`datasets` (see :mod:`.base`).

Adapters (one module each, registered in :data:`ADAPTERS`): ``nebius_swe_agent``,
``swe_smith``, ``swe_rebench_openhands``, ``swe_zero_openhands``, ``swe_gym_openhands``.
"""

from __future__ import annotations

from h9eval.tasks.datasets import nebius_swe_agent, openhands_messages, swe_rebench_openhands, swe_smith
from h9eval.tasks.datasets.base import (
    ADAPTERS,
    DATASET_SPEC_PREFIX,
    DatasetAdapter,
    DatasetSample,
    DatasetSource,
    RowContext,
    RowSkip,
    dataset_cache_dir,
    dataset_row_task,
    is_streamed,
    iter_dataset_tasks,
    materialize_sample,
    load_dataset_tasks,
    parse_dataset_spec,
)

__all__ = [
    "ADAPTERS",
    "DATASET_SPEC_PREFIX",
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

_ADAPTER_MODULES = (nebius_swe_agent, openhands_messages, swe_rebench_openhands, swe_smith)  # they register
