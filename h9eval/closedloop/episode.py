"""One closed-loop episode: compaction before every model call, the world's hidden state scored.

``run_episode(world, agent, policy, seed=...)`` resets the world, puts its system prompt and
task in the history, and then, at every step: delivers a pending user message from the world
(a mid-episode correction), compacts the history with the step the open-loop replay runs too
(:class:`~h9eval.compaction.step.CallStep`: the tool-time offload hook for policies that declare
one, ``history_mode`` ``view`` or ``write_back`` with harness9's write-back rules, forced
retries while the view exceeds the window), serialises the view (each message once per episode),
asks the agent for one action, checks it, executes it
in the world and appends the call and its (possibly offloaded) result.

Enforced by the harness, not trusted to the agent:

* the agent receives only a JSON string (:func:`~h9eval.closedloop.agents.base.serialize_view`'s text);
  it never holds the world or the episode's messages;
* every argument value of an action must occur in that step's view, the tool specs or the
  system prompt; a value from nowhere is a hard failure (``terminated_by="hard_failure"``,
  the value listed in ``invented_values``) and the action is not executed;
* a view that a real API would reject for its tool pairs (a result without its call right
  before it, a call without exactly one result) counts as a protocol error;
* a view that still exceeds the window after ``overflow_retries`` forced compactions ends the
  episode as a loop (the API would refuse the call; an irreducible prefix larger than the
  budget must end here, not hang), and so do ``loop_patience`` steps in a row without a new
  subgoal that either repeat an earlier call after a compaction or repeat a call that returns
  exactly the same text as before (a re-read, or a refused second commit);
* ``max_steps`` bounds every episode.

``read_file`` of an offload file (``.harness9/tool_results/...``, the path harness9's
placeholders name) is served from the offload folder, as harness9's file tool would, and
counted as a re-fetch: *justified* when that result's full text was not in the view the agent
acted on, *wasted* when it was (as the original result or an earlier re-fetch).
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.closedloop.agents.base import Action, Agent, ViewSerializer
from h9eval.closedloop.worlds.base import (
    OFFLOAD_DIR_PREFIX,
    READ,
    GroundFact,
    LedgerEntry,
    Outcome,
    Violation,
    World,
    params_dict,
)
from h9eval.closedloop.worlds import make_world
from h9eval.compaction.base import CompactionEnv, LogicalClock, Policy, params_hash, policy_params
from h9eval.compaction.policies import make_policy, policy_from_dict
from h9eval.compaction.step import (
    HISTORY_MODES,
    WRITEBACK_RULES,
    CallRequest,
    CallStep,
    StepRules,
    run_window,
    tool_time_hook,
)
from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.core.messages import Message, ToolCall
from h9eval.compaction.summary import Summarizer
from h9eval.core.tokens import estimate_tool_tokens
from h9eval.summarizers.registry import make_summarizer

__all__ = [
    "HISTORY_MODES",
    "TERMINATIONS",
    "Episode",
    "EpisodeConfig",
    "StepRecord",
    "StressSettings",
    "excess_steps",
    "protocol_errors",
    "run_episode",
    "run_oracle",
    "stress_settings",
]

TERMINATIONS = ("done", "max_steps", "loop", "hard_failure")
_PREFIX_SENTENCE = "Reference handbook, keep verbatim: every tool call is logged and audited. "


@dataclass(frozen=True, kw_only=True)
class StressSettings:
    """Stress settings of an episode (all off by default). A todo list that must survive is a
    world parameter (``todo_items``), since the world checks it."""

    #: agent steps (1-based) at which a forced compaction (``compact(force=True)``, written back as
    #: harness9's ``/compact`` is) runs between the tool call and its result
    compact_between_call_and_result_at: tuple[int, ...] = ()
    #: bytes of text appended to the system prompt: a prefix no compaction may drop
    irreducible_prefix_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "compact_between_call_and_result_at", tuple(self.compact_between_call_and_result_at))
        if any(not isinstance(s, int) or s < 1 for s in self.compact_between_call_and_result_at):
            raise ConfigError(
                "StressSettings.compact_between_call_and_result_at must hold steps >= 1, got "
                f"{self.compact_between_call_and_result_at!r}"
            )
        if self.irreducible_prefix_bytes < 0:
            raise ConfigError(
                f"StressSettings.irreducible_prefix_bytes must be >= 0, got {self.irreducible_prefix_bytes!r}"
            )


def stress_settings(given: Mapping[str, Any]) -> StressSettings:
    """:class:`StressSettings` from a mapping (a sweep spec's ``stress`` table): unknown keys get a
    did-you-mean, values of the wrong type an error naming the field."""
    names = [f.name for f in dataclasses.fields(StressSettings)]
    for k in given:
        if k not in names:
            raise ConfigError(did_you_mean(k, names, what="stress setting"))
    steps = given.get("compact_between_call_and_result_at", ())
    if not isinstance(steps, (list, tuple)) or not all(isinstance(x, int) and not isinstance(x, bool) for x in steps):
        raise ConfigError(f"compact_between_call_and_result_at must be a list of agent steps (integers), got {steps!r}")
    prefix = given.get("irreducible_prefix_bytes", 0)
    if not isinstance(prefix, int) or isinstance(prefix, bool):
        raise ConfigError(f"irreducible_prefix_bytes must be an integer, got {prefix!r}")
    return StressSettings(compact_between_call_and_result_at=tuple(steps), irreducible_prefix_bytes=prefix)


@dataclass(frozen=True, kw_only=True)
class EpisodeConfig:
    """How an episode runs (built by :func:`run_episode` from its keyword arguments)."""

    #: ``view`` (harness9 V1: the view is only that call's input) or ``write_back`` (PR #121)
    history_mode: str = "view"
    #: harness9's write-back rules, ``v3`` (default) or ``v2``
    writeback_rules: str = "v3"
    #: agent steps (model calls) before the episode is cut off
    max_steps: int = 60
    #: the run's window (tokens): it replaces a policy's default window, and a policy without one
    #: is measured against it (``None``: the policy's own, else 200,000; see ``compaction.step.run_window``)
    context_window_tokens: int | None = None
    #: ``None``: the tool-time offload hook is on for policies that declare a hook threshold
    tool_time_offload: bool | None = None
    #: steps in a row without a new subgoal that repeat an earlier call after a compaction or
    #: re-read an unchanged result: a loop
    loop_patience: int = 6
    #: forced compactions tried when a view exceeds the window, before the episode is a loop
    overflow_retries: int = 2
    stress: StressSettings = field(default_factory=StressSettings)

    def __post_init__(self) -> None:
        if self.history_mode not in HISTORY_MODES:
            raise ConfigError(
                f"EpisodeConfig.history_mode must be one of {', '.join(HISTORY_MODES)}, got {self.history_mode!r}"
            )
        if self.writeback_rules not in WRITEBACK_RULES:
            raise ConfigError(f"EpisodeConfig.writeback_rules must be v2 or v3, got {self.writeback_rules!r}")
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ConfigError(f"EpisodeConfig.max_steps must be an integer >= 1, got {self.max_steps!r}")
        if self.context_window_tokens is not None and self.context_window_tokens <= 0:
            raise ConfigError(f"EpisodeConfig.context_window_tokens must be > 0, got {self.context_window_tokens!r}")
        if self.loop_patience < 1:
            raise ConfigError(f"EpisodeConfig.loop_patience must be >= 1, got {self.loop_patience!r}")
        if self.overflow_retries < 0:
            raise ConfigError(f"EpisodeConfig.overflow_retries must be >= 0, got {self.overflow_retries!r}")


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """One model call of an episode."""

    step: int
    history_messages: int
    view_messages: int
    view_tokens: int
    tokens_sent: int
    tier_name: str
    compacted: bool
    forced_compactions: int
    protocol_errors: int
    #: the action: a tool name, ``""`` for done
    tool: str
    arguments: str
    #: tokens of the history before this step's compaction (0 in episodes recorded without it)
    history_tokens: int = 0
    #: tokens this call would send had nothing ever been compacted (every message that arrived,
    #: plus the tool schemas): the loss ledger's window fills (0 in episodes recorded without it)
    raw_tokens_sent: int = 0
    is_error: bool = False
    #: ``justified``, ``wasted`` or ``""`` (not a re-fetch)
    refetch: str = ""
    redundant_read: bool = False
    offloaded_tool_time: bool = False
    #: a stress compaction ran between this step's tool call and its result and changed the history
    compacted_mid_call: bool = False
    summarizer_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    summarizer_cost_usd: float = 0.0
    #: of ``summarizer_calls``, those sent through a provider's batch API (a batched sweep)
    summarizer_batched_calls: int = 0
    agent_input_tokens: int = 0
    agent_output_tokens: int = 0
    agent_cache_read_tokens: int = 0
    agent_cache_creation_tokens: int = 0
    agent_cost_usd: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Episode:
    """Everything one episode produced; the measures of issue §3 are fields or properties."""

    world_kind: str
    world_params: Mapping[str, Any]
    seed: int
    agent_id: str
    policy_kind: str
    policy_params: Mapping[str, Any]
    params_hash: str
    summarizer_id: str | None
    config: EpisodeConfig
    outcome: Outcome
    terminated_by: str
    declared_done: bool
    steps: tuple[StepRecord, ...]
    history: tuple[Message, ...]
    ledger: tuple[LedgerEntry, ...]
    ground_truth: tuple[GroundFact, ...]
    tools: tuple[Mapping[str, Any], ...]
    system_prompt: str
    task_prompt: str
    context_window_tokens: int
    invented_values: tuple[str, ...] = ()
    loop_reason: str = ""
    #: (fact_id, present) for each ground-truth fact whose consuming tool was called: was its
    #: value in the view at the first such call?
    facts_at_need: tuple[tuple[str, bool], ...] = ()
    #: the view sent at each step (one per ``steps`` entry), for the billing model
    views: tuple[tuple[Message, ...], ...] = field(default=(), repr=False, compare=False)
    #: each step's tool result in full, before any offload (one per ``steps`` entry; ``""`` for a
    #: step whose action did not run), for the loss ledger's touches
    results: tuple[str, ...] = field(default=(), repr=False, compare=False)

    # -- measures --------------------------------------------------------------------------
    @property
    def success(self) -> bool:
        return self.outcome.success and self.terminated_by != "hard_failure"

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def n_compactions(self) -> int:
        """Steps whose view was compacted, plus stress compactions between a call and its result."""
        return sum(int(s.compacted) + int(s.compacted_mid_call) for s in self.steps)

    @property
    def first_compaction_step(self) -> int | None:
        """The first step that acted on a compacted view (a mid-call compaction at step s first
        shows in the view of step s + 1)."""
        cands = [s.step for s in self.steps if s.compacted] + [s.step + 1 for s in self.steps if s.compacted_mid_call]
        return min(cands, default=None)

    @property
    def hard_failure(self) -> bool:
        return self.terminated_by == "hard_failure"

    @property
    def loop_detected(self) -> bool:
        return self.terminated_by == "loop"

    @property
    def hallucinated_completion(self) -> bool:
        """The agent declared the task done while the world says it is not."""
        return self.declared_done and not self.outcome.success

    def violations_split(self) -> tuple[tuple[Violation, ...], tuple[Violation, ...]]:
        """Rule violations (before, at-or-after) the first compaction."""
        first = self.first_compaction_step
        before = tuple(v for v in self.outcome.violations if first is None or v.step < first)
        after = tuple(v for v in self.outcome.violations if first is not None and v.step >= first)
        return before, after

    def summary(self) -> dict[str, Any]:
        """One flat row: the episode's identity and every measure (what ``episodes_frame`` stacks)."""
        before, after = self.violations_split()
        st = self.steps
        o = self.outcome
        return {
            "world_kind": self.world_kind,
            "world_params": json.dumps(dict(self.world_params), sort_keys=True),
            "seed": self.seed,
            "agent_id": self.agent_id,
            "policy_kind": self.policy_kind,
            "params_hash": self.params_hash,
            "history_mode": self.config.history_mode,
            "summarizer_id": self.summarizer_id or "",
            "context_window_tokens": self.context_window_tokens,
            "success": self.success,
            "subgoals_reached": o.subgoals_reached,
            "subgoals_total": o.subgoals_total,
            "subgoals_frac": o.subgoals_reached / o.subgoals_total if o.subgoals_total else 1.0,
            "failure": o.failure,
            "terminated_by": self.terminated_by,
            "steps": self.n_steps,
            "n_compactions": self.n_compactions,
            "first_compaction_step": self.first_compaction_step if self.first_compaction_step is not None else -1,
            "tokens_sent_sum": sum(s.tokens_sent for s in st),
            "tokens_sent_peak": max((s.tokens_sent for s in st), default=0),
            "summarizer_calls": sum(s.summarizer_calls for s in st),
            "summarizer_input_tokens": sum(s.summarizer_input_tokens for s in st),
            "summarizer_output_tokens": sum(s.summarizer_output_tokens for s in st),
            "summarizer_cost_usd": float(sum(s.summarizer_cost_usd for s in st)),
            "agent_input_tokens": sum(s.agent_input_tokens for s in st),
            "agent_output_tokens": sum(s.agent_output_tokens for s in st),
            "agent_cache_read_tokens": sum(s.agent_cache_read_tokens for s in st),
            "agent_cache_creation_tokens": sum(s.agent_cache_creation_tokens for s in st),
            "agent_cost_usd": float(sum(s.agent_cost_usd for s in st)),
            "refetches_justified": sum(1 for s in st if s.refetch == "justified"),
            "refetches_wasted": sum(1 for s in st if s.refetch == "wasted"),
            "redundant_read_calls": sum(1 for s in st if s.redundant_read),
            "offloads_tool_time": sum(1 for s in st if s.offloaded_tool_time),
            "side_effects": o.side_effects,
            "duplicate_side_effects": o.duplicate_side_effects,
            "wrong_side_effects": o.wrong_side_effects,
            "violations_before_compaction": len(before),
            "violations_after_compaction": len(after),
            "hallucinated_completion": self.hallucinated_completion,
            "protocol_errors": sum(s.protocol_errors for s in st),
            "loop_detected": self.loop_detected,
            "hard_failure": self.hard_failure,
            "invented_values": len(self.invented_values),
            "facts_needed": len(self.facts_at_need),
            "facts_present_at_need": sum(1 for _, p in self.facts_at_need if p),
        }


# -- the loop -----------------------------------------------------------------------------------
def run_episode(
    world: World | str,
    agent: Agent,
    policy: Policy | str | Mapping[str, Any],
    *,
    seed: int,
    summarizer: Summarizer | None | str = "offline",
    max_steps: int = 60,
    history_mode: str = "view",
    writeback_rules: str = "v3",
    context_window_tokens: int | None = None,
    tool_time_offload: bool | None = None,
    loop_patience: int = 6,
    overflow_retries: int = 2,
    stress: StressSettings | None = None,
    offload_root: str | os.PathLike[str] | None = None,
) -> Episode:
    """Run one episode (see the module docstring).

    ``world``: a :class:`World` (reset here with ``seed``) or a registered kind.
    ``policy``: a policy object, a registered kind, or a ``{"kind": ..., ...}`` mapping.
    ``summarizer``: as in the replay: a Summarizer, ``None`` (summaries fail into the
    fallback) or a registered name (default ``offline``). ``offload_root``: where offload files
    go (default: a temporary folder removed at the end). The other arguments are
    :class:`EpisodeConfig` fields.
    """
    cfg = EpisodeConfig(
        history_mode=history_mode,
        writeback_rules=writeback_rules,
        max_steps=max_steps,
        context_window_tokens=context_window_tokens,
        tool_time_offload=tool_time_offload,
        loop_patience=loop_patience,
        overflow_retries=overflow_retries,
        stress=stress or StressSettings(),
    )
    if isinstance(world, str):
        world = make_world(world)
    if isinstance(policy, str):
        policy = make_policy(policy)
    elif isinstance(policy, Mapping):
        policy = policy_from_dict(policy)
    if isinstance(summarizer, str):
        summarizer = make_summarizer(summarizer)
    if offload_root is None:
        with tempfile.TemporaryDirectory(prefix="h9eval-closedloop-") as tmp:
            return _run(world, agent, policy, summarizer, seed, cfg, Path(tmp))
    return _run(world, agent, policy, summarizer, seed, cfg, Path(offload_root))


def _run(
    world: World, agent: Agent, policy: Policy, summarizer: Summarizer | None, seed: int, cfg: EpisodeConfig, root: Path
) -> Episode:
    world.reset(seed)
    tools = world.tool_specs
    system_prompt = world.system_prompt + _prefix(cfg.stress.irreducible_prefix_bytes)
    task_prompt = world.task_prompt
    session_id = f"{world.kind}-{seed}"
    at_window = run_window(policy, cfg.context_window_tokens)
    policy, window = at_window.policy, at_window.window_tokens
    env = CompactionEnv(
        summarizer=summarizer, offload_root=root, session_id=session_id, clock=LogicalClock(), seed=seed
    )
    rules = StepRules(
        history_mode=cfg.history_mode,
        writeback_rules=cfg.writeback_rules,
        overflow_retries=cfg.overflow_retries,
        tool_time_offload=cfg.tool_time_offload,
    )
    first = [Message("system", system_prompt), Message("user", task_prompt)]
    schema_tokens = estimate_tool_tokens(tools)
    session = CallStep(
        policy.start(env),
        rules,
        window_tokens=window,
        tool_schema_tokens=schema_tokens,
        hook=tool_time_hook(policy, rules, env),
        history=list(first),
    )
    arrived_bytes = sum(m.nbytes for m in first)  # everything that joined the history, uncompacted

    def arrive(m: Message) -> bool:
        nonlocal arrived_bytes
        arrived_bytes += m.nbytes
        return session.arrive(m)

    read_kinds = {name for name, kind in world.tool_kinds.items() if kind == READ} | {"read_file"}
    serialize = ViewSerializer(tools)  # serialize_view's text, each message serialised once

    originals: dict[str, str] = {}  # call id -> the tool's full result text
    executed: dict[tuple[str, str], str] = {}  # (tool, arguments) -> the latest result
    records: list[StepRecord] = []
    views: list[tuple[Message, ...]] = []
    results: dict[int, str] = {}  # step -> the tool's full result
    actions: list[Action] = []
    invented: tuple[str, ...] = ()
    terminated = "max_steps"
    declared_done = False
    loop_reason = ""
    stale = 0  # compacted steps in a row without progress
    best_subgoals = world.check().subgoals_reached

    for step in range(1, cfg.max_steps + 1):
        note = world.interjection()
        if note is not None:
            arrive(Message("user", note))
        req = session.before_call()
        view, sent, forced, compacted = req.view, req.stats.tokens_sent, req.forced_compactions, req.stats.compacted
        base = _step_fields(step, req, raw_tokens_sent=arrived_bytes // 4 + schema_tokens)
        if sent > window:
            # the API would refuse this call and no compaction can shrink the view any further
            records.append(StepRecord(**base, tool="", arguments=""))
            views.append(view)
            terminated, loop_reason = (
                "loop",
                f"view of {sent} tokens still exceeds the {window}-token window after {forced} forced compactions",
            )
            break
        action = agent.act(serialize(view))
        usage = action.usage
        base.update(
            agent_input_tokens=usage.input_tokens if usage else 0,
            agent_output_tokens=usage.output_tokens if usage else 0,
            agent_cache_read_tokens=usage.cache_read_input_tokens if usage else 0,
            agent_cache_creation_tokens=usage.cache_creation_input_tokens if usage else 0,
            agent_cost_usd=usage.cost_usd if usage else 0.0,
        )
        views.append(view)
        actions.append(action)
        if action.done:
            records.append(StepRecord(**base, tool="", arguments=""))
            arrive(Message("assistant", action.note))
            terminated, declared_done = "done", True
            break
        invented = invented_values(action, view, tools, system_prompt)
        if invented:
            records.append(StepRecord(**base, tool=action.tool or "", arguments=action.arguments))
            terminated = "hard_failure"
            break
        call = ToolCall(f"call_{step:03d}", action.tool or "", action.arguments)
        arrive(Message("assistant", action.note, (call,)))
        mid_call = False
        if step in cfg.stress.compact_between_call_and_result_at:
            # harness9's /compact rewrites the session whatever the history mode
            forced_view = list(session.compactor.compact(session.history, force=True).view)
            mid_call = forced_view != session.history
            session.replace_history(forced_view)
        out = _execute(world, root, call, action.args, view, originals, executed, read_kinds)
        results[step] = out.content
        repeat, same_result = out.repeat, out.same_result
        offloaded = arrive(Message("user", out.content, (), call.id, out.is_error))
        records.append(
            StepRecord(
                **base,
                tool=call.name,
                arguments=call.arguments,
                is_error=out.is_error,
                refetch=out.refetch,
                redundant_read=out.redundant,
                offloaded_tool_time=offloaded,
                compacted_mid_call=mid_call,
            )
        )
        reached = world.check().subgoals_reached
        if reached > best_subgoals:
            best_subgoals, stale = reached, 0
        elif (compacted and repeat) or same_result:
            # no progress: a compaction made the agent repeat itself, or a call changed nothing
            stale += 1
            if stale >= cfg.loop_patience:
                terminated, loop_reason = "loop", f"{stale} steps in a row repeated earlier calls without a new subgoal"
                break
        else:
            stale = 0

    outcome = world.check()
    truth = world.ground_truth()
    return Episode(
        world_kind=world.kind,
        world_params=params_dict(world.params),
        seed=seed,
        agent_id=agent.agent_id,
        policy_kind=policy.kind,
        policy_params=policy_params(policy),
        params_hash=params_hash(policy.kind, policy_params(policy)),
        summarizer_id=getattr(summarizer, "summarizer_id", None) if summarizer is not None else None,
        config=cfg,
        outcome=outcome,
        terminated_by=terminated,
        declared_done=declared_done,
        steps=tuple(records),
        history=tuple(session.history),
        ledger=tuple(world.ledger),
        ground_truth=truth,
        tools=tools,
        system_prompt=system_prompt,
        task_prompt=task_prompt,
        context_window_tokens=window,
        invented_values=invented,
        loop_reason=loop_reason,
        facts_at_need=_facts_at_need(truth, actions, views, tools),
        views=tuple(views),
        results=tuple(results.get(r.step, "") for r in records),
    )


def _step_fields(step: int, req: CallRequest, *, raw_tokens_sent: int) -> dict[str, Any]:
    """The fields of a :class:`StepRecord` the call step measured."""
    st = req.stats
    return {
        "step": step,
        "raw_tokens_sent": raw_tokens_sent,
        "history_messages": st.history_messages,
        "history_tokens": st.history_tokens,
        "view_messages": st.msgs_after,
        "view_tokens": st.view_tokens,
        "tokens_sent": st.tokens_sent,
        "tier_name": st.tier_name,
        "compacted": st.compacted,
        "forced_compactions": req.forced_compactions,
        "protocol_errors": len(protocol_errors(req.view)),
        "summarizer_calls": st.summarizer_calls,
        "summarizer_input_tokens": st.summarizer_input_tokens,
        "summarizer_output_tokens": st.summarizer_output_tokens,
        "summarizer_cost_usd": st.summarizer_cost_usd,
        "summarizer_batched_calls": st.summarizer_batched_calls,
    }


@dataclass(frozen=True)
class _ToolRun:
    """One executed tool call as the episode books it."""

    content: str
    is_error: bool
    refetch: str
    repeat: bool
    same_result: bool
    redundant: bool


def _execute(
    world: World,
    root: Path,
    call: ToolCall,
    args: Mapping[str, Any],
    view: Sequence[Message],
    originals: dict[str, str],
    executed: dict[tuple[str, str], str],
    read_kinds: set[str],
) -> _ToolRun:
    """Run ``call`` in the world (or serve an offload placeholder's file), and book re-fetches
    and repeats (the result then joins the history through the tool-time hook)."""
    refetch = ""
    path = args.get("path") if call.name == "read_file" else None
    if isinstance(path, str) and path.startswith(OFFLOAD_DIR_PREFIX):
        result = _read_offload(root, path)
        world.record_refetch(path, result)
        if not result.startswith("Error:"):
            stem = posixpath.splitext(posixpath.basename(path))[0]
            full = originals.get(stem)
            # wasted: the full text was readable in the view (the original or an earlier re-fetch)
            in_view = full is not None and any(m.is_tool_result and m.content == full for m in view)
            refetch = "wasted" if in_view else "justified"
    else:
        result = world.step(call.name, dict(args))
    is_error = result.startswith("Error:")
    key = (call.name, call.arguments)
    repeat = key in executed
    same_result = executed.get(key) == result
    # a read-only call that returned exactly what the same call returned before: nothing learned
    redundant = refetch == "" and call.name in read_kinds and same_result
    executed[key] = result
    originals[call.id] = result
    return _ToolRun(result, is_error, refetch, repeat, same_result, redundant)


# -- helpers ------------------------------------------------------------------------------------
def _prefix(nbytes: int) -> str:
    if nbytes <= 0:
        return ""
    return "\n\n" + (_PREFIX_SENTENCE * (nbytes // len(_PREFIX_SENTENCE) + 1))[:nbytes]


def _read_offload(root: Path, path: str) -> str:
    """harness9's read_file on an offload path, confined to the offload folder."""
    norm = posixpath.normpath(path)
    if norm.startswith("..") or posixpath.isabs(norm) or not norm.startswith(OFFLOAD_DIR_PREFIX):
        return f"Error: no such file: {path}"
    target = root / norm
    if target.is_symlink() or not target.is_file():
        return f"Error: no such file: {path}"
    return target.read_text(encoding="utf-8")


def protocol_errors(view: Sequence[Message]) -> list[str]:
    """Tool-pair defects a real API rejects (HTTP 400): every call's result must follow its
    assistant message directly (one each), and no result may stand without its call there."""
    errs: list[str] = []
    i = 0
    n = len(view)
    while i < n:
        m = view[i]
        if m.is_tool_result:
            errs.append(f"result {m.tool_call_id!r} at {i} does not follow its call")
            i += 1
            continue
        i += 1
        if m.is_assistant and m.tool_calls:
            expected = {tc.id for tc in m.tool_calls}
            seen: set[str] = set()
            while i < n and view[i].is_tool_result:
                rid = view[i].tool_call_id
                if rid not in expected or rid in seen:
                    errs.append(f"result {rid!r} at {i} has no pending call")
                seen.add(rid)
                i += 1
            errs.extend(f"call {cid!r} has no result" for cid in sorted(expected - seen))
    return errs


def _leaves(value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, bool) or value is None:
        return
    else:
        yield str(value)


def _haystack(view: Sequence[Message], tools: Sequence[Mapping[str, Any]], system_prompt: str) -> str:
    parts = [system_prompt, json.dumps([dict(t) for t in tools], ensure_ascii=False)]
    for m in view:
        parts.append(m.content)
        parts.extend(tc.arguments for tc in m.tool_calls)
    return "\n".join(parts)


def invented_values(
    action: Action, view: Sequence[Message], tools: Sequence[Mapping[str, Any]], system_prompt: str
) -> tuple[str, ...]:
    """Argument values of ``action`` found nowhere in the view, the tool specs or the system prompt."""
    hay = _haystack(view, tools, system_prompt)
    return tuple(v for v in _leaves(action.args) if v and v not in hay)


def _facts_at_need(
    truth: Sequence[GroundFact],
    actions: Sequence[Action],
    views: Sequence[tuple[Message, ...]],
    tools: Sequence[Mapping[str, Any]],
) -> tuple[tuple[str, bool], ...]:
    out = []
    for f in truth:
        i = next(
            (
                k
                for k, a in enumerate(actions)
                if a.tool in f.consumed_by
                and (not f.cue or f.cue in a.arguments or (views[k] and f.cue in views[k][-1].content))
            ),
            None,
        )
        if i is None:
            continue
        out.append((f.fact_id, f.value in _haystack(views[i], tools, "")))
    return tuple(out)


# -- the oracle ---------------------------------------------------------------------------------
def run_oracle(world: World | str, agent: Agent, *, seed: int, **kwargs: Any) -> Episode:
    """The same episode under ``keep_all``: the step count excess steps are measured against."""
    return run_episode(world, agent, make_policy("keep_all"), seed=seed, summarizer=None, **kwargs)


def excess_steps(episode: Episode, oracle: Episode) -> int:
    """Steps beyond the ``keep_all`` oracle of the same world, parameters, seed and agent."""
    key = (episode.world_kind, dict(episode.world_params), episode.seed, episode.agent_id)
    okey = (oracle.world_kind, dict(oracle.world_params), oracle.seed, oracle.agent_id)
    if key != okey:
        raise ConfigError(
            f"oracle {okey!r} does not pair with episode {key!r} (world, params, seed and agent must match)"
        )
    if oracle.policy_kind != "keep_all":
        raise ConfigError(f"the oracle must be a keep_all episode, got policy {oracle.policy_kind!r}")
    return episode.n_steps - oracle.n_steps
