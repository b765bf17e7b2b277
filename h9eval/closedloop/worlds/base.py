"""What every closed-loop world shares: parameters, the call ledger, outcomes, the registry.

A world is a small deterministic program with hidden state. The episode loop (never the agent)
holds it: ``reset(seed)`` plants per-episode random nonces, ``step(tool_name, args)`` runs one
tool call and returns its result text, ``check()`` scores the hidden state as an
:class:`Outcome`. Every call is appended to ``ledger``. ``snapshot()``/``restore()`` branch an
episode (the state is plain data, so a deep copy is a faithful snapshot).

Result texts that begin with ``Error:`` are tool errors (the episode marks the tool result
``is_error``). Every observation carries ``padding_bytes`` of deterministic filler so that
compaction and offloading really happen; where the world's fact line sits in the observation
(``fact_position``) decides whether an offload preview still shows it.

Every world also has ``read_file`` (harness9's file tool: offload placeholders name a path that
``read_file`` returns; the episode serves those paths, see :mod:`h9eval.closedloop.episode`)
and, with ``todo_items > 0``, ``mark_todo`` for a todo list stated in the task that must be
worked off before finishing.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.closedloop.worlds.filler import filler, size_table, splice
from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.core.registry import Registry
from h9eval.probes.items import ITEM_TYPES

__all__ = [
    "Assessment",
    "FACT_POSITIONS",
    "OFFLOAD_DIR_PREFIX",
    "RESULT_SIZES",
    "TASK_FILE",
    "WORLDS",
    "READ",
    "SIDE_EFFECT",
    "GroundFact",
    "LedgerEntry",
    "Outcome",
    "Subgoal",
    "Violation",
    "World",
    "WorldParams",
    "WorldScale",
    "default_scale",
    "register_world",
]

FACT_POSITIONS = ("head", "tail", "anywhere")
RESULT_SIZES = ("fixed", "recorded")
#: the workspace file holding the task statement (with ``task_file=True``)
TASK_FILE = "TASK.md"
READ = "read"
SIDE_EFFECT = "side_effect"
#: paths below this folder are harness9 offload files (served by the episode, not the world)
OFFLOAD_DIR_PREFIX = ".harness9/tool_results/"


@dataclass(frozen=True, kw_only=True)
class WorldParams:
    """Parameters every world has (subclasses add their own fields)."""

    #: ``fixed``: every observation carries ``padding_bytes`` (± jitter) of filler; ``recorded``:
    #: each observation's total size is drawn from the recorded sessions' tool-result sizes
    #: (:func:`~h9eval.closedloop.worlds.filler.size_table`, times ``size_scale``)
    result_sizes: str = "fixed"
    #: bytes of deterministic filler (source, test logs, listings, search hits) added to every
    #: observation with ``result_sizes="fixed"`` (0 = none)
    padding_bytes: int = 1500
    #: each observation's filler varies by up to this share of ``padding_bytes`` (seeded by the
    #: episode and the call), so that seeds differ in when compaction tiers are crossed
    padding_jitter_frac: float = 0.25
    #: with ``result_sizes="recorded"``: every drawn size is multiplied by this, capped at the
    #: largest recorded result (a stress knob: the scripted agent writes no reasoning text, so a
    #: family's default scale makes up the bytes a model's turns would add)
    size_scale: float = 1.0
    #: where the fact lines sit in an observation: ``head`` (visible in an offload preview),
    #: ``tail`` (after the filler: only a full read, or a re-fetch of the offloaded file, shows
    #: them) or ``anywhere`` (between two filler lines drawn per call)
    fact_position: str = "head"
    #: items of a todo list stated in the task; each must be marked with ``mark_todo`` (0 = none)
    todo_items: int = 0
    #: the task statement is also the workspace file ``TASK.md`` (``read_file``), and the system
    #: prompt says so: an agent whose view lost the task can re-read it, as agents re-read an issue
    task_file: bool = False

    def __post_init__(self) -> None:
        self._check(self.padding_bytes >= 0, "padding_bytes", "must be >= 0", self.padding_bytes)
        self._check(
            0.0 <= self.padding_jitter_frac < 1.0, "padding_jitter_frac", "must be in [0, 1)", self.padding_jitter_frac
        )
        self._check(
            self.result_sizes in RESULT_SIZES,
            "result_sizes",
            f"must be one of {', '.join(RESULT_SIZES)}",
            self.result_sizes,
        )
        self._check(0.0 < self.size_scale <= 20.0, "size_scale", "must be in (0, 20]", self.size_scale)
        self._check(
            self.fact_position in FACT_POSITIONS,
            "fact_position",
            f"must be one of {', '.join(FACT_POSITIONS)}",
            self.fact_position,
        )
        self._check(0 <= self.todo_items <= 20, "todo_items", "must be between 0 and 20", self.todo_items)

    def _check(self, ok: bool, field_name: str, rule: str, value: Any) -> None:
        if not ok:
            raise ConfigError(f"{type(self).__name__}.{field_name} {rule}, got {value!r}")

    def _check_between(self, field_name: str, low: int, high: int) -> None:
        """The integer field ``field_name`` lies in ``[low, high]``."""
        value = getattr(self, field_name)
        self._check(low <= value <= high, field_name, f"must be between {low} and {high}", value)


@dataclass(frozen=True, kw_only=True)
class WorldScale:
    """A family's default scale: the parameters, window and step budget at which an episode runs
    the length real sessions do (60-300 steps filling a 32k-200k window) and harness9's default
    policy reaches its soft and full tiers. A sweep's ``scale = "default"`` uses it."""

    #: world parameters (over the params dataclass's defaults)
    params: Mapping[str, Any]
    #: the compacting policies' ``context_window_tokens`` for this family
    window_tokens: int
    #: agent steps before the episode is cut off
    max_steps: int


