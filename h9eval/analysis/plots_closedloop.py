"""Closed-loop plots: a DataFrame in, a matplotlib ``Figure`` out (no pyplot state, no files),
as in :mod:`h9eval.analysis.plots`. The tables come from :mod:`h9eval.analysis.episodes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from h9eval.analysis import metrics as M
from h9eval.analysis.plots import empty_figure, new_figure

__all__ = ["cost_success_frontier", "failure_modes", "retention_vs_success"]


def _colors(n: int) -> list[Any]:
    from matplotlib import colormaps

    base = [colormaps["tab10"](i) for i in range(10)] + [colormaps["tab20b"](i) for i in range(0, 20, 2)]
    return [base[i % len(base)] for i in range(n)]


def cost_success_frontier(
    table: Any, *, x: str = "tokens_sent", xlabel: str = "tokens sent per episode (sum over model calls)"
) -> Any:
    """Tokens sent per episode (x, lower is better) against success rate (y) per (agent,
    configuration), with the 95 % intervals of :func:`~h9eval.analysis.episodes.success_cost`
    as error bars: one panel per agent, one colour per configuration (the same colour in every
    panel, each point labelled with its name) and, per agent, the frontier (the configurations
    no other one beats on both; JetBrains' cost-vs-solve-rate figure, offline), drawn and
    labelled in its panel. ``x``: the cost column (with ``<x>_lo``/``<x>_hi``), ``cost_usd`` for billed
    dollars; rows where it is unknown (an unpriced model) are left out, never drawn at 0."""
    agents = list(dict.fromkeys(table["agent"])) if table is not None and len(table) else []
    n = max(1, len(agents))
    fig, axes = new_figure(1, n, size=(min(5.2 * n, 13.0), 5.2))
    if not agents:
        empty_figure(axes[0], "episodes")
        return fig
    configs = list(dict.fromkeys(table["config"]))
    color = dict(zip(configs, _colors(len(configs))))
    for ax, a in zip(axes, agents):
        g = table[(table["agent"] == a) & table[x].notna()]
        span_x = max(float(g[x].max() - g[x].min()), 1e-12) if len(g) else 1.0  # dollars span well under 1
        placed: list[tuple[float, float]] = []
        for r in g.sort_values(["success", x], ascending=[False, True]).to_dict("records"):
            xerr = [[r[x] - r[f"{x}_lo"]], [r[f"{x}_hi"] - r[x]]]
            yerr = [[r["success"] - r["success_lo"]], [r["success_hi"] - r["success"]]]
            ax.errorbar(
                [r[x]],
                [r["success"]],
                xerr=xerr,
                yerr=yerr,
                fmt="o",
                color=color[r["config"]],
                capsize=3,
                alpha=0.9,
            )
            # names of points that nearly coincide are stacked downwards instead of printed over each other
            pos = (float(r[x]) / span_x, float(r["success"]))
            near = sum(abs(pos[0] - q[0]) < 0.25 and abs(pos[1] - q[1]) < 0.05 for q in placed)
            placed.append(pos)
            ax.annotate(
                r["config"],
                (r[x], r["success"]),
                xytext=(4, 4 - 10 * near),
                textcoords="offset points",
                fontsize=7,
                color=color[r["config"]],
            )
        front = M.pareto_front(g, x, "success", maximize=(False, True)).sort_values(x)
        if len(front) > 1:
            ax.plot(front[x], front["success"], color="black", lw=1, ls="--", zorder=0, label="frontier")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_xlabel(xlabel)
        ax.set_ylim(-0.05, 1.1)
        ax.set_title(f"agent {a}", fontsize=9)
    axes[0].set_ylabel("success rate")
    fig.suptitle("Closed loop: cost vs success per agent\n(95% world-bootstrap CI; dashed: the frontier)", fontsize=10)
    return fig


def failure_modes(table: Any, kinds: Sequence[str]) -> Any:
    """Share of episodes showing each failure kind (columns ``kinds`` of
    :func:`~h9eval.analysis.episodes.failure_modes`): one panel per agent, one row of grouped
    bars per configuration, one colour per failure kind."""
    agents = list(dict.fromkeys(table["agent"])) if table is not None and len(table) else []
    configs = list(dict.fromkeys(table["config"])) if agents else []
    n = max(1, len(agents))
    fig, axes = new_figure(1, n, size=(min(4.6 * n + 2.0, 13.0), 2.2 + 0.38 * max(len(configs), 1)))
    if not agents:
        empty_figure(axes[0], "episodes")
        return fig
    shown = [k for k in kinds if k in table.columns and table[k].sum() > 0]
    if not shown:
        empty_figure(axes[0], "failures")
        return fig
    h = 0.8 / len(shown)
    colors = dict(zip(shown, _colors(len(shown))))
    for i, (ax, a) in enumerate(zip(axes, agents)):
        g = table[table["agent"] == a].set_index("config").reindex(configs)
        for j, k in enumerate(shown):
            ys = [r + j * h for r in range(len(configs))]
            ax.barh(
                ys,
                (g[k] / g["episodes"]).fillna(0),
                height=h,
                color=colors[k],
                label=k.replace("_", " ") if i == 0 else None,
            )
        ax.set_yticks([r + 0.4 - h / 2 for r in range(len(configs))], configs if i == 0 else [], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of episodes")
        ax.set_title(f"agent {a}", fontsize=9)
    fig.suptitle("Closed loop: failure modes by kind", fontsize=10)
    fig.legend(loc="outside lower center", fontsize=7, ncol=min(len(shown), 4))
    return fig


def retention_vs_success(pairs: Any) -> Any:
    """Open-loop retention (x) against closed-loop success (y) per task, one panel per agent,
    one colour per configuration (the validation study's data). Success is jittered a little
    vertically (deterministically) so equal points stay visible."""
    agents = list(dict.fromkeys(pairs["agent_id"])) if pairs is not None and len(pairs) else []
    fig, axes = new_figure(1, max(1, len(agents)), size=(4.5 * max(1, len(agents)), 4.5))
    if not agents:
        empty_figure(axes[0], "paired open- and closed-loop runs")
        return fig
    configs = list(dict.fromkeys(pairs["config"]))
    color = dict(zip(configs, _colors(len(configs))))
    for ax, a in zip(axes, agents):
        g = pairs[pairs["agent_id"] == a]
        for k, (cfg, c) in enumerate(g.groupby("config", sort=False)):
            jitter = (k - len(configs) / 2) * 0.012
            ax.scatter(c["retention"], c["success"] + jitter, color=color[cfg], s=22, alpha=0.8, label=cfg)
        ax.set_xlabel("open-loop retention (mean recall)")
        ax.set_ylabel("closed-loop success")
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.15, 1.15)
        ax.set_title(f"agent {a}", fontsize=9)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", fontsize=7, ncol=3)
    return fig
