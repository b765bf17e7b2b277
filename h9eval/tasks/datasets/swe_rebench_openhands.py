"""``nebius/SWE-rebench-openhands-trajectories``: OpenHands runs with Qwen3-Coder (67,074).

Columns (the dataset card): ``trajectory_id``, ``instance_id``, ``repo``, ``trajectory``
(OpenAI-style messages: ``role``, ``content``, ``tool_calls`` with
``function.name``/``function.arguments``, ``tool_call_id``, ``name``), ``tools``,
``model_patch``, ``exit_status``, ``resolved``. Read as the recorded ``openai_chat`` loader
reads a conversation; ``tools`` become the task's tool schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from h9eval.tasks.datasets._shapes import openai_row_task
from h9eval.tasks.datasets.base import ADAPTERS, DatasetAdapter, RowContext
from h9eval.tasks.model import Task

NAME = "swe_rebench_openhands"


def row_to_task(row: Mapping[str, Any], ctx: RowContext) -> Task:
    meta = {"agent": "openhands", "repo": row.get("repo"), "exit_status": row.get("exit_status")}
    return openai_row_task(row, ctx, fmt=NAME, message_columns=("trajectory",), tools_column="tools", metadata=meta)


ADAPTER = ADAPTERS.add(
    NAME,
    DatasetAdapter(
        name=NAME,
        hub_ids=("nebius/SWE-rebench-openhands-trajectories",),
        required_columns=(("trajectory_id",), ("instance_id",), ("trajectory",), ("model_patch",)),
        id_columns=("trajectory_id", "instance_id"),
        resolved_column="resolved",
        model_column=None,
        row_to_task=row_to_task,
        description="OpenHands OpenAI-style trajectories: nebius/SWE-rebench-openhands-trajectories",
    ),
)
