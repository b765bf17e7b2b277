"""The open-loop sections of a report: how each configuration did on the replayed tasks.

Policies compared (retention and tokens saved with task-bootstrap intervals), each configuration
against harness9's default (task-level paired, adjusted), token curves, tier transitions, anchor
retention, drift, summarizer calls and cost, and h9eval's improvement options judged on their
targets. Every number comes from :mod:`h9eval.analysis.metrics`, :mod:`h9eval.analysis.headline`
and :mod:`h9eval.analysis.options`, every figure from :mod:`h9eval.analysis.plots`; each function
takes the report's :class:`~h9eval.analysis.report.context.ReportContext` and returns a list of
sections (empty when it has nothing to show).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from h9eval.analysis import headline
from h9eval.analysis import metrics
from h9eval.analysis import options
from h9eval.analysis import plots
from h9eval.analysis import validity
from h9eval.analysis.compare import METRICS, extractor_robustness, run_table
from h9eval.analysis.report.context import ReportContext, after_compaction, tier_fracs
from h9eval.analysis.report.model import Section
from h9eval.analysis.stats import DEFAULT_LEVEL, INCONCLUSIVE, VERDICT_DEFINITIONS, PairedComparison, min_tasks_for
from h9eval.results.store import Results
from h9eval.tasks.model import ANCHOR_KINDS

__all__ = [
    "OPTIONS_TITLE",
    "anchor_sections",
    "drift_sections",
    "emergency_sections",
    "headline_sections",
    "option_sections",
    "policies_sections",
    "robustness_table",
    "unpriced_cells",
    "summarizer_sections",
    "tier_sections",
    "token_curve_sections",
    "verdict_words",
]

OPTIONS_TITLE = "h9eval improvement options vs the faithful default"
_METRIC_TEXT = {m.name: m.description for m in METRICS}


def _ci_col(df: Any, m: str) -> list[str]:
    return [
        "–" if (isinstance(v, float) and math.isnan(v)) else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
        for v, lo, hi in zip(df[m], df[f"{m}_ci_lo"], df[f"{m}_ci_hi"])
    ]


def policies_sections(ctx: ReportContext) -> Section:
    s = Section("Policies compared")
    cm = ctx.cm
    if len(cm) == 0:
        return s  # nothing to show: the renderer leaves an empty section out
    cm = cm.assign(_ctl=cm["policy_kind"].isin(plots.CONTROL_KINDS)).sort_values(
        ["history_mode", "_ctl", "retention"], ascending=[True, True, False], kind="stable"
    )
    t = cm[["label", "history_mode", "n_runs"]].copy()
    t["label"] = [lab + (" (control)" if c else "") for lab, c in zip(cm["label"], cm["_ctl"])]
    t = t.rename(columns={"label": "configuration", "history_mode": "mode", "n_runs": "tasks"})
    t["retention [95% CI]"] = _ci_col(cm, "retention")
    if "retention_summary" in cm.columns and cm["retention_summary"].notna().any():
        t["summary-only retention [95% CI]"] = _ci_col(cm, "retention_summary")
    t["tokens saved [95% CI]"] = _ci_col(cm, "tokens_saved")
    billed = "cost_usd" in cm.columns and (
        cm["cost_usd"].notna().any() or ("unpriced_calls" in ctx.rm.columns and ctx.rm["unpriced_calls"].sum() > 0)
    )  # a table written before billing has no dollars to show
    if billed:
        # dollars as the provider bills them beside the tokens saved (a compaction rewrites the cached prefix)
        t["billed USD per task [95% CI]"] = [
            "unpriced" if v != v else f"{v:.4g} [{lo:.4g}, {hi:.4g}]"
            for v, lo, hi in zip(cm["cost_usd"], cm["cost_usd_ci_lo"], cm["cost_usd_ci_hi"])
        ]
    for c, name in (
        ("overflows", "overflows"),
        ("emergencies", "emergencies"),
        ("summarizer_calls", "summarizer calls per run"),
    ):
        if c in cm.columns:
            t[name] = cm[c].to_numpy()
    sc = cm["summarizer_cost_usd"] if "summarizer_cost_usd" in cm.columns else None
    called = cm["summarizer_calls"] > 0 if "summarizer_calls" in cm.columns else True
    if sc is not None and (float(sc.fillna(0).sum()) > 0 or bool((sc.isna() & called).any())):
        t["summarizer USD per run"] = unpriced_cells(sc).to_numpy()
    if "never_compacted_runs" in cm.columns:
        # a score where the configuration never compacted is the uncompacted transcript's: flagged next to it
        t["tasks never compacted"] = cm["never_compacted_runs"].to_numpy()
    s.table(
        t,
        "One row per configuration and history mode, best retention first; CIs are percentile bootstraps "
        f"({ctx.n_boot:,} resamples, seed {ctx.seed}) across tasks.",
    )
    s.text(
        "tokens saved = 1 - sum(tokens sent) / sum(tokens the uncompacted transcript would send at the same calls) "
        "per run, tool schemas on both sides: the same baseline for every policy and history mode. retention = mean "
        "recall-probe score over answerable probes of the sent view, on one checkpoint grid per task shared by every "
        "policy; 'tasks never compacted': runs on which the configuration never compacted (its scores there are the "
        "uncompacted transcript's; see the coverage section); summary-only retention scores the summary's anchors "
        "alone, at "
        "checkpoints after the run's first compaction (– when the configuration never wrote a summary). "
        "Overflows and emergencies are totals over the runs."
    )
    s.figure(
        "strategy_comparison",
        plots.strategy_comparison(cm),
        "Each configuration's mean retention (left) and tokens saved (right) with 95% bootstrap CIs across tasks, "
        "ranked by retention, one panel group per history mode; vertical lines: the controls.",
    )
    return s


def token_curve_sections(ctx: ReportContext) -> Section:
    s = Section("Token curves")
    calls, runs = ctx.res.calls, ctx.res.runs
    if len(calls) == 0 or ctx.example_task is None:
        return s  # nothing to show: the renderer leaves an empty section out
    if len(ctx.rm) > 1:  # one run needs no reason for its task
        s.text(ctx.example_reason)
    ids: list[str] = []
    for label, mode in ctx.chosen:
        ids += ctx.runs_of(label, mode, ctx.example_task)[:1]
    info = runs.set_index("run_id") if runs is not None and len(runs) else None
    th = None
    if info is not None and "params_json" in info.columns:
        th = {rid: tier_fracs(str(info.at[rid, "policy_kind"]), info.at[rid, "params_json"]) for rid in ids}
    labels = (
        {
            rid: f"{ctx.names.get(rid, rid)} ({mode})"
            for rid, mode in zip(ids, ctx.rm.set_index("run_id").loc[ids, "history_mode"])
        }
        if ids
        else {}
    )
    s.figure(
        "token_curve_0",
        plots.token_curve(
            calls, ids, thresholds_by_run=th, labels=labels, title=f"Tokens per call: {ctx.example_task}"
        ),
        f"History tokens (dashed) and tokens sent (solid) per call for task {ctx.example_task}, one panel per "
        "configuration; bands are that run's own tier thresholds (named on the right).",
    )
    return s


def tier_sections(ctx: ReportContext) -> Section:
    s = Section("Tier transitions")
    calls = ctx.res.calls
    if len(calls) == 0 or not ctx.chosen:
        return s  # nothing to show: the renderer leaves an empty section out
    groups = {f"{label} ({mode})": ctx.runs_of(label, mode) for label, mode in ctx.chosen}
    s.figure(
        "tier_transitions",
        plots.tier_transition_matrix(calls, groups=groups),
        "Tier transition counts per configuration, all tasks (rows: tier at a call; n = transitions from that tier).",
    )
    ex = ctx.example_task
    sub = ctx.labelled(calls[calls["task_id"] == ex])
    sub = ctx.non_control(sub)
    for k, mode in enumerate(dict.fromkeys(sub["history_mode"])):
        ms = sub[sub["history_mode"] == mode]
        lanes = ctx.rm[ctx.rm["run_id"].isin(set(ms["run_id"]))].sort_values("label")
        groups = {"": list(lanes["run_id"])}
        if len(lanes) > _MAX_LANES:
            groups = {
                f: list(lanes[[plots.family(x) == f for x in lanes["policy_kind"]]]["run_id"])
                for f in ("progressive", "other strategies")
            }
        s.figure(
            "tier_swimlane" if k == 0 else f"tier_swimlane_{k}",
            plots.tier_swimlane(ms, labels=ctx.names, title=f"Tier per call: {ex}, {mode} mode", groups=groups),
            f"Tier per call for task {ex} in {mode} mode, one lane per configuration (controls left out).",
        )
    return s


_MAX_LANES = 12  # labelled rows per panel before a figure splits them by family


def _kind_heatmap(
    ctx: ReportContext, kinds: Sequence[str] | None, exclude: Sequence[str] = (), scope: str = "view"
) -> Any:
    p = ctx.res.probes if scope == "view" else after_compaction(ctx.res.probes)
    if kinds is not None:
        p = p[p["probe_kind"].isin(list(kinds))]
    p = p[~p["probe_kind"].isin(list(exclude))]
    p = ctx.non_control(ctx.labelled(p))
    if scope != "view":
        # a summary-only score means nothing for a configuration that never wrote a summary
        summarizing = (
            set(ctx.rm[ctx.rm["summarizer_calls"] > 0]["run_id"])
            if "summarizer_calls" in ctx.rm.columns
            else set(p["run_id"])
        )
        p = p[p["run_id"].isin(summarizing)]
    t = metrics.retention(p, by=("label", "policy_kind", "history_mode", "probe_kind"), scope=scope)
    t = t.assign(family=[plots.family(k) for k in t["policy_kind"]])
    # harness9's family first, then the other strategies
    return t.sort_values("family", key=lambda f: f != "progressive", kind="stable")


def anchor_sections(ctx: ReportContext) -> Section:
    s = Section("Anchor retention")
    probes = ctx.res.probes
    if not (len(probes) and probes["probe_kind"].isin(ANCHOR_KINDS).any()):
        return s  # nothing to show: the renderer leaves an empty section out
    t = _kind_heatmap(ctx, ANCHOR_KINDS)
    s.figure(
        "anchor_retention_probes",
        plots.config_heatmap(t, title="Anchor-probe retention by configuration (sent view)"),
        "Mean recall score per configuration and anchor type; n = probe rows in the cell. Controls left out.",
    )
    if "scope" in probes.columns and (probes["scope"] == "anchors").any():
        ts = _kind_heatmap(ctx, ANCHOR_KINDS, scope="anchors")
        if len(ts):
            s.figure(
                "anchor_retention_summary",
                plots.config_heatmap(ts, title="Anchor-probe retention, summary only (after the first compaction)"),
                "The same probes scored against the summary's anchors alone (no verbatim tail), at checkpoints after "
                "the run's first compaction; "
                "configurations that never call the summarizer are left out.",
            )
    return s


def drift_sections(ctx: ReportContext) -> Section:
    s = Section("Drift")
    probes = ctx.res.probes
    if len(probes) == 0:
        kind = ctx.results.manifest.get("kind")
        if kind == "run":
            s.note("The run ran no probes: no drift data. Run it again with --probes recall.")
        elif kind != "episode":  # a closed-loop episode is judged by its world, not by probes
            s.note('The sweep ran no probes: no drift data. Add [probes] scorers = ["recall"] to the spec.')
        return s
    t = _kind_heatmap(ctx, None, exclude=ANCHOR_KINDS)
    if len(t):
        s.figure(
            "retention_by_kind",
            plots.config_heatmap(t, title="Retention by probe kind and configuration"),
            "Mean recall score per configuration and probe kind (anchor kinds are in the previous section); n = probe "
            "rows. Controls left out.",
        )
    ex = ctx.example_task
    ids = [r for label, mode in ctx.chosen for r in ctx.runs_of(label, mode, ex)[:1]]
    if ids:
        labels = {
            r: f"{ctx.names.get(r, r)} ({m})" for r, m in zip(ids, ctx.rm.set_index("run_id").loc[ids, "history_mode"])
        }
        s.figure(
            "drift",
            plots.drift_curves(probes, ids, labels=labels),
            f"Intent and fact retention over calls for task {ex}, the configurations of the token curves.",
        )
    return s


def unpriced_cells(dollars: Any) -> Any:
    """A column of dollars for a table: ``unpriced`` where the value is unknown (NaN: a model
    without prices), never shown as $0 or a bare dash."""
    return dollars.astype(object).where(dollars.notna(), "unpriced")


def summarizer_sections(ctx: ReportContext) -> Section:
    s = Section("Summarizer calls and cost")
    calls = ctx.res.calls
    if len(calls) == 0:
        return s  # nothing to show: the renderer leaves an empty section out
    per_run = metrics.summarizer_usage(calls, ctx.res.runs, by="run_id")
    t = ctx.rm[["run_id", "label", "history_mode"]].merge(
        per_run.drop(columns=["n_runs", "calls_per_run", "cost_per_run_usd"], errors="ignore"), on="run_id"
    )
    t["configuration"] = t["label"] + " (" + t["history_mode"] + ")"
    u = metrics.summarizer_usage(t, by="configuration")
    u = u[u["summarizer_calls"] > 0]
    if len(u) == 0:
        return s  # no configuration called the summarizer
    cols = ["configuration", "n_runs", "calls_per_run", "summarizer_input_tokens", "summarizer_output_tokens"]
    for c in ("summarizer_calls", "summarizer_input_tokens", "summarizer_output_tokens"):
        u[c] = u[c].round().astype(int)
    # an unpriced model summarized: its dollars are unknown, not "offline, free"
    unpriced = bool(u["summarizer_cost_usd"].isna().any())
    paid = float(u["summarizer_cost_usd"].fillna(0).sum()) > 0 or unpriced
    billed = ["billed_usd_per_run"] if "billed_usd_per_run" in u.columns else []  # dollars beside the tokens
    heads = {
        "billed_usd_per_run": "billed USD per run",
        "n_runs": "runs",
        "calls_per_run": "calls per run",
        "summarizer_input_tokens": "input tokens",
        "summarizer_output_tokens": "output tokens",
        "cost_per_run_usd": "USD per run",
        "summarizer_cost_usd": "USD in all",
    }
    shown = u[cols + billed + (["cost_per_run_usd", "summarizer_cost_usd"] if paid else [])].copy()
    for c in ("cost_per_run_usd", "summarizer_cost_usd", *billed):
        if c in shown.columns:
            shown[c] = unpriced_cells(shown[c])
    s.table(
        shown.rename(columns=heads),
        "Summarizer calls and tokens per configuration (configurations that never summarize are left out)"
        + ("; billed USD per run: their list-price dollars as the provider bills them." if billed else ".")
        + (" unpriced: a model without prices in h9eval's table (core/prices.py; pass your own)." if unpriced else ""),
    )
    if paid and not unpriced:
        s.figure(
            "summarizer_cost",
            plots.summarizer_cost(u, by="configuration"),
            "Summarizer calls and cost per run, per configuration.",
        )
    elif not paid:
        s.text(
            "Every summarizer in these results is offline: it cost nothing here"
            + ("; billed USD per run prices its tokens as the billed model would." if billed else ".")
        )
    return s


def _diff(c: PairedComparison) -> str:
    """``+0.012 [-0.003, +0.020]``: the mean paired difference and its adjusted interval."""
    if math.isnan(c.mean_diff):
        return "–"
    f = "{:+.3f}" if abs(c.mean_diff) < 100 and abs(c.hi) < 100 else "{:+.3g}"
    return f"{f.format(c.mean_diff)} [{f.format(c.lo)}, {f.format(c.hi)}]"


def _verdict(c: PairedComparison) -> str:
    """The verdict, starred when too few tasks were paired for a verdict at its adjusted level."""
    short = c.n_differ < min_tasks_for(c.adjusted_level) and not c.verdict.startswith("equivalent")
    return c.verdict + ("*" if short else "")


_STAR = (
    "*: too few tasks paired for a verdict at the comparison's adjusted level, so it reads inconclusive "
    "whatever the mean."
)


def _family_text(method: str, family_size: int, level: float) -> str:
    if method == "none" or family_size <= 1:
        return f"intervals at level {level:g}, no adjustment ({family_size} comparison)"
    name = {"holm": "Holm", "bh": "Benjamini-Hochberg"}.get(method, method)
    return f"{name}-adjusted over a family of {family_size} comparisons at family level {level:g}"


def verdict_words(section: Section) -> None:
    """Add the verdict words' definitions (:data:`VERDICT_DEFINITIONS`) to ``section``."""
    for k, v in VERDICT_DEFINITIONS.items():
        section.text(f"“{k}”: {v}.")


