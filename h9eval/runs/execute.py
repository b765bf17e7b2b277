"""The one function that runs a :class:`~h9eval.runs.spec.RunSpec`: ``execute(spec, env) -> RunResult``.

Names become objects exactly once, here (:func:`resolve`): the task or world and agent, the window (a
peak fraction sized on the task), the policy at that window, the summarizer, the probes. Then the
replay (:func:`~h9eval.runs.replay.replay`, open loop) or the episode
(:func:`~h9eval.closedloop.episode.run_episode`, closed loop, with its ``keep_all`` oracle) runs, and
the run's tables come back in one typed :class:`RunResult` with a :class:`RunSummary` (the numbers a
runs-table row and ``h9eval run`` show, built one way for both loops).

:class:`RunEnv` holds what does not change a run's results: where replies are cached, the request
limits, the spending cap, the batch folder, where offload files and the run's own folder go, the
per-process caches, and objects a caller already built for the spec's references (a notebook's own
summarizer, a task in memory).

The closed loop's modules are imported only when an episode or a world's exported task is run: a task
run does not load the worlds and agents.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import math
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h9eval.compaction.base import Policy, params_hash
from h9eval.compaction.step import run_window
from h9eval.compaction.summary import Summarizer
from h9eval.core.anthropic import CallLimits, environment_fingerprint
from h9eval.core.billing import billing_config_from_dict
from h9eval.core.budget import Budget
from h9eval.core.errors import ConfigError, FormatError
from h9eval.probes.drift import check_probe_budget
from h9eval.probes.runner import ProbeFn, make_probe_fn
from h9eval.results.io import write_table
from h9eval.results.schema import MARKER, PROBE_COLUMNS, RUNS_SCHEMA_VERSION
from h9eval.results.store import runs_frame
from h9eval.runs.replay import ReplayConfig, ReplayResult, replay
from h9eval.runs.spec import PeakFrac, RunSpec, TaskRef, WorldRef
from h9eval.runs.window import peak_frac_window
from h9eval.summarizers.batches import BatchingSummarizer
from h9eval.summarizers.registry import build_summarizer
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.model import Task

if TYPE_CHECKING:
    import pandas as pd

    from h9eval.closedloop.agents import Agent
    from h9eval.closedloop.episode import Episode

__all__ = [
    "KEEP",
    "Resolved",
    "RunEnv",
    "RunObjects",
    "RunResult",
    "RunSummary",
    "execute",
    "load_task",
    "resolve",
]


class _Keep:
    """The marker of an object slot the caller left to :func:`resolve` (``None`` means "no summarizer")."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


@dataclass(frozen=True, kw_only=True)
class RunObjects:
    """Objects a caller already built for the spec's references (a notebook's own summarizer class, a
    task held in memory, a policy object of a class registered under its kind): :func:`resolve` uses
    them instead of building from names. Each must be what the reference names: the spec still
    decides the run's identity."""

    task: Task | None = None
    policy: Policy | None = None
    summarizer: Summarizer | None | Any = KEEP
    """:data:`KEEP`: build it from ``spec.summarizer``; ``None``: no summarizer."""
    agent: Agent | None = None


@dataclass(frozen=True, kw_only=True)
class RunEnv:
    """What does not change a run's results (see the module docstring)."""

    out_dir: Path | None = None
    """The run's own folder (``h9eval run --out``): its tables, manifest and harness9's stores;
    ``None``: nothing written (a sweep's worker writes the cell's tables itself)."""
    summarizer_cache: str | None = None
    """The SQLite response cache of model summarizers and the llm scorer."""
    call_limits: CallLimits | None = None
    """The request timeout, retries and breaker of every model call."""
    budget: Budget | None = None
    """The spending cap the run's model calls share (:mod:`h9eval.core.budget`)."""
    batch_dir: str = ""
    """A batched sweep's ``batches`` folder: summaries come from Message Batches."""
    offload_root: str | os.PathLike[str] | None = None
    """Where offload files go (default: the run folder's ``work``, else a fresh temporary folder)."""
    session_id: str | None = None
    """Names offload folders and record files (a sweep passes the task id, so identical summary
    prompts of one task hit the shared cache); default: from the run id."""
    session_store: bool = True
    """Write harness9's SQLite session store into ``out_dir``."""
    keep_views: bool = False
    """Keep every view sent (memory: a pointer per message per call)."""
    objects: RunObjects = field(default_factory=RunObjects)


