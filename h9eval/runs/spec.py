"""A run as a noun: one :class:`RunSpec` describes one run, and :func:`~h9eval.runs.execute.execute` runs it.

A spec holds names and values only (a task or world reference, a policy kind with its parameters as
given, the window, the history mode, the summarizer's name, the probes, billing, the agent and the
episode's bounds, the repeat), so it round-trips through JSON (:meth:`RunSpec.to_dict` /
:meth:`RunSpec.from_dict`), goes into a sweep's manifest as each cell's description, and is what every
entry point builds: ``h9eval run --task``/``--world``, :func:`~h9eval.runs.run.run_task`,
:func:`~h9eval.runs.run.run_world`, a sweep cell, the tuner, the sweep estimate, the bill check, the
Inspect bridge and the demo.

The window has one field and one rule (:meth:`RunSpec.policy_at_window`): ``window`` is an int (tokens),
a :class:`PeakFrac` (a fraction of the task's own peak) or ``None`` (the policy's own, else 200,000). The
run's window replaces a policy's default ``context_window_tokens``; a policy whose parameters *as given*
set another value is refused, naming both (the one "explicit" convention: the key is in the params).

:meth:`RunSpec.identity` is the one rule for run ids and cell hashes. The run id is
``<task>--<policy name>-<params hash>-<history mode>--<summarizer>[--<agent>]--r<repeat>``; the cell
hash covers everything that decides the run's results (the same blob sweeps hashed before run specs
existed, so a results folder written then resumes with its cells reused when the code is unchanged).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from h9eval.compaction.base import Policy, params_hash, policy_params
from h9eval.compaction.policies import make_policy
from h9eval.compaction.step import HISTORY_MODES, WRITEBACK_RULES, run_window
from h9eval.core.errors import ConfigError
from h9eval.probes.drift import DEFAULT_MAX_PROBES
from h9eval.summarizers.registry import DEFAULT_SUMMARIZER, NO_SUMMARIZER
from h9eval.tasks.model import Task

__all__ = [
    "IDENTITY_VERSION",
    "LOOPS",
    "MIN_WINDOW_TOKENS",
    "PeakFrac",
    "PolicyRef",
    "ProbeSpec",
    "RunIdentity",
    "RunSpec",
    "SummarizerRef",
    "TaskRef",
    "WorldRef",
    "world_task_id",
]

IDENTITY_VERSION = 1
"""The ``schema`` key of the cell-hash blob. It was the manifest's schema version when sweeps hashed
their cells themselves (version 1); it stays 1 so that a folder written then keeps its cell hashes.
Bump it only to make every finished cell of every folder run again."""

LOOPS = ("replay", "episode")
"""``replay``: open loop, a recorded or generated task replayed call by call; ``episode``: closed loop,
an agent acting on a world through the compacted view."""

MIN_WINDOW_TOKENS = 1_000
"""The smallest run window accepted (``run --window``, a sweep's ``window``), in tokens. Below it one
ordinary tool result is over the window, so every call ends in forced truncation and the run measures
nothing else; ``window = 1`` is a typo, not a study. A policy's own ``context_window_tokens`` is not
bounded here (unit tests use tiny ones)."""

_DEFAULT_MAX_STEPS = 60


def world_task_id(kind: str, params: Mapping[str, Any], seed: int) -> str:
    """``world-<kind>-<seed>``, with a hash of the parameters when any are set
    (``world-<kind>-<hash8>-<seed>``): the task-level key that pairs open- and closed-loop rows.

    Args:
        kind: the world family.
        params: the world's parameters (resolved: a scale's merged in).
        seed: the world seed.

    Returns:
        The task id every row of that world carries.
    """
    if not params:
        return f"world-{kind}-{seed}"
    h = hashlib.sha256(json.dumps(dict(params), sort_keys=True).encode()).hexdigest()[:8]
    return f"world-{kind}-{h}-{seed}"


def _frozen_copy(d: Mapping[str, Any] | None) -> dict[str, Any]:
    """A JSON-equal copy of ``d`` (lists for tuples), so a spec built in code equals its JSON round trip."""
    return json.loads(json.dumps(dict(d or {}), default=list))


# -- references ---------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class TaskRef:
    """An open-loop task by reference: the spec that loads it and its id among what that spec loads."""

    source: str
    """The narrowest spec that loads the task (its one file when known, ``synthetic:P:S``,
    ``dataset:FILE:SPLIT#ROW``, ``DB#session``): what :func:`~h9eval.runs.execute.execute` loads."""
    task_id: str
    """The task's id (a spec that loads several tasks, a folder, holds it once)."""
    listed_as: str = ""
    """The spec the task was listed under (a folder, a dataset id); ``""``: ``source``."""
    key: str = ""
    """The task's key in run ids when two listed tasks share an id (``<id>~2``); ``""``: ``task_id``."""

    @property
    def listed(self) -> str:
        return self.listed_as or self.source

    @property
    def run_key(self) -> str:
        return self.key or self.task_id

    @classmethod
    def of(cls, task: Task, *, listed_as: str = "", key: str = "") -> TaskRef:
        """The reference of a loaded task: its narrowest spec (its one file, ``DB#session``; else the
        spec it was listed under) and its id.

        Args:
            task: the task.
            listed_as: the spec it was listed under (default: the one its source gives).
            key: its run-id key when another listed task has its id.

        Returns:
            The reference.
        """
        src = task.source
        if src.kind == "recorded" and src.path and Path(src.path).is_file():
            narrow = str(Path(src.path).resolve())
        elif src.kind == "harness9_db" and src.path and src.session:
            narrow = f"{Path(src.path).resolve()}#{src.session}"
        else:
            narrow = listed_as or src.spec()
        listed = listed_as or narrow
        return cls(source=narrow, task_id=task.task_id, listed_as="" if listed == narrow else listed, key=key)

    def to_dict(self) -> dict[str, Any]:
        return {"ref": "task", **dataclasses.asdict(self)}


@dataclass(frozen=True, kw_only=True)
class WorldRef:
    """A closed-loop world by reference: its family, parameters (resolved: a scale's merged in) and seed."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    window: int | None = None
    """The world's own window for the policies that leave theirs unset (a family's default scale
    gives one); ``None``: the run's."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _frozen_copy(self.params))

    @property
    def task_id(self) -> str:
        return world_task_id(self.kind, self.params, self.seed)

    @property
    def run_key(self) -> str:
        return self.task_id

    @property
    def source(self) -> str:
        """``world:KIND:SEED``: how the world (and its exported task) is listed."""
        return f"world:{self.kind}:{self.seed}"

    listed = source

    def to_dict(self) -> dict[str, Any]:
        return {"ref": "world", **dataclasses.asdict(self)}


