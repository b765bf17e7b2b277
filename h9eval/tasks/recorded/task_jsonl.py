"""h9eval's own task files (``h9eval tasks generate``, :func:`~h9eval.tasks.model.tasks_to_jsonl`): one task
per line with its ground truth. Recognised like the recorded formats, but not one of them
(:data:`~h9eval.tasks.recorded.FORMATS` leaves it out)."""

from __future__ import annotations

from pathlib import Path

from h9eval.core.errors import FormatError
from h9eval.tasks.model import TASK_JSONL_FORMAT, Task, is_task_jsonl_record, tasks_from_jsonl
from h9eval.tasks.recorded._format import RecordedFormat

__all__ = ["RECORDED_FORMATS", "load_one_task"]


def load_one_task(path: str | Path) -> Task:
    """The one task of a task file (a file of several is refused: :func:`tasks_from_jsonl` reads them all).

    Args:
        path: the task file.

    Returns:
        The task.

    Raises:
        FormatError: the file holds another number of tasks than one, or a bad line.
    """
    tasks = tasks_from_jsonl(path)
    if len(tasks) != 1:
        raise FormatError(
            f"task file holds {len(tasks)} tasks; expected one (load_tasks reads them all)", path=str(path)
        )
    return tasks[0]


RECORDED_FORMATS = (
    RecordedFormat(
        name=TASK_JSONL_FORMAT,
        described="an h9eval task file",
        detect_order=10,  # before the chat formats: a task line also holds "messages"
        load=load_one_task,
        load_all=tasks_from_jsonl,
        matches_json=is_task_jsonl_record,
        matches_jsonl=lambda first, _path: is_task_jsonl_record(first),
        recorded=False,
    ),
)
