"""The setup-and-trust sections of a report: what ran and how far the numbers can be trusted.

Each function takes the report's :class:`~h9eval.analysis.report.context.ReportContext` (or a
:class:`~h9eval.results.store.Results`) and returns a list of
:class:`~h9eval.analysis.report.model.Section` (empty when it has nothing to show). Every
number comes from :mod:`h9eval.analysis` (``validity``, ``coverage``, ``metrics``,
``token_accuracy``); these functions only choose, format and put the caveat next to the number
it qualifies.

* :func:`setup_sections`: the sweep, its cells, provenance and the resolved spec (paths shortened);
* :func:`configuration_sections`: the name each configuration has and what it changes;
* :func:`coverage_sections`: did the data exercise the policies?
* :func:`provenance_sections`: which summarizer produced the results, and that offline results
  rank mechanisms, not a model's summaries; summary-only (anchors-scope) retention beside view
  retention;
* :func:`probe_validity_sections`: the placebo floor per probe kind beside retention, excluded
  probes counted, pinned answers reported apart from memory;
* :func:`emergency_sections`: the share of probe checkpoints at the emergency tier (a
  reconstructed rule) and the headline comparison again under ``legacy_last1``;
* :func:`token_estimate_sections`: bytes/4 against a BPE count on the sweep's own tasks;
* :func:`llm_sections`: judge-vs-exact agreement (with n) and the audit's cost summary, when
  the llm scorer ran.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from h9eval.analysis import coverage
from h9eval.analysis import metrics
from h9eval.analysis import plots
from h9eval.analysis import token_accuracy
from h9eval.analysis import validity as V
from h9eval.analysis.compare import retention_rankings, run_table
from h9eval.analysis.report.context import ReportContext
from h9eval.analysis.report.model import Section, num_text, short_list
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS
from h9eval.results.store import Results
from h9eval.tasks import load_tasks_from_spec

__all__ = [
    "configuration_sections",
    "coverage_sections",
    "llm_sections",
    "probe_validity_sections",
    "provenance_sections",
    "setup_sections",
    "token_estimate_sections",
]


def _short_paths(v: Any) -> Any:
    """``v`` with every absolute path cut to its last two parts: the spec as the reader wrote it
    matters, not this machine's folders."""
    if isinstance(v, str) and v.startswith("/") and len(Path(v).parts) > 3:
        return "…/" + "/".join(Path(v).parts[-2:])
    if isinstance(v, Mapping):
        return {k: _short_paths(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_short_paths(x) for x in v]
    return v


def setup_sections(ctx: ReportContext) -> list[Section]:
    """The sweep: its cells, provenance, the resolved spec (paths shortened) and failed runs."""
    res = ctx.results
    s = Section("Setup and provenance", part="details")
    m = res.manifest
    prov = m.get("provenance", {}) or {}
    runs = res.runs
    n_ok = int((runs["status"] == "ok").sum()) if len(runs) else 0
    tables = (
        f"{len(res.calls):,} model calls, {len(res.compactions):,} compaction records, {len(res.probes):,} probe rows."
    )
    if m.get("kind") in ("run", "episode"):
        s.text(f"One {m['kind']} in {res.path}: {tables}")
        if m.get("replay"):
            s.code("\n".join(f"{k}: {v}" for k, v in sorted(m["replay"].items())))
    else:
        s.text(
            f"Sweep {m.get('name', '?')!s} in {res.path}: {len(m.get('cells', []))} cells, {n_ok} ok, "
            f"{len(runs) - n_ok} failed, {len(m.get('skipped', []) or [])} skipped; "
            f"{runs['task_id'].nunique() if len(runs) else 0} task(s), {tables}"
        )
    keys = ("git_revision", "git_dirty", "h9eval_version", "python", "platform", "hostname")
    info = {k: prov.get(k) for k in keys if k in prov}
    info.update({k: m.get(k) for k in ("created", "h9eval_version") if k in m})
    if info:
        s.code("\n".join(f"{k}: {v}" for k, v in info.items()))
    spec = m.get("spec_resolved") or m.get("spec")
    if spec:
        s.text("Run specification:" if m.get("kind") in ("run", "episode") else "Sweep specification (as resolved):")
        # one line per top-level key: readable without scrolling through a nested dump
        s.code(
            "\n".join(
                f"{k} = {json.dumps(_short_paths(v), sort_keys=True, default=str, ensure_ascii=False)}"
                if k != "policies"
                else f"policies = {len(v)} entries (see Configurations)"
                for k, v in sorted(spec.items())
            )[:6000]
        )
    if len(runs) and n_ok < len(runs):
        bad = runs[runs["status"] != "ok"][["run_id", "error"]]
        s.table(bad, "Failed runs (excluded from every number in this report)")
    return [s]


def configuration_sections(ctx: ReportContext) -> list[Section]:
    """The name each configuration has in every table and figure, and what it changes."""
    import pandas as pd

    runs = ctx.results.runs
    runs = runs[runs["status"] == "ok"] if len(runs) and "status" in runs.columns else runs
    if not len(runs):
        return []
    s = Section("Configurations", part="details")
    rows = []
    for r in (
        runs.assign(label=[ctx.names.get(x, "") for x in runs["run_id"]]).drop_duplicates("label").to_dict("records")
    ):
        diff = metrics.params_diff(str(r.get("policy_kind", "")), r.get("params_json"))
        rows.append(
            {
                "configuration": r["label"],
                "kind": r.get("policy_kind", ""),
                "parameters changed from the kind's defaults": ", ".join(f"{k}={v}" for k, v in diff.items())
                or "(defaults)",
                "summarizer": r.get("summarizer", ""),
            }
        )
    t = pd.DataFrame(rows)
    if t["summarizer"].nunique() <= 1:
        t = t.drop(columns=["summarizer"])
    s.table(
        t,
        "The name each configuration has in every table and figure, and what it changes; the controls keep_all "
        "(nothing dropped) and drop_all (everything dropped) are bounds, never pooled with the strategies.",
    )
    return [s]


def token_estimate_sections(ctx: ReportContext) -> list[Section]:
    """Token-estimate error on the sweep's own tasks (reloaded from their specs; nothing for the
    closed loop's worlds, which are not task files)."""
    import pandas as pd

    res, max_tasks = ctx.res, ctx.token_error_tasks
    s = Section("Token-estimate error (bytes/4 vs BPE)", part="details")
    runs = res.runs
    specs = (
        [x for x in dict.fromkeys(runs["task_spec"].dropna()) if not str(x).startswith("world:")]
        if len(runs) and "task_spec" in runs.columns
        else []
    )
    if not specs:
        return []
    try:
        windows = res.calls.groupby("task_id")["context_window_tokens"].first().to_dict() if len(res.calls) else {}
        mts: list[Any] = []
        cts: list[Any] = []
        seen: set[str] = set()
        for spec in specs[: max_tasks * 2]:
            for t in load_tasks_from_spec(str(spec)):
                if t.task_id in seen or t.task_id not in set(runs["task_id"]) or len(seen) >= max_tasks:
                    continue
                seen.add(t.task_id)
                mts.append(token_accuracy.message_token_table(t.messages, task_id=t.task_id))
                cts.append(
                    token_accuracy.call_token_table(
                        t, context_window_tokens=int(windows.get(t.task_id, DEFAULT_CONTEXT_WINDOW_TOKENS))
                    )
                )
    except Exception:  # noqa: BLE001 - a moved recording must not sink the whole report
        s.note(
            "Not shown: the sweep's task files could not be reloaded from where the sweep read them (moved or deleted "
            "since)."
        )
        return [s]
    if not mts:
        return []
    mt = pd.concat(mts, ignore_index=True)
    ct = pd.concat(cts, ignore_index=True)
    err = metrics.token_estimate_error(mt)
    bad = metrics.tier_misclassification(ct)
    bad_cal = (
        metrics.tier_misclassification(ct, estimate_col="history_tokens_calibrated")
        if "history_tokens_calibrated" in ct.columns
        else None
    )
    s.text(
        f"Measured on {len(seen)} task(s) of this sweep ({len(mt):,} messages), uncompacted history before each call, "
        "BPE = quicktok o200k_base. Negative error: the estimate undercounts."
    )
    s.table(
        err,
        "Per content kind: error = sum(estimate)/sum(BPE) - 1; abs_error_median = median per-message |estimate/BPE - "
        "1|.",
    )
    allrow = err[err["kind"] == "all"].iloc[0]
    s.text(
        f"Overall bytes/4 is off by {allrow['est_error']:+.1%} and the calibrated estimate by "
        f"{allrow.get('calibrated_error', math.nan):+.1%}. {len(bad)} of {len(ct)} calls "
        f"({len(bad) / max(len(ct), 1):.1%}) would be put in a different tier (or on the other side of the window) "
        f"by bytes/4 than by the BPE count; {int((bad['direction'] == 'under').sum()) if len(bad) else 0} of them too "
        "late."
    )
    if bad_cal is not None:
        n_late = int((bad_cal["direction"] == "under").sum()) if len(bad_cal) else 0
        fixed = len(bad) - len(bad_cal)
        s.text(
            f'With the calibrated estimate (the `tier_token_counter="calibrated"` option) {len(bad_cal)} of {len(ct)} '
            "calls "
            f"({len(bad_cal) / max(len(ct), 1):.1%}) disagree with BPE, {n_late} of them too late: "
            + (
                f"it fixes {fixed} of the {len(bad)} disagreements."
                if fixed > 0
                else "it does not reduce the disagreements on this data."
            )
        )
    if len(bad):
        s.table(
            bad[
                ["task_id", "call_index", "history_tokens", "history_tokens_bpe", "est_tier", "bpe_tier", "direction"]
            ].head(20),
            "Misclassified calls (first 20)",
        )

    s.figure(
        "token_estimate_error",
        plots.token_estimate_error(mt, ct),
        "Token-estimate error per content kind; per-call estimate vs BPE with tier disagreements in red.",
    )
    return [s]


def coverage_sections(ctx: ReportContext) -> list[Section]:
    """Did the data exercise the policies? Per configuration and mode, the tasks whose calls
    reached each tier and the tasks it never compacted on (:mod:`h9eval.analysis.coverage`)."""
    if not len(ctx.rm) or not len(ctx.res.calls):
        return []
    s = Section("Coverage: did the data exercise the policies?", part="details")
    cov = coverage.coverage(ctx.res.calls, ctx.res.runs, names=ctx.names)
    ids = [x.split(", ") if x else [] for x in cov["never_compacted_task_ids"]]
    t = cov.drop(columns=["never_compacted_task_ids", "never_compacted_tasks"])
    if "summarizer" in t.columns and t["summarizer"].nunique() <= 1:
        t = t.drop(columns=["summarizer"])
    t = t.rename(
        columns={
            "label": "configuration",
            "history_mode": "mode",
            "n_tasks": "tasks",
            "n_compactions": "compacting calls",
        }
    )
    t.columns = [c.replace("reached_", "reached ").replace("_", " ") for c in t.columns]
    t["never compacted on"] = [short_list(x, "tasks") if x else "–" for x in ids]
    s.table(
        t,
        "Per configuration: tasks whose calls reached each tier (the tier the policy's compaction ran at), compacting "
        "calls in all, tasks whose uncompacted transcript reaches harness9's warn fraction (0.6) of the window at its "
        "peak (uncompacted over warn), and the tasks it never compacted on (their scores there are the uncompacted "
        "transcript's and say nothing about the policy).",
    )
    if "retention" in ctx.rm.columns and ctx.rm["retention"].notna().any():
        cr = coverage.conditional_retention(ctx.rm).rename(
            columns={
                "label": "configuration",
                "history_mode": "mode",
                "n_runs": "runs",
                "retention_after_compaction": "retention after compacting",
                "runs_with_compaction_before_a_checkpoint": "runs compacted before a checkpoint",
                "never_compacted_runs": "runs never compacted",
            }
        )
        if "summarizer" in cr.columns and cr["summarizer"].nunique() <= 1:
            cr = cr.drop(columns=["summarizer"])
        s.table(
            cr,
            "Retention on the shared checkpoint grid (the main number) and, separately, after the policy compacted at "
            "least once (grid checkpoints after its first compaction); the second compares configurations at different "
            "moments and is never mixed into the main number.",
        )
    return [s]


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
            f"Summarizer: {names} — offline stand-in(s), no model wrote these summaries. Offline results rank "
            "compaction "
            "mechanisms (what each policy keeps, when it compacts, how often it truncates) under one fixed extraction "
            "whose "
            "bias is known; they do not measure how well a model's summaries preserve information. A ranking that "
            "holds under "
            "two different offline extractions (offline and offline_recent) is more robust than one that holds under "
            "one."
        )
    else:
        model = ", ".join(sr.loc[~sr["offline"], "summarizer"])
        s.note(
            f"Summarizer(s): {names}. Model-written summaries come from {model}; rows from offline stand-ins rank "
            "mechanisms, not a model's summaries."
        )
    s.table(sr, "Runs per summarizer variant (ok runs).")
    sc = V.scope_retention(results)
    if len(sc):
        t = sc.rename(
            columns={"view_retention": "retention (view sent)", "anchors_retention": "retention (summary only)"}
        )
        t["tasks compacted"] = [f"{a}/{b}" for a, b in zip(sc["n_tasks_compacted"], sc["n_tasks"])]
        t = t.drop(columns=["n_tasks", "n_tasks_compacted"])
        s.table(
            t,
            "Per configuration, mean over tasks of the per-task mean. View: the whole request sent (pinned messages, "
            "summary, "
            'kept tail). Summary only: the compaction summary alone (probe scope "anchors"); – for a configuration '
            "that never "
            "called the summarizer. A view score well above the summary-only score is carried by the kept tail, not "
            "by the summary.",
        )
        never = sc[sc["n_tasks_compacted"] < sc["n_tasks"]]
        if len(never):
            s.note(
                f'Did not compact on every task ("tasks compacted" column): {", ".join(never["config"])}; on those '
                "tasks "
                "their score is the uncompacted history's and says nothing about their compaction."
            )
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
        except Exception:  # noqa: BLE001 - a moved recording must not sink the whole report
            s.note(
                "Placebo control not available: the sweep's task files could not be reloaded (moved or deleted since "
                "the sweep)."
            )
            placebo = V.placebo_from_rows(None)
    pv = V.probe_validity(results, placebo)
    src = placebo.attrs.get("source", "given") if hasattr(placebo, "attrs") else "given"
    s.text(
        "Placebo control: every probe of a task is scored against the full history of unrelated tasks; the placebo "
        "rate is how "
        f"often it passes there (chance, not memory). A probe passing more than {V.PLACEBO_THRESHOLD:.0%} of the time "
        "is "
        f"excluded from retention_kept. Placebo source: {src}. Pinned rows: the answer is in the system prompt or the "
        "pinned "
        "first message, which every policy keeps: they measure pinning, not memory, so retention_unpinned is the "
        "memory number."
    )
    s.table(
        pv,
        "Per probe kind (recall scorer, view scope, answerable rows). retention counts every answerable row, as the "
        "rest of this report does.",
    )
    if len(pv):
        chance = pv[pv["placebo_rate"].notna() & (pv["placebo_rate"] >= 0.5 * pv["retention"])]
        if len(chance):
            s.note(
                "Near chance: for "
                + ", ".join(
                    f"{r.probe_kind} (placebo {r.placebo_rate:.2f} vs retention {r.retention:.2f})"
                    for r in chance.itertuples()
                )
                + " the placebo floor is at least half the retention: those probes pass largely by coincidence."
            )
        n_ex = int(pv["n_excluded"].sum())
        if n_ex:
            s.note(
                f"{n_ex} of {int(pv['n_probes'].sum())} probes are excluded by the placebo control; retention "
                "elsewhere in this report leaves them out."
            )
        pinned = pv[pv["n_pinned_rows"] > 0]
        if len(pinned):
            s.note(
                "Pinned answers: "
                + ", ".join(
                    f"{r.probe_kind} {r.n_pinned_rows} row(s), retention {num_text(r.retention_pinned)} pinned vs "
                    f"{num_text(r.retention_unpinned)} not"
                    for r in pinned.itertuples()
                )
                + "."
            )
    rk = retention_rankings(run_table(results))
    if len(rk) and (moved := rk["rank_moved"].fillna(0) != 0).any():
        s.note(
            "The ranking by retention (memory: pinned probes left out) differs from the ranking with the pinned probes "
            f"averaged in for {int(moved.sum())} of {len(rk)} configurations; both are shown. This report ranks by "
            "memory."
        )
        s.table(rk, "rank: by retention without pinned probes (mean over tasks); rank_with_pinned: with them.")
    return [s]


