"""The billing model checked against real bills: recorded Claude Code sessions replayed as
their agent sent them (policy ``as_recorded``), each call's predicted cache-read and cache-write
shares against its recorded ``message.usage``.

``check_bills(task)`` replays one session and returns a :class:`BillCheck`: per call the
predicted and recorded shares (shares, not counts: h9eval's token estimate is not Claude's
tokenizer), the calls where they disagree with a reason, and what happened at each recorded
compaction (``compact_boundary``): the call after it predicted and recorded. ``check_bill_files``
runs it on files or folders; ``h9eval bills PATH...`` prints it.

Assumptions (``docs/billing.md``): the harness prefix the record lacks (tool schemas, system
prompt, injected context) is taken as the first call's recorded input less h9eval's estimate of
its transcript part (``prefix_tokens="first_call"``; an integer sets it, 0 leaves it out); the
breakpoint lifetime is the one the recorded writes show (1 h or 5 min); the models and times are
the recorded ones.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.compaction.policies import make_policy
from h9eval.core.billing import TTL_SECONDS, BillingConfig, PromptCache, Request, placement as placement_named
from h9eval.core.messages import Message
from h9eval.core.errors import ConfigError
from h9eval.core.prices import model_entry
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.tasks.model import Task
from h9eval.tasks.recorded.claude_code import is_compaction_call_file, load_claude_code

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "READ_SHARE_TOLERANCE_POINTS",
    "WRITE_SHARE_TOLERANCE_FACTOR",
    "BillCheck",
    "check_bill_files",
    "check_bills",
]

READ_SHARE_TOLERANCE_POINTS = 1.0
"""The predicted cache-read share of a session's input must be within this many points."""
WRITE_SHARE_TOLERANCE_FACTOR = 1.5
"""... and the cache-write share within this factor of the recorded one."""
DISAGREE_POINTS = 10.0
"""A call whose predicted read share is this many points off the recorded one is listed."""


@dataclass
class BillCheck:
    """One session's predicted bill against its recorded one."""

    task_id: str
    calls: pd.DataFrame
    """Per call: model, time, predicted and recorded input classes and shares, ``reason`` where
    they disagree by more than :data:`DISAGREE_POINTS`."""
    prefix_tokens: int
    ttl: str
    boundaries: list[dict[str, Any]] = field(default_factory=list)
    """Per recorded compaction: the call after it, predicted and recorded (tokens, shares, miss)."""
    compaction_calls: list[dict[str, Any]] = field(default_factory=list)
    """Claude Code's own compaction (summarizer) calls (``subagents/agent-acompact-*.jsonl``),
    predicted as the conversation so far plus their prompt, against their recorded usage."""

    def shares(self) -> dict[str, float]:
        """The session's read and write shares of the main agent's input, predicted and recorded."""
        c = self.calls
        return {
            "predicted_read_share": float(c["pred_read"].sum() / c["pred_input"].sum()),
            "recorded_read_share": float(c["rec_read"].sum() / c["rec_input"].sum()),
            "predicted_write_share": float(c["pred_write"].sum() / c["pred_input"].sum()),
            "recorded_write_share": float(c["rec_write"].sum() / c["rec_input"].sum()),
        }

    def summary(self) -> dict[str, Any]:
        """Shares, agreement, disagreeing calls and whether the checks pass."""
        s = self.shares()
        read_pts = 100 * abs(s["predicted_read_share"] - s["recorded_read_share"])
        factor = max(s["predicted_write_share"], s["recorded_write_share"]) / max(
            min(s["predicted_write_share"], s["recorded_write_share"]), 1e-12
        )
        misses = [b["predicted_miss"] for b in self.boundaries]
        recorded_misses = [b["recorded_miss"] for b in self.boundaries]
        return {
            "task_id": self.task_id,
            "calls": len(self.calls),
            **{k: round(v, 4) for k, v in s.items()},
            "read_share_diff_points": round(read_pts, 2),
            "write_share_factor": round(factor, 2),
            "disagreeing_calls": int((self.calls["reason"] != "").sum()),
            "compactions": len(self.boundaries),
            "miss_after_compaction_predicted": all(misses) if misses else None,
            "miss_after_compaction_recorded": all(recorded_misses) if recorded_misses else None,
            "prefix_tokens": self.prefix_tokens,
            "ttl": self.ttl,
            "passes": read_pts <= READ_SHARE_TOLERANCE_POINTS
            and factor <= WRITE_SHARE_TOLERANCE_FACTOR
            and all(misses),
        }