# -- the summary ---------------------------------------------------------------------------------
_TIERS = ("warn", "soft", "full", "emergency")


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """A run's headline numbers, the same for a replay and an episode: what ``h9eval run`` prints and a
    runs-table row holds (:meth:`row`). Dollars are ``None`` when a call was unpriced."""

    calls: int
    n_compactions: int
    """Calls whose compaction changed what is sent."""
    compactions_by_tier: dict[str, int]
    compaction_records: int
    peak_tokens_sent: int
    final_tokens_sent: int
    peak_history_tokens: int
    offloads_tool_time: int
    offloads_compaction: int
    summarizer_calls: int
    summarizer_cache_hits: int
    summarizer_cost_usd: float
    fallbacks: int
    fallback_causes: dict[str, int]
    forced_truncations: int
    overflows: int
    probe_rows: int
    cost_usd: float | None
    raw_cost_usd: float | None
    cache_read_share: float | None
    invalidation_usd: float | None
    summarizer_breaker_skips: int | None
    context_window_tokens: int
    offload_write_failures: int = 0
    probe_means: dict[str, float] = field(default_factory=dict)
    """``mean_<method>_<scope>`` over answerable probes."""

    @classmethod
    def of_replay(cls, r: ReplayResult) -> RunSummary:
        """The summary of a replay (its :meth:`~h9eval.runs.replay.ReplayResult.summary`)."""
        s = r.summary()
        calls = r.calls
        hits = int(calls["summarizer_cache_hits"].sum()) if len(calls) else 0
        means = {k: float(v) for k, v in s.items() if k.startswith("mean_")}
        tiers = dict(s.get("compactions_by_tier", {}))
        return cls(
            calls=int(s.get("calls", 0)),
            n_compactions=int(s.get("compactions", 0)),
            compactions_by_tier={str(k): int(v) for k, v in tiers.items()},
            compaction_records=int(s.get("compaction_records", 0)),
            peak_tokens_sent=int(s.get("peak_tokens_sent", 0)),
            final_tokens_sent=int(s.get("final_tokens_sent", 0)),
            peak_history_tokens=int(s.get("peak_history_tokens", 0)),
            offloads_tool_time=int(s.get("offloads_tool_time", 0)),
            offloads_compaction=int(s.get("offloads_compaction", 0)),
            summarizer_calls=int(s.get("summarizer_calls", 0)),
            summarizer_cache_hits=hits,
            summarizer_cost_usd=float(s.get("summarizer_cost_usd", 0.0)),
            fallbacks=int(s.get("fallbacks", 0)),
            fallback_causes=dict(s.get("fallback_causes", {})),
            forced_truncations=int(s.get("forced_truncations", 0)),
            overflows=int(s.get("overflows", 0)),
            probe_rows=len(r.probes) if r.probes is not None else 0,
            cost_usd=s.get("cost_usd"),
            raw_cost_usd=s.get("raw_cost_usd"),
            cache_read_share=s.get("cache_read_share"),
            invalidation_usd=s.get("invalidation_usd"),
            summarizer_breaker_skips=s.get("summarizer_breaker_skips"),
            context_window_tokens=r.context_window_tokens,
            offload_write_failures=len(r.offload_write_failures),
            probe_means=means,
        )

    @classmethod
    def of_episode(cls, ep: Episode, row: Mapping[str, Any]) -> RunSummary:
        """The summary of an episode and its ``episodes`` row (its billed numbers)."""
        sent = [s.tokens_sent for s in ep.steps]
        tiers = [s.tier_name for s in ep.steps if s.compacted]

        def usd(k: str) -> float | None:
            v = row.get(k)
            return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

        return cls(
            calls=ep.n_steps,
            n_compactions=ep.n_compactions,
            compactions_by_tier={t: tiers.count(t) for t in _TIERS if tiers.count(t)},
            compaction_records=0,
            peak_tokens_sent=max(sent, default=0),
            final_tokens_sent=sent[-1] if sent else 0,
            peak_history_tokens=max((s.history_tokens for s in ep.steps), default=0),
            offloads_tool_time=int(row["offloads_tool_time"]),
            offloads_compaction=0,
            summarizer_calls=int(row["summarizer_calls"]),
            summarizer_cache_hits=0,
            summarizer_cost_usd=float(row["summarizer_cost_usd"]),
            fallbacks=0,
            fallback_causes={},
            forced_truncations=sum(1 for s in ep.steps if s.forced_compactions),
            overflows=sum(1 for s in ep.steps if s.tokens_sent > ep.context_window_tokens),
            probe_rows=0,
            cost_usd=usd("cost_usd"),
            raw_cost_usd=None,  # no uncompacted transcript: what raw would cost is unknown
            cache_read_share=usd("cache_read_share"),
            invalidation_usd=usd("invalidation_usd"),
            summarizer_breaker_skips=None,
            context_window_tokens=ep.context_window_tokens,
        )

    def row(self) -> dict[str, Any]:
        """The runs-table numbers (:data:`~h9eval.results.schema.RUN_COLUMNS`) of this run."""
        return {
            "calls": self.calls,
            "n_compactions": self.n_compactions,
            "compaction_records": self.compaction_records,
            **{f"compactions_{t}": int(self.compactions_by_tier.get(t, 0)) for t in _TIERS},
            "peak_tokens_sent": self.peak_tokens_sent,
            "final_tokens_sent": self.final_tokens_sent,
            "peak_history_tokens": self.peak_history_tokens,
            "offloads_tool_time": self.offloads_tool_time,
            "offloads_compaction": self.offloads_compaction,
            "summarizer_calls": self.summarizer_calls,
            "summarizer_cache_hits": self.summarizer_cache_hits,
            "summarizer_cost_usd": self.summarizer_cost_usd,
            "fallbacks": self.fallbacks,
            "forced_truncations": self.forced_truncations,
            "overflows": self.overflows,
            "probe_rows": self.probe_rows,
            "cost_usd": self.cost_usd,
            "raw_cost_usd": self.raw_cost_usd,
            "cache_read_share": self.cache_read_share,
            "invalidation_usd": self.invalidation_usd,
            "summarizer_breaker_skips": self.summarizer_breaker_skips,
        }

    def shown(self) -> dict[str, Any]:
        """The numbers ``h9eval run`` prints, in order (:data:`~h9eval.results.schema.RUN_SUMMARY_KEYS`,
        then the window, write failures and the probe means)."""
        out: dict[str, Any] = {
            "context_window_tokens": self.context_window_tokens,
            "calls": self.calls,
            "compactions": self.n_compactions,
            "compactions_by_tier": dict(sorted(self.compactions_by_tier.items())),
            "compaction_records": self.compaction_records,
        }
        for k in (
            "peak_tokens_sent",
            "final_tokens_sent",
            "peak_history_tokens",
            "offloads_tool_time",
            "offloads_compaction",
            "summarizer_calls",
            "summarizer_cost_usd",
            "fallbacks",
            "fallback_causes",
            "forced_truncations",
            "overflows",
            "cost_usd",
            "raw_cost_usd",
            "cache_read_share",
            "invalidation_usd",
            "summarizer_breaker_skips",
        ):
            out[k] = getattr(self, k)
        if self.offload_write_failures:
            out["offload_write_failures"] = self.offload_write_failures
        if self.probe_rows:
            out["probe_rows"] = self.probe_rows
        out.update(self.probe_means)
        return out

    def fallback_warning(self) -> str | None:
        """One line when the run fell back on every summary it asked for (see
        :func:`~h9eval.runs.run.fallback_warning`), else ``None``."""
        return fallback_warning(
            {
                "fallbacks": self.fallbacks,
                "summarizer_calls": self.summarizer_calls,
                "fallback_causes": self.fallback_causes,
            }
        )


