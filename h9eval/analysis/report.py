"""Reports: a sweep's results (or harness9's own compaction records) as HTML and Markdown.

``write_report(results_dir)`` writes ``report.html`` (self-contained: figures embedded as
base64 PNG, inline CSS, no script and no external link) and ``report.md`` with its figures as
PNG files in ``figures/`` next to it. Every number comes from :mod:`h9eval.analysis.metrics`, every
figure from :mod:`h9eval.analysis.plots`; the recommendation is chosen from the data
(:func:`h9eval.analysis.metrics.recommend`), never written in advance.

Sections: setup and provenance, what produced the numbers (summarizer, summary-only retention),
policies compared, each configuration vs harness9's default (task-level paired, adjusted), token
curves, tier transitions, anchor retention, drift, probe validity (placebo floor, pinned answers),
emergency checkpoints (and the comparison under ``legacy_last1``), summarizer calls and cost,
token-estimate error, h9eval's improvement options judged on their targets, the llm scorer's
agreement (when it ran), recommendation. The trust and comparison sections come from
:mod:`h9eval.analysis.report_sections`.

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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from h9eval.core.errors import FormatError
from h9eval.core.paths import atomic_write, prepare_out_dir, write_text_atomic
from h9eval.core.tokens import DEFAULT_CONTEXT_WINDOW_TOKENS
from h9eval.analysis import coverage as C
from h9eval.analysis import metrics as M
from h9eval.analysis.compare import config_labels
from h9eval.analysis import token_accuracy as TC
from h9eval.tasks import load_tasks_from_spec
from h9eval.analysis import plots as P
from h9eval.analysis import report_closedloop as CL
from h9eval.analysis.ledger import ledger_sections
from h9eval.analysis import report_sections as RS
from h9eval.analysis.report_model import Section as _Section
from h9eval.results.store import load_results
from h9eval.tasks.model import ANCHOR_KINDS
from h9eval.harness9.records_dir import read_records_dir
from h9eval.summarizers.registry import SUMMARIZERS

__all__ = ["ReportPaths", "SECTIONS", "config_names", "write_report", "write_report_from_records"]

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:2px solid #444;padding-bottom:.2em}h2{border-bottom:1px solid #bbb;margin-top:2em}
table{border-collapse:collapse;font-size:12px;margin:.8em 0;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f0f0f0;white-space:normal;vertical-align:bottom}td:first-child,th:first-child{text-align:left}
td.t,th.t{white-space:normal;overflow-wrap:anywhere;text-align:left}
figure{margin:1em 0}figure img{max-width:100%;box-sizing:border-box;border:1px solid #eee}figcaption{font-size:12px;color:#555}
pre{background:#f7f7f7;padding:.6em;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
.note{background:#fff8e1;border-left:4px solid #f9a825;padding:.4em .8em}
.rec{background:#e8f5e9;border-left:4px solid #2e7d32;padding:.4em .8em}
.caveat{background:#fdecea;border:2px solid #c62828;padding:.5em .9em;font-weight:600}
"""


