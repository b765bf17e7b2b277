"""Sweeps: run a grid of replays (tasks × policy parameters × history modes × summarizers ×
repeats) in worker processes, resumably, into one results folder.

A sweep is described by a TOML file or the equivalent dict (see :class:`SweepSpec`)::

    name = "small"                      # results go to results/<name>/ by default
    repeats = 1                         # repeat index goes into run ids (matters for LLM summarizers)
    window = 40000                      # context window (tokens) for policies without one
    history_modes = ["view", "write_back"]
    skip_invalid = false                # skip grid cells the policy rejects instead of failing

    [tasks]
    recorded = ["${H9EVAL_SHARED}/data/recorded/swe-agent"]   # files or folders
    synthetic = [{preset = "small", seeds = [0, 1, 2]}]
    specs = ["synthetic:small:5"]       # any task spec load_tasks_from_spec understands

    [[policies]]
    kind = "progressive"
    params = {context_window_tokens = 40000}
    grid = {warn_frac = [0.5, 0.6], min_tail_messages = [4, 6]}

    [summarizer]
    name = "offline"                    # or variants = ["offline", "offline_free_text"]
    cache = "summary_cache.sqlite"      # default <out>/summary_cache.sqlite, shared by all cells

    [probes]
    scorers = ["recall"]
    every_k = 10

Relative paths in a TOML file are relative to the file's folder (in a dict: to the current
directory); ``$VAR``/``${VAR}`` and ``~`` are expanded, and ``${H9EVAL_SHARED}`` defaults to
:func:`h9eval.paths.shared_dir`. A ``tasks`` key may also be a plain list of task specs.

Every cell is one :func:`h9eval.replay.replay`. Cells run in a ``ProcessPoolExecutor``
(``forkserver`` where available, else ``spawn``) or on Dask (``scheduler="local"`` or a
``tcp://`` address); each worker loads its task from the spec (so transcripts are never
pickled) with a small per-process cache, writes the cell's rows under ``cells/`` and its run
row last (see :mod:`h9eval.results`). An exception fails only its cell; failed and unfinished
cells are rerun on resume, finished ones are kept.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import itertools
import json
import os
import re
import sys
import time
import tomllib
import traceback
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from h9eval.errors import ConfigError, FormatError, H9InputError

__all__ = [
    "SweepSpec",
    "PolicyGrid",
    "SyntheticTasks",
    "SweepResult",
    "Cell",
    "sweep",
    "load_spec",
    "expand_cells",
    "run_cell",
]

TOP_LEVEL_KEYS = (
    "name",
    "tasks",
    "policies",
    "history_modes",
    "summarizer",
    "probes",
    "repeats",
    "window",
    "writeback_rules",
    "skip_invalid",
    "description",
)
TASK_KEYS = ("recorded", "synthetic", "specs")
SYNTHETIC_KEYS = ("preset", "seeds")
POLICY_KEYS = ("kind", "name", "params", "grid")
SUMMARIZER_KEYS = ("name", "variants", "cache", "params")
PROBE_KEYS = ("scorers", "every_k")
DEFAULT_CACHE_NAME = "summary_cache.sqlite"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


# -- the spec ---------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class SyntheticTasks:
    """``{preset = "small", seeds = [0, 1, 2]}``: one synthetic task per seed."""

    preset: str
    seeds: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class PolicyGrid:
    """One ``[[policies]]`` entry: ``kind``; fixed ``params``; ``grid``: parameter → list of
    values (the cartesian product, in the order written, gives the cells); ``name``: a label
    for the entry in the results (default: ``kind``)."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    name: str = ""

    def points(self) -> list[dict[str, Any]]:
        """The grid points (each a dict of the varied parameters), in order."""
        keys = list(self.grid)
        return [dict(zip(keys, vals)) for vals in itertools.product(*(self.grid[k] for k in keys))]


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """A validated sweep description (build with :func:`load_spec`; see the module docstring).

    ``recorded``/``specs``: task specs (paths resolved, absolute). ``synthetic``: preset and
    seeds. ``history_modes``: default ``("view",)``. ``summarizers``: variant names (default
    ``("offline",)``); ``summarizer_params`` apply to each; ``summarizer_cache``: SQLite path
    (``None`` → ``<out>/summary_cache.sqlite``). ``scorers``/``probe_every_k``: probes (none by
    default). ``repeats``: ≥ 1 (default 1). ``window``: tokens, for policies without a
    ``context_window_tokens`` (default ``None`` → the replay's 200,000). ``writeback_rules``:
    ``v3`` (default) or ``v2``. ``source``: the spec as passed (for the manifest).
    """

    name: str
    recorded: tuple[str, ...] = ()
    synthetic: tuple[SyntheticTasks, ...] = ()
    specs: tuple[str, ...] = ()
    policies: tuple[PolicyGrid, ...] = ()
    history_modes: tuple[str, ...] = ("view",)
    summarizers: tuple[str, ...] = ("offline",)
    summarizer_params: dict[str, Any] = field(default_factory=dict)
    summarizer_cache: str | None = None
    scorers: tuple[str, ...] = ()
    probe_every_k: int | None = None
    repeats: int = 1
    window: int | None = None
    writeback_rules: str = "v3"
    skip_invalid: bool = False
    description: str = ""
    source: dict[str, Any] = field(default_factory=dict, compare=False)
    source_path: str | None = field(default=None, compare=False)

    def task_specs(self) -> list[tuple[str, str]]:
        """``(key path, task spec)`` for every task source, in spec order."""
        out = [(f"tasks.recorded[{i}]", s) for i, s in enumerate(self.recorded)]
        for i, syn in enumerate(self.synthetic):
            out += [(f"tasks.synthetic[{i}]", f"synthetic:{syn.preset}:{seed}") for seed in syn.seeds]
        out += [(f"tasks.specs[{i}]", s) for i, s in enumerate(self.specs)]
        return out

    def to_dict(self) -> dict[str, Any]:
        """The resolved spec (defaults filled in, paths absolute), as the manifest stores it."""
        return {
            "name": self.name,
            "description": self.description,
            "tasks": {
                "recorded": list(self.recorded),
                "synthetic": [{"preset": s.preset, "seeds": list(s.seeds)} for s in self.synthetic],
                "specs": list(self.specs),
            },
            "policies": [{"kind": p.kind, "name": p.name, "params": p.params, "grid": p.grid} for p in self.policies],
            "history_modes": list(self.history_modes),
            "summarizer": {"variants": list(self.summarizers), "params": self.summarizer_params, "cache": self.summarizer_cache},
            "probes": {"scorers": list(self.scorers), "every_k": self.probe_every_k},
            "repeats": self.repeats,
            "window": self.window,
            "writeback_rules": self.writeback_rules,
            "skip_invalid": self.skip_invalid,
        }


