"""Closed-loop plots: a DataFrame in, a matplotlib ``Figure`` out (no pyplot state, no files),
as in :mod:`h9eval.analysis.plots`. The tables come from :mod:`h9eval.analysis.report_closedloop`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from h9eval.analysis import metrics as M
from h9eval.analysis.plots import empty_figure, new_figure

__all__ = ["cost_success_frontier", "failure_modes", "retention_vs_success"]

_SHAPES = "osD^vP*X"


def _colors(n: int) -> list[Any]:
    from matplotlib import colormaps

    base = [colormaps["tab10"](i) for i in range(10)] + [colormaps["tab20b"](i) for i in range(0, 20, 2)]
    return [base[i % len(base)] for i in range(n)]


def cost_success_frontier(table: Any) -> Any:
    """Tokens sent per episode (x, lower is better) against success rate (y) per (agent,
    configuration), with the 95 % intervals of :func:`~h9eval.analysis.report_closedloop.success_cost`
    as error bars and, per agent, the frontier: the configurations no other one beats on both
    (JetBrains' cost-vs-solve-rate figure, offline). One marker shape per agent."""
    fig, (ax,) = new_figure(size=(8.0, 5.5))
    if table is None or not len(table):
        empty_figure(ax, "episodes")
        return fig
    configs = list(dict.fromkeys(table["config"]))
    color = dict(zip(configs, _colors(len(configs))))
    agents = list(dict.fromkeys(table["agent"]))
    shape = {a: _SHAPES[i % len(_SHAPES)] for i, a in enumerate(agents)}
    for r in table.to_dict("records"):
        xerr = [[r["tokens_sent"] - r["tokens_sent_lo"]], [r["tokens_sent_hi"] - r["tokens_sent"]]]
        yerr = [[r["success"] - r["success_lo"]], [r["success_hi"] - r["success"]]]
        lab = r["config"] + (f" ({r['agent']})" if len(agents) > 1 else "")
        ax.errorbar([r["tokens_sent"]], [r["success"]], xerr=xerr, yerr=yerr, fmt=shape[r["agent"]], color=color[r["config"]], capsize=3, label=lab, alpha=0.9)
    for a in agents:
        front = M.pareto_front(table[table["agent"] == a], "tokens_sent", "success", maximize=(False, True))
        if len(front) > 1:
            ax.plot(front["tokens_sent"], front["success"], color="black", lw=1, ls="--", zorder=0)
    ax.set_xlabel("tokens sent per episode (sum over model calls)")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Closed loop: cost vs success (95% task-bootstrap CI; dashed: frontier)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", fontsize=7, ncol=2)
    return fig


def failure_modes(table: Any, kinds: Sequence[str]) -> Any:
    """Share of episodes showing each failure kind (columns ``kinds`` of
    :func:`~h9eval.analysis.report_closedloop.failure_modes`), grouped bars per configuration."""
    rows = len(table) if table is not None else 0
    fig, (ax,) = new_figure(size=(9.0, 3.0 + 0.3 * rows))
    if not rows:
        empty_figure(ax, "episodes")
        return fig
    shown = [k for k in kinds if k in table.columns and table[k].sum() > 0]
    if not shown:
        empty_figure(ax, "failures")
        return fig
    labels = [f"{r['config']} ({r['agent']})" for r in table.to_dict("records")]
    h = 0.8 / len(shown)
    for j, (k, c) in enumerate(zip(shown, _colors(len(shown)))):
        ys = [i + j * h for i in range(rows)]
        ax.barh(ys, table[k] / table["episodes"], height=h, color=c, label=k.replace("_", " "))
    ax.set_yticks([i + 0.4 - h / 2 for i in range(rows)], labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of episodes")
    ax.set_title("Closed loop: failure modes by kind")
    ax.legend(fontsize=7, loc="lower right")
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