# -- every configuration vs the default -------------------------------------------------------------
def _headline_table(h: headline.Headline) -> Any:
    import pandas as pd

    by: dict[str, dict[str, Any]] = {}
    for c in h.comparisons:
        r = by.setdefault(c.a, {"configuration": c.a, "vs": c.b})
        cov = h.coverage
        if "tasks compacted" not in r:
            r["tasks compacted"] = f"{int(cov['n_tasks_compacted'].get(c.a, 0))}/{int(cov['n_tasks'].get(c.a, 0))}"
        r[f"{c.metric}"] = c.mean_a
        r[f"Δ {c.metric} [CI]"] = _diff(c)
        r[f"{c.metric} verdict"] = f"{_verdict(c)} ({c.n_differ}/{c.n_tasks})"
    t = pd.DataFrame(list(by.values()))
    return t.drop(columns="vs") if len(h.baselines) == 1 else t


def robustness_table(rob: Any) -> Any:
    """One row per summarizing strategy and metric of an
    :func:`~h9eval.analysis.compare.extractor_robustness` frame: its verdict against the baseline
    under each offline extractor (in brackets the tasks that differ) and whether they all agree."""
    import pandas as pd

    rows = []
    for (strategy, baseline, metric), g in rob.groupby(["strategy", "baseline", "metric"], sort=True):
        r: dict[str, Any] = {"strategy": strategy, "vs": baseline, "metric": metric}
        for x in g.itertuples():
            r[f"verdict under {x.summarizer}"] = f"{x.verdict} ({x.n_differ})"
        # agreeing that nothing can be told is agreement, but not a finding: said so
        undecided = bool(g["robust"].iloc[0]) and set(g["verdict"]) == {INCONCLUSIVE}
        r["robust to the stand-in"] = (
            "yes (all inconclusive)" if undecided else "yes" if bool(g["robust"].iloc[0]) else "NO"
        )
        rows.append(r)
    return pd.DataFrame(rows)


