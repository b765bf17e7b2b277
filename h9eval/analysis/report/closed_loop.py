"""The closed-loop sections of a report: success and cost per configuration with the labelled
frontier, failure modes by kind, and the validation study (does open-loop retention predict
closed-loop success?). The numbers come from :mod:`h9eval.analysis.episodes`; these functions
only choose, format and caption them. Each returns a list of sections (empty when the results
ran no episodes)."""

from __future__ import annotations

from typing import Any

from h9eval.analysis import episodes
from h9eval.analysis import plots_closedloop
from h9eval.analysis.report.context import ReportContext
from h9eval.analysis.report.model import Section, short_list

__all__ = ["STAND_IN_AGENT", "ci_text", "failure_sections", "success_sections", "validation_sections"]

STAND_IN_AGENT = (
    "The scripted agent is a stand-in, not a language model: it shows what a policy keeps within reach of a "
    "reader that needs it, not how a model would act on it."
)


def ci_text(m: float, lo: float, hi: float, fmt: str = "{:.3g}") -> str:
    """``0.75 [0.5, 1]``: a mean and its interval (``–`` for a missing mean)."""
    if m != m:
        return "–"
    return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]" if lo == lo else fmt.format(m)


def _scripted(ep: Any) -> bool:
    return bool(ep["agent_id"].astype(str).str.startswith("scripted").any())


def success_sections(ctx: ReportContext) -> list[Section]:
    """Success rate and tokens sent per (agent, configuration), paired against keep_all, and the
    cost-vs-success frontier."""
    ep = episodes.episode_table(ctx.results)
    if not len(ep):
        return []
    sc = episodes.success_cost(ep, n_boot=ctx.n_boot, seed=ctx.seed)
    s = Section("Closed loop: success and cost per configuration")
    s.text(
        f"{len(ep)} episodes over {ep['task_id'].nunique()} world seeds "
        f"({', '.join(sorted(ep['world_kind'].unique()))}), "
        f"agents {', '.join(sorted(ep['agent_id'].unique()))}. Compaction runs before every model call and the next "
        "action "
        "depends on the compacted view; success is checked against the world's hidden state. Intervals are 95 % "
        "task-level "
        "bootstraps (a task is one world seed); differences are paired with keep_all on the same tasks, Holm-adjusted "
        "over "
        "an agent's configurations."
    )
    if _scripted(ep):
        s.note(STAND_IN_AGENT)
    show = sc.assign(
        success_ci=[ci_text(*v) for v in zip(sc["success"], sc["success_lo"], sc["success_hi"])],
        tokens_ci=[
            ci_text(*v, fmt="{:,.0f}") for v in zip(sc["tokens_sent"], sc["tokens_sent_lo"], sc["tokens_sent_hi"])
        ],
        vs_keep_all=[
            ci_text(*v, fmt="{:+.3g}") for v in zip(sc["success_diff"], sc["success_diff_lo"], sc["success_diff_hi"])
        ],
    )
    show = show[
        [
            "agent",
            "config",
            "n_tasks",
            "success_ci",
            "vs_keep_all",
            "success_verdict",
            "tokens_ci",
            "tokens_verdict",
            "excess_steps",
        ]
    ]
    show = show.rename(
        columns={
            "config": "configuration",
            "n_tasks": "tasks",
            "success_ci": "success [95% CI]",
            "vs_keep_all": "Δ success vs keep_all [CI]",
            "success_verdict": "success verdict",
            "tokens_ci": "tokens sent [95% CI]",
            "tokens_verdict": "tokens verdict",
            "excess_steps": "excess steps",
        }
    )
    if float(sc["summarizer_cost_usd"].fillna(0).sum()) > 0:
        show["summarizer USD"] = sc["summarizer_cost_usd"].to_numpy()
    s.table(
        show,
        "Success rate and tokens sent per episode, mean [95% CI] over tasks; verdicts against keep_all on the same "
        "tasks.",
    )
    s.figure(
        "closedloop_frontier",
        plots_closedloop.cost_success_frontier(sc),
        "Cost vs success, one panel per agent, one colour per configuration (named at its point): tokens sent per "
        "episode against success rate with 95% task-bootstrap intervals; dashed: the frontier (no configuration is "
        "cheaper and at least as successful).",
    )
    return [s]


