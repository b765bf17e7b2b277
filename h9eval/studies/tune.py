"""Threshold tuner: search the progressive compactor's tier fractions, tail and offload
thresholds for a context window, and recommend the config that retains the most.

``tune(["synthetic:small:0"], window=200_000)`` replays every candidate config on every task
(through :func:`h9eval.sweeps.sweep.sweep` when the tasks are specs, else :func:`h9eval.runs.replay.replay`
directly) with the offline summarizer and the ``recall`` probes, then recommends, among the configs that never
overflow the window, never reach the emergency tier, keep a safety margin below the window on
their worst task (tool schemas counted) and stay within the summarizer-call and cost bounds,
the most robust of those whose retention (mean recall-probe score) is not distinguishable from
the best one's (paired by task, Holm-adjusted bootstrap). The search sees only the tuning
tasks; the held-out ones check the recommendation. Tasks that never reach the warn tier at the
window are refused by name (they cannot tell thresholds apart). The search
is a coarse grid (every valid combination of ``grid``) followed by ``refine_rounds`` rounds of
local refinement: each numeric parameter is moved half-way towards its grid neighbours around
the current best, one at a time.

The window comes from ``window`` or from ``model`` via :data:`MODELS` (override or extend with
:func:`load_models`). The result carries the recommended config as TOML text (readable by
``policy_from_dict(tomllib.loads(text)["policy"])``), the evidence table, and a figure.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.core.paths import atomic_write, prepare_out_dir, write_text_atomic
from h9eval.core.prices import MODELS as PRICE_TABLE
from h9eval.core.prices import ModelInfo, load_models as load_model_table
from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.core.progress import make_progress
from h9eval.compaction.policies import make_policy
from h9eval.compaction.step import run_window
from h9eval.sweeps.sweep import sweep
from h9eval.analysis import metrics as M
from h9eval.analysis import stats as S
from h9eval.runs.execute import RunEnv, RunObjects, execute
from h9eval.runs.run import task_specs
from h9eval.runs.spec import PolicyRef, RunSpec
from h9eval.analysis.plots import tune_evidence
from h9eval.analysis.compare import stand_in_caveat
from h9eval.compaction.policies.progressive import ProgressiveCompactor
from h9eval.core.tokens import estimate_tool_tokens
from h9eval.runs.window import uncompacted_peak_tokens
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.model import Task

__all__ = [
    "MODELS",
    "DEFAULT_GRID",
    "TIER_FRACS",
    "MIN_HELDOUT_TASKS",
    "HeldOutCheck",
    "TuneResult",
    "tune",
    "split_tasks",
    "unexercised_tasks",
    "load_models",
    "model_info",
    "to_toml",
    "change_from_default",
    "keep_unexercised_defaults",
    "cross_validate",
]

DEFAULT_GRID: dict[str, list[Any]] = {
    "warn_frac": [0.5, 0.6, 0.7],
    "soft_frac": [0.6, 0.7, 0.8],
    "full_frac": [0.7, 0.8, 0.85],
    "emergency_frac": [0.9, 0.95],
    "min_tail_messages": [4, 6, 10],
    "offload_threshold_bytes": [2000, 4000],
}
"""The coarse grid when none is given (invalid orderings such as ``warn >= soft`` are skipped)."""

OBJECTIVES = ("retention", "cost_usd")
"""What the tuner recommends among the configs whose retention is not distinguishable from the
best: the most robust (``retention``) or the cheapest in billed dollars per task (``cost_usd``)."""

COST_RETENTION_GUARD = 0.02
"""With ``objective="cost_usd"``: a config whose mean retention is more than this below the best's
is never recommended, even when too few tasks make the paired test unable to tell them apart."""

_INT_PARAMS = ("min_tail_messages", "offload_threshold_bytes", "offload_hook_threshold_bytes")

TIER_FRACS: tuple[str, ...] = ("warn_frac", "soft_frac", "full_frac", "emergency_frac")
"""The tier thresholds, fractions of the window: one above the highest usage ratio a tuning task
reached never fired, so the tuner keeps harness9's value for it (:func:`keep_unexercised_defaults`)."""

MIN_HELDOUT_TASKS = 4
"""The fewest held-out tasks a held-out check is made on: with fewer, its interval rests on a
handful of values, and the tasks go back to tuning (the output says so)."""


def _harness9_defaults() -> dict[str, Any]:
    return {f.name: getattr(ProgressiveCompactor(), f.name) for f in dataclasses.fields(ProgressiveCompactor)}


def change_from_default(params: Mapping[str, Any], keys: Sequence[str]) -> float:
    """How far ``params`` moves from harness9's defaults on ``keys``: the sum of relative changes
    ``|v - d| / |d|`` (``|v - d|`` where the default is 0 or not a number; 1 for any other
    difference). Ties between indistinguishable configurations go to the smallest change."""
    d = _harness9_defaults()
    total = 0.0
    for k in keys:
        v, dv = params.get(k), d.get(k)
        if v == dv:
            continue
        if isinstance(v, (int, float)) and isinstance(dv, (int, float)) and not isinstance(v, bool):
            total += abs(v - dv) / abs(dv) if dv else abs(v - dv)
        else:
            total += 1.0
    return total


def keep_unexercised_defaults(params: Mapping[str, Any], max_usage_ratio: float) -> tuple[dict[str, Any], list[str]]:
    """``params`` with every tier threshold above ``max_usage_ratio`` (the highest usage ratio any
    tuning task reached under them) set back to harness9's value, and one line per threshold
    saying why: no task reached it, so the data cannot prefer any value there. When harness9's
    values would break the tier ordering with the thresholds that were reached, the evaluated
    values stay and a line says so."""
    d = _harness9_defaults()
    out = dict(params)
    why: list[str] = []
    above = [k for k in TIER_FRACS if k in params and float(params[k]) > max_usage_ratio and params[k] != d[k]]
    for k in above:
        out[k] = d[k]
    if above and not _valid(out):
        return dict(params), [
            f"{', '.join(above)} above the highest usage ratio reached ({max_usage_ratio:.3f}) but harness9's values "
            f"({', '.join(f'{d[k]:g}' for k in above)}) would not keep the tiers in order: the evaluated values stay, "
            "unexercised"
        ]
    for k in above:
        why.append(
            f"{k}: harness9's {d[k]:g} kept instead of {params[k]:g}: no tuning task's usage ratio reached "
            f"{min(params[k], d[k]):g} "
            f"(highest {max_usage_ratio:.3f}), so this threshold never fired and the data cannot choose it"
        )
    return out, why