def _robustness(s: Section, rob: Any) -> None:
    """The per-extractor table under the headline, when a strategy ran under two or more extractors."""
    if not len(rob):
        return
    t = robustness_table(rob)
    s.table(
        t,
        "Robust to the stand-in: each summarizing strategy's verdict against the default under each offline "
        "extractor the sweep ran (read from the table above; in brackets the tasks that differ). A verdict is robust "
        "only when every extractor gives the same one: where they disagree, the ranking belongs to the extractor, "
        "not to the strategy.",
    )
    fragile = sorted(
        {f"{a} ({m})" for a, m, r in zip(t["strategy"], t["metric"], t["robust to the stand-in"]) if r == "NO"}
    )
    if fragile:
        s.note("Verdicts that change with the extractor: " + ", ".join(fragile) + ".")


def headline_sections(
    results: Results, *, n_resamples: int = 1000, seed: int = 0, level: float = DEFAULT_LEVEL
) -> list[Section]:
    """Every configuration against harness9's default (same summarizer), task-level paired."""
    s = Section("Strategy comparison: each configuration vs harness9's default")
    h = headline.versus_default(results, n_resamples=n_resamples, seed=seed, level=level)
    if h is None or not h.comparisons:
        s.note(
            "No harness9-default configuration in these results (a progressive entry named "
            f"{headline.DEFAULT_NAME!r}, or one "
            "that sets only the window), so no configuration is compared with it."
        )
        return [s]
    s.text(
        f"Baseline: {', '.join(h.baselines)}. Each row: configuration A minus the baseline B, paired by task (history "
        "modes, "
        "repeats and checkpoints are averaged inside each task first; deterministic repeats count once), percentile "
        f"bootstrap over tasks ({n_resamples} resamples, seed {seed}); {_family_text(h.method, h.family_size, level)}. "
        "Verdicts are read from the adjusted interval, never from the mean:"
    )
    verdict_words(s)
    s.table(
        _headline_table(h),
        "Metrics: "
        + "; ".join(f"{m} = {_METRIC_TEXT[m]}" for m in headline.HEADLINE_METRICS)
        + ". Verdict (k/n): k of the n paired tasks have a paired difference that is not 0. "
        + _STAR,
    )
    cov = h.coverage
    low = [c for c in cov.index if cov.loc[c, "n_tasks_compacted"] < cov.loc[c, "n_tasks"]]
    if low:
        s.note(
            f'Never compacted on some tasks ("tasks compacted" < tasks run): {", ".join(sorted(map(str, low)))}; a '
            "difference "
            "on those tasks is not a difference in compaction."
        )
    small = sorted({c.n_tasks for c in h.comparisons if c.n_tasks < min_tasks_for(c.adjusted_level)})
    if small:
        s.note(
            f"Starred verdicts rest on {', '.join(map(str, small))} task(s): too few for a verdict at their adjusted "
            "level "
            f"(at least {min_tasks_for(level)} at {level:g}, more after adjustment), so they read inconclusive "
            "whatever the mean."
        )
    table = run_table(results)
    _robustness(s, extractor_robustness(table, h.comparisons))
    over = headline.overflowing(table)
    if over:
        s.note(
            "Overflowed the window (some request larger than the window, so its retention is of a request no model "
            "would "
            "accept): " + ", ".join(f"{k} ({v} calls)" for k, v in over.items()) + "."
        )
    return [s]