@dataclass(frozen=True, kw_only=True)
class PolicyRef:
    """A policy by kind and parameters *as given* (defaults are resolved when the run starts)."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    """The label results carry (a sweep's ``[[policies]]`` name); ``""``: the kind."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _frozen_copy(self.params))
        if self.name == self.kind:  # the default label spelled out: one spec, however it was named
            object.__setattr__(self, "name", "")

    @property
    def label(self) -> str:
        return self.name or self.kind

    @classmethod
    def of(cls, policy: Policy, *, name: str = "") -> PolicyRef:
        """The reference of a built policy: its kind and the parameters that differ from its class's
        defaults (what a caller would have given by name), so the window rule treats an object and
        its parameters alike.

        Args:
            policy: a policy object of a registered kind.
            name: the label results carry (default: the kind).

        Returns:
            The reference; :meth:`build` gives an equal policy.
        """
        given = policy_params(policy)
        defaults = policy_params(type(policy)())
        return cls(kind=policy.kind, params={k: v for k, v in given.items() if defaults.get(k) != v}, name=name)

    def build(self) -> Policy:
        """The policy at its parameters as given (:func:`~h9eval.compaction.policies.make_policy`)."""
        return make_policy(self.kind, **self.params)

    @property
    def sets_window(self) -> bool:
        """Whether the parameters as given set the policy's window (the one "explicit" convention)."""
        return "context_window_tokens" in self.params

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class PeakFrac:
    """A window sized to each task: ``frac`` times its peak (uncompacted in view mode, written back in
    write-back mode: :func:`~h9eval.runs.run.peak_frac_window`)."""

    frac: float
    tokens: int | None = None
    """This task's window once sized (a sweep sizes it when it plans the cell; ``None``: when the
    run starts)."""

    def __post_init__(self) -> None:
        f = self.frac
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 < f <= 1:
            raise ConfigError(f"window peak_frac must be a number in (0, 1], got {f!r}")
        object.__setattr__(self, "frac", float(f))

    def to_dict(self) -> dict[str, Any]:
        return {"peak_frac": self.frac, "tokens": self.tokens}


@dataclass(frozen=True, kw_only=True)
class SummarizerRef:
    """A summarizer by registered name (``none``: no summarizer, every summary falls back) and parameters."""

    name: str = DEFAULT_SUMMARIZER
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _frozen_copy(self.params))

    @property
    def is_none(self) -> bool:
        return self.name == NO_SUMMARIZER

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class ProbeSpec:
    """The probes a replay scores: scorer names, every how many calls, and the most one task may score."""

    scorers: tuple[str, ...] = ()
    every_k: int | None = None
    """Probe every k-th call (and always the last): the same calls for every policy."""
    max_probes: int = DEFAULT_MAX_PROBES
    """A grid scoring more probes (probe x checkpoint) per task is refused before the run starts."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "scorers", tuple(self.scorers))

    def to_dict(self) -> dict[str, Any]:
        return {"scorers": list(self.scorers), "every_k": self.every_k, "max_probes": self.max_probes}


@dataclass(frozen=True, kw_only=True)
class RunIdentity:
    """What names a run: its run id, its policy's resolved parameters and their hash."""

    run_id: str
    params: dict[str, Any]
    """Every parameter of the policy at the run's window, defaults resolved (a per-task window
    left out: it is not part of the policy's identity across tasks)."""
    params_hash: str