# -- models ------------------------------------------------------------------------------------
def load_models(
    path: str | os.PathLike[str] | None = None, *, base: Mapping[str, ModelInfo] | None = None
) -> dict[str, dict[str, Any]]:
    """The tuner's registry: the one model table (:func:`h9eval.core.prices.load_models`, which reads
    the user's TOML or JSON file and validates it) as ``context_window_tokens`` and the prices per
    million tokens, for every model with a window. A model the file names must have one."""
    table = load_model_table(path, base=base)
    # a built-in model without a window (prices only) is left out; one the file set must be sized
    unsized = sorted(n for n, i in table.items() if i.context_window_tokens is None and i != PRICE_TABLE.get(n))
    if unsized:
        raise ConfigError(f"{path}: models.{unsized[0]}.context_window_tokens must be a positive integer, got None")
    return {
        name: {
            "context_window_tokens": info.context_window_tokens,
            "input_usd_per_mtok": info.input_usd_per_mtok,
            "output_usd_per_mtok": info.output_usd_per_mtok,
        }
        for name, info in table.items()
        if info.context_window_tokens is not None
    }


MODELS: dict[str, dict[str, Any]] = load_models()
"""Built-in model registry: ``context_window_tokens`` and optional prices per million tokens,
derived from the one dated model table :data:`h9eval.core.prices.MODELS`."""


def model_info(name: str, models: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A model's registry entry; unknown names get a did-you-mean :class:`ConfigError`."""
    reg = models if models is not None else MODELS
    if name not in reg:
        raise ConfigError(did_you_mean(name, list(reg), what="model"))
    return dict(reg[name])


# -- candidates --------------------------------------------------------------------------------
def _valid(params: Mapping[str, Any]) -> bool:
    try:
        make_policy("progressive", **params)
    except ConfigError:
        return False
    return True


def _grid_points(grid: Mapping[str, Sequence[Any]], base: Mapping[str, Any]) -> list[dict[str, Any]]:
    keys = sorted(grid)
    pts = []
    for combo in itertools.product(*(list(grid[k]) for k in keys)):
        p = {**base, **dict(zip(keys, combo))}
        if _valid(p):
            pts.append(p)
    return pts


def _refine(best: Mapping[str, Any], grid: Mapping[str, Sequence[Any]], round_: int) -> list[dict[str, Any]]:
    """Neighbours of ``best``: each numeric grid parameter moved half-way (a quarter in round 2,
    ...) towards the next lower and higher grid value, the others kept."""
    out = []
    shrink = 2 ** (round_ + 1)
    for k, values in sorted(grid.items()):
        vals = sorted(v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool))
        if len(vals) < 2 or k not in best:
            continue
        cur = best[k]
        lower = [v for v in vals if v < cur]
        higher = [v for v in vals if v > cur]
        step = min(b - a for a, b in zip(vals, vals[1:]))
        for nb in (lower[-1] if lower else cur - step, higher[0] if higher else cur + step):
            v = cur + (nb - cur) / shrink
            v = int(round(v)) if k in _INT_PARAMS else round(float(v), 4)
            if v == cur:
                continue
            p = {**best, k: v}
            if _valid(p):
                out.append(p)
    return out


def _key(p: Mapping[str, Any]) -> str:
    return json.dumps(dict(p), sort_keys=True, default=str)


# -- tasks: split and exercise check ---------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class _TaskEntry:
    task: Task
    spec: str | None
    """The spec that loads exactly this task (``None``: given as an object, or from a spec that
    loads several)."""