# -- improvement options ------------------------------------------------------------------------------
def option_sections(
    results: Results, *, n_resamples: int = 1000, seed: int = 0, level: float = DEFAULT_LEVEL
) -> list[Section]:
    """Each option judged on its target metrics, with retention as a guard (one family)."""
    import pandas as pd

    s = Section(OPTIONS_TITLE)
    vs = options.judge_options(results, n_resamples=n_resamples, seed=seed, level=level)
    if not vs:
        s.note(
            "No progressive configuration in these results differs from a baseline only in improvement options "
            f"({', '.join(t.option for t in options.OPTION_TARGETS)}), so no option is judged here."
        )
        return [s]
    comps = [c for v in vs for c in (*v.targets, *v.guard)]
    fam = comps[0].family_size if comps else 0
    s.text(
        "Each option is judged on what it exists to change (its targets) and on retention as a guard, variant minus "
        "baseline "
        f"(same parameters without the option), paired by task; {_family_text('holm', fam, level)} ({len(vs)} "
        "variant(s) × their "
        f"metrics). Overall: {options.OVERALL_RULE}. Verdict words as defined in the strategy comparison; "
        '"inconclusive" means '
        "no clear effect on this data: it is not evidence against the option."
    )
    rows = []
    for v in vs:
        for role, cs in (("target", v.targets), ("guard", v.guard)):
            for c in cs:
                rows.append(
                    {
                        "option": v.option,
                        "overall": v.overall,
                        "role": role,
                        "metric": c.metric,
                        "baseline": c.mean_b,
                        "with option": c.mean_a,
                        "Δ [adj. CI]": _diff(c),
                        "verdict": _verdict(c),
                        "tasks differ": f"{c.n_differ}/{c.n_tasks}",
                    }
                )
        for u in v.unmeasured:
            rows.append(
                {
                    "option": v.option,
                    "overall": v.overall,
                    "role": "target",
                    "metric": u,
                    "baseline": math.nan,
                    "with option": math.nan,
                    "Δ [adj. CI]": "not measured here",
                    "verdict": "–",
                    "tasks differ": "–",
                }
            )
    s.table(
        pd.DataFrame(rows),
        "One row per option and metric; baseline/with option: means over tasks. Smaller is better for calls, "
        "emergencies, overwrites and peak tokens. " + _STAR,
    )
    for v in vs:
        why = " (meant to: " + "; ".join(options.option_target(o).rationale for o in v.options) + ")"
        differ = max((c.n_differ for c in (*v.targets, *v.guard)), default=0)
        n = max((c.n_tasks for c in (*v.targets, *v.guard)), default=0)
        line = (
            f"{v.option}: {v.overall}{why}; at most {differ} of {n} task(s) differ from the baseline "
            "on any judged metric."
        )
        if differ == 0:
            s.note(line + " The option changed nothing measurable on these tasks: the data did not exercise it.")
        else:
            s.text(line)
    return [s]


