"""The closed loop's entry points: :func:`run_world` (one episode, as ``h9eval run --world`` and a notebook run
it), :func:`run_episodes` (a grid of them) and :func:`format_episode` (what ``h9eval run --world`` prints).
Each builds its :class:`~h9eval.runs.spec.RunSpec` (:func:`world_spec`) and runs it with
:func:`~h9eval.runs.execute.execute`, so an episode started here has the spec and run id of a sweep's
episode cell of the same inputs. Kept apart from :mod:`h9eval.runs.run`: a task run does not load the
closed loop's worlds and agents."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from h9eval.closedloop.agents import Agent, agent_spec, make_agent, parse_agent_spec
from h9eval.closedloop.episode import stress_settings
from h9eval.closedloop.worlds import WORLDS, make_world, parse_world_spec
from h9eval.compaction.base import Policy
from h9eval.compaction.summary import Summarizer
from h9eval.core.anthropic import CallLimits
from h9eval.core.errors import ConfigError
from h9eval.runs.execute import RunEnv, RunObjects, RunResult, execute
from h9eval.runs.run import policy_ref, summarizer_ref
from h9eval.runs.spec import RunSpec, WorldRef
from h9eval.runs.window import window_value
from h9eval.summarizers.registry import DEFAULT_SUMMARIZER

__all__ = ["SCALES", "format_episode", "run_episodes", "run_world", "world_spec"]

SCALES = ("default", "small")
"""A world's scale: ``default`` (the family's: its parameters, window and step budget, the length real
sessions run) or ``small`` (the parameters as given, a 60-step budget, the run's window)."""


def world_spec(
    world: str,
    *,
    agent: str = "scripted",
    agent_params: Mapping[str, Any] | None = None,
    policy: str | Policy = "progressive",
    params: Mapping[str, Any] | None = None,
    name: str = "",
    world_params: Mapping[str, Any] | None = None,
    summarizer: str | Summarizer | None = DEFAULT_SUMMARIZER,
    history_mode: str = "view",
    writeback_rules: str = "v3",
    window: int | None = None,
    max_steps: int | None = None,
    oracle: bool | None = None,
    scale: str = "small",
    stress: Mapping[str, Any] | None = None,
    billing: Mapping[str, Any] | None = None,
    repeat: int = 0,
    call_limits: CallLimits | None = None,
) -> tuple[RunSpec, RunObjects]:
    """The run spec of :func:`run_world` (and the objects the caller gave).

    Args:
        world: ``KIND:SEED``.
        agent: a :func:`~h9eval.closedloop.agents.make_agent` form; ``agent_params``: parameters added to it
            (e.g. ``{"cassette": "x.jsonl"}`` for ``anthropic``).
        policy: a registered kind or a policy object; ``params``: its parameters (with a kind); ``name``: its label.
        world_params: world parameters (over the scale's).
        summarizer: a registered name, ``None``/``"none"``, or a summarizer object.
        history_mode, writeback_rules: as for a replay.
        window: the run's window (tokens); default: the scale's (``default``), else the policy's own.
        max_steps: the episode's step bound (default: the scale's, or 60).
        oracle: run the ``keep_all`` oracle (default: for scripted agents only).
        scale: :data:`SCALES`: ``default`` (the family's default scale) or ``small`` (the parameters as given).
        stress: :class:`~h9eval.closedloop.episode.StressSettings` fields.
        billing: the ``[billing]`` table; ``repeat``: the repeat index.
        call_limits: the live agent's request limits, when ``agent_params`` hold what a spec cannot name
            (a key, a client object: the agent is then built here).

    Returns:
        ``(spec, objects)``.
    """
    kind, seed = parse_world_spec(world)
    if scale not in SCALES:
        raise ConfigError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    family = WORLDS.get(kind).scale if scale == "default" else None
    wparams = {**(family.params if family else {}), **dict(world_params or {})}
    make_world(kind, **wparams)  # refuse a bad parameter before anything runs
    a_kind, profile, given = parse_agent_spec(agent)
    # parameters a spec can name go into the agent's form; a key or a client object is never written
    # into one: the agent is built here with them and handed to the run as an object
    extra = dict(agent_params or {})
    named = {k: v for k, v in extra.items() if k != "api_key" and isinstance(v, str | int | float | bool)}
    agent_form = agent_spec(a_kind, profile, {**given, **named})
    built = make_agent(agent, call_limits=call_limits, **extra) if len(named) < len(extra) else None
    if built is None:
        make_agent(agent_form)  # an unknown agent or parameter is refused here
    stress_settings(stress or {})
    pref, pobj = policy_ref(policy, params, name=name)
    sref, sobj = summarizer_ref(summarizer)
    # the family's window places the policy when the run sets none (as a sweep's world entry does)
    world_window = family.window_tokens if family is not None and window is None else None
    spec = RunSpec(
        task=WorldRef(kind=kind, params=wparams, seed=seed, window=world_window),
        policy=pref,
        loop="episode",
        window=window_value(window),
        history_mode=history_mode,
        writeback_rules=writeback_rules,
        summarizer=sref,
        agent=agent_form,
        max_steps=max_steps if max_steps is not None else family.max_steps if family else 60,
        stress=dict(stress or {}),
        oracle=oracle,
        billing=dict(billing or {}),
        repeat=repeat,
    )
    spec.identity()  # the window rule and the parameters, before anything runs
    return spec, RunObjects(policy=pobj, summarizer=sobj, agent=built)


def run_world(
    world: str,
    *,
    agent: str = "scripted",
    agent_params: Mapping[str, Any] | None = None,
    policy: str | Policy = "progressive",
    params: Mapping[str, Any] | None = None,
    name: str = "",
    world_params: Mapping[str, Any] | None = None,
    summarizer: str | Summarizer | None = DEFAULT_SUMMARIZER,
    summarizer_cache: str | os.PathLike[str] | None = None,
    history_mode: str = "view",
    writeback_rules: str = "v3",
    window: int | None = None,
    max_steps: int | None = None,
    oracle: bool | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    scale: str = "small",
    stress: Mapping[str, Any] | None = None,
    call_limits: CallLimits | None = None,
    billing: Mapping[str, Any] | None = None,
    agent_object: Agent | None = None,
) -> RunResult:
    """Run one closed-loop episode of ``world`` (``KIND:SEED``) with ``agent`` through ``policy``, and its
    ``keep_all`` oracle (for excess steps).

    With ``out_dir`` it writes ``episodes.parquet`` (one row of the ``episodes`` table), ``calls.parquet``,
    ``ledger.parquet`` and ``diffs.parquet``, ``episode.json`` and a ``manifest.json`` holding the run's spec.

    Args:
        world, agent, agent_params, policy, params, name, world_params, summarizer, history_mode,
            writeback_rules, window, max_steps, oracle, scale, stress, billing: as :func:`world_spec`.
        summarizer_cache: the SQLite response cache of a model summarizer.
        out_dir: the episode's folder.
        call_limits: the request timeout and retries of the live agent and a model summarizer.
        agent_object: an agent already built for ``agent`` (a notebook's own scripted profile).

    Returns:
        The :class:`~h9eval.runs.execute.RunResult` (its ``episode`` and ``oracle_steps``).
    """
    spec, objects = world_spec(
        world,
        agent=agent,
        agent_params=agent_params,
        policy=policy,
        params=params,
        name=name,
        world_params=world_params,
        summarizer=summarizer,
        history_mode=history_mode,
        writeback_rules=writeback_rules,
        window=window,
        max_steps=max_steps,
        oracle=oracle,
        scale=scale,
        stress=stress,
        billing=billing,
        call_limits=call_limits,
    )
    env = RunEnv(
        out_dir=None if out_dir is None else Path(out_dir),
        summarizer_cache=None if summarizer_cache is None else str(summarizer_cache),
        call_limits=call_limits,
        objects=RunObjects(policy=objects.policy, summarizer=objects.summarizer, agent=agent_object or objects.agent),
    )
    return execute(spec, env)


def run_episodes(
    worlds: Sequence[tuple[str, Mapping[str, Any], Sequence[int]]],
    agents: Sequence[str],
    policies: Sequence[str | Policy],
    **kwargs: Any,
) -> list[RunResult]:
    """Every (world, seed) x agent x policy episode, in that order, serially.

    Args:
        worlds: ``(kind, params, seeds)`` (a sweep's ``[tasks] worlds`` entries).
        agents: agent forms.
        policies: kinds or policy objects (add ``keep_all`` for excess steps).
        **kwargs: the other arguments of :func:`run_world` (``scale="small"`` for the parameters as given).

    Returns:
        The runs.
    """
    out = []
    for kind, params, seeds in worlds:
        for seed in seeds:
            for agent in agents:
                for pol in policies:
                    out.append(run_world(f"{kind}:{seed}", agent=agent, policy=pol, world_params=params, **kwargs))
    return out


_SHOWN = (
    "success",
    "failure",
    "terminated_by",
    "steps",
    "excess_steps",
    "subgoals_reached",
    "subgoals_total",
    "n_compactions",
    "first_compaction_step",
    "tokens_sent_sum",
    "tokens_sent_peak",
    "summarizer_calls",
    "summarizer_cost_usd",
    "cost_usd",
    "cache_read_share",
    "refetches_justified",
    "refetches_wasted",
    "redundant_read_calls",
    "duplicate_side_effects",
    "violations_before_compaction",
    "violations_after_compaction",
    "hallucinated_completion",
    "protocol_errors",
    "facts_present_at_need",
    "facts_needed",
)


def format_episode(run: RunResult) -> str:
    """The summary ``h9eval run --world`` prints: the run id, then one measure a line.

    Args:
        run: an episode's result.

    Returns:
        The text.
    """
    if run.episodes is None or run.episode is None:
        raise ConfigError(f"{run.run_id}: not an episode")
    row = run.episodes.iloc[0].to_dict()
    lines = [f"episode {run.run_id}" + (f" -> {run.out_dir}" if run.out_dir is not None else "")]

    import pandas as pd

    def shown(k: str) -> Any:
        v = row[k]
        unknown = v is None or bool(pd.isna(v))
        # unknown dollars (an unpriced model) read "unpriced", never nan or $0
        if k.endswith("_usd") and unknown:
            return "unpriced"
        return None if unknown else v

    lines += [f"  {k:>28}: {shown(k)}" for k in _SHOWN]
    if run.episode.loop_reason:
        lines.append(f"  {'loop_reason':>28}: {run.episode.loop_reason}")
    return "\n".join(lines)
