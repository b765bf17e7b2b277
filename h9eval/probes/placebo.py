"""Placebo control: how often does a probe pass against a history that is not its task's?

Every probe of a task is scored against the *full* uncompacted history of a few unrelated
tasks (its *partners*). A probe that passes there measures coincidence, not memory: a generic
error name (``TypeError``), a number any session prints, a template phrase every synthetic
task shares. Its *placebo rate* is the fraction of partners it passes against; a probe whose
rate exceeds the tolerated false-pass rate :data:`PLACEBO_FALSE_PASS_RATE` is *excluded* (rows
keep it, flagged, so reports can count it; every retention aggregate leaves it out).

In a sweep (:func:`sweep_placebo`) every task is scored against *every* task of another family
the sweep offers, and when fewer than :data:`DEFAULT_PLACEBO_PARTNERS` exist, against generated
synthetic tasks (:func:`synthetic_partners`) until it has that many: with 8 partners one chance
pass is a rate of 0.125, above the tolerated 0.10, so the threshold can tell a probe that passes
by chance one time in eight from one that does not.

Pairing (:func:`placebo_partners`) is deterministic: tasks sorted by id, one
``random.Random(seed)`` draws up to ``n_partners`` partners per task among the tasks of other
families (:func:`task_family`: a Claude Code subagent belongs to its parent session, synthetic
tasks with the same seed share their world). The probes of a task (:func:`lifetime_probes`)
are every distinct probe it has at some checkpoint, marked answerable and pinned against its
own full history, as in :func:`h9eval.probes.probe.probes_for`.

Scoring uses a scorer's ``view`` scope on the partner's history; the default is the offline
``recall`` scorer (method ``recall``, ``passed = score >= PASS_THRESHOLD``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from h9eval.core.errors import ConfigError
from h9eval.probes.probe import (
    PASS_THRESHOLD,
    Probe,
    history_index,
    mark_answerable,
    mark_pinned,
    pinned_indexes,
    probes_for,
)
from h9eval.probes.scorers import ProbeInput, resolve_scorers
from h9eval.tasks.model import Task
from h9eval.tasks.synthetic import generate

__all__ = [
    "PLACEBO_MAX_PASS_RATE",
    "DEFAULT_PLACEBO_PARTNERS",
    "PLACEBO_COLUMNS",
    "PLACEBO_KIND_COLUMNS",
    "PlaceboResult",
    "task_family",
    "PLACEBO_FALSE_PASS_RATE",
    "SYNTHETIC_PARTNER_SEED",
    "synthetic_partners",
    "placebo_excluded",
    "sweep_placebo",
    "placebo_partners",
    "lifetime_probes",
    "placebo_results",
    "placebo_table",
    "placebo_by_kind",
    "placebo_lookup",
    "with_placebo",
]

PLACEBO_FALSE_PASS_RATE = 0.10
"""The false-pass rate a probe counted in retention may have: it must fail against at least 90 %
of unrelated histories. Chosen so that a probe contributes at most 0.10 of chance to any
retention; with at least 8 partners a single chance pass (1/8 = 0.125) exceeds it."""

PLACEBO_MAX_PASS_RATE = PLACEBO_FALSE_PASS_RATE
"""A probe whose placebo rate exceeds this is excluded (the stated false-pass rate)."""

DEFAULT_PLACEBO_PARTNERS = 8
"""Unrelated tasks each task's probes are scored against at least (synthetic partners fill the
gap in :func:`sweep_placebo`; :func:`placebo_partners` draws this many when it can)."""

SYNTHETIC_PARTNER_SEED = 910_000
"""First seed of the generated synthetic partners (far from the seeds a sweep names, and a
partner of the task's own family is never used)."""

PLACEBO_COLUMNS: tuple[str, ...] = (
    "task_id",
    "probe_id",
    "probe_kind",
    "method",
    "answer_pinned",
    "n_partners",
    "n_passed",
    "placebo_rate",
    "excluded",
)
"""Columns of :func:`placebo_table` (one row per task and probe)."""

PLACEBO_KIND_COLUMNS: tuple[str, ...] = (
    "probe_kind",
    "n_probes",
    "n_observations",
    "placebo_rate",
    "n_excluded",
    "excluded_frac",
)
"""Columns of :func:`placebo_by_kind`."""


@dataclass(frozen=True, kw_only=True)
class PlaceboResult:
    """One probe's placebo control.

    ``n_partners``: unrelated histories it was scored against; ``n_passed``: how many it
    passed; ``placebo_rate``: ``n_passed / n_partners`` (NaN without partners); ``excluded``:
    ``placebo_rate > max_pass_rate``; ``partners``: the partners' task ids, in draw order.
    """

    task_id: str
    probe_id: str
    probe_kind: str
    method: str
    answer_pinned: bool
    n_partners: int
    n_passed: int
    placebo_rate: float
    excluded: bool
    partners: tuple[str, ...] = ()


def task_family(task: Task) -> str:
    """Tasks of one family share content and are never each other's placebo.

    Synthetic: ``synthetic:<seed>`` (the seed fixes the fictional repository, whatever the
    preset). Others: the task id up to its first ``/`` (a Claude Code subagent transcript and
    its parent session).
    """
    if task.source.kind == "synthetic" and task.source.seed is not None:
        return f"synthetic:{task.source.seed}"
    return task.task_id.split("/", 1)[0]


def placebo_partners(
    tasks: Sequence[Task], *, seed: int = 0, n_partners: int = DEFAULT_PLACEBO_PARTNERS
) -> dict[str, tuple[str, ...]]:
    """Task id -> its partners' ids (see the module docstring); deterministic in ``seed``."""
    if n_partners < 1:
        raise ConfigError(f"n_partners must be >= 1 tasks, got {n_partners!r}")
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(f"placebo tasks must have distinct task ids; {dup!r} is given twice")
    ordered = sorted(tasks, key=lambda t: t.task_id)
    fam = {t.task_id: task_family(t) for t in ordered}
    rng = random.Random(seed)
    out: dict[str, tuple[str, ...]] = {}
    for t in ordered:
        pool = [o.task_id for o in ordered if fam[o.task_id] != fam[t.task_id]]
        out[t.task_id] = tuple(rng.sample(pool, min(n_partners, len(pool))))
    return out


def lifetime_probes(task: Task) -> list[Probe]:
    """Every distinct probe ``task`` has at some checkpoint (first occurrence of each
    ``probe_id``), answerable against the full history; unanswerable ones are left out."""
    last = len(task.messages) - 1
    if last < 0:
        return []
    points = {0, last}
    points.update(a.message_index for a in task.anchors)
    points.update(f.message_index for f in task.facts)
    points.update(c.message_index for c in task.intent.changes)
    seen: dict[str, Probe] = {}
    for i in sorted(p for p in points if 0 <= p <= last):
        for p in probes_for(task, i, check_answerable=False):
            seen.setdefault(p.probe_id, p)
    hist = history_index(task, last)
    system, pinned = pinned_indexes(task)
    marked = [mark_pinned(mark_answerable(p, hist), system, pinned) for p in seen.values()]
    return [p for p in marked if p.answerable]


def placebo_excluded(n_passed: int, n_partners: int, *, max_pass_rate: float = PLACEBO_MAX_PASS_RATE) -> bool:
    """Whether a probe that passed against ``n_passed`` of ``n_partners`` unrelated histories is
    excluded: its rate exceeds the tolerated false-pass rate (never without partners)."""
    return n_partners > 0 and n_passed / n_partners > max_pass_rate


def synthetic_partners(n: int, *, avoid_families: Sequence[str] = (), preset: str = "small") -> list[Task]:
    """``n`` generated synthetic tasks to serve as placebo partners (seeds from
    :data:`SYNTHETIC_PARTNER_SEED` up, skipping any family in ``avoid_families``)."""
    out: list[Task] = []
    seed = SYNTHETIC_PARTNER_SEED
    while len(out) < n:
        if f"synthetic:{seed}" not in avoid_families:
            out.append(generate(preset, seed=seed))
        seed += 1
    return out


def placebo_results(
    tasks: Sequence[Task],
    *,
    seed: int = 0,
    n_partners: int = DEFAULT_PLACEBO_PARTNERS,
    scorer: str | Any = "recall",
    max_pass_rate: float = PLACEBO_MAX_PASS_RATE,
    partners: Mapping[str, Sequence[str]] | None = None,
    extra: Sequence[Task] = (),
) -> list[PlaceboResult]:
    """Placebo rate of every probe of every task (order: task id, then probe order).

    ``seed``/``n_partners``: the pairing (:func:`placebo_partners`), unless ``partners`` gives
    it (task id -> partner ids, among ``tasks`` and ``extra``: histories that are partners
    only, never scored themselves). ``scorer``: a scorer name or object; its first method is
    used, on scope ``view`` (default ``recall``). ``max_pass_rate``: the exclusion threshold
    (default :data:`PLACEBO_MAX_PASS_RATE`).
    """

    if not 0.0 <= max_pass_rate <= 1.0:
        raise ConfigError(f"max_pass_rate must be in [0, 1], got {max_pass_rate!r}")
    (sc,) = resolve_scorers([scorer])
    method = sc.methods[0]
    if partners is None:
        partners = placebo_partners(tasks, seed=seed, n_partners=n_partners)
    by_id = {t.task_id: t for t in tasks}
    histories = {**{t.task_id: t for t in extra}, **by_id}
    inputs: dict[str, ProbeInput] = {}

    def history(tid: str) -> ProbeInput:
        if tid not in inputs:
            inputs[tid] = ProbeInput(tuple(histories[tid].messages))
        return inputs[tid]

    out: list[PlaceboResult] = []
    for tid in sorted(by_id):
        probes = [p for p in lifetime_probes(by_id[tid]) if p.kind != "next_action"]
        passed = [0] * len(probes)
        mine = tuple(partners.get(tid, ()))
        for other in mine:
            scores = sc.score(probes, history(other), "view").get(method, [None] * len(probes)) if probes else []
            for j, s in enumerate(scores):
                passed[j] += s is not None and s >= PASS_THRESHOLD
        n = len(mine)
        for p, k in zip(probes, passed, strict=True):
            rate = k / n if n else math.nan
            out.append(
                PlaceboResult(
                    task_id=tid,
                    probe_id=p.probe_id,
                    probe_kind=p.kind,
                    method=method,
                    answer_pinned=p.answer_pinned,
                    n_partners=n,
                    n_passed=k,
                    placebo_rate=rate,
                    excluded=placebo_excluded(k, n, max_pass_rate=max_pass_rate),
                    partners=mine,
                )
            )
    return out


def sweep_placebo(
    tasks: Sequence[Task],
    *,
    min_partners: int = DEFAULT_PLACEBO_PARTNERS,
    scorer: str | Any = "recall",
    max_pass_rate: float = PLACEBO_MAX_PASS_RATE,
) -> list[PlaceboResult]:
    """The placebo control of a sweep (or a single run): every task's probes against every
    task of another family among ``tasks`` (as many as the sweep offers), and against generated
    synthetic tasks (:func:`synthetic_partners`) when that gives fewer than ``min_partners``.
    Deterministic: no draw is involved."""
    if min_partners < 1:
        raise ConfigError(f"min_partners must be >= 1 tasks, got {min_partners!r}")
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConfigError(f"placebo tasks must have distinct task ids; {dup!r} is given twice")
    ordered = sorted(tasks, key=lambda t: t.task_id)
    fam = {t.task_id: task_family(t) for t in ordered}
    pools = {t.task_id: [o.task_id for o in ordered if fam[o.task_id] != fam[t.task_id]] for t in ordered}
    short = max((min_partners - len(p) for p in pools.values()), default=0)
    extra = synthetic_partners(short, avoid_families=sorted(set(fam.values()))) if short > 0 else []
    partners: dict[str, tuple[str, ...]] = {}
    for tid, pool in pools.items():
        fill = [e.task_id for e in extra if e.task_id not in fam][: max(0, min_partners - len(pool))]
        partners[tid] = (*pool, *fill)
    return placebo_results(tasks, partners=partners, extra=extra, scorer=scorer, max_pass_rate=max_pass_rate)


def placebo_table(results: Iterable[PlaceboResult] | Sequence[Task], **kw: Any) -> Any:
    """A DataFrame with :data:`PLACEBO_COLUMNS`: from results, or from tasks (then ``kw`` goes
    to :func:`placebo_results`)."""
    import pandas as pd

    given = list(results)
    items: list[PlaceboResult] = (
        placebo_results([t for t in given if isinstance(t, Task)], **kw)
        if given and isinstance(given[0], Task)
        else [r for r in given if isinstance(r, PlaceboResult)]
    )
    if len(items) != len(given) and not (given and isinstance(given[0], Task)):
        raise ConfigError("placebo_table takes PlaceboResult items or Task items, not a mix")
    rows = [{k: v for k, v in asdict(r).items() if k in PLACEBO_COLUMNS} for r in items]
    return pd.DataFrame(rows, columns=list(PLACEBO_COLUMNS))


def placebo_by_kind(table: Any) -> Any:
    """Per probe kind: ``n_probes``, ``n_observations`` (probe x partner scorings), the pooled
    ``placebo_rate`` (passes / observations), ``n_excluded`` and ``excluded_frac``."""
    import pandas as pd

    if not isinstance(table, pd.DataFrame):
        table = placebo_table(table)
    rows = []
    for kind, g in table.groupby("probe_kind", sort=True):
        n_obs = int(g["n_partners"].sum())
        rows.append(
            {
                "probe_kind": kind,
                "n_probes": int(len(g)),
                "n_observations": n_obs,
                "placebo_rate": float(g["n_passed"].sum() / n_obs) if n_obs else math.nan,
                "n_excluded": int(g["excluded"].astype(bool).sum()),
                "excluded_frac": float(g["excluded"].astype(bool).mean()),
            }
        )
    return pd.DataFrame(rows, columns=list(PLACEBO_KIND_COLUMNS))


def placebo_lookup(
    placebo: Iterable[PlaceboResult] | Mapping[tuple[str, str], PlaceboResult] | Any,
) -> dict[tuple[str, str], tuple[float, bool]]:
    """``(task_id, probe_id) -> (placebo_rate, excluded)`` from results, a mapping of results
    or a :func:`placebo_table` DataFrame."""
    if isinstance(placebo, Mapping):
        return {k: (float(v.placebo_rate), bool(v.excluded)) for k, v in placebo.items()}
    if hasattr(placebo, "to_dict") and hasattr(placebo, "columns"):
        missing = [c for c in ("task_id", "probe_id", "placebo_rate", "excluded") if c not in placebo.columns]
        if missing:
            raise ConfigError(f"placebo table lacks columns {', '.join(missing)} (expected PLACEBO_COLUMNS)")
        return {
            (str(r["task_id"]), str(r["probe_id"])): (float(r["placebo_rate"]), bool(r["excluded"]))
            for r in placebo.to_dict("records")
        }
    return {(r.task_id, r.probe_id): (float(r.placebo_rate), bool(r.excluded)) for r in placebo}


def with_placebo(probe_rows: Any, placebo: Any) -> Any:
    """Probe rows (a DataFrame or dicts) with ``placebo_rate``/``placebo_excluded`` filled in
    from ``placebo`` (see :func:`placebo_lookup`); probes without a placebo get NaN / False.
    Returns a new DataFrame; the input is not modified."""
    import pandas as pd

    df = probe_rows.copy() if isinstance(probe_rows, pd.DataFrame) else pd.DataFrame(list(probe_rows))
    look = placebo_lookup(placebo)
    keys = list(zip(df["task_id"].astype(str), df["probe_id"].astype(str))) if len(df) else []
    df["placebo_rate"] = [look.get(k, (math.nan, False))[0] for k in keys]
    df["placebo_excluded"] = [look.get(k, (math.nan, False))[1] for k in keys]
    return df