def overflow_sections(results: Results, *, names: Any = None) -> list[Section]:
    """Every strategy's call over the window, with the message that made the request too large
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
    oc = coverage.overflow_causes(calls, tasks, names=names)
    per = (
        oc.groupby("config")
        .agg(
            overflowing_calls=("call_index", "size"),
            tasks=("task_id", "nunique"),
            alone_over_window=("message_alone_over_window", "sum"),
        )
        .reset_index()
    )
    s.text(
        f"{len(oc)} call(s) of {len(calls)} sent a request larger than the window. For each, the newest message and "
        "its size: when it alone is larger than the window no policy could have avoided the overflow; otherwise the "
        "policy kept too much before it."
    )
    s.table(
        per.sort_values("overflowing_calls", ascending=False, kind="stable"), "Overflowing calls per configuration."
    )
    detail = oc[~oc["config"].isin(["keep_all", "drop_all"])]
    if len(detail):
        s.table(
            pd.DataFrame(detail[["config", "task_id", "history_mode", "call_index", "cause"]]).head(40),
            "The strategies' overflowing calls (first 40; keep_all, which sends everything, overflows by "
            "construction).",
        )
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
        s.note(
            "The llm scorer ran, but no fact probe was graded by both the judge and exact matching: its judge is not "
            "calibrated here."
        )
    else:
        s.text(
            f"On answerable fact probes the judge agrees with exact matching on {overall.agreement:.1%} of "
            f"n={overall.n} observations "
            f"({overall.judge_yes_exact_no} judge yes / exact no: a lenient judge or a paraphrased value; "
            f"{overall.judge_no_exact_yes} judge no / exact yes: a strict judge)."
        )
        s.table(
            per, "Per configuration: n paired observations (same run, checkpoint, probe and scope) and the agreement."
        )
        if overall.n < 30:
            s.note(f"Only {overall.n} paired observations: the agreement rate is a rough calibration.")
    a = V.audit_summary(audit)
    if len(a):
        a["cost_usd"] = a["cost_usd"].astype(object).where(a["cost_usd"].notna(), "unpriced")
        s.table(
            a,
            "LLM scorer audit: replies per role (answer, judge, action), cache hits, tokens and cost in USD "
            "(unpriced: a model without prices, its dollars unknown).",
        )
    else:
        s.note("No audit table given: the answers, verdicts and their cost (LLMScorer.audit) are not shown here.")
    return [s]