def _load(tasks: Sequence[Any]) -> list[_TaskEntry]:
    out: list[_TaskEntry] = []
    for t in tasks:
        if isinstance(t, str):
            loaded = load_tasks_from_spec(t)
            if not loaded:
                raise ConfigError(f"tune: task spec {t!r} loads no task")
            out.extend(_TaskEntry(task=x, spec=t if len(loaded) == 1 else None) for x in loaded)
        else:
            out.append(_TaskEntry(task=t, spec=None))
    ids = [e.task.task_id for e in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ConfigError(f"tune: task(s) given twice: {', '.join(dup)}")
    return out


def split_tasks(
    task_ids: Sequence[str], *, holdout_frac: float, seed: int = 0
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(tuning, held_out)`` task ids: ``round(n * holdout_frac)`` tasks (at least 1 when
    ``n >= 2`` and ``holdout_frac > 0``, never all) held out, chosen by a seeded shuffle of the
    sorted ids; both parts sorted. ``holdout_frac`` 0, or a single task: nothing held out."""
    import numpy as np

    if not 0 <= holdout_frac < 1:
        raise ConfigError(f"holdout_frac must be in [0, 1), got {holdout_frac!r}")
    ids = sorted(task_ids)
    n = len(ids)
    k = 0 if holdout_frac == 0 or n < 2 else min(n - 1, max(1, round(n * holdout_frac)))
    order = np.random.default_rng(seed).permutation(n)
    held = sorted(ids[int(i)] for i in order[:k])
    return tuple(i for i in ids if i not in held), tuple(held)


def _min_warn_frac(grid: Mapping[str, Sequence[Any]], base: Mapping[str, Any]) -> float:
    if "warn_frac" in grid:
        return float(min(grid["warn_frac"]))
    return float(base.get("warn_frac", ProgressiveCompactor().warn_frac))


def unexercised_tasks(tasks: Sequence[Task], *, window: int, warn_frac: float) -> list[tuple[str, int]]:
    """``(task id, uncompacted peak history tokens)`` of the tasks whose uncompacted history
    stays below ``warn_frac`` of ``window`` at every call: no candidate compacts there, so they
    cannot tell thresholds apart (the tiers judge the history, without the tool schemas)."""
    out = []
    for t in tasks:
        peak = uncompacted_peak_tokens(t) - estimate_tool_tokens(t.tools)
        if peak < warn_frac * window:
            out.append((t.task_id, peak))
    return out


# -- evaluation --------------------------------------------------------------------------------
_W = "context_window_tokens"


def _evaluate_sweep(
    specs: Sequence[str],
    configs: list[dict[str, Any]],
    out: Path,
    workers: int,
    history_mode: str,
    billing: Mapping[str, Any] | None = None,
    *,
    progress: bool = False,
) -> Any:
    windows = {c[_W] for c in configs}
    if len(windows) != 1:
        raise ConfigError(f"tune: the candidates of one tune share one window, got {sorted(windows)}")
    spec = {
        "name": out.name,
        "tasks": {"specs": list(specs)},
        # the candidates' window is the sweep's window (one per tune), as candidate_spec makes it the run's
        "window": configs[0]["context_window_tokens"],
        "policies": [
            {"kind": "progressive", "name": f"cfg{i:03d}", "params": {k: v for k, v in c.items() if k != _W}}
            for i, c in enumerate(configs)
        ],
        "probes": {"scorers": ["recall"]},
        "summarizer": {"name": "offline"},
        "history_modes": [history_mode],
        "billing": dict(billing or {}),
    }
    # the sweep's progress is the tuner's: "sweep sweep_grid: 40/132 cells"
    r = sweep(
        spec, out_dir=out, workers=0 if workers <= 1 else workers, progress=progress, on_failure="return"
    )  # failures: below
    res = r.load()

    rm = M.run_metrics(res.calls, res.probes, res.runs)
    name_to_cfg = {f"cfg{i:03d}": i for i in range(len(configs))}
    names = res.runs.set_index("run_id")["policy_name"].to_dict()
    rm["config_index"] = [name_to_cfg.get(names.get(rid, ""), -1) for rid in rm["run_id"]]
    failed = res.runs[res.runs["status"] != "ok"]
    if len(failed):
        raise ConfigError(f"tune: {len(failed)} replay(s) failed, first: {failed['error'].iloc[0]}")
    return rm, res.calls


def candidate_base(base_params: Mapping[str, Any] | None, window: int) -> dict[str, Any]:
    """The parameters every candidate shares: ``base_params`` at ``window``, by the one window rule of every
    run (a ``base_params`` window of another value is an error, not replaced).

    Args:
        base_params: fixed progressive parameters as given.
        window: the window tuned for (tokens).

    Returns:
        The parameters with ``context_window_tokens``.

    Raises:
        ConfigError: ``base_params`` set another window.
    """
    given = dict(base_params or {})
    ref = PolicyRef(kind="progressive", params=given)
    return {**given, _W: run_window(ref.build(), window, explicit=ref.sets_window).window_tokens}


def candidate_spec(
    task: Task | str, config: Mapping[str, Any], *, history_mode: str, billing: Mapping[str, Any] | None = None
) -> RunSpec:
    """The run spec of one candidate on one task: the spec ``h9eval run --task T --window W`` builds from the
    same parameters (the candidate's ``context_window_tokens`` is the run's window, the rest its
    parameters), with the tuner's probe (``recall``) and the offline summarizer, no ledger.

    Args:
        task: the task (or its spec).
        config: the candidate's ``ProgressiveCompactor`` parameters, with ``context_window_tokens``.
        history_mode: ``view`` or ``write_back``; ``billing``: the ``[billing]`` table.

    Returns:
        The spec (one task: a spec that loads several is refused).
    """
    params = {k: v for k, v in config.items() if k != "context_window_tokens"}
    specs, _, _ = task_specs(
        task, "progressive", params=params, window=config.get("context_window_tokens"), summarizer="offline",
        history_mode=history_mode, probes=("recall",), ledger=False, billing=billing,
    )  # fmt: skip
    if len(specs) != 1:
        raise ConfigError(f"tune: one task per spec expected, {task!r} loads {len(specs)}")
    return specs[0]


def _evaluate_direct(
    tasks: Sequence[Any],
    configs: list[dict[str, Any]],
    history_mode: str,
    billing: Mapping[str, Any] | None = None,
    *,
    progress: bool = False,
) -> Any:
    """Every config on every task in this process: one run spec each (the spec a sweep cell of the same
    inputs carries), run by :func:`~h9eval.runs.execute.execute` with no folder and no session store."""
    import pandas as pd

    rms, calls = [], []
    bar = make_progress(total=len(configs) * len(tasks), desc="tune", unit="replay", enabled=progress)
    for i, c in enumerate(configs):
        for t in tasks:
            bar.update(1)
            spec = candidate_spec(t, c, history_mode=history_mode, billing=billing)
            r = execute(spec, RunEnv(session_store=False, objects=RunObjects(task=t)))
            rm = M.run_metrics(r.calls, r.probes, None)
            rm["config_index"] = i
            rms.append(rm)
            calls.append(r.calls)
    bar.close()
    return pd.concat(rms, ignore_index=True), pd.concat(calls, ignore_index=True)


def _ci(values: Sequence[float], *, level: float, n_resamples: int, seed: int) -> tuple[float, float]:
    vals = [float(v) for v in values if not math.isnan(float(v))]
    if not vals:
        return (math.nan, math.nan)
    return S.percentile_interval(S.bootstrap_means(vals, n_resamples=n_resamples, seed=seed), level)


def _aggregate(
    rm: Any,
    calls: Any,
    configs: list[dict[str, Any]],
    model: Mapping[str, Any] | None,
    *,
    level: float,
    n_resamples: int,
    seed: int,
) -> Any:
    """Per config: retention (mean, bootstrap CI over tasks, worst task), tokens saved, the
    worst task's peak ratio to the window (tool schemas counted), overflows, emergencies,
    summarizer calls and cost, tasks compacted on."""
    import pandas as pd

    cols = ["summarizer_input_tokens", "summarizer_output_tokens"]
    tok = calls.groupby("run_id")[cols].sum().reset_index()
    rm = rm.merge(tok, on="run_id", how="left")
    usage = calls.groupby("run_id")["ratio_to_window"].max().rename("_max_usage").reset_index()
    rm = rm.merge(usage, on="run_id", how="left")
    rows = []
    pin = (model or {}).get("input_usd_per_mtok")
    pout = (model or {}).get("output_usd_per_mtok")
    for i, c in enumerate(configs):
        g = rm[rm["config_index"] == i]
        cost = g["summarizer_cost_usd"].astype(float)  # NaN: an unpriced summarizer, never $0
        if pin is not None and pout is not None:
            # the offline summarizer costs nothing: price its token counts as the model would
            est = (
                g["summarizer_input_tokens"].astype(float) * pin + g["summarizer_output_tokens"].astype(float) * pout
            ) / 1e6
            cost = cost.where(cost > 0, est)
        lo, hi = _ci(list(g["retention"]), level=level, n_resamples=n_resamples, seed=seed)
        rows.append(
            {
                "config_index": i,
                **{k: c.get(k) for k in sorted(c) if k != "context_window_tokens"},
                "n_tasks": int(g["task_id"].nunique()),
                "retention": float(g["retention"].mean()) if len(g) else math.nan,
                "retention_ci_lo": lo,
                "retention_ci_hi": hi,
                "retention_min": float(g["retention"].min()) if len(g) else math.nan,
                "tokens_saved": float(g["tokens_saved"].mean()) if len(g) else math.nan,
                "worst_peak_ratio": float(g["peak_ratio_to_window"].max()) if len(g) else math.nan,
                "max_usage_ratio": float(g["_max_usage"].max()) if len(g) else math.nan,
                "change_from_default": change_from_default(c, [k for k in sorted(c) if k != "context_window_tokens"]),
                "tasks_compacted": int((g["n_compactions"] > 0).sum()),
                "overflows": int(g["overflows"].sum()),
                "emergencies": int(g["emergencies"].sum()),
                "fallbacks": int(g["fallbacks"].sum()),
                "summarizer_calls_per_run": float(g["summarizer_calls"].mean()) if len(g) else 0.0,
                "cost_usd_per_run": float(cost.mean(skipna=False)) if len(g) else 0.0,
                # dollars per task as the provider bills them (prompt caching; NaN when unpriced)
                "billed_cost_usd_per_run": float(g["cost_usd"].mean())
                if len(g) and "cost_usd" in g.columns
                else math.nan,
                "_per_task": json.dumps(
                    {str(t): float(v) for t, v in zip(g["task_id"], g["retention"])}, sort_keys=True
                ),
            }
        )
    return pd.DataFrame(rows)


# -- choosing -----------------------------------------------------------------------------------
def _indistinguishable(ev: Any, best: int, *, level: float, n_resamples: int, seed: int) -> dict[int, str]:
    """Row position -> verdict of each feasible config's retention against the best's, paired by
    task (:func:`~h9eval.analysis.stats.compare_family`: exact sign-flip test when few tasks
    differ, guard on the tasks that differ), Holm-adjusted over the family (every feasible
    config but the best)."""
    others = [i for i in range(len(ev)) if i != best and bool(ev["feasible"].iloc[i])]
    if not others:
        return {}
    b = json.loads(ev["_per_task"].iloc[best])
    pairs = []
    for i in others:
        a = json.loads(ev["_per_task"].iloc[i])
        tids = [t for t in sorted(set(a) & set(b)) if not (math.isnan(a[t]) or math.isnan(b[t]))]
        pairs.append(
            S.TaskPairs(
                a=str(i),
                b=str(best),
                metric="retention",
                task_ids=tuple(tids),
                values_a=tuple(a[t] for t in tids),
                values_b=tuple(b[t] for t in tids),
            )
        )
    comps = S.compare_family(pairs, level=level, method="holm", n_resamples=n_resamples, seed=seed)
    return {i: c.verdict for i, c in zip(others, comps)}


@dataclass(frozen=True, kw_only=True)
class _Choice:
    best: int
    """Row position of the highest mean retention among feasible configs."""
    pick: int
    """Row position of the recommendation: the config not distinguishable from ``best`` that changes
    harness9's defaults least."""
    tied: tuple[int, ...]
    """Row positions not distinguishable from ``best`` (``best`` included)."""


def _choose(ev: Any, *, level: float, n_resamples: int, seed: int, objective: str = "retention") -> _Choice:
    """Among feasible configs: the best by mean retention; those whose paired task-level
    difference to it is not clearly worse (Holm-adjusted; with fewer differing tasks than
    :func:`~h9eval.analysis.stats.min_tasks_for` nothing is distinguishable) are tied with it;
    among them the smallest change from harness9's defaults (``change_from_default``; the data
    gives no reason to move further), then the best worst-task retention, the most headroom on
    the worst task, tokens saved, fewer summarizer calls. With nothing feasible: the
    least-violating; with
    ``objective="cost_usd"`` the cheapest of them in billed dollars per task (retention is then
    the guard, not the goal)."""
    ev = ev.reset_index(drop=True)
    f = ev[ev["feasible"]]
    if not len(f):
        v = ev.assign(violations=ev["overflows"] + ev["emergencies"]).sort_values(
            ["violations", "retention"], ascending=[True, False], kind="stable"
        )
        i = int(v.index[0])
        return _Choice(best=i, pick=i, tied=(i,))
    best = int(f.sort_values(["retention", "tokens_saved"], ascending=[False, False], kind="stable").index[0])
    verdicts = _indistinguishable(ev, best, level=level, n_resamples=n_resamples, seed=seed)
    tied = [best, *(i for i, v in verdicts.items() if v != S.WORSE)]
    order = (
        "change_from_default",
        "retention_min",
        "worst_peak_ratio",
        "tokens_saved",
        "summarizer_calls_per_run",
        "retention",
    )
    keys = [k for k in order if k in ev.columns]
    up = {
        "change_from_default": True,
        "retention_min": False,
        "worst_peak_ratio": True,
        "tokens_saved": False,
        "summarizer_calls_per_run": True,
        "retention": False,
    }
    ascending = [up[k] for k in keys]
    if objective == "cost_usd":
        # the guard: retention within COST_RETENTION_GUARD of the best, whatever the test can tell
        floor = float(ev["retention"].iloc[best]) - COST_RETENTION_GUARD
        tied = [i for i in tied if float(ev["retention"].iloc[i]) >= floor]
        keys, ascending = ["billed_cost_usd_per_run", *keys], [True, *ascending]
    t = ev.loc[tied].sort_values(keys, ascending=ascending, kind="stable", na_position="last")
    return _Choice(best=best, pick=int(t.index[0]), tied=tuple(sorted(tied)))


def cross_validate(ev: Any, *, folds: int, seed: int = 0) -> Any:
    """k-fold cross-validation of the choice over the tuning tasks, from the evidence already
    gathered (every config was replayed on every tuning task): for each fold, the feasible
    config with the best mean retention on the other folds' tasks (ties: smallest change from
    harness9's defaults) is scored on the fold's tasks, beside the fold's own best. Columns:
    ``fold``, ``n_tasks``, ``pick`` (row position), ``pick_retention`` (on the fold),
    ``fold_best_retention``, ``regret`` (their difference). Empty with fewer tasks than folds."""
    import numpy as np
    import pandas as pd

    cols = ["fold", "n_tasks", "pick", "pick_retention", "fold_best_retention", "regret"]
    per = [json.loads(x) for x in ev["_per_task"]]
    tids = sorted(set().union(*per)) if per else []
    if folds < 2 or len(tids) < folds:
        return pd.DataFrame(columns=cols)
    order = np.random.default_rng(seed).permutation(len(tids))
    parts = [sorted(tids[int(i)] for i in order[k::folds]) for k in range(folds)]
    feas = [i for i in range(len(ev)) if bool(ev["feasible"].iloc[i])] or list(range(len(ev)))
    has_change = "change_from_default" in ev.columns
    change = [float(ev["change_from_default"].iloc[i]) if has_change else 0.0 for i in range(len(ev))]

    def mean(i: int, ts: Sequence[str]) -> float:
        v = [per[i][t] for t in ts if t in per[i] and not math.isnan(per[i][t])]
        return float(np.mean(v)) if v else math.nan

    rows = []
    for k, test in enumerate(parts):
        train = [t for t in tids if t not in test]
        pick = min(feas, key=lambda i: (-mean(i, train), change[i], i))
        best = max(mean(i, test) for i in feas)
        rows.append(
            {
                "fold": k,
                "n_tasks": len(test),
                "pick": pick,
                "pick_retention": mean(pick, test),
                "fold_best_retention": best,
                "regret": best - mean(pick, test),
            }
        )
    return pd.DataFrame(rows, columns=cols)


# -- result ------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class HeldOutCheck:
    """The recommendation replayed on tasks the search never saw."""

    task_ids: tuple[str, ...]
    retention: float
    """Mean recall retention over the held-out tasks."""
    retention_ci_lo: float
    retention_ci_hi: float
    tuning_retention: float
    """The same config's mean retention on the tuning tasks."""
    overflows: int
    emergencies: int
    worst_peak_ratio: float
    """The held-out tasks' largest tokens sent (tool schemas included) over the window."""
    safety_margin_frac: float
    tasks_compacted: int

    @property
    def promise_kept(self) -> bool:
        """No overflow, no emergency, and the worst task within the safety margin."""
        return self.overflows == 0 and self.emergencies == 0 and self.worst_peak_ratio <= 1 - self.safety_margin_frac

    def line(self) -> str:
        """One line for the CLI and the TOML comment."""
        return (
            f"held-out check on {len(self.task_ids)} task(s) ({', '.join(self.task_ids)}): retention "
            f"{self.retention:.3f} "
            f"[{self.retention_ci_lo:.3f}, {self.retention_ci_hi:.3f}] vs {self.tuning_retention:.3f} when tuning; "
            f"{self.overflows} overflows, {self.emergencies} emergency truncations, worst peak "
            f"{self.worst_peak_ratio:.2f} of the window "
            f"(margin {self.safety_margin_frac:g}); compacted on {self.tasks_compacted}: "
            + ("promise kept" if self.promise_kept else "PROMISE BROKEN")
        )


@dataclass
class TuneResult:
    """What :func:`tune` found.

    ``params``: the recommended ``ProgressiveCompactor`` parameters (with the window).
    ``toml``: the same as TOML text (``[policy]`` table). ``evidence``: one row per evaluated
    config on the tuning tasks (``stage`` ``grid`` or ``refine<k>``, the varied parameters,
    ``retention`` with ``retention_ci_lo``/``retention_ci_hi`` (bootstrap over tasks) and
    ``retention_min`` (worst task), ``tokens_saved``, ``worst_peak_ratio``, ``tasks_compacted``,
    ``overflows``, ``emergencies``, ``summarizer_calls_per_run``, ``cost_usd_per_run``,
    ``feasible``, ``tied`` (not distinguishable from the best), ``best``: the recommendation).
    ``feasible``: whether the recommendation meets every constraint (else it is the
    least-violating config). ``tuning_tasks``/``holdout``: the split and the held-out check
    (``None`` when nothing was held out). ``warnings``: what makes the recommendation weak
    (also in the TOML comment). ``paths``: files written to ``out_dir`` (``recommended.toml``,
    ``evidence.csv``, ``tune.png``), if any. ``kept_defaults``: the tier thresholds left at
    harness9's values because no tuning task reached them, one line each. ``indistinguishable``:
    the tied configurations (varied parameters, retention, change from harness9's defaults).
    ``cv``: :func:`cross_validate` (with ``cv_folds``). ``holdout_note``: why there is no
    held-out check. ``caveat``: the stand-in summarizer caveat.
    """

    params: dict[str, Any]
    toml: str
    evidence: Any
    feasible: bool
    window: int
    model: str | None = None
    history_mode: str = "write_back"
    tuning_tasks: tuple[str, ...] = ()
    holdout: HeldOutCheck | None = None
    n_tied: int = 1
    warnings: list[str] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)
    kept_defaults: list[str] = field(default_factory=list)
    indistinguishable: Any = None
    cv: Any = None
    holdout_note: str = ""
    caveat: str = ""

    def lines(self) -> list[str]:
        """What the CLI prints after the TOML: the held-out check (or why there is none), the
        thresholds kept at harness9's values, the indistinguishable set, cross-validation, the
        stand-in caveat."""
        out = [self.holdout.line() if self.holdout is not None else self.holdout_note]
        out += [f"kept harness9's value: {k}" for k in self.kept_defaults]
        if self.indistinguishable is not None and len(self.indistinguishable):
            ind = self.indistinguishable
            out.append(
                f"{len(ind)} configuration(s) not distinguishable from the best by retention "
                "(the recommendation is the one that changes harness9's defaults least):"
            )
            show = [c for c in ind.columns if c not in ("config_index",)]
            text = ind[show].to_string(index=False, float_format=lambda v: f"{v:.4g}")
            out += ["  " + ln for ln in text.splitlines()]
        if self.cv is not None and len(self.cv):
            same = 0
            if "best" in self.evidence.columns:
                same = int((self.cv["pick"] == self.evidence.index[self.evidence["best"]][0]).sum())
            out.append(
                f"{len(self.cv)}-fold cross-validation over the tuning tasks: mean regret "
                f"{self.cv['regret'].mean():.4f} "
                f"(fold best minus the other folds' pick, retention); the pick matched the recommendation's config in "
                f"{same} of {len(self.cv)} folds"
            )
        if self.caveat:
            out.append(f"caveat: {self.caveat}")
        return out

    def figure(self) -> Any:
        """Tokens saved vs retention of every evaluated config (:func:`h9eval.analysis.plots.tune_evidence`)."""
        return tune_evidence(self.evidence)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


def to_toml(params: Mapping[str, Any], *, comment: str = "") -> str:
    """``[policy]`` TOML for a progressive config (``None`` values are left out: TOML has no
    null, and the policy's default for them is ``None``)."""
    lines = [f"# {ln}" for ln in comment.splitlines()] if comment else []
    lines += ["[policy]", 'kind = "progressive"']
    lines += [f"{k} = {_toml_value(v)}" for k, v in sorted(params.items()) if v is not None]
    return "\n".join(lines) + "\n"


def _held_out(
    tasks: Sequence[Task],
    params: Mapping[str, Any],
    history_mode: str,
    *,
    tuning_retention: float,
    margin: float,
    level: float,
    n_resamples: int,
    seed: int,
) -> HeldOutCheck:
    import pandas as pd

    rm, _ = _evaluate_direct(tasks, [dict(params)], history_mode)
    lo, hi = _ci(list(rm["retention"]), level=level, n_resamples=n_resamples, seed=seed)
    return HeldOutCheck(
        task_ids=tuple(sorted(t.task_id for t in tasks)),
        retention=float(pd.to_numeric(rm["retention"]).mean()),
        retention_ci_lo=lo,
        retention_ci_hi=hi,
        tuning_retention=tuning_retention,
        overflows=int(rm["overflows"].sum()),
        emergencies=int(rm["emergencies"].sum()),
        worst_peak_ratio=float(rm["peak_ratio_to_window"].max()),
        safety_margin_frac=margin,
        tasks_compacted=int((rm["n_compactions"] > 0).sum()),
    )


def _check_args(
    tasks: Sequence[Any],
    *,
    window: int | None,
    model: str | None,
    models: Mapping[str, Mapping[str, Any]] | None,
    refine_rounds: int,
    workers: int,
    history_mode: str,
    safety_margin_frac: float,
) -> tuple[dict[str, Any] | None, int]:
    """The arguments of :func:`tune` checked; returns the model's entry and the window."""
    if not tasks:
        raise ConfigError("tune needs at least one task")
    if refine_rounds < 0:
        raise ConfigError(f"refine_rounds must be >= 0, got {refine_rounds}")
    minfo = model_info(model, models) if model is not None else None
    if window is None:
        if minfo is None:
            raise ConfigError("tune needs a window (tokens) or a model name to look one up")
        window = int(minfo["context_window_tokens"])
    if window <= 0:
        raise ConfigError(f"window must be > 0 tokens, got {window}")
    if workers < 0:
        raise ConfigError(f"workers must be >= 0 (0 or 1 = in this process), got {workers}")
    if history_mode not in ("view", "write_back"):
        raise ConfigError(f"history_mode must be 'view' or 'write_back', got {history_mode!r}")
    if not 0 <= safety_margin_frac < 1:
        raise ConfigError(f"safety_margin_frac must be in [0, 1), got {safety_margin_frac!r}")
    return minfo, window


def _comment(
    b: Any,
    *,
    window: int,
    model: str | None,
    history_mode: str,
    margin: float,
    n_configs: int,
    n_tied: int,
    check: HeldOutCheck | None,
    feasible: bool,
    warns: Sequence[str],
    kept: Sequence[str] = (),
    holdout_note: str = "",
    caveat: str = "",
) -> str:
    """The recommended TOML's comment: what it achieved, how it was chosen, the held-out check, warnings."""
    return (
        f"h9eval tune: recommended ProgressiveCompactor for a {window:,}-token window"
        + (f" ({model})" if model else "")
        + f", {history_mode} history mode"
        + f"\nmean retention {b['retention']:.3f} [{b['retention_ci_lo']:.3f}, {b['retention_ci_hi']:.3f}] "
        f"(worst task {b['retention_min']:.3f}) over {int(b['n_tasks'])} tuning task(s), tokens saved "
        f"{b['tokens_saved']:.3f}, "
        f"{b['summarizer_calls_per_run']:.1f} summarizer calls per run, {int(b['overflows'])} overflows, "
        f"{int(b['emergencies'])} emergency truncations, worst peak {b['worst_peak_ratio']:.2f} of the window "
        f"(tool schemas counted; margin {margin:g}); {n_configs} configs evaluated"
        + f"\n{n_tied} config(s) not distinguishable from the best by retention (paired by task, Holm-adjusted); "
        "this is the one that changes harness9's defaults least (then best worst-task retention, most headroom)"
        + f"\nhighest usage ratio reached on a tuning task: {b['max_usage_ratio']:.3f} of the window"
        + "".join(f"\nkept harness9's value: {k}" for k in kept)
        + (f"\n{check.line()}" if check is not None else f"\n{holdout_note}" if holdout_note else "")
        + (f"\ncaveat: {caveat}" if caveat else "")
        + ("" if feasible else "\nWARNING: no config met every constraint; this one violates the fewest")
        + "".join(f"\nWARNING: {w}" for w in warns)
    )


def _checked_grid(grid: Mapping[str, Sequence[Any]] | None) -> dict[str, Any]:
    """The grid to search (default :data:`DEFAULT_GRID`), each key a progressive parameter with a
    non-empty list of values."""
    g = dict(grid) if grid is not None else dict(DEFAULT_GRID)
    fields = {f.name for f in dataclasses.fields(ProgressiveCompactor)}
    for k in g:
        if k not in fields:
            raise ConfigError(did_you_mean(k, sorted(fields), what="parameter of policy 'progressive'"))
        if not isinstance(g[k], (list, tuple)) or not g[k]:
            raise ConfigError(f"grid.{k} must be a non-empty list, got {g[k]!r}")
    return g


def tune(
    tasks: Sequence[Any],
    *,
    window: int | None = None,
    model: str | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
    refine_rounds: int = 1,
    max_summarizer_calls: float | None = None,
    max_cost_usd: float | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    workers: int = 1,
    models: Mapping[str, Mapping[str, Any]] | None = None,
    base_params: Mapping[str, Any] | None = None,
    history_mode: str = "write_back",
    holdout_frac: float = 0.25,
    split_seed: int = 0,
    safety_margin_frac: float = 0.05,
    allow_unexercised: bool = False,
    level: float = S.DEFAULT_LEVEL,
    n_resamples: int = S.DEFAULT_RESAMPLES,
    cv_folds: int = 0,
    objective: str = "retention",
    progress: bool = True,
) -> TuneResult:
    """Search progressive thresholds for ``window`` (tokens) or ``model``'s window.

    ``tasks``: task specs (``synthetic:small:0``, recorded paths...) or :class:`Task` objects.
    ``grid``: parameter → values (default :data:`DEFAULT_GRID`; any ``ProgressiveCompactor``
    field works, invalid combinations are skipped). ``refine_rounds``: local refinement rounds
    after the grid (default 1; 0 = grid only). ``max_summarizer_calls``: bound on the mean
    summarizer calls per run; ``objective``: ``retention`` (default: the most robust of the
    configs whose retention is not distinguishable from the best) or ``cost_usd`` (the cheapest of
    them in dollars per task as the provider bills them, the calls billed as ``model``);
    ``max_cost_usd``: bound on the mean summarizer cost per run (USD;
    the offline summarizer's token counts are priced at ``model``'s rates when it has them).
    ``out_dir``: where sweeps, ``recommended.toml``, ``evidence.csv`` and ``tune.png`` go
    (default: a temporary folder, nothing kept). ``workers``: sweep worker processes (1 =
    in-process). ``models``: a registry from :func:`load_models` (default :data:`MODELS`).
    ``base_params``: fixed progressive parameters for every candidate. ``history_mode``:
    ``write_back`` (default; harness9's current agent loop writes an effective compaction back
    into the history) or ``view`` (harness9 V1: the history never shrinks, so any task longer
    than the window reaches the emergency tier whatever the thresholds, and nothing is feasible).

    Generalisation: ``holdout_frac`` of the tasks (default 0.25, at least one of two or more;
    :func:`split_tasks` with ``split_seed``) are held out of the search and the recommendation
    is replayed on them (:class:`HeldOutCheck`). A task whose uncompacted history never reaches
    the smallest ``warn_frac`` of the window cannot inform the choice: such tasks are a
    :class:`ConfigError` naming them, unless ``allow_unexercised`` (then a loud warning).
    Feasible = no overflow, no emergency, and the worst task's peak tokens sent (tool schemas
    counted) at most ``1 - safety_margin_frac`` of the window (default margin 0.05), within the
    bounds. Among feasible configs, those whose retention is not distinguishable from the best
    (paired by task, Holm-adjusted bootstrap at ``level``, ``n_resamples`` resamples) are
    ``tied``, and the one that changes harness9's defaults least is recommended (see
    :func:`_choose`); the tied set is returned (``indistinguishable``). A tier threshold above
    the highest usage ratio the recommendation reached on any tuning task never fired: harness9's
    value is kept there (:func:`keep_unexercised_defaults`). The held-out check needs
    :data:`MIN_HELDOUT_TASKS` tasks; with fewer they go back to tuning and ``holdout_note`` says
    so. ``cv_folds`` (>= 2): k-fold cross-validation of the choice over the tuning tasks
    (:func:`cross_validate`). ``progress``: each stage's replays done so far
    (:mod:`h9eval.core.progress`).
    """
    import pandas as pd

    minfo, window = _check_args(
        tasks,
        window=window,
        model=model,
        models=models,
        refine_rounds=refine_rounds,
        workers=workers,
        history_mode=history_mode,
        safety_margin_frac=safety_margin_frac,
    )
    g = _checked_grid(grid)
    base = candidate_base(base_params, window)
    grid_pts = _grid_points(g, base)
    if not grid_pts:
        raise ConfigError("no valid config in the grid (check that warn < soft < full < emergency is possible)")

    entries = _load(tasks)
    warns: list[str] = []
    warn_frac = _min_warn_frac(g, base)
    idle = unexercised_tasks([e.task for e in entries], window=window, warn_frac=warn_frac)
    if idle:
        msg = (
            f"{len(idle)} of {len(entries)} task(s) never reach the warn tier (warn_frac {warn_frac:g} of a "
            f"{window:,}-token window) "
            "uncompacted, so no threshold changes anything on them: "
            + ", ".join(f"{tid} (peak {peak:,} tokens)" for tid, peak in idle)
        )
        if not allow_unexercised:
            raise ConfigError(
                f"tune: {msg}; use a smaller window or longer tasks, or allow_unexercised=True (--allow-unexercised) "
                "to tune anyway"
            )
        warns.append(msg)
        warnings.warn(f"h9eval tune: {msg}", stacklevel=2)
    if cv_folds < 0 or cv_folds == 1:
        raise ConfigError(f"cv_folds must be 0 (none) or >= 2, got {cv_folds!r}")
    tuning_ids, held_ids = split_tasks([e.task.task_id for e in entries], holdout_frac=holdout_frac, seed=split_seed)
    holdout_note = ""
    if 0 < len(held_ids) < MIN_HELDOUT_TASKS:
        holdout_note = (
            f"held-out check not made: {len(held_ids)} task(s) would be held out ({', '.join(held_ids)}), and a check "
            f"needs at least {MIN_HELDOUT_TASKS}; they were used for tuning"
        )
        tuning_ids, held_ids = tuple(sorted((*tuning_ids, *held_ids))), ()
    elif not held_ids:
        holdout_note = f"held-out check not made: {len(entries)} task(s), holdout_frac {holdout_frac:g} holds none out"
    tuning = [e for e in entries if e.task.task_id in tuning_ids]
    held = [e.task for e in entries if e.task.task_id in held_ids]
    if not held:
        warns.append(holdout_note)
    specs = [e.spec for e in tuning]
    use_sweep = all(s is not None for s in specs)

    tmp = tempfile.TemporaryDirectory(prefix="h9eval-tune-") if out_dir is None else None
    root = Path(out_dir) if out_dir is not None else Path(tmp.name)  # type: ignore[union-attr]
    prepare_out_dir(root, what="tune output folder")
    seen: dict[str, int] = {}
    frames: list[Any] = []
    stat = {"level": level, "n_resamples": n_resamples, "seed": split_seed}
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    billing = {"model": model} if model is not None else {}  # bill the calls as the tuned model

    def run_stage(stage: str, cands: list[dict[str, Any]]) -> None:
        new = [c for c in cands if _key(c) not in seen]
        if not new:
            return
        if use_sweep:
            rm, calls = _evaluate_sweep(
                [s for s in specs if s is not None],
                new,
                root / f"sweep_{stage}",
                workers,
                history_mode,
                billing,
                progress=progress,
            )
        else:
            rm, calls = _evaluate_direct([e.task for e in tuning], new, history_mode, billing, progress=progress)
        ev = _aggregate(rm, calls, new, minfo, **stat)
        ev.insert(0, "stage", stage)
        ev["params_json"] = [_key(c) for c in new]
        for c in new:
            seen[_key(c)] = len(seen)
        frames.append(ev)

    def feasible(ev: Any) -> Any:
        ok = (ev["overflows"] == 0) & (ev["emergencies"] == 0) & (ev["worst_peak_ratio"] <= 1 - safety_margin_frac)
        if max_summarizer_calls is not None:
            ok &= ev["summarizer_calls_per_run"] <= max_summarizer_calls
        if max_cost_usd is not None:
            ok &= ev["cost_usd_per_run"] <= max_cost_usd
        return ok

    def evidence() -> Any:
        ev = pd.concat(frames, ignore_index=True)
        ev["feasible"] = feasible(ev)
        return ev

    try:
        run_stage("grid", grid_pts)
        for k in range(refine_rounds):
            ev = evidence()
            cur = json.loads(ev["params_json"].iloc[_choose(ev, **stat, objective=objective).pick])
            run_stage(f"refine{k + 1}", _refine(cur, g, k))
        ev = evidence()
        choice = _choose(ev, **stat, objective=objective)
        ev["tied"] = [i in choice.tied for i in range(len(ev))]
        ev["best"] = [i == choice.pick for i in range(len(ev))]
        b = ev.iloc[choice.pick]
        params, kept = keep_unexercised_defaults(json.loads(b["params_json"]), float(b["max_usage_ratio"]))
        is_feasible = bool(b["feasible"])
        varied = [k for k in g if k in ev.columns]
        ind = ev.loc[list(choice.tied), [*varied, "retention", "retention_min", "tokens_saved", "change_from_default"]]
        ind = ind.sort_values(["change_from_default", "retention"], ascending=[True, False], kind="stable")
        ind = ind.reset_index(drop=True)
        cv = cross_validate(ev, folds=cv_folds, seed=split_seed) if cv_folds else None
        caveat = stand_in_caveat(["offline"])
        if int(b["tasks_compacted"]) < int(b["n_tasks"]):
            warns.append(
                f"the recommendation never compacted on {int(b['n_tasks']) - int(b['tasks_compacted'])} of "
                f"{int(b['n_tasks'])} tuning task(s)"
            )
        check = (
            _held_out(
                held, params, history_mode, tuning_retention=float(b["retention"]), margin=safety_margin_frac, **stat
            )
            if held
            else None
        )
        comment = _comment(
            b,
            window=window,
            model=model,
            history_mode=history_mode,
            margin=safety_margin_frac,
            n_configs=len(ev),
            n_tied=len(choice.tied),
            check=check,
            feasible=is_feasible,
            warns=[w for w in warns if w != holdout_note],
            kept=kept,
            holdout_note=holdout_note,
            caveat=caveat,
        )
        toml = to_toml(params, comment=comment)
        result = TuneResult(
            params=params,
            toml=toml,
            evidence=ev.drop(columns=["_per_task"]),
            feasible=is_feasible,
            window=window,
            model=model,
            history_mode=history_mode,
            tuning_tasks=tuning_ids,
            holdout=check,
            n_tied=len(choice.tied),
            warnings=warns,
            kept_defaults=kept,
            indistinguishable=ind,
            cv=cv,
            holdout_note=holdout_note,
            caveat=caveat,
        )
        if out_dir is not None:
            result.paths["toml"] = root / "recommended.toml"
            write_text_atomic(result.paths["toml"], toml)
            result.paths["evidence"] = root / "evidence.csv"
            write_text_atomic(result.paths["evidence"], result.evidence.to_csv(index=False))
            result.paths["figure"] = root / "tune.png"
            with atomic_write(result.paths["figure"]) as f:
                result.figure().savefig(f, dpi=110, format="png")
        return result
    finally:
        if tmp is not None:
            tmp.cleanup()
