"""The sweep spec: a TOML file or the equivalent dict, parsed and validated into a :class:`SweepSpec`.

::

    name = "small"                      # results go to results/<name>/ by default
    repeats = 1                         # repeat index goes into run ids (matters for LLM summarizers)
    window = 40000                      # the run's context window (tokens), for every policy
    # or: window = { peak_frac = 0.5 }  # every policy's window: half each task's peak (per history mode)
    history_modes = ["view", "write_back"]
    skip_invalid = false                # skip grid cells the policy rejects instead of failing

    [tasks]
    recorded = ["${H9EVAL_SHARED}/data/recorded/swe-agent"]   # files or folders
    synthetic = [{preset = "small", seeds = [0, 1, 2]}]
    specs = ["synthetic:small:5"]       # any task spec load_tasks_from_spec understands
    worlds = [{ kind = "mini_repo", seeds = [0, 1], params = { n_bugs = 2 } }]   # closed loop
    datasets = [{ path = "nebius/SWE-agent-trajectories", split = "train", n = 500, seed = 0,
                  where = { target = true } }]   # trajectory datasets (Hub id or local file)

    agents = ["scripted", "scripted:raw_only"]   # closed-loop agents (default ["scripted"])

    [[policies]]
    kind = "progressive"
    params = {context_window_tokens = 40000}
    grid = {warn_frac = [0.5, 0.6], min_tail_messages = [4, 6]}

    [summarizer]
    name = "offline"                    # or variants = ["offline", "offline_free_text"]
    cache = "summary_cache.sqlite"      # default <out>/summary_cache.sqlite, shared by all cells
    # batch = true                      # Anthropic summarizers: through the Message Batches API (half price)
    # batch_poll_interval_s = 60        # seconds between status checks of a batch in flight
    # batch_deadline_s = 86400          # a batch not ended this long after submission: its summaries fall back

    [probes]
    scorers = ["recall"]
    every_k = 10

Relative paths in a TOML file are relative to the file's folder (in a dict: to the current
directory); ``$VAR``/``${VAR}`` and ``~`` are expanded, and ``${H9EVAL_SHARED}`` defaults to
:func:`h9eval.core.paths.shared_dir`. A ``tasks`` key may also be a plain list of task specs.

``tasks.worlds`` entries run closed-loop episodes: one episode cell per world seed × agent ×
policy grid point × summarizer × history mode × repeat; with ``open_loop = true`` (the
default) each world seed is also exported as a task (its ``keep_all`` transcript, the world's
ground truth as planted facts) and replayed like any other task, so open- and closed-loop
numbers are measured on the same episodes. ``max_steps`` (default 60) bounds each episode.

One function per section parses it; names (policies, their parameters, summarizers, scorers,
presets, history modes) are checked against their registries, so a rule lives with its owner
and the spec only adds the key path to the owner's message.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.closedloop.agents import AGENT_KINDS, agent_spec, make_agent, parse_agent_spec
from h9eval.closedloop.episode import stress_settings
from h9eval.closedloop.worlds import WORLDS, make_world, world_registry
from h9eval.compaction.base import POLICIES
from h9eval.compaction.policies import policy_param_names
from h9eval.core.billing import billing_config_from_dict
from h9eval.core.budget import check_max_cost
from h9eval.core.anthropic import CallLimits
from h9eval.core.errors import ConfigError, FormatError, H9InputError, did_you_mean
from h9eval.core.paths import shared_dir
from h9eval.probes.scorers import make_scorer
from h9eval.compaction.step import HISTORY_MODES
from h9eval.runs.spec import MIN_WINDOW_TOKENS
from h9eval.summarizers.batches import (
    DEFAULT_BATCH_DEADLINE_S,
    DEFAULT_POLL_INTERVAL_S,
    BatchSettings,
    is_batchable,
)
from h9eval.summarizers.registry import DEFAULT_SUMMARIZER, summarizer_params
from h9eval.tasks.datasets.base import DatasetSource
from h9eval.tasks.synthetic import PRESETS

__all__ = [
    "TOP_LEVEL_KEYS",
    "check_call_limits",
    "PolicyGrid",
    "SweepSpec",
    "SyntheticTasks",
    "WorldTasks",
    "load_spec",
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
    "agents",
    "billing",
    "request_timeout_s",
    "max_retries",
    "breaker_failures",
    "max_retry_after_s",
    "base_url",
    "summarizer_model",
    "scorer_model",
    "agent_model",
    "max_cost_usd",
)
TASK_KEYS = ("recorded", "synthetic", "specs", "worlds", "datasets")
DATASET_KEYS = (
    "path",
    "split",
    "n",
    "seed",
    "where",
    "resolved",
    "model",
    "min_turns",
    "min_tokens",
    "adapter",
    "revision",
    "streaming",
)
_HUB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
WORLD_KEYS = ("kind", "seeds", "params", "max_steps", "open_loop", "scale", "window", "stress")
AGENT_KEYS = ("kind", "profile", "params")
SYNTHETIC_KEYS = ("preset", "seeds")
POLICY_KEYS = ("kind", "name", "params", "grid")
SUMMARIZER_KEYS = ("name", "variants", "cache", "params", "batch", "batch_poll_interval_s", "batch_deadline_s")
PROBE_KEYS = ("scorers", "every_k")
WINDOW_KEYS = ("peak_frac",)
WRITEBACK_RULES = ("v2", "v3")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VAR_RE = re.compile(r"\$(\w+)|\$\{(\w+)\}")


@dataclass(frozen=True, kw_only=True)
class SyntheticTasks:
    """``{preset = "small", seeds = [0, 1, 2]}``: one synthetic task per seed."""

    preset: str
    seeds: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class WorldTasks:
    """``{kind = "mini_repo", seeds = [0, 1], params = {...}}``: one world per seed."""

    kind: str
    seeds: tuple[int, ...]
    params: dict[str, Any] = field(default_factory=dict)
    """World parameters (checked by building the world)."""
    max_steps: int = 60
    """Agent steps before an episode is cut off."""
    open_loop: bool = True
    """Also replay each seed's exported ``keep_all`` transcript as an open-loop task."""
    window: int | None = None
    """This world's window for the compacting policies (``scale = "default"``: the family's)."""
    stress: dict[str, Any] = field(default_factory=dict)
    """The episodes' stress settings (:class:`~h9eval.closedloop.episode.StressSettings` fields)."""
    scale: str = ""
    """``default``: the family's default scale (its parameters, window and step budget under
    any given here); ``""``: the parameters as given."""


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
        default). ``repeats``: ≥ 1 (default 1). ``window``: the run's window in tokens, for every
        policy (it replaces a policy's default ``context_window_tokens``; a policy entry that sets
        another is refused); default ``None``: each policy's own, else 200,000. ``window_peak_frac``
    (``window = { peak_frac = f }``): instead, every policy's window is ``f`` times each task's
    own peak in each history mode (:func:`h9eval.runs.run.peak_frac_window`: uncompacted in ``view``,
    written back in ``write_back``), so every task exercises
    the policies; a policy entry may then not set ``context_window_tokens``. ``writeback_rules``:
        ``v3`` (default) or ``v2``. ``call_limits``: the top-level ``request_timeout_s`` and
        ``max_retries`` of every model request a cell makes, and ``breaker_failures``, the consecutive
        failed calls after which a worker's client stops calling, and ``max_retry_after_s``, the longest
        ``retry-after`` a retry waits for (:class:`~h9eval.core.anthropic.CallLimits`;
        not part of a cell's identity: they change when a reply arrives, not what it says).
        ``source``: the spec as passed (for the manifest).
    """

    name: str
    recorded: tuple[str, ...] = ()
    synthetic: tuple[SyntheticTasks, ...] = ()
    specs: tuple[str, ...] = ()
    worlds: tuple[WorldTasks, ...] = ()
    datasets: tuple[DatasetSource, ...] = ()
    """``[tasks] datasets``: trajectory-dataset samples (:mod:`h9eval.tasks.datasets`)."""
    agents: tuple[str, ...] = ("scripted",)
    """Closed-loop agents (``make_agent`` forms); used only with ``worlds``."""
    policies: tuple[PolicyGrid, ...] = ()
    history_modes: tuple[str, ...] = ("view",)
    summarizers: tuple[str, ...] = (DEFAULT_SUMMARIZER,)
    summarizer_params: dict[str, Any] = field(default_factory=dict)
    summarizer_cache: str | None = None
    scorers: tuple[str, ...] = ()
    probe_every_k: int | None = None
    repeats: int = 1
    window: int | None = None
    window_peak_frac: float | None = None
    writeback_rules: str = "v3"
    skip_invalid: bool = False
    description: str = ""
    billing: dict[str, Any] = field(default_factory=dict)
    """The ``[billing]`` table as given (validated): :func:`h9eval.core.billing.billing_config_from_dict`."""
    call_limits: CallLimits = field(default_factory=CallLimits)
    max_cost_usd: float | None = None
    """What one invocation of the sweep may spend on model calls (USD; :mod:`h9eval.core.budget`);
    ``None``: no cap."""
    batch: BatchSettings | None = None
    """``[summarizer] batch = true``: the summaries go through the Message Batches API, batched
    across cells (:mod:`h9eval.summarizers.batches`); ``None`` (default): called one by one."""
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
                "worlds": [
                    {
                        "kind": w.kind,
                        "seeds": list(w.seeds),
                        "params": w.params,
                        "max_steps": w.max_steps,
                        "open_loop": w.open_loop,
                        "window": w.window,
                        "scale": w.scale,
                        "stress": w.stress,
                    }
                    for w in self.worlds
                ],
                "datasets": [s.to_dict() for s in self.datasets],
            },
            "agents": list(self.agents),
            "policies": [{"kind": p.kind, "name": p.name, "params": p.params, "grid": p.grid} for p in self.policies],
            "history_modes": list(self.history_modes),
            "summarizer": {
                "variants": list(self.summarizers),
                "params": self.summarizer_params,
                "cache": self.summarizer_cache,
                **(
                    {
                        "batch": True,
                        "batch_poll_interval_s": self.batch.poll_interval_s,
                        "batch_deadline_s": self.batch.deadline_s,
                    }
                    if self.batch
                    else {}
                ),
            },
            "probes": {"scorers": list(self.scorers), "every_k": self.probe_every_k},
            "repeats": self.repeats,
            "window": self.window if self.window_peak_frac is None else {"peak_frac": self.window_peak_frac},
            "writeback_rules": self.writeback_rules,
            "skip_invalid": self.skip_invalid,
            "billing": self.billing,
            "request_timeout_s": self.call_limits.request_timeout_s,
            "max_retries": self.call_limits.max_retries,
            "breaker_failures": self.call_limits.breaker_failures,
            "max_retry_after_s": self.call_limits.max_retry_after_s,
            "max_cost_usd": self.max_cost_usd,
            **{
                k: getattr(self.call_limits, k) for k in ("base_url", "summarizer_model", "scorer_model", "agent_model")
            },
        }


# -- small checks -----------------------------------------------------------------------------
@contextmanager
def _at(path: str) -> Iterator[None]:
    """Prefix an owner's error (a registry's did-you-mean, a scorer's refusal) with the key path."""
    try:
        yield
    except H9InputError as e:
        raise ConfigError(f"{path}: {e}") from None


def _check_keys(d: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
    for k in d:
        if k not in allowed:
            if not path:
                raise ConfigError(did_you_mean(k, allowed, what="top-level key"))
            raise ConfigError(f"{path}.{k}: " + did_you_mean(k, allowed, what="key"))


def _expect(cond: bool, path: str, rule: str, value: Any) -> None:
    if not cond:
        raise ConfigError(f"{path}: {rule}, got {value!r}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _str_list(v: Any, path: str, *, allow_empty: bool = False) -> list[str]:
    _expect(
        isinstance(v, list | tuple) and (allow_empty or len(v) > 0) and all(isinstance(x, str) for x in v),
        path,
        "expected a non-empty list of strings" if not allow_empty else "expected a list of strings",
        v,
    )
    return list(v)


def _resolve_path(raw: str, base: Path | None) -> str:
    """Expand ``$VAR``/``~`` (``H9EVAL_SHARED`` defaults to the shared folder) and make a
    relative path absolute against ``base`` (the spec file's folder) or the current folder."""

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


# -- entry point ------------------------------------------------------------------------------
def load_spec(spec: SweepSpec | Mapping[str, Any] | str | os.PathLike[str]) -> SweepSpec:
    """Parse and validate a sweep spec: a :class:`SweepSpec` (returned as is), a dict, or a
    path to a TOML file. Errors (:class:`ConfigError`) name the key path, e.g.
    ``policies[1].grid.warn_fracc: unknown parameter of policy 'progressive' 'warn_fracc'; did
    you mean 'warn_frac'?``; a TOML syntax error is a :class:`FormatError` naming the file and
    line. Grid cells are checked later, by :func:`h9eval.sweeps.cells.expand_cells`.
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
            import tomllib  # only when a TOML spec is read

            text = p.read_text(encoding="utf-8")
            d: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise FormatError(f"not valid TOML ({e})", path=str(p)) from None
        except (OSError, UnicodeDecodeError) as e:
            raise FormatError(f"cannot read sweep spec ({e})", path=str(p)) from None
        except RecursionError:  # tomllib parses nested arrays and inline tables recursively
            raise FormatError(
                f"TOML nested too deeply (a sweep spec nests at most {MAX_SPEC_DEPTH} levels)",
                path=str(p),
                where=f"line {_deep_line(text)}",
            ) from None
        base, source_path = p.resolve().parent, str(p.resolve())
        try:
            _check_depth(d)
            return _parse(d, base, source_path)
        except ConfigError as e:  # the key path, after the file it is in
            raise ConfigError(f"{p}: {e}") from None
    if not isinstance(spec, Mapping):
        raise ConfigError(f"sweep spec must be a SweepSpec, a dict or a TOML path, got {type(spec).__name__}")
    _check_depth(spec)
    return _parse(copy.deepcopy(dict(spec)), base, source_path)


MAX_SPEC_DEPTH = 32
"""Levels of tables and lists a sweep spec may nest (the deepest key a spec uses, a world's
parameter inside ``tasks.worlds[i].params``, is at 4); deeper ones are refused by key path
before anything recurses into them (a dict nested thousands deep exhausts Python's stack)."""


def _check_depth(d: Mapping[str, Any]) -> None:
    """:class:`ConfigError` naming the key path (its first parts) of the first value nested more
    than :data:`MAX_SPEC_DEPTH` levels deep (``a.b.c = 1`` with 5,000 parts, ``v = [[[...]]]``).
    Walked with a stack, not recursion."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(d, ())]
    while stack:
        v, path = stack.pop()
        if len(path) > MAX_SPEC_DEPTH:
            shown = "".join(x if x.startswith("[") else f".{x}" for x in path[:8]).lstrip(".")
            raise ConfigError(f"{shown}...: nested more than {MAX_SPEC_DEPTH} levels deep (a sweep spec needs a few)")
        if isinstance(v, Mapping):
            stack.extend((x, (*path, str(k))) for k, x in v.items())
        elif isinstance(v, list | tuple):
            stack.extend((x, (*path, f"[{i}]")) for i, x in enumerate(v))


def _deep_line(text: str) -> int:
    """The line on which the brackets of ``text`` first nest more than :data:`MAX_SPEC_DEPTH`
    deep (brackets inside strings counted too: only for the message after a RecursionError)."""
    depth = 0
    for n, line in enumerate(text.splitlines(), 1):
        for ch in line:
            depth += 1 if ch in "[{" else -1 if ch in "]}" else 0
            if depth > MAX_SPEC_DEPTH:
                return n
    return 1


def _parse(d: dict[str, Any], base: Path | None, source_path: str | None) -> SweepSpec:
    source = copy.deepcopy(d)
    _check_keys(d, TOP_LEVEL_KEYS, "")
    name = _parse_name(d)
    recorded, synthetic, specs, worlds, datasets = _parse_tasks(d, base)
    agents = _parse_agents(d, base)
    policies = _parse_policies(d)
    modes = _parse_history_modes(d)
    variants, sparams, cache_path = _parse_summarizer(d, base)
    batch = _parse_batch(d, variants)
    scorers, every_k = _parse_probes(d)
    repeats = d.get("repeats", 1)
    _expect(_is_int(repeats) and repeats >= 1, "repeats", "must be an integer >= 1", repeats)
    window, peak_frac = _parse_window(d, policies)
    rules = d.get("writeback_rules", "v3")
    _expect(rules in WRITEBACK_RULES, "writeback_rules", "must be 'v2' or 'v3'", rules)
    skip = d.get("skip_invalid", False)
    _expect(isinstance(skip, bool), "skip_invalid", "must be true or false", skip)
    desc = d.get("description", "")
    _expect(isinstance(desc, str), "description", "expected a string", desc)
    billing = d.get("billing", {})
    _expect(isinstance(billing, dict), "billing", "expected a table (model, placement, timing, models...)", billing)
    billing_config_from_dict(billing)
    with _at("request limits"):
        limits = CallLimits(**{f.name: d.get(f.name) for f in dataclasses.fields(CallLimits)})
    check_call_limits(limits, sparams)
    max_cost = check_max_cost(d.get("max_cost_usd"))
    return SweepSpec(
        name=name,
        recorded=recorded,
        synthetic=synthetic,
        datasets=datasets,
        specs=specs,
        worlds=worlds,
        agents=agents,
        policies=policies,
        history_modes=modes,
        summarizers=variants,
        summarizer_params=sparams,
        summarizer_cache=cache_path,
        scorers=scorers,
        probe_every_k=every_k,
        repeats=repeats,
        window=window,
        window_peak_frac=peak_frac,
        writeback_rules=rules,
        skip_invalid=skip,
        description=desc,
        billing=copy.deepcopy(billing),
        call_limits=limits,
        max_cost_usd=max_cost,
        batch=batch,
        source=source,
        source_path=source_path,
    )


def check_call_limits(limits: CallLimits, summarizer_params: Mapping[str, Any]) -> None:
    """:class:`ConfigError` when the limits' summarizer model or endpoint disagrees with
    ``summarizer.params`` (checked before anything runs, not in the first cell)."""
    limits.apply(dict(summarizer_params), who="summarizer.params", part="summarizer")


# -- one function per section -----------------------------------------------------------------
def _parse_name(d: Mapping[str, Any]) -> str:
    _expect("name" in d, "name", "required (names the results folder)", None)
    name = d["name"]
    _expect(
        isinstance(name, str) and bool(_NAME_RE.fullmatch(name)),
        "name",
        "must start with a letter or digit and contain only letters, digits, '.', '_' or '-'",
        name,
    )
    return str(name)


def _parse_tasks(
    d: Mapping[str, Any], base: Path | None
) -> tuple[
    tuple[str, ...], tuple[SyntheticTasks, ...], tuple[str, ...], tuple[WorldTasks, ...], tuple[DatasetSource, ...]
]:
    """``[tasks]`` (or a plain list of task specs) → (recorded, synthetic, specs, worlds, datasets)."""
    _expect("tasks" in d, "tasks", "required: a [tasks] table or a list of task specs", None)
    tasks = d["tasks"]
    if isinstance(tasks, list):
        tasks = {"specs": tasks}
    _expect(
        isinstance(tasks, dict), "tasks", "expected a table (recorded/synthetic/specs) or a list of task specs", tasks
    )
    _check_keys(tasks, TASK_KEYS, "tasks")
    recorded = tuple(
        _resolve_path(s, base) for s in _str_list(tasks.get("recorded", []), "tasks.recorded", allow_empty=True)
    )
    for i, s in enumerate(recorded):
        _expect(Path(s.partition("#")[0]).exists(), f"tasks.recorded[{i}]", "no such file or folder", s)
    specs = []
    for i, s in enumerate(_str_list(tasks.get("specs", []), "tasks.specs", allow_empty=True)):
        specs.append(s if s.startswith("synthetic:") else _resolve_path(s, base))
        if not s.startswith("synthetic:"):
            _expect(
                Path(specs[-1].partition("#")[0]).exists(), f"tasks.specs[{i}]", "no such file or folder", specs[-1]
            )
    synthetic = _parse_synthetic(tasks.get("synthetic", []))
    worlds = _parse_worlds(tasks.get("worlds", []))
    datasets = _parse_datasets(tasks.get("datasets", []), base)
    _expect(
        bool(recorded or specs or synthetic or worlds or datasets),
        "tasks",
        "no tasks given (recorded, synthetic, specs, worlds or datasets)",
        tasks,
    )
    return recorded, synthetic, tuple(specs), worlds, datasets


def _parse_datasets(raw: Any, base: Path | None) -> tuple[DatasetSource, ...]:
    """``tasks.datasets``: one ``{path, split, n, seed, where, ...}`` table or a list of them; a
    ``path`` is a local file or folder (relative to the spec) or else a Hub id ``owner/name``."""
    if isinstance(raw, dict):
        raw = [raw]
    _expect(isinstance(raw, list), "tasks.datasets", "expected a list of {path, split, n, seed, where} tables", raw)
    out = []
    for i, e in enumerate(raw):
        path = f"tasks.datasets[{i}]"
        _expect(isinstance(e, dict), path, "expected a table {path = ..., split = ..., n = ..., seed = ...}", e)
        _check_keys(e, DATASET_KEYS, path)
        _expect(
            isinstance(e.get("path"), str) and bool(e.get("path")),
            f"{path}.path",
            "required: a Hub id (owner/name) or a local file or folder",
            e.get("path"),
        )
        local = _resolve_path(e["path"], base)
        if Path(local).exists():
            where_from = local
        else:
            _expect(
                bool(_HUB_ID_RE.fullmatch(e["path"])),
                f"{path}.path",
                "no such file or folder, and not a Hub id (owner/name)",
                e["path"],
            )
            where_from = e["path"]
        for key in ("where",):
            _expect(isinstance(e.get(key, {}), dict), f"{path}.{key}", "expected a table of column = value", e.get(key))
        for key in ("resolved", "streaming"):
            _expect(
                e.get(key) is None or isinstance(e.get(key), bool), f"{path}.{key}", "must be true or false", e.get(key)
            )
        with _at(path):
            out.append(DatasetSource(path=where_from, **{k: v for k, v in e.items() if k != "path"}))
    return tuple(out)


def _parse_worlds(raw: Any) -> tuple[WorldTasks, ...]:
    """``tasks.worlds``: one ``{kind, seeds, params, max_steps, open_loop}`` table or a list of
    them; the kind and parameters are checked by building the world."""
    if isinstance(raw, dict):
        raw = [raw]
    _expect(isinstance(raw, list), "tasks.worlds", "expected a list of {kind, seeds, params} tables", raw)
    out = []
    for i, e in enumerate(raw):
        path = f"tasks.worlds[{i}]"
        _expect(isinstance(e, dict), path, "expected a table {kind = ..., seeds = [...], params = {...}}", e)
        _check_keys(e, WORLD_KEYS, path)
        _expect("kind" in e, f"{path}.kind", "required (one of " + ", ".join(world_registry()) + ")", None)
        kind = e["kind"]
        _expect(isinstance(kind, str), f"{path}.kind", "expected a world name", kind)
        params = e.get("params", {})
        _expect(isinstance(params, dict), f"{path}.params", "expected a table of world parameters", params)
        with _at(f"{path}.kind"):
            cls = WORLDS.get(kind)
        scale = e.get("scale", "")
        _expect(scale in ("", "default"), f"{path}.scale", 'expected "default" (the family\'s default scale)', scale)
        base = cls.scale if scale == "default" else None
        if base is not None:
            params = {**base.params, **params}
        with _at(f"{path}.params"):
            make_world(kind, **params)
        seeds = e.get("seeds", [0])
        if _is_int(seeds):
            seeds = [seeds]
        _expect(
            isinstance(seeds, list) and len(seeds) > 0 and all(_is_int(s) and s >= 0 for s in seeds),
            f"{path}.seeds",
            "expected a non-empty list of non-negative integers",
            seeds,
        )
        _expect(len(set(seeds)) == len(seeds), f"{path}.seeds", "must not repeat a seed", seeds)
        max_steps = e.get("max_steps", base.max_steps if base is not None else 60)
        _expect(
            _is_int(max_steps) and max_steps >= 1,
            f"{path}.max_steps",
            "must be an integer >= 1 (agent steps)",
            max_steps,
        )
        window = e.get("window", base.window_tokens if base is not None else None)
        _expect(
            window is None or (_is_int(window) and window > 0),
            f"{path}.window",
            "must be a positive integer (tokens)",
            window,
        )
        open_loop = e.get("open_loop", True)
        _expect(isinstance(open_loop, bool), f"{path}.open_loop", "must be true or false", open_loop)
        stress = e.get("stress", {})
        _expect(isinstance(stress, dict), f"{path}.stress", "expected a table of stress settings", stress)
        with _at(f"{path}.stress"):
            stress_settings(stress)
        out.append(
            WorldTasks(
                kind=kind,
                seeds=tuple(seeds),
                params=dict(params),
                max_steps=max_steps,
                open_loop=open_loop,
                window=window,
                scale=scale,
                stress=dict(stress),
            )
        )
    return tuple(out)


def _parse_agents(d: Mapping[str, Any], base: Path | None = None) -> tuple[str, ...]:
    """``agents``: closed-loop agents, each in ``make_agent``'s ``KIND[:PROFILE][,KEY=VALUE...]``
    form (``"anthropic:cassette=runs/c.jsonl"``) or a table ``{kind, profile, params}``; stored
    in the string form, a relative ``cassette`` resolved against the spec's folder. Every agent
    is built here to check it (a live agent makes no call until its first step)."""
    agents = d.get("agents", ["scripted"])
    if isinstance(agents, (str, dict)):
        agents = [agents]
    _expect(
        isinstance(agents, list) and len(agents) > 0,
        "agents",
        "expected a list of agents (strings or {kind, profile, params} tables)",
        agents,
    )
    out = []
    for i, a in enumerate(agents):
        path = f"agents[{i}]"
        if isinstance(a, dict):
            _check_keys(a, AGENT_KEYS, path)
            _expect(
                isinstance(a.get("kind"), str),
                f"{path}.kind",
                "required: an agent kind (" + ", ".join(AGENT_KINDS) + ")",
                a.get("kind"),
            )
            params = a.get("params", {})
            _expect(isinstance(params, dict), f"{path}.params", "expected a table of agent parameters", params)
            profile = a.get("profile", "")
            _expect(isinstance(profile, str), f"{path}.profile", "expected a reader profile name", profile)
            kind = a["kind"]
        else:
            _expect(isinstance(a, str), path, "expected an agent (a string or a {kind, profile, params} table)", a)
            with _at(path):
                kind, profile, params = parse_agent_spec(a)
        if kind not in AGENT_KINDS:
            raise ConfigError(f"{path}: " + did_you_mean(kind, AGENT_KINDS, what="agent"))
        if isinstance(params.get("cassette"), str) and base is not None and not Path(params["cassette"]).is_absolute():
            params = {**params, "cassette": str((base / params["cassette"]).resolve())}
        with _at(path):
            spec_text = agent_spec(kind, profile, params)
            make_agent(spec_text)
        out.append(spec_text)
    _expect(len(set(out)) == len(out), "agents", "must not repeat an agent", out)
    return tuple(out)


def _parse_synthetic(raw: Any) -> tuple[SyntheticTasks, ...]:
    """``tasks.synthetic``: one ``{preset, seeds}`` table or a list of them."""
    if isinstance(raw, dict):
        raw = [raw]
    _expect(isinstance(raw, list), "tasks.synthetic", "expected a list of {preset, seeds} tables", raw)
    out = []
    for i, e in enumerate(raw):
        path = f"tasks.synthetic[{i}]"
        _expect(isinstance(e, dict), path, "expected a table {preset = ..., seeds = [...]}", e)
        _check_keys(e, SYNTHETIC_KEYS, path)
        preset = e.get("preset", "small")
        _expect(isinstance(preset, str), f"{path}.preset", "expected a preset name", preset)
        if preset not in PRESETS:
            raise ConfigError(f"{path}.preset: " + did_you_mean(preset, PRESETS, what="preset"))
        seeds = e.get("seeds", [0])
        if _is_int(seeds):
            seeds = [seeds]
        _expect(
            isinstance(seeds, list) and len(seeds) > 0 and all(_is_int(s) and s >= 0 for s in seeds),
            f"{path}.seeds",
            "expected a non-empty list of non-negative integers",
            seeds,
        )
        _expect(len(set(seeds)) == len(seeds), f"{path}.seeds", "must not repeat a seed", seeds)
        out.append(SyntheticTasks(preset=preset, seeds=tuple(seeds)))
    return tuple(out)


def _parse_policies(d: Mapping[str, Any]) -> tuple[PolicyGrid, ...]:
    """``[[policies]]``: kind and parameter names checked against the policy registry (the
    values are checked per grid cell, by building the policy, in ``expand_cells``)."""
    raw: Any = d.get("policies")
    _expect(
        isinstance(raw, list) and len(raw) > 0, "policies", "required: a non-empty list of [[policies]] tables", raw
    )
    policies = [_parse_policy(e, f"policies[{i}]") for i, e in enumerate(raw)]
    labels = [p.name for p in policies]
    for i, lab in enumerate(labels):
        if labels.index(lab) != i and any(p.name == lab and p.kind != policies[i].kind for p in policies):
            raise ConfigError(
                f"policies[{i}].name: {lab!r} already names an entry of another kind; give each entry its own name"
            )
    return tuple(policies)


def _parse_policy(e: Any, path: str) -> PolicyGrid:
    _expect(isinstance(e, dict), path, "expected a table with kind, params, grid", e)
    _check_keys(e, POLICY_KEYS, path)
    _expect("kind" in e, f"{path}.kind", "required", None)
    kind = e["kind"]
    _expect(isinstance(kind, str), f"{path}.kind", "expected a policy name", kind)
    with _at(f"{path}.kind"):
        names = policy_param_names(kind)
    params = e.get("params", {})
    grid = e.get("grid", {})
    _expect(isinstance(params, dict), f"{path}.params", "expected a table of parameter values", params)
    _expect(isinstance(grid, dict), f"{path}.grid", "expected a table of parameter lists", grid)
    for section, table in (("params", params), ("grid", grid)):
        for k in table:
            with _at(f"{path}.{section}.{k}"):
                POLICIES.check_params(kind, [k], names)
    for k, v in grid.items():
        _expect(isinstance(v, list) and len(v) > 0, f"{path}.grid.{k}", "expected a non-empty list of values", v)
        _expect(k not in params, f"{path}.grid.{k}", "is also set in params; set it in one place", v)
    label = e.get("name", kind)
    _expect(isinstance(label, str) and bool(label), f"{path}.name", "expected a non-empty string", label)
    return PolicyGrid(kind=kind, params=dict(params), grid={k: list(v) for k, v in grid.items()}, name=label)


def _parse_window(d: Mapping[str, Any], policies: Sequence[PolicyGrid]) -> tuple[int | None, float | None]:
    """``window = 40000`` (tokens) or ``window = { peak_frac = 0.5 }`` → (window, peak_frac)."""
    window = d.get("window")
    if isinstance(window, dict):
        _check_keys(window, WINDOW_KEYS, "window")
        frac = window.get("peak_frac")
        _expect(
            isinstance(frac, int | float) and not isinstance(frac, bool) and 0 < frac <= 1,
            "window.peak_frac",
            "must be a number in (0, 1] (a fraction of each task's uncompacted peak)",
            frac,
        )
        for i, p in enumerate(policies):
            for section, table in (("params", p.params), ("grid", p.grid)):
                _expect(
                    "context_window_tokens" not in table,
                    f"policies[{i}].{section}.context_window_tokens",
                    "conflicts with window.peak_frac, which sizes every policy's window per task; drop one",
                    table.get("context_window_tokens"),
                )
        return None, float(frac)  # type: ignore[arg-type]  # checked a number above
    _expect(
        window is None or (_is_int(window) and window >= MIN_WINDOW_TOKENS),
        "window",
        f"must be an integer >= {MIN_WINDOW_TOKENS:,} (tokens) or {{ peak_frac = f }}",
        window,
    )
    return window, None


def _parse_history_modes(d: Mapping[str, Any]) -> tuple[str, ...]:
    modes = d.get("history_modes", ["view"])
    # A bare string is refused, not wrapped: "view" is the list ["view"] only by a guess.
    _expect(
        isinstance(modes, list), "history_modes", 'expected a list of history modes, e.g. ["view", "write_back"]', modes
    )
    modes = _str_list(modes, "history_modes")
    for i, m in enumerate(modes):
        if m not in HISTORY_MODES:
            # a looser cutoff: the modes are short words ('vue' -> 'view')
            raise ConfigError(f"history_modes[{i}]: " + did_you_mean(m, HISTORY_MODES, what="history mode", cutoff=0.5))
    _expect(len(set(modes)) == len(modes), "history_modes", "must not repeat a mode", modes)
    return tuple(modes)


def _parse_summarizer(d: Mapping[str, Any], base: Path | None) -> tuple[tuple[str, ...], dict[str, Any], str | None]:
    """``[summarizer]`` (or a bare name) → (variants, params, cache path); names and parameter
    names are checked against the summarizer registry."""
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
        variants = [summ.get("name", DEFAULT_SUMMARIZER)]
        _expect(isinstance(variants[0], str), "summarizer.name", "expected a summarizer name", variants[0])
        vpaths = ["summarizer.name"]
    known: dict[str, dict[str, Any]] = {}
    for vp, v in zip(vpaths, variants):
        with _at(vp):
            known[v] = summarizer_params(v)
    _expect(len(set(variants)) == len(variants), "summarizer.variants", "must not repeat a summarizer", variants)
    sparams = summ.get("params", {})
    _expect(isinstance(sparams, dict), "summarizer.params", "expected a table of parameter values", sparams)
    for v in variants:
        for k in sparams:
            if k not in known[v]:
                raise ConfigError(
                    f"summarizer.params.{k}: " + did_you_mean(k, known[v], what=f"parameter of summarizer {v!r}")
                )
    cache = summ.get("cache")
    _expect(
        cache is None or (isinstance(cache, str) and bool(cache)), "summarizer.cache", "expected a file path", cache
    )
    return tuple(variants), dict(sparams), _resolve_path(cache, base) if cache else None


def _parse_batch(d: Mapping[str, Any], variants: Sequence[str]) -> BatchSettings | None:
    """``[summarizer] batch`` / ``batch_poll_interval_s`` / ``batch_deadline_s`` → the batch
    settings, or ``None``."""
    summ = d.get("summarizer", {})
    if not isinstance(summ, dict):
        return None
    on = summ.get("batch", False)
    _expect(isinstance(on, bool), "summarizer.batch", "must be true or false", on)
    for key in ("batch_poll_interval_s", "batch_deadline_s"):
        if key in summ and not on:
            raise ConfigError(f"summarizer.{key}: goes with batch = true")
    if not on:
        return None
    _expect(
        any(is_batchable(v) for v in variants),
        "summarizer.batch",
        "needs an Anthropic summarizer variant (the Message Batches API)",
        list(variants),
    )
    try:
        return BatchSettings(
            poll_interval_s=summ.get("batch_poll_interval_s", DEFAULT_POLL_INTERVAL_S),
            deadline_s=summ.get("batch_deadline_s", DEFAULT_BATCH_DEADLINE_S),
        )
    except ConfigError as e:
        raise ConfigError(f"summarizer.{e}") from None


def _parse_probes(d: Mapping[str, Any]) -> tuple[tuple[str, ...], int | None]:
    """``[probes]`` → (scorer names, every_k); each scorer is built once to check it."""
    probes = d.get("probes", {})
    _expect(isinstance(probes, dict), "probes", "expected a table (scorers, every_k)", probes)
    _check_keys(probes, PROBE_KEYS, "probes")
    scorers = _str_list(probes.get("scorers", []), "probes.scorers", allow_empty=True)
    for i, s in enumerate(scorers):
        with _at(f"probes.scorers[{i}]"):
            make_scorer(s)
    every_k = probes.get("every_k")
    _expect(
        every_k is None or (_is_int(every_k) and every_k > 0),
        "probes.every_k",
        "must be a positive integer (calls)",
        every_k,
    )
    return tuple(scorers), every_k