def run_row(
    spec: RunSpec,
    summary: RunSummary | None = None,
    *,
    sweep: str = "",
    cell_hash: str = "",
    grid: Mapping[str, Any] | None = None,
    status: str = "ok",
    error: str = "",
    wall_time_s: float | None = None,
) -> dict[str, Any]:
    """A run's row of the ``runs`` table (:data:`~h9eval.results.schema.RUN_COLUMNS`), the one builder
    for a sweep's cells and a run's own folder: its identity from the spec, its numbers from the summary.

    Args:
        spec: the run.
        summary: its numbers (``None``: a run that did not finish, its identity only).
        sweep, cell_hash, grid: what a sweep adds (its name, the cell hash, the grid point).
        status: ``ok`` or ``failed``; ``error``: why; ``wall_time_s``: how long it took.

    Returns:
        The row.
    """
    ident = spec.identity()
    row: dict[str, Any] = {
        "schema_version": RUNS_SCHEMA_VERSION,
        "sweep": sweep,
        "run_id": ident.run_id,
        "cell_hash": cell_hash,
        "task_id": spec.task.task_id,
        "task_spec": spec.task.listed,
        "policy_name": spec.policy.label,
        "policy_kind": spec.policy.kind,
        "params_json": json.dumps(ident.params, sort_keys=True),
        "grid_json": json.dumps(dict(grid or {}), sort_keys=True),
        "params_hash": ident.params_hash,
        "history_mode": spec.history_mode,
        "summarizer": spec.summarizer.name,
        "repeat": spec.repeat,
    }
    if summary is not None:
        row.update(summary.row())
    row.update(status=status, error=error, wall_time_s=wall_time_s)
    return row


