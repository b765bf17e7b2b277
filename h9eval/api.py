"""The functions behind the CLI, for notebooks: resolve names and specs, then call the core."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from h9eval.compaction.base import make_policy
from h9eval.compaction.offload import safe_name
from h9eval.replay import ReplayConfig, ReplayResult, replay
from h9eval.tasks import load_tasks_from_spec

__all__ = ["run_task", "make_probe_fn", "build_summarizer"]


def build_summarizer(name: str | None, cache: str | os.PathLike[str] | None = None, **params: Any) -> Any:
    """A registered summarizer by name, wrapped in the shared response cache when given."""
    if name is None or name == "none":
        return None
    from h9eval.summarizers.registry import make_summarizer

    return make_summarizer(name, cache=cache, **params)


def make_probe_fn(scorers: Sequence[str], cache: str | os.PathLike[str] | None = None) -> Any:
    """A replay ``probe_fn`` scoring each checkpoint view with the named scorers.

    The scorers are built once (so the llm scorer's cache and audit span the run); ``cache``:
    the SQLite file the llm scorer's replies persist in (the summarizer's, so reruns and a
    sweep's cells share it). The scorer objects are the function's ``scorers`` attribute."""
    if not scorers:
        return None
    from h9eval.probes import make_scorer, probe_view

    # Built before the run starts, which also validates the names.
    objs = tuple(make_scorer(s, cache=cache) if s == "llm" and cache is not None else make_scorer(s) for s in scorers)

    def fn(task: Any, view: Any, message_index: int, row: dict[str, Any]) -> list[dict[str, Any]]:
        return probe_view(
            task,
            view,
            message_index,
            scorers=objs,
            checkpoint=row["call_index"],
            run_id=row["run_id"],
            tier=row["tier_name"],
            tokens=row["tokens_sent"],
            n_compactions=row.get("n_compactions"),
        )

    fn.scorers = objs  # type: ignore[attr-defined]  # for the caller: e.g. the llm scorer's audit_frame()
    return fn


def run_task(
    task: str | Any,
    policy: str | Any = "progressive",
    *,
    params: dict[str, Any] | None = None,
    summarizer: str | Any = "offline",
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

    With several tasks each gets ``<out_dir>/<task id>/``.
    """
    tasks = load_tasks_from_spec(task) if isinstance(task, str) else [task]
    if not tasks:
        # A folder without sessions used to exit 0 having run nothing: say so instead.
        from h9eval.errors import FormatError

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
    probe_fn = make_probe_fn(probes, cache=summarizer_cache)
    results = []
    for t in tasks:
        out = None
        if out_dir is not None:
            out = Path(out_dir) if len(tasks) == 1 else Path(out_dir) / safe_name(t.task_id)
        results.append(replay(t, pol, summarizer=summ, config=cfg, out_dir=out, probe_fn=probe_fn, probe_every_k=probe_every_k))
    return results
