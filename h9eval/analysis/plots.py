"""Plots: a DataFrame in, a matplotlib ``Figure`` out.

Every function builds a :class:`matplotlib.figure.Figure` directly (no pyplot state, so it is
safe under the Agg backend and in worker threads), never calls ``show()``, never writes a file,
and takes every number it draws either straight from the table or from :mod:`h9eval.analysis.metrics`.
matplotlib is imported only when a plot is made.

    >>> fig = plots.token_curve(results.calls, run_ids=[...])
    >>> fig.savefig("curve.png")  # the caller decides where figures go
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from h9eval.analysis import metrics as M

__all__ = [
    "TIER_COLORS",
    "token_curve",
    "tier_swimlane",
    "tier_transition_matrix",
    "anchor_retention_heatmap",
    "drift_curves",
    "strategy_comparison",
    "summarizer_cost",
    "token_estimate_error",
    "records_token_curve",
    "tune_evidence",
]

TIER_COLORS: Mapping[str, str] = {
    "none": "#d9d9d9",
    "warn": "#fdd835",
    "soft": "#fb8c00",
    "full": "#e53935",
    "emergency": "#6a1b9a",
}
_TIER_MARKERS = {"warn": "^", "soft": "s", "full": "D", "emergency": "X"}


def _figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = (9.0, 4.5)) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(nrows * ncols)]
    return fig, axes


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _short(run_id: str, n: int = 48) -> str:
    return run_id if len(run_id) <= n else run_id[: n - 1] + "…"


def token_curve(
    calls: Any,
    run_ids: Sequence[str] | None = None,
    *,
    thresholds: Mapping[str, float] = M.DEFAULT_THRESHOLDS,
    window: int | None = None,
    title: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Any:
    """History tokens (dashed) and tokens sent (solid) per call, one colour per run
    (``labels``: legend text per run id, default the run id).

    Horizontal bands mark the tiers (``thresholds`` × window; the window is the first run's
    ``context_window_tokens`` unless ``window`` is given) and a black line the window itself.
    Markers on the tokens-sent line: compactions by tier (▲ warn, ■ soft, ◆ full, ✖ emergency),
    offloads (▼), summary fallbacks (x), forced truncations (red ring) and overflows (★).
    ``run_ids``: runs to draw (default all, in order).
    """
    fig, (ax,) = _figure()
    if len(calls) == 0:
        _empty(ax, "calls")
        return fig
    ids = list(run_ids) if run_ids is not None else list(dict.fromkeys(calls["run_id"]))
    d = calls[calls["run_id"].isin(ids)]
    if len(d) == 0:
        _empty(ax, "calls for these runs")
        return fig
    w = window or int(d["context_window_tokens"].iloc[0])
    # tier bands: none below warn, then one band per tier up to the window and beyond
    edges = [0.0, thresholds["warn"], thresholds["soft"], thresholds["full"], thresholds["emergency"], 1.0]
    for name, lo, hi in zip(M.TIER_NAMES, edges, edges[1:]):
        ax.axhspan(lo * w, hi * w, color=TIER_COLORS[name], alpha=0.12, lw=0, label=None)
        if name != "none":
            ax.axhline(lo * w, color=TIER_COLORS[name], lw=0.8, ls=":", label=f"{name} ({lo:.0%})")
    ax.axhline(w, color="black", lw=1.0, label=f"window ({w:,})")
    colors = [f"C{i % 10}" for i in range(len(ids))]
    flags = dict(offload=False, fallback=False, forced=False, overflow=False)
    tiers_seen: set[str] = set()
    for rid, c in zip(ids, colors):
        g = d[d["run_id"] == rid].sort_values("call_index")
        if len(g) == 0:
            continue
        x = g["call_index"].to_numpy()
        ax.plot(x, g["history_tokens"].to_numpy(), ls="--", lw=1.0, color=c, alpha=0.7)
        ax.plot(x, g["tokens_sent"].to_numpy(), lw=1.5, color=c, label=_short((labels or {}).get(rid, rid)))
        comp = g[g["compacted"].astype(bool)]
        for tier, mk in _TIER_MARKERS.items():
            t = comp[comp["tier_name"] == tier]
            if len(t):
                tiers_seen.add(tier)
                ax.scatter(t["call_index"], t["tokens_sent"], marker=mk, s=28, color=TIER_COLORS[tier], edgecolor=c, zorder=3, gid=f"compaction-{tier}")
        off = g[(g["offloads_tool_time_count"] + g["offloads_compaction_count"]) > 0]
        if len(off):
            flags["offload"] = True
            ax.scatter(off["call_index"], off["tokens_sent"], marker="v", s=18, color=c, alpha=0.6, zorder=3, gid="offload")
        fb = g[g["fallback"].astype(bool)]
        if len(fb):
            flags["fallback"] = True
            ax.scatter(fb["call_index"], fb["tokens_sent"], marker="x", s=40, color="black", zorder=4, gid="fallback")
        ft = g[g["forced_truncation"].astype(bool)]
        if len(ft):
            flags["forced"] = True
            ax.scatter(ft["call_index"], ft["tokens_sent"], marker="o", s=80, facecolor="none", edgecolor="red", lw=1.5, zorder=4, gid="forced_truncation")
        ov = g[g["overflow"].astype(bool)]
        if len(ov):
            flags["overflow"] = True
            ax.scatter(ov["call_index"], ov["tokens_sent"], marker="*", s=90, color="red", zorder=5, gid="overflow")
    # legend proxies for the marker kinds (one entry each, whatever the number of runs)
    from matplotlib.lines import Line2D

    proxies = [Line2D([], [], ls="--", color="0.3", label="history tokens"), Line2D([], [], color="0.3", label="tokens sent")]
    for tier in sorted(tiers_seen, key=M.TIER_NAMES.index):
        proxies.append(Line2D([], [], ls="", marker=_TIER_MARKERS[tier], color=TIER_COLORS[tier], label=f"compaction: {tier}"))
    legend_marks = {"offload": ("v", "0.3", "offload"), "fallback": ("x", "black", "summary fallback"), "forced": ("o", "red", "forced truncation"), "overflow": ("*", "red", "overflow")}
    for k, on in flags.items():
        if on:
            mk, col, lab = legend_marks[k]
            proxies.append(Line2D([], [], ls="", marker=mk, color=col, markerfacecolor="none" if k == "forced" else col, label=lab))
    h, lab = ax.get_legend_handles_labels()
    ax.legend(handles=h + proxies, fontsize=7, loc="upper left", ncol=2, framealpha=0.85)
    ax.set_xlabel("call index (model call)")
    ax.set_ylabel("tokens (bytes/4 estimate)")
    ax.set_ylim(0, max(float(d["history_tokens"].max()), w) * 1.05)
    ax.set_title(title or "Tokens per call")
    return fig


def tier_swimlane(calls: Any, run_ids: Sequence[str] | None = None, *, labels: Mapping[str, str] | None = None) -> Any:
    """One lane per run, one cell per call, coloured by the tier of that call's compaction
    (grey: none); ``labels``: lane names per run id (default the run id)."""
    import numpy as np
    from matplotlib.colors import BoundaryNorm, ListedColormap

    ids = list(run_ids) if run_ids is not None else list(dict.fromkeys(calls["run_id"])) if len(calls) else []
    fig, (ax,) = _figure(size=(9.0, 1.0 + 0.35 * max(len(ids), 1)))
    if not ids:
        _empty(ax, "calls")
        return fig
    n = int(calls["call_index"].max()) + 1
    grid = np.full((len(ids), n), np.nan)
    order = {t: i for i, t in enumerate(M.TIER_NAMES)}
    for i, rid in enumerate(ids):
        g = calls[calls["run_id"] == rid]
        grid[i, g["call_index"].to_numpy(dtype=int)] = [order.get(str(t), 0) for t in g["tier_name"]]
    cmap = ListedColormap([TIER_COLORS[t] for t in M.TIER_NAMES]).with_extremes(bad="white")
    im = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", interpolation="nearest", cmap=cmap, norm=BoundaryNorm(np.arange(-0.5, 5.5), 5))
    ax.set_yticks(range(len(ids)), [_short((labels or {}).get(r, r), 40) for r in ids], fontsize=7)
    ax.set_xlabel("call index")
    cb = fig.colorbar(im, ax=ax, ticks=range(5), fraction=0.03)
    cb.ax.set_yticklabels(M.TIER_NAMES, fontsize=7)
    ax.set_title("Tier per call")
    return fig


def tier_transition_matrix(calls: Any, *, normalize: bool = False) -> Any:
    """Heatmap of :func:`h9eval.analysis.metrics.tier_transitions` (rows: tier at a call, columns: tier
    at the next call of the same run), with the counts (or shares) written in the cells."""
    m = M.tier_transitions(calls, normalize=normalize)
    fig, (ax,) = _figure(size=(5.2, 4.4))
    im = ax.imshow(m.to_numpy(dtype=float), cmap="Blues")
    ax.set_xticks(range(len(M.TIER_NAMES)), M.TIER_NAMES, rotation=30)
    ax.set_yticks(range(len(M.TIER_NAMES)), M.TIER_NAMES)
    ax.set_xlabel("next call's tier")
    ax.set_ylabel("tier")
    vmax = float(m.to_numpy().max()) or 1.0
    for i in range(len(M.TIER_NAMES)):
        for j in range(len(M.TIER_NAMES)):
            v = m.iat[i, j]
            ax.text(j, i, f"{v:.2f}" if normalize else f"{int(v)}", ha="center", va="center", fontsize=8, color="white" if v > vmax / 2 else "black")
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title("Tier transitions")
    return fig


def anchor_retention_heatmap(table: Any, *, method: str | None = "recall") -> Any:
    """Anchor type × compaction index (:func:`h9eval.analysis.metrics.anchor_retention`), from a probes
    table (anchor-kind probe scores) or a compactions table (share of records whose anchor
    section carries information)."""
    w = M.anchor_retention(table, method=method) if len(table) else None
    fig, (ax,) = _figure(size=(9.0, 3.8))
    if w is None or w.size == 0:
        _empty(ax, "anchor data")
        return fig
    im = ax.imshow(w.to_numpy(dtype=float), aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    ax.set_yticks(range(len(w.index)), list(w.index), fontsize=8)
    cols = list(w.columns)
    step = max(1, len(cols) // 20)
    ax.set_xticks(range(0, len(cols), step), [str(c) for c in cols[::step]], fontsize=7)
    src = "compaction record" if "anchors_json" in table.columns else "compactions so far"
    ax.set_xlabel(f"compaction index ({src})")
    fig.colorbar(im, ax=ax, fraction=0.03, label="retained" if "anchors_json" not in table.columns else "filled")
    ax.set_title("Anchor retention")
    return fig


def drift_curves(probes: Any, run_ids: Sequence[str] | None = None, *, method: str | None = "recall") -> Any:
    """Intent and fact retention over calls (one axis each, one line per run), from
    :func:`h9eval.analysis.metrics.retention_over_calls`. ``fact`` includes ``derived_fact``."""
    fig, axes = _figure(1, 2, size=(10.0, 4.0))
    groups = {"intent": ("intent", "key_terms"), "facts": ("fact", "derived_fact")}
    d = M.retention_over_calls(probes, method=method) if len(probes) else None
    for ax, (title, kinds) in zip(axes, groups.items()):
        sub = d[d["probe_kind"].isin(kinds)] if d is not None and len(d) else None
        if sub is None or len(sub) == 0:
            _empty(ax, f"{title} probes")
            ax.set_title(f"{title} retention")
            continue
        ids = list(run_ids) if run_ids is not None else list(dict.fromkeys(sub["run_id"]))
        for i, rid in enumerate(ids):
            g = sub[sub["run_id"] == rid]
            # several kinds per group: weight each checkpoint's kinds by their probe counts
            g = g.assign(w=g["retention"] * g["n_probes"]).groupby("checkpoint_call_index")[["w", "n_probes"]].sum()
            ax.plot(g.index, g["w"] / g["n_probes"], marker=".", lw=1.2, color=f"C{i % 10}", label=_short(rid, 40))
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("call index")
        ax.set_ylabel("retention (mean score)")
        ax.set_title(f"{title} retention")
        ax.legend(fontsize=6, loc="lower left")
    return fig


def strategy_comparison(runs_metrics: Any, *, x: str = "tokens_saved", y: str = "retention", n: int = 1000, seed: int = 0) -> Any:
    """Tokens saved vs retention per config, with bootstrap-CI error bars across tasks and the
    Pareto front (both larger-is-better). ``runs_metrics``: :func:`h9eval.analysis.metrics.run_metrics`
    rows (one per run; aggregated here with :func:`h9eval.analysis.metrics.config_metrics`) or
    ``config_metrics`` rows already aggregated (with ``<x>_ci_lo``... columns)."""
    n_cfg = runs_metrics["label"].nunique() if "label" in runs_metrics.columns else len(runs_metrics)
    fig, (ax,) = _figure(size=(8.0, 5.0 + 0.14 * n_cfg))
    if len(runs_metrics) == 0:
        _empty(ax, "runs")
        return fig
    cm = M.config_metrics(runs_metrics, (x, y), n=n, seed=seed) if "run_id" in runs_metrics.columns else runs_metrics
    cm = cm.dropna(subset=[x, y])
    if len(cm) == 0:
        _empty(ax, f"runs with both {x} and {y}")
        return fig
    # one marker shape per history mode, so the two modes of a config are told apart
    modes = list(dict.fromkeys(cm["history_mode"])) if "history_mode" in cm.columns else []
    shapes = dict(zip(modes, "osD^v"))
    from matplotlib import colormaps

    colors = [colormaps["tab20"](i) for i in range(20)] + [colormaps["tab20b"](i) for i in range(0, 20, 2)]
    cfg_color: dict[str, str] = {}
    for r in cm.to_dict("records"):
        lab = str(r.get("label", ""))
        c = cfg_color.setdefault(lab, colors[len(cfg_color) % len(colors)])
        xerr = [[r[x] - r.get(f"{x}_ci_lo", r[x])], [r.get(f"{x}_ci_hi", r[x]) - r[x]]]
        yerr = [[r[y] - r.get(f"{y}_ci_lo", r[y])], [r.get(f"{y}_ci_hi", r[y]) - r[y]]]
        bad = r.get("overflows", 0) > 0
        mode = r.get("history_mode")
        text = lab + (f" [{mode}]" if len(modes) > 1 else "") + (" (overflow)" if bad else "")
        ax.errorbar([r[x]], [r[y]], xerr=xerr, yerr=yerr, fmt=shapes.get(mode, "o"), color=c, mfc="white" if bad else c, capsize=3, label=text)
    front = M.pareto_front(cm, x, y)
    if len(front):
        ax.plot(front[x], front[y], color="black", lw=1, ls="--", label="Pareto front", zorder=0)
    ax.set_xlabel(f"{x.replace('_', ' ')} (1 - sent/history)")
    ax.set_ylabel(f"{y} (mean probe score)")
    # labels are long (they name every non-default parameter): legend below the axes
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", fontsize=6, ncol=1)
    ax.set_title("Strategies: tokens saved vs retention (95% bootstrap CI over tasks)")
    return fig


def summarizer_cost(runs: Any, *, by: str = "label") -> Any:
    """Summarizer calls and cost per run, per config (:func:`h9eval.analysis.metrics.summarizer_usage`;
    ``runs``: a runs table or a calls table)."""
    u = M.summarizer_usage(runs, by=by)
    fig, axes = _figure(1, 2, size=(10.0, 0.8 + 0.35 * max(len(u), 2)))
    if len(u) == 0:
        for ax in axes:
            _empty(ax, "runs")
        return fig
    labels = [str(v) for v in u[by]]
    axes[0].barh(labels, u["calls_per_run"], color="C0")
    axes[0].set_xlabel("summarizer calls per run")
    axes[1].barh(labels, u["cost_per_run_usd"], color="C1")
    axes[1].set_xlabel("summarizer cost per run (USD)")
    axes[1].set_yticks(range(len(labels)), [""] * len(labels))
    for ax in axes:
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle("Summarizer usage")
    return fig


def token_estimate_error(df: Any, calls_with_both_counts: Any | None = None, *, thresholds: Mapping[str, float] = M.DEFAULT_THRESHOLDS) -> Any:
    """Left: relative error of bytes/4 (and the calibrated estimate) against BPE per content
    kind (:func:`h9eval.analysis.metrics.token_estimate_error` of ``df``, a message token table).
    Right (when ``calls_with_both_counts`` is given): estimate vs BPE history tokens per call,
    with calls whose tier or overflow differs (:func:`h9eval.analysis.metrics.tier_misclassification`)
    marked in red."""
    import numpy as np

    ncols = 2 if calls_with_both_counts is not None else 1
    fig, axes = _figure(1, ncols, size=(5.0 * ncols, 4.0))
    e = M.token_estimate_error(df) if len(df) else None
    ax = axes[0]
    if e is None or len(e) == 0:
        _empty(ax, "messages")
    else:
        xs = np.arange(len(e))
        cols = [c for c in ("est_error", "calibrated_error") if c in e.columns]
        wbar = 0.8 / len(cols)
        for k, c in enumerate(cols):
            ax.bar(xs + (k - (len(cols) - 1) / 2) * wbar, e[c] * 100, wbar, label={"est_error": "bytes/4", "calibrated_error": "calibrated"}[c])
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(xs, list(e["kind"]))
        ax.set_ylabel("error vs BPE (%)")
        ax.legend(fontsize=7)
        ax.set_title("Token estimate error by content kind")
    if calls_with_both_counts is not None:
        ax = axes[1]
        c = calls_with_both_counts
        if len(c) == 0:
            _empty(ax, "calls")
        else:
            bad = M.tier_misclassification(c, thresholds)
            ax.scatter(c["history_tokens_bpe"], c["history_tokens"], s=6, color="0.5", label="calls")
            if len(bad):
                ax.scatter(bad["history_tokens_bpe"], bad["history_tokens"], s=14, color="red", label=f"tier differs ({len(bad)})", gid="misclassified")
            hi = float(max(c["history_tokens_bpe"].max(), c["history_tokens"].max()))
            ax.plot([0, hi], [0, hi], color="black", lw=0.8, ls="--")
            ax.set_xlabel("BPE tokens (history)")
            ax.set_ylabel("bytes/4 tokens (history)")
            ax.legend(fontsize=7)
            ax.set_title("Per call: estimate vs BPE")
    return fig


def records_token_curve(compactions: Any, session_ids: Sequence[str] | None = None) -> Any:
    """harness9's own compaction records (``compactions`` table, e.g. from
    :func:`h9eval.harness9.records_dir.read_records_dir`): tokens before (dashed) and after (solid)
    each record, per session, with the record's tier as the marker."""
    fig, (ax,) = _figure()
    if len(compactions) == 0:
        _empty(ax, "compaction records")
        return fig
    ids = list(session_ids) if session_ids is not None else list(dict.fromkeys(compactions["session_id"]))
    from matplotlib.lines import Line2D

    seen: set[str] = set()
    for i, sid in enumerate(ids):
        g = compactions[compactions["session_id"] == sid].sort_values("record_index")
        c = f"C{i % 10}"
        x = g["record_index"].to_numpy()
        ax.plot(x, g["tokens_before"].to_numpy(), ls="--", lw=1.0, color=c, alpha=0.7)
        ax.plot(x, g["tokens_after"].to_numpy(), lw=1.5, color=c, label=_short(sid, 40))
        for tier, mk in _TIER_MARKERS.items():
            t = g[g["tier_name"] == tier]
            if len(t):
                seen.add(tier)
                ax.scatter(t["record_index"], t["tokens_after"], marker=mk, s=28, color=TIER_COLORS[tier], edgecolor=c, zorder=3, gid=f"compaction-{tier}")
        err = g[g["error"].astype(str) != ""]
        if len(err):
            ax.scatter(err["record_index"], err["tokens_after"], marker="x", s=40, color="black", zorder=4, gid="error")
    proxies = [Line2D([], [], ls="--", color="0.3", label="tokens before"), Line2D([], [], color="0.3", label="tokens after")]
    proxies += [Line2D([], [], ls="", marker=_TIER_MARKERS[t], color=TIER_COLORS[t], label=t) for t in sorted(seen, key=M.TIER_NAMES.index)]
    h, _ = ax.get_legend_handles_labels()
    ax.legend(handles=h + proxies, fontsize=7, loc="upper left", ncol=2)
    ax.set_xlabel("compaction record index")
    ax.set_ylabel("tokens (harness9 estimate)")
    ax.set_title("harness9 compaction records: tokens before/after")
    return fig


