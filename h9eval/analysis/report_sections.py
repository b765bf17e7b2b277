"""Report sections on how far the numbers can be trusted, and the paired comparisons.

Each function takes a :class:`~h9eval.results.store.Results` and returns a list of
:class:`~h9eval.analysis.report_model.Section` (empty when it has nothing to show), so the
report adds each with one line. Every number comes from :mod:`h9eval.analysis` (``stats``,
``compare``, ``options``, ``headline``, ``validity``); these functions only choose, format and
put the caveat next to the number it qualifies.

* :func:`provenance_sections`: which summarizer produced the results, and that offline results
  rank mechanisms, not a model's summaries; summary-only (anchors-scope) retention beside view
  retention;
* :func:`headline_sections`: every configuration against harness9's default, task-level
  paired, Holm-adjusted, verdict words defined once;
* :func:`option_sections`: each improvement option judged on what it is meant to change, with
  retention as a guard (:func:`h9eval.analysis.options.judge_options`);
* :func:`probe_validity_sections`: the placebo floor per probe kind beside retention, excluded
  probes counted, pinned answers reported apart from memory;
* :func:`emergency_sections`: the share of checkpoints at the emergency tier (a reconstructed
  rule) and the headline comparison again under ``legacy_last1`` when the results hold it;
* :func:`llm_sections`: judge-vs-exact agreement (with n) and the audit's cost summary, when
  the llm scorer ran.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from h9eval.analysis import compare as CMP
from h9eval.analysis import coverage as C
from h9eval.analysis import headline as H
from h9eval.analysis import options as O
from h9eval.analysis import validity as V
from h9eval.analysis.compare import METRICS, retention_rankings, run_table
from h9eval.analysis.report_model import Section
from h9eval.analysis.stats import DEFAULT_LEVEL, VERDICT_DEFINITIONS, PairedComparison, min_tasks_for
from h9eval.results.store import Results

__all__ = [
    "OPTIONS_TITLE",
    "verdict_words",
    "provenance_sections",
    "headline_sections",
    "option_sections",
    "probe_validity_sections",
    "emergency_sections",
    "overflow_sections",
    "llm_sections",
]

OPTIONS_TITLE = "h9eval improvement options vs the faithful default"
_METRIC_TEXT = {m.name: m.description for m in METRICS}


def _num(v: Any, fmt: str = "{:.3f}") -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def _diff(c: PairedComparison) -> str:
    """``+0.012 [-0.003, +0.020]``: the mean paired difference and its adjusted interval."""
    if math.isnan(c.mean_diff):
        return "–"
    f = "{:+.3f}" if abs(c.mean_diff) < 100 and abs(c.hi) < 100 else "{:+.3g}"
    return f"{f.format(c.mean_diff)} [{f.format(c.lo)}, {f.format(c.hi)}]"


def _verdict(c: PairedComparison) -> str:
    """The verdict, starred when too few tasks differ for a verdict at its adjusted level."""
    return c.verdict + ("*" if c.n_differ < min_tasks_for(c.adjusted_level) and not c.verdict.startswith("equivalent") else "")


_STAR = "*: too few tasks differ for a verdict at the comparison's adjusted level, so it reads inconclusive whatever the mean."


def _family_text(method: str, family_size: int, level: float) -> str:
    if method == "none" or family_size <= 1:
        return f"intervals at level {level:g}, no adjustment ({family_size} comparison)"
    name = {"holm": "Holm", "bh": "Benjamini-Hochberg"}.get(method, method)
    return f"{name}-adjusted over a family of {family_size} comparisons at family level {level:g}"


def verdict_words(section: Section) -> None:
    """Add the verdict words' definitions (:data:`VERDICT_DEFINITIONS`) to ``section``."""
    for k, v in VERDICT_DEFINITIONS.items():
        section.text(f"“{k}”: {v}.")


