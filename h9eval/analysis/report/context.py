"""What every section reads: the results split into their open-loop replays and closed-loop
episodes, per-run and per-configuration metrics labelled with the configuration names the spec
gave (:func:`h9eval.analysis.metrics.config_labels`), and the choices several sections share
(harness9's default as these results name it, the example task, the configurations drawn one by
one)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.analysis import episodes as episodes_mod
from h9eval.analysis import metrics
from h9eval.analysis import plots
from h9eval.analysis.metrics import config_labels
from h9eval.results.store import Results

__all__ = ["ReportContext", "after_compaction", "build_context", "config_names", "tier_fracs"]


def config_names(runs: Any) -> dict[str, str]:
    """The configuration's name per run id (of the ok runs): :func:`h9eval.analysis.metrics.config_labels`."""
    if runs is None or not len(runs):
        return {}
    r = runs[runs["status"] == "ok"] if "status" in runs.columns else runs
    return dict(zip(r["run_id"], config_labels(r)))


def after_compaction(probes: Any) -> Any:
    """Checkpoints after the run's first compaction: before it there is no summary to score, so
    summary-only scores there are 0 by construction, not a loss."""
    return probes[probes["n_compactions"].fillna(0) > 0] if "n_compactions" in probes.columns else probes


def tier_fracs(kind: str, params_json: Any) -> dict[str, float] | None:
    """The tier thresholds a run ran with (``None`` for a policy without tiers)."""
    p = json.loads(params_json) if isinstance(params_json, str) and params_json else {}
    keys = {t: f"{t}_frac" for t in ("warn", "soft", "full", "emergency")}
    if not any(k in p for k in keys.values()) and kind != "progressive":
        return None
    return {t: float(p.get(k, metrics.DEFAULT_THRESHOLDS[t])) for t, k in keys.items()}


@dataclass
class ReportContext:
    """The inputs of every section.

    ``results``: everything the folder holds; ``res``: the open-loop replays only (closed-loop
    episode cells left out); ``rm``/``cm``: per-run and per-configuration metrics of ``res``
    (``label`` = the configuration name); ``names``: run id -> configuration name (every run);
    ``n_boot``/``seed``: the bootstrap's resamples and seed; ``example_task``/``chosen``: the
    task and the (configuration, history mode) pairs drawn one by one."""

    results: Results
    res: Results
    rm: Any
    cm: Any
    names: dict[str, str]
    n_boot: int
    seed: int
    max_curve_runs: int = 4
    token_error_tasks: int = 4
    example_task: str | None = None
    example_reason: str = ""
    chosen: list[tuple[str, str]] = field(default_factory=list)
    reference: str | None = None
    out: Path | None = None
    """The report's folder (pages written beside it, such as the loss ledger's diff pages)."""

    @property
    def closed_loop(self) -> bool:
        """The results hold closed-loop episodes."""
        return bool(len(self.results.episodes))

    @property
    def open_loop(self) -> bool:
        """The results hold open-loop replays of tasks other than the worlds' exported
        transcripts (those are the closed-loop report's validation study)."""
        runs = self.res.runs
        if runs is None or not len(runs):
            return False
        if not self.closed_loop:
            return True
        worlds = set(self.results.episodes["task_id"].astype(str))
        return bool((~runs["task_id"].astype(str).isin(worlds)).any())

    def runs_of(self, label: str, mode: str, task_id: str | None = None) -> list[str]:
        r = self.rm[(self.rm["label"] == label) & (self.rm["history_mode"] == mode)]
        if task_id is not None:
            r = r[r["task_id"] == task_id]
        return list(r["run_id"])

    def non_control(self, df: Any) -> Any:
        return df[~df["policy_kind"].isin(plots.CONTROL_KINDS)] if "policy_kind" in df.columns else df

    def labelled(self, table: Any) -> Any:
        """``table`` with the run's configuration name, kind and history mode."""
        info = self.rm[["run_id", "label", "policy_kind", "history_mode"]]
        drop = [c for c in ("label", "policy_kind", "history_mode") if c in table.columns]
        return table.drop(columns=drop).merge(info, on="run_id", how="inner")


def _reference_label(ctx: ReportContext) -> str | None:
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
        if set(metrics.params_diff("progressive", r.get("params_json"))) <= {"context_window_tokens"}:
            return str(r["label"])
    return str(rm["label"].iloc[0])


