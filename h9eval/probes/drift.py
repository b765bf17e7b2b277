"""Drift: probe a compacted view against the task's ground truth and the uncompacted history.

One row per (checkpoint, probe, method, scope) with the columns in :data:`PROBE_COLUMNS`.
``baseline_score`` is the same probe's score on the uncompacted history
``task.messages[:message_index + 1]`` (scope ``view``); for ``recall`` it is 1.0 by construction
for answerable probes (only terms seen in the history are probed). :func:`drift_table` adds
``retention = score / baseline_score`` (NaN for unanswerable probes or a zero baseline; may
exceed 1 for the semantic and llm scorers, whose baselines are measurements too).

``passed`` is ``score >= PASS_THRESHOLD`` (0.5): for recall, at least half of the probe's key
terms (facts: the answer) still present; for the llm judge, a "yes"; for next actions, the
recorded tool name; for semantic, a cosine of 0.5 (a rough cut, see
:mod:`h9eval.probes.semantic`). Unanswerable probes get one row per scorer and scope with
``answerable=False``, ``score`` NaN and ``passed=False``, and are excluded from every
aggregate: they are not lost, they were never there.

Validity flags: ``answer_pinned`` (the answer sits in the system or first task message, so the
row measures pinning, not memory) and, when :func:`probe_view` is given a placebo table
(:mod:`h9eval.probes.placebo`), ``placebo_rate`` and ``placebo_excluded`` (the probe passes
against unrelated histories too often to mean anything); :func:`summarize_drift` leaves
excluded rows out and counts both.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from h9eval.compaction.anchors import Anchor, is_no_information
from h9eval.compaction.records import CompactionRecord, Tier
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.probes.probe import PASS_THRESHOLD, PROBE_KINDS, Probe, next_action_probe, probes_for
from h9eval.probes.placebo import placebo_lookup
from h9eval.probes.scorers import ProbeInput, resolve_scorers
from h9eval.results.schema import PROBE_COLUMNS, PROBE_SCHEMA_VERSION, READABLE_VERSIONS
from h9eval.tasks.model import Task
from h9eval.tasks.text import ViewTexts
from h9eval.core.tokens import estimate_tokens

__all__ = [
    "DRIFT_COLUMNS",
    "SUMMARY_COLUMNS",
    "Checkpoint",
    "checkpoint_grid",
    "DEFAULT_MAX_PROBES",
    "estimated_probes",
    "check_probe_budget",
    "checkpoints",
    "probe_view",
    "probe_checkpoints",
    "drift_table",
    "summarize_drift",
    "anchor_overwrites",
    "count_anchor_overwrites",
]

_READABLE_VERSIONS = set(READABLE_VERSIONS["probes"])
_V2_DEFAULTS: dict[str, Any] = {"answer_pinned": False, "placebo_rate": float("nan"), "placebo_excluded": False}


"""Columns of a :func:`probe_view` row, in order.