def default_scale(*, size_scale: float, **params: Any) -> WorldScale:
    """A family's default scale: its own ``params`` and ``size_scale`` over what every family's
    scale shares (recorded result sizes, facts anywhere, the task file; a 32,000-token window and
    300 steps; docs/worlds.md says why)."""
    shared = {"result_sizes": "recorded", "size_scale": size_scale, "fact_position": "anywhere", "task_file": True}
    return WorldScale(params={**params, **shared}, window_tokens=32_000, max_steps=300)


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One tool call the world saw (or that the episode served for it, ``kind="refetch"``)."""

    #: 1-based index of the call in the episode
    step: int
    tool: str
    #: the arguments as canonical JSON text
    arguments: str
    #: ``read``, ``side_effect``, ``refetch`` or ``unknown``
    kind: str
    is_error: bool
    result_bytes: int


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken rule: ``rule`` names it, ``step`` is the ledger step where it happened."""

    step: int
    rule: str
    detail: str


@dataclass(frozen=True, slots=True)
class Subgoal:
    name: str
    reached: bool


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """A world's verdict on its hidden state (``check()``)."""

    success: bool
    subgoals: tuple[Subgoal, ...]
    violations: tuple[Violation, ...] = ()
    #: side-effect calls that changed the world (successful ones)
    side_effects: int = 0
    #: side effects repeated that must happen exactly once (a second refund, a second commit)
    duplicate_side_effects: int = 0
    #: side effects with a wrong value (a submit with the wrong key, a reply with the wrong id)
    wrong_side_effects: int = 0
    #: the world's final action (submit, commit, the queue emptied) happened
    finished: bool = False
    #: one short reason when not successful ("" on success)
    failure: str = ""

    @property
    def subgoals_reached(self) -> int:
        return sum(1 for s in self.subgoals if s.reached)

    @property
    def subgoals_total(self) -> int:
        return len(self.subgoals)


@dataclass(frozen=True, slots=True)
class GroundFact:
    """A hidden value the task needs, with where it is consumed (for planted facts and for
    "fact present at the point of need")."""

    fact_id: str
    question: str
    value: str
    #: the tools whose call needs the value (the point of need is the first such call ...)
    consumed_by: tuple[str, ...]
    #: ... whose arguments or last visible message contain this text ("": the first such call)
    cue: str = ""
    #: the loss ledger's item type (:data:`h9eval.probes.items.ITEM_TYPES`)
    item_type: str = "fact"
    #: the exact text a view must hold for the ledger to count the item kept ("": ``value``); a
    #: rule is its sentence, not a day name that every listing shows
    item_value: str = ""
    #: the fact this one replaced (a later update of the same question): its item is current
    #: until this one appears, and this one is STALE where only the old value shows
    supersedes: str = ""
    #: rules (:attr:`Violation.rule`) whose violation is an action touching this item: a rule broken
    breaks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.item_type not in ITEM_TYPES:
            raise ConfigError(did_you_mean(self.item_type, ITEM_TYPES, what=f"item type of fact {self.fact_id!r}"))


