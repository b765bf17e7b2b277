"""The function behind ``h9eval run``, for notebooks: resolve names and specs once, then replay."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from h9eval.compaction.base import Policy
from h9eval.compaction.policies import make_policy
from h9eval.compaction.summary import Summarizer
from h9eval.core.errors import FormatError
from h9eval.core.paths import safe_name
from h9eval.probes.runner import make_probe_fn
from h9eval.runs.replay import ReplayConfig, ReplayResult, replay
from h9eval.summarizers.registry import DEFAULT_SUMMARIZER, build_summarizer
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.model import Task

__all__ = ["run_task"]


def run_task(
    task: str | Task,
    policy: str | Policy = "progressive",
    *,
    params: Mapping[str, Any] | None = None,
    summarizer: str | Summarizer | None = DEFAULT_SUMMARIZER,
    summarizer_cache: str | os.PathLike[str] | None = None,
    history_mode: str = "view",
    writeback_rules: str = "v3",
    window: int | None = None,
    manual_compact_at: Sequence[int] = (),
    probes: Sequence[str] = (),
    probe_every_k: int | None = None,
    out_dir: str | os.PathLike[str] | None = None,
) -> list[ReplayResult]:
    """Replay every task a spec names through a policy (by name or object).

    ``summarizer``: a registered name, ``"none"``/``None`` (no summarizer) or a Summarizer.
    With several tasks each gets ``<out_dir>/<task id>/``.
    """
    tasks = load_tasks_from_spec(task) if isinstance(task, str) else [task]
    if not tasks:
        # A folder without sessions used to exit 0 having run nothing: say so instead.
        raise FormatError(
            "no sessions found (expected recorded session files *.jsonl/*.json/*.traj, an OpenHands folder or a task JSONL)",
            path=str(task),
        )
    pol = make_policy(policy, **(params or {})) if isinstance(policy, str) else policy
    summ = build_summarizer(summarizer, summarizer_cache) if isinstance(summarizer, str) or summarizer is None else summarizer
    cfg = ReplayConfig(
        history_mode=history_mode,
        writeback_rules=writeback_rules,
        manual_compact_at=tuple(manual_compact_at),
        context_window_tokens=window,
    )
    probe_fn = make_probe_fn(probes)
    results = []
    for t in tasks:
        out = None
        if out_dir is not None:
            out = Path(out_dir) if len(tasks) == 1 else Path(out_dir) / safe_name(t.task_id)
        results.append(replay(t, pol, summarizer=summ, config=cfg, out_dir=out, probe_fn=probe_fn, probe_every_k=probe_every_k))
    return results
