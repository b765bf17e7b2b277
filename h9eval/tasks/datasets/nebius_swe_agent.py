"""``nebius/SWE-agent-trajectories``: SWE-agent runs (80,036 trajectories on SWE-bench-style
instances) as published on the Hub.

Columns (the dataset card): ``instance_id``, ``model_name``, ``target`` (resolved),
``trajectory`` (a list of ``role``, ``text``, ``system_prompt``, ``mask``, ``cutoff_date``),
``exit_status``, ``generated_patch``, ``eval_logs``. Roles are ``system``, ``user`` and ``ai``
(the model). SWE-agent's text format: the action is the fenced block of an ``ai`` message and its
output the next ``user`` message, read as the recorded ``swe_agent`` loader reads a ``.traj``
(synthesized ``bash`` tool calls). A ``system`` entry's text is its ``text`` or, if empty, its
``system_prompt``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from h9eval.tasks.datasets._shapes import json_list, swe_agent_row_task
from h9eval.tasks.datasets.base import ADAPTERS, DatasetAdapter, RowContext, RowSkip
from h9eval.tasks.model import Task

NAME = "nebius_swe_agent"
_ROLES = {"ai": "assistant", "assistant": "assistant", "user": "user", "system": "system", "tool": "tool"}


def row_to_task(row: Mapping[str, Any], ctx: RowContext) -> Task:
    steps = json_list(row.get("trajectory"), "trajectory")
    history: list[dict[str, Any]] = []
    for k, step in enumerate(steps):
        if not isinstance(step, Mapping):
            raise RowSkip(f"trajectory[{k}] is not an object")
        role = _ROLES.get(str(step.get("role")))
        if role is None:
            raise RowSkip(f"trajectory[{k}] has role {step.get('role')!r} (expected system, user or ai)")
        text = step.get("text")
        if role == "system" and not text:
            text = step.get("system_prompt")
        if text is not None and not isinstance(text, str):
            raise RowSkip(f"trajectory[{k}].text is not a string")
        history.append({"role": role, "content": text or ""})
    info = {
        "exit_status": row.get("exit_status") if isinstance(row.get("exit_status"), str) else None,
        "submission": row.get("generated_patch") if isinstance(row.get("generated_patch"), str) else None,
    }
    task = swe_agent_row_task(row, ctx, fmt=NAME, history=history, info=info)
    return task


ADAPTER = ADAPTERS.add(
    NAME,
    DatasetAdapter(
        name=NAME,
        hub_ids=("nebius/SWE-agent-trajectories",),
        required_columns=(("instance_id",), ("trajectory",), ("target",)),
        id_columns=("instance_id",),
        resolved_column="target",
        model_column="model_name",
        row_to_task=row_to_task,
        description="SWE-agent text trajectories (role system/user/ai, text): nebius/SWE-agent-trajectories",
    ),
)
