"""Reports: a sweep's results (or harness9's own compaction records) as HTML and Markdown.

``write_report(results_dir)`` writes ``report.html`` (self-contained: figures embedded as
base64 PNG, inline CSS, no script and no external link) and ``report.md`` with its figures as
PNG files in ``figures/`` next to it. Every number comes from :mod:`h9eval.analysis.metrics`, every
figure from :mod:`h9eval.analysis.plots`; the recommendation is chosen from the data
(:func:`h9eval.analysis.metrics.recommend`), never written in advance.

Sections: setup and provenance, policies compared, token curves, tier transitions, anchor
retention, drift, summarizer calls and cost, token-estimate error, h9eval's improvement
options against the faithful default, recommendation.

``write_report_from_records(records_dir, out_dir)`` does the same for harness9's
``compaction_records/*.jsonl`` (token curve from tokens before/after, tier transitions between
consecutive records, anchor sections filled per record).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.core.errors import FormatError
from h9eval.core.paths import atomic_write, prepare_out_dir, write_text_atomic
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS
from h9eval.analysis import metrics as M
from h9eval.analysis import token_accuracy as TC
from h9eval.tasks import load_tasks_from_spec
from h9eval.analysis import plots as P
from h9eval.results.store import load_results
from h9eval.tasks.model import ANCHOR_KINDS
from h9eval.harness9.records_dir import read_records_dir

__all__ = ["ReportPaths", "write_report", "write_report_from_records"]

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:2px solid #444;padding-bottom:.2em}h2{border-bottom:1px solid #bbb;margin-top:2em}
table{border-collapse:collapse;font-size:12px;margin:.8em 0;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:12px;color:#555}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:12px}
.note{background:#fff8e1;border-left:4px solid #f9a825;padding:.4em .8em}
.rec{background:#e8f5e9;border-left:4px solid #2e7d32;padding:.4em .8em}
"""


@dataclass(frozen=True)
class ReportPaths:
    """Where a report went: ``html`` (self-contained), ``markdown`` (``report.md``), the PNG
    ``figures`` the Markdown links to, and the folder holding them all (``out_dir``)."""
    out_dir: Path
    html: Path
    markdown: Path
    figures: tuple[Path, ...] = ()


@dataclass
class _Section:
    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)  # (kind, payload)

    def text(self, s: str) -> None:
        self.blocks.append(("text", s))

    def note(self, s: str) -> None:
        self.blocks.append(("note", s))

    def rec(self, s: str) -> None:
        self.blocks.append(("rec", s))

    def code(self, s: str) -> None:
        self.blocks.append(("code", s))

    def table(self, df: Any, caption: str = "") -> None:
        self.blocks.append(("table", (df, caption)))

    def figure(self, name: str, fig: Any, caption: str) -> None:
        self.blocks.append(("figure", (name, fig, caption)))


# -- rendering ---------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:.3f}"
    return str(v)


def _rows(df: Any) -> tuple[list[str], list[list[str]]]:
    cols = [str(c) for c in df.columns]
    return cols, [[_fmt(v) for v in r] for r in df.itertuples(index=False, name=None)]


