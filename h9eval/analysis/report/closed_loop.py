"""The closed-loop sections of a report: success and cost per configuration with the labelled
frontier, failure modes by kind, and the validation study (does open-loop retention predict
closed-loop success?). The numbers come from :mod:`h9eval.analysis.episodes`; these functions
only choose, format and caption them. Each returns a list of sections (empty when the results
ran no episodes)."""

from __future__ import annotations

import math
from typing import Any

from h9eval.analysis import closedloop_units, episodes
from h9eval.analysis import plots_closedloop
from h9eval.analysis import ledger as ledger_mod  # a module, not names: ledger -> report/__init__ -> here
from h9eval.analysis.ledger_page import ledger_page_html, run_diffs, write_page
from h9eval.analysis.metrics import dollars_mean
from h9eval.analysis.report.context import ReportContext
from h9eval.analysis.report.cost import COST_CAVEAT
from h9eval.analysis.report.model import Section, short_list
from h9eval.analysis.report.open_loop import unpriced_cells
from h9eval.closedloop.analysis import family_frame, tier_mix_frame
from h9eval.core.paths import prepare_out_dir
from h9eval.results.store import cell_dir_name

__all__ = [
    "STAND_IN_AGENT",
    "ci_text",
    "failure_sections",
    "ledger_sections",
    "success_sections",
    "tier_sections",
    "usd_ci_text",
    "validation_sections",
]

STAND_IN_AGENT = (
    "The scripted agent is a stand-in, not a language model: it shows what a policy keeps within reach of a "
    "reader that needs it, not how a model would act on it."
)


def ci_text(m: float, lo: float, hi: float, fmt: str = "{:.3g}") -> str:
    """``0.75 [0.5, 1]``: a mean and its interval (``–`` for a missing mean)."""
    if m != m:
        return "–"
    return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]" if lo == lo else fmt.format(m)


