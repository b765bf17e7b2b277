"""Verdicts on the ``progressive`` policy's improvement options, on what each is meant to change.

Each option exists to change something specific (:data:`OPTION_TARGETS`): judging the
anti-thrash guard on retention alone says nothing about whether it cut the summarizer calls
it was built to cut. :func:`judge_options` compares every variant (a progressive
configuration whose parameters differ from a baseline only in improvement options) with its
baseline (the same parameters without them, same summarizer) on the option's *target* metrics
and on retention as a *guard*, with the task-level paired statistics of
:mod:`h9eval.analysis.stats`: all variants × metrics form one family, adjusted together.

The overall word of a variant (:data:`OVERALL_RULE`) uses the verdict words of
:data:`h9eval.analysis.stats.VERDICT_DEFINITIONS`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from h9eval.analysis.compare import as_results, metric_spec, pairs_for, run_table
from h9eval.analysis.metrics import IMPROVEMENT_OPTIONS, params_diff
from h9eval.analysis.stats import (
    BETTER,
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    INCONCLUSIVE,
    WORSE,
    PairedComparison,
    compare_family,
)
from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.results.store import Results

__all__ = [
    "OptionTarget",
    "OPTION_TARGETS",
    "GUARD_METRICS",
    "OVERALL_RULE",
    "OptionVerdict",
    "judge_options",
    "option_target",
    "overall_verdict",
]


@dataclass(frozen=True, kw_only=True)
class OptionTarget:
    """What one improvement option is meant to change: ``targets`` (metric names of
    :data:`h9eval.analysis.compare.METRICS`, or of a measurement the sweep tables do not hold,
    listed in ``unmeasured``), and ``rationale`` (why those)."""

    option: str
    targets: tuple[str, ...]
    rationale: str
    unmeasured: tuple[str, ...] = ()


OPTION_TARGETS: tuple[OptionTarget, ...] = (
    OptionTarget(
        option="anti_thrash_frac",
        targets=("summarizer_calls", "emergencies"),
        rationale="no new compaction until the history grew by a share of the window: fewer summaries, "
        "and no emergency reached by compacting a view that cannot shrink further",
    ),
    OptionTarget(
        option="na_safe_merge",
        targets=("na_overwrites", "anchor_retention"),
        rationale="an N/A or empty section never overwrites an anchor: fewer overwrites, anchors kept",
    ),
    OptionTarget(
        option="tier_token_counter",
        targets=(),
        unmeasured=("tier agreement with a BPE count",),
        rationale="tiers decided on calibrated or BPE counts agree with a BPE count more often; the sweep "
        "tables hold no BPE count per call (h9eval.analysis.token_accuracy.call_token_table and "
        "metrics.tier_misclassification measure it from the transcripts)",
    ),
    OptionTarget(
        option="mask_observations_keep_turns",
        targets=("emergencies", "peak_tokens_sent", "tokens_saved"),
        rationale="old tool outputs masked before any summary: fewer emergencies, smaller requests",
    ),
    OptionTarget(
        option="extra_anchors",
        targets=("anchor_retention",),
        rationale="constraint and artifact anchors keep those facts through compactions",
    ),
    OptionTarget(
        option="tail_budget_tokens",
        targets=("peak_tokens_sent", "emergencies"),
        rationale="a tail bounded in tokens, not messages, cannot carry one huge output into every view",
    ),
    OptionTarget(
        option="min_gain_horizon_calls",
        targets=("cost_usd",),
        rationale="a summary deferred until it repays the prompt cache it destroys: fewer dollars per task "
        "as the provider bills them (docs/billing.md)",
    ),
)
"""One entry per :data:`h9eval.analysis.metrics.IMPROVEMENT_OPTIONS` option."""

GUARD_METRICS: tuple[str, ...] = ("retention",)
"""Every option is also judged on these: an option must not buy its target with lost recall."""

OVERALL_RULE = (
    "worse: the guard or any target is worse; better: at least one target is better and nothing is worse; "
    "inconclusive: anything else (including every metric equivalent)"
)
"""How :func:`overall_verdict` reduces a variant's per-metric verdicts to one word."""

_TARGETS = {t.option: t for t in OPTION_TARGETS}


def option_target(option: str) -> OptionTarget:
    """The :class:`OptionTarget` of ``option`` (an :data:`IMPROVEMENT_OPTIONS` name)."""
    if option not in _TARGETS:
        raise ConfigError(did_you_mean(option, _TARGETS, what="improvement option"))
    return _TARGETS[option]


