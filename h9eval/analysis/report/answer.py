"""The answer box at the top of every report: per history mode, the best configuration on each
target with its paired interval and verdict against harness9's default, a recommendation that
follows those verdicts (or says why the best mean is not recommended), and the caveats one line
each.

Targets come from functions registered in :data:`ANSWER_TARGETS` (open loop: retention, tokens
saved and the dollar metrics the results carry, :func:`answer_metrics`, from the metric registry;
closed loop: success and tokens sent per agent) and caveats from :data:`CAVEATS`; another analysis
adds its own with one call to :func:`add_answer_target` or :func:`add_caveat`. Every number is a
:class:`~h9eval.analysis.stats.PairedComparison` (open loop:
:func:`h9eval.analysis.headline.versus_default`; closed loop:
:func:`h9eval.analysis.episodes.success_cost`), never recomputed here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from h9eval.analysis import episodes, headline, plots, validity
from h9eval.analysis.compare import METRICS, NEVER_COMPACTED_WARNING, metric_spec, run_table
from h9eval.analysis.report.context import ReportContext
from h9eval.analysis.report.model import Section, short_list
from h9eval.analysis.stats import BETTER, INCONCLUSIVE, WORSE, min_tasks_for

__all__ = [
    "ANSWER_TARGETS",
    "CAVEATS",
    "AnswerRow",
    "TargetVerdicts",
    "add_answer_target",
    "add_caveat",
    "closed_loop_default",
    "excluded_reasons",
    "answer_metrics",
    "answer_section",
    "recommendations",
]

#: the closed loop's targets (episode columns), by the label the answer box gives them; dollars as registered
_TARGET_NAMES = {"success": "success", "tokens_sent": "tokens sent", "cost_usd": metric_spec("cost_usd").label}


@dataclass(frozen=True, kw_only=True)
class AnswerRow:
    """One line of the answer table: in ``scope`` (``open loop`` or ``closed loop, agent X``)
    and ``history_mode``, ``best`` is the best configuration on ``target``; ``value`` its mean
    over tasks and ``default_value`` the default's, ``diff`` the paired difference with its
    family-adjusted interval (``lo``, ``hi``), ``verdict`` read from that interval, over
    ``n_tasks`` paired tasks. ``default``: harness9's default as
    the results name it."""

    scope: str
    history_mode: str
    target: str
    best: str
    default: str
    value: float
    default_value: float
    diff: float
    lo: float
    hi: float
    verdict: str
    n_tasks: int
    higher_is_better: bool
    too_few_tasks: bool = False


@dataclass(frozen=True, kw_only=True)
class TargetVerdicts:
    """Every configuration's verdicts against the default in one scope and mode, for the
    recommendation: ``by_config[config][target] = (verdict, mean)``."""

    scope: str
    history_mode: str
    default: str
    by_config: dict[str, dict[str, tuple[str, float]]]
    primary: str
    default_means: dict[str, float]
    excluded: dict[str, str] = dataclasses.field(default_factory=dict)
    """Configurations the recommendation left out, each with the reason (a control, calls over the window)."""


AnswerTarget = Callable[[ReportContext], tuple[list[AnswerRow], list[TargetVerdicts]]]
Caveat = Callable[[ReportContext], list[str]]


def _rank(verdict: str) -> int:
    return 0 if verdict == BETTER else 2 if verdict == WORSE else 1


def _best(comps: Sequence[Any]) -> Any:
    """The comparison whose A is best: shown better first, then by mean in the metric's direction."""
    return sorted(comps, key=lambda c: (_rank(c.verdict), -c.mean_a if c.higher_is_better else c.mean_a, c.a))[0]


def _row(scope: str, mode: str, target: str, c: Any) -> AnswerRow:
    return AnswerRow(
        scope=scope,
        history_mode=mode,
        target=target,
        best=c.a,
        default=c.b,
        value=c.mean_a,
        default_value=c.mean_b,
        diff=c.mean_diff,
        lo=c.lo,
        hi=c.hi,
        verdict=c.verdict,
        n_tasks=c.n_tasks,
        higher_is_better=c.higher_is_better,
        too_few_tasks=c.n_tasks < min_tasks_for(c.adjusted_level),
    )