def _choose(ctx: ReportContext) -> None:
    """The example task (the one harness9's default takes through the most tiers) and the few
    configurations drawn one by one: the reference in each mode, one threshold variant and the
    configuration with the highest mean retention."""
    rm, runs = ctx.rm, ctx.res.runs
    ref = ctx.reference = _reference_label(ctx)
    if ref is None:
        return
    modes = list(dict.fromkeys(rm["history_mode"]))
    chosen = [(ref, m) for m in modes]
    default_fracs = tier_fracs("progressive", None)
    thr = [
        r
        for r in ctx.non_control(rm).drop_duplicates(["label", "history_mode"]).to_dict("records")
        if r["label"] != ref
        and r.get("policy_kind") == "progressive"
        and tier_fracs("progressive", r.get("params_json")) != default_fracs
    ]
    if thr:
        chosen.append((thr[0]["label"], thr[0]["history_mode"]))
    best = metrics.recommend(ctx.non_control(ctx.cm)) if len(ctx.cm) else None
    if best is not None and (best["label"], best["history_mode"]) not in chosen:
        chosen.append((best["label"], best["history_mode"]))
    ctx.chosen = chosen[: max(ctx.max_curve_runs, 1)]
    tiers = ("warn", "soft", "full", "emergency")
    if runs is not None and len(runs) and all(f"compactions_{t}" in runs.columns for t in tiers):
        r = runs[runs["run_id"].isin(set(rm[rm["label"] == ref]["run_id"]))]
        score = []
        for tid, g in r.groupby("task_id", sort=True):
            reached = [t for t in tiers if int(g[f"compactions_{t}"].fillna(0).sum()) > 0]
            score.append(
                (
                    len(reached),
                    int(g["n_compactions"].fillna(0).sum()) if "n_compactions" in g.columns else 0,
                    str(tid),
                    reached,
                )
            )
        if score:
            k, nc, tid, reached = sorted(score, key=lambda s: (-s[0], -s[1], s[2]))[0]
            ctx.example_task = tid
            ctx.example_reason = (
                f"Task {tid} is drawn because {ref} takes it through the most tiers of any task "
                f"({', '.join(reached) or 'none'}; {nc} compaction(s) over its runs)."
            )
            return
    ctx.example_task = str(rm["task_id"].iloc[0]) if len(rm) else None
    ctx.example_reason = f"Task {ctx.example_task} is drawn (the runs table has no per-tier compaction counts)."


def build_context(
    results: Results,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    max_curve_runs: int = 4,
    token_error_tasks: int = 4,
    split: bool = True,
    out: Path | None = None,
) -> ReportContext:
    """The context of a report on ``results`` (metrics computed once, here). ``split``: the
    open-loop sections see the replays only (default); ``False`` for one episode's folder, whose
    calls those sections draw."""
    # the open-loop sections see the replays only
    res = episodes_mod.without_episode_runs(results) if split else results
    calls, probes = res.calls, res.probes
    rm = metrics.run_metrics(calls, probes, res.runs) if len(calls) else metrics.run_metrics(calls, probes, None)
    names = config_names(results.runs)
    if len(rm):
        rm["label"] = [names.get(r, lab) for r, lab in zip(rm["run_id"], rm["label"])]
        mets: tuple[str, ...] = ("tokens_saved", "retention")
        if len(probes) and "scope" in probes.columns and (probes["scope"] == "anchors").any():
            summ = metrics.retention(after_compaction(probes), by=("run_id",), scope="anchors")[["run_id", "retention"]]
            rm = rm.merge(summ.rename(columns={"retention": "retention_summary"}), on="run_id", how="left")
            if "summarizer_calls" in rm.columns:
                rm.loc[rm["summarizer_calls"] == 0, "retention_summary"] = math.nan
            mets += ("retention_summary",)
        cm = metrics.config_metrics(rm, mets, n=n_boot, seed=seed)
    else:
        cm = rm
    ctx = ReportContext(
        results=results,
        res=res,
        rm=rm,
        cm=cm,
        names=names,
        n_boot=n_boot,
        seed=seed,
        max_curve_runs=max_curve_runs,
        token_error_tasks=token_error_tasks,
        out=out,
    )
    if len(rm):
        _choose(ctx)
    return ctx