``checkpoint_call_index``: the replay's call index (0-based model call) the view was sent at.
``message_index``: last transcript message the view covers (inclusive). ``n_compactions``:
compactions performed up to and including this call (``None`` when the caller did not say).
``tier_at_checkpoint``: the tier label (``none``, ``warn``, ``soft``, ``full``, ``emergency``)
or ``None``. ``tokens_at_checkpoint``: tokens of the view (default: harness9's estimate).
``method``: ``recall``, ``semantic``, ``llm``, ``llm_exact``. ``scope``: ``view`` or
``anchors``. ``score``/``baseline_score``: [0, 1] or NaN. ``answer_pinned``: the answer is
in the system message or the first task message (see :mod:`h9eval.probes.probe`): such rows
measure pinning, not memory. ``placebo_rate``: fraction of unrelated histories the probe
passes against (:mod:`h9eval.probes.placebo`; NaN when no placebo table was given);
``placebo_excluded``: that rate exceeds the placebo threshold, so aggregates leave the row out.
``after_compaction``: the policy had compacted at least once by this call (``None`` when
unknown): the conditional view, never mixed into the main number.
"""

DRIFT_COLUMNS: tuple[str, ...] = PROBE_COLUMNS + ("retention",)
"""Columns of :func:`drift_table`."""

SUMMARY_COLUMNS: tuple[str, ...] = (
    "run_id",
    "task_id",
    "method",
    "scope",
    "n_checkpoints",
    "n_observations",
    "mean_retention",
    *(f"retention_{k}" for k in PROBE_KINDS),
    "intent_lost_at_call",
    "intent_lost_after_compaction",
    "n_anchor_overwrites",
    "n_placebo_excluded",
    "n_answer_pinned",
    "mean_retention_unpinned",
)
"""Columns of :func:`summarize_drift`."""


# -- checkpoints -------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """A replay call chosen for probing.

    ``call_index``: the replay's 0-based model-call index. ``message_index``: last transcript
    message the view covers (inclusive). ``tier``: the compaction tier of that call.
    ``tokens``: tokens of the view (``None`` = unknown). ``view``: the messages sent.
    ``n_compactions``: compactions up to and including this call. ``reasons``: why it was
    chosen (``compaction``, ``every_k``, ``end``).
    """

    call_index: int
    message_index: int
    tier: Tier
    tokens: int | None
    view: tuple[Message, ...]
    n_compactions: int
    reasons: tuple[str, ...]


_ROW_FIELDS = ("call_index", "message_index", "tier", "tokens", "view")


def _row(r: Any, i: int) -> dict[str, Any]:
    if isinstance(r, Mapping):
        missing = [k for k in _ROW_FIELDS if k not in r]
        if missing:
            raise ConfigError(
                f"call row {i} lacks {', '.join(repr(k) for k in missing)} (expected keys {', '.join(_ROW_FIELDS)})"
            )
        d = {k: r[k] for k in _ROW_FIELDS}
        d["compacted"] = r.get("compacted")
        return d
    if isinstance(r, Sequence) and not isinstance(r, str) and len(r) == 5:
        return {**dict(zip(_ROW_FIELDS, r)), "compacted": None}
    raise ConfigError(
        f"call row {i} must be a mapping with keys {', '.join(_ROW_FIELDS)} or a 5-tuple in that order, got "
        f"{type(r).__name__}"
    )


def _tier(v: Any) -> Tier:
    if isinstance(v, Tier):
        return v
    if v is None:
        return Tier.NONE
    try:
        return Tier.parse(v)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def checkpoint_grid(n_calls: int, every_k: int | None) -> tuple[int, ...]:
    """The calls a task is probed at, whatever the policy: every ``every_k``-th call on the
    task's own call index (0-based indices ``k-1, 2k-1, ...``; ``None`` = none) plus its last
    call. A function of the task alone, so every policy is scored at the same moments; a
    checkpoint chosen by a policy's own compactions would compare each policy at different
    moments (a policy that compacts often is probed often, right after it dropped things)."""
    if every_k is not None and (isinstance(every_k, bool) or not isinstance(every_k, int) or every_k < 1):
        raise ConfigError(f"every_k must be >= 1 calls (or None), got {every_k!r}")
    if n_calls <= 0:
        return ()
    grid = set(range(every_k - 1, n_calls, every_k)) if every_k is not None else set()
    grid.add(n_calls - 1)
    return tuple(sorted(grid))


DEFAULT_MAX_PROBES = 100_000
"""The most probes (probe x checkpoint) one run scores unless ``max_probes`` raises it."""


def estimated_probes(task: Task, grid: Sequence[int]) -> int:
    """About how many probes scoring ``task`` at the calls ``grid`` means: at each checkpoint
    the facts and anchor items established by then, the intent, the original key terms and
    the next action (an upper bound of what :func:`probes_for` returns). With a fixed
    ``every_k`` this grows with the square of the session's length."""
    return _ProbeCount(task).at(grid)


class _ProbeCount:
    """What :func:`estimated_probes` needs of a task, read once for any number of grids."""

    def __init__(self, task: Task) -> None:
        self.assistants = [i for i, m in enumerate(task.messages) if m.role == "assistant"]
        self.born = sorted([f.message_index for f in task.facts] + [a.message_index for a in task.anchors])

    def at(self, grid: Sequence[int]) -> int:
        a, born = self.assistants, self.born
        return sum(3 + bisect_right(born, a[c] - 1) for c in grid if c < len(a))


def check_probe_budget(task: Task, every_k: int | None, max_probes: int = DEFAULT_MAX_PROBES) -> None:
    """Refuse, before any work, a probe grid that would score more than ``max_probes`` probes
    (a 5,000-call task probed every 10 calls is about a million), naming a ``probe_every_k``
    that fits."""
    if isinstance(max_probes, bool) or not isinstance(max_probes, int) or max_probes < 1:
        raise ConfigError(f"max_probes must be an integer >= 1, got {max_probes!r}")
    count = _ProbeCount(task)
    n_calls = len(count.assistants)
    grid = checkpoint_grid(n_calls, every_k)
    n = count.at(grid)
    if n <= max_probes:
        return
    k = every_k or 1
    while k < n_calls and count.at(checkpoint_grid(n_calls, k)) > max_probes:
        k *= 2
    raise ConfigError(
        f"probing task {task.task_id!r} ({n_calls:,} calls) at {len(grid):,} checkpoints scores about {n:,} probes, "
        "above "
        f"max_probes={max_probes:,} (the count grows with the square of the session's length): probe every {k} calls "
        "(probe_every_k, --probe-every) or raise the limit (max_probes, --max-probes)"
    )


def checkpoints(
    call_rows: Sequence[Any],
    every_k: int | None = None,
    after_compaction: bool = False,
    at_end: bool = True,
) -> list[Checkpoint]:
    """Pick the calls to probe (by default :func:`checkpoint_grid`'s, shared by every policy).

    ``call_rows``: one per replayed model call, in call order: a mapping with keys
    ``call_index``, ``message_index`` (last transcript message the view covers), ``tier``
    (:class:`Tier`, its int or label), ``tokens`` (int or ``None``) and ``view`` (the messages
    sent), optionally ``compacted`` (bool), or a 5-tuple in that order. A call counts as a
    compaction when ``compacted`` is true or, when absent, its tier is not ``none``.
    ``every_k``: every k-th call by call index (indices k-1, 2k-1, ...; default ``None`` = off).
    ``after_compaction``: also every call that compacted (default False: those moments differ
    per policy, so scores there are not comparable across policies). ``at_end``: the last call
    (default True).
    """
    if every_k is not None and every_k < 1:
        raise ConfigError(f"every_k must be >= 1 calls (or None), got {every_k!r}")
    rows = [_row(r, i) for i, r in enumerate(call_rows)]
    out: list[Checkpoint] = []
    n_comp = 0
    for i, r in enumerate(rows):
        tier = _tier(r["tier"])
        compacted = bool(r["compacted"]) if r["compacted"] is not None else tier != Tier.NONE
        n_comp += compacted
        reasons = []
        if after_compaction and compacted:
            reasons.append("compaction")
        if every_k is not None and (int(r["call_index"]) + 1) % every_k == 0:
            reasons.append("every_k")
        if at_end and i == len(rows) - 1:
            reasons.append("end")
        if reasons:
            out.append(
                Checkpoint(
                    call_index=int(r["call_index"]),
                    message_index=int(r["message_index"]),
                    tier=tier,
                    tokens=None if r["tokens"] is None else int(r["tokens"]),
                    view=tuple(r["view"]),
                    n_compactions=n_comp,
                    reasons=tuple(reasons),
                )
            )
    return out


# -- probing -----------------------------------------------------------------------------------
def _tool_names(task: Task) -> tuple[str, ...]:
    names = []
    for t in task.tools:
        n = t.get("name") or (t.get("function") or {}).get("name")
        if isinstance(n, str):
            names.append(n)
    return tuple(dict.fromkeys(names))


def probe_view(
    task: Task,
    view: Sequence[Message],
    message_index: int,
    *,
    scorers: Sequence[str | Any] | str | Any = ("recall",),
    checkpoint: int = -1,
    run_id: str = "",
    tier: Tier | int | str | None = None,
    tokens: int | None = None,
    n_compactions: int | None = None,
    baseline: bool = True,
    next_action: bool | None = None,
    probes: Sequence[Probe] | None = None,
    placebo: Any = None,
    views: ViewTexts | None = None,
) -> list[dict[str, Any]]:
    """Score ``view`` (the messages sent at one call) against ``task``'s probes.

    ``message_index``: last transcript message the view covers (inclusive; the view sent at the
    call whose output is message ``m`` covers ``m - 1``). ``scorers``: names or scorer objects
    (default ``("recall",)``). ``checkpoint``: the replay call index (default -1 = unknown).
    ``run_id``/``tier``/``tokens``/``n_compactions``: copied into the rows; ``tokens`` defaults
    to harness9's estimate of ``view``. ``baseline``: also score the uncompacted history for
    scorers whose baseline is not 1.0 by construction (default True; for llm that doubles the
    API calls). ``next_action``: add the recorded next tool call as a probe (default ``None`` =
    for recorded tasks when a scorer handles it). ``probes``: override :func:`probes_for`.
    ``placebo``: placebo results or table (:func:`h9eval.probes.placebo.placebo_lookup`) to
    fill ``placebo_rate``/``placebo_excluded`` (default ``None``: NaN / False). ``views``: a
    :class:`~h9eval.tasks.text.ViewTexts` shared by the checkpoints of one replay, so each view
    is searched only where it differs from the views before it (same rows; default ``None``).
    Returns rows with the keys of :data:`PROBE_COLUMNS`.
    """
    if not 0 <= message_index < len(task.messages):
        raise ConfigError(
            f"message_index must be in [0, {len(task.messages) - 1}] for task {task.task_id!r}, got {message_index!r}"
        )
    objs = resolve_scorers(scorers)
    plist = list(probes) if probes is not None else probes_for(task, message_index)
    if next_action is None:
        next_action = task.source.kind == "recorded" and any(getattr(s, "handles_next_action", False) for s in objs)
    if next_action:
        na = next_action_probe(task, message_index)
        if na is not None:
            plist.append(na)
    live = [p for p in plist if p.answerable]
    tool_names = _tool_names(task)
    tags = {
        "task_id": task.task_id,
        "run_id": run_id,
        "checkpoint_call_index": int(checkpoint),
        "message_index": int(message_index),
    }
    inp = ProbeInput(tuple(view), tool_names=tool_names, tags={**tags, "context": "view"}, views=views)
    hist: ProbeInput | None = None
    tier_label = None if tier is None else _tier(tier).label
    n_tokens = estimate_tokens(view) if tokens is None else int(tokens)
    base_row = {
        "schema_version": PROBE_SCHEMA_VERSION,
        "run_id": run_id,
        "task_id": task.task_id,
        "checkpoint_call_index": int(checkpoint),
        "message_index": int(message_index),
        "n_compactions": n_compactions,
        "tier_at_checkpoint": tier_label,
        "tokens_at_checkpoint": n_tokens,
    }
    after = None if n_compactions is None else bool(n_compactions > 0)
    rows: list[dict[str, Any]] = []
    nan = float("nan")
    if placebo is not None:
        look = placebo_lookup(placebo)
    else:
        look = {}

    def flags(p: Probe) -> dict[str, Any]:
        rate, excluded = look.get((task.task_id, p.probe_id), (nan, False))
        return {"answer_pinned": bool(p.answer_pinned), "placebo_rate": rate, "placebo_excluded": excluded}

    for s in objs:
        base: dict[str, list[float | None]] | None = None
        if s.baseline_is_one:
            base = {m: [1.0] * len(live) for m in s.methods}
        elif baseline and live:
            if hist is None:
                hist = ProbeInput(
                    tuple(task.messages[: message_index + 1]),
                    tool_names=tool_names,
                    tags={**tags, "context": "history"},
                )
            # The uncompacted history has no compaction message: its "anchors" are the whole
            # history, so every scope's baseline is the history's view score.
            base = s.score(live, hist, "view")
        for scope in s.scopes:
            res = s.score(live, inp, scope) if live else {}
            for method, scores in res.items():
                bl = base.get(method) if base is not None else None
                for j, (p, sc) in enumerate(zip(live, scores, strict=True)):
                    if sc is None:
                        continue
                    b = bl[j] if bl is not None else None
                    rows.append(
                        {
                            **base_row,
                            "probe_id": p.probe_id,
                            "probe_kind": p.kind,
                            "method": method,
                            "scope": scope,
                            "score": float(sc),
                            "baseline_score": nan if b is None else float(b),
                            "passed": bool(sc >= PASS_THRESHOLD),
                            "answerable": True,
                            **flags(p),
                            "after_compaction": after,
                        }
                    )
            for p in plist:
                if not p.answerable:
                    rows.append(
                        {
                            **base_row,
                            "probe_id": p.probe_id,
                            "probe_kind": p.kind,
                            "method": s.methods[0],
                            "scope": scope,
                            "score": nan,
                            "baseline_score": nan,
                            "passed": False,
                            "answerable": False,
                            **flags(p),
                            "after_compaction": after,
                        }
                    )
    return rows


def probe_checkpoints(
    task: Task,
    call_rows: Sequence[Any],
    *,
    every_k: int | None = None,
    after_compaction: bool = True,
    at_end: bool = True,
    run_id: str = "",
    **kw: Any,
) -> list[dict[str, Any]]:
    """:func:`checkpoints` then :func:`probe_view` at each; ``kw`` goes to :func:`probe_view`
    (``scorers``, ``baseline``, ``next_action``). Scorers named by string are built once."""
    if "scorers" in kw:
        kw["scorers"] = resolve_scorers(kw["scorers"])
    kw.setdefault("views", ViewTexts())
    rows: list[dict[str, Any]] = []
    for cp in checkpoints(call_rows, every_k=every_k, after_compaction=after_compaction, at_end=at_end):
        rows.extend(
            probe_view(
                task,
                cp.view,
                cp.message_index,
                checkpoint=cp.call_index,
                run_id=run_id,
                tier=cp.tier,
                tokens=cp.tokens,
                n_compactions=cp.n_compactions,
                **kw,
            )
        )
    return rows


# -- tables ------------------------------------------------------------------------------------
def drift_table(rows: Iterable[Mapping[str, Any]] | Any) -> Any:
    """Rows (dicts or a DataFrame) → a pandas DataFrame with :data:`DRIFT_COLUMNS`.

    ``retention`` = ``score / baseline_score`` for answerable rows with a positive baseline,
    else NaN. ``df.attrs["schema_version"]`` is set to :data:`PROBE_SCHEMA_VERSION`.
    """
    import numpy as np
    import pandas as pd

    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if "schema_version" in df.columns:
        versions = set(df["schema_version"].dropna().unique().tolist())
        if versions - _READABLE_VERSIONS:
            raise ConfigError(
                f"probe rows have schema_version {sorted(versions)}; this h9eval reads {sorted(_READABLE_VERSIONS)}"
            )
        if 1 in versions:
            for c, v in _V2_DEFAULTS.items():
                if c not in df.columns:
                    df[c] = v
            df["schema_version"] = PROBE_SCHEMA_VERSION
    if not len(df.columns):
        df = pd.DataFrame(columns=list(PROBE_COLUMNS))
    if "after_compaction" not in df.columns and "n_compactions" in df.columns:
        # rows written before the column existed: derived from what they do say
        df["after_compaction"] = [None if pd.isna(n) else bool(n > 0) for n in df["n_compactions"]]
    missing = [c for c in PROBE_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(f"probe rows lack columns {', '.join(missing)} (expected PROBE_COLUMNS)")
    score = df["score"].astype(float)
    base = df["baseline_score"].astype(float)
    ok = df["answerable"].astype(bool) & (base > 0)
    df["retention"] = np.where(ok, score / base.where(base > 0, 1.0), np.nan)
    df = df[list(DRIFT_COLUMNS)]
    df.attrs["schema_version"] = PROBE_SCHEMA_VERSION
    return df


def _anchor_map(rec: Any) -> dict[str, str] | None:
    if isinstance(rec, Mapping):
        anchors = rec.get("anchors")
    elif isinstance(rec, CompactionRecord):
        anchors = rec.anchors
    else:
        anchors = rec  # a plain anchor list
    if anchors is None:
        return None
    out: dict[str, str] = {}
    for a in anchors:
        if isinstance(a, Mapping):
            out[str(a["type"])] = str(a["content"])
        elif isinstance(a, Anchor):
            out[str(a.type)] = str(a.content)
        else:
            t, c = a
            out[str(t)] = str(c)
    return out


def anchor_overwrites(records: Sequence[Any]) -> list[tuple[int, str]]:
    """``(record position, anchor type)`` for each known anchor wiped by a merge.

    ``records``: compaction records in order (:class:`CompactionRecord`, record dicts, or plain
    anchor lists). A record without anchors (a fallback) is skipped. Between consecutive
    records with anchors, an anchor whose previous content carried information and whose new
    content is ``N/A``, ``- N/A``, empty or absent counts once.
    """
    out: list[tuple[int, str]] = []
    prev: dict[str, str] | None = None
    for i, rec in enumerate(records):
        cur = _anchor_map(rec)
        if cur is None:
            continue
        if prev is not None:
            for typ, old in prev.items():
                if not is_no_information(old) and is_no_information(cur.get(typ, "")):
                    out.append((i, typ))
        prev = cur
    return out


def count_anchor_overwrites(records: Sequence[Any]) -> int:
    """``len(anchor_overwrites(records))``."""
    return len(anchor_overwrites(records))


def summarize_drift(df: Any, records: Mapping[str, Sequence[Any]] | None = None) -> Any:
    """One row per (run_id, task_id, method, scope) with :data:`SUMMARY_COLUMNS`.

    ``df``: a :func:`drift_table` (or rows; converted). ``mean_retention`` and
    ``retention_<kind>``: means of ``retention`` over answerable rows that the placebo control
    did not exclude (NaN when none); ``n_placebo_excluded``: answerable rows it excluded;
    ``n_answer_pinned``: answerable, kept rows whose answer is pinned;
    ``mean_retention_unpinned``: the mean over the kept rows that are not pinned.
    ``intent_lost_at_call``: the first checkpoint (by call index) at which the intent probe was
    answerable and not passed; ``intent_lost_after_compaction``: ``n_compactions`` at that
    checkpoint, i.e. intent was first lost after that many compactions (NaN: never lost or
    unknown). ``n_anchor_overwrites``: :func:`count_anchor_overwrites` of ``records[run_id]``
    (NaN when ``records`` lacks the run).
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame) or "retention" not in df.columns:
        df = drift_table(df)
    out: list[dict[str, Any]] = []
    nan = float("nan")
    for (run_id, task_id, method, scope), g in df.groupby(
        ["run_id", "task_id", "method", "scope"], sort=True, dropna=False
    ):
        ans = g[g["answerable"].astype(bool)]
        excl = ans["placebo_excluded"].fillna(False).astype(bool)
        a = ans[~excl]
        pinned = a["answer_pinned"].fillna(False).astype(bool)
        unpinned = a.loc[~pinned, "retention"]
        row: dict[str, Any] = {
            "run_id": run_id,
            "task_id": task_id,
            "method": method,
            "scope": scope,
            "n_checkpoints": int(g["checkpoint_call_index"].nunique()),
            "n_observations": int(len(a)),
            "mean_retention": float(a["retention"].mean()) if len(a) else nan,
        }
        for k in PROBE_KINDS:
            r = a.loc[a["probe_kind"] == k, "retention"]
            row[f"retention_{k}"] = float(r.mean()) if len(r) else nan
        intent = a[a["probe_kind"] == "intent"].sort_values("checkpoint_call_index", kind="stable")
        lost = intent[~intent["passed"].astype(bool)]
        if len(lost):
            first = lost.iloc[0]
            row["intent_lost_at_call"] = int(first["checkpoint_call_index"])
            nc = first["n_compactions"]
            row["intent_lost_after_compaction"] = (
                nan if nc is None or (isinstance(nc, float) and math.isnan(nc)) else int(nc)
            )
        else:
            row["intent_lost_at_call"] = nan
            row["intent_lost_after_compaction"] = nan
        recs = records.get(run_id) if records is not None else None
        row["n_anchor_overwrites"] = count_anchor_overwrites(recs) if recs is not None else nan
        row["n_placebo_excluded"] = int(excl.sum())
        row["n_answer_pinned"] = int(pinned.sum())
        row["mean_retention_unpinned"] = float(unpinned.mean()) if len(unpinned) else nan
        out.append(row)
    res = pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))
    res.attrs["schema_version"] = PROBE_SCHEMA_VERSION
    return res