def answer_metrics(table: Any) -> list[str]:
    """The open-loop targets these results can answer: every registered metric with an ``answer_rank``
    (:data:`~h9eval.analysis.compare.METRICS`), in that order, that the table holds (a ``priced`` metric only
    when some value is not 0; one ``superseded_by`` another shown target left out)."""
    out: list[str] = []
    for m in sorted((m for m in METRICS if m.answer_rank is not None), key=lambda m: (m.answer_rank, m.name)):
        if m.name not in table.columns or not table[m.name].notna().any():
            continue
        if m.priced and float(table[m.name].fillna(0).abs().sum()) == 0:
            continue
        if m.superseded_by and m.superseded_by in out:
            continue
        out.append(m.name)
    return out


def _open_loop(ctx: ReportContext) -> tuple[list[AnswerRow], list[TargetVerdicts]]:
    res = ctx.res
    if not ctx.open_loop:
        return [], []
    if ctx.closed_loop:  # the worlds' exported transcripts belong to the closed-loop validation study
        worlds = set(ctx.results.episodes["task_id"].astype(str))
        keep = set(res.runs.loc[~res.runs["task_id"].astype(str).isin(worlds), "run_id"])
        res = _subset(res, keep)
    table = run_table(res)
    if not len(table):
        return [], []
    mets = answer_metrics(table)
    controls = sorted(set(table.loc[table["policy_kind"].isin(plots.CONTROL_KINDS), "config"]))
    rows: list[AnswerRow] = []
    verdicts: list[TargetVerdicts] = []
    for mode in sorted(table["history_mode"].dropna().unique()):
        keep = set(table.loc[table["history_mode"] == mode, "run_id"])
        # a configuration that overflowed in this mode: its retention is of a request no model would accept
        over = headline.overflowing(table[table["history_mode"] == mode])
        overflow = set(over) - set(controls)
        h = headline.versus_default(
            _subset(res, keep), metrics=mets, n_resamples=ctx.n_boot, seed=ctx.seed, exclude=controls
        )
        if h is None or not h.comparisons:
            continue
        by: dict[str, dict[str, tuple[str, float]]] = {}
        for c in h.comparisons:
            by.setdefault(c.a, {})[c.metric] = (c.verdict, c.mean_a)
        for m in mets:
            comps = [c for c in h.comparisons if c.metric == m and c.a not in overflow and not math.isnan(c.mean_a)]
            if comps:
                rows.append(_row("open loop", str(mode), metric_spec(m).label, _best(comps)))
        verdicts.append(
            TargetVerdicts(
                scope="open loop",
                history_mode=str(mode),
                default=h.baselines[0],
                by_config={k: v for k, v in by.items() if k not in overflow},
                primary=mets[0],
                default_means={c.metric: c.mean_b for c in h.comparisons},
                excluded=excluded_reasons(controls, over, set(table.loc[table["history_mode"] == mode, "config"])),
            )
        )
    return rows, verdicts


def excluded_reasons(controls: Sequence[str], overflows: dict[str, int], present: set[str]) -> dict[str, str]:
    """Configuration -> why the recommendation left it out: a control (``keep_all``, ``drop_all``:
    the bounds, not candidates), or ``N call(s) over the window`` (:func:`headline.overflowing`'s
    counts). Only configurations in ``present`` (those of the mode)."""
    out = {c: "a control" for c in controls if c in present}
    out.update({c: f"{n} call(s) over the window" for c, n in sorted(overflows.items()) if c not in out})
    return dict(sorted(out.items()))


def _subset(res: Any, run_ids: set[Any]) -> Any:
    def keep(df: Any) -> Any:
        return (
            df[df["run_id"].isin(run_ids)].reset_index(drop=True)
            if df is not None and len(df) and "run_id" in df.columns
            else df
        )

    return dataclasses.replace(
        res, runs=keep(res.runs), calls=keep(res.calls), compactions=keep(res.compactions), probes=keep(res.probes)
    )


