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
    "family",
    "tier_transition_matrix",
    "anchor_retention_heatmap",
    "config_heatmap",
    "CONTROL_KINDS",
    "drift_curves",
    "strategy_comparison",
    "summarizer_cost",
    "retention_cost_frontier",
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


def new_figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = (9.0, 4.5)) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(nrows * ncols)]
    return fig, axes


def empty_figure(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _short(run_id: str, n: int = 48) -> str:
    return run_id if len(run_id) <= n else run_id[: n - 1] + "…"


CONTROL_KINDS: tuple[str, ...] = ("keep_all", "drop_all")
"""Policy kinds that are controls (bounds of the comparison), drawn as reference lines."""

_MAX_ROWS = 12  # labelled series per panel: beyond this a reader cannot find a row at a glance
_CONTROL_STYLE = {"keep_all": ("--", "0.35"), "drop_all": (":", "black")}


def _fig_legend_below(fig: Any, handles: list[Any], ncol: int = 4) -> None:
    """A legend outside every axes, under the figure, so it can never cover data."""
    if handles:
        fig.legend(handles=handles, loc="outside lower center", fontsize=7, ncol=min(ncol, len(handles)), frameon=False)


def _threshold_edges(thresholds: Mapping[str, float] | None) -> list[tuple[str, float, float]]:
    if not thresholds:
        return []
    edges = [0.0, *(float(thresholds[t]) for t in ("warn", "soft", "full", "emergency")), 1.0]
    return list(zip(M.TIER_NAMES, edges, edges[1:]))


def token_curve(
    calls: Any,
    run_ids: Sequence[str] | None = None,
    *,
    thresholds: Mapping[str, float] | None = M.DEFAULT_THRESHOLDS,
    thresholds_by_run: Mapping[str, Mapping[str, float] | None] | None = None,
    window: int | None = None,
    title: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Any:
    """History tokens (dashed) and tokens sent (solid) per call, one panel per run, each with
    that run's own tier bands.

    ``thresholds_by_run``: per run id, the ``warn``/``soft``/``full``/``emergency`` fractions it
    ran with (``None``: the policy has no tiers, so no bands); runs not in it use
    ``thresholds`` (default harness9's; ``None``: no bands). Bands are fractions of the run's
    own ``context_window_tokens`` (or ``window`` when given); the black line is the window.
    The right axis names each band with its threshold. Markers on the tokens-sent line:
    compactions by tier (▲ warn, ■ soft, ◆ full, ✖ emergency), offloads (▼), summary
    fallbacks (x), forced truncations (red ring) and overflows (★). ``labels``: panel title per
    run id (default the run id). ``run_ids``: runs to draw (default all, in order). The legend
    sits under the panels.
    """
    ids = list(run_ids) if run_ids is not None else (list(dict.fromkeys(calls["run_id"])) if len(calls) else [])
    d = calls[calls["run_id"].isin(ids)] if len(calls) else calls
    ids = [r for r in ids if len(d) and (d["run_id"] == r).any()]
    fig, axes = new_figure(max(len(ids), 1), 1, size=(9.0, 1.2 + 2.3 * max(len(ids), 1)))
    if not ids:
        empty_figure(axes[0], "calls" if len(calls) == 0 else "calls for these runs")
        return fig
    from matplotlib.lines import Line2D

    flags = dict(offload=False, fallback=False, forced=False, overflow=False)
    tiers_seen: set[str] = set()
    xmax = float(d["call_index"].max())
    for ax, rid in zip(axes, ids):
        g = d[d["run_id"] == rid].sort_values("call_index")
        w = int(window or g["context_window_tokens"].iloc[0])
        th = thresholds_by_run[rid] if thresholds_by_run is not None and rid in thresholds_by_run else thresholds
        right_ticks: list[tuple[float, str]] = []
        for name, lo, hi in _threshold_edges(th):
            ax.axhspan(lo * w, hi * w, color=TIER_COLORS[name], alpha=0.14, lw=0)
            if name != "none":
                ax.axhline(lo * w, color=TIER_COLORS[name], lw=0.8, ls=":", gid=f"threshold-{name}")
                right_ticks.append((lo * w, f"{name} {lo:.0%}"))
        ax.axhline(w, color="black", lw=1.0, gid="window")
        x = g["call_index"].to_numpy()
        ax.plot(x, g["history_tokens"].to_numpy(), ls="--", lw=1.0, color="C0", alpha=0.8)
        ax.plot(x, g["tokens_sent"].to_numpy(), lw=1.6, color="C0")
        comp = g[g["compacted"].astype(bool)]
        for tier, mk in _TIER_MARKERS.items():
            t = comp[comp["tier_name"] == tier]
            if len(t):
                tiers_seen.add(tier)
                ax.scatter(
                    t["call_index"],
                    t["tokens_sent"],
                    marker=mk,
                    s=30,
                    color=TIER_COLORS[tier],
                    edgecolor="black",
                    lw=0.5,
                    zorder=3,
                    gid=f"compaction-{tier}",
                )
        off = g[(g["offloads_tool_time_count"] + g["offloads_compaction_count"]) > 0]
        if len(off):
            flags["offload"] = True
            ax.scatter(
                off["call_index"], off["tokens_sent"], marker="v", s=16, color="0.3", alpha=0.7, zorder=3, gid="offload"
            )
        for key, col, kw in (
            ("fallback", "fallback", dict(marker="x", s=40, color="black", zorder=4)),
            (
                "forced",
                "forced_truncation",
                dict(marker="o", s=80, facecolor="none", edgecolor="red", lw=1.5, zorder=4),
            ),
            ("overflow", "overflow", dict(marker="*", s=90, color="red", zorder=5)),
        ):
            sel = g[g[col].astype(bool)]
            if len(sel):
                flags[key] = True
                ax.scatter(
                    sel["call_index"], sel["tokens_sent"], gid="forced_truncation" if key == "forced" else col, **kw
                )
        top = max(float(g["history_tokens"].max()), float(g["tokens_sent"].max()), w) * 1.05
        ax.set_ylim(0, top)
        ax.set_xlim(-0.5, xmax + 0.5)
        # the bands are named on a right axis, never in a legend over the data
        r = ax.twinx()
        r.set_ylim(0, top)
        r.set_yticks([v for v, _ in right_ticks], [s for _, s in right_ticks], fontsize=7)
        r.tick_params(length=0)
        ax.set_ylabel("tokens", fontsize=8)
        ax.set_title(
            _short((labels or {}).get(rid, rid), 90)
            + f" · window {w:,} tokens (black line)"
            + ("" if th else " · no tiers"),
            fontsize=9,
            loc="left",
        )
        ax.tick_params(labelsize=7)
    axes[-1].set_xlabel("call index (model call)")
    proxies = [
        Line2D([], [], ls="--", color="C0", label="history tokens"),
        Line2D([], [], color="C0", label="tokens sent"),
    ]
    for tier in sorted(tiers_seen, key=M.TIER_NAMES.index):
        proxies.append(
            Line2D(
                [],
                [],
                ls="",
                marker=_TIER_MARKERS[tier],
                color=TIER_COLORS[tier],
                markeredgecolor="black",
                label=f"compaction: {tier}",
            )
        )
    marks = {
        "offload": ("v", "0.3", "offload"),
        "fallback": ("x", "black", "summary fallback"),
        "forced": ("o", "red", "forced truncation"),
        "overflow": ("*", "red", "overflow"),
    }
    for k, on in flags.items():
        if on:
            mk, col, lab = marks[k]
            proxies.append(
                Line2D([], [], ls="", marker=mk, color=col, markerfacecolor="none" if k == "forced" else col, label=lab)
            )
    _fig_legend_below(fig, proxies, ncol=5)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def family(kind: Any) -> str:
    """The panel a configuration goes to when a mode has too many to show at once: harness9's
    ``progressive`` family or the other strategies."""
    return "progressive" if str(kind) == "progressive" else "other strategies"


def tier_swimlane(
    calls: Any,
    run_ids: Sequence[str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    title: str = "Tier per call",
    groups: Mapping[str, Sequence[str]] | None = None,
) -> Any:
    """One lane per run, one cell per call, coloured by the tier of that call's compaction
    (grey: none); ``labels``: lane names per run id (default the run id). ``groups``: one
    panel per entry (panel title -> run ids, in lane order), sharing the call axis; default
    one panel with ``run_ids`` (default all runs)."""
    import numpy as np
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.figure import Figure

    if groups is None:
        ids = list(run_ids) if run_ids is not None else list(dict.fromkeys(calls["run_id"])) if len(calls) else []
        panels = [("", ids)]
    else:
        panels = [(k, list(v)) for k, v in groups.items() if len(v)]
    total = sum(len(v) for _, v in panels)
    if total == 0:
        fig, (ax,) = new_figure(size=(9.0, 1.4))
        empty_figure(ax, "calls")
        return fig
    fig = Figure(figsize=(9.0, 0.9 + 0.3 * total + 0.45 * len(panels)), layout="constrained")
    gs = fig.add_gridspec(len(panels), 1, height_ratios=[len(v) + 1.2 for _, v in panels])
    n = int(calls["call_index"].max()) + 1
    order = {t: i for i, t in enumerate(M.TIER_NAMES)}
    cmap = ListedColormap([TIER_COLORS[t] for t in M.TIER_NAMES]).with_extremes(bad="white")
    axes, im, first = [], None, None
    for k, (name, ids) in enumerate(panels):
        ax = fig.add_subplot(gs[k, 0], sharex=first)
        first = first or ax
        grid = np.full((len(ids), n), np.nan)
        for i, rid in enumerate(ids):
            g = calls[calls["run_id"] == rid]
            grid[i, g["call_index"].to_numpy(dtype=int)] = [order.get(str(t), 0) for t in g["tier_name"]]
        im = ax.imshow(
            np.ma.masked_invalid(grid),
            aspect="auto",
            interpolation="nearest",
            cmap=cmap,
            norm=BoundaryNorm(np.arange(-0.5, 5.5), 5),
        )
        ax.set_yticks(range(len(ids)), [_short((labels or {}).get(r, r), 40) for r in ids], fontsize=7)
        if name:
            ax.set_title(name, fontsize=8, loc="left")
        axes.append(ax)
    axes[-1].set_xlabel("call index")
    assert im is not None  # one panel at least: the caller returned early without runs
    cb = fig.colorbar(im, ax=axes, ticks=range(5), fraction=0.03)
    cb.ax.set_yticklabels(M.TIER_NAMES, fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def tier_transition_matrix(
    calls: Any, *, normalize: bool = False, groups: Mapping[str, Sequence[str]] | None = None
) -> Any:
    """Heatmap of :func:`h9eval.analysis.metrics.tier_transitions` (rows: tier at a call, columns: tier
    at the next call of the same run), with the counts (or shares) written in the cells and each
    row's number of transitions (n) on its label.

    ``groups``: one panel per entry (title -> run ids), e.g. one per configuration, so
    configurations are never pooled; default one panel for all of ``calls``.
    """
    import numpy as np

    panels = (
        list(groups.items())
        if groups
        else [("Tier transitions", list(dict.fromkeys(calls["run_id"])) if len(calls) else [])]
    )
    ncols = 2 if len(panels) == 4 else min(len(panels), 3)
    nrows = -(-len(panels) // ncols)
    fig, axes = new_figure(nrows, ncols, size=(3.6 * ncols + 0.6, 3.3 * nrows + 0.3))
    for ax, (name, ids) in zip(axes, panels):
        sub = calls[calls["run_id"].isin(list(ids))] if len(calls) else calls
        counts = M.tier_transitions(sub)
        m = M.tier_transitions(sub, normalize=True) if normalize else counts
        row_n = counts.sum(axis=1).to_numpy()
        ax.imshow(m.to_numpy(dtype=float), cmap="Blues", vmin=0, vmax=1 if normalize else None)
        ax.set_xticks(range(len(M.TIER_NAMES)), M.TIER_NAMES, rotation=30, fontsize=7)
        ax.set_yticks(range(len(M.TIER_NAMES)), [f"{t} (n={int(k)})" for t, k in zip(M.TIER_NAMES, row_n)], fontsize=7)
        ax.set_xlabel("next call's tier", fontsize=7)
        vmax = float(np.nanmax(m.to_numpy(dtype=float))) or 1.0
        for i in range(len(M.TIER_NAMES)):
            for j in range(len(M.TIER_NAMES)):
                v = m.iat[i, j]
                ax.text(
                    j,
                    i,
                    f"{v:.2f}" if normalize else f"{int(v)}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if v > vmax / 2 else "black",
                )
        ax.set_title(f"{_short(name, 44)}\n{len(ids)} run(s)", fontsize=8)
    for ax in axes[len(panels) :]:
        ax.set_axis_off()
    return fig


def anchor_retention_heatmap(table: Any, *, method: str | None = "recall") -> Any:
    """Anchor type × compaction index (:func:`h9eval.analysis.metrics.anchor_retention`), from a probes
    table (anchor-kind probe scores) or a compactions table (share of records whose anchor
    section carries information)."""
    w = M.anchor_retention(table, method=method) if len(table) else None
    fig, (ax,) = new_figure(size=(9.0, 3.8))
    if w is None or w.size == 0:
        empty_figure(ax, "anchor data")
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


def config_heatmap(
    table: Any,
    *,
    value: str = "retention",
    n_col: str = "n_probes",
    column: str = "probe_kind",
    row: str = "label",
    panel: str | None = "history_mode",
    split: str | None = "family",
    max_rows: int = _MAX_ROWS,
    title: str = "Retention by configuration",
    value_label: str = "retention",
) -> Any:
    """Configuration × kind heatmap of an already aggregated table (e.g.
    :func:`h9eval.analysis.metrics.retention` by label, history mode and probe kind): one
    panel column per ``panel`` value, each cell the ``value`` with its ``n`` written under it;
    rows ordered by their mean over the columns (best first). When a panel would hold more
    than ``max_rows`` rows and the table has a ``split`` column (e.g. :func:`family`), the
    rows are split into one panel row per ``split`` value."""
    import numpy as np
    from matplotlib.figure import Figure

    if len(table) == 0:
        fig, (ax,) = new_figure(size=(6.0, 2.0))
        empty_figure(ax, "data")
        return fig
    cols_p = list(dict.fromkeys(table[panel])) if panel and panel in table.columns else [None]
    sel = lambda d, key, v: d if v is None else d[d[key] == v]  # noqa: E731
    too_many = max(sel(table, panel, p)[row].nunique() for p in cols_p) > max_rows
    rows_s = list(dict.fromkeys(table[split])) if too_many and split and split in table.columns else [None]
    cols = list(dict.fromkeys(table[column]))
    heights = [max(sel(sel(table, split, f), panel, p)[row].nunique() for p in cols_p) for f in rows_s]
    fig = Figure(
        figsize=(min(4.6 * len(cols_p), 10.0) + 0.8, 1.0 + 0.36 * sum(heights) + 0.5 * len(rows_s)),
        layout="constrained",
    )
    gs = fig.add_gridspec(len(rows_s), len(cols_p), height_ratios=[max(h, 1) + 0.8 for h in heights])
    im, axes = None, []
    for a, f in enumerate(rows_s):
        for b, p in enumerate(cols_p):
            ax = fig.add_subplot(gs[a, b])
            axes.append(ax)
            sub = sel(sel(table, split, f), panel, p)
            if len(sub) == 0:
                ax.set_axis_off()
                continue
            v = sub.pivot_table(index=row, columns=column, values=value, aggfunc="first").reindex(columns=cols)
            n = sub.pivot_table(index=row, columns=column, values=n_col, aggfunc="first").reindex(
                index=v.index, columns=cols
            )
            order = v.mean(axis=1).sort_values(ascending=False, kind="stable").index
            v, n = v.loc[order], n.loc[order]
            im = ax.imshow(
                v.to_numpy(dtype=float), aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest"
            )
            for i in range(v.shape[0]):
                for j in range(v.shape[1]):
                    x, k = v.iat[i, j], n.iat[i, j]
                    if isinstance(x, float) and np.isnan(x):
                        continue
                    ax.text(
                        j,
                        i,
                        f"{x:.2f}\nn={int(k)}",
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="black" if x > 0.6 else "white",
                    )
            ax.set_xticks(
                range(len(cols)), [str(c).replace("_", " ") for c in cols], rotation=25, ha="right", fontsize=7
            )
            ax.set_yticks(range(len(order)), [_short(str(r), 34) for r in order], fontsize=7)
            head = " · ".join(str(t) for t in (p, f) if t is not None)
            if head:
                ax.set_title(head, fontsize=9)
    if im is not None:
        fig.colorbar(im, ax=axes, fraction=0.03, label=value_label)
    fig.suptitle(title, fontsize=10)
    return fig


def drift_curves(
    probes: Any,
    run_ids: Sequence[str] | None = None,
    *,
    method: str | None = "recall",
    labels: Mapping[str, str] | None = None,
) -> Any:
    """Intent and fact retention over calls (one axis each, one line per run), from
    :func:`h9eval.analysis.metrics.retention_over_calls`. ``fact`` includes ``derived_fact``.
    ``labels``: legend text per run id (the configuration; default the run id). The legend
    sits under the axes, never over the curves."""
    from matplotlib.lines import Line2D

    fig, axes = new_figure(1, 2, size=(10.0, 4.2))
    groups = {"intent": ("intent", "key_terms"), "facts": ("fact", "derived_fact")}
    d = M.retention_over_calls(probes, method=method) if len(probes) else None
    ids_all = (
        list(run_ids) if run_ids is not None else (list(dict.fromkeys(d["run_id"])) if d is not None and len(d) else [])
    )
    # a line style per run as well as a colour: runs that agree overlap, and must stay visible
    styles = {rid: (f"C{i % 10}", ("-", "--", "-.", ":")[i % 4]) for i, rid in enumerate(ids_all)}
    drawn: dict[str, Any] = {}
    for ax, (title, kinds) in zip(axes, groups.items()):
        sub = d[d["probe_kind"].isin(kinds)] if d is not None and len(d) else None
        ax.set_title(f"{title} retention")
        if sub is None or len(sub) == 0:
            empty_figure(ax, f"{title} probes")
            continue
        for rid in ids_all:
            g = sub[sub["run_id"] == rid]
            if len(g) == 0:
                continue
            # several kinds per group: weight each checkpoint's kinds by their probe counts
            g = g.assign(w=g["retention"] * g["n_probes"]).groupby("checkpoint_call_index")[["w", "n_probes"]].sum()
            c, ls = styles[rid]
            ax.plot(g.index, g["w"] / g["n_probes"], marker=".", ms=3, lw=1.6, color=c, ls=ls, alpha=0.85)
            drawn.setdefault(
                rid, Line2D([], [], color=c, ls=ls, lw=1.6, label=_short((labels or {}).get(rid, rid), 50))
            )
        ax.set_ylim(-0.02, 1.05)
        ax.set_xlabel("call index")
        ax.set_ylabel("retention (mean score)")
    _fig_legend_below(fig, list(drawn.values()), ncol=3)
    return fig


def _is_control(r: Mapping[str, Any]) -> bool:
    return str(r.get("policy_kind", "")) in CONTROL_KINDS


def _panels(rows: list[dict[str, Any]], max_rows: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """Split one mode's configurations into panels of at most ``max_rows``: harness9's
    progressive family and the other strategies apart, then by rank."""
    fams = [(f, [r for r in rows if family(r.get("policy_kind")) == f]) for f in ("progressive", "other strategies")]
    if len(rows) <= max_rows or not all(f for _, f in fams):
        fams = [("", rows)]
    out = []
    for name, f in fams:
        chunks = [f[i : i + max_rows] for i in range(0, len(f), max_rows)]
        for k, ch in enumerate(chunks):
            out.append((name + (f" ({k + 1}/{len(chunks)})" if len(chunks) > 1 else ""), ch))
    return out


def _draw_controls(ax: Any, controls: list[dict[str, Any]], m: str, x_range: tuple[float, float]) -> None:
    """The controls' values of metric ``m`` as vertical lines, or named at the edge with their
    value when outside ``x_range``."""
    from matplotlib.transforms import blended_transform_factory

    tr = blended_transform_factory(ax.transData, ax.transAxes)
    lo_x, hi_x = x_range
    for c in controls:
        cv = c.get(m)
        if cv is None or cv != cv:
            continue
        kind = str(c.get("policy_kind"))
        ls, col = _CONTROL_STYLE.get(kind, ("--", "0.5"))
        if lo_x <= cv <= hi_x:
            ax.axvline(cv, ls=ls, color=col, lw=1.1, gid=f"control-{kind}")
            ax.text(cv, 1.0, f" {kind}", transform=tr, fontsize=6, color=col, va="bottom", ha="center", clip_on=False)
        elif cv < lo_x:
            ax.text(
                0.0,
                1.0,
                f"← {kind} {cv:.2f}",
                transform=ax.transAxes,
                fontsize=6,
                color=col,
                va="bottom",
                ha="left",
                gid=f"control-{kind}-offscale",
            )
        else:
            ax.text(
                1.0,
                1.0,
                f"{kind} {cv:.2f} →",
                transform=ax.transAxes,
                fontsize=6,
                color=col,
                va="bottom",
                ha="right",
                gid=f"control-{kind}-offscale",
            )


def strategy_comparison(
    runs_metrics: Any,
    *,
    x: str = "tokens_saved",
    y: str = "retention",
    n: int = 1000,
    seed: int = 0,
    max_rows: int = _MAX_ROWS,
) -> Any:
    """A ranked dot plot: one row per configuration, its mean ``y`` (left column) and ``x``
    (right column) with the 95% bootstrap CI across tasks; one group of panels per history
    mode, at most ``max_rows`` configurations per panel (harness9's progressive family and the
    other strategies apart when a mode has more), ranked by ``y``.

    The controls (:data:`CONTROL_KINDS`) are vertical reference lines, not rows; a control
    outside the configurations' range is named at the axis edge with its value. Diamonds: on
    the Pareto front of ``(x, y)`` within the mode (:func:`h9eval.analysis.metrics.pareto_front`);
    open markers: the configuration overflowed the window. ``runs_metrics``:
    :func:`h9eval.analysis.metrics.run_metrics` rows (aggregated here with
    :func:`h9eval.analysis.metrics.config_metrics`) or ``config_metrics`` rows.
    """
    from matplotlib.lines import Line2D

    if len(runs_metrics) == 0:
        fig, (ax,) = new_figure(size=(9.0, 2.5))
        empty_figure(ax, "runs")
        return fig
    cm = M.config_metrics(runs_metrics, (x, y), n=n, seed=seed) if "run_id" in runs_metrics.columns else runs_metrics
    modes = list(dict.fromkeys(cm["history_mode"])) if "history_mode" in cm.columns else [None]
    layout: list[tuple[Any, str, list[dict[str, Any]], list[dict[str, Any]], set[str]]] = []
    for mode in modes:
        sub = cm[cm["history_mode"] == mode] if mode is not None else cm
        recs = sub.to_dict("records")
        controls = [r for r in recs if _is_control(r)]
        rows = [r for r in recs if not _is_control(r)]
        rows.sort(key=lambda r: (-(r[y] if r[y] == r[y] else -1.0), str(r.get("label"))))
        front = M.pareto_front(sub[[not _is_control(r) for r in recs]], x, y)
        on_front = set(front["label"]) if "label" in front.columns else set()
        for name, chunk in _panels(rows, max_rows):
            layout.append((mode, name, chunk, controls, on_front))
    if not any(ch for _, _, ch, _, _ in layout):
        fig, (ax,) = new_figure(size=(9.0, 2.5))
        empty_figure(ax, "configurations other than the controls")
        return fig
    from matplotlib.figure import Figure

    heights = [max(len(ch), 1) + 1.6 for _, _, ch, _, _ in layout]
    fig = Figure(figsize=(10.0, 0.9 + 0.27 * sum(heights)), layout="constrained")
    gs = fig.add_gridspec(len(layout), 2, height_ratios=heights, width_ratios=[1, 1])

    # one x range per mode and metric, from the configurations' CIs (not the controls'), so the
    # panels of a mode compare directly and no control squeezes the data into a corner
    def _range(mode: Any, m: str) -> tuple[float, float]:
        lo = [r.get(f"{m}_ci_lo", r[m]) for md, _, ch, _, _ in layout if md == mode for r in ch if r[m] == r[m]]
        hi = [r.get(f"{m}_ci_hi", r[m]) for md, _, ch, _, _ in layout if md == mode for r in ch if r[m] == r[m]]
        if not lo:
            return 0.0, 1.0
        a, b = min(lo), max(hi)
        # a control close to the data (within a quarter of its span) is drawn; one further away is
        # named at the edge, so it never squeezes the configurations into a corner
        span = max(b - a, 0.02)
        for v in (c.get(m) for md, _, _, cs, _ in layout if md == mode for c in cs):
            if v is not None and v == v and a - span / 4 <= v <= b + span / 4:
                a, b = min(a, v), max(b, v)
        pad = max((b - a) * 0.08, 0.01)
        return a - pad, b + pad

    ranges = {(md, m): _range(md, m) for md in modes for m in (x, y)}
    first_ax: dict[tuple[Any, str], Any] = {}
    for i, (mode, name, chunk, controls, on_front) in enumerate(layout):
        for j, m in enumerate((y, x)):
            ax = fig.add_subplot(gs[i, j], sharex=first_ax.get((mode, m)))
            first_ax.setdefault((mode, m), ax)
            ys = list(range(len(chunk)))[::-1]
            for yy, r in zip(ys, chunk):
                v = r[m]
                if v != v:
                    continue
                lo, hi = r.get(f"{m}_ci_lo", v), r.get(f"{m}_ci_hi", v)
                bad = (r.get("overflows", 0) or 0) > 0
                mk = "D" if r.get("label") in on_front else "o"
                ax.errorbar(
                    [v],
                    [yy],
                    xerr=[[v - lo], [hi - v]],
                    fmt=mk,
                    ms=5,
                    color="C0",
                    mfc="white" if bad else "C0",
                    capsize=2,
                    lw=1.2,
                    gid="config",
                )
            ax.set_ylim(-0.7, max(len(chunk), 1) - 0.3)
            ax.set_xlim(*ranges[(mode, m)])
            ax.grid(axis="x", color="0.9", lw=0.6)
            ax.set_axisbelow(True)
            if j == 0:
                ax.set_yticks(
                    ys,
                    [
                        _short(str(r.get("label")), 40) + (" (overflow)" if (r.get("overflows", 0) or 0) > 0 else "")
                        for r in chunk
                    ],
                    fontsize=7,
                )
            else:
                ax.set_yticks(ys, [""] * len(ys))
            ax.tick_params(axis="x", labelsize=7)
            _draw_controls(ax, controls, m, ranges[(mode, m)])
            what = (y if j == 0 else x).replace("_", " ")
            head = (f"{mode} mode" if mode is not None else "") + (f" · {name}" if name else "")
            ax.set_title(f"{head}: {what}" if head else what, fontsize=8, loc="left", pad=10)
    handles = [
        Line2D([], [], ls="-", marker="o", color="C0", label="mean, 95% bootstrap CI across tasks"),
        Line2D([], [], ls="", marker="D", color="C0", label="on the tokens-saved/retention Pareto front"),
        Line2D([], [], ls="", marker="o", color="C0", mfc="white", label="overflowed the window"),
    ] + [
        Line2D([], [], ls=_CONTROL_STYLE[k][0], color=_CONTROL_STYLE[k][1], label=f"{k} (control)")
        for k in CONTROL_KINDS
    ]
    _fig_legend_below(fig, handles, ncol=3)
    return fig


def summarizer_cost(runs: Any, *, by: str = "label") -> Any:
    """Summarizer calls and cost per run, per config (:func:`h9eval.analysis.metrics.summarizer_usage`;
    ``runs``: a runs table or a calls table)."""
    u = M.summarizer_usage(runs, by=by)
    fig, axes = new_figure(1, 2, size=(10.0, 0.8 + 0.35 * max(len(u), 2)))
    if len(u) == 0:
        for ax in axes:
            empty_figure(ax, "runs")
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


def token_estimate_error(
    df: Any, calls_with_both_counts: Any | None = None, *, thresholds: Mapping[str, float] = M.DEFAULT_THRESHOLDS
) -> Any:
    """Left: relative error of bytes/4 (and the calibrated estimate) against BPE per content
    kind (:func:`h9eval.analysis.metrics.token_estimate_error` of ``df``, a message token table).
    Right (when ``calls_with_both_counts`` is given): estimate vs BPE history tokens per call,
    with calls whose tier or overflow differs (:func:`h9eval.analysis.metrics.tier_misclassification`)
    marked in red."""
    import numpy as np

    ncols = 2 if calls_with_both_counts is not None else 1
    fig, axes = new_figure(1, ncols, size=(5.0 * ncols, 4.0))
    e = M.token_estimate_error(df) if len(df) else None
    ax = axes[0]
    if e is None or len(e) == 0:
        empty_figure(ax, "messages")
    else:
        xs = np.arange(len(e))
        cols = [c for c in ("est_error", "calibrated_error") if c in e.columns]
        wbar = 0.8 / len(cols)
        for k, c in enumerate(cols):
            ax.bar(
                xs + (k - (len(cols) - 1) / 2) * wbar,
                e[c] * 100,
                wbar,
                label={"est_error": "bytes/4", "calibrated_error": "calibrated"}[c],
            )
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(xs, list(e["kind"]))
        ax.set_ylabel("error vs BPE (%)")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
        ax.set_title("Token estimate error by content kind")
    if calls_with_both_counts is not None:
        ax = axes[1]
        c = calls_with_both_counts
        if len(c) == 0:
            empty_figure(ax, "calls")
        else:
            bad = M.tier_misclassification(c, thresholds)
            ax.scatter(c["history_tokens_bpe"], c["history_tokens"], s=6, color="0.5", label="calls")
            if len(bad):
                ax.scatter(
                    bad["history_tokens_bpe"],
                    bad["history_tokens"],
                    s=14,
                    color="red",
                    label=f"tier differs ({len(bad)})",
                    gid="misclassified",
                )
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
    fig, (ax,) = new_figure()
    if len(compactions) == 0:
        empty_figure(ax, "compaction records")
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
                ax.scatter(
                    t["record_index"],
                    t["tokens_after"],
                    marker=mk,
                    s=28,
                    color=TIER_COLORS[tier],
                    edgecolor=c,
                    zorder=3,
                    gid=f"compaction-{tier}",
                )
        err = g[g["error"].astype(str) != ""]
        if len(err):
            ax.scatter(err["record_index"], err["tokens_after"], marker="x", s=40, color="black", zorder=4, gid="error")
    proxies = [
        Line2D([], [], ls="--", color="0.3", label="tokens before"),
        Line2D([], [], color="0.3", label="tokens after"),
    ]
    proxies += [
        Line2D([], [], ls="", marker=_TIER_MARKERS[t], color=TIER_COLORS[t], label=t)
        for t in sorted(seen, key=M.TIER_NAMES.index)
    ]
    h, _ = ax.get_legend_handles_labels()
    ax.legend(handles=h + proxies, fontsize=7, loc="upper left", ncol=2)
    ax.set_xlabel("compaction record index")
    ax.set_ylabel("tokens (harness9 estimate)")
    ax.set_title("harness9 compaction records: tokens before/after")
    return fig


def tune_evidence(evidence: Any) -> Any:
    """The tuner's evidence (:class:`h9eval.studies.tune.TuneResult` ``evidence``): tokens saved vs
    retention of every evaluated config; filled: feasible (no overflow, no emergency, within
    the bounds), open: not; the recommended config is ringed in black."""
    fig, (ax,) = new_figure(size=(7.0, 4.5))
    if len(evidence) == 0:
        empty_figure(ax, "evaluated configs")
        return fig
    stages = list(dict.fromkeys(evidence["stage"]))
    for i, st in enumerate(stages):
        e = evidence[evidence["stage"] == st]
        ok = e[e["feasible"].astype(bool)]
        bad = e[~e["feasible"].astype(bool)]
        if len(ok):
            ax.scatter(
                ok["tokens_saved"],
                ok["retention"],
                color=f"C{i}",
                s=30,
                label=f"{st}: feasible ({len(ok)})",
                gid=f"feasible-{st}",
            )
        if len(bad):
            ax.scatter(
                bad["tokens_saved"],
                bad["retention"],
                facecolor="none",
                edgecolor=f"C{i}",
                s=30,
                label=f"{st}: infeasible ({len(bad)})",
                gid=f"infeasible-{st}",
            )
    b = evidence[evidence["best"].astype(bool)] if "best" in evidence.columns else evidence.iloc[:0]
    if len(b):
        ax.scatter(
            b["tokens_saved"],
            b["retention"],
            facecolor="none",
            edgecolor="black",
            s=160,
            lw=2,
            label="recommended",
            gid="best",
        )
    ax.set_xlabel("tokens saved (mean over tasks)")
    ax.set_ylabel("retention (mean recall score)")
    ax.legend(fontsize=7)
    ax.set_title("Threshold search")
    return fig


def retention_cost_frontier(df: Any, *, x: str = "cost_usd", y: str = "retention", label: str = "configuration") -> Any:
    """Retention against dollars per task, one point per configuration (``df``: columns ``label``,
    ``x``, ``y``, optional ``history_mode``), with the Pareto front (cheaper and retaining more)
    drawn as a line per history mode. Configurations without a price or a retention are left out
    and counted in the title."""
    fig, axes = new_figure(1, 1, size=(8.0, 5.0))
    ax = axes[0]
    d = df.dropna(subset=[x, y]) if len(df) else df
    if len(d) == 0:
        empty_figure(ax, "priced configurations with a retention")
        return fig
    modes = sorted(d["history_mode"].unique()) if "history_mode" in d.columns else [None]
    for i, mode in enumerate(modes):
        sub = d if mode is None else d[d["history_mode"] == mode]
        ax.scatter(sub[x], sub[y], color=f"C{i}", label=str(mode) if mode is not None else None, zorder=3)
        # configurations at the same point (identical behaviour) share one label
        for (px, py), grp in sub.groupby([sub[x].round(6), sub[y].round(6)], sort=False):
            text = " = ".join(str(v) for v in grp[label])
            note = ax.annotate(
                text if len(text) <= 60 else text[:57] + "...",
                (px, py),
                fontsize=7,
                xytext=(4, 2),
                textcoords="offset points",
            )
            note.set_in_layout(False)  # long labels must not squeeze the axes
        front = M.pareto_front(sub, x, y, maximize=(False, True))
        ax.plot(front[x], front[y], color=f"C{i}", alpha=0.5, linestyle="--")
    ax.margins(x=0.35, y=0.08)  # room for the labels right of the points
    ax.set_xlabel("dollars per task (list prices, prompt caching)")
    ax.set_ylabel("retention (mean recall-probe score)")
    dropped = len(df) - len(d)
    ax.set_title("Retention vs dollars" + (f" ({dropped} configurations unpriced or unprobed)" if dropped else ""))
    if modes != [None]:
        ax.legend(title="history mode", fontsize=8)
    ax.grid(alpha=0.3)
    return fig