def _unknown(path: str, key: str, choices: Sequence[str], what: str = "key") -> ConfigError:
    where = f"{path}.{key}" if path else key
    close = difflib.get_close_matches(key, list(choices), n=3, cutoff=0.6)
    msg = f"{where}: unknown key {key!r}" if what == "key" else f"{where}: unknown {what}"
    if close:
        msg += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    return ConfigError(msg + " available: " + ", ".join(sorted(choices)))


def _check_keys(d: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
    for k in d:
        if k not in allowed:
            if not path:
                close = difflib.get_close_matches(k, list(allowed), n=3, cutoff=0.6)
                hint = "; did you mean " + " or ".join(repr(c) for c in close) + "?" if close else ""
                raise ConfigError(f"unknown top-level key {k!r}{hint} available: {', '.join(allowed)}")
            raise _unknown(path, k, allowed)


def _expect(cond: bool, path: str, rule: str, value: Any) -> None:
    if not cond:
        raise ConfigError(f"{path}: {rule}, got {value!r}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _str_list(v: Any, path: str, *, allow_empty: bool = False) -> list[str]:
    _expect(isinstance(v, list | tuple) and (allow_empty or len(v) > 0) and all(isinstance(x, str) for x in v),
            path, "expected a non-empty list of strings" if not allow_empty else "expected a list of strings", v)
    return list(v)


_VAR_RE = re.compile(r"\$(\w+)|\$\{(\w+)\}")


def _resolve_path(raw: str, base: Path | None) -> str:
    """Expand ``$VAR``/``~`` (``H9EVAL_SHARED`` defaults to the shared folder) and make a
    relative path absolute against ``base`` (the spec file's folder) or the current folder."""
    from h9eval.paths import shared_dir

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in os.environ:
            return os.environ[name]
        if name == "H9EVAL_SHARED":
            return str(shared_dir())
        return m.group(0)

    spec_path, sep, session = raw.partition("#")
    p = Path(os.path.expanduser(_VAR_RE.sub(sub, spec_path)))
    if not p.is_absolute():
        p = (base or Path.cwd()) / p
    return str(p.resolve()) + sep + session


def load_spec(spec: SweepSpec | Mapping[str, Any] | str | os.PathLike[str]) -> SweepSpec:
    """Parse and validate a sweep spec: a :class:`SweepSpec` (returned as is), a dict, or a
    path to a TOML file. Errors (:class:`ConfigError`) name the key path, e.g.
    ``policies[1].grid.warn_fracc: unknown parameter of policy 'progressive'; did you mean
    'warn_frac'?``; a TOML syntax error is a :class:`FormatError` naming the file and line.
    Grid cells are checked later, by :func:`expand_cells`.
    """
    if isinstance(spec, SweepSpec):
        return spec
    base: Path | None = None
    source_path: str | None = None
    if isinstance(spec, str | os.PathLike):
        p = Path(spec)
        if not p.is_file():
            raise FormatError("no such sweep spec file", path=str(p))
        try:
            d: Any = tomllib.loads(p.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise FormatError(f"not valid TOML ({e})", path=str(p)) from None
        except (OSError, UnicodeDecodeError) as e:
            raise FormatError(f"cannot read sweep spec ({e})", path=str(p)) from None
        base, source_path = p.resolve().parent, str(p.resolve())
    elif isinstance(spec, Mapping):
        d = copy.deepcopy(dict(spec))
    else:
        raise ConfigError(f"sweep spec must be a SweepSpec, a dict or a TOML path, got {type(spec).__name__}")
    return _parse(d, base, source_path)


def _parse(d: dict[str, Any], base: Path | None, source_path: str | None) -> SweepSpec:
    source = copy.deepcopy(d)
    _check_keys(d, TOP_LEVEL_KEYS, "")
    _expect("name" in d, "name", "required (names the results folder)", None)
    name = d["name"]
    _expect(isinstance(name, str) and bool(_NAME_RE.fullmatch(name)), "name",
            "must start with a letter or digit and contain only letters, digits, '.', '_' or '-'", name)

    # tasks
    _expect("tasks" in d, "tasks", "required: a [tasks] table or a list of task specs", None)
    tasks = d["tasks"]
    if isinstance(tasks, list):
        tasks = {"specs": tasks}
    _expect(isinstance(tasks, dict), "tasks", "expected a table (recorded/synthetic/specs) or a list of task specs", tasks)
    _check_keys(tasks, TASK_KEYS, "tasks")
    recorded = tuple(_resolve_path(s, base) for s in _str_list(tasks.get("recorded", []), "tasks.recorded", allow_empty=True))
    for i, s in enumerate(recorded):
        _expect(Path(s.partition("#")[0]).exists(), f"tasks.recorded[{i}]", "no such file or folder", s)
    specs = []
    for i, s in enumerate(_str_list(tasks.get("specs", []), "tasks.specs", allow_empty=True)):
        specs.append(s if s.startswith("synthetic:") else _resolve_path(s, base))
        if not s.startswith("synthetic:"):
            _expect(Path(specs[-1].partition("#")[0]).exists(), f"tasks.specs[{i}]", "no such file or folder", specs[-1])
    syn_raw = tasks.get("synthetic", [])
    if isinstance(syn_raw, dict):
        syn_raw = [syn_raw]
    _expect(isinstance(syn_raw, list), "tasks.synthetic", "expected a list of {preset, seeds} tables", syn_raw)
    synthetic = []
    for i, e in enumerate(syn_raw):
        path = f"tasks.synthetic[{i}]"
        _expect(isinstance(e, dict), path, "expected a table {preset = ..., seeds = [...]}", e)
        _check_keys(e, SYNTHETIC_KEYS, path)
        preset = e.get("preset", "small")
        _expect(isinstance(preset, str), f"{path}.preset", "expected a preset name", preset)
        try:
            from h9eval.tasks.synthetic import PRESETS
        except ImportError:
            PRESETS = None  # type: ignore[assignment]  # the generator is optional at parse time
        if PRESETS is not None and preset not in PRESETS:
            raise _unknown(path, "preset", list(PRESETS), what=f"preset {preset!r}") from None
        seeds = e.get("seeds", [0])
        if _is_int(seeds):
            seeds = [seeds]
        _expect(isinstance(seeds, list) and len(seeds) > 0 and all(_is_int(s) and s >= 0 for s in seeds),
                f"{path}.seeds", "expected a non-empty list of non-negative integers", seeds)
        _expect(len(set(seeds)) == len(seeds), f"{path}.seeds", "must not repeat a seed", seeds)
        synthetic.append(SyntheticTasks(preset=preset, seeds=tuple(seeds)))
    _expect(bool(recorded or specs or synthetic), "tasks", "no tasks given (recorded, synthetic or specs)", tasks)

    # policies
    from h9eval.compaction.base import registry

    reg = registry()
    pols_raw = d.get("policies")
    _expect(isinstance(pols_raw, list) and len(pols_raw) > 0, "policies", "required: a non-empty list of [[policies]] tables", pols_raw)
    policies = []
    for i, e in enumerate(pols_raw):
        path = f"policies[{i}]"
        _expect(isinstance(e, dict), path, "expected a table with kind, params, grid", e)
        _check_keys(e, POLICY_KEYS, path)
        _expect("kind" in e, f"{path}.kind", "required", None)
        kind = e["kind"]
        _expect(isinstance(kind, str), f"{path}.kind", "expected a policy name", kind)
        if kind not in reg:
            close = difflib.get_close_matches(kind, list(reg), n=3, cutoff=0.6)
            hint = "; did you mean " + " or ".join(repr(c) for c in close) + "?" if close else ""
            raise ConfigError(f"{path}.kind: unknown policy {kind!r}{hint} available: {', '.join(reg)}")
        fields = [f.name for f in dataclasses.fields(reg[kind]) if f.init]  # type: ignore[arg-type]
        params = e.get("params", {})
        grid = e.get("grid", {})
        _expect(isinstance(params, dict), f"{path}.params", "expected a table of parameter values", params)
        _expect(isinstance(grid, dict), f"{path}.grid", "expected a table of parameter lists", grid)
        for section, table in (("params", params), ("grid", grid)):
            for k in table:
                if k not in fields:
                    raise _unknown(f"{path}.{section}", k, fields, what=f"parameter of policy {kind!r}")
        for k, v in grid.items():
            _expect(isinstance(v, list) and len(v) > 0, f"{path}.grid.{k}", "expected a non-empty list of values", v)
            _expect(k not in params, f"{path}.grid.{k}", "is also set in params; set it in one place", v)
        label = e.get("name", kind)
        _expect(isinstance(label, str) and bool(label), f"{path}.name", "expected a non-empty string", label)
        policies.append(PolicyGrid(kind=kind, params=dict(params), grid={k: list(v) for k, v in grid.items()}, name=label))
    labels = [p.name for p in policies]
    for i, lab in enumerate(labels):
        if labels.index(lab) != i and any(p.name == lab and p.kind != policies[i].kind for p in policies):
            raise ConfigError(f"policies[{i}].name: {lab!r} already names an entry of another kind; give each entry its own name")

    # history modes
    from h9eval.replay import HISTORY_MODES

    modes = d.get("history_modes", ["view"])
    if isinstance(modes, str):
        modes = [modes]
    modes = _str_list(modes, "history_modes")
    for i, m in enumerate(modes):
        if m not in HISTORY_MODES:
            close = difflib.get_close_matches(m, HISTORY_MODES, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"history_modes[{i}]: unknown history mode {m!r}{hint} available: {', '.join(HISTORY_MODES)}")
    _expect(len(set(modes)) == len(modes), "history_modes", "must not repeat a mode", modes)

    # summarizer
    from h9eval.summarizers.registry import summarizer_names, summarizer_params

    summ = d.get("summarizer", {})
    if isinstance(summ, str):
        summ = {"name": summ}
    _expect(isinstance(summ, dict), "summarizer", "expected a table (name or variants, cache, params)", summ)
    _check_keys(summ, SUMMARIZER_KEYS, "summarizer")
    _expect(not ("name" in summ and "variants" in summ), "summarizer", "give name or variants, not both", summ)
    if "variants" in summ:
        variants = _str_list(summ["variants"], "summarizer.variants")
        vpaths = [f"summarizer.variants[{i}]" for i in range(len(variants))]
    else:
        variants = [summ.get("name", "offline")]
        _expect(isinstance(variants[0], str), "summarizer.name", "expected a summarizer name", variants[0])
        vpaths = ["summarizer.name"]
    names = summarizer_names()
    for vp, v in zip(vpaths, variants):
        if v not in names:
            close = difflib.get_close_matches(v, names, n=3, cutoff=0.6)
            hint = "; did you mean " + " or ".join(repr(c) for c in close) + "?" if close else ""
            raise ConfigError(f"{vp}: unknown summarizer {v!r}{hint} available: {', '.join(names)}")
    _expect(len(set(variants)) == len(variants), "summarizer.variants", "must not repeat a summarizer", variants)
    sparams = summ.get("params", {})
    _expect(isinstance(sparams, dict), "summarizer.params", "expected a table of parameter values", sparams)
    for v in variants:
        known = summarizer_params(v)
        for k in sparams:
            if k not in known:
                raise _unknown("summarizer.params", k, list(known), what=f"parameter of summarizer {v!r}")
    cache = summ.get("cache")
    _expect(cache is None or (isinstance(cache, str) and bool(cache)), "summarizer.cache", "expected a file path", cache)
    cache_path = _resolve_path(cache, base) if cache else None

    # probes
    probes = d.get("probes", {})
    _expect(isinstance(probes, dict), "probes", "expected a table (scorers, every_k)", probes)
    _check_keys(probes, PROBE_KEYS, "probes")
    scorers = _str_list(probes.get("scorers", []), "probes.scorers", allow_empty=True)
    if scorers:
        try:
            from h9eval.probes import make_scorer
        except ImportError:
            raise ConfigError("probes.scorers: h9eval.probes is not available in this installation") from None
        for i, s in enumerate(scorers):
            try:
                make_scorer(s)
            except H9InputError as e:
                raise ConfigError(f"probes.scorers[{i}]: {e}") from None
    every_k = probes.get("every_k")
    _expect(every_k is None or (_is_int(every_k) and every_k > 0), "probes.every_k", "must be a positive integer (calls)", every_k)

    repeats = d.get("repeats", 1)
    _expect(_is_int(repeats) and repeats >= 1, "repeats", "must be an integer >= 1", repeats)
    window = d.get("window")
    _expect(window is None or (_is_int(window) and window > 0), "window", "must be a positive integer (tokens)", window)
    rules = d.get("writeback_rules", "v3")
    _expect(rules in ("v2", "v3"), "writeback_rules", "must be 'v2' or 'v3'", rules)
    skip = d.get("skip_invalid", False)
    _expect(isinstance(skip, bool), "skip_invalid", "must be true or false", skip)
    desc = d.get("description", "")
    _expect(isinstance(desc, str), "description", "expected a string", desc)

    return SweepSpec(
        name=name,
        recorded=recorded,
        synthetic=tuple(synthetic),
        specs=tuple(specs),
        policies=tuple(policies),
        history_modes=tuple(modes),
        summarizers=tuple(variants),
        summarizer_params=dict(sparams),
        summarizer_cache=cache_path,
        scorers=tuple(scorers),
        probe_every_k=every_k,
        repeats=repeats,
        window=window,
        writeback_rules=rules,
        skip_invalid=skip,
        description=desc,
        source=source,
        source_path=source_path,
    )


# -- cells ------------------------------------------------------------------------------------
Cell = dict[str, Any]
"""A cell: a JSON-ready dict with everything a worker needs (no task, no objects), see
:func:`expand_cells`."""


def _fmt_point(point: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={json.dumps(v)}" for k, v in point.items()) + "}"


def _task_ids(spec: SweepSpec) -> list[tuple[str, str, str, str]]:
    """``(key path, task spec, narrow source spec, task id)`` for every task, in spec order.

    Tasks are loaded here once, to learn their ids; workers reload them from the *narrow*
    spec (the one file a task came from, when known) so a folder is not re-read per cell.
    """
    from h9eval.tasks import load_tasks_from_spec

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
            out.append((path, ts, narrow, t.task_id))
        del tasks  # transcripts are not kept in the parent
    return out


def _cache_for_repeat(cache: str, repeat: int) -> str:
    """Repeat 0 uses ``cache``; repeat r > 0 its own file ``<stem>.r<r><suffix>``: a shared
    cache would replay repeat 0's replies, making repeats of an LLM summarizer identical."""
    if repeat == 0:
        return cache
    p = Path(cache)
    return str(p.with_name(f"{p.stem}.r{repeat}{p.suffix}"))


def expand_cells(spec: SweepSpec, *, out_dir: str | os.PathLike[str], skip_invalid: bool | None = None) -> tuple[list[Cell], list[dict[str, Any]]]:
    """The cells of ``spec`` (tasks × policy grid points × summarizer variants × history modes
    × repeats) and the skipped invalid grid cells.

    A grid point the policy rejects raises :class:`ConfigError` naming the entry and the point
    (``policies[0] cell {warn_frac=0.8, soft_frac=0.7}: ...``) unless ``skip_invalid`` (default:
    the spec's ``skip_invalid``), in which case it is listed in the second return value.
    """
    from h9eval.compaction.base import make_policy, params_hash, policy_params
    from h9eval.results import SWEEP_SCHEMA_VERSION, cell_dir_name

    skip = spec.skip_invalid if skip_invalid is None else skip_invalid
    out = Path(out_dir).resolve()
    cache = spec.summarizer_cache or str(out / DEFAULT_CACHE_NAME)
    # (key path, entry, grid point, parameters as given, resolved parameters, params hash)
    points: list[tuple[str, PolicyGrid, dict[str, Any], dict[str, Any], dict[str, Any], str]] = []
    skipped: list[dict[str, Any]] = []
    for i, pg in enumerate(spec.policies):
        for point in pg.points():
            given = {**pg.params, **point}
            try:
                pol = make_policy(pg.kind, **given)
            except H9InputError as e:
                where = f"policies[{i}] cell {_fmt_point(point)}"
                if not skip:
                    raise ConfigError(f"{where}: {e} (set skip_invalid = true to skip invalid cells)") from None
                skipped.append({"where": where, "policy_kind": pg.kind, "policy_name": pg.name, "grid": point, "error": str(e)})
                continue
            resolved = policy_params(pol)
            points.append((f"policies[{i}]", pg, point, given, resolved, params_hash(pg.kind, resolved)))
    tasks = _task_ids(spec)
    cells: list[Cell] = []
    seen: dict[str, str] = {}
    for tpath, ts, narrow, task_id in tasks:
        for ppath, pg, point, given, resolved, phash in points:
            for variant in spec.summarizers:
                for mode in spec.history_modes:
                    for r in range(spec.repeats):
                        run_id = f"{task_id}--{pg.name}-{phash}-{mode}--{variant}--r{r}"
                        here = f"{ppath} cell {_fmt_point(point)} on task {task_id!r} ({tpath})"
                        if run_id in seen:
                            raise ConfigError(f"{here} duplicates {seen[run_id]}; remove one of the two")
                        seen[run_id] = here
                        cell: Cell = {
                            "run_id": run_id,
                            "cell_dir": cell_dir_name(run_id),
                            "sweep": spec.name,
                            "task_id": task_id,
                            "task_spec": ts,
                            "task_source": narrow,
                            "policy_entry": ppath,
                            "policy_name": pg.name,
                            "policy_kind": pg.kind,
                            "spec_params": dict(given),
                            "params": resolved,
                            "grid": point,
                            "params_hash": phash,
                            "history_mode": mode,
                            "writeback_rules": spec.writeback_rules,
                            "window": spec.window,
                            "summarizer": variant,
                            "summarizer_params": dict(spec.summarizer_params),
                            "summarizer_cache": _cache_for_repeat(cache, r),
                            "scorers": list(spec.scorers),
                            "probe_every_k": spec.probe_every_k,
                            "repeat": r,
                        }
                        cell["cell_hash"] = _cell_hash(cell, SWEEP_SCHEMA_VERSION)
                        cells.append(cell)
    if not cells:
        raise ConfigError("the spec gives no valid cells" + (f" ({len(skipped)} skipped as invalid)" if skipped else ""))
    return cells, skipped


def _cell_hash(cell: Mapping[str, Any], schema: int) -> str:
    """What determines a cell's results: a finished cell is reused on resume only if equal.
    The cache location is left out (where replies are stored does not change them)."""
    keys = ("task_id", "task_spec", "task_source", "policy_kind", "params", "history_mode", "writeback_rules",
            "window", "summarizer", "summarizer_params", "scorers", "probe_every_k", "repeat")
    blob = json.dumps({"schema": schema, **{k: cell[k] for k in keys}}, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# -- the worker side --------------------------------------------------------------------------
_TASK_CACHE: OrderedDict[str, list[Any]] = OrderedDict()
_TASK_CACHE_SIZE = 4  # task lists per process: a few, since recorded sessions can be MBs each
_SUMMARIZERS: dict[str, Any] = {}


def _replay_takes_session_id() -> bool:
    import inspect

    from h9eval.replay import replay

    return "session_id" in inspect.signature(replay).parameters


_REPLAY_TAKES_SESSION_ID = _replay_takes_session_id()


def _load_task(cell: Mapping[str, Any]) -> Any:
    from h9eval.tasks import load_tasks_from_spec

    for spec in dict.fromkeys((cell["task_source"], cell["task_spec"])):
        if spec in _TASK_CACHE:
            _TASK_CACHE.move_to_end(spec)
            tasks = _TASK_CACHE[spec]
        else:
            tasks = load_tasks_from_spec(spec)
            _TASK_CACHE[spec] = tasks
            while len(_TASK_CACHE) > _TASK_CACHE_SIZE:
                _TASK_CACHE.popitem(last=False)
        for t in tasks:
            if t.task_id == cell["task_id"]:
                return t
    raise FormatError(f"task {cell['task_id']!r} not found (it was there when the sweep was planned)", path=cell["task_spec"])


def _summarizer(cell: Mapping[str, Any]) -> Any:
    from h9eval.api import build_summarizer

    key = json.dumps([cell["summarizer"], cell["summarizer_params"], cell["summarizer_cache"]], sort_keys=True)
    if key not in _SUMMARIZERS:  # one per process: keeps its SQLite connection open
        _SUMMARIZERS[key] = build_summarizer(cell["summarizer"], cell["summarizer_cache"], **cell["summarizer_params"])
    return _SUMMARIZERS[key]


def _headline(summary: Mapping[str, Any], calls: Any) -> dict[str, Any]:
    tiers = summary.get("compactions_by_tier", {})
    hits = int(calls["summarizer_cache_hits"].sum()) if len(calls) else 0
    row = {k: summary.get(k, 0) for k in (
        "calls", "peak_tokens_sent", "final_tokens_sent", "peak_history_tokens", "offloads_tool_time",
        "offloads_compaction", "summarizer_calls", "summarizer_cost_usd", "fallbacks", "forced_truncations", "overflows",
    )}
    row.update({
        "n_compactions": int(sum(tiers.values())),
        **{f"compactions_{t}": int(tiers.get(t, 0)) for t in ("warn", "soft", "full", "emergency")},
        "summarizer_cache_hits": hits,
    })
    return row


def run_cell(cell: Cell, out_dir: str) -> dict[str, Any]:
    """Run one cell and write it under ``<out_dir>/cells/`` (parts first, run row last).

    Never raises for a failure of the cell itself: the exception's type and message go to the
    run row's ``error`` with status ``failed``. Returns the run row.
    """
    from h9eval.results import SWEEP_SCHEMA_VERSION, write_cell

    out = Path(out_dir)
    t0 = time.perf_counter()
    row: dict[str, Any] = {
        "schema_version": SWEEP_SCHEMA_VERSION,
        "sweep": cell["sweep"],
        "run_id": cell["run_id"],
        "cell_hash": cell["cell_hash"],
        "task_id": cell["task_id"],
        "task_spec": cell["task_spec"],
        "policy_name": cell["policy_name"],
        "policy_kind": cell["policy_kind"],
        "params_json": json.dumps(cell["params"], sort_keys=True),
        "grid_json": json.dumps(cell["grid"], sort_keys=True),
        "params_hash": cell["params_hash"],
        "history_mode": cell["history_mode"],
        "summarizer": cell["summarizer"],
        "repeat": cell["repeat"],
    }
    try:
        from h9eval.api import make_probe_fn
        from h9eval.compaction.base import make_policy
        from h9eval.replay import ReplayConfig, replay

        task = _load_task(cell)
        policy = make_policy(cell["policy_kind"], **cell["spec_params"])
        cfg = ReplayConfig(
            history_mode=cell["history_mode"],
            writeback_rules=cell["writeback_rules"],
            context_window_tokens=cell["window"],
            seed=cell["repeat"],
        )
        extra: dict[str, Any] = {}
        if _REPLAY_TAKES_SESSION_ID:
            # Offload placeholders name the session folder; one session id per task (not per
            # cell) keeps summary requests equal across cells, so the shared cache can hit.
            extra["session_id"] = cell["task_id"]
        res = replay(
            task,
            policy,
            summarizer=_summarizer(cell),
            config=cfg,
            run_id=cell["run_id"],
            probe_fn=make_probe_fn(cell["scorers"], cache=cell["summarizer_cache"]),
            probe_every_k=cell["probe_every_k"],
            session_store=False,
            **extra,
        )
        row.update(_headline(res.summary(), res.calls))
        row.update(status="ok", error="", probe_rows=len(res.probes), wall_time_s=time.perf_counter() - t0)
        parts = {"calls": res.calls, "compactions": res.compactions, "probes": res.probes}
    except Exception as e:  # a cell's crash fails only that cell
        tb = traceback.extract_tb(e.__traceback__)
        at = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
        row.update(status="failed", error=f"{type(e).__name__}: {e}{at}", wall_time_s=time.perf_counter() - t0)
        parts = None
    write_cell(out, cell["run_id"], row, parts)
    return row


# -- the runner -------------------------------------------------------------------------------
@dataclass
class SweepResult:
    """What :func:`sweep` did. ``ok``/``failed``: cells in that state after this call (reused
    ones included); ``ran``: cells run by this call; ``reused``: finished cells kept from an
    earlier call; ``skipped``: invalid grid cells (with ``where`` and ``error``);
    ``failures``: ``(run_id, error)`` of failed cells; ``wall_time_s``: seconds."""

    name: str
    out_dir: Path
    n_cells: int
    ok: int
    failed: int
    ran: int
    reused: int
    skipped: list[dict[str, Any]]
    failures: list[tuple[str, str]]
    wall_time_s: float
    interrupted: bool = False

    def load(self) -> Any:
        """The results as DataFrames (:func:`h9eval.results.load_results`)."""
        from h9eval.results import load_results

        return load_results(self.out_dir)

    def __str__(self) -> str:
        return (
            f"sweep {self.name}: {self.n_cells} cells: {self.ok} ok, {self.failed} failed, "
            f"{len(self.skipped)} skipped (invalid); {self.ran} run now, {self.reused} reused; "
            f"{self.wall_time_s:.1f} s -> {self.out_dir}"
        )


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _prepare_out(out: Path) -> dict[str, Any] | None:
    """Check ``out`` is absent, empty or a sweep folder; returns its manifest when it has one."""
    from h9eval.results import MANIFEST, read_manifest

    if out.exists():
        if not out.is_dir():
            raise FormatError("results path exists and is not a folder", path=str(out))
        if (out / MANIFEST).exists():
            return read_manifest(out)
        if any(out.iterdir()):
            raise FormatError("folder exists, is not empty and has no manifest.json; refusing to write a sweep into it", path=str(out))
    return None


def _default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def sweep(
    spec: SweepSpec | Mapping[str, Any] | str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    resume: bool = True,
    progress: bool = True,
    skip_invalid: bool = False,
) -> SweepResult:
    """Run a sweep (see the module docstring for the spec) and consolidate its results.

    ``out_dir``: default ``results/<name>`` (relative to the current folder). ``workers``:
    processes (default ``min(2, cpu count)``; ``0`` runs the cells in this process, serially:
    for debugging, and the only mode where monkeypatches apply). ``scheduler``: ``None``
    (local process pool), ``"local"`` (a Dask ``LocalCluster`` of ``workers`` processes) or a
    Dask scheduler address ``tcp://host:port`` (its workers must see ``out_dir`` at the same
    path). ``resume``: keep cells that finished ``ok`` with the same cell hash (default); with
    ``False`` every cell is rerun. ``progress``: a tqdm bar (notebook-aware). ``skip_invalid``:
    skip grid cells the policy rejects (also the spec key ``skip_invalid``).

    Raises :class:`ConfigError` for an invalid spec (before anything runs). A cell that raises
    is recorded as failed; a KeyboardInterrupt stops the sweep, keeping finished cells.
    """
    from h9eval.provenance import provenance
    from h9eval.results import SWEEP_SCHEMA_VERSION, consolidate, read_cell_row, write_manifest

    t0 = time.perf_counter()
    sp = load_spec(spec)
    out = Path(out_dir) if out_dir is not None else Path("results") / sp.name
    out = out.resolve()
    old = _prepare_out(out)  # before planning: a foreign folder is refused at once
    cells, skipped = expand_cells(sp, out_dir=out, skip_invalid=skip_invalid or sp.skip_invalid)
    n_workers = _default_workers() if workers is None else workers
    if not _is_int(n_workers) or n_workers < 0:
        raise ConfigError(f"workers must be an integer >= 0, got {n_workers!r}")
    if scheduler is not None and n_workers == 0:
        raise ConfigError("workers=0 (in-process) cannot be combined with a Dask scheduler")

    out.mkdir(parents=True, exist_ok=True)
    from h9eval import __version__

    manifest: dict[str, Any] = {
        "schema_version": SWEEP_SCHEMA_VERSION,
        "kind": "sweep",
        "name": sp.name,
        "h9eval_version": __version__,
        "created": (old or {}).get("created", _now()),
        "provenance": provenance(),
        "spec_path": sp.source_path,
        "spec": sp.source,
        "spec_resolved": {**sp.to_dict(), "summarizer_cache": cells[0]["summarizer_cache"]},
        "cells": cells,
        "skipped": skipped,
        "invocations": [*(old or {}).get("invocations", []), {
            "started": _now(), "workers": n_workers, "scheduler": scheduler, "resume": resume, "argv": list(sys.argv),
        }],
        "status": {"state": "running"},
    }
    write_manifest(out, manifest)

    done: dict[str, dict[str, Any]] = {}
    pending: list[Cell] = []
    for c in cells:
        row = read_cell_row(out, c["run_id"]) if resume else None
        if row is not None and row.get("status") == "ok" and row.get("cell_hash") == c["cell_hash"]:
            done[c["run_id"]] = row
        else:
            pending.append(c)
    reused = len(done)

    bar = None
    if progress and pending:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(cells), initial=reused, desc=f"sweep {sp.name}", unit="cell", dynamic_ncols=True)
    n_ok = reused
    n_failed = 0
    interrupted = False

    def record(row: dict[str, Any]) -> None:
        nonlocal n_ok, n_failed
        done[row["run_id"]] = row
        if row.get("status") == "ok":
            n_ok += 1
        else:
            n_failed += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(ok=n_ok, failed=n_failed, remaining=len(cells) - n_ok - n_failed, refresh=False)

    try:
        if pending:
            if n_workers == 0:
                for c in pending:
                    record(run_cell(c, str(out)))
            elif scheduler is None:
                _run_pool(pending, out, min(n_workers, len(pending)), record)
            else:
                _run_dask(pending, out, scheduler, max(1, n_workers), record)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar is not None:
            bar.close()

    failures = sorted((rid, str(r.get("error", ""))) for rid, r in done.items() if r.get("status") != "ok")
    if not interrupted:
        consolidate(out, manifest)
    manifest["status"] = {
        "state": "interrupted" if interrupted else "finished",
        "ok": n_ok,
        "failed": n_failed,
        "pending": len(cells) - n_ok - n_failed,
        "skipped": len(skipped),
    }
    manifest["invocations"][-1]["finished"] = _now()
    write_manifest(out, manifest)
    result = SweepResult(
        name=sp.name,
        out_dir=out,
        n_cells=len(cells),
        ok=n_ok,
        failed=n_failed,
        ran=len(done) - reused,
        reused=reused,
        skipped=skipped,
        failures=failures,
        wall_time_s=time.perf_counter() - t0,
        interrupted=interrupted,
    )
    if interrupted:
        raise KeyboardInterrupt(str(result))
    return result


def _failed_row(cell: Cell, out: Path, error: str) -> dict[str, Any]:
    """A failed run row written by the parent, when the worker could not write its own."""
    from h9eval.results import SWEEP_SCHEMA_VERSION, write_cell

    row = {
        "schema_version": SWEEP_SCHEMA_VERSION, "sweep": cell["sweep"], "run_id": cell["run_id"],
        "cell_hash": cell["cell_hash"], "task_id": cell["task_id"], "task_spec": cell["task_spec"],
        "policy_name": cell["policy_name"], "policy_kind": cell["policy_kind"],
        "params_json": json.dumps(cell["params"], sort_keys=True), "grid_json": json.dumps(cell["grid"], sort_keys=True),
        "params_hash": cell["params_hash"], "history_mode": cell["history_mode"], "summarizer": cell["summarizer"],
        "repeat": cell["repeat"], "status": "failed", "error": error, "wall_time_s": None,
    }
    write_cell(out, cell["run_id"], row, None)
    return row


# Imported once in the fork server, then inherited by every worker it forks (saves ~1 s of
# imports per worker). pandas/pyarrow start no threads at import, so forking after is safe.
_PRELOAD = [
    "pandas",
    "pyarrow.parquet",
    "h9eval.sweep",
    "h9eval.replay",
    "h9eval.api",
    "h9eval.results",
    "h9eval.harness9_data",
    "h9eval.compaction.policies",
    "h9eval.summarizers.offline",
    "h9eval.summarizers.cache",
]


def _mp_context() -> Any:
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    # Never "fork": the parent may hold threads (tqdm, SQLite, Jupyter) and forked locks.
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return mp.get_context("spawn")


def _run_pool(pending: list[Cell], out: Path, n: int, record: Any) -> None:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ex = ProcessPoolExecutor(max_workers=n, mp_context=_mp_context())
    try:
        futs = {ex.submit(run_cell, c, str(out)): c for c in pending}
        left = set(futs)
        while left:
            finished, left = wait(left, return_when=FIRST_COMPLETED)
            for f in finished:
                c = futs[f]
                try:
                    record(f.result())
                except BrokenProcessPool as e:
                    record(_failed_row(c, out, f"worker process died: {e}"))
                except Exception as e:  # pickling or writing errors outside the cell's own try
                    record(_failed_row(c, out, f"{type(e).__name__}: {e}"))
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)


def _run_dask(pending: list[Cell], out: Path, scheduler: str, n: int, record: Any) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ConfigError("scheduler needs Dask: pip install 'h9eval[dist]'") from None
    cluster = None
    if scheduler == "local":
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    elif scheduler.startswith(("tcp://", "tls://", "ucx://", "inproc://")):
        client = Client(scheduler)
    else:
        raise ConfigError(f"scheduler must be 'local' or a Dask address like tcp://host:8786, got {scheduler!r}")
    try:
        futs = {}
        for c in pending:
            f = client.submit(run_cell, c, str(out), pure=False, key=f"h9eval-cell-{c['cell_dir']}-{c['cell_hash']}")
            futs[f.key] = (f, c)
        for f in as_completed([v[0] for v in futs.values()]):
            c = futs[f.key][1]
            try:
                record(f.result())
            except Exception as e:  # a worker lost: the cell fails, and is rerun on resume
                record(_failed_row(c, out, f"{type(e).__name__}: {e}"))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