def closed_loop_default(ctx: ReportContext) -> str | None:
    """harness9's default among the episode configurations (:func:`h9eval.analysis.headline.default_config`)."""
    if not ctx.closed_loop:
        return None
    runs = ctx.results.runs
    ids = set(ctx.results.episodes["run_id"].astype(str))
    r = runs[runs["run_id"].astype(str).isin(ids)]
    table = r.assign(config=[ctx.names.get(x, "") for x in r["run_id"]])
    return headline.default_config(table)


def _closed_loop(ctx: ReportContext) -> tuple[list[AnswerRow], list[TargetVerdicts]]:
    default = closed_loop_default(ctx)
    if default is None:
        return [], []
    ep = episodes.episode_table(ctx.results)
    kinds = dict(zip(ctx.results.runs["run_id"].astype(str), ctx.results.runs["policy_kind"].astype(str)))
    ep = ep[~ep["run_id"].astype(str).map(kinds).isin(plots.CONTROL_KINDS)]
    rows: list[AnswerRow] = []
    verdicts: list[TargetVerdicts] = []
    for mode in sorted(ep["history_mode"].dropna().unique()):
        em = ep[ep["history_mode"] == mode]
        if default not in set(em["config"]):
            continue
        sc = episodes.success_cost(em, n_boot=ctx.n_boot, seed=ctx.seed, baseline=default)
        for agent, g in sc.groupby("agent", sort=True):
            d = g[g["config"] == default].iloc[0]
            others = g[g["config"] != default]
            if not len(others):
                continue
            scope = f"closed loop, agent {agent}"
            by: dict[str, dict[str, tuple[str, float]]] = {}
            targets = [("success", "success", True), ("tokens", "tokens_sent", False)]
            if g["cost_diff"].notna().any():
                # billed dollars beside tokens (a compaction can save tokens and cost more: the cache it rewrites)
                targets.append(("cost", "cost_usd", False))
            for metric, col, hib in targets:
                comps = [
                    _Closed(
                        a=r["config"],
                        b=default,
                        mean_a=r[col],
                        mean_b=float(d[col]),
                        mean_diff=r[f"{metric}_diff"],
                        lo=r[f"{metric}_diff_lo"],
                        hi=r[f"{metric}_diff_hi"],
                        verdict=str(r[f"{metric}_verdict"] or INCONCLUSIVE),
                        n_tasks=int(r["n_tasks"]),
                        higher_is_better=hib,
                        adjusted_level=float(r[f"{metric}_diff_level"]),
                    )
                    for r in others.to_dict("records")
                ]
                for c in comps:
                    by.setdefault(c.a, {})[_TARGET_NAMES[col]] = (c.verdict, c.mean_a)
                rows.append(_row(scope, str(mode), _TARGET_NAMES[col], _best(comps)))
            verdicts.append(
                TargetVerdicts(
                    scope=scope,
                    history_mode=str(mode),
                    default=default,
                    by_config=by,
                    primary="success",
                    default_means={
                        "success": float(d["success"]),
                        "tokens sent": float(d["tokens_sent"]),
                        _TARGET_NAMES["cost_usd"]: float(d["cost_usd"]),
                    },
                )
            )
    return rows, verdicts


@dataclass(frozen=True, kw_only=True)
class _Closed:
    """A closed-loop comparison in the shape :func:`_row` reads (success_cost's columns)."""

    a: str
    b: str
    mean_a: float
    mean_b: float
    mean_diff: float
    lo: float
    hi: float
    verdict: str
    n_tasks: int
    higher_is_better: bool
    adjusted_level: float = 0.95


ANSWER_TARGETS: list[AnswerTarget] = [_open_loop, _closed_loop]
"""What the answer table holds, in order: each function returns its rows and, per scope and
history mode, every configuration's verdicts (which the recommendation reads)."""


def add_answer_target(make: AnswerTarget) -> AnswerTarget:
    """Register another target (a function of the report's context); returns it (a decorator)."""
    ANSWER_TARGETS.append(make)
    return make


def _offline_caveat(ctx: ReportContext) -> list[str]:
    sr = validity.summarizer_runs(ctx.results)
    if not len(sr) or not bool(sr["offline"].any()):
        return []
    names = ", ".join(sr.loc[sr["offline"], "summarizer"])
    return [
        f"Summaries by the offline extractive stand-in ({names}), not a model: these rank compaction mechanisms, not "
        "a model's summaries."
    ]