def fallback_warning(summary: Mapping[str, Any]) -> str | None:
    """One line when a run fell back on every summary it asked for, else ``None``.

    A fallback is harness9's: the summary fails and the history is truncated instead, so such a run
    measures the fallback, not the summarizer (a bad key, no network, an outage: ``fallback_causes``
    says which).

    Args:
        summary: a mapping with ``fallbacks``, ``summarizer_calls`` and ``fallback_causes`` (a runs-table
            row, :meth:`~h9eval.runs.execute.RunSummary.shown`).

    Returns:
        The warning line, or ``None``.
    """
    fell = int(summary.get("fallbacks", 0) or 0)
    asked = int(summary.get("summarizer_calls", 0) or 0)
    if fell == 0 or fell < asked:
        return None
    causes = summary.get("fallback_causes") or {}
    why = "; ".join(f"{cause} (x{n})" for cause, n in causes.items()) or "no cause recorded"
    return (
        f"every summary fell back to truncation ({fell} of {max(fell, asked)}): {why}; "
        "these results measure harness9's fallback, not the summarizer"
    )


# -- the result ----------------------------------------------------------------------------------
@dataclass
class RunResult:
    """What a run produced, open or closed loop: its spec and id, its :class:`RunSummary`, its tables,
    and the loop's own result (:attr:`replay` or :attr:`episode` and :attr:`oracle`)."""

    spec: RunSpec
    run_id: str
    task_id: str
    summary: RunSummary
    calls: pd.DataFrame
    compactions: pd.DataFrame
    probes: pd.DataFrame
    ledger: pd.DataFrame | None = None
    """The loss ledger (``None``: the spec asked for none)."""
    diffs: pd.DataFrame | None = None
    """What each compaction round took out of the view (:mod:`h9eval.probes.diffs`; with the ledger)."""
    episodes: pd.DataFrame | None = None
    """An episode's one ``episodes`` row (``None`` for a replay)."""
    replay: ReplayResult | None = None
    episode: Episode | None = None
    oracle: Episode | None = None
    """The ``keep_all`` episode of the same world, seed and agent when this run ran it (``None``: not
    run, or its step count came from this process's cache)."""
    oracle_steps: int | None = None
    """Steps of the ``keep_all`` episode (the episode's own when it is keep_all; ``None``: no oracle,
    e.g. a live agent's)."""
    out_dir: Path | None = None

    @property
    def loop(self) -> str:
        return self.spec.loop

    @property
    def final_history(self) -> list[Any]:
        """The history a replay ended with (empty for an episode)."""
        return self.replay.final_history if self.replay is not None else []

    @property
    def records(self) -> list[Any]:
        """A replay's compaction records, in order (empty for an episode: its rounds are in :attr:`compactions`)."""
        return list(self.replay.records) if self.replay is not None else []

    @property
    def policy_kind(self) -> str:
        return self.spec.policy.kind

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter of the policy as it ran (at the run's window, defaults resolved)."""
        if self.replay is not None:
            return self.replay.params
        if self.episode is not None:
            return dict(self.episode.policy_params)
        return self.spec.identity().params

    @property
    def params_hash(self) -> str:
        """The hash of :attr:`params` (the calls table's ``params_hash``)."""
        return params_hash(self.spec.policy.kind, self.params)

    @property
    def context_window_tokens(self) -> int:
        return self.summary.context_window_tokens

    @property
    def views(self) -> list[tuple[Any, ...]] | None:
        """Every view sent (with ``RunEnv.keep_views``, or an episode's)."""
        if self.replay is not None:
            return self.replay.views
        return list(self.episode.views) if self.episode is not None else None

    @property
    def excess_steps(self) -> int | None:
        o = self.oracle_steps
        return None if o is None or self.episode is None else self.episode.n_steps - o

    def row(self) -> dict[str, Any]:
        """The run's ``runs`` row (:func:`run_row`)."""
        return run_row(self.spec, self.summary)

    def parts(self) -> dict[str, pd.DataFrame]:
        """The run's tables as a sweep cell writes them (name -> table; absent tables left out)."""
        out: dict[str, pd.DataFrame] = {"calls": self.calls, "compactions": self.compactions, "probes": self.probes}
        for name in ("ledger", "diffs", "episodes"):
            t = getattr(self, name)
            if t is not None:
                out[name] = t
        return out


# -- resolving names -----------------------------------------------------------------------------
_TASKS: OrderedDict[str, list[Task]] = OrderedDict()
_TASK_CACHE_SIZE = 4  # task lists per process: a few, since recorded sessions can be MBs each
_WORLD_TASKS: OrderedDict[str, Task] = OrderedDict()
_WORLD_CACHE_SIZE = 64  # per process: a world's keep_all episode serves every cell of that world
_SUMMARIZERS: dict[str, Summarizer | None] = {}


def _cached(cache: OrderedDict[str, Any], key: str, make: Callable[[], Any], size: int) -> Any:
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    cache[key] = value = make()
    while len(cache) > size:
        cache.popitem(last=False)
    return value


def load_task(ref: TaskRef | WorldRef, *, max_steps: int = 60) -> Task:
    """The task a reference names, loaded as a run loads it (a small per-process cache): a task spec's
    task with the reference's id, or a world's exported ``keep_all`` transcript.

    Args:
        ref: the task or world reference.
        max_steps: a world's step bound for the exported episode.

    Returns:
        The task (under the reference's key when two listed tasks share an id).

    Raises:
        FormatError: the task is not (or no longer) where the reference says.
    """
    if isinstance(ref, WorldRef):
        key = json.dumps([ref.kind, ref.params, ref.seed, max_steps], sort_keys=True)
        return _cached(
            _WORLD_TASKS, key, lambda: _closed_loop().world_task(ref, max_steps=max_steps), _WORLD_CACHE_SIZE
        )
    for spec in dict.fromkeys((ref.source, ref.listed)):
        tasks = _cached(_TASKS, spec, functools.partial(load_tasks_from_spec, spec), _TASK_CACHE_SIZE)
        for t in tasks:
            if t.task_id == ref.task_id:
                return t
    raise FormatError(f"task {ref.task_id!r} not found (it was there when the run was planned)", path=ref.listed)


def _summarizer_key(spec: RunSpec, env: RunEnv) -> str:
    b = env.budget
    return json.dumps(
        [
            spec.summarizer.name,
            spec.summarizer.params,
            env.summarizer_cache,
            None if env.call_limits is None else dataclasses.asdict(env.call_limits),
            None if b is None else [b.path, b.max_cost_usd],
            # a model summarizer reads its endpoint and key from the environment when built: one built
            # under another environment (an earlier run of a notebook or a test) must not be reused
            environment_fingerprint(),
        ],
        sort_keys=True,
        default=str,
    )


def _build_summarizer(spec: RunSpec, env: RunEnv) -> Summarizer | None:
    """The spec's summarizer, one per process and settings (a model summarizer keeps its SQLite cache open)."""
    key = _summarizer_key(spec, env)
    if key not in _SUMMARIZERS:
        _SUMMARIZERS[key] = build_summarizer(
            spec.summarizer.name,
            env.summarizer_cache,
            call_limits=env.call_limits,
            budget=env.budget,
            **spec.summarizer.params,
        )
    summ = _SUMMARIZERS[key]
    if env.batch_dir and summ is not None:
        # a repeat > 0 has its own response cache, so its own requests (not repeat 0's replies)
        scope = f"r{spec.repeat}" if spec.repeat else ""
        return BatchingSummarizer.wrap(summ, env.batch_dir, run_id=spec.run_id, scope=scope)
    return summ


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """A spec's names as objects (what :func:`resolve` returns)."""

    spec: RunSpec
    run_id: str
    policy: Policy
    window_tokens: int | None
    """The window the run measures against, in tokens (``None``: the policy's own, else 200,000)."""
    summarizer: Summarizer | None
    probe_fn: ProbeFn | None
    task: Task | None = None
    """The task a replay replays (``None`` for an episode)."""


def resolve(spec: RunSpec, env: RunEnv | None = None) -> Resolved:
    """Turn the spec's names into objects, once: the task (replays), the window (a peak fraction sized
    on the task), the policy at that window, the summarizer and the probes.

    Args:
        spec: the run.
        env: where replies are cached, request limits, objects already built.

    Returns:
        The :class:`Resolved` objects.

    Raises:
        ConfigError: a name or parameter is unknown, or the windows conflict.
        FormatError: the task cannot be loaded.
    """
    env = env or RunEnv()
    obj = env.objects
    if obj.task is not None and obj.task.task_id != spec.task.task_id:
        raise ConfigError(f"the task given ({obj.task.task_id!r}) is not the spec's ({spec.task.task_id!r})")
    task = None
    window = spec.window_tokens
    if spec.loop == "replay":
        task = obj.task if obj.task is not None else load_task(spec.task, max_steps=spec.max_steps)
        if isinstance(spec.window, PeakFrac) and spec.window.tokens is None:
            window = peak_frac_window(task, spec.window.frac, history_mode=spec.history_mode)
    at = window if window is not None else spec.policy_window_tokens
    if obj.policy is not None:
        policy = run_window(obj.policy, at, explicit=spec.policy.sets_window).policy
    else:
        policy = spec.policy_at_window(at)
    summ = _build_summarizer(spec, env) if obj.summarizer is KEEP else obj.summarizer
    probe_fn = make_probe_fn(spec.probes.scorers, cache=env.summarizer_cache, call_limits=env.call_limits)
    if probe_fn is not None and task is not None:
        check_probe_budget(task, spec.probes.every_k, spec.probes.max_probes)
    return Resolved(
        spec=spec,
        run_id=spec.run_id,
        policy=policy,
        window_tokens=window,
        summarizer=summ,
        probe_fn=probe_fn,
        task=task,
    )


# -- running -------------------------------------------------------------------------------------
def execute(spec: RunSpec, env: RunEnv | None = None) -> RunResult:
    """Run ``spec``: its names become objects once (:func:`resolve`), then its replay or its episode
    runs; with ``env.out_dir`` the run's folder is written (under its lock).

    Args:
        spec: the run.
        env: what does not change its results (:class:`RunEnv`).

    Returns:
        The :class:`RunResult`.

    Raises:
        ConfigError: an invalid spec (before anything runs).
        FormatError: a task that cannot be loaded, a folder that cannot be written.
    """
    env = env or RunEnv()
    r = resolve(spec, env)
    if spec.loop == "episode":
        return _closed_loop().run_episode_spec(r, env)  # type: ignore[no-any-return]
    return _replay(r, env)


def _closed_loop() -> Any:
    """:mod:`h9eval.runs.episode`, imported when an episode or a world's exported task is run: a task
    run does not load the closed loop's worlds and agents (a tenth of a short run's CPU)."""
    return importlib.import_module("h9eval.runs.episode")


def _replay(r: Resolved, env: RunEnv) -> RunResult:
    import pandas as pd

    spec = r.spec
    assert r.task is not None
    cfg = ReplayConfig(
        history_mode=spec.history_mode,
        writeback_rules=spec.writeback_rules,
        manual_compact_at=spec.manual_compact_at,
        context_window_tokens=r.window_tokens,
        seed=spec.repeat,
        keep_views=env.keep_views,
        billing=billing_config_from_dict(spec.billing),
    )
    res = replay(
        r.task,
        r.policy,
        summarizer=r.summarizer,
        config=cfg,
        out_dir=env.out_dir,
        run_id=r.run_id,
        offload_root=env.offload_root,
        probe_fn=r.probe_fn,
        probe_every_k=spec.probes.every_k,
        max_probes=spec.probes.max_probes,
        session_store=env.session_store,
        session_id=env.session_id,
        ledger=spec.ledger,
        spec=spec.to_dict(),
    )
    probes = res.probes if res.probes is not None else pd.DataFrame(columns=list(PROBE_COLUMNS))
    result = RunResult(
        spec=spec,
        run_id=res.run_id,
        task_id=res.task_id,
        summary=RunSummary.of_replay(res),
        calls=res.calls,
        compactions=res.compactions,
        probes=probes,
        ledger=res.ledger,
        diffs=res.diffs,
        replay=res,
        out_dir=res.out_dir,
    )
    if res.out_dir is not None:
        write_run_row(result, Path(res.out_dir))
    return result


def write_run_row(result: RunResult, out: Path) -> None:
    """The run folder's ``run.parquet``: its ``runs`` row, as a sweep cell writes its own (the report
    of a run folder reads it, built by the same :func:`run_row`)."""
    write_table(runs_frame([result.row()]), out / MARKER, "runs")