def _md_table(df: Any) -> str:
    cols, rows = _rows(df)
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    out = ["| " + " | ".join(esc(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    out += ["| " + " | ".join(esc(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def _html_table(df: Any) -> str:
    cols, rows = _rows(df)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _png(fig: Any, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _render(title: str, sections: list[_Section], out: Path) -> ReportPaths:
    prepare_out_dir(out, what="report folder")
    figdir = prepare_out_dir(out / "figures", what="report figures folder")
    md: list[str] = [f"# {title}", ""]
    hs: list[str] = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        "<nav><ol>" + "".join(f"<li>{html.escape(s.title)}</li>" for s in sections) + "</ol></nav>",
    ]
    figures: list[Path] = []
    for i, s in enumerate(sections, 1):
        md += [f"## {i}. {s.title}", ""]
        hs.append(f"<section><h2>{i}. {html.escape(s.title)}</h2>")
        for kind, payload in s.blocks:
            if kind in ("text", "note", "rec"):
                md += [("> " if kind != "text" else "") + payload, ""]
                cls = "" if kind == "text" else f" class='{kind}'"
                hs.append(f"<p{cls}>{html.escape(payload)}</p>")
            elif kind == "code":
                md += ["```", payload, "```", ""]
                hs.append(f"<pre>{html.escape(payload)}</pre>")
            elif kind == "table":
                df, cap = payload
                if cap:
                    md += [f"*{cap}*", ""]
                    hs.append(f"<p><em>{html.escape(cap)}</em></p>")
                md += [_md_table(df), ""]
                hs.append(_html_table(df))
            elif kind == "figure":
                name, fig, cap = payload
                data = _png(fig)
                p = figdir / f"{name}.png"
                with atomic_write(p) as f:
                    f.write(data)
                figures.append(p)
                md += [f"![{cap}](figures/{p.name})", "", f"*{cap}*", ""]
                b64 = base64.b64encode(data).decode("ascii")
                hs.append(
                    f"<figure><img alt='{html.escape(cap, quote=True)}' src='data:image/png;base64,{b64}'>"
                    f"<figcaption>{html.escape(cap)}</figcaption></figure>"
                )
        hs.append("</section>")
    hs.append("</body></html>")
    h = out / "report.html"
    m = out / "report.md"
    _atomic_write(h, "\n".join(hs))
    _atomic_write(m, "\n".join(md))
    return ReportPaths(out_dir=out, html=h, markdown=m, figures=tuple(figures))


def _atomic_write(path: Path, text: str) -> None:
    write_text_atomic(path, text + "\n")


# -- the sweep report --------------------------------------------------------------------------
def _ci_col(df: Any, m: str) -> list[str]:
    return [
        "–" if (isinstance(v, float) and math.isnan(v)) else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
        for v, lo, hi in zip(df[m], df[f"{m}_ci_lo"], df[f"{m}_ci_hi"])
    ]


def _setup_section(res: Any) -> _Section:
    s = _Section("Setup and provenance")
    m = res.manifest
    prov = m.get("provenance", {}) or {}
    runs = res.runs
    n_ok = int((runs["status"] == "ok").sum()) if len(runs) else 0
    s.text(
        f"Sweep {m.get('name', '?')!s} in {res.path}: {len(m.get('cells', []))} cells, {n_ok} ok, "
        f"{len(runs) - n_ok} failed, {len(m.get('skipped', []) or [])} skipped; "
        f"{runs['task_id'].nunique() if len(runs) else 0} task(s), {len(res.calls):,} model calls, "
        f"{len(res.compactions):,} compaction records, {len(res.probes):,} probe rows."
    )
    keys = ("git_revision", "git_dirty", "h9eval_version", "python", "platform", "hostname")
    info = {k: prov.get(k) for k in keys if k in prov}
    info.update({k: m.get(k) for k in ("created", "h9eval_version") if k in m})
    if info:
        s.code("\n".join(f"{k}: {v}" for k, v in info.items()))
    spec = m.get("spec_resolved") or m.get("spec")
    if spec:
        s.text("Sweep specification (as resolved):")
        # one line per top-level key: readable without scrolling through a nested dump
        s.code("\n".join(f"{k} = {json.dumps(v, sort_keys=True, default=str)}" for k, v in sorted(spec.items()))[:6000])
    if len(runs) and n_ok < len(runs):
        bad = runs[runs["status"] != "ok"][["run_id", "error"]]
        s.table(bad, "Failed runs (excluded from every number below)")
    return s


def _policies_section(cm: Any) -> _Section:
    s = _Section("Policies compared")
    if len(cm) == 0:
        s.note("No successful runs.")
        return s
    t = cm[[c for c in ("label", "history_mode", "summarizer", "n_runs") if c in cm.columns]].copy()
    t["tokens saved [95% CI]"] = _ci_col(cm, "tokens_saved")
    t["retention [95% CI]"] = _ci_col(cm, "retention")
    for c in ("overflows", "emergencies", "fallbacks", "summarizer_calls", "summarizer_cost_usd"):
        if c in cm.columns:
            t[c if c not in ("summarizer_calls", "summarizer_cost_usd") else c + "_per_run"] = cm[c]
    s.table(t, "One row per configuration; CIs are percentile bootstraps (1,000 resamples, seed 0) across tasks.")
    s.text(
        "tokens saved = 1 - mean(tokens sent) / mean(history tokens) per run; retention = mean recall-probe "
        "score over answerable probes of the sent view. Overflows and emergencies are totals over the runs."
    )
    if "history_mode" in cm.columns and (cm["history_mode"] == "write_back").any():
        s.note(
            "In write_back mode the history is the written-back (already compacted) history, so tokens saved only "
            "counts each call's own compaction and may be slightly negative (tool schemas); compare write_back "
            "configurations by retention and peak tokens sent rather than by tokens saved."
        )
    return s


def _token_estimate_section(res: Any, max_tasks: int = 4) -> tuple[_Section, Any]:
    """Token-estimate error on the sweep's own tasks (reloaded from their specs)."""
    import pandas as pd

    s = _Section("Token-estimate error (bytes/4 vs BPE)")
    runs = res.runs
    if "task_spec" not in runs.columns or len(runs) == 0:
        s.note("Not available: the runs table names no task specs.")
        return s, None
    try:
        windows = res.calls.groupby("task_id")["context_window_tokens"].first().to_dict() if len(res.calls) else {}
        mts, cts, seen = [], [], set()
        for spec in list(dict.fromkeys(runs["task_spec"].dropna()))[: max_tasks * 2]:
            for t in load_tasks_from_spec(str(spec)):
                if t.task_id in seen or t.task_id not in set(runs["task_id"]) or len(seen) >= max_tasks:
                    continue
                seen.add(t.task_id)
                mts.append(TC.message_token_table(t.messages, task_id=t.task_id))
                cts.append(TC.call_token_table(t, context_window_tokens=int(windows.get(t.task_id, DEFAULT_CONTEXT_WINDOW_TOKENS))))
    except Exception as e:  # noqa: BLE001 - a moved recording must not sink the whole report
        s.note(f"Not available: could not reload the tasks ({type(e).__name__}: {e}).")
        return s, None
    if not mts:
        s.note("Not available: none of the runs' task specs could be reloaded.")
        return s, None
    mt = pd.concat(mts, ignore_index=True)
    ct = pd.concat(cts, ignore_index=True)
    err = M.token_estimate_error(mt)
    bad = M.tier_misclassification(ct)
    bad_cal = M.tier_misclassification(ct, estimate_col="history_tokens_calibrated") if "history_tokens_calibrated" in ct.columns else None
    s.text(
        f"Measured on {len(seen)} task(s) of this sweep ({len(mt):,} messages), uncompacted history before each "
        f"call, BPE = quicktok o200k_base. Negative error: the estimate undercounts."
    )
    s.table(err, "Per content kind: error = sum(estimate)/sum(BPE) - 1; abs_error_median = median per-message |estimate/BPE - 1|.")
    allrow = err[err["kind"] == "all"].iloc[0]
    s.text(
        f"Overall bytes/4 is off by {allrow['est_error']:+.1%} and the calibrated estimate by "
        f"{allrow.get('calibrated_error', math.nan):+.1%}. {len(bad)} of {len(ct)} calls "
        f"({len(bad) / max(len(ct), 1):.1%}) would be put in a different tier (or on the other side of the window) "
        f"by bytes/4 than by the BPE count; {int((bad['direction'] == 'under').sum()) if len(bad) else 0} of them too late."
    )
    if bad_cal is not None:
        n_late = int((bad_cal["direction"] == "under").sum()) if len(bad_cal) else 0
        fixed = len(bad) - len(bad_cal)
        s.text(
            f"With the calibrated estimate (the `tier_token_counter=\"calibrated\"` option) {len(bad_cal)} of {len(ct)} calls "
            f"({len(bad_cal) / max(len(ct), 1):.1%}) disagree with BPE, {n_late} of them too late: "
            + (f"it fixes {fixed} of the {len(bad)} disagreements." if fixed > 0 else "it does not reduce the disagreements on this data.")
        )
    if len(bad):
        s.table(bad[["task_id", "call_index", "history_tokens", "history_tokens_bpe", "est_tier", "bpe_tier", "direction"]].head(20), "Misclassified calls (first 20)")

    s.figure("token_estimate_error", P.token_estimate_error(mt, ct), "Token-estimate error per content kind; per-call estimate vs BPE with tier disagreements in red.")
    return s, err


def _options_section(rm: Any, n: int, seed: int) -> _Section:
    s = _Section("h9eval improvement options vs the faithful default")
    oc = M.option_comparison(rm, n=n, seed=seed)
    if len(oc) == 0:
        s.note(
            "No progressive configuration in this sweep differs from a faithful-default baseline only in "
            f"improvement options ({', '.join(M.IMPROVEMENT_OPTIONS)}), so nothing can be compared here."
        )
        return s
    t = oc[["option", "n_tasks"]].copy()
    for m in ("retention", "tokens_saved"):
        if f"{m}_delta" in oc.columns:
            t[f"{m} baseline"] = oc[f"{m}_baseline"]
            t[f"{m} with option"] = oc[f"{m}_variant"]
            t[f"{m} Δ [95% CI]"] = [
                "–" if isinstance(d, float) and math.isnan(d) else f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                for d, lo, hi in zip(oc[f"{m}_delta"], oc[f"{m}_delta_ci_lo"], oc[f"{m}_delta_ci_hi"])
            ]
        t[f"{m} verdict"] = oc.get(f"{m}_verdict")
    if "overflows_delta" in oc.columns:
        t["overflows Δ"] = oc["overflows_delta"]
    s.table(t, "Paired by task (same history mode, summarizer and other parameters); Δ = option - default.")
    for r in oc.to_dict("records"):
        rv, tv = r.get("retention_verdict", "no data"), r.get("tokens_saved_verdict", "no data")
        if rv == "helps":
            msg = f"{r['option']}: improves retention by {r['retention_delta']:+.3f} (CI {r['retention_delta_ci_lo']:+.3f} to {r['retention_delta_ci_hi']:+.3f})"
            msg += f"; tokens saved {tv}." if tv != "helps" else ", and saves more tokens."
            s.text(msg)
        elif tv == "helps" and rv not in ("hurts",):
            s.text(f"{r['option']}: saves more tokens ({r['tokens_saved_delta']:+.3f}) without a clear retention change ({rv}).")
        else:
            s.note(
                f"{r['option']} does not help on this data: retention {rv}"
                + (f" ({r['retention_delta']:+.3f})" if "retention_delta" in r and not math.isnan(r["retention_delta"]) else "")
                + f", tokens saved {tv}"
                + (f" ({r['tokens_saved_delta']:+.3f})" if "tokens_saved_delta" in r and not math.isnan(r["tokens_saved_delta"]) else "")
                + (f", overflows {int(r['overflows_delta']):+d}" if r.get("overflows_delta") else "")
                + "."
            )
    return s


def _recommendation_section(cm: Any) -> _Section:
    s = _Section("Recommendation")
    best = M.recommend(cm)
    if best is None:
        s.note("No configuration ran without overflowing the window (or none had probe scores); nothing to recommend.")
        return s
    s.rec(
        f"Use {best['label']}"
        + (f" ({best['history_mode']} mode" if "history_mode" in best else "")
        + (f", {best['summarizer']} summarizer)" if "summarizer" in best else ")" if "history_mode" in best else "")
        + f": {best['reason']}. Retention {best['retention']:.3f} [{best['retention_ci_lo']:.3f}, {best['retention_ci_hi']:.3f}], "
        f"tokens saved {best['tokens_saved']:.3f} [{best['tokens_saved_ci_lo']:.3f}, {best['tokens_saved_ci_hi']:.3f}], "
        f"{best.get('summarizer_calls', 0):.1f} summarizer calls per run."
    )
    others = cm.dropna(subset=["retention"])
    others = others[(others["label"] != best["label"]) & (others.get("overflows", 0) == 0)]
    if len(others):
        overlap = others[others["retention_ci_hi"] >= best["retention_ci_lo"]]
        if len(overlap):
            s.text(
                f"{len(overlap)} other configuration(s) have retention CIs overlapping the best one's, so the ranking among "
                "them is not established by this sweep; prefer the one that saves more tokens or costs fewer summarizer calls."
            )
    if best.get("excluded"):
        s.text("Excluded for overflowing the window: " + "; ".join(best["excluded"]) + ".")
    return s


def _run_labels(runs: Any) -> dict[str, str]:
    """``policy name (history mode)`` per run id: run ids repeat the task and are unreadable."""
    if runs is None or not len(runs) or "policy_name" not in runs.columns:
        return {}
    return {r.run_id: f"{r.policy_name} ({r.history_mode})" for r in runs.itertuples()}


def _curve_runs(runs: Any, calls: Any, task_id: str, n: int) -> list[str]:
    """Up to ``n`` runs of a task for one token-curve figure: harness9's default first, then one
    run per other policy kind, write-back before view."""
    ids = list(dict.fromkeys(calls[calls["task_id"] == task_id]["run_id"]))
    if runs is None or not len(runs) or "policy_name" not in runs.columns:
        return ids[:n]
    r = runs[runs["run_id"].isin(ids)].copy()
    r["_default"] = ~r["policy_name"].astype(str).str.contains("default")
    r["_mode"] = r["history_mode"] != "write_back"
    r = r.sort_values(["_default", "_mode", "policy_kind", "run_id"])
    picked = r.drop_duplicates("policy_kind")
    return list(picked["run_id"])[:n]


def write_report(results_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, *, max_curve_runs: int = 6, n_boot: int = 1000, seed: int = 0, token_error_tasks: int = 4) -> ReportPaths:
    """Write ``report.html`` and ``report.md`` for the sweep in ``results_dir``.

    ``out_dir``: default ``<results_dir>/report``. ``max_curve_runs``: runs overlaid per token
    curve (default 6; one curve figure per task, for up to three tasks). ``n_boot``/``seed``:
    bootstrap resamples and seed (default 1,000 and 0). ``token_error_tasks``: tasks reloaded
    for the token-estimate section (default 4).
    """
    res = load_results(results_dir)
    out = Path(out_dir) if out_dir is not None else Path(results_dir) / "report"
    prepare_out_dir(out, what="report folder")  # fail before any work, not after
    calls, probes, comps = res.calls, res.probes, res.compactions
    rm = M.run_metrics(calls, probes, res.runs) if len(calls) else M.run_metrics(calls, probes, None)
    cm = M.config_metrics(rm, n=n_boot, seed=seed) if len(rm) else rm
    secs = [_setup_section(res), _policies_section(cm)]

    labels = _run_labels(res.runs)
    s = _Section("Token curves")
    if len(calls):
        tasks = list(dict.fromkeys(calls["task_id"]))
        for k, tid in enumerate(tasks[:3]):
            ids = _curve_runs(res.runs, calls, tid, max_curve_runs)
            s.figure(f"token_curve_{k}", P.token_curve(calls, ids, title=f"Tokens per call: {tid}", labels=labels), f"History tokens (dashed) and tokens sent (solid) per call for task {tid}; bands are the tier thresholds.")
        if len(tasks) > 3:
            s.text(f"{len(tasks) - 3} more task(s) not drawn.")
        if len(rm):
            s.figure("strategy_comparison", P.strategy_comparison(rm, n=n_boot, seed=seed), "Tokens saved vs retention per configuration, 95% bootstrap CIs across tasks, dashed: Pareto front; open markers overflowed.")
    else:
        s.note("No calls.")
    secs.append(s)

    s = _Section("Tier transitions")
    if len(calls):
        tr = M.tier_transitions(calls)
        s.table(tr.reset_index(), "From the tier at one call (rows) to the tier at the next call of the same run (columns), all runs.")
        s.figure("tier_transitions", P.tier_transition_matrix(calls), "Tier transition counts.")
        first = list(dict.fromkeys(calls["task_id"]))[0]
        s.figure("tier_swimlane", P.tier_swimlane(calls[calls["task_id"] == first], labels=labels), f"Tier per call for task {first}, one lane per configuration.")
    secs.append(s)

    s = _Section("Anchor retention")

    has_anchor_probes = len(probes) and probes["probe_kind"].isin(ANCHOR_KINDS).any()
    if has_anchor_probes:
        s.figure("anchor_retention_probes", P.anchor_retention_heatmap(probes), "Anchor-probe retention (mean recall score) by anchor type and number of compactions so far.")
    if len(comps) and comps["anchors_json"].notna().any():
        s.figure("anchor_retention_records", P.anchor_retention_heatmap(comps), "Share of compaction records whose anchor section carries information (not N/A), by record index.")
    if not s.blocks:
        s.note("No anchor probes and no anchors in the compaction records.")
    secs.append(s)

    s = _Section("Drift")
    if len(probes):
        kinds = M.retention(probes, by=("probe_kind",))
        if len(kinds):
            s.table(kinds, "Retention by probe kind (all runs).")
        first = list(dict.fromkeys(probes["task_id"]))[0]
        ids = list(dict.fromkeys(probes[probes["task_id"] == first]["run_id"]))[:max_curve_runs]
        s.figure("drift", P.drift_curves(probes, ids), f"Intent and fact retention over calls for task {first}.")
    else:
        s.note("The sweep ran no probes: no drift data. Add [probes] scorers = [\"recall\"] to the spec.")
    secs.append(s)

    s = _Section("Summarizer calls and cost")
    if len(calls):
        u = M.summarizer_usage(calls, res.runs)
        s.table(u, "Summarizer calls, tokens and cost (USD) per configuration; offline summarizers cost 0.")
        s.figure("summarizer_cost", P.summarizer_cost(calls.merge(res.runs[["run_id", "params_json"]], on="run_id", how="left") if "params_json" in res.runs.columns else calls), "Summarizer calls and cost per run, per configuration.")
    secs.append(s)

    tok_sec, _ = _token_estimate_section(res, token_error_tasks)
    secs.append(tok_sec)
    secs.append(_options_section(rm, n_boot, seed) if len(rm) else _Section("h9eval improvement options vs the faithful default"))
    secs.append(_recommendation_section(cm) if len(cm) else _Section("Recommendation"))
    return _render(f"h9eval report: {res.manifest.get('name', Path(results_dir).name)}", secs, out)


# -- harness9 records --------------------------------------------------------------------------
def write_report_from_records(records_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> ReportPaths:
    """Report on harness9's own ``compaction_records/*.jsonl`` (read with
    :func:`h9eval.harness9.records_dir.read_records_dir`): sessions, token curve from tokens
    before/after, tier transitions between consecutive records, anchors filled per record."""
    import pandas as pd


    rp = Path(records_dir)
    if rp.is_dir() and not any(rp.glob("*.jsonl")) and not any(rp.glob("*/*.jsonl")):
        raise FormatError("no compaction record files (<session>.jsonl) found", path=str(rp))
    comps = read_records_dir(records_dir)
    secs: list[_Section] = []
    s = _Section("Records")
    s.text(f"{len(comps):,} compaction record(s) in {comps['session_id'].nunique() if len(comps) else 0} session(s) from {records_dir}.")
    if len(comps):
        per = comps.groupby("session_id").agg(
            records=("record_index", "size"),
            first_tokens_before=("tokens_before", "first"),
            max_tokens_before=("tokens_before", "max"),
            mean_compression_ratio=("compression_ratio", "mean"),
            errors=("error", lambda e: int((e.astype(str) != "").sum())),
        ).reset_index()
        s.table(per, "Per session.")
        s.table(comps["tier_name"].value_counts().rename_axis("tier").reset_index(name="records"), "Records by tier.")
    secs.append(s)
    s = _Section("Token curve")
    s.figure("records_token_curve", P.records_token_curve(comps), "Tokens before (dashed) and after (solid) each compaction, per session.")
    secs.append(s)
    s = _Section("Tier transitions")
    if len(comps):
        pseudo = pd.DataFrame({"run_id": comps["session_id"], "call_index": comps["record_index"], "tier_name": comps["tier_name"]})
        s.table(M.tier_transitions(pseudo).reset_index(), "From one record's tier (rows) to the next record's (columns), per session.")
        s.figure("tier_transitions", P.tier_transition_matrix(pseudo), "Tier transitions between consecutive records.")
    else:
        s.note("No records.")
    secs.append(s)
    s = _Section("Anchor retention")
    if len(comps) and comps["anchors_json"].notna().any():
        s.figure("anchor_retention_records", P.anchor_retention_heatmap(comps), "Share of sessions whose record at each index has the anchor section filled (not N/A).")
        s.table(M.anchor_retention(comps).reset_index(), "Anchor type × record index.")
    else:
        s.note("No record carries anchors (only warn-tier offloads or emergency truncations).")
    secs.append(s)
    return _render(f"harness9 compaction records: {Path(records_dir).name}", secs, Path(out_dir))
