"""The replay's probe hook: a :data:`ProbeFn` scores the view sent at one model call.

The replay calls it on the task's checkpoint grid (every ``probe_every_k``-th call and the
last, the same calls for every policy: :func:`h9eval.probes.drift.checkpoint_grid`);
:func:`make_probe_fn` builds one from scorer names.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from h9eval.core.anthropic import CallLimits
from h9eval.core.messages import Message
from h9eval.probes.drift import probe_view
from h9eval.probes.llm import AnthropicTextClient
from h9eval.probes.scorers import make_scorer
from h9eval.tasks.model import Task
from h9eval.tasks.text import ViewTexts

__all__ = ["CallCheckpoint", "ProbeFn", "make_probe_fn"]


@dataclass(frozen=True, kw_only=True)
class CallCheckpoint:
    """The model call a probed view was sent at."""

    run_id: str
    call_index: int
    """0-based index of the model call."""
    tier_name: str
    """The tier of the call's compaction (``none`` .. ``emergency``)."""
    tokens_sent: int
    """harness9's estimate of the view plus the tool schemas."""
    n_compactions: int
    """Calls that compacted so far, this one included."""


def _scorer(name: str, cache: str | os.PathLike[str] | None, call_limits: CallLimits | None) -> Any:
    if name != "llm" or (cache is None and call_limits is None):
        return make_scorer(name)
    if call_limits is None:
        return make_scorer(name, cache=cache)
    return make_scorer(name, answerer=AnthropicTextClient(cache=cache, **call_limits.client_params("scorer")))


ProbeFn = Callable[[Task, Sequence[Message], int, CallCheckpoint], list[dict[str, Any]]]
"""``fn(task, view, message_index, checkpoint)`` -> probe rows (the ``probes`` table's columns);
``message_index`` is the last transcript message the view covers."""


def make_probe_fn(
    scorers: Sequence[str], cache: str | os.PathLike[str] | None = None, *, call_limits: CallLimits | None = None
) -> ProbeFn | None:
    """A :data:`ProbeFn` scoring each checkpoint view with the named scorers (``None`` for none).

    The scorers are built once, here, before any replay starts (so an unknown scorer is a
    :class:`~h9eval.core.errors.ConfigError`, not a failure at the first checkpoint, and the llm
    scorer's cache and audit span the run). ``cache``: the SQLite file the llm scorer's replies
    persist in (the summarizer's, so reruns and a sweep's cells share it). The scorer objects
    are the function's ``scorers`` attribute (e.g. for the llm scorer's ``audit_frame()``).
    ``call_limits``: the request timeout and retries of the llm scorer's client.
    """
    if not scorers:
        return None
    names = tuple(_scorer(s, cache, call_limits) for s in scorers)
    views = ViewTexts()  # the checkpoints of a replay share most of their views' messages

    def fn(task: Task, view: Sequence[Message], message_index: int, at: CallCheckpoint) -> list[dict[str, Any]]:
        return probe_view(
            task,
            view,
            message_index,
            scorers=names,
            checkpoint=at.call_index,
            run_id=at.run_id,
            tier=at.tier_name,
            tokens=at.tokens_sent,
            n_compactions=at.n_compactions,
            views=views,
        )

    fn.scorers = names  # type: ignore[attr-defined]
    return fn