# -- which summarizer ----------------------------------------------------------------------------
def provenance_sections(results: Results) -> list[Section]:
    """ "What produced these numbers": the summarizer(s), the offline caveat, and retention of
    the summary alone beside retention of the whole view."""
    s = Section("What produced these numbers: summarizer and scope")
    sr = V.summarizer_runs(results)
    if len(sr) == 0:
        s.note("No successful runs.")
        return [s]
    names = ", ".join(sr["summarizer"])
    offline = bool(sr["offline"].all())
    if offline:
        s.note(
            f"Summarizer: {names} — offline stand-in(s), no model wrote these summaries. Offline results rank compaction "
            "mechanisms (what each policy keeps, when it compacts, how often it truncates) under one fixed extraction whose "
            "bias is known; they do not measure how well a model's summaries preserve information. A ranking that holds under "
            "two different offline extractions (offline and offline_recent) is more robust than one that holds under one."
        )
    else:
        model = ", ".join(sr.loc[~sr["offline"], "summarizer"])
        s.note(f"Summarizer(s): {names}. Model-written summaries come from {model}; rows from offline stand-ins rank mechanisms, not a model's summaries.")
    s.table(sr, "Runs per summarizer variant (ok runs).")
    sc = V.scope_retention(results)
    if len(sc):
        t = sc.rename(columns={"view_retention": "retention (view sent)", "anchors_retention": "retention (summary only)"})
        t["tasks compacted"] = [f"{a}/{b}" for a, b in zip(sc["n_tasks_compacted"], sc["n_tasks"])]
        t = t.drop(columns=["n_tasks", "n_tasks_compacted"])
        s.table(
            t,
            "Per configuration, mean over tasks of the per-task mean. View: the whole request sent (pinned messages, summary, "
            'kept tail). Summary only: the compaction summary alone (probe scope "anchors"); – for a configuration that never '
            "called the summarizer. A view score well above the summary-only score is carried by the kept tail, not by the summary.",
        )
        never = sc[sc["n_tasks_compacted"] < sc["n_tasks"]]
        if len(never):
            s.note(
                f'Did not compact on every task ("tasks compacted" column): {", ".join(never["config"])}; on those tasks '
                "their score is the uncompacted history's and says nothing about their compaction."
            )
    return [s]


# -- every configuration vs the default -------------------------------------------------------------
def _headline_table(h: H.Headline) -> Any:
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


def headline_sections(results: Results, *, n_resamples: int = 1000, seed: int = 0, level: float = DEFAULT_LEVEL) -> list[Section]:
    """Every configuration against harness9's default (same summarizer), task-level paired."""
    s = Section("Strategy comparison: each configuration vs harness9's default")
    h = H.versus_default(results, n_resamples=n_resamples, seed=seed, level=level)
    if h is None or not h.comparisons:
        s.note(
            f"No harness9-default configuration in these results (a progressive entry named {H.DEFAULT_NAME!r}, or one "
            "that sets only the window), so no configuration is compared with it."
        )
        return [s]
    s.text(
        f"Baseline: {', '.join(h.baselines)}. Each row: configuration A minus the baseline B, paired by task (history modes, "
        "repeats and checkpoints are averaged inside each task first; deterministic repeats count once), percentile "
        f"bootstrap over tasks ({n_resamples} resamples, seed {seed}); {_family_text(h.method, h.family_size, level)}. "
        "Verdicts are read from the adjusted interval, never from the mean:"
    )
    verdict_words(s)
    s.table(
        _headline_table(h),
        "Metrics: "
        + "; ".join(f"{m} = {_METRIC_TEXT[m]}" for m in H.HEADLINE_METRICS)
        + ". Verdict (k/n): k of the n paired tasks have a paired difference that is not 0. "
        + _STAR,
    )
    cov = h.coverage
    low = [c for c in cov.index if cov.loc[c, "n_tasks_compacted"] < cov.loc[c, "n_tasks"]]
    if low:
        s.note(
            f'Never compacted on some tasks ("tasks compacted" < tasks run): {", ".join(sorted(map(str, low)))}; a difference '
            "on those tasks is not a difference in compaction."
        )
    small = sorted({c.n_differ for c in h.comparisons if c.n_differ < min_tasks_for(c.adjusted_level) and not c.verdict.startswith("equivalent")})
    if small:
        s.note(
            f"Starred verdicts rest on {', '.join(map(str, small))} task(s) that differ: too few for a verdict at their adjusted level "
            f"(at least {min_tasks_for(level)} at {level:g}, more after adjustment), so they read inconclusive whatever the mean."
        )
    summs = sorted(str(v) for v in results.ok["summarizer"].dropna().unique()) if "summarizer" in results.ok.columns else []
    if len(summs) > 1:
        # the same strategy under each offline extractor: robust only when every extractor gives the same verdict
        comps, under = [], []
        for c in h.comparisons:
            sm = next((x for x in summs if c.a.endswith(":" + x)), None)
            if sm is not None:
                comps.append(dataclasses.replace(c, a=c.a[: -len(sm) - 1]))
                under.append(sm)
        if comps:
            rob = CMP.robustness_frame(comps, under)
            wide = rob.pivot_table(index=["a", "metric"], columns="summarizer", values="verdict", aggfunc="first").reset_index()
            wide = wide.merge(rob.groupby(["a", "metric"], as_index=False)["robust"].first(), on=["a", "metric"])
            n_not = int((~wide["robust"]).sum())
            s.note(f"Robust to the stand-in: {len(wide) - n_not} of {len(wide)} (configuration, metric) verdicts agree under every "
                   f"offline extractor ({', '.join(summs)}); the others depend on which stand-in wrote the summaries.")
            s.table(wide.rename(columns={"a": "config"}), "The verdict vs harness9's default under each extractor; robust: all agree.")
    over = H.overflowing(run_table(results))
    if over:
        s.note(
            "Overflowed the window (some request larger than the window, so its retention is of a request no model would "
            "accept): " + ", ".join(f"{k} ({v} calls)" for k, v in over.items()) + "."
        )
    return [s]