@dataclass(frozen=True, kw_only=True)
class OptionVerdict:
    """One variant against its baseline.

    ``option``: ``name=value, ...`` of the options set; ``options``: their names; ``variant``,
    ``baseline``: configuration labels; ``targets``/``guard``: the comparisons (variant - baseline)
    on the target metrics and the guard metrics; ``unmeasured``: targets the tables cannot give;
    ``overall``: see :data:`OVERALL_RULE`.
    """

    option: str
    options: tuple[str, ...]
    variant: str
    baseline: str
    targets: tuple[PairedComparison, ...]
    guard: tuple[PairedComparison, ...]
    unmeasured: tuple[str, ...]
    overall: str

    def lines(self) -> list[str]:
        """A heading line and one line per comparison."""
        out = [f"{self.option} ({self.variant} vs {self.baseline}): {self.overall}"]
        out += [f"  target {c.line()}" for c in self.targets]
        out += [f"  guard  {c.line()}" for c in self.guard]
        out += [f"  not measured here: {u}" for u in self.unmeasured]
        return out


def overall_verdict(targets: Sequence[PairedComparison], guard: Sequence[PairedComparison]) -> str:
    """One word from the per-metric verdicts (see :data:`OVERALL_RULE`)."""
    if any(c.verdict == WORSE for c in (*targets, *guard)):
        return WORSE
    if any(c.verdict == BETTER for c in targets):
        return BETTER
    return INCONCLUSIVE


def _option_set(params_json: Any) -> dict[str, Any]:
    return {k: v for k, v in params_diff("progressive", params_json).items() if k in IMPROVEMENT_OPTIONS}


def _base_key(params_json: Any, summarizer: Any) -> str:
    p = json.loads(params_json) if isinstance(params_json, str) and params_json else {}
    return json.dumps(
        {"params": {k: v for k, v in sorted(p.items()) if k not in IMPROVEMENT_OPTIONS}, "summarizer": summarizer},
        sort_keys=True,
        default=str,
    )


def judge_options(
    results: Results | str | os.PathLike[str],
    *,
    level: float = DEFAULT_LEVEL,
    method: str = "holm",
    margin: float | Mapping[str, float] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[OptionVerdict, ...]:
    """Every progressive variant against its baseline on its targets and the guard.

    A variant with several options set is judged on the union of their targets. Variants with
    no baseline in the results are left out. All comparisons of all variants are one family
    (``method``: ``holm`` default, ``bh``, ``none``; ``level``: the family's). ``margin``: as in
    :func:`h9eval.analysis.compare.compare`. Pairs are matched by task within history mode.
    """
    res = as_results(results)
    table = run_table(res)
    prog = table[table["policy_kind"] == "progressive"].copy()
    if len(prog) == 0:
        return ()
    prog["_opts"] = [", ".join(f"{k}={v}" for k, v in sorted(_option_set(pj).items())) for pj in prog["params_json"]]
    prog["_base"] = [_base_key(pj, s) for pj, s in zip(prog["params_json"], prog.get("summarizer", [None] * len(prog)))]
    baselines = prog[prog["_opts"] == ""].groupby("_base")["config"].agg(lambda s: sorted(set(s))[0])
    plan: list[tuple[str, tuple[str, ...], str, str, tuple[str, ...], tuple[str, ...]]] = []
    pairs = []
    for (opts, base_key), g in prog[prog["_opts"] != ""].groupby(["_opts", "_base"], sort=True):
        if base_key not in baselines.index:
            continue
        variant = sorted(set(g["config"]))[0]
        baseline = str(baselines[base_key])
        names = tuple(sorted(_option_set(g["params_json"].iloc[0])))
        targets: list[str] = []
        unmeasured: list[str] = []
        for n in names:
            t = option_target(n)
            targets += [m for m in t.targets if m not in targets]
            unmeasured += [u for u in t.unmeasured if u not in unmeasured]
        guard = tuple(m for m in GUARD_METRICS if m not in targets)
        sub = prog[prog["config"].isin([variant, baseline])]
        for m in (*targets, *guard):
            pairs.append(pairs_for(sub, variant, baseline, metric_spec(m), margin=margin))
        plan.append((str(opts), names, variant, baseline, tuple(targets), tuple(unmeasured)))
    comps = compare_family(pairs, level=level, method=method, n_resamples=n_resamples, seed=seed)
    out = []
    i = 0
    for opts, names, variant, baseline, planned, not_measured in plan:
        n_guard = len([m for m in GUARD_METRICS if m not in planned])
        tc = comps[i : i + len(planned)]
        gc = comps[i + len(planned) : i + len(planned) + n_guard]
        i += len(planned) + n_guard
        out.append(
            OptionVerdict(
                option=opts,
                options=names,
                variant=variant,
                baseline=baseline,
                targets=tuple(tc),
                guard=tuple(gc),
                unmeasured=not_measured,
                overall=overall_verdict(tc, gc),
            )
        )
    return tuple(out)
