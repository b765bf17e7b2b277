"""Every registered policy, at its defaults, on the tasks given, at one window: one sweep and one
table (``h9eval sweep --task FILE --window W``; a notebook calls :func:`compare_all_policies`).

Built-in and user-registered policies alike (a policy registered with
:func:`h9eval.register_policy` is included). harness9's default is the ``progressive`` entry,
named :data:`~h9eval.analysis.headline.DEFAULT_NAME`; each other configuration is judged
against it (task-level paired, Holm-adjusted) when there are enough tasks for a verdict.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.analysis.compare import run_table
from h9eval.analysis.headline import DEFAULT_NAME, Headline, versus_default
from h9eval.analysis.stats import DEFAULT_LEVEL, min_tasks_for
from h9eval.compaction.policies import task_independent_registry
from h9eval.core.errors import ConfigError
from h9eval.sweeps.sweep import SweepResult, sweep

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AllPolicies", "TABLE_METRICS", "all_policies_spec", "policy_table", "compare_all_policies"]

TABLE_METRICS: tuple[str, ...] = (
    "retention",
    "tokens_saved",
    "peak_tokens_sent",
    "n_compactions",
    "summarizer_calls",
    "emergencies",
    "overflows",
)
"""The per-run numbers :func:`policy_table` averages per configuration, in its column order."""


def all_policies_spec(
    tasks: Sequence[str],
    *,
    window: int,
    name: str | None = None,
    history_modes: Sequence[str] = ("view",),
    probe_every_k: int | None = None,
) -> dict[str, Any]:
    """A sweep spec (a dict for :func:`h9eval.sweeps.sweep`) of every registered policy at its
    defaults on ``tasks`` (task specs or paths) at ``window`` tokens, with recall probes; a
    policy whose defaults are invalid at this window is skipped (and listed). The provider-side
    compaction policies are left out: their cassettes cover the tasks they were recorded on only."""
    if not tasks:
        raise ConfigError(
            "give at least one task (a file, a folder of sessions or a task spec such as synthetic:small:0)"
        )
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        raise ConfigError(f"window must be a positive number of tokens, got {window!r}")
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(str(tasks[0]).rstrip("/")).name.split("#")[0]).strip("-._") or "tasks"
    # the spec's window is every policy's run window (compaction.step.run_window)
    policies: list[dict[str, Any]] = [{"kind": "progressive", "name": DEFAULT_NAME}]
    policies += [{"kind": kind} for kind in sorted(task_independent_registry()) if kind != "progressive"]
    probes: dict[str, Any] = {"scorers": ["recall"]}
    if probe_every_k is not None:
        probes["every_k"] = probe_every_k
    return {
        "name": name or f"all-policies-{stem}-w{window}",
        "window": window,
        "tasks": {"specs": [str(t) for t in tasks]},
        "policies": policies,
        "history_modes": list(history_modes),
        "probes": probes,
        # a default that cannot work at this window (Claude Code's 33,000-token reserve at 16,000) is listed, not fatal
        "skip_invalid": True,
    }


def policy_table(results: Any) -> pd.DataFrame:
    """One row per configuration and history mode: ``n_tasks`` and the mean of each of
    :data:`TABLE_METRICS` over its runs, best retention first (then most tokens saved)."""
    table = run_table(results)
    cols = [m for m in TABLE_METRICS if m in table.columns]
    g = table.groupby(["config", "history_mode"], sort=False)
    out = g[cols].mean()
    out.insert(0, "n_tasks", g["task_id"].nunique())
    return out.reset_index().sort_values(
        ["retention", "tokens_saved"], ascending=False, na_position="last", ignore_index=True
    )


@dataclass(frozen=True, kw_only=True)
class AllPolicies:
    """What :func:`compare_all_policies` found: the sweep, the :func:`policy_table`, and every
    configuration against harness9's default (``None`` with fewer tasks than a verdict needs)."""

    sweep: SweepResult
    table: pd.DataFrame
    headline: Headline | None
    n_tasks: int

    def lines(self) -> list[str]:
        import pandas as pd

        with pd.option_context(
            "display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format
        ):
            out = self.table.to_string(index=False).splitlines()
        need = min_tasks_for(DEFAULT_LEVEL)
        if self.headline is None:
            out.append(
                f"{self.n_tasks} task(s): no verdicts against {DEFAULT_NAME} (a paired verdict needs at least {need} "
                "tasks; "
                "give a folder of sessions or more task specs)"
            )
        else:
            out.append(
                f"against {DEFAULT_NAME} (A - B, paired by task, {self.headline.method} over "
                f"{self.headline.family_size}):"
            )
            out += ["  " + c.a + ": " + c.line() for c in self.headline.comparisons]
        out += [f"skipped {s.where}: {s.error}" for s in self.sweep.skipped]
        out.append(f"results: {self.sweep.out_dir} (h9eval report {self.sweep.out_dir} for the full report)")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def compare_all_policies(
    tasks: Sequence[str],
    *,
    window: int,
    out_dir: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    history_modes: Sequence[str] = ("view",),
    probe_every_k: int | None = None,
    progress: bool = True,
) -> AllPolicies:
    """Sweep every registered policy at its defaults over ``tasks`` at ``window`` tokens
    (:func:`all_policies_spec`; ``out_dir`` default ``results/<spec name>``) and tabulate them.
    Raises :class:`~h9eval.sweeps.sweep.SweepFailed` when cells failed."""
    spec = all_policies_spec(tasks, window=window, history_modes=history_modes, probe_every_k=probe_every_k)
    r = sweep(spec, out_dir=out_dir, workers=workers, progress=progress)
    res = r.load()
    n_tasks = int(res.runs["task_id"].nunique())
    head = versus_default(res) if n_tasks >= min_tasks_for(DEFAULT_LEVEL) else None
    return AllPolicies(sweep=r, table=policy_table(res), headline=head, n_tasks=n_tasks)