@dataclass(frozen=True)
class ReportPaths:
    """Where a report went: ``html`` (self-contained), ``markdown`` (``report.md``), the PNG
    ``figures`` the Markdown links to, and the folder holding them all (``out_dir``)."""

    out_dir: Path
    html: Path
    markdown: Path
    figures: tuple[Path, ...] = ()


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
    # text columns may wrap (so a wide table fits the page); numbers never do
    text = [df[c].dtype.kind not in "biuf" for c in df.columns]
    head = "".join(f"<th{' class=t' if t else ''}>{html.escape(c)}</th>" for c, t in zip(cols, text))
    body = "".join("<tr>" + "".join(f"<td{' class=t' if t else ''}>{html.escape(v)}</td>" for v, t in zip(r, text)) + "</tr>" for r in rows)
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
            if kind in ("text", "note", "rec", "caveat"):
                md += [("> " if kind != "text" else "") + payload, ""]
                cls = "" if kind == "text" else f" class='{kind}'"
                hs.append(f"<p{cls}>{html.escape(payload)}</p>")
            elif kind == "link":
                href, text = payload
                md += [f"- [{text}]({href})", ""]
                hs.append(f"<p><a href='{html.escape(href, quote=True)}'>{html.escape(text)}</a></p>")
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
                hs.append(f"<figure><img alt='{html.escape(cap, quote=True)}' src='data:image/png;base64,{b64}'><figcaption>{html.escape(cap)}</figcaption></figure>")
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
    return ["–" if (isinstance(v, float) and math.isnan(v)) else f"{v:.3f} [{lo:.3f}, {hi:.3f}]" for v, lo, hi in zip(df[m], df[f"{m}_ci_lo"], df[f"{m}_ci_hi"])]


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
        # closed-loop worlds (world:KIND:SEED) are not task files: nothing to reload
        for spec in [x for x in dict.fromkeys(runs["task_spec"].dropna()) if not str(x).startswith("world:")][: max_tasks * 2]:
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
    s.text(f"Measured on {len(seen)} task(s) of this sweep ({len(mt):,} messages), uncompacted history before each call, BPE = quicktok o200k_base. Negative error: the estimate undercounts.")
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
            f'With the calibrated estimate (the `tier_token_counter="calibrated"` option) {len(bad_cal)} of {len(ct)} calls '
            f"({len(bad_cal) / max(len(ct), 1):.1%}) disagree with BPE, {n_late} of them too late: "
            + (f"it fixes {fixed} of the {len(bad)} disagreements." if fixed > 0 else "it does not reduce the disagreements on this data.")
        )
    if len(bad):
        s.table(bad[["task_id", "call_index", "history_tokens", "history_tokens_bpe", "est_tier", "bpe_tier", "direction"]].head(20), "Misclassified calls (first 20)")

    s.figure("token_estimate_error", P.token_estimate_error(mt, ct), "Token-estimate error per content kind; per-call estimate vs BPE with tier disagreements in red.")
    return s, err


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


def config_names(runs: Any) -> dict[str, str]:
    """The configuration's name per run id (of the ok runs): :func:`h9eval.analysis.compare.config_labels`."""
    if runs is None or not len(runs):
        return {}
    r = runs[runs["status"] == "ok"] if "status" in runs.columns else runs
    return dict(zip(r["run_id"], config_labels(r)))


def _is_offline(name: str) -> bool:
    try:
        cls = SUMMARIZERS.get(name)
    except Exception:  # noqa: BLE001 - an unknown variant name is simply not known to be offline
        return name.startswith("offline")
    return cls.__module__.startswith("h9eval.summarizers.offline") or name.startswith("offline")


def _tier_fracs(kind: str, params_json: Any) -> dict[str, float] | None:
    """The tier thresholds a run ran with (``None`` for a policy without tiers)."""
    p = M._params(params_json)
    keys = {t: f"{t}_frac" for t in ("warn", "soft", "full", "emergency")}
    if not any(k in p for k in keys.values()) and kind != "progressive":
        return None
    return {t: float(p.get(k, M.DEFAULT_THRESHOLDS[t])) for t, k in keys.items()}


@dataclass
class _Ctx:
    """What every section reads: the results, per-run and per-config metrics (labelled by
    :func:`config_names`), and the choices shared by several sections (the example task and
    the few configurations drawn one by one)."""

    res: Any
    rm: Any
    cm: Any
    names: dict[str, str]
    n_boot: int
    seed: int
    max_curve_runs: int
    token_error_tasks: int
    example_task: str | None = None
    example_reason: str = ""
    chosen: list[tuple[str, str]] = field(default_factory=list)  # (label, history mode)
    out: Path | None = None  # the report's folder (pages written beside it, such as the ledger pages)

    def runs_of(self, label: str, mode: str, task_id: str | None = None) -> list[str]:
        r = self.rm[(self.rm["label"] == label) & (self.rm["history_mode"] == mode)]
        if task_id is not None:
            r = r[r["task_id"] == task_id]
        return list(r["run_id"])

    def non_control(self, df: Any) -> Any:
        return df[~df["policy_kind"].isin(P.CONTROL_KINDS)] if "policy_kind" in df.columns else df

    def labelled(self, table: Any) -> Any:
        """``table`` with the run's configuration name, kind and history mode."""
        info = self.rm[["run_id", "label", "policy_kind", "history_mode"]]
        drop = [c for c in ("label", "policy_kind", "history_mode") if c in table.columns]
        return table.drop(columns=drop).merge(info, on="run_id", how="inner")