def _agent_caveat(ctx: ReportContext) -> list[str]:
    ep = ctx.results.episodes
    if len(ep) and ep["agent_id"].astype(str).str.startswith("scripted").any():
        return ["The closed-loop agent is the scripted stand-in, not a language model."]
    return []


def _never_compacted_caveat(ctx: ReportContext) -> list[str]:
    if not ctx.open_loop or not len(ctx.rm):
        return []
    rm = ctx.non_control(ctx.rm)
    if "n_compactions" not in rm.columns:
        return []
    never = rm[rm["n_compactions"].fillna(0) == 0]
    if not len(never):
        return []
    out = [
        f"Some runs never compacted ({short_list(sorted(set(never['label'])), 'configuration(s)')}): on those tasks "
        "the score is the uncompacted transcript's (see Coverage)."
    ]
    for label, g in rm.groupby("label", sort=True):
        if not (g["n_compactions"].fillna(0) > 0).any():
            out.append("Warning: " + NEVER_COMPACTED_WARNING.format(config=label, n=g["task_id"].nunique()) + ".")
    return out


def _emergency_caveat(ctx: ReportContext) -> list[str]:
    if not ctx.open_loop or not len(ctx.res.probes):
        return []
    es = validity.emergency_share(ctx.res)
    if len(es) and float(es["emergency_frac"].max()) > 0:
        return [
            "harness9's emergency truncation rule is reconstructed, not verified: checkpoints at the emergency tier "
            "score that rule."
        ]
    return []


CAVEATS: list[Caveat] = [_offline_caveat, _agent_caveat, _never_compacted_caveat, _emergency_caveat]
"""The answer box's caveats, one line each, in order."""


def add_caveat(make: Caveat) -> Caveat:
    """Register another caveat (a function of the report's context returning lines); returns it."""
    CAVEATS.append(make)
    return make


def _fmt(v: float, target: str) -> str:
    if v != v:
        return "–"
    return (
        f"{v:,.0f}"
        if target == "tokens sent"
        else f"${v:,.4g}"
        if target.startswith(("dollars per", "summarizer dollars"))
        else f"{v:.3f}"
    )


def _mean_of(t: dict[str, tuple[str, float]], keys: Sequence[str]) -> float:
    """The mean on the first of ``keys`` that ``t`` has (-inf when none, or NaN)."""
    x = next((t[k] for k in keys if k in t), None)
    return x[1] if x is not None and x[1] == x[1] else -math.inf


def _name(key: str) -> str:
    return _TARGET_NAMES.get(key, key.replace("_", " "))


def _why_not(config: str, target: str, verdicts: dict[str, tuple[str, float]], v: TargetVerdicts, chosen: str) -> str:
    """Why ``config``, the best on ``target``, is not the recommendation ``chosen``."""
    worse = [_name(k) for k, (x, _) in verdicts.items() if x == WORSE]
    if worse:
        return f"{config} is best on {target} but worse than {v.default} on {', '.join(worse)}"
    mine = next((x for k, (x, _) in verdicts.items() if _name(k) == target), INCONCLUSIVE)
    if mine != BETTER:
        return f"{config} has the best mean {target}, but its difference from {v.default} is {mine}"
    return (
        f"{config} is also better on {target} and worse on nothing; {chosen} is better on as many targets "
        f"with a higher {_name(v.primary)}"
    )


