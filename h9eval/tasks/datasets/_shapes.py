"""Row shapes shared by several dataset adapters: OpenAI-style message lists and SWE-agent
trajectories, each read by the recorded-session loader of the same shape."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from h9eval.tasks.datasets.base import RowContext, RowSkip
from h9eval.tasks.model import Task
from h9eval.tasks.recorded.chat import openai_task_from_messages
from h9eval.tasks.recorded.swe_agent import swe_agent_task_from_object

__all__ = ["first_column", "json_list", "openai_row_task", "swe_agent_row_task"]


def first_column(row: Mapping[str, Any], names: Sequence[str]) -> tuple[str, Any]:
    """The first of ``names`` the row has (not ``None``), as ``(name, value)``."""
    for name in names:
        if row.get(name) is not None:
            return name, row[name]
    raise RowSkip(f"no {' or '.join(repr(n) for n in names)} value")


def json_list(value: Any, column: str) -> list[Any]:
    """A list column stored as a list or as JSON text (several datasets store messages as text);
    list items that are JSON text of an object (tool schemas, in some datasets) are decoded."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise RowSkip(f"{column} is text that is not JSON") from None
    if not isinstance(value, list):
        raise RowSkip(f"{column} is not a list (got {type(value).__name__})")
    out = []
    for item in value:
        if isinstance(item, str) and item.lstrip().startswith("{"):
            try:
                item = json.loads(item)
            except ValueError:
                pass
        out.append(item)
    return out


def openai_row_task(
    row: Mapping[str, Any],
    ctx: RowContext,
    *,
    fmt: str,
    message_columns: Sequence[str],
    tools_column: str | None,
    metadata: Mapping[str, Any],
) -> Task:
    """A row whose trajectory is OpenAI chat messages (``role``, ``content``, ``tool_calls`` with
    ``function.name``/``function.arguments``, ``tool_call_id``, ``name``)."""
    column, raw = first_column(row, message_columns)
    messages = json_list(raw, column)
    tools = json_list(row[tools_column], tools_column) if tools_column and row.get(tools_column) is not None else []
    return openai_task_from_messages(
        messages,
        tools=tools,
        shown=ctx.shown,
        session=ctx.session,
        fmt=fmt,
        n_bytes=ctx.n_bytes,
        metadata=dict(metadata),
        where=column,
    )


def swe_agent_row_task(
    row: Mapping[str, Any], ctx: RowContext, *, fmt: str, history: list[Any], info: Mapping[str, Any]
) -> Task:
    """A row mapped to a SWE-agent trajectory ``{history, info}`` (text or function-calling)."""
    return swe_agent_task_from_object(
        {"history": history, "info": dict(info)}, shown=ctx.shown, session=ctx.session, fmt=fmt, n_bytes=ctx.n_bytes
    )
