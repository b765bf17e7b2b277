"""Reports: a sweep's results, one run's folder, or harness9's own compaction records, as a
self-contained ``report.html`` and a ``report.md`` with its figures in ``figures/``.

Every report opens with the answer (:mod:`~h9eval.analysis.report.answer`): per history mode,
the best configuration on each target against harness9's default with its interval and verdict,
a recommendation that follows the verdicts, and the caveats one line each. The rest follows in
collapsible sections, the findings first (:mod:`~h9eval.analysis.report.open_loop`,
:mod:`~h9eval.analysis.report.closed_loop`), setup and trust checks last
(:mod:`~h9eval.analysis.report.trust`). A sweep of closed-loop worlds gets a closed-loop report:
the open-loop sections that do not apply to it are left out.

The sections come from :data:`SECTIONS`, an ordered registry: another analysis adds its own with
one call to :func:`add_section` (and a line of the answer with
:func:`~h9eval.analysis.report.answer.add_answer_target`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from h9eval.analysis import ledger as ledger_mod  # a module, not a name: ledger imports report.model (Section)
from h9eval.analysis.report import closed_loop, cost, open_loop, trust
from h9eval.analysis.report.answer import add_answer_target, add_caveat, answer_section
from h9eval.analysis.report.context import ReportContext, build_context, config_names
from h9eval.analysis.report.model import PARTS, Section, short_list
from h9eval.analysis.report.records import write_report_from_records
from h9eval.analysis.report.render import ReportPaths, render
from h9eval.analysis.report.run import (
    episode_answer_section,
    is_episode_folder,
    is_run_folder,
    load_episode_folder,
    load_run_folder,
    run_answer_section,
)
from h9eval.core.errors import ConfigError
from h9eval.core.paths import prepare_out_dir
from h9eval.core.progress import QUIET_DELAY_S, Progress, make_progress
from h9eval.results.store import load_results, require_finished

__all__ = [
    "LOOPS",
    "SECTIONS",
    "ReportContext",
    "ReportPaths",
    "Section",
    "SectionEntry",
    "add_answer_target",
    "add_caveat",
    "add_section",
    "config_names",
    "report_sections",
    "short_list",
    "write_report",
    "write_report_from_records",
]

SectionMaker = Callable[[ReportContext], "list[Section] | Section"]

LOOPS: tuple[str, ...] = ("open", "closed", "any")
"""Which results a section applies to: open-loop replays, closed-loop episodes, or any."""


@dataclass(frozen=True, kw_only=True)
class SectionEntry:
    """A registered section: ``make`` (context -> section(s); an empty list or a section without
    blocks is left out), ``part`` (``results`` or ``details``, see
    :data:`~h9eval.analysis.report.model.PARTS`) and ``loop`` (one of :data:`LOOPS`)."""

    make: SectionMaker
    part: str = "results"
    loop: str = "any"


def _headline(ctx: ReportContext) -> list[Section]:
    return open_loop.headline_sections(ctx.res, n_resamples=ctx.n_boot, seed=ctx.seed)


def _options(ctx: ReportContext) -> list[Section]:
    return open_loop.option_sections(ctx.res, n_resamples=ctx.n_boot, seed=ctx.seed)


def _ledger(ctx: ReportContext) -> list[Section]:
    return ledger_mod.ledger_sections(ctx.res, ctx.out, seed=ctx.seed)


def _cost(ctx: ReportContext) -> list[Section]:
    return cost.cost_sections(ctx.rm)


def _emergency(ctx: ReportContext) -> list[Section]:
    return open_loop.emergency_sections(ctx.res, n_resamples=ctx.n_boot, seed=ctx.seed)


SECTIONS: list[SectionEntry] = [
    SectionEntry(make=closed_loop.success_sections, loop="closed"),
    SectionEntry(make=closed_loop.failure_sections, loop="closed"),
    SectionEntry(make=closed_loop.tier_sections, loop="closed"),
    SectionEntry(make=closed_loop.validation_sections, loop="closed"),
    SectionEntry(make=closed_loop.ledger_sections, loop="closed"),
    SectionEntry(make=_headline, loop="open"),
    SectionEntry(make=open_loop.policies_sections, loop="open"),
    SectionEntry(make=open_loop.token_curve_sections, loop="open"),
    SectionEntry(make=open_loop.tier_sections, loop="open"),
    SectionEntry(make=open_loop.anchor_sections, loop="open"),
    SectionEntry(make=_ledger, loop="open"),
    SectionEntry(make=open_loop.drift_sections, loop="open"),
    SectionEntry(make=open_loop.summarizer_sections, loop="open"),
    SectionEntry(make=_cost, loop="open"),
    SectionEntry(make=_options, loop="open"),
    SectionEntry(make=trust.configuration_sections, part="details"),
    SectionEntry(make=lambda ctx: trust.provenance_sections(ctx.res), part="details", loop="open"),
    SectionEntry(make=trust.coverage_sections, part="details", loop="open"),
    SectionEntry(make=lambda ctx: trust.overflow_sections(ctx.res, names=ctx.names), part="details", loop="open"),
    SectionEntry(make=lambda ctx: trust.probe_validity_sections(ctx.res, seed=ctx.seed), part="details", loop="open"),
    SectionEntry(make=_emergency, part="details", loop="open"),
    SectionEntry(make=trust.token_estimate_sections, part="details", loop="open"),
    SectionEntry(make=lambda ctx: trust.llm_sections(ctx.res), part="details", loop="open"),
    SectionEntry(make=trust.setup_sections, part="details"),
]
"""The report's sections after the answer, in page order (within each part)."""