# -- improvement options ------------------------------------------------------------------------------
def option_sections(results: Results, *, n_resamples: int = 1000, seed: int = 0, level: float = DEFAULT_LEVEL) -> list[Section]:
    """Each option judged on its target metrics, with retention as a guard (one family)."""
    import pandas as pd

    s = Section(OPTIONS_TITLE)
    vs = O.judge_options(results, n_resamples=n_resamples, seed=seed, level=level)
    if not vs:
        s.note(
            "No progressive configuration in these results differs from a baseline only in improvement options "
            f"({', '.join(t.option for t in O.OPTION_TARGETS)}), so no option is judged here."
        )
        return [s]
    comps = [c for v in vs for c in (*v.targets, *v.guard)]
    fam = comps[0].family_size if comps else 0
    s.text(
        "Each option is judged on what it exists to change (its targets) and on retention as a guard, variant minus baseline "
        f"(same parameters without the option), paired by task; {_family_text('holm', fam, level)} ({len(vs)} variant(s) × their "
        f'metrics). Overall: {O.OVERALL_RULE}. Verdict words as defined in the strategy comparison; "inconclusive" means '
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
        "One row per option and metric; baseline/with option: means over tasks. Smaller is better for calls, emergencies, overwrites and peak tokens. " + _STAR,
    )
    for v in vs:
        why = " (meant to: " + "; ".join(O.option_target(o).rationale for o in v.options) + ")"
        differ = max((c.n_differ for c in (*v.targets, *v.guard)), default=0)
        n = max((c.n_tasks for c in (*v.targets, *v.guard)), default=0)
        line = f"{v.option}: {v.overall}{why}; at most {differ} of {n} task(s) differ from the baseline on any judged metric."
        if differ == 0:
            s.note(line + " The option changed nothing measurable on these tasks: the data did not exercise it.")
        else:
            s.text(line)
    return [s]