def _reference_label(ctx: _Ctx) -> str | None:
    """harness9's default as this sweep names it: a progressive config with no parameter other
    than the window changed (preferring a name with "default" in it)."""
    rm = ctx.non_control(ctx.rm)
    if len(rm) == 0:
        return None
    prog = rm[rm["policy_kind"] == "progressive"]
    named = [lab for lab in dict.fromkeys(prog["label"]) if "default" in lab]
    if named:
        return named[0]
    for r in prog.drop_duplicates("label").to_dict("records"):
        if set(M.params_diff("progressive", r.get("params_json"))) <= {"context_window_tokens"}:
            return str(r["label"])
    return str(rm["label"].iloc[0])


def _choose(ctx: _Ctx) -> None:
    """The example task (the one harness9's default takes through the most tiers) and the few
    configurations drawn one by one: the reference in each mode, one threshold variant and the
    recommended configuration."""
    rm, runs = ctx.rm, ctx.res.runs
    ref = _reference_label(ctx)
    if ref is None:
        return
    modes = list(dict.fromkeys(rm["history_mode"]))
    chosen = [(ref, m) for m in modes]
    default_fracs = _tier_fracs("progressive", None)
    thr = [
        r
        for r in ctx.non_control(rm).drop_duplicates(["label", "history_mode"]).to_dict("records")
        if r["label"] != ref and r.get("policy_kind") == "progressive" and _tier_fracs("progressive", r.get("params_json")) != default_fracs
    ]
    if thr:
        chosen.append((thr[0]["label"], thr[0]["history_mode"]))
    best = M.recommend(ctx.non_control(ctx.cm)) if len(ctx.cm) else None
    if best is not None and (best["label"], best["history_mode"]) not in chosen:
        chosen.append((best["label"], best["history_mode"]))
    ctx.chosen = chosen[: max(ctx.max_curve_runs, 1)]
    tiers = ("warn", "soft", "full", "emergency")
    if runs is not None and len(runs) and all(f"compactions_{t}" in runs.columns for t in tiers):
        r = runs[runs["run_id"].isin(set(rm[rm["label"] == ref]["run_id"]))]
        score = []
        for tid, g in r.groupby("task_id", sort=True):
            reached = [t for t in tiers if int(g[f"compactions_{t}"].fillna(0).sum()) > 0]
            score.append((len(reached), int(g["n_compactions"].fillna(0).sum()) if "n_compactions" in g.columns else 0, str(tid), reached))
        if score:
            k, nc, tid, reached = sorted(score, key=lambda s: (-s[0], -s[1], s[2]))[0]
            ctx.example_task = tid
            ctx.example_reason = f"Task {tid} is drawn because {ref} takes it through the most tiers of any task ({', '.join(reached) or 'none'}; {nc} compaction(s) over its runs)."
            return
    ctx.example_task = str(rm["task_id"].iloc[0]) if len(rm) else None
    ctx.example_reason = f"Task {ctx.example_task} is drawn (the runs table has no per-tier compaction counts)."


# -- sections: one function per section, each (ctx) -> _Section; add new ones to SECTIONS -----
def _caveat_section(ctx: _Ctx) -> _Section:
    s = _Section("Read this first")
    runs = ctx.res.runs
    variants = sorted(set(runs["summarizer"].dropna().astype(str))) if runs is not None and "summarizer" in runs.columns and len(runs) else []
    spec = (ctx.res.manifest.get("spec_resolved") or ctx.res.manifest.get("spec") or {}).get("summarizer") or {}
    params = spec.get("params") if isinstance(spec, Mapping) else None
    what = ", ".join(variants) or "unknown"
    s.caveat(f"Summaries in this report were written by: {what}" + (f" (parameters {json.dumps(params, sort_keys=True)})" if params else "") + ".")
    offline = [v for v in variants if _is_offline(v)]
    if variants and len(offline) == len(variants):
        s.caveat(
            "Every summary here is the offline extractive stand-in, not a language model. These results rank the "
            "compaction mechanisms (when to compact, what is kept verbatim, how anchors merge) under one fixed "
            "summarizer; they do not measure how well a model's summaries keep information. Rerun with an "
            "anthropic summarizer before drawing conclusions about a model."
        )
    elif offline:
        s.note(f"Offline variants ({', '.join(offline)}) rank mechanisms, not a model's summaries; compare them only with each other.")
    s.text(
        "Configurations are named as in the sweep specification; the controls keep_all (nothing dropped) and "
        "drop_all (everything dropped) are drawn as reference lines, never pooled with the strategies."
    )
    return s