def add_section(
    make: SectionMaker, *, part: str = "results", loop: str = "any", before: SectionMaker | None = None
) -> SectionMaker:
    """Register a section: ``make(ctx)`` returns a section or a list of them; ``part`` and ``loop``
    as in :class:`SectionEntry`; ``before``: a registered maker to insert it before (default: the
    end). Returns ``make`` (usable as a decorator)."""
    if part not in PARTS or part == "answer":
        raise ConfigError(
            f"add_section: part must be one of {', '.join(p for p in PARTS if p != 'answer')}, got {part!r}"
        )
    if loop not in LOOPS:
        raise ConfigError(f"add_section: loop must be one of {', '.join(LOOPS)}, got {loop!r}")
    entry = SectionEntry(make=make, part=part, loop=loop)
    at = next((i for i, e in enumerate(SECTIONS) if e.make is before), None) if before is not None else None
    if before is not None and at is None:
        raise ConfigError(f"add_section: before={getattr(before, '__name__', before)!r} is not a registered section")
    SECTIONS.insert(len(SECTIONS) if at is None else at, entry)
    return make


def _applies(entry: SectionEntry, ctx: ReportContext) -> bool:
    return (
        entry.loop == "any" or (entry.loop == "open" and ctx.open_loop) or (entry.loop == "closed" and ctx.closed_loop)
    )


def report_sections(ctx: ReportContext, bar: Progress | None = None) -> list[Section]:
    """Every section of the report on ``ctx``: the answer, then the registered sections that
    apply to these results, each placed in its entry's part. ``bar``: moved once per entry."""
    secs = answer_section(ctx)
    for entry in SECTIONS:
        if bar is not None:
            bar.update(1)
        if not _applies(entry, ctx):
            continue
        made = entry.make(ctx)
        for s in made if isinstance(made, list) else [made]:
            s.part = entry.part
            secs.append(s)
    return secs


def write_report(
    results_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str] | None = None,
    *,
    max_curve_runs: int = 4,
    n_boot: int = 1000,
    seed: int = 0,
    token_error_tasks: int = 4,
    progress: bool = True,
) -> ReportPaths:
    """Write ``report.html`` and ``report.md`` (figures in ``figures/``) for a sweep's results
    folder or one run's folder (``h9eval run --out``: a replay's, or a closed-loop episode's).

    ``out_dir``: default ``results_dir`` itself (``RESULTS_DIR/report.html``). ``max_curve_runs``:
    configurations drawn one by one in the token curves, tier transitions and drift (default 4).
    ``n_boot``/``seed``: bootstrap resamples and seed (default 1,000 and 0).
    ``token_error_tasks``: tasks reloaded for the token-estimate section (default 4).
    ``progress``: sections done so far, on stderr or as a notebook widget, once the report has
    taken more than a couple of seconds (:mod:`h9eval.core.progress`).
    """
    folder = Path(results_dir)
    out = Path(out_dir) if out_dir is not None else folder
    episode = is_episode_folder(folder)
    single = episode or is_run_folder(folder)
    if episode:
        res = load_episode_folder(folder)
    else:
        res = load_run_folder(folder) if single else require_finished(load_results(folder))
    prepare_out_dir(out, what="report folder")  # fail before any work, not after
    # one step for the shared context, one per registered section, one for rendering the page
    bar = make_progress(
        total=len(SECTIONS) + 2, desc=f"report {folder.name}", unit="section", delay_s=QUIET_DELAY_S, enabled=progress
    )
    ctx = build_context(
        res,
        n_boot=n_boot,
        seed=seed,
        max_curve_runs=max_curve_runs,
        token_error_tasks=token_error_tasks,
        split=not episode,
        out=out,
    )
    bar.update(1)
    name = res.manifest.get("name") or folder.name
    if single:
        secs = episode_answer_section(ctx) if episode else run_answer_section(ctx)
        for entry in SECTIONS:
            bar.update(1)
            if entry.make in _RUN_SECTIONS:
                made = entry.make(ctx)
                for s in made if isinstance(made, list) else [made]:
                    s.part = entry.part
                    secs.append(s)
        paths = render(f"h9eval report: one {'episode' if episode else 'run'}, {name}", secs, out)
    else:
        kind = "closed-loop report" if ctx.closed_loop and not ctx.open_loop else "report"
        paths = render(f"h9eval {kind}: {name}", report_sections(ctx, bar), out)
    bar.update(1)
    bar.close()
    return paths


_RUN_SECTIONS: tuple[SectionMaker, ...] = (
    open_loop.token_curve_sections,
    open_loop.tier_sections,
    open_loop.anchor_sections,
    open_loop.drift_sections,
    open_loop.summarizer_sections,
    trust.configuration_sections,
    trust.setup_sections,
)
"""The sections of a one-run report (the rest compare configurations)."""
