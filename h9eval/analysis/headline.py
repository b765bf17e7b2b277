"""The headline comparison: every configuration of a sweep against harness9's default.

harness9's default (:func:`default_config`) is the ``progressive`` configuration that sets no
parameter but the window: the entry named :data:`DEFAULT_NAME` when there is one. Every other
configuration with the same summarizer is compared with it on :data:`HEADLINE_METRICS`, paired
by task within history mode (:func:`h9eval.analysis.compare.pairs_for`), all configurations ×
metrics adjusted as one family (:func:`h9eval.analysis.stats.compare_family`).

:func:`legacy_variant` finds the configuration that differs from the default only in
``forced_truncation="legacy_last1"`` (the emergency rule harness9 had before its reconstructed
``anchor_greedy_v3``), so a report can show the same comparison under that rule.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from h9eval.analysis.compare import as_results, metric_spec, pairs_for, run_table
from h9eval.analysis.metrics import params_diff
from h9eval.analysis.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES, PairedComparison, compare_family, comparisons_frame
from h9eval.core.errors import ConfigError
from h9eval.results.store import Results

__all__ = [
    "DEFAULT_NAME",
    "HEADLINE_METRICS",
    "LEGACY_RULE",
    "Headline",
    "default_config",
    "legacy_variant",
    "versus_default",
    "compacted_tasks",
    "overflowing",
]

DEFAULT_NAME = "harness9-default"
"""The spec name that marks harness9's default configuration (preferred when present)."""

HEADLINE_METRICS: tuple[str, ...] = ("retention", "tokens_saved")
"""What the headline comparison judges every configuration on."""

LEGACY_RULE = {"forced_truncation": "legacy_last1"}
"""The parameter a legacy-emergency variant sets, and nothing else."""

_WINDOW_PARAMS = frozenset({"context_window_tokens"})


def _params(s: Any) -> dict[str, Any]:
    v = json.loads(s) if isinstance(s, str) and s else {}
    return v if isinstance(v, dict) else {}


def _is_default(row: Any) -> bool:
    return row["policy_kind"] == "progressive" and set(params_diff("progressive", row["params_json"])) <= _WINDOW_PARAMS


def default_config(table: Any, summarizer: str | None = None) -> str | None:
    """The label of harness9's default among a :func:`~h9eval.analysis.compare.run_table`'s
    configurations (of ``summarizer`` when given), or ``None`` when no configuration is it."""
    t = table if summarizer is None else table[table["summarizer"] == summarizer]
    cands = t[[_is_default(r) for _, r in t.iterrows()]] if len(t) else t
    if len(cands) == 0:
        return None
    named = cands[cands["policy_name"] == DEFAULT_NAME]
    return str(sorted(set((named if len(named) else cands)["config"]))[0])


def legacy_variant(table: Any, default: str) -> str | None:
    """The configuration whose parameters are ``default``'s plus :data:`LEGACY_RULE` (same
    summarizer), or ``None``."""
    d = table[table["config"] == default]
    if len(d) == 0:
        return None
    want = {**_params(d["params_json"].iloc[0]), **LEGACY_RULE}
    summ = d["summarizer"].iloc[0]
    for label, g in table[(table["policy_kind"] == "progressive") & (table["summarizer"] == summ)].groupby(
        "config", sort=True
    ):
        if _params(g["params_json"].iloc[0]) == want and label != default:
            return str(label)
    return None


def compacted_tasks(table: Any) -> Any:
    """Per configuration: ``n_tasks`` run and ``n_tasks_compacted`` (tasks where some run of it
    compacted at least once), a DataFrame indexed by ``config``."""
    import pandas as pd

    if len(table) == 0:
        return pd.DataFrame(columns=["n_tasks", "n_tasks_compacted"])
    per_task = table.assign(_c=table["n_compactions"].fillna(0) > 0).groupby(["config", "task_id"])["_c"].any()
    g = per_task.groupby(level="config")
    return pd.DataFrame({"n_tasks": g.size(), "n_tasks_compacted": g.sum().astype(int)})


def overflowing(table: Any) -> dict[str, int]:
    """Configuration -> calls whose request exceeded the window, over all its runs (only
    configurations with at least one)."""
    g = table.groupby("config", sort=True)["overflows"].sum()
    return {str(k): int(v) for k, v in g.items() if v > 0}


@dataclass(frozen=True, kw_only=True)
class Headline:
    """Each configuration (A) against ``baselines`` (B; one per summarizer), one family.

    ``comparisons``: A - B per configuration and metric; ``method``/``level``: the family's
    adjustment and level; ``family_size``: comparisons adjusted together; ``coverage``: per
    configuration, tasks run and tasks it compacted on (:func:`compacted_tasks`).
    """

    baselines: tuple[str, ...]
    comparisons: tuple[PairedComparison, ...]
    method: str
    level: float
    family_size: int
    coverage: Any

    def frame(self) -> Any:
        """One row per comparison (:class:`~h9eval.analysis.stats.PairedComparison` fields)
        plus ``n_tasks_compacted`` of A."""
        f = comparisons_frame(self.comparisons)
        if len(f):
            f["n_tasks_compacted"] = [int(self.coverage["n_tasks_compacted"].get(a, 0)) for a in f["a"]]
        return f


def versus_default(
    results: Results | str | os.PathLike[str],
    *,
    baseline: str | None = None,
    metrics: Sequence[str] = HEADLINE_METRICS,
    level: float = DEFAULT_LEVEL,
    method: str = "holm",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    exclude: Sequence[str] = (),
) -> Headline | None:
    """Every configuration against harness9's default of its summarizer (or ``baseline``, a
    configuration label, for all). ``exclude``: configurations left out of the family.
    ``None`` when the results hold no default (and no ``baseline`` is given)."""
    res = as_results(results)
    table = run_table(res)
    if baseline is not None and baseline not in set(table["config"]):
        raise ConfigError(f"versus_default: baseline {baseline!r} is not a configuration of these results")
    mets = [metric_spec(m) for m in metrics]
    pairs = []
    bases: list[str] = []
    for summ in sorted(table["summarizer"].dropna().unique()) if baseline is None else [None]:
        b = baseline if baseline is not None else default_config(table, summ)
        if b is None:
            continue
        bases.append(b)
        sub = table if baseline is not None else table[table["summarizer"] == summ]
        for a in sorted(set(sub["config"]) - {b} - set(exclude)):
            s = sub[sub["config"].isin([a, b])]
            pairs += [pairs_for(s, a, b, m) for m in mets]
    if not bases:
        return None
    comps = compare_family(pairs, level=level, method=method, n_resamples=n_resamples, seed=seed)
    fam = comps[0].family_size if comps else 0
    return Headline(
        baselines=tuple(bases),
        comparisons=comps,
        method=method,
        level=level,
        family_size=fam,
        coverage=compacted_tasks(table),
    )
