"""The cells of a sweep: one :class:`Cell` per task × policy grid point × summarizer variant ×
history mode × repeat (and, for ``[tasks] worlds``, one closed-loop episode cell per world
seed × agent × the same). A cell carries its :class:`~h9eval.runs.spec.RunSpec`, whose identity gives
its run id and the cell hash that decides whether a finished cell is reused."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.compaction.step import run_window
from h9eval.compaction.user import policy_code_hash
from h9eval.core import provenance
from h9eval.core.anthropic import CallLimits
from h9eval.core.errors import ConfigError, H9InputError
from h9eval.results.store import cell_dir_name
from h9eval.runs.window import peak_frac_window
from h9eval.runs.spec import LOOPS, PeakFrac, PolicyRef, ProbeSpec, RunSpec, SummarizerRef, TaskRef, WorldRef
from h9eval.sweeps.spec import PolicyGrid, SweepSpec
from h9eval.tasks import load_tasks_from_spec
from h9eval.tasks.datasets import DATASET_SPEC_PREFIX, is_streamed, iter_dataset_tasks, materialize_sample
from h9eval.tasks.model import Task

__all__ = [
    "DEFAULT_CACHE_NAME",
    "Cell",
    "DuplicateTask",
    "SkippedCell",
    "entry_policy_kind",
    "expand_cells",
    "one_task_once",
]

DEFAULT_CACHE_NAME = "summary_cache.sqlite"

CELL_KINDS = LOOPS


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One run of a sweep: its :class:`~h9eval.runs.spec.RunSpec` (what is run) and what the sweep keeps
    beside it (where it came from in the spec, the code that planned it, limits that do not change its
    results). It pickles small (names and values only) and goes into the manifest as JSON
    (:meth:`to_dict`; a manifest of schema version 1, written before run specs, reads back through
    :meth:`from_dict` too)."""

    spec: RunSpec
    sweep: str
    policy_entry: str
    """Key path of the ``[[policies]]`` entry, e.g. ``policies[0]``."""
    grid: dict[str, Any] = field(default_factory=dict)
    """The grid point (the varied parameters only)."""
    summarizer_variants: tuple[str, ...] = ()
    """The spec's summarizer variants this cell stands for: all of them for a policy that uses no
    summarizer (``Policy.uses_summarizer`` false; it runs once, with the first variant, whose
    summarizer it never calls), else its own summarizer alone."""
    summarizer_cache: str
    h9eval_version: str
    """The version of h9eval that planned the cell (and so produced its results)."""
    source_hash: str
    """:func:`h9eval.core.provenance.source_hash` of the code that planned the cell (a user policy's own
    code hash appended)."""
    request_timeout_s: float | None = None
    """Seconds per model request attempt (the spec's ``request_timeout_s``; not hashed)."""
    max_retries: int | None = None
    """Retries of a failed model request (the spec's ``max_retries``; not hashed)."""
    breaker_failures: int | None = None
    """Consecutive failed model calls after which a worker's client stops calling (not hashed)."""
    max_retry_after_s: float | None = None
    """The longest ``retry-after`` a model request's retry waits for (the spec's; not hashed)."""
    max_cost_usd: float | None = None
    """The invocation's spending cap (not hashed: a cap decides whether a cell runs, not what it gives)."""
    batch_dir: str = ""
    """A batched sweep's ``batches`` folder (:mod:`h9eval.summarizers.batches`); empty: the summarizer
    is called directly. Not hashed: batching changes what a reply costs, not what it says."""
    run_id: str = field(init=False)
    """:meth:`RunSpec.identity`'s run id."""
    cell_dir: str = field(init=False)
    """The cell's folder name under ``cells/``."""
    cell_hash: str = field(init=False)
    """A finished cell is reused on resume only if its hash is equal (:meth:`RunSpec.cell_hash`)."""

    def __post_init__(self) -> None:
        rid = self.spec.run_id
        object.__setattr__(self, "run_id", rid)
        object.__setattr__(self, "cell_dir", cell_dir_name(rid))
        object.__setattr__(
            self, "cell_hash", self.spec.cell_hash(h9eval_version=self.h9eval_version, source_hash=self.source_hash)
        )

    # -- what the sweep's other parts read of the spec (views of it, not copies) -----------------
    @property
    def task_id(self) -> str:
        return self.spec.task.task_id

    @property
    def task_spec(self) -> str:
        return self.spec.task.listed

    @property
    def policy_name(self) -> str:
        return self.spec.policy.label

    @property
    def policy_kind(self) -> str:
        return self.spec.policy.kind

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter of the built policy, defaults resolved."""
        return self.spec.identity().params

    @property
    def params_hash(self) -> str:
        return self.spec.identity().params_hash

    @property
    def summarizer(self) -> str:
        return self.spec.summarizer.name

    @property
    def cell_kind(self) -> str:
        return self.spec.loop

    @property
    def call_limits(self) -> CallLimits:
        """The cell's request limits and endpoint."""
        return CallLimits(
            request_timeout_s=self.request_timeout_s,
            max_retries=self.max_retries,
            breaker_failures=self.breaker_failures,
            max_retry_after_s=self.max_retry_after_s,
            **self.spec.endpoint,
        )

    def to_dict(self) -> dict[str, Any]:
        """The cell as JSON-ready values (a manifest's ``cells`` entry): its spec, and beside it what
        the sweep keeps (the run id, folder and hash first, for readers of the manifest)."""
        return {
            "run_id": self.run_id,
            "cell_dir": self.cell_dir,
            "cell_hash": self.cell_hash,
            "cell_kind": self.spec.loop,
            "task_id": self.task_id,
            "policy_name": self.policy_name,
            "sweep": self.sweep,
            "policy_entry": self.policy_entry,
            "grid": self.grid,
            "summarizer_variants": list(self.summarizer_variants),
            "summarizer_cache": self.summarizer_cache,
            "h9eval_version": self.h9eval_version,
            "source_hash": self.source_hash,
            "request_timeout_s": self.request_timeout_s,
            "max_retries": self.max_retries,
            "breaker_failures": self.breaker_failures,
            "max_retry_after_s": self.max_retry_after_s,
            "max_cost_usd": self.max_cost_usd,
            "batch_dir": self.batch_dir,
            "spec": self.spec.to_dict(),
        }

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> Cell:
        """The cell again from its manifest entry (:meth:`to_dict`'s inverse; a version-1 entry, whose
        fields are flat, is read too). The hash is recomputed, so an entry edited by hand no longer
        matches its ``cell_hash``."""
        spec = RunSpec.from_dict(entry["spec"]) if "spec" in entry else _v1_spec(entry)
        return cls(
            spec=spec,
            sweep=entry.get("sweep", ""),
            policy_entry=entry.get("policy_entry", ""),
            grid=dict(entry.get("grid") or {}),
            summarizer_variants=tuple(entry.get("summarizer_variants") or ()),
            summarizer_cache=entry.get("summarizer_cache", ""),
            h9eval_version=entry.get("h9eval_version", ""),
            source_hash=entry.get("source_hash", ""),
            request_timeout_s=entry.get("request_timeout_s"),
            max_retries=entry.get("max_retries"),
            breaker_failures=entry.get("breaker_failures"),
            max_retry_after_s=entry.get("max_retry_after_s"),
            max_cost_usd=entry.get("max_cost_usd"),
            batch_dir=entry.get("batch_dir", ""),
        )