def _recorded_frame(task: Task) -> pd.DataFrame:
    import pandas as pd

    rc = task.metadata.get("recorded_calls")
    if not rc:
        raise ConfigError(
            f"{task.task_id}: no recorded bills (metadata 'recorded_calls'); expected a Claude Code session"
        )
    df = pd.DataFrame(list(rc))
    cols = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    missing = [c for c in cols if df[c].isna().any()]
    if missing:
        raise ConfigError(
            f"{task.task_id}: recorded usage lacks {missing[0]} on some calls; expected message.usage on every response"
        )
    return df


def _ttl(df: pd.DataFrame) -> str:
    """The lifetime the harness asked for, as its recorded writes show it."""
    return (
        "1h"
        if df["cache_creation_1h_tokens"].fillna(0).sum() > df["cache_creation_5m_tokens"].fillna(0).sum()
        else "5m"
    )


def check_bills(task: Task, *, prefix_tokens: int | str = "first_call", placement: str | None = None) -> BillCheck:
    """Replay ``task`` (a recorded session with ``metadata["recorded_calls"]``) with
    ``as_recorded`` and compare each call's predicted bill with the recorded one (see the
    module docstring). ``placement``: a cache placement name (default: Claude Code's, with the
    recorded lifetime)."""
    rec = _recorded_frame(task)
    ttl = _ttl(rec)
    where = placement or ("claude_code_1h" if ttl == "1h" else "claude_code")
    rec_input = rec["input_tokens"] + rec["cache_creation_input_tokens"] + rec["cache_read_input_tokens"]
    if prefix_tokens == "first_call":
        probe = replay(
            task,
            make_policy("as_recorded"),
            config=ReplayConfig(billing=BillingConfig(prefix_tokens=0)),
            session_store=False,
        )
        first_view = int(
            probe.calls["uncached_input_tokens"].iloc[0]
            + probe.calls["cache_write_5m_tokens"].iloc[0]
            + probe.calls["cache_write_1h_tokens"].iloc[0]
            + probe.calls["cache_read_tokens"].iloc[0]
        )
        prefix = max(int(rec_input.iloc[0]) - first_view, 0)
    elif isinstance(prefix_tokens, int) and prefix_tokens >= 0:
        prefix = prefix_tokens
    else:
        raise ConfigError(f"prefix_tokens must be 'first_call' or an integer >= 0, got {prefix_tokens!r}")
    cfg = ReplayConfig(billing=BillingConfig(placement=where, prefix_tokens=prefix), keep_views=True)
    run = replay(task, make_policy("as_recorded"), config=cfg, session_store=False)
    calls = _compare(run.calls, rec, rec_input, prefix, TTL_SECONDS[ttl])
    return BillCheck(
        task_id=task.task_id,
        calls=calls,
        prefix_tokens=prefix,
        ttl=ttl,
        boundaries=_boundaries(task, calls, prefix, ttl),
        compaction_calls=_compaction_calls(task, run, cfg, prefix, where),
    )


def _compare(c: pd.DataFrame, rec: pd.DataFrame, rec_input: pd.Series, prefix: int, ttl_s: float) -> pd.DataFrame:
    import pandas as pd

    write = c["cache_write_5m_tokens"] + c["cache_write_1h_tokens"]
    pred_input = c["uncached_input_tokens"] + write + c["cache_read_tokens"]
    out = pd.DataFrame(
        {
            "call_index": c["call_index"],
            "message_index": c["message_index"],
            "model": c["billed_model"],
            "at_s": c["call_at_s"],
            "compacted": c["compacted"].astype(bool),
            "pred_input": pred_input,
            "pred_read": c["cache_read_tokens"],
            "pred_write": write,
            "rec_input": rec_input.to_numpy(),
            "rec_read": rec["cache_read_input_tokens"].to_numpy(),
            "rec_write": rec["cache_creation_input_tokens"].to_numpy(),
        }
    )
    out["pred_read_share"] = out["pred_read"] / out["pred_input"].where(out["pred_input"] > 0)
    out["rec_read_share"] = out["rec_read"] / out["rec_input"].where(out["rec_input"] > 0)
    out["reason"] = [_reason(out, i, prefix, ttl_s) for i in range(len(out))]
    return out


