"""Closed-loop evaluation: does an agent with this compaction policy still finish the task?

Open-loop replay asks whether a compacted view still *contains* the intent and facts; here
compaction sits before every model call of a running agent, the agent's next action depends
on the compacted view, and success is checked against a world's hidden state.

* :mod:`h9eval.closedloop.worlds`: deterministic seeded worlds (``fact_chain``, ``mini_repo``,
  ``ticket_queue``) with a call ledger and an :class:`~h9eval.closedloop.worlds.Outcome`;
* :mod:`h9eval.closedloop.agents`: the scripted agent (a pure function of the serialised
  view; offline default) and the live Anthropic agent with a record/replay cassette;
* :mod:`h9eval.closedloop.episode`: :func:`run_episode` and the measures of one episode;
* :mod:`h9eval.closedloop.analysis`: :func:`episodes_frame`, pass^k and the task export;
* :mod:`h9eval.closedloop.rows`: an episode's results rows.

An episode is run by :func:`h9eval.runs.execute.execute` (``h9eval run --world``, a sweep cell,
:func:`h9eval.runs.run.run_world`, one layer up).
"""

from typing import Any

# Lazy (PEP 562): importing the agents must not import the worlds, so that an agent provably
# cannot reach them; the names below resolve on first use.
_EXPORTS = {
    "Action": "h9eval.closedloop.agents",
    "Agent": "h9eval.closedloop.agents",
    "AgentError": "h9eval.closedloop.agents",
    "AnthropicAgent": "h9eval.closedloop.agents",
    "Cassette": "h9eval.closedloop.agents",
    "ReaderProfile": "h9eval.closedloop.agents",
    "ScriptedAgent": "h9eval.closedloop.agents",
    "episodes_frame": "h9eval.closedloop.analysis",
    "family_frame": "h9eval.closedloop.analysis",
    "tier_mix_frame": "h9eval.closedloop.analysis",
    "export_task": "h9eval.closedloop.analysis",
    "pass_hat_k": "h9eval.closedloop.analysis",
    "pass_k_frame": "h9eval.closedloop.analysis",
    "steps_frame": "h9eval.closedloop.analysis",
    "Episode": "h9eval.closedloop.episode",
    "EpisodeConfig": "h9eval.closedloop.episode",
    "StepRecord": "h9eval.closedloop.episode",
    "StressSettings": "h9eval.closedloop.episode",
    "excess_steps": "h9eval.closedloop.episode",
    "run_episode": "h9eval.closedloop.episode",
    "run_oracle": "h9eval.closedloop.episode",
    "make_agent": "h9eval.closedloop.agents",
    "episode_to_dict": "h9eval.closedloop.analysis",
    "episode_ledger": "h9eval.closedloop.ledger",
    "first_touches": "h9eval.closedloop.ledger",
    "Outcome": "h9eval.closedloop.worlds",
    "World": "h9eval.closedloop.worlds",
    "make_world": "h9eval.closedloop.worlds",
    "parse_world_spec": "h9eval.closedloop.worlds",
    "world_registry": "h9eval.closedloop.worlds",
}
__all__ = [
    "Action",
    "Agent",
    "AgentError",
    "AnthropicAgent",
    "Cassette",
    "Episode",
    "EpisodeConfig",
    "Outcome",
    "ReaderProfile",
    "ScriptedAgent",
    "StepRecord",
    "StressSettings",
    "World",
    "episode_ledger",
    "episode_to_dict",
    "episodes_frame",
    "family_frame",
    "tier_mix_frame",
    "excess_steps",
    "export_task",
    "first_touches",
    "make_agent",
    "make_world",
    "parse_world_spec",
    "pass_hat_k",
    "pass_k_frame",
    "run_episode",
    "run_oracle",
    "steps_frame",
    "world_registry",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'h9eval.closedloop' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