def entry_policy_kind(entry: Mapping[str, Any]) -> str:
    """The policy kind of a manifest's cell entry, read without building the cell (a kind not registered
    in this process can still be named)."""
    spec = entry.get("spec")
    kind = spec.get("policy", {}).get("kind") if isinstance(spec, Mapping) else entry.get("policy_kind")
    return str(kind)


def _v1_spec(e: Mapping[str, Any]) -> RunSpec:
    """The run spec of a manifest-version-1 cell entry (flat fields, before run specs)."""
    kind = e.get("cell_kind", "replay")
    task: TaskRef | WorldRef
    if e.get("world_kind"):
        window = e.get("policy_window") if kind == "episode" else None
        task = WorldRef(
            kind=e["world_kind"], params=e.get("world_params") or {}, seed=e.get("world_seed") or 0, window=window
        )
    else:
        task = TaskRef(source=e["task_source"], task_id=e["task_id"], listed_as=e.get("task_spec", ""))
        if task.listed == task.source:
            task = dataclasses.replace(task, listed_as="")
    frac = e.get("window_peak_frac")
    return RunSpec(
        task=task,
        policy=PolicyRef(kind=e["policy_kind"], params=e.get("spec_params") or {}, name=e.get("policy_name", "")),
        loop=kind,
        window=PeakFrac(frac, e.get("window")) if frac is not None else e.get("window"),
        history_mode=e["history_mode"],
        writeback_rules=e.get("writeback_rules", "v3"),
        summarizer=SummarizerRef(name=e["summarizer"], params=e.get("summarizer_params") or {}),
        probes=ProbeSpec(scorers=tuple(e.get("scorers") or ()), every_k=e.get("probe_every_k")),
        billing=e.get("billing") or {},
        agent=e.get("agent", ""),
        max_steps=e.get("max_steps", 60),
        stress=e.get("stress") or {},
        repeat=e.get("repeat", 0),
        endpoint=e.get("endpoint") or {},
    )


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
    policy: PolicyRef
    uses_summarizer: bool