# -- probe validity ------------------------------------------------------------------------------------
def probe_validity_sections(results: Results, placebo: Any = None, *, seed: int = 0) -> list[Section]:
    """The placebo floor beside retention per probe kind; excluded and pinned probes apart."""
    s = Section("Probe validity: placebo floor and pinned answers")
    if results.probes is None or len(results.probes) == 0:
        s.note("The sweep ran no probes.")
        return [s]
    if placebo is None:
        try:
            placebo = V.placebo_for(results, seed=seed)
        except Exception as e:  # noqa: BLE001 - a moved recording must not sink the whole report
            s.note(f"Placebo control not available: could not reload the tasks ({type(e).__name__}: {e}).")
            placebo = V.placebo_from_rows(None)
    pv = V.probe_validity(results, placebo)
    src = placebo.attrs.get("source", "given") if hasattr(placebo, "attrs") else "given"
    s.text(
        "Placebo control: every probe of a task is scored against the full history of unrelated tasks; the placebo rate is how "
        f"often it passes there (chance, not memory). A probe passing more than {V.PLACEBO_THRESHOLD:.0%} of the time is "
        f"excluded from retention_kept. Placebo source: {src}. Pinned rows: the answer is in the system prompt or the pinned "
        "first message, which every policy keeps: they measure pinning, not memory, so retention_unpinned is the memory number."
    )
    s.table(pv, "Per probe kind (recall scorer, view scope, answerable rows). retention here counts every answerable row; "
            "elsewhere in this report retention is retention_kept without the pinned rows (memory).")
    if len(pv):
        chance = pv[pv["placebo_rate"].notna() & (pv["placebo_rate"] >= 0.5 * pv["retention"])]
        if len(chance):
            s.note(
                "Near chance: for "
                + ", ".join(f"{r.probe_kind} (placebo {r.placebo_rate:.2f} vs retention {r.retention:.2f})" for r in chance.itertuples())
                + " the placebo floor is at least half the retention: those probes pass largely by coincidence."
            )
        n_ex = int(pv["n_excluded"].sum())
        if n_ex:
            s.note(f"{n_ex} of {int(pv['n_probes'].sum())} probes are excluded by the placebo control; retention elsewhere in this report leaves them out.")
        pinned = pv[pv["n_pinned_rows"] > 0]
        if len(pinned):
            s.note(
                "Pinned answers: "
                + ", ".join(
                    f"{r.probe_kind} {r.n_pinned_rows} row(s), retention {_num(r.retention_pinned)} pinned vs {_num(r.retention_unpinned)} not"
                    for r in pinned.itertuples()
                )
                + "."
            )
    rk = retention_rankings(run_table(results))
    if len(rk) and (rk["rank_moved"].fillna(0) != 0).any():
        s.note(
            "The ranking by retention (memory, pinned probes left out) differs from the ranking with the pinned probes "
            f"averaged in for {int((rk['rank_moved'].fillna(0) != 0).sum())} of {len(rk)} configurations; both are shown. "
            "This report ranks by memory."
        )
        s.table(rk, "rank: by retention without pinned probes (mean over tasks); rank_with_pinned: with them; rank_moved: the difference.")
    return [s]


# -- overflows ----------------------------------------------------------------------------------------
def overflow_sections(results: Results, *, names: Any = None) -> list[Section]:
    """Every call over the window, with the message that made the request too large
    (:func:`h9eval.analysis.coverage.overflow_causes`); none when nothing overflowed."""
    import pandas as pd

    calls = results.calls
    if calls is None or not len(calls) or not calls["overflow"].fillna(False).astype(bool).any():
        return []
    s = Section("Overflows: which message made the request too large")
    try:
        tasks = V.sweep_tasks(results)
    except Exception as e:  # noqa: BLE001 - a moved recording must not sink the whole report
        s.note(f"The tasks could not be reloaded ({type(e).__name__}); the messages are not named.")
        tasks = []
    oc = C.overflow_causes(calls, tasks, names=names)
    per = oc.groupby("config").agg(overflowing_calls=("call_index", "size"), tasks=("task_id", "nunique"),
                                   alone_over_window=("message_alone_over_window", "sum")).reset_index()
    s.text(f"{len(oc)} call(s) of {len(calls)} sent a request larger than the window. For each, the newest message (the one the "
           "request answers) and its size: when it alone is larger than the window no policy could have avoided the overflow; "
           "otherwise the policy kept too much before it.")
    s.table(per.sort_values("overflowing_calls", ascending=False, kind="stable"), "Overflowing calls per configuration.")
    # the controls' overflows are by construction (keep_all sends everything): the detail shows the strategies'
    detail = oc[~oc["config"].isin(["keep_all", "drop_all"])]
    if len(detail):
        s.table(pd.DataFrame(detail[["config", "task_id", "history_mode", "call_index", "cause"]]).head(40),
                "The strategies' overflowing calls (first 40; keep_all, which sends everything, overflows by construction).")
    else:
        s.note("Only the keep_all control overflowed (it sends the whole transcript by construction).")
    return [s]