# -- emergency checkpoints ----------------------------------------------------------------------------
def emergency_sections(
    results: Results, *, n_resamples: int = 1000, seed: int = 0, level: float = DEFAULT_LEVEL
) -> list[Section]:
    """Share of probe checkpoints at the emergency tier, and the comparison under legacy_last1."""
    import pandas as pd

    s = Section("Emergency checkpoints and the reconstructed emergency rule")
    es = validity.emergency_share(results)
    if len(es) == 0:
        s.note("No probe rows: nothing was measured at emergency checkpoints.")
        return [s]
    table = run_table(results)
    defaults = [
        d for d in (headline.default_config(table, sm) for sm in sorted(table["summarizer"].dropna().unique())) if d
    ]
    s.text(
        'harness9\'s emergency truncation rule (anchor_greedy_v3, forced_truncation="anchor_greedy_v3") is '
        "reconstructed from "
        "harness9's description, not verified against its code; checkpoints taken at the emergency tier score that "
        "rule."
    )
    s.table(
        es.rename(columns={"emergency_frac": "share of checkpoints", "emergency_row_frac": "share of probe rows"}),
        "Per configuration: checkpoints (run × call) with probe rows, how many were at the emergency tier, and runs "
        "with at least one forced truncation.",
    )
    for d in defaults:
        r = es[es["config"] == d]
        if len(r) and r["emergency_frac"].iloc[0] > 0:
            s.note(
                f"{d}: {r['emergency_frac'].iloc[0]:.0%} of its checkpoints ({r['emergency_row_frac'].iloc[0]:.0%} of "
                "its probe rows) "
                "are at the emergency tier, scored under the reconstructed rule."
            )
    legacy = [(d, v) for d in defaults for v in (headline.legacy_variant(table, d),) if v is not None]
    if not legacy:
        s.text(
            "These results hold no legacy_last1 variant of the default (a progressive entry with "
            'forced_truncation="legacy_last1" '
            "and otherwise the default's parameters), so the comparison is not repeated under the other rule."
        )
        return [s]
    for d, lg in legacy:
        base = headline.versus_default(
            results, baseline=d, metrics=("retention",), n_resamples=n_resamples, seed=seed, level=level, exclude=[lg]
        )
        alt = headline.versus_default(
            results, baseline=lg, metrics=("retention",), n_resamples=n_resamples, seed=seed, level=level, exclude=[d]
        )
        direct = headline.versus_default(
            results,
            baseline=d,
            metrics=headline.HEADLINE_METRICS,
            n_resamples=n_resamples,
            seed=seed,
            level=level,
            exclude=[c for c in set(table["config"]) if c not in (d, lg)],
        )
        if base is None or alt is None:
            continue
        by_a = {c.a: c for c in alt.comparisons}
        rows = [
            {
                "configuration": c.a,
                f"Δ retention vs {d} [adj. CI]": _diff(c),
                "verdict (anchor_greedy_v3)": _verdict(c),
                f"Δ retention vs {lg} [adj. CI]": _diff(by_a[c.a]) if c.a in by_a else "–",
                "verdict (legacy_last1)": _verdict(by_a[c.a]) if c.a in by_a else "–",
            }
            for c in base.comparisons
        ]
        s.table(
            pd.DataFrame(rows),
            "The retention comparison against the default under each emergency rule; each column one family "
            f"({_family_text(base.method, base.family_size, level)}). A verdict that changes between the columns "
            "depends on "
            "the reconstructed rule. " + _STAR,
        )
        changed = [r["configuration"] for r in rows if r["verdict (anchor_greedy_v3)"] != r["verdict (legacy_last1)"]]
        if changed:
            s.note(f"{len(changed)} verdict(s) change with the emergency rule: " + ", ".join(changed) + ".")
        else:
            s.text("No verdict changes with the emergency rule.")
        if direct is not None:
            s.text(
                f"{lg} vs {d} directly: "
                + "; ".join(f"{c.metric} {_diff(c)} → {_verdict(c)}" for c in direct.comparisons)
                + "."
            )
    return [s]
