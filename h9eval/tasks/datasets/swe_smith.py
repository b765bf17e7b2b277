"""``SWE-bench/SWE-smith-trajectories``: SWE-agent runs on SWE-smith's synthetic task instances.

Columns: ``instance_id``, ``messages`` (a list of ``role``/``content`` messages; some revisions
store it as JSON text, read either way), ``resolved``, ``model``, ``traj_id``, ``patch``. The
messages are SWE-agent's (``system``, ``user``, ``assistant``, and ``tool`` with
``tool_call_ids`` in the function-calling runs), read as the recorded ``swe_agent`` loader reads
a ``.traj`` history: function-calling messages map one to one, text actions become synthesized
``bash`` calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from h9eval.tasks.datasets._shapes import json_list, swe_agent_row_task
from h9eval.tasks.datasets.base import ADAPTERS, DatasetAdapter, RowContext, RowSkip
from h9eval.tasks.model import Task

NAME = "swe_smith"


def row_to_task(row: Mapping[str, Any], ctx: RowContext) -> Task:
    history = json_list(row.get("messages"), "messages")
    for k, m in enumerate(history):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise RowSkip(f"messages[{k}] is not a message with a string role")
    info = {"submission": row.get("patch") if isinstance(row.get("patch"), str) else None}
    return swe_agent_row_task(row, ctx, fmt=NAME, history=[dict(m) for m in history], info=info)


ADAPTER = ADAPTERS.add(
    NAME,
    DatasetAdapter(
        name=NAME,
        hub_ids=("SWE-bench/SWE-smith-trajectories",),
        required_columns=(("instance_id",), ("messages",), ("traj_id",)),
        id_columns=("traj_id", "instance_id"),
        resolved_column="resolved",
        model_column="model",
        row_to_task=row_to_task,
        description="SWE-agent message lists (role/content, tool calls): SWE-bench/SWE-smith-trajectories",
    ),
)