def _reason(df: pd.DataFrame, i: int, prefix: int, ttl_s: float) -> str:
    """Why call ``i``'s predicted read share differs from the recorded one ("" when it agrees):
    every cause that applies, ``; ``-joined."""
    row = df.iloc[i]
    diff = 100 * (row["pred_read_share"] - row["rec_read_share"])
    if abs(diff) <= DISAGREE_POINTS:
        return ""
    causes: list[str] = []
    gap = row["at_s"] - df["at_s"].iloc[i - 1] if i else 0.0
    info = model_entry(str(row["model"]))
    if i == 0:
        causes.append("first call: the harness prefix was already cached by earlier sessions")
    if i and row["model"] != df["model"].iloc[i - 1]:
        causes.append("model switch: each model has its own cache")
    if row["compacted"]:
        causes.append(
            "the recorded compaction: only the harness system prefix was read, and the record lacks where it ends"
        )
    if i and gap > ttl_s:
        causes.append(f"a {gap:.0f} s pause beyond the {ttl_s:.0f} s lifetime")
    if info is not None and row["pred_input"] < info.min_cacheable_tokens and diff < 0:
        causes.append(
            f"the predicted prompt is below {row['model']}'s {info.min_cacheable_tokens}-token minimum (the record "
            "lacks the harness prefix)"
        )
    if not causes:
        causes.append(
            "recorded rewrote content the transcript shows unchanged (text the record lacks or alters: reminders, "
            "thinking)"
            if diff > 0
            else "recorded read more than predicted (a breakpoint the placement does not model, or the tokenizer)"
        )
    return "; ".join(causes)


def _boundaries(task: Task, calls: pd.DataFrame, prefix: int, ttl: str) -> list[dict[str, Any]]:
    """The call after each recorded compaction, predicted and recorded; ``recorded_rewrite_usd``:
    what the recorded writes of that call cost over reading them (the recorded invalidation)."""
    system_tokens = len(ReplayConfig().system_prompt.encode()) // 4  # the system message the replay prepends
    out: list[dict[str, Any]] = []
    for comp in task.metadata.get("compactions") or []:
        after = calls[calls["message_index"] > comp.get("message_index", -1)]
        if not len(after):
            continue
        row, before = after.iloc[0], calls[calls["message_index"] < comp.get("message_index", -1)]
        before_read = int(before["rec_read"].iloc[-1]) if len(before) else None
        info = model_entry(str(row["model"]))
        pin = float(info.input_usd_per_mtok or 0.0) if info is not None and info.priced else float("nan")
        write_frac = (
            info.cache_write_1h_frac if ttl == "1h" else info.cache_write_5m_frac if info is not None else float("nan")
        )
        frac = write_frac - info.cache_read_frac if info is not None else float("nan")
        out.append(
            {
                "call_index": int(row["call_index"]),
                "trigger": comp.get("trigger"),
                "timestamp": comp.get("timestamp"),
                "pred_read": int(row["pred_read"]),
                "pred_write": int(row["pred_write"]),
                "rec_read": int(row["rec_read"]),
                "rec_write": int(row["rec_write"]),
                "rec_read_before": before_read,
                # a miss: nothing of the transcript read (at most the harness prefix and system message)
                "predicted_miss": bool(row["pred_read"] <= prefix + system_tokens),
                "recorded_miss": bool(before_read is not None and row["rec_read"] < 0.5 * before_read),
                "recorded_rewrite_usd": float(row["rec_write"]) * pin * frac / 1e6,
            }
        )
    return out