# -- emergency checkpoints ----------------------------------------------------------------------------
def emergency_sections(results: Results, *, n_resamples: int = 1000, seed: int = 0, level: float = DEFAULT_LEVEL) -> list[Section]:
    """Share of probe checkpoints at the emergency tier, and the comparison under legacy_last1."""
    import pandas as pd

    s = Section("Emergency checkpoints and the reconstructed emergency rule")
    es = V.emergency_share(results)
    if len(es) == 0:
        s.note("No probe rows: nothing was measured at emergency checkpoints.")
        return [s]
    table = run_table(results)
    defaults = [d for d in (H.default_config(table, sm) for sm in sorted(table["summarizer"].dropna().unique())) if d]
    s.text(
        'harness9\'s emergency truncation rule (anchor_greedy_v3, forced_truncation="anchor_greedy_v3") is reconstructed from '
        "harness9's description, not verified against its code; checkpoints taken at the emergency tier score that rule."
    )
    s.table(
        es.rename(columns={"emergency_frac": "share of checkpoints", "emergency_row_frac": "share of probe rows"}),
        "Per configuration: checkpoints (run × call) with probe rows, how many were at the emergency tier, and runs with at least one forced truncation.",
    )
    for d in defaults:
        r = es[es["config"] == d]
        if len(r) and r["emergency_frac"].iloc[0] > 0:
            s.note(
                f"{d}: {r['emergency_frac'].iloc[0]:.0%} of its checkpoints ({r['emergency_row_frac'].iloc[0]:.0%} of its probe rows) "
                "are at the emergency tier, scored under the reconstructed rule."
            )
    legacy = [(d, H.legacy_variant(table, d)) for d in defaults]
    legacy = [(d, v) for d, v in legacy if v]
    if not legacy:
        s.text(
            'These results hold no legacy_last1 variant of the default (a progressive entry with forced_truncation="legacy_last1" '
            "and otherwise the default's parameters), so the comparison is not repeated under the other rule."
        )
        return [s]
    for d, lg in legacy:
        base = H.versus_default(results, baseline=d, metrics=("retention",), n_resamples=n_resamples, seed=seed, level=level, exclude=[lg])
        alt = H.versus_default(results, baseline=lg, metrics=("retention",), n_resamples=n_resamples, seed=seed, level=level, exclude=[d])
        direct = H.versus_default(
            results,
            baseline=d,
            metrics=H.HEADLINE_METRICS,
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
            f"({_family_text(base.method, base.family_size, level)}). A verdict that changes between the columns depends on "
            "the reconstructed rule. " + _STAR,
        )
        changed = [r["configuration"] for r in rows if r["verdict (anchor_greedy_v3)"] != r["verdict (legacy_last1)"]]
        if changed:
            s.note(f"{len(changed)} verdict(s) change with the emergency rule: " + ", ".join(changed) + ".")
        else:
            s.text("No verdict changes with the emergency rule.")
        if direct is not None:
            s.text(f"{lg} vs {d} directly: " + "; ".join(f"{c.metric} {_diff(c)} → {_verdict(c)}" for c in direct.comparisons) + ".")
    return [s]


# -- llm scorer ------------------------------------------------------------------------------------------
def llm_sections(results: Results, audit: Any = None) -> list[Section]:
    """Judge-vs-exact agreement (with n) and the audit summary; nothing when the llm scorer did
    not run. ``audit``: the llm scorer's audit table (:data:`h9eval.probes.llm.AUDIT_COLUMNS`)."""
    p = results.probes
    if p is None or len(p) == 0 or not p["method"].isin(["llm", "llm_exact"]).any():
        return []
    s = Section("LLM scorer: judge agreement and audit")
    overall, per = V.llm_agreement(results)
    if overall.n == 0:
        s.note("The llm scorer ran, but no fact probe was graded by both the judge and exact matching: its judge is not calibrated here.")
    else:
        s.text(
            f"On answerable fact probes the judge agrees with exact matching on {overall.agreement:.1%} of n={overall.n} observations "
            f"({overall.judge_yes_exact_no} judge yes / exact no: a lenient judge or a paraphrased value; "
            f"{overall.judge_no_exact_yes} judge no / exact yes: a strict judge)."
        )
        s.table(per, "Per configuration: n paired observations (same run, checkpoint, probe and scope) and the agreement.")
        if overall.n < 30:
            s.note(f"Only {overall.n} paired observations: the agreement rate is a rough calibration.")
    a = V.audit_summary(audit)
    if len(a):
        s.table(a, "LLM scorer audit: replies per role (answer, judge, action), cache hits, tokens and cost in USD.")
    else:
        s.note("No audit table given: the answers, verdicts and their cost (LLMScorer.audit) are not shown here.")
    return [s]