@dataclass(frozen=True, kw_only=True)
class Assessment:
    """A family's part of :meth:`World.check`: its subgoals, broken rules, failure reasons and
    side-effect counts. The base adds the todo list and decides success and the failure reason."""

    goals: Sequence[Subgoal]
    violations: Sequence[Violation] = ()
    #: the family's failure reasons, most telling first, each ``(applies, text)``; tried before a
    #: broken rule and an unreached subgoal
    reasons: Sequence[tuple[bool, str]] = ()
    #: a broken rule is named as the failure (``False``: the subgoal the breach left unreached is)
    rule_is_reason: bool = True
    #: subgoals recorded but not needed for success
    bookkeeping: frozenset[str] = frozenset()
    #: what success needs beyond the subgoals and no broken rule (one submission, no wrong value)
    clean: bool = True
    #: success also needs no duplicate side effect (the todo list's included)
    exactly_once: bool = False
    #: the family's side effects and duplicates (the base adds the todo list's)
    side_effects: int
    duplicates: int
    wrong: int = 0
    #: the world's final action happened (``None``: every subgoal, the todo list's too, is reached)
    finished: bool | None = None


def canonical_args(args: Mapping[str, Any]) -> str:
    return json.dumps(dict(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class World:
    """Base class; subclasses set ``kind``, ``params_type`` and the ``_tool_*`` handlers.

    ``tool_kinds`` maps each tool name to ``read`` or ``side_effect``; a handler
    ``_tool_<name>(args) -> str`` implements it. ``_new_state(rng)`` builds the hidden state,
    ``_assess()`` judges it (:class:`Assessment`: what differs between families; :meth:`check`
    adds what every family shares: the todo list, success and the one failure reason).
    """

    kind: ClassVar[str] = ""
    params_type: ClassVar[type[WorldParams]] = WorldParams
    tool_kinds: ClassVar[dict[str, str]] = {}
    #: what the family stresses (one line; ``h9eval run --help`` and the README list it)
    stresses: ClassVar[str] = ""
    #: the family's default scale (see :class:`WorldScale`)
    scale: ClassVar[WorldScale]

    def __init__(self, params: WorldParams | None = None) -> None:
        if params is None:
            params = self.params_type()
        if not isinstance(params, self.params_type):
            raise ConfigError(f"world {self.kind!r} needs {self.params_type.__name__}, got {type(params).__name__}")
        self.params = params
        self.seed: int | None = None
        self.ledger: list[LedgerEntry] = []
        self._step = 0
        self._call_key = ""
        self._state: dict[str, Any] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def reset(self, seed: int) -> None:
        """Start a fresh episode; every nonce and filler line derives from ``seed``."""
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigError(f"world seed must be an integer, got {seed!r}")
        self.seed = seed
        rng = random.Random(f"{self.kind}:{seed}")
        self.ledger = []
        self._step = 0
        self._state = self._new_state(rng)
        self._state["todo"] = [self._nonce(rng, "TD") for _ in range(self.params.todo_items)]
        self._state["todo_marked"] = []
        self._state["pad_seed"] = rng.getrandbits(32)

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of everything mutable (state, ledger, step counter)."""
        return copy.deepcopy({"state": self._state, "ledger": self.ledger, "step": self._step, "seed": self.seed})

    def restore(self, snap: Mapping[str, Any]) -> None:
        snap = copy.deepcopy(dict(snap))
        self._state, self.ledger, self._step, self.seed = snap["state"], snap["ledger"], snap["step"], snap["seed"]

    def _require_reset(self) -> None:
        if self.seed is None:
            raise ConfigError(f"world {self.kind!r}: call reset(seed) before using it")

    # -- what the agent is shown ---------------------------------------------------------------
    @property
    def system_prompt(self) -> str:
        text = (
            "You are an agent working in a tool environment. Use exactly one tool per turn and pass "
            "only values you have seen in this conversation. Large tool results may be saved to a "
            "file; the placeholder names the path, and read_file(path) returns the full text. "
            "When the task is complete, reply without a tool call."
        )
        if self.params.task_file:
            text += f" The full task statement is in the file {TASK_FILE}."
        return text

    @property
    def task_prompt(self) -> str:
        self._require_reset()
        text = self._task_text()
        if self._state["todo"]:
            text += (
                "\nTodo list (mark each item with mark_todo before you finish): " + ", ".join(self._state["todo"]) + "."
            )
        return text

    @property
    def tool_specs(self) -> tuple[dict[str, Any], ...]:
        """The tools in harness9's schema form (``name``, ``description``, ``input_schema``)."""
        specs = list(self._tool_specs())
        specs.append(
            _spec("read_file", "Read a file (also the full text of an offloaded tool result).", {"path": "string"})
        )
        if self.params.todo_items:
            specs.append(_spec("mark_todo", "Mark one todo list item as done.", {"item": "string"}))
        return tuple(specs)

    def interjection(self) -> str | None:
        """A user message the world delivers before the next model call (``None``: none)."""
        return None

    # -- acting ------------------------------------------------------------------------------
    def step(self, tool_name: str, args: Mapping[str, Any]) -> str:
        """Run one tool call and return its result text (``Error: ...`` for a tool error)."""
        self._require_reset()
        self._step += 1
        kinds = {**self.tool_kinds, "read_file": READ, "mark_todo": SIDE_EFFECT}
        if tool_name not in kinds or (tool_name == "mark_todo" and not self.params.todo_items):
            out, kind = f"Error: unknown tool {tool_name!r}", "unknown"
        elif not isinstance(args, Mapping):
            out, kind = "Error: arguments must be an object", kinds[tool_name]
        else:
            kind = kinds[tool_name]
            missing = [k for k in self._required(tool_name) if k not in args]
            if missing:
                out = f"Error: missing argument {missing[0]!r} for {tool_name}"
            else:
                self._call_key = tool_name + canonical_args(args)
                out = getattr(self, f"_tool_{tool_name}")(dict(args))
        self.ledger.append(
            LedgerEntry(
                self._step,
                tool_name,
                canonical_args(args) if isinstance(args, Mapping) else "{}",
                kind,
                out.startswith("Error:"),
                len(out.encode("utf-8")),
            )
        )
        return out

    def record_refetch(self, path: str, result: str) -> None:
        """Ledger entry for a ``read_file`` of an offload file that the episode served."""
        self._step += 1
        self.ledger.append(
            LedgerEntry(
                self._step,
                "read_file",
                canonical_args({"path": path}),
                "refetch",
                result.startswith("Error:"),
                len(result.encode("utf-8")),
            )
        )

    def check(self) -> Outcome:
        """Score the hidden state: the family's :meth:`_assess`, the todo list, one failure reason."""
        a = self._assess()
        marked = self._state["todo_marked"]
        goals = (*a.goals, *(Subgoal(f"todo:{t}", t in marked) for t in self._state["todo"]))
        dups = a.duplicates + sum(max(marked.count(t) - 1, 0) for t in set(marked))
        needed = [g for g in goals if g.name not in a.bookkeeping]
        violations = tuple(a.violations)
        success = all(g.reached for g in needed) and not violations and a.clean and not (a.exactly_once and dups)
        failure = ""
        if not success:
            rule = (a.rule_is_reason and bool(violations), f"rule broken: {violations[0].rule}" if violations else "")
            unreached = ((not g.reached, f"subgoal {g.name} not reached") for g in needed)
            reasons = (*a.reasons, rule, *unreached)
            failure = next((text for applies, text in reasons if applies), "duplicate side effect")
        return Outcome(
            success=success,
            subgoals=goals,
            violations=violations,
            side_effects=a.side_effects + len(set(marked)),
            duplicate_side_effects=dups,
            wrong_side_effects=a.wrong,
            finished=all(g.reached for g in goals) if a.finished is None else a.finished,
            failure=failure,
        )

    def ground_truth(self) -> tuple[GroundFact, ...]:
        raise NotImplementedError

    # -- helpers for subclasses ----------------------------------------------------------------
    def _assess(self) -> Assessment:
        raise NotImplementedError

    def _task_text(self) -> str:
        raise NotImplementedError

    def _tool_specs(self) -> tuple[dict[str, Any], ...]:
        raise NotImplementedError

    def _new_state(self, rng: random.Random) -> dict[str, Any]:
        raise NotImplementedError

    def _required(self, tool_name: str) -> tuple[str, ...]:
        for s in self.tool_specs:
            if s["name"] == tool_name:
                return tuple(s["input_schema"].get("required", ()))
        return ()

    @staticmethod
    def _nonce(rng: random.Random, prefix: str) -> str:
        return f"{prefix}-{rng.getrandbits(32):08x}"

    def _observe(self, fact_lines: str, *, tag: str = "", kind: str | None = None) -> str:
        """``fact_lines`` plus this call's filler (of ``kind``, else one drawn from the call), placed
        per ``fact_position``."""
        # filler keyed by the call and what it reports, not the step: the same call on the same
        # state reads the same, and a call that reports something new (next_ticket) is a new result
        call = self._call_key if self.params.result_sizes == "fixed" else f"{self._call_key}\0{fact_lines}"
        key = f"{self._state['pad_seed']}:{call}:{tag}"
        nbytes = self._pad_bytes(call)
        if self.params.result_sizes == "recorded":
            nbytes = max(nbytes - len(fact_lines.encode("utf-8")) - 1, 0)
        return splice(fact_lines, filler(nbytes, key, kind), self.params.fact_position, key)

    def _pad_bytes(self, key: str) -> int:
        """Filler bytes (``fixed``) or the result's total size (``recorded``) for call ``key``."""
        p = self.params
        if p.result_sizes == "recorded":
            u = random.Random(f"{self._state['pad_seed']}:size:{key}").random()
            table = size_table()
            # scaled, but never beyond the largest recorded result: the tail stays the recorded one
            return min(round(table.draw(u) * p.size_scale), table.sizes_bytes[-1])
        if not p.padding_bytes or not p.padding_jitter_frac:
            return p.padding_bytes
        u = random.Random(f"{self._state['pad_seed']}:jitter:{key}").uniform(-1.0, 1.0)
        return max(round(p.padding_bytes * (1.0 + p.padding_jitter_frac * u)), 0)

    @staticmethod
    def _padding(nbytes: int, seed: str, kind: str | None = None) -> str:
        """``nbytes`` (exactly) of filler; never contains a nonce-shaped token."""
        return filler(nbytes, seed, kind)

    def _tool_read_file(self, args: dict[str, Any]) -> str:
        path = str(args["path"])
        if path == TASK_FILE and self.params.task_file:
            return self.task_prompt
        files = self._files()
        if path in files:
            return files[path]
        return f"Error: no such file: {path}"

    def _files(self) -> Mapping[str, str]:
        """The world's readable files (none by default)."""
        return {}

    def _tool_mark_todo(self, args: dict[str, Any]) -> str:
        item = str(args["item"])
        if item not in self._state["todo"]:
            return f"Error: {item} is not on the todo list"
        self._state["todo_marked"].append(item)
        return f"Marked {item} as done."

    def _violate(self, rule: str, detail: str) -> None:
        """Record a broken rule at this step (in the state's ``violations`` list)."""
        self._state["violations"].append(Violation(self._step, rule, detail))

    def _once(self, key: str, entry: tuple[Any, ...], refusal: str) -> str | None:
        """Record a call that must happen once (in the state's list ``key``); ``refusal`` (an
        ``Error:`` text) when it is a repeat, else ``None``."""
        self._state[key].append(entry)
        return refusal if len(self._state[key]) > 1 else None


def _spec(name: str, description: str, props: Mapping[str, str]) -> dict[str, Any]:
    """A tool schema with every property required (``string``, ``number`` or ``array``)."""
    properties: dict[str, Any] = {}
    for k, t in props.items():
        properties[k] = {"type": "array", "items": {"type": "string"}} if t == "array" else {"type": t}
    return {
        "name": name,
        "description": description,
        "input_schema": {"type": "object", "properties": properties, "required": list(props)},
    }


tool_spec = _spec

#: every world by kind (the one registry type; a second registration of a kind is an error)
WORLDS: Registry[type[World]] = Registry("world")


def register_world(cls: type[World]) -> type[World]:
    """Class decorator: register a world under its ``kind`` (a second registration is an error)."""
    if not cls.kind:
        raise TypeError(f"{cls.__name__} has no kind")
    return WORLDS.add(cls.kind, cls)


def params_dict(params: WorldParams) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(params), default=list))