def recommendations(verdicts: Sequence[TargetVerdicts], rows: Sequence[AnswerRow] = ()) -> list[str]:
    """One recommendation per scope and history mode that follows the verdicts: a configuration
    better than the default on some target and worse on none (most targets better first, then
    the primary target's mean), else the default. Then, for each configuration the answer table
    (``rows``) shows as best on a target, and the one with the highest mean on the primary
    target, when it is not the recommendation: why not."""
    out = []
    for v in verdicts:
        where = f"{v.scope}, {v.history_mode} mode"
        cands = [
            (c, t)
            for c, t in v.by_config.items()
            if any(x == BETTER for x, _ in t.values()) and not any(x == WORSE for x, _ in t.values())
        ]
        first = _name(v.primary)
        keys = (v.primary, first)
        if cands:
            best, t = sorted(
                cands, key=lambda ct: (-sum(x == BETTER for x, _ in ct[1].values()), -_mean_of(ct[1], keys), ct[0])
            )[0]
            better = [_name(k) for k, (x, _) in t.items() if x == BETTER]
            rest = [f"{_name(k)} {x}" for k, (x, _) in t.items() if x != BETTER]
            line = f"{where}: use {best}. It is better than {v.default} on {', '.join(better)}" + (
                f" and not worse on the rest ({'; '.join(rest)})." if rest else "."
            )
        else:
            mixed = [c for c, t in v.by_config.items() if any(x == BETTER for x, _ in t.values())]
            line = (
                f"{where}: keep {v.default}. "
                "No configuration is better than it on a target without being worse on another"
            )
            line += f" ({short_list(mixed, 'trade one target for another')})." if mixed else "."
            n_inc = sum(x == INCONCLUSIVE for t in v.by_config.values() for x, _ in t.values())
            n_all = sum(len(t) for t in v.by_config.values())
            if n_inc:
                line += f" {n_inc} of {n_all} comparisons are inconclusive on this data."
            best = v.default
        whys: dict[str, str] = {}
        for r in rows:
            tied = r.value == r.default_value and r.verdict != BETTER  # no better than the default: nothing to explain
            if (
                (r.scope, r.history_mode) == (v.scope, v.history_mode)
                and r.best not in (best, v.default, *whys)
                and not tied
            ):
                whys[r.best] = _why_not(r.best, r.target, v.by_config.get(r.best, {}), v, best)
        top = max(v.by_config.items(), key=lambda ct: _mean_of(ct[1], keys), default=None)
        best_mean = (
            _mean_of(v.by_config[best], keys) if best in v.by_config else v.default_means.get(v.primary, math.nan)
        )
        if (
            top is not None
            and top[0] not in (best, *whys)
            and _mean_of(top[1], keys) > (best_mean if best_mean == best_mean else -math.inf)
        ):
            whys[top[0]] = _why_not(top[0], first, top[1], v, best)
        if whys:
            line += " Not recommended: " + "; ".join(whys.values()) + "."
        if v.excluded:
            line += " Left out of the choice: " + "; ".join(f"{c} ({why})" for c, why in v.excluded.items()) + "."
        out.append(line)
    return out


def _answer_table(rows: Sequence[AnswerRow]) -> Any:
    import pandas as pd

    many_scopes = len({r.scope for r in rows}) > 1
    recs = []
    for r in rows:
        dollars = r.target.startswith(("dollars per", "summarizer dollars"))
        sign = "{:+,.0f}" if r.target == "tokens sent" else "{:+.4g}" if dollars else "{:+.3f}"
        d = "–" if r.diff != r.diff else f"{sign.format(r.diff)} [{sign.format(r.lo)}, {sign.format(r.hi)}]"
        recs.append(
            {
                **({"scope": r.scope} if many_scopes else {}),
                "mode": r.history_mode,
                "target": r.target + (" (lower is better)" if not r.higher_is_better else ""),
                # a "best" that only ties the default is not one: said so instead of naming the first of the tie
                "best configuration": r.best
                if r.value != r.default_value or r.verdict == BETTER
                else "none above the default",
                "its mean": _fmt(r.value, r.target),
                "default's mean": _fmt(r.default_value, r.target),
                "Δ vs default [adj. CI]": d,
                "verdict": r.verdict + ("*" if r.too_few_tasks else ""),
                "tasks": r.n_tasks,
            }
        )
    return pd.DataFrame(recs)


