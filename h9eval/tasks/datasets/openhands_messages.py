"""OpenHands runs stored as OpenAI-style ``messages``: ``nvidia/SWE-Zero-openhands-trajectories``
and ``SWE-Gym/OpenHands-Sampled-Trajectories`` (one adapter each, the same row shape).

Columns: ``instance_id``, ``messages`` (or ``trajectory``; OpenAI chat messages with
``tool_calls``/``tool_call_id``), optional ``tools`` (a list of schemas, or of their JSON text),
``resolved`` (bool, or 1/0 with -1 for "not evaluated"), an optional ``trajectory_id`` or
``run_id``. Read as the recorded ``openai_chat`` loader reads a conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from h9eval.tasks.datasets._shapes import openai_row_task
from h9eval.tasks.datasets.base import ADAPTERS, DatasetAdapter, RowContext
from h9eval.tasks.model import Task

SWE_ZERO = "swe_zero_openhands"
SWE_GYM = "swe_gym_openhands"


def row_to_task(row: Mapping[str, Any], ctx: RowContext, *, fmt: str) -> Task:
    meta = {"agent": "openhands", "repo": row.get("repo")}
    tools = "tools" if row.get("tools") is not None else None
    return openai_row_task(
        row, ctx, fmt=fmt, message_columns=("messages", "trajectory"), tools_column=tools, metadata=meta
    )


ADAPTERS.add(
    SWE_ZERO,
    DatasetAdapter(
        name=SWE_ZERO,
        hub_ids=("nvidia/SWE-Zero-openhands-trajectories",),
        required_columns=(("instance_id",), ("messages", "trajectory")),
        id_columns=("trajectory_id", "instance_id"),
        resolved_column="resolved",
        model_column=None,
        row_to_task=partial(row_to_task, fmt=SWE_ZERO),
        description="OpenHands OpenAI-style messages: nvidia/SWE-Zero-openhands-trajectories",
    ),
)
ADAPTERS.add(
    SWE_GYM,
    DatasetAdapter(
        name=SWE_GYM,
        hub_ids=("SWE-Gym/OpenHands-Sampled-Trajectories",),
        required_columns=(("instance_id",), ("messages", "trajectory")),
        id_columns=("run_id", "instance_id"),
        resolved_column="resolved",
        model_column=None,
        row_to_task=partial(row_to_task, fmt=SWE_GYM),
        description="OpenHands OpenAI-style messages: SWE-Gym/OpenHands-Sampled-Trajectories",
    ),
)