def _setup_section(ctx: _Ctx) -> _Section:
    res = ctx.res
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
        s.code("\n".join(f"{k} = {json.dumps(v, sort_keys=True, default=str)}" if k != "policies" else f"policies = {len(v)} entries (see Configurations)" for k, v in sorted(spec.items()))[:6000])
    if len(runs) and n_ok < len(runs):
        bad = runs[runs["status"] != "ok"][["run_id", "error"]]
        s.table(bad, "Failed runs (excluded from every number below)")
    return s


def _configurations_section(ctx: _Ctx) -> _Section:
    import pandas as pd

    s = _Section("Configurations")
    if len(ctx.rm) == 0:
        s.note("No successful runs.")
        return s
    rows = []
    for r in ctx.rm.drop_duplicates("label").to_dict("records"):
        diff = M.params_diff(str(r.get("policy_kind", "")), r.get("params_json"))
        rows.append(
            {
                "configuration": r["label"],
                "kind": r.get("policy_kind", ""),
                "parameters changed from the kind's defaults": ", ".join(f"{k}={v}" for k, v in diff.items()) or "(defaults)",
                "summarizer": r.get("summarizer", ""),
            }
        )
    t = pd.DataFrame(rows)
    if t["summarizer"].nunique() <= 1:
        t = t.drop(columns=["summarizer"])
    s.table(t, "The name each configuration has in every table and figure below, and what it changes.")
    return s


def _policies_section(ctx: _Ctx) -> _Section:
    s = _Section("Policies compared")
    cm = ctx.cm
    if len(cm) == 0:
        s.note("No successful runs.")
        return s
    cm = cm.assign(_ctl=cm["policy_kind"].isin(P.CONTROL_KINDS)).sort_values(["history_mode", "_ctl", "retention"], ascending=[True, True, False], kind="stable")
    t = cm[["label", "history_mode", "n_runs"]].copy()
    t["label"] = [lab + (" (control)" if c else "") for lab, c in zip(cm["label"], cm["_ctl"])]
    t = t.rename(columns={"label": "configuration", "history_mode": "mode", "n_runs": "tasks"})
    t["retention [95% CI]"] = _ci_col(cm, "retention")
    if "retention_summary" in cm.columns and cm["retention_summary"].notna().any():
        t["summary-only retention [95% CI]"] = _ci_col(cm, "retention_summary")
    t["tokens saved [95% CI]"] = _ci_col(cm, "tokens_saved")
    for c, name in (("overflows", "overflows"), ("emergencies", "emergencies"), ("summarizer_calls", "summarizer calls per run")):
        if c in cm.columns:
            t[name] = cm[c].to_numpy()
    if "summarizer_cost_usd" in cm.columns and float(cm["summarizer_cost_usd"].fillna(0).sum()) > 0:
        t["summarizer USD per run"] = cm["summarizer_cost_usd"].to_numpy()
    if "never_compacted_runs" in cm.columns:
        # a score where the configuration never compacted is the uncompacted transcript's: flagged next to it
        t["tasks never compacted"] = cm["never_compacted_runs"].to_numpy()
    s.table(t, f"One row per configuration and history mode, best retention first; CIs are percentile bootstraps ({ctx.n_boot:,} resamples, seed {ctx.seed}) across tasks.")
    s.text(
        "tokens saved = 1 - sum(tokens sent) / sum(tokens the uncompacted transcript would send at the same calls) "
        "per run, tool schemas on both sides: the same baseline for every policy and history mode. retention = mean "
        "recall-probe score over answerable probes of the sent view, on one checkpoint grid per task shared by every "
        "policy; 'tasks never compacted': runs on which the configuration never compacted (its scores there are the "
        "uncompacted transcript's; see the coverage section); summary-only retention scores the summary's anchors alone, at "
        "checkpoints after the run's first compaction (– when the configuration never wrote a summary). "
        "Overflows and emergencies are totals over the runs."
    )
    s.figure(
        "strategy_comparison",
        P.strategy_comparison(cm),
        "Each configuration's mean retention (left) and tokens saved (right) with 95% bootstrap CIs across tasks, ranked by retention, one panel group per history mode; vertical lines: the controls.",
    )
    return s