@dataclass(frozen=True, kw_only=True)
class _Listed:
    """One task of the spec: its reference, where the spec lists it, and its window per history mode
    with ``window = { peak_frac = f }`` (the transcript is not kept)."""

    path: str
    """Key path of the task source in the spec, e.g. ``tasks.recorded[0]``."""
    ref: TaskRef | WorldRef
    peak_windows: dict[str, int] = field(default_factory=dict)
    max_steps: int = 60
    """An exported world's step bound."""
    transcript: str = ""
    """:meth:`~h9eval.tasks.model.Task.transcript_hash` (``""``: not a loaded transcript, a world)."""


@dataclass(frozen=True, kw_only=True)
class DuplicateTask:
    """A task a sweep left out: its transcript is one an earlier task of the spec already has (the
    same session in two files, a fixture and a dataset row). Counting it twice would count one piece
    of evidence as two independent tasks."""

    task_id: str
    where: str
    """Where the spec lists it (``tasks.datasets[1]``)."""
    same_as: str
    """The task id kept."""
    same_as_where: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def line(self) -> str:
        return f"{self.task_id} ({self.where}) is the same transcript as {self.same_as} ({self.same_as_where})"


def one_task_once(listed: Sequence[_Listed]) -> tuple[list[_Listed], list[DuplicateTask]]:
    """``listed`` with every task whose transcript an earlier one has left out, and those left out."""
    first: dict[str, _Listed] = {}
    kept: list[_Listed] = []
    dups: list[DuplicateTask] = []
    for t in listed:
        if t.transcript and t.transcript in first:
            k = first[t.transcript]
            dups.append(DuplicateTask(task_id=t.ref.task_id, where=t.path, same_as=k.ref.task_id, same_as_where=k.path))
            continue
        if t.transcript:
            first[t.transcript] = t
        kept.append(t)
    return kept, dups


def _fmt_point(point: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={json.dumps(v)}" for k, v in point.items()) + "}"


@dataclass(frozen=True, kw_only=True)
class _World:
    """One world seed of ``[tasks] worlds``."""

    path: str
    """``tasks.worlds[<i>]``."""
    ref: WorldRef
    max_steps: int
    open_loop: bool
    stress: dict[str, Any] = field(default_factory=dict)


