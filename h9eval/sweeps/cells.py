"""The cells of a sweep: one :class:`Cell` per task × policy grid point × summarizer variant ×
history mode × repeat (and, for ``[tasks] worlds``, one closed-loop episode cell per world
seed × agent × the same), and the cell hash that decides whether a finished cell is reused."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.compaction.base import params_hash, policy_params
from h9eval.compaction.policies import make_policy
from h9eval.compaction.step import run_window
from h9eval.compaction.user import policy_code_hash
from h9eval.core import provenance
from h9eval.core.errors import ConfigError, H9InputError
from h9eval.results.schema import MANIFEST_SCHEMA_VERSION
from h9eval.results.store import cell_dir_name
from h9eval.runs.run import peak_frac_window
from h9eval.closedloop.run import world_task_id
from h9eval.sweeps.spec import PolicyGrid, SweepSpec
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.datasets import DATASET_SPEC_PREFIX, is_streamed, iter_dataset_tasks, materialize_sample
from h9eval.tasks.model import Task

__all__ = ["DEFAULT_CACHE_NAME", "Cell", "SkippedCell", "expand_cells"]

DEFAULT_CACHE_NAME = "summary_cache.sqlite"

# What determines a cell's results, besides the code that runs it. The cache location is left
# out: where replies are stored does not change them.
_HASHED = (
    "task_id",
    "task_spec",
    "task_source",
    "policy_kind",
    "params",
    "history_mode",
    "writeback_rules",
    "window",
    "window_peak_frac",
    "summarizer",
    "summarizer_params",
    "scorers",
    "probe_every_k",
    "repeat",
    "cell_kind",
    "world_kind",
    "world_params",
    "world_seed",
    "agent",
    "max_steps",
    "billing",
    "policy_window",
    "stress",
    "endpoint",
)
CELL_KINDS = ("replay", "episode")


@dataclass(frozen=True, kw_only=True)
class Cell:
    """Everything a worker needs to run one replay: names and values only (no task, no
    objects), so it pickles small and goes into the manifest as JSON (:meth:`to_dict`).

    The dict fields are not to be mutated (the cell hash was computed from them).
    """

    run_id: str
    """``<task>--<policy name>-<params hash>-<history mode>--<summarizer>--r<repeat>``."""
    cell_dir: str
    """The cell's folder name under ``cells/``."""
    sweep: str
    task_id: str
    task_spec: str
    """The spec the task was listed under (a folder, a file, ``synthetic:...``)."""
    task_source: str
    """The narrowest spec that loads the task (its one file when known): what workers load."""
    policy_entry: str
    """Key path of the ``[[policies]]`` entry, e.g. ``policies[0]``."""
    policy_name: str
    policy_kind: str
    spec_params: dict[str, Any]
    """The parameters as the spec gives them (fixed params and the grid point)."""
    params: dict[str, Any]
    """Every parameter of the built policy, defaults resolved."""
    grid: dict[str, Any]
    """The grid point (the varied parameters only)."""
    params_hash: str
    history_mode: str
    writeback_rules: str
    window: int | None
    """The run's window (tokens); with ``window_peak_frac``, this task's own."""
    window_peak_frac: float | None
    """``window = { peak_frac = f }``: ``window`` is ``f`` times the task's uncompacted peak, and
    every policy runs at it (``params`` then leave ``context_window_tokens`` out: it is per task)."""
    summarizer: str
    summarizer_variants: tuple[str, ...] = ()
    """The spec's summarizer variants this cell stands for: all of them for a policy that uses
    no summarizer (``Policy.uses_summarizer`` false; it runs once, with the first variant, whose
    summarizer it never calls), else its own ``summarizer`` alone."""
    summarizer_params: dict[str, Any]
    summarizer_cache: str
    scorers: tuple[str, ...]
    probe_every_k: int | None
    repeat: int
    h9eval_version: str
    """The version of h9eval that planned the cell (and so produced its results)."""
    source_hash: str
    """:func:`h9eval.core.provenance.source_hash` of the code that planned the cell."""
    cell_kind: str = "replay"
    """``replay`` (open loop, a task) or ``episode`` (closed loop, a world and an agent)."""
    world_kind: str = ""
    """The world of an episode cell, or of a replay cell whose task is an exported world."""
    world_params: dict[str, Any] = field(default_factory=dict)
    world_seed: int | None = None
    agent: str = ""
    """An episode cell's agent (``make_agent`` form)."""
    max_steps: int = 60
    """An episode cell's step bound."""
    billing: dict[str, Any] = field(default_factory=dict)
    """The spec's ``[billing]`` table (how the calls are billed)."""
    request_timeout_s: float | None = None
    """Seconds per model request attempt (the spec's ``request_timeout_s``; not hashed)."""
    max_retries: int | None = None
    """Retries of a failed model request (the spec's ``max_retries``; not hashed)."""
    breaker_failures: int | None = None
    """Consecutive failed model calls after which a worker's client stops calling (the spec's
    ``breaker_failures``; not hashed)."""
    max_cost_usd: float | None = None
    """The invocation's spending cap (the spec's or ``--max-cost-usd``; not hashed: a cap decides
    whether a cell runs, not what it gives)."""
    endpoint: dict[str, str] = field(default_factory=dict)
    """The spec's (or command line's) ``base_url`` and ``summarizer_model``/``scorer_model``/
    ``agent_model`` that are set (:meth:`~h9eval.core.anthropic.CallLimits.endpoint`; hashed:
    another endpoint or model gives other replies)."""
    stress: dict[str, Any] = field(default_factory=dict)
    """An episode cell's stress settings (``StressSettings`` fields; empty: none)."""
    policy_window: int | None = None
    """An episode cell's per-world window: the compacting policy's ``context_window_tokens`` when
    its spec entry leaves it at the default (``None``: the policy's own)."""
    batch_dir: str = ""
    """A batched sweep's ``batches`` folder (:mod:`h9eval.summarizers.batches`); empty: the summarizer
    is called directly. Not hashed: batching changes what a reply costs, not what it says."""
    cell_hash: str = field(init=False)
    """A finished cell is reused on resume only if its hash is equal: the hashed fields, the
    manifest schema, the h9eval version and the source hash."""

    def __post_init__(self) -> None:
        blob = json.dumps(
            {
                "schema": MANIFEST_SCHEMA_VERSION,
                "h9eval_version": self.h9eval_version,
                "source_hash": self.source_hash,
                **{k: getattr(self, k) for k in _HASHED},
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        object.__setattr__(self, "cell_hash", hashlib.sha256(blob.encode()).hexdigest()[:16])

    def to_dict(self) -> dict[str, Any]:
        """The cell as JSON-ready values, in field order (the manifest's ``cells`` entries)."""
        d = dataclasses.asdict(self)
        d["scorers"] = list(self.scorers)
        d["summarizer_variants"] = list(self.summarizer_variants)
        return d

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> Cell:
        """The cell again from its manifest entry (:meth:`to_dict`'s inverse; the hash is recomputed
        from the fields, so an entry edited by hand no longer matches its ``cell_hash``)."""
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        values: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in entry.items() if k in names}
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class SkippedCell:
    """A grid point the policy rejected, skipped because of ``skip_invalid``."""

    where: str
    """``policies[<i>] cell {param=value, ...}``."""
    policy_kind: str
    policy_name: str
    grid: dict[str, Any]
    error: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class _Point:
    """A valid grid point of one ``[[policies]]`` entry."""

    entry: str
    grid: PolicyGrid
    point: dict[str, Any]
    given: dict[str, Any]
    resolved: dict[str, Any]
    params_hash: str
    uses_summarizer: bool


@dataclass(frozen=True, kw_only=True)
class _TaskRef:
    """One task of the spec, by id (the transcript is not kept)."""

    path: str
    """Key path of the task source in the spec, e.g. ``tasks.recorded[0]``."""
    spec: str
    source: str
    """The narrow spec workers reload the task from."""
    task_id: str
    peak_windows: dict[str, int] = field(default_factory=dict)
    """With ``window = { peak_frac = f }``: the task's window per history mode (else empty;
    :func:`~h9eval.runs.run.peak_frac_window`)."""


def _fmt_point(point: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={json.dumps(v)}" for k, v in point.items()) + "}"


@dataclass(frozen=True, kw_only=True)
class _WorldRef:
    """One world seed of ``[tasks] worlds``."""

    path: str
    """``tasks.worlds[<i>]``."""
    kind: str
    params: dict[str, Any]
    seed: int
    max_steps: int
    open_loop: bool
    task_id: str
    window: int | None = None
    stress: dict[str, Any] = field(default_factory=dict)


def _world_refs(spec: SweepSpec) -> list[_WorldRef]:
    return [
        _WorldRef(
            path=f"tasks.worlds[{i}]",
            kind=w.kind,
            params=dict(w.params),
            seed=s,
            max_steps=w.max_steps,
            open_loop=w.open_loop,
            task_id=world_task_id(w.kind, w.params, s),
            window=w.window,
            stress=dict(w.stress),
        )
        for i, w in enumerate(spec.worlds)
        for s in w.seeds
    ]


def _peak_windows(spec: SweepSpec, task: Task) -> dict[str, int]:
    """The task's window in each of the spec's history modes, with ``window = { peak_frac = f }``."""
    if spec.window_peak_frac is None:
        return {}
    return {m: peak_frac_window(task, spec.window_peak_frac, history_mode=m) for m in spec.history_modes}


def _task_refs(spec: SweepSpec) -> list[_TaskRef]:
    """Every task of ``spec``, in spec order.

    Tasks are loaded here once, to learn their ids; workers reload them from the *narrow*
    spec (the one file a task came from, when known) so a folder is not re-read per cell.
    """
    out = []
    for path, ts in spec.task_specs():
        try:
            tasks = load_tasks_from_spec(ts)
        except H9InputError as e:
            raise ConfigError(f"{path}: {e}") from None
        if not tasks:
            raise ConfigError(f"{path}: no sessions found in {ts!r}")
        for t in tasks:
            src = t.source
            narrow = ts
            if src.kind == "recorded" and src.path and Path(src.path).is_file():
                narrow = str(Path(src.path).resolve())
            elif src.kind == "harness9_db" and src.path and src.session:
                narrow = f"{Path(src.path).resolve()}#{src.session}"
            out.append(
                _TaskRef(path=path, spec=ts, source=narrow, task_id=t.task_id, peak_windows=_peak_windows(spec, t))
            )
        del tasks  # transcripts are not kept in the parent
    return out + _dataset_refs(spec)


def _dataset_refs(spec: SweepSpec) -> list[_TaskRef]:
    """The tasks of ``[tasks] datasets``, read one row at a time (a corpus of thousands of tasks
    is never held at once). Each task's narrow spec is ``dataset:FILE:SPLIT#ROW``; a streamed
    (Hub) sample is first saved as a local file, so workers can load a row by index."""
    out = []
    for i, source in enumerate(spec.datasets):
        path = f"tasks.datasets[{i}]"
        try:
            local = materialize_sample(source) if is_streamed(source) else source
            shown = f"{DATASET_SPEC_PREFIX}{source.path}:{source.split}"
            base = f"{DATASET_SPEC_PREFIX}{Path(local.path).resolve()}:{local.split}"
            n = 0
            for index, t in iter_dataset_tasks(local):
                out.append(
                    _TaskRef(
                        path=path,
                        spec=shown,
                        source=f"{base}#{index}",
                        task_id=t.task_id,
                        peak_windows=_peak_windows(spec, t),
                    )
                )
                n += 1
        except H9InputError as e:
            raise ConfigError(f"{path}: {e}") from None
        if n == 0:
            raise ConfigError(f"{path}: no task in the sample of {source.path!r} (every row was skipped or filtered)")
    return out


def _cache_for_repeat(cache: str, repeat: int) -> str:
    """Repeat 0 uses ``cache``; repeat r > 0 its own file ``<stem>.r<r><suffix>``: a shared
    cache would replay repeat 0's replies, making repeats of an LLM summarizer identical."""
    if repeat == 0:
        return cache
    p = Path(cache)
    return str(p.with_name(f"{p.stem}.r{repeat}{p.suffix}"))


def _points(spec: SweepSpec, skip: bool) -> tuple[list[_Point], list[SkippedCell]]:
    """Every grid point of every policy entry, each checked by building the policy."""
    points: list[_Point] = []
    skipped: list[SkippedCell] = []
    for i, pg in enumerate(spec.policies):
        for point in pg.points():
            given = {**pg.params, **point}
            try:
                pol = make_policy(pg.kind, **given)
                if spec.window_peak_frac is None:
                    # the sweep's window replaces the policy's default (the one rule of compaction.step.run_window)
                    pol = run_window(pol, spec.window, explicit="context_window_tokens" in given).policy
            except H9InputError as e:
                where = f"policies[{i}] cell {_fmt_point(point)}"
                if not skip:
                    raise ConfigError(f"{where}: {e} (set skip_invalid = true to skip invalid cells)") from None
                skipped.append(
                    SkippedCell(where=where, policy_kind=pg.kind, policy_name=pg.name, grid=point, error=str(e))
                )
                continue
            resolved = policy_params(pol)
            if spec.window_peak_frac is not None:
                # the window is sized per task: not part of the policy's identity across tasks
                resolved.pop("context_window_tokens", None)
            points.append(
                _Point(
                    entry=f"policies[{i}]",
                    grid=pg,
                    point=point,
                    given=given,
                    resolved=resolved,
                    params_hash=params_hash(pg.kind, resolved),
                    uses_summarizer=type(pol).uses_summarizer,
                )
            )
    return points, skipped


class _CellMaker:
    """Builds the cells of one sweep: the fields every cell takes from the spec, its policy
    point, history mode, summarizer variant and repeat, and one check that no two cells share
    a run id."""

    def __init__(self, spec: SweepSpec, cache: str, version: str, code: str) -> None:
        self.spec, self.cache, self.version, self.code = spec, cache, version, code
        self.seen: dict[str, str] = {}

    def __call__(self, p: _Point, mode: str, variant: str, r: int, *, run_id: str, here: str, **fields: Any) -> Cell:
        if run_id in self.seen:
            raise ConfigError(f"{here} duplicates {self.seen[run_id]}; remove one of the two")
        self.seen[run_id] = here
        spec = self.spec
        return Cell(
            run_id=run_id,
            cell_dir=cell_dir_name(run_id),
            sweep=spec.name,
            policy_entry=p.entry,
            policy_name=p.grid.name,
            policy_kind=p.grid.kind,
            spec_params=dict(p.given),
            params=p.resolved,
            grid=p.point,
            params_hash=p.params_hash,
            history_mode=mode,
            writeback_rules=spec.writeback_rules,
            billing=spec.billing,
            summarizer=variant,
            summarizer_params=dict(spec.summarizer_params),
            request_timeout_s=spec.call_limits.request_timeout_s,
            max_retries=spec.call_limits.max_retries,
            breaker_failures=spec.call_limits.breaker_failures,
            endpoint=spec.call_limits.endpoint(),
            max_cost_usd=spec.max_cost_usd,
            summarizer_cache=_cache_for_repeat(self.cache, r),
            repeat=r,
            h9eval_version=self.version,
            source_hash=self.code + _user_code(p.grid.kind),
            **fields,
        )


def _user_code(kind: str) -> str:
    """A user policy's own code hash, appended to the cell's source hash: its cells rerun on
    resume when the user changed the class (h9eval's source hash cannot see that code)."""
    h = policy_code_hash(kind)
    return f"+{kind}:{h}" if h else ""


def expand_cells(
    spec: SweepSpec, *, out_dir: str | os.PathLike[str], skip_invalid: bool | None = None
) -> tuple[list[Cell], list[SkippedCell]]:
    """The cells of ``spec`` (tasks × policy grid points × summarizer variants × history modes
    × repeats, then world seeds × agents × the same) and the skipped invalid grid cells. A policy that uses no
    summarizer gets one variant only (the first; ``Cell.summarizer_variants`` lists those it
    stands for).

    A grid point the policy rejects raises :class:`ConfigError` naming the entry and the point
    (``policies[0] cell {warn_frac=0.8, soft_frac=0.7}: ...``) unless ``skip_invalid`` (default:
    the spec's ``skip_invalid``), in which case it is listed in the second return value.
    """
    skip = spec.skip_invalid if skip_invalid is None else skip_invalid
    cache = spec.summarizer_cache or str(Path(out_dir).resolve() / DEFAULT_CACHE_NAME)
    points, skipped = _points(spec, skip)
    version, code = provenance.h9eval_version(), provenance.source_hash()
    cells: list[Cell] = []
    make = _CellMaker(spec, cache, version, code)
    worlds = _world_refs(spec)
    # exported worlds are replayed like the other tasks (their task is built by the worker)
    refs = _task_refs(spec) + [
        _TaskRef(path=w.path, spec=f"world:{w.kind}:{w.seed}", source=f"world:{w.kind}:{w.seed}", task_id=w.task_id)
        for w in worlds
        if w.open_loop
    ]
    by_task = {w.task_id: w for w in worlds}
    for t in refs:
        w = by_task.get(t.task_id) if t.spec.startswith("world:") else None
        for p in points:
            # a policy that never calls the summarizer gives the same results under every variant
            variants = spec.summarizers if p.uses_summarizer else spec.summarizers[:1]
            for variant in variants:
                for mode in spec.history_modes:
                    for r in range(spec.repeats):
                        cells.append(
                            make(
                                p,
                                mode,
                                variant,
                                r,
                                run_id=f"{t.task_id}--{p.grid.name}-{p.params_hash}-{mode}--{variant}--r{r}",
                                here=f"{p.entry} cell {_fmt_point(p.point)} on task {t.task_id!r} ({t.path})",
                                task_id=t.task_id,
                                task_spec=t.spec,
                                task_source=t.source,
                                window=t.peak_windows[mode] if spec.window_peak_frac is not None else spec.window,
                                window_peak_frac=spec.window_peak_frac,
                                summarizer_variants=tuple(spec.summarizers) if not p.uses_summarizer else (variant,),
                                scorers=tuple(spec.scorers),
                                probe_every_k=spec.probe_every_k,
                                **(
                                    {
                                        "world_kind": w.kind,
                                        "world_params": dict(w.params),
                                        "world_seed": w.seed,
                                        "max_steps": w.max_steps,
                                    }
                                    if w
                                    else {}
                                ),
                            )
                        )
    for w in worlds:
        for agent in spec.agents:
            for p in points:
                for variant in spec.summarizers:
                    for mode in spec.history_modes:
                        for r in range(spec.repeats):
                            cells.append(
                                make(
                                    p,
                                    mode,
                                    variant,
                                    r,
                                    run_id=f"{w.task_id}--{p.grid.name}-{p.params_hash}-{mode}--{variant}--{agent}--r{r}",
                                    here=f"{p.entry} cell {_fmt_point(p.point)} on world {w.task_id!r} ({w.path}) with "
                                    f"agent {agent!r}",
                                    task_id=w.task_id,
                                    task_spec=f"world:{w.kind}:{w.seed}",
                                    task_source=f"world:{w.kind}:{w.seed}",
                                    window=spec.window,
                                    window_peak_frac=None,  # a world is not a transcript: its window is the spec's
                                    scorers=(),
                                    probe_every_k=None,
                                    cell_kind="episode",
                                    world_kind=w.kind,
                                    world_params=dict(w.params),
                                    world_seed=w.seed,
                                    agent=agent,
                                    max_steps=w.max_steps,
                                    policy_window=w.window,
                                    stress=dict(w.stress),
                                )
                            )
    if not cells:
        raise ConfigError(
            "the spec gives no valid cells" + (f" ({len(skipped)} skipped as invalid)" if skipped else "")
        )
    return cells, skipped