def _compaction_calls(task: Task, run: Any, cfg: ReplayConfig, prefix: int, where: str) -> list[dict[str, Any]]:
    """Claude Code's compaction calls, billed in time order with the agent's calls: each sends the
    conversation before its boundary (as the agent sent it) plus its own prompt messages."""
    src = Path(task.source.path) if task.source.path else None
    folder = src.with_suffix("") / "subagents" if src is not None else None
    if folder is None or not folder.is_dir() or run.views is None:
        return []
    comps = [c for c in task.metadata.get("compactions") or [] if c.get("timestamp")]
    rc = task.metadata.get("recorded_calls") or []
    if not comps or not rc or not rc[0].get("timestamp"):
        return []
    start = _seconds(str(rc[0]["timestamp"]))
    system = [] if task.messages and task.messages[0].role == "system" else [Message("system", cfg.system_prompt)]
    reqs: list[tuple[float, int, Request, dict[str, Any] | None]] = []
    bp = placement_named(where)
    for i, row in enumerate(run.calls.itertuples()):
        out = task.messages[int(row.message_index)]
        reqs.append(
            (
                float(row.call_at_s),
                0,
                Request(
                    model=str(row.billed_model),
                    at_s=float(row.call_at_s),
                    messages=run.views[i],
                    prefix_tokens=prefix,
                    output_tokens=out.nbytes // 4,
                    placement=bp,
                ),
                None,
            )
        )
    for f in sorted(folder.glob("agent-acompact-*.jsonl")):
        sub = load_claude_code(f)
        sub_calls = sub.metadata.get("recorded_calls") or []
        if not sub_calls or not sub_calls[0].get("timestamp"):
            continue
        first = sub_calls[0]
        at = _seconds(str(first["timestamp"])) - start
        comp = next((c for c in comps if _seconds(str(c["timestamp"])) - start >= at), None)
        if comp is None:
            continue
        history = [*system, *task.messages[: int(comp["message_index"])]]
        view = make_policy("as_recorded").start().compact(history).view
        prompt = [m for m in sub.messages[: int(first["message_index"])] if m.role == "user"]
        info = {"file": f.name, "model": first.get("model"), "at_s": at, "rec": first}
        reqs.append(
            (
                at,
                1,
                Request(
                    model=str(first.get("model")),
                    at_s=at,
                    messages=[*view, *prompt],
                    prefix_tokens=prefix,
                    placement=bp,
                ),
                info,
            )
        )
    cache = PromptCache()
    out_rows: list[dict[str, Any]] = []
    for _at, _, req, info in sorted(reqs, key=lambda r: (r[0], r[1])):
        bill = cache.bill(req)
        if info is None:
            continue
        rec = info.pop("rec")
        rec_total = sum(
            int(rec.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        out_rows.append(
            {
                **info,
                "pred_read_share": bill.cache_read_tokens / bill.input_tokens if bill.input_tokens else float("nan"),
                "rec_read_share": int(rec.get("cache_read_input_tokens") or 0) / rec_total
                if rec_total
                else float("nan"),
                "pred_read": bill.cache_read_tokens,
                "rec_read": int(rec.get("cache_read_input_tokens") or 0),
                "pred_write": bill.cache_write_tokens,
                "rec_write": int(rec.get("cache_creation_input_tokens") or 0),
            }
        )
    return out_rows


def _seconds(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _session_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(f for f in p.glob("*.jsonl") if not is_compaction_call_file(f)))
        elif p.exists():
            files.append(p)
        else:
            raise ConfigError(f"{p}: no such file or folder; expected Claude Code session files (.jsonl)")
    return files


def check_bill_files(
    paths: Sequence[str | os.PathLike[str]], *, prefix_tokens: int | str = "first_call", placement: str | None = None
) -> list[BillCheck]:
    """:func:`check_bills` on every Claude Code session file in ``paths`` (folders: their
    ``*.jsonl`` files, Claude Code's own compaction calls left out)."""
    return [
        check_bills(load_claude_code(f), prefix_tokens=prefix_tokens, placement=placement)
        for f in _session_files(paths)
    ]