def tune_evidence(evidence: Any) -> Any:
    """The tuner's evidence (:class:`h9eval.analysis.tune.TuneResult` ``evidence``): tokens saved vs
    retention of every evaluated config; filled: feasible (no overflow, no emergency, within
    the bounds), open: not; the recommended config is ringed in black."""
    fig, (ax,) = _figure(size=(7.0, 4.5))
    if len(evidence) == 0:
        _empty(ax, "evaluated configs")
        return fig
    stages = list(dict.fromkeys(evidence["stage"]))
    for i, st in enumerate(stages):
        e = evidence[evidence["stage"] == st]
        ok = e[e["feasible"].astype(bool)]
        bad = e[~e["feasible"].astype(bool)]
        if len(ok):
            ax.scatter(ok["tokens_saved"], ok["retention"], color=f"C{i}", s=30, label=f"{st}: feasible ({len(ok)})", gid=f"feasible-{st}")
        if len(bad):
            ax.scatter(bad["tokens_saved"], bad["retention"], facecolor="none", edgecolor=f"C{i}", s=30, label=f"{st}: infeasible ({len(bad)})", gid=f"infeasible-{st}")
    b = evidence[evidence["best"].astype(bool)] if "best" in evidence.columns else evidence.iloc[:0]
    if len(b):
        ax.scatter(b["tokens_saved"], b["retention"], facecolor="none", edgecolor="black", s=160, lw=2, label="recommended", gid="best")
    ax.set_xlabel("tokens saved (mean over tasks)")
    ax.set_ylabel("retention (mean recall score)")
    ax.legend(fontsize=7)
    ax.set_title("Threshold search")
    return fig