def _token_curves_section(ctx: _Ctx) -> _Section:
    s = _Section("Token curves")
    calls, runs = ctx.res.calls, ctx.res.runs
    if len(calls) == 0 or ctx.example_task is None:
        s.note("No calls.")
        return s
    s.text(ctx.example_reason)
    ids: list[str] = []
    for label, mode in ctx.chosen:
        ids += ctx.runs_of(label, mode, ctx.example_task)[:1]
    info = runs.set_index("run_id") if runs is not None and len(runs) else None
    th = None
    if info is not None and "params_json" in info.columns:
        th = {rid: _tier_fracs(str(info.at[rid, "policy_kind"]), info.at[rid, "params_json"]) for rid in ids}
    labels = {rid: f"{ctx.names.get(rid, rid)} ({mode})" for rid, mode in zip(ids, ctx.rm.set_index("run_id").loc[ids, "history_mode"])} if ids else {}
    s.figure(
        "token_curve_0",
        P.token_curve(calls, ids, thresholds_by_run=th, labels=labels, title=f"Tokens per call: {ctx.example_task}"),
        f"History tokens (dashed) and tokens sent (solid) per call for task {ctx.example_task}, one panel per configuration; bands are that run's own tier thresholds (named on the right).",
    )
    return s


def _tiers_section(ctx: _Ctx) -> _Section:
    s = _Section("Tier transitions")
    calls = ctx.res.calls
    if len(calls) == 0 or not ctx.chosen:
        s.note("No calls.")
        return s
    groups = {f"{label} ({mode})": ctx.runs_of(label, mode) for label, mode in ctx.chosen}
    s.figure("tier_transitions", P.tier_transition_matrix(calls, groups=groups), "Tier transition counts per configuration, all tasks (rows: tier at a call; n = transitions from that tier).")
    ex = ctx.example_task
    sub = ctx.labelled(calls[calls["task_id"] == ex])
    sub = ctx.non_control(sub)
    for k, mode in enumerate(dict.fromkeys(sub["history_mode"])):
        ms = sub[sub["history_mode"] == mode]
        lanes = ctx.rm[ctx.rm["run_id"].isin(set(ms["run_id"]))].sort_values("label")
        groups = {"": list(lanes["run_id"])}
        if len(lanes) > _MAX_LANES:
            groups = {f: list(lanes[[P.family(x) == f for x in lanes["policy_kind"]]]["run_id"]) for f in ("progressive", "other strategies")}
        s.figure(
            "tier_swimlane" if k == 0 else f"tier_swimlane_{k}",
            P.tier_swimlane(ms, labels=ctx.names, title=f"Tier per call: {ex}, {mode} mode", groups=groups),
            f"Tier per call for task {ex} in {mode} mode, one lane per configuration (controls left out).",
        )
    return s


def _after_compaction(probes: Any) -> Any:
    """Checkpoints after the run's first compaction: before it there is no summary to score, so
    summary-only scores there are 0 by construction, not a loss."""
    return probes[probes["n_compactions"].fillna(0) > 0] if "n_compactions" in probes.columns else probes


_MAX_LANES = 12  # labelled rows per panel before a figure splits them by family


def _kind_heatmap(ctx: _Ctx, kinds: Sequence[str] | None, exclude: Sequence[str] = (), scope: str = "view") -> Any:
    p = ctx.res.probes if scope == "view" else _after_compaction(ctx.res.probes)
    if kinds is not None:
        p = p[p["probe_kind"].isin(list(kinds))]
    p = p[~p["probe_kind"].isin(list(exclude))]
    p = ctx.non_control(ctx.labelled(p))
    if scope != "view":
        # a summary-only score means nothing for a configuration that never wrote a summary
        summarizing = set(ctx.rm[ctx.rm["summarizer_calls"] > 0]["run_id"]) if "summarizer_calls" in ctx.rm.columns else set(p["run_id"])
        p = p[p["run_id"].isin(summarizing)]
    t = M.retention(p, by=("label", "policy_kind", "history_mode", "probe_kind"), scope=scope)
    t = t.assign(family=[P.family(k) for k in t["policy_kind"]])
    # harness9's family first, then the other strategies
    return t.sort_values("family", key=lambda f: f != "progressive", kind="stable")