# -- the spec -----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """One run, open or closed loop, in names and values (see the module docstring)."""

    task: TaskRef | WorldRef
    """What is run: a task (open loop), or a world (closed loop, or its exported ``keep_all``
    transcript replayed open loop)."""
    policy: PolicyRef
    loop: str = "replay"
    """:data:`LOOPS`: ``replay`` (a task, or a world's exported transcript) or ``episode``."""
    window: int | PeakFrac | None = None
    """The run's window: tokens, a :class:`PeakFrac`, or ``None`` (the policy's own, else 200,000)."""
    history_mode: str = "view"
    writeback_rules: str = "v3"
    summarizer: SummarizerRef = field(default_factory=SummarizerRef)
    probes: ProbeSpec = field(default_factory=ProbeSpec)
    ledger: bool = True
    """Compute the loss ledger and the compaction diffs (tables the report and ledger pages draw);
    not part of the identity: it adds tables without changing any other."""
    billing: dict[str, Any] = field(default_factory=dict)
    """How the calls are billed (:func:`~h9eval.core.billing.billing_config_from_dict`)."""
    agent: str = ""
    """An episode's agent (:func:`~h9eval.closedloop.agents.make_agent` form, e.g. ``scripted``)."""
    max_steps: int = _DEFAULT_MAX_STEPS
    """An episode's step bound (for an exported world, its ``keep_all`` episode's)."""
    stress: dict[str, Any] = field(default_factory=dict)
    """An episode's :class:`~h9eval.closedloop.episode.StressSettings` fields (empty: none)."""
    oracle: bool | None = None
    """Run the ``keep_all`` oracle of an episode for its excess steps (``None``: for scripted agents
    only: a live agent's oracle is a second paid episode)."""
    repeat: int = 0
    """The repeat index (a repeat > 0 has its own response cache, so a model summarizer answers anew)."""
    manual_compact_at: tuple[int, ...] = ()
    """Call indices (0-based) at which a manual ``/compact`` runs (replays)."""
    endpoint: dict[str, str] = field(default_factory=dict)
    """The ``base_url`` and models set for model calls (another endpoint gives other replies)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "billing", _frozen_copy(self.billing))
        object.__setattr__(self, "stress", _frozen_copy(self.stress))
        object.__setattr__(self, "endpoint", {str(k): str(v) for k, v in (self.endpoint or {}).items()})
        object.__setattr__(self, "manual_compact_at", tuple(self.manual_compact_at))
        if self.loop not in LOOPS:
            raise ConfigError(f"RunSpec.loop must be one of {', '.join(LOOPS)}, got {self.loop!r}")
        if self.loop == "episode" and not isinstance(self.task, WorldRef):
            raise ConfigError("RunSpec: an episode runs a world (task=WorldRef(...)), not a task")
        if self.loop == "episode" and not self.agent:
            raise ConfigError("RunSpec: an episode needs an agent (e.g. agent='scripted')")
        if self.history_mode not in HISTORY_MODES:
            raise ConfigError(f"history_mode must be one of {', '.join(HISTORY_MODES)}, got {self.history_mode!r}")
        if self.writeback_rules not in WRITEBACK_RULES:
            raise ConfigError(
                f"writeback_rules must be one of {', '.join(WRITEBACK_RULES)}, got {self.writeback_rules!r}"
            )
        w = self.window
        if w is not None and not isinstance(w, PeakFrac):
            if isinstance(w, bool) or not isinstance(w, int) or w < MIN_WINDOW_TOKENS:
                raise ConfigError(f"window must be an integer >= {MIN_WINDOW_TOKENS:,} tokens, got {w!r}")
        if isinstance(w, PeakFrac):
            if self.loop == "episode":
                raise ConfigError("window peak_frac sizes a window from a transcript's peak; a world has none")
            if self.policy.sets_window:
                raise ConfigError(
                    f"window peak_frac {w.frac} sizes each task's window, but {self.policy.kind}'s "
                    f"context_window_tokens was set to {self.policy.params['context_window_tokens']}: a run has "
                    "one window; drop one of them"
                )
        if isinstance(self.task, WorldRef) and self.task.window is not None and isinstance(w, int):
            if w != self.task.window:
                raise ConfigError(
                    f"window {w} conflicts with world {self.task.kind}'s window {self.task.window}: "
                    "a run has one window; set one of them"
                )
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ConfigError(f"max_steps must be an integer >= 1 (agent steps), got {self.max_steps!r}")
        if isinstance(self.repeat, bool) or not isinstance(self.repeat, int) or self.repeat < 0:
            raise ConfigError(f"repeat must be an integer >= 0, got {self.repeat!r}")

    # -- the window -------------------------------------------------------------------------
    @property
    def window_tokens(self) -> int | None:
        """The window the run measures against, in tokens once known (the int, a sized peak fraction's
        tokens); ``None``: the policy's own, else 200,000 (or a peak fraction not yet sized)."""
        w = self.window
        return w.tokens if isinstance(w, PeakFrac) else w

    @property
    def policy_window_tokens(self) -> int | None:
        """The window the policy runs at: the run's, else (an episode) its world's own window (a family's
        default scale), which a policy without a window of its own ignores."""
        w = self.window_tokens
        if w is None and self.loop == "episode" and isinstance(self.task, WorldRef):
            return self.task.window
        return w

    def policy_at_window(self, window_tokens: int | None = None) -> Policy:
        """The run's policy at its window: the one window rule (:func:`~h9eval.compaction.step.run_window`)
        with the one "explicit" convention (the window is set when ``context_window_tokens`` is among the
        parameters as given).

        Args:
            window_tokens: the window to use instead of :attr:`policy_window_tokens` (a peak fraction
                sized when the run starts).

        Returns:
            A policy object at that window.

        Raises:
            ConfigError: the parameters set another window than the run's.
        """
        w = self.policy_window_tokens if window_tokens is None else window_tokens
        return run_window(self.policy.build(), w, explicit=self.policy.sets_window).policy

    # -- identity ---------------------------------------------------------------------------
    @cached_property
    def _resolved_params(self) -> dict[str, Any]:
        pol = self.policy_at_window()
        params = policy_params(pol)
        if isinstance(self.window, PeakFrac):
            # the window is sized per task: not part of the policy's identity across tasks
            params.pop("context_window_tokens", None)
        return params

    def identity(self) -> RunIdentity:
        """The run id and the policy's resolved parameters (the one rule every entry point uses).

        Returns:
            The :class:`RunIdentity`.

        Raises:
            ConfigError: the policy's parameters are invalid, or set another window than the run's.
        """
        params = self._resolved_params
        phash = params_hash(self.policy.kind, params)
        agent = f"--{self.agent}" if self.loop == "episode" else ""
        run_id = (
            f"{self.task.run_key}--{self.policy.label}-{phash}-{self.history_mode}--{self.summarizer.name}"
            f"{agent}--r{self.repeat}"
        )
        return RunIdentity(run_id=run_id, params=dict(params), params_hash=phash)

    @property
    def run_id(self) -> str:
        return self.identity().run_id

    def hash_blob(self) -> dict[str, Any]:
        """What decides the run's results, besides the code: the cell hash's inputs (their keys are
        those sweeps hashed before run specs existed, so old folders keep their cell hashes)."""
        t = self.task
        episode = self.loop == "episode"
        blob: dict[str, Any] = {
            "task_id": t.task_id,
            "task_spec": t.listed,
            "task_source": t.source,
            "policy_kind": self.policy.kind,
            "params": self._resolved_params,
            "history_mode": self.history_mode,
            "writeback_rules": self.writeback_rules,
            "window": self.window_tokens,
            "window_peak_frac": self.window.frac if isinstance(self.window, PeakFrac) else None,
            "summarizer": self.summarizer.name,
            "summarizer_params": self.summarizer.params,
            "scorers": list(self.probes.scorers),
            "probe_every_k": self.probes.every_k,
            "repeat": self.repeat,
            "cell_kind": self.loop,
            "world_kind": t.kind if isinstance(t, WorldRef) else "",
            "world_params": t.params if isinstance(t, WorldRef) else {},
            "world_seed": t.seed if isinstance(t, WorldRef) else None,
            "agent": self.agent if episode else "",
            "max_steps": self.max_steps,
            "billing": self.billing,
            "policy_window": t.window if isinstance(t, WorldRef) and episode else None,
            "stress": self.stress if episode else {},
            "endpoint": self.endpoint,
        }
        # fields added after the first version enter the blob only when set, so earlier hashes hold
        if self.manual_compact_at:
            blob["manual_compact_at"] = list(self.manual_compact_at)
        if self.oracle is not None:
            blob["oracle"] = self.oracle
        return blob

    def cell_hash(self, *, h9eval_version: str, source_hash: str) -> str:
        """A finished run is reused (on a sweep's resume) only while this is equal: the spec's
        :meth:`hash_blob`, the code's version and source hash.

        Args:
            h9eval_version: the version of h9eval that planned the run.
            source_hash: :func:`h9eval.core.provenance.source_hash` of that code (with a user policy's
                own code hash appended).

        Returns:
            16 hex digits.
        """
        blob = json.dumps(
            {"schema": IDENTITY_VERSION, "h9eval_version": h9eval_version, "source_hash": source_hash}
            | self.hash_blob(),
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # -- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready values (:meth:`from_dict` gives an equal spec back)."""
        w = self.window
        return {
            "task": self.task.to_dict(),
            "policy": self.policy.to_dict(),
            "loop": self.loop,
            "window": w.to_dict() if isinstance(w, PeakFrac) else w,
            "history_mode": self.history_mode,
            "writeback_rules": self.writeback_rules,
            "summarizer": self.summarizer.to_dict(),
            "probes": self.probes.to_dict(),
            "ledger": self.ledger,
            "billing": self.billing,
            "agent": self.agent,
            "max_steps": self.max_steps,
            "stress": self.stress,
            "oracle": self.oracle,
            "repeat": self.repeat,
            "manual_compact_at": list(self.manual_compact_at),
            "endpoint": self.endpoint,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpec:
        """A spec from :meth:`to_dict`'s form; a malformed one is a :class:`ConfigError` naming the key.

        Args:
            d: the mapping (a manifest's cell ``spec``).

        Returns:
            The spec.
        """
        try:
            task = dict(d["task"])
            kind = task.pop("ref")
            ref: TaskRef | WorldRef = TaskRef(**task) if kind == "task" else WorldRef(**task)
            raw_w = d.get("window")
            window: int | PeakFrac | None = (
                PeakFrac(float(raw_w["peak_frac"]), raw_w.get("tokens")) if isinstance(raw_w, Mapping) else raw_w
            )
            probes = dict(d.get("probes") or {})
            return cls(
                task=ref,
                policy=PolicyRef(**d["policy"]),
                loop=d.get("loop", "replay"),
                window=window,
                history_mode=d.get("history_mode", "view"),
                writeback_rules=d.get("writeback_rules", "v3"),
                summarizer=SummarizerRef(**(d.get("summarizer") or {})),
                probes=ProbeSpec(
                    scorers=tuple(probes.get("scorers", ())),
                    every_k=probes.get("every_k"),
                    max_probes=probes.get("max_probes", DEFAULT_MAX_PROBES),
                ),
                ledger=bool(d.get("ledger", True)),
                billing=d.get("billing") or {},
                agent=d.get("agent", ""),
                max_steps=d.get("max_steps", _DEFAULT_MAX_STEPS),
                stress=d.get("stress") or {},
                oracle=d.get("oracle"),
                repeat=d.get("repeat", 0),
                manual_compact_at=tuple(d.get("manual_compact_at") or ()),
                endpoint=d.get("endpoint") or {},
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"not a run spec ({type(e).__name__}: {e})") from None

    def replace(self, **changes: Any) -> RunSpec:
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)


def specs_run_ids(specs: Sequence[RunSpec]) -> list[str]:
    """The run ids of ``specs``, refusing two specs with one id (two runs would write one folder)."""
    seen: dict[str, int] = {}
    out = []
    for i, s in enumerate(specs):
        rid = s.run_id
        if rid in seen:
            raise ConfigError(f"runs {seen[rid]} and {i} have the same run id {rid!r}; they would overwrite each other")
        seen[rid] = i
        out.append(rid)
    return out