def _worlds(spec: SweepSpec) -> list[_World]:
    return [
        _World(
            path=f"tasks.worlds[{i}]",
            ref=WorldRef(kind=w.kind, params=dict(w.params), seed=s, window=w.window),
            max_steps=w.max_steps,
            open_loop=w.open_loop,
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


def _listed_tasks(spec: SweepSpec) -> list[_Listed]:
    """Every task of ``spec``, in spec order.

    Tasks are loaded here once, to learn their ids; workers reload them from the *narrow* spec (the
    one file a task came from, when known: :meth:`~h9eval.runs.spec.TaskRef.of`) so a folder is not
    re-read per cell.
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
            out.append(
                _Listed(
                    path=path,
                    ref=TaskRef.of(t, listed_as=ts),
                    peak_windows=_peak_windows(spec, t),
                    transcript=t.transcript_hash(),
                )
            )
        del tasks  # transcripts are not kept in the parent
    return out + _dataset_tasks(spec)


def _dataset_tasks(spec: SweepSpec) -> list[_Listed]:
    """The tasks of ``[tasks] datasets``, read one row at a time (a corpus of thousands of tasks is
    never held at once). Each task's narrow spec is ``dataset:FILE:SPLIT#ROW``; a streamed (Hub) sample
    is first saved as a local file, so workers can load a row by index."""
    out = []
    for i, source in enumerate(spec.datasets):
        path = f"tasks.datasets[{i}]"
        try:
            local = materialize_sample(source) if is_streamed(source) else source
            shown = f"{DATASET_SPEC_PREFIX}{source.path}:{source.split}"
            base = f"{DATASET_SPEC_PREFIX}{Path(local.path).resolve()}:{local.split}"
            n = 0
            for index, t in iter_dataset_tasks(local):
                ref = TaskRef(source=f"{base}#{index}", task_id=t.task_id, listed_as=shown)
                out.append(
                    _Listed(path=path, ref=ref, peak_windows=_peak_windows(spec, t), transcript=t.transcript_hash())
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
    """Every grid point of every policy entry, each checked by building the policy at the sweep's
    window (the one window rule, :meth:`~h9eval.runs.spec.RunSpec.policy_at_window`)."""
    points: list[_Point] = []
    skipped: list[SkippedCell] = []
    for i, pg in enumerate(spec.policies):
        for point in pg.points():
            ref = PolicyRef(kind=pg.kind, params={**pg.params, **point}, name=pg.name)
            try:
                pol = ref.build()
                if spec.window_peak_frac is None:
                    run_window(pol, spec.window, explicit=ref.sets_window)
            except H9InputError as e:
                where = f"policies[{i}] cell {_fmt_point(point)}"
                if not skip:
                    raise ConfigError(f"{where}: {e} (set skip_invalid = true to skip invalid cells)") from None
                skipped.append(
                    SkippedCell(where=where, policy_kind=pg.kind, policy_name=pg.name, grid=point, error=str(e))
                )
                continue
            points.append(
                _Point(
                    entry=f"policies[{i}]", grid=pg, point=point, policy=ref, uses_summarizer=type(pol).uses_summarizer
                )
            )
    return points, skipped


class _CellMaker:
    """Builds the cells of one sweep: each cell's run spec from the sweep's settings, its task or world,
    policy point, history mode, summarizer variant and repeat, the sweep's fields beside it, and one
    check that no two cells share a run id."""

    def __init__(self, spec: SweepSpec, cache: str, version: str, code: str) -> None:
        self.spec, self.cache, self.version, self.code = spec, cache, version, code
        self.seen: dict[str, str] = {}

    def __call__(
        self, p: _Point, mode: str, variant: str, r: int, *, here: str, variants: tuple[str, ...], **run: Any
    ) -> Cell:
        sp = self.spec
        run_spec = RunSpec(
            policy=p.policy,
            history_mode=mode,
            writeback_rules=sp.writeback_rules,
            summarizer=SummarizerRef(name=variant, params=dict(sp.summarizer_params)),
            billing=sp.billing,
            repeat=r,
            endpoint=sp.call_limits.endpoint(),
            **run,
        )
        cell = Cell(
            spec=run_spec,
            sweep=sp.name,
            policy_entry=p.entry,
            grid=p.point,
            summarizer_variants=variants,
            summarizer_cache=_cache_for_repeat(self.cache, r),
            h9eval_version=self.version,
            source_hash=self.code + _user_code(p.grid.kind),
            request_timeout_s=sp.call_limits.request_timeout_s,
            max_retries=sp.call_limits.max_retries,
            breaker_failures=sp.call_limits.breaker_failures,
            max_retry_after_s=sp.call_limits.max_retry_after_s,
            max_cost_usd=sp.max_cost_usd,
        )
        if cell.run_id in self.seen:
            raise ConfigError(f"{here} duplicates {self.seen[cell.run_id]}; remove one of the two")
        self.seen[cell.run_id] = here
        return cell


def _user_code(kind: str) -> str:
    """A user policy's own code hash, appended to the cell's source hash: its cells rerun on
    resume when the user changed the class (h9eval's source hash cannot see that code)."""
    h = policy_code_hash(kind)
    return f"+{kind}:{h}" if h else ""


def _window(spec: SweepSpec, t: _Listed, mode: str) -> int | PeakFrac | None:
    if spec.window_peak_frac is not None:
        return PeakFrac(spec.window_peak_frac, t.peak_windows[mode])
    return spec.window


def expand_cells(
    spec: SweepSpec,
    *,
    out_dir: str | os.PathLike[str],
    skip_invalid: bool | None = None,
    duplicates: list[DuplicateTask] | None = None,
) -> tuple[list[Cell], list[SkippedCell]]:
    """The cells of ``spec`` and the skipped invalid grid cells.

    Cells: tasks × policy grid points × summarizer variants × history modes × repeats, then world
    seeds × agents × the same. A policy that uses no summarizer gets one variant only (the first;
    ``Cell.summarizer_variants`` lists those it stands for).

    Args:
        spec: the sweep.
        out_dir: its results folder (where the default response cache goes).
        skip_invalid: list a grid point the policy rejects instead of raising (default: the spec's).
        duplicates: filled with the tasks left out because an earlier task of the spec has the same
            transcript (:func:`one_task_once`; each transcript is one task).

    Returns:
        ``(cells, skipped)``.

    Raises:
        ConfigError: a grid point the policy rejects (``policies[0] cell {warn_frac=0.8,
            soft_frac=0.7}: ...``) unless skipped, two cells with one run id, or no valid cell.
    """
    skip = spec.skip_invalid if skip_invalid is None else skip_invalid
    cache = spec.summarizer_cache or str(Path(out_dir).resolve() / DEFAULT_CACHE_NAME)
    points, skipped = _points(spec, skip)
    version, code = provenance.h9eval_version(), provenance.source_hash()
    cells: list[Cell] = []
    make = _CellMaker(spec, cache, version, code)
    worlds = _worlds(spec)
    # exported worlds are replayed like the other tasks (their task is built by the worker)
    listed, dups = one_task_once(_listed_tasks(spec))
    if duplicates is not None:
        duplicates.extend(dups)
    listed += [
        _Listed(path=w.path, ref=dataclasses.replace(w.ref, window=None), max_steps=w.max_steps)
        for w in worlds
        if w.open_loop
    ]
    for t in listed:
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
                                here=f"{p.entry} cell {_fmt_point(p.point)} on task {t.ref.task_id!r} ({t.path})",
                                variants=tuple(spec.summarizers) if not p.uses_summarizer else (variant,),
                                task=t.ref,
                                window=_window(spec, t, mode),
                                probes=ProbeSpec(scorers=tuple(spec.scorers), every_k=spec.probe_every_k),
                                max_steps=t.max_steps,
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
                                    here=f"{p.entry} cell {_fmt_point(p.point)} on world {w.ref.task_id!r} ({w.path}) "
                                    f"with agent {agent!r}",
                                    variants=(variant,),
                                    task=w.ref,
                                    loop="episode",
                                    window=spec.window,  # a world is not a transcript: its window is the spec's
                                    agent=agent,
                                    max_steps=w.max_steps,
                                    stress=dict(w.stress),
                                )
                            )
    if not cells:
        raise ConfigError(
            "the spec gives no valid cells" + (f" ({len(skipped)} skipped as invalid)" if skipped else "")
        )
    return cells, skipped