def usd_ci_text(m: float, lo: float, hi: float) -> str:
    """Billed dollars with their interval (:func:`ci_text`), ``unpriced`` when unknown (never $0)."""
    return "unpriced" if m != m else ci_text(m, lo, hi, fmt="{:.4g}")


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
        "depends on the compacted view; success is checked against the world's hidden state. The unit is the world "
        "(kind and parameters): seeds of a world behave alike, so they are averaged inside it; intervals are 95 % "
        "world-level bootstraps, differences are paired with keep_all on the same worlds, Holm-adjusted over an "
        f"agent's configurations, and too few worlds read '{closedloop_units.INSUFFICIENT_UNITS}'."
    )
    if _scripted(ep):
        s.note(STAND_IN_AGENT)
    show = sc.assign(
        success_ci=[ci_text(*v) for v in zip(sc["success"], sc["success_lo"], sc["success_hi"])],
        tokens_ci=[
            ci_text(*v, fmt="{:,.0f}") for v in zip(sc["tokens_sent"], sc["tokens_sent_lo"], sc["tokens_sent_hi"])
        ],
        usd_ci=[usd_ci_text(*v) for v in zip(sc["cost_usd"], sc["cost_usd_lo"], sc["cost_usd_hi"])],
        vs_keep_all=[
            ci_text(*v, fmt="{:+.3g}") for v in zip(sc["success_diff"], sc["success_diff_lo"], sc["success_diff_hi"])
        ],
    )
    show = show[
        [
            "agent",
            "config",
            "n_worlds",
            "n_seeds",
            "success_ci",
            "vs_keep_all",
            "success_verdict",
            "tokens_ci",
            "usd_ci",
            "tokens_verdict",
            "excess_steps",
        ]
    ]
    show = show.rename(
        columns={
            "config": "configuration",
            "n_worlds": "worlds (the unit)",
            "n_seeds": "seeds",
            "success_ci": "success [95% CI]",
            "vs_keep_all": "Δ success vs keep_all [CI]",
            "success_verdict": "success verdict",
            "tokens_ci": "tokens sent [95% CI]",
            "usd_ci": "billed USD [95% CI]",
            "tokens_verdict": "tokens verdict",
            "excess_steps": "excess steps",
        }
    )
    if float(sc["summarizer_cost_usd"].fillna(0).sum()) > 0 or sc["summarizer_cost_usd"].isna().any():
        show["summarizer USD"] = unpriced_cells(sc["summarizer_cost_usd"].round(4)).to_numpy()
    s.table(
        show,
        "Success rate, tokens sent and billed dollars per episode (agent and summarizer calls as the provider bills "
        "them, list prices with prompt caching), mean [95% CI] over worlds; verdicts against keep_all on the same "
        "worlds; unpriced: a model without prices (its dollars are unknown, never 0).",
    )
    s.caveat(COST_CAVEAT)
    s.figure(
        "closedloop_frontier",
        plots_closedloop.cost_success_frontier(sc),
        "Cost vs success, one panel per agent, one colour per configuration (named at its point): tokens sent per "
        "episode against success rate with 95% task-bootstrap intervals; dashed: the frontier (no configuration is "
        "cheaper and at least as successful).",
    )
    if sc["cost_usd"].notna().any():
        s.figure(
            "closedloop_frontier_usd",
            plots_closedloop.cost_success_frontier(sc, x="cost_usd", xlabel="billed USD per episode (list prices)"),
            "The same in billed dollars per episode (agent and summarizer calls, prompt caching as the provider bills "
            "it): fewer tokens can cost more when each compaction rewrites the cached prefix; unpriced configurations "
            "are left out.",
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

    vw = closedloop_units.validation_by_world(v.pairs, n_boot=ctx.n_boot, seed=ctx.seed)
    s.table(
        rho(vw),
        f"The number to read: without the controls ({', '.join(closedloop_units.CONTROLS)}, whose retention and "
        "success "
        "are fixed by construction), the world as the unit (seeds averaged inside it): rho across configurations per "
        "world, and pooled over (configuration, world) with a world-bootstrap interval.",
    )
    s.table(rho(v.pooled), "Pooled over every configuration and seed, controls included (they inflate it).")
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


def _pct(x: float) -> str:
    return "–" if x != x else f"{x:.0%}"


def _usd(x: float) -> str:
    return "unpriced" if x != x else f"${x:.4g}"


_TIERS = ("none", "warn", "soft", "full", "emergency")
_NONCE = r"[A-Z]{1,3}-[0-9a-f]{8}"


def _top_reason(failures: Any) -> str:
    """The most frequent of the worlds' failure reasons (ids masked), with its count."""
    counts = failures.astype(str).str.replace(_NONCE, "<id>", regex=True).value_counts()
    counts = counts[counts.index != ""]
    if not len(counts):
        return ""
    top = sorted(counts.items(), key=lambda rn: (-rn[1], rn[0]))[0]
    return f"{top[0]} (×{top[1]})"


def tier_sections(ctx: ReportContext) -> list[Section]:
    """The tier mix per configuration (pooled over families, then per family) beside the failure
    modes: whether what the closed loop measures is the summaries (soft and full tiers) or
    emergency truncation."""
    ep = episodes.episode_table(ctx.results)
    if not len(ep):
        return []
    by = ["agent_id", "config", "history_mode"]
    mix = tier_mix_frame(ep, ctx.results.calls, by=by)
    fm = episodes.failure_modes(ep).rename(columns={"agent": "agent_id"})
    kinds = [k for k, _ in episodes.FAILURE_KINDS if k in fm.columns and int(fm[k].sum()) > 0]
    s = Section("Closed loop: tier mix and failure modes")
    s.text(
        "Which of harness9's tiers each configuration's calls reached: summaries are written at the soft and full "
        "tiers, the emergency tier truncates without one, so a configuration whose episodes mostly reach emergency "
        "measures truncation, not its summaries (peer policies report their own tiers: none when they did not "
        "compact). Beside it, the failure modes as counted in the section above."
    )
    pooled = mix[mix["world_kind"] == "all"].merge(
        fm[["agent_id", "config", "failed", *kinds]], on=["agent_id", "config"], how="left"
    )
    reasons = ep[~ep["success"]].groupby(by)["failure"].agg(_top_reason).rename("most frequent failure")
    pooled = pooled.merge(reasons.reset_index(), on=by, how="left").fillna({"most frequent failure": ""})
    show = pooled[[*by, "episodes"]].rename(
        columns={"agent_id": "agent", "config": "configuration", "history_mode": "mode"}
    )
    show["episodes reaching soft/full"] = pooled["episodes_soft_or_full_frac"].map(_pct)
    show["episodes reaching emergency"] = pooled["episodes_emergency_frac"].map(_pct)
    show["calls none · warn · soft · full · emergency (%)"] = [
        " · ".join(f"{100 * float(r[f'calls_{t}_frac']):.0f}" for t in _TIERS) for _, r in pooled.iterrows()
    ]
    show["failed"] = pooled["failed"].fillna(0).astype(int)
    show["failure kinds (episodes)"] = [
        ", ".join(f"{k.replace('_', ' ')} {int(r[k])}" for k in kinds if r[k] > 0) for _, r in pooled.iterrows()
    ]
    show["most frequent failure"] = pooled["most frequent failure"]
    fam = family_frame(ep, by=by)[[*by, "world_kind", "success_rate", "tokens_sent_mean"]]
    billed = ep.assign(cost_usd=ep["cost_usd"].astype(float) if "cost_usd" in ep.columns else math.nan)
    fam_usd = billed.groupby([*by, "world_kind"], sort=True)["cost_usd"].agg(dollars_mean).rename("usd").reset_index()
    fam = fam.merge(fam_usd, on=[*by, "world_kind"], how="left")
    # pooled over families as the report pools everything in the closed loop: the family is the unit
    over = fam.groupby(by, sort=True).agg(tokens=("tokens_sent_mean", "mean"), usd=("usd", dollars_mean))
    over = pooled[by].merge(over.reset_index(), on=by, how="left")
    show["tokens sent per episode"] = [f"{t:,.0f}" if t == t else "–" for t in over["tokens"]]
    show["billed USD per episode"] = [_usd(u) for u in over["usd"]]
    s.table(
        show,
        "Tier mix per configuration, all families pooled: the share of episodes that reached a tier at "
        "least once and the share of calls at each tier, with the failed episodes, their failure kinds and "
        "the worlds' most frequent reason (ids masked), and tokens sent and billed dollars per episode "
        "(mean over families of the family means; unpriced: a model without prices).",
    )
    per = mix[mix["world_kind"] != "all"].merge(fam, on=[*by, "world_kind"], how="left")
    per["cell"] = [
        f"{_pct(float(r.success_rate))} | {_pct(r.episodes_soft_or_full_frac)} | "
        f"{_pct(r.episodes_emergency_frac)} | {_usd(float(r.usd))}"
        for r in per.itertuples(index=False)
    ]
    wide = per.pivot_table(index=by, columns="world_kind", values="cell", aggfunc="first").reset_index()
    wide.columns.name = None
    s.table(
        wide.rename(columns={"agent_id": "agent", "config": "configuration", "history_mode": "mode"}),
        "Per world family (seeds nested), each cell: success | episodes reaching soft/full | episodes reaching "
        "emergency | billed USD per episode.",
    )
    return [s]


MAX_EPISODE_PAGES = 6
"""Episodes the report writes a diff page for (drawn from the stored diffs: a page per configuration and
agent of one world seed is what a reader opens)."""


def _labelled_runs(ctx: ReportContext, ep: Any) -> Any:
    """The episodes' run rows, named by configuration and agent (the ledger's curves group by name)."""
    runs = ctx.results.runs[ctx.results.runs["run_id"].isin(ep["run_id"])].drop_duplicates("run_id")
    agents = ep["agent_id"].astype(str)
    # the scripted agent's reader profile is what differs between its runs
    agents = agents.str.removeprefix("scripted:") if agents.str.startswith("scripted:").all() else agents
    names = dict(zip(ep["run_id"], ep["config"] + " · " + agents))
    return runs.assign(policy_name=runs["run_id"].map(names), grid_json=None)


def _page_episodes(ep: Any, ledger: Any, max_pages: int) -> list[str]:
    """One world seed's episodes (where harness9's default rewrote its view most), one page per
    configuration and agent, harness9's default first and the controls last."""
    rounds = ledger[ledger["basis"] == "compaction"].groupby("run_id")["round"].max()
    ep = ep.assign(rounds=ep["run_id"].map(rounds).fillna(0))
    default = ep[ep["config"].str.startswith("harness9")]
    pick = (default if len(default) else ep).sort_values(["rounds", "task_id"], ascending=[False, True])
    if not len(pick) or pick["rounds"].iloc[0] == 0:
        return []
    same = ep[ep["task_id"] == pick["task_id"].iloc[0]]
    control = same["policy_kind"].isin(list(closedloop_units.CONTROLS))
    order = same.assign(o=(~same["config"].str.startswith("harness9")).astype(int) + 2 * control.astype(int))
    return list(order.sort_values(["o", "config", "agent_id"])["run_id"].head(max_pages))


def ledger_sections(ctx: ReportContext) -> list[Section]:
    """What compaction lost in the closed loop: survival of the worlds' planted items after each
    view rewrite (the world family as the unit), the cliff round, the lost items an action touched
    later, and links to the diff pages of one world seed's episodes."""
    ep = episodes.episode_table(ctx.results)
    ledger = getattr(ctx.results, "ledger", None)
    if not len(ep) or ledger is None or not len(ledger):
        return []
    led = ledger[ledger["run_id"].isin(ep["run_id"])]
    if not len(led):
        return []
    s = Section("Closed loop: what compaction lost, and what the agent did next")
    s.text(
        "Each world's planted items (facts, rules and constraints, preferences, the superseded rule, artifacts, "
        "the failed approach, progress markers), typed as in the open-loop ledger, are judged in the view of each "
        "of the episode's own view rewrites (round k: its k-th compaction that changed what was already sent) by "
        "the same rule: PRESERVED only with the exact text. Survival is the share kept, averaged per world family "
        "(seeds nested) with a family-bootstrap interval; pinned items (in the task statement) are left out. "
        f"The cliff round is the first below {ledger_mod.CLIFF_SURVIVAL:.0%}. The controls never rewrite a view the "
        "same way (keep_all never compacts)."
    )
    if any(str(a).startswith("scripted") for a in ep["agent_id"]):
        s.note(STAND_IN_AGENT)
    family = dict(zip(ep["run_id"], ep["world_kind"]))
    by_family = led.assign(task_id=led["run_id"].map(family))
    runs = _labelled_runs(ctx, ep)
    curves = ledger_mod.survival_curves(by_family, runs, basis="compaction", seed=ctx.seed)
    if len(curves):
        for mode in sorted(set(curves["history_mode"])):
            fig = ledger_mod.survival_plot(curves, history_mode=mode)
            for ax in fig.axes:
                ax.set_xlabel("round (view rewrite)")
            handles, labels = fig.axes[0].get_legend_handles_labels()
            for legend in list(fig.legends):
                legend.remove()
            fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
            fig.suptitle(
                "Planted items kept exactly after the k-th view rewrite (pinned items left out; dashed: the "
                "cliff level)",
                fontsize=10,
            )
            s.figure(
                f"closedloop_survival_{mode}",
                fig,
                f"Closed loop ({mode} mode): items kept exactly after each "
                "view rewrite, per configuration and agent; band: 95% bootstrap interval over world families",
            )
        cliffs = ledger_mod.cliff_rounds(curves)
        wide = cliffs.pivot_table(
            index=["label", "history_mode"], columns="item_type", values="cliff_round", aggfunc="first", observed=True
        )
        s.table(
            wide.astype(object).where(wide.notna(), "–").reset_index().rename(columns={"label": "configuration"}),
            f"Cliff round per item type (first view rewrite with survival below {ledger_mod.CLIFF_SURVIVAL:.0%}; "
            "– : never)",
        )
    lost = led[led["state"].isin(["LOST", "STALE"]) & ~led["pinned"].astype(bool)]
    if len(lost):
        first = lost.drop_duplicates(["run_id", "item_id"])
        names = dict(zip(runs["run_id"], runs["policy_name"]))
        table = (
            first.assign(configuration=first["run_id"].map(names), touched=first["next_use_call"].notna())
            .groupby(["configuration", "item_type"])
            .agg(lost=("item_id", "size"), touched=("touched", "sum"))
            .reset_index()
        )
        table["cell"] = [f"{int(n)} ({int(t)})" for n, t in zip(table["lost"], table["touched"])]
        wide = table.pivot_table(index="configuration", columns="item_type", values="cell", aggfunc="first")
        s.table(
            wide.fillna("–").reset_index(),
            "Items lost (or left stale) at least once per configuration and type, "
            "summed over episodes, and in brackets how many of them an action touched later (a rule broken, the "
            "call that needed the item, a re-read or a redone step: the diff pages name the action)",
        )
    if ctx.out is not None:
        names = dict(zip(runs["run_id"], runs["policy_name"]))
        where = dict(zip(ep["run_id"], ep["task_id"]))
        for rid in _page_episodes(ep, led, MAX_EPISODE_PAGES):
            target = ctx.out / "ledger" / f"{cell_dir_name(rid)}.html"
            prepare_out_dir(target.parent, what="ledger pages folder")  # refuses a planted link
            write_page(target, ledger_page_html(run_diffs(ctx.results, rid)))
            s.link(
                f"ledger/{target.name}",
                f"Diff view of {names.get(rid, rid)} on {where.get(rid, rid)}: what each "
                "compaction took out and the action that touched a lost item",
            )
    return [s]
