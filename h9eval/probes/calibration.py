"""Calibration of the offline stand-in summarizers against a real model's compaction summary.

A recorded Claude Code session that compacted carries the summary Claude Code's own compaction
call wrote (the ``isCompactSummary`` record after its ``compact_boundary``; the call itself is
in ``subagents/agent-acompact-*.jsonl``). :func:`calibrate_session` scores the session's typed
items live at the boundary (:mod:`h9eval.probes.items`) against that real summary and against
the summary each offline summarizer writes of the same head (harness9's first-summary request
for the messages before the boundary), with the ledger's exact-use rule
(:func:`h9eval.probes.ledger.item_state`). Only the summary text is judged, for both: what the
model kept is compared with what the stand-in kept, not with a verbatim tail.

``gap`` = stand-in share minus real share, per item type: positive where the stand-in keeps more
than the model (an optimistic stand-in), negative where it keeps less.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from h9eval.compaction.anchors import ANCHOR_TYPES
from h9eval.compaction.prompts import DEFAULT_PROMPTS, serialize_conversation
from h9eval.compaction.summary import request_summary, summary_request
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.probes.items import task_items
from h9eval.probes.ledger import item_state, rendered_view
from h9eval.summarizers.registry import build_summarizer
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.model import Task

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["OFFLINE_STAND_INS", "calibrate_session", "calibration_table"]

OFFLINE_STAND_INS: tuple[str, ...] = ("offline", "offline_recent", "offline_free_text")
SUMMARY_TIMEOUT_S = 60.0


def _stand_in_summary(head: Sequence[Message], name: str) -> str:
    """The reply ``name`` gives to harness9's first-summary request for the whole ``head`` (the
    request the progressive policy sends, with its default prompts and anchors; Claude Code's
    compaction also summarises the whole conversation, which harness9's tiers would not do when
    a session has one user turn and so no cut point)."""
    summarizer = build_summarizer(name)
    request = summary_request(
        DEFAULT_PROMPTS, head, serialize_conversation(head), "", None, ANCHOR_TYPES, SUMMARY_TIMEOUT_S
    )
    text = request_summary(summarizer, [], {}, request)
    return text or ""


def calibrate_session(task: Task, *, stand_ins: Sequence[str] = OFFLINE_STAND_INS) -> list[dict[str, Any]]:
    """One row per (compaction of the session, item live at it, summarizer): ``summarizer``
    (``real`` or a stand-in), ``item_type``, ``item_id``, ``state``."""
    comps = [c for c in task.metadata.get("compactions", []) if c.get("summary")]
    if not comps:
        raise ConfigError(f"{task.task_id}: the session has no recorded compaction summary to calibrate against")
    items = task_items(task)
    rows: list[dict[str, Any]] = []
    for k, comp in enumerate(comps):
        at = int(comp["message_index"])
        head = task.messages[:at]
        live = [i for i in items if i.live_at(at - 1)]
        texts = {"real": str(comp["summary"])}
        for name in stand_ins:
            texts[name] = _stand_in_summary(head, name)
        for name, text in texts.items():
            view = rendered_view([Message("assistant", text)])
            for item in live:
                state, _ = item_state(item, view)
                rows.append(
                    {
                        "task_id": task.task_id,
                        "compaction": k,
                        "summarizer": name,
                        "item_id": item.item_id,
                        "item_type": item.item_type,
                        "state": state,
                        "summary_chars": len(text),
                    }
                )
    return rows


def calibration_table(
    paths: Sequence[str | os.PathLike[str]], *, stand_ins: Sequence[str] = OFFLINE_STAND_INS
) -> pd.DataFrame:
    """Per item type: items scored, the share each summary keeps exactly (``real`` and each
    stand-in) and each stand-in's ``gap`` to the real one, over every compacted Claude Code
    session in ``paths`` (files or folders; sessions without a compaction are skipped)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for p in paths:
        for task in load_tasks_from_spec(str(p)):
            if any(c.get("summary") for c in task.metadata.get("compactions", [])):
                rows.extend(calibrate_session(task, stand_ins=stand_ins))
    if not rows:
        raise ConfigError("no compacted Claude Code session with a recorded summary among the paths given")
    df = pd.DataFrame(rows).assign(kept=lambda d: d["state"] == "PRESERVED")
    share = df.pivot_table(index="item_type", columns="summarizer", values="kept", aggfunc="mean")
    n = df[df["summarizer"] == "real"].groupby("item_type").size().rename("n_items")
    out = pd.concat([n, share[["real", *stand_ins]]], axis=1)
    for name in stand_ins:
        out[f"gap_{name}"] = out[name] - out["real"]
    out.loc["all"] = [
        len(df[df["summarizer"] == "real"]),
        *[df[df["summarizer"] == s]["kept"].mean() for s in ("real", *stand_ins)],
        *[df[df["summarizer"] == s]["kept"].mean() - df[df["summarizer"] == "real"]["kept"].mean() for s in stand_ins],
    ]
    out["n_sessions"] = df["task_id"].nunique()
    return out.reset_index(names="item_type").round(3)