def _anchors_section(ctx: _Ctx) -> _Section:
    s = _Section("Anchor retention")
    probes = ctx.res.probes
    if not (len(probes) and probes["probe_kind"].isin(ANCHOR_KINDS).any()):
        s.note("No anchor probes in this sweep.")
        return s
    t = _kind_heatmap(ctx, ANCHOR_KINDS)
    s.figure(
        "anchor_retention_probes",
        P.config_heatmap(t, title="Anchor-probe retention by configuration (sent view)"),
        "Mean recall score per configuration and anchor type; n = probe rows in the cell. Controls left out.",
    )
    if "scope" in probes.columns and (probes["scope"] == "anchors").any():
        ts = _kind_heatmap(ctx, ANCHOR_KINDS, scope="anchors")
        if len(ts):
            s.figure(
                "anchor_retention_summary",
                P.config_heatmap(ts, title="Anchor-probe retention, summary only (after the first compaction)"),
                "The same probes scored against the summary's anchors alone (no verbatim tail), at checkpoints after the run's first compaction; "
                "configurations that never call the summarizer are left out.",
            )
    return s


def _drift_section(ctx: _Ctx) -> _Section:
    s = _Section("Drift")
    probes = ctx.res.probes
    if len(probes) == 0:
        s.note('The sweep ran no probes: no drift data. Add [probes] scorers = ["recall"] to the spec.')
        return s
    t = _kind_heatmap(ctx, None, exclude=ANCHOR_KINDS)
    if len(t):
        s.figure(
            "retention_by_kind",
            P.config_heatmap(t, title="Retention by probe kind and configuration"),
            "Mean recall score per configuration and probe kind (anchor kinds are in the previous section); n = probe rows. Controls left out.",
        )
    ex = ctx.example_task
    ids = [r for label, mode in ctx.chosen for r in ctx.runs_of(label, mode, ex)[:1]]
    if ids:
        labels = {r: f"{ctx.names.get(r, r)} ({m})" for r, m in zip(ids, ctx.rm.set_index("run_id").loc[ids, "history_mode"])}
        s.figure("drift", P.drift_curves(probes, ids, labels=labels), f"Intent and fact retention over calls for task {ex}, the configurations of the token curves.")
    return s


def _summarizer_section(ctx: _Ctx) -> _Section:
    s = _Section("Summarizer calls and cost")
    calls = ctx.res.calls
    if len(calls) == 0:
        s.note("No calls.")
        return s
    per_run = M.summarizer_usage(calls, ctx.res.runs, by="run_id")
    t = ctx.rm[["run_id", "label", "history_mode"]].merge(per_run.drop(columns=["n_runs", "calls_per_run", "cost_per_run_usd"], errors="ignore"), on="run_id")
    t["configuration"] = t["label"] + " (" + t["history_mode"] + ")"
    u = M.summarizer_usage(t, by="configuration")
    u = u[u["summarizer_calls"] > 0]
    if len(u) == 0:
        s.note("No configuration called the summarizer.")
        return s
    cols = ["configuration", "n_runs", "calls_per_run", "summarizer_input_tokens", "summarizer_output_tokens"]
    for c in ("summarizer_calls", "summarizer_input_tokens", "summarizer_output_tokens"):
        u[c] = u[c].round().astype(int)
    paid = float(u["summarizer_cost_usd"].sum()) > 0
    s.table(
        u[cols + (["cost_per_run_usd", "summarizer_cost_usd"] if paid else [])].rename(columns={"n_runs": "runs"}),
        "Summarizer calls and tokens per configuration (configurations that never summarize are left out).",
    )
    if paid:
        s.figure("summarizer_cost", P.summarizer_cost(u, by="configuration"), "Summarizer calls and cost per run, per configuration.")
    else:
        s.text("Every summarizer in this sweep is offline: no cost to show.")
    return s


def _token_error_section(ctx: _Ctx) -> _Section:
    return _token_estimate_section(ctx.res, ctx.token_error_tasks)[0]


def _recommendation_wrap(ctx: _Ctx) -> _Section:
    return _recommendation_section(ctx.non_control(ctx.cm)) if len(ctx.cm) else _Section("Recommendation")