def failure_sections(ctx: ReportContext) -> list[Section]:
    """How the episodes that did not succeed failed, by kind (nothing when every episode succeeded)."""
    ep = episodes.episode_table(ctx.results)
    if not len(ep):
        return []
    fm = episodes.failure_modes(ep)
    s = Section("Closed loop: failure modes")
    if int(fm["failed"].sum()) == 0:
        s.text("Every episode succeeded: no failure to break down.")
        return [s]
    kinds = [k for k, _ in episodes.FAILURE_KINDS if k in fm.columns and int(fm[k].sum()) > 0]
    show = fm[["agent", "config", "episodes", "failed", *kinds]].rename(columns={"config": "configuration"})
    show.columns = [c.replace("_", " ") for c in show.columns]
    reasons = [r.split("; ") if r else [] for r in fm["world_failures"]]
    show["the worlds' reasons (most frequent first)"] = [short_list(r, "reasons", shown=2) for r in reasons]
    s.table(
        show,
        "Episodes per configuration showing each failure kind (an episode may show several); kinds no episode showed "
        "are left out.",
    )
    s.figure(
        "closedloop_failures",
        plots_closedloop.failure_modes(fm, kinds),
        "Share of episodes showing each failure kind, per configuration and agent.",
    )
    s.text("Kinds: " + "; ".join(f"{k.replace('_', ' ')}: {d}" for k, d in episodes.FAILURE_KINDS if k in kinds) + ".")
    return [s]


def validation_sections(ctx: ReportContext) -> list[Section]:
    """Spearman's rho between open-loop retention and closed-loop success (nothing when the
    worlds were not replayed open loop with probes)."""
    if not ctx.closed_loop:
        return []
    import pandas as pd

    v = episodes.validation_study(ctx.results, n_boot=ctx.n_boot, seed=ctx.seed)
    if not len(v.pairs):
        return []
    s = Section("Validation: does open-loop retention predict closed-loop success?")
    s.text(
        "Each world seed's keep_all transcript is exported as a task and replayed open loop under the same "
        "configurations; "
        "retention is the mean recall score of the probes answerable from the full history. Spearman's rho across "
        "tasks, "
        "per configuration and pooled, with 95 % task-bootstrap intervals (– where one side is constant: a "
        "configuration "
        "that always succeeds or always fails has nothing to predict). A high pooled rho says open-loop replay ranks "
        "configurations as the closed loop does; a low one says run the closed loop."
    )

    def rho(t: Any) -> Any:
        t = t.assign(**{"rho [95% CI]": [ci_text(*x, fmt="{:+.2f}") for x in zip(t["rho"], t["rho_lo"], t["rho_hi"])]})
        return t.drop(columns=["rho", "rho_lo", "rho_hi"]).rename(
            columns={"config": "configuration", "n_tasks": "tasks"}
        )

    s.table(rho(v.pooled), "Pooled over configurations, per agent.")
    s.table(rho(v.per_config), "Per configuration.")
    if len(v.probes):
        k = 3
        best = v.probes[v.probes["rho"].notna()]
        if len(best):
            pick = pd.concat(
                [pd.concat([g.head(k), g.tail(k)]).drop_duplicates() for _, g in best.groupby("agent", sort=True)]
            )
            s.table(
                rho(pick),
                f"The probes whose retention predicts success best and worst (top and bottom {k} per agent by rho).",
            )
    s.figure(
        "closedloop_validation",
        plots_closedloop.retention_vs_success(v.pairs),
        "Open-loop retention against closed-loop success per task, one panel per agent, one colour per configuration.",
    )
    return [s]