def _nothing_to_compare(ctx: ReportContext, default: str, verdicts: Sequence[TargetVerdicts]) -> str:
    """Why the answer box has no row although harness9's default ran: what else ran and why each was
    left out (a control, calls over the window), or that nothing else ran. Only what is true of these
    results: controls are named only when they ran."""
    left: dict[str, list[str]] = {}
    for v in verdicts:
        for c, why in v.excluded.items():
            left.setdefault(c, []).append(f"{why} in {v.history_mode} mode" if why != "a control" else why)
    runs = ctx.results.runs
    kind_of = {ctx.names.get(str(r), ""): str(k) for r, k in zip(runs["run_id"], runs["policy_kind"])}
    kind_of.pop("", None)
    others = sorted(set(kind_of) - {default})
    for c in others:
        if kind_of[c] in plots.CONTROL_KINDS:
            left.setdefault(c, ["a control"])
    if not others and not left:
        return f"harness9's default ({default}) is the only configuration run here: nothing to compare it with."
    said = [f"{c} ({'; '.join(dict.fromkeys(whys))})" for c, whys in sorted(left.items())]
    unexplained = [c for c in others if c not in left]
    text = f"harness9's default ({default}) has no configuration to compare with here. Left out: " + ", ".join(said)
    if unexplained:
        text += "; not comparable on any target: " + ", ".join(unexplained)
    return text + ". The sections below show every configuration that ran."


def _dollars_line(ctx: ReportContext, rows: Sequence[AnswerRow], default: str | None) -> str:
    """What "dollars saved (share)" is relative to and why it can be negative, with the default's cached
    and uncached split, on the first screen (a negative share otherwise reads as a bug)."""
    if not ctx.open_loop or not any(r.target.startswith("dollars") for r in rows):
        return ""
    runs = ctx.res.runs
    if not {"cost_usd", "invalidation_usd", "cache_read_share"} <= set(runs.columns):
        return ""
    t = runs.assign(config=[ctx.names.get(str(r), "") for r in runs["run_id"]])
    mine = t[t["config"] == default]
    text = (
        "Dollars saved (share) is 1 - a configuration's billed dollars / the same transcript's sent uncompacted, "
        "under the same billing (prompt caching included). It is negative when compaction costs more than it "
        "saves: rewriting the history invalidates the provider's prompt cache, so text that was a cheap cache "
        "read is written to the cache again."
    )
    if len(mine) and mine["cost_usd"].notna().any():
        text += (
            f" {default} here: cache reads {mine['cache_read_share'].mean():.0%} of its billed input, "
            f"${mine['invalidation_usd'].mean():.3g} of its ${mine['cost_usd'].mean():.3g} per run spent "
            "rewriting cached text"
        )
        uncompacted = t[t["policy_kind"] == "keep_all"]
        if len(uncompacted):
            text += f" (the uncompacted transcript: cache reads {uncompacted['cache_read_share'].mean():.0%})"
        text += "."
    return text


def answer_section(ctx: ReportContext) -> list[Section]:
    """The answer box (always first)."""
    rows: list[AnswerRow] = []
    verdicts: list[TargetVerdicts] = []
    for make in ANSWER_TARGETS:
        r, v = make(ctx)
        rows += r
        verdicts += v
    s = Section("The answer", part="answer")
    defaults = sorted({v.default for v in verdicts})
    open_default = headline.default_config(run_table(ctx.res)) if ctx.open_loop else None
    found = closed_loop_default(ctx) or open_default
    if not rows and found:
        s.note(_nothing_to_compare(ctx, found, verdicts))
    elif not rows:
        s.note(
            "No configuration could be compared with harness9's default: add a progressive entry named "
            f"{headline.DEFAULT_NAME!r} "
            "(or one that sets only the window) to the spec. The sections below still describe each configuration."
        )
    else:
        s.text(
            f"Each configuration against harness9's default ({', '.join(defaults)}), paired by task; per target, the "
            "best "
            "configuration (one shown better first, then the best mean; controls and configurations that overflowed "
            "the "
            "window in that mode left out, named under the recommendation), with the paired difference's "
            "family-adjusted 95% interval and its verdict."
        )
        s.table(_answer_table(rows), "")
        if any(r.too_few_tasks for r in rows):
            n = sorted({r.n_tasks for r in rows if r.too_few_tasks})
            s.text(
                f"*: {', '.join(map(str, n))} task(s) paired, too few for a verdict at the adjusted level: it reads "
                "inconclusive whatever the mean."
            )
        dollars = _dollars_line(ctx, rows, open_default)
        if dollars:
            s.text(dollars)
        for line in recommendations(verdicts, rows):
            s.rec(line)
    lines = [x for make in CAVEATS for x in make(ctx)]
    if lines:
        s.text("Caveats:")
        s.caveats(lines)
    return [s]