SECTIONS: tuple[Callable[[_Ctx], _Section | list[_Section]], ...] = (
    _caveat_section,
    _setup_section,
    lambda ctx: RS.provenance_sections(ctx.res),
    _configurations_section,
    _policies_section,
    lambda ctx: RS.headline_sections(ctx.res, n_resamples=ctx.n_boot, seed=ctx.seed),
    lambda ctx: _Section("Coverage: did the data exercise the policies?", C.coverage_blocks(ctx.res.calls, ctx.res.runs, ctx.rm, names=ctx.names)),
    _token_curves_section,
    _tiers_section,
    _anchors_section,
    lambda ctx: ledger_sections(ctx.res, ctx.out, seed=ctx.seed),
    _drift_section,
    lambda ctx: RS.probe_validity_sections(ctx.res, seed=ctx.seed),
    lambda ctx: RS.emergency_sections(ctx.res, n_resamples=ctx.n_boot, seed=ctx.seed),
    _summarizer_section,
    _token_error_section,
    lambda ctx: RS.option_sections(ctx.res, n_resamples=ctx.n_boot, seed=ctx.seed),
    lambda ctx: RS.llm_sections(ctx.res),
    _recommendation_wrap,
)
"""The sweep report's sections in order: each takes the shared context and returns a section or
a list of them."""


def write_report(
    results_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, *, max_curve_runs: int = 4, n_boot: int = 1000, seed: int = 0, token_error_tasks: int = 4
) -> ReportPaths:
    """Write ``report.html`` and ``report.md`` (figures in ``figures/``) for the sweep in
    ``results_dir``.

    ``out_dir``: default ``results_dir`` itself (``RESULTS_DIR/report.html``). ``max_curve_runs``:
    configurations drawn one by one in the token curves, tier transitions and drift (default 4).
    ``n_boot``/``seed``: bootstrap resamples and seed (default 1,000 and 0).
    ``token_error_tasks``: tasks reloaded for the token-estimate section (default 4).
    """
    res = load_results(results_dir)
    out = Path(out_dir) if out_dir is not None else Path(results_dir)
    prepare_out_dir(out, what="report folder")  # fail before any work, not after
    closed_loop = [_Section(c.title, list(c.blocks)) for c in CL.closedloop_sections(res, n_boot=n_boot, seed=seed)]
    res = CL.without_episode_runs(res)  # the open-loop sections see the replays only
    calls, probes = res.calls, res.probes
    rm = M.run_metrics(calls, probes, res.runs) if len(calls) else M.run_metrics(calls, probes, None)
    names = config_names(res.runs)
    if len(rm):
        rm["label"] = [names.get(r, lab) for r, lab in zip(rm["run_id"], rm["label"])]
        metrics: tuple[str, ...] = ("tokens_saved", "retention")
        if len(probes) and "scope" in probes.columns and (probes["scope"] == "anchors").any():
            summ = M.retention(_after_compaction(probes), by=("run_id",), scope="anchors")[["run_id", "retention"]].rename(columns={"retention": "retention_summary"})
            rm = rm.merge(summ, on="run_id", how="left")
            if "summarizer_calls" in rm.columns:
                rm.loc[rm["summarizer_calls"] == 0, "retention_summary"] = math.nan
            metrics += ("retention_summary",)
        cm = M.config_metrics(rm, metrics, n=n_boot, seed=seed)
    else:
        cm = rm
    ctx = _Ctx(res=res, rm=rm, cm=cm, names=names, n_boot=n_boot, seed=seed, max_curve_runs=max_curve_runs,
               token_error_tasks=token_error_tasks, out=out)
    if len(rm):
        _choose(ctx)
    secs: list[_Section] = []
    for f in SECTIONS:
        made = f(ctx)
        secs.extend(made if isinstance(made, list) else [made])
    secs += closed_loop
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
        per = (
            comps.groupby("session_id")
            .agg(
                records=("record_index", "size"),
                first_tokens_before=("tokens_before", "first"),
                max_tokens_before=("tokens_before", "max"),
                mean_compression_ratio=("compression_ratio", "mean"),
                errors=("error", lambda e: int((e.astype(str) != "").sum())),
            )
            .reset_index()
        )
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
