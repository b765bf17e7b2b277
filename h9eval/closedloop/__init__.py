"""Closed-loop evaluation: does an agent with this compaction policy still finish the task?

Open-loop replay asks whether a compacted view still *contains* the intent and facts; here
compaction sits before every model call of a running agent, the agent's next action depends
on the compacted view, and success is checked against a world's hidden state.

* :mod:`h9eval.closedloop.worlds`: deterministic seeded worlds (``fact_chain``, ``mini_repo``,
  ``ticket_queue``) with a call ledger and an :class:`~h9eval.closedloop.worlds.Outcome`;
* :mod:`h9eval.closedloop.agents`: the scripted agent (a pure function of the serialised
  view; offline default) and the live Anthropic agent with a record/replay cassette;
* :mod:`h9eval.closedloop.episode`: :func:`run_episode` and the measures of one episode;
* :mod:`h9eval.closedloop.analysis`: :func:`episodes_frame`, pass^k and the task export.
"""

from h9eval.closedloop.agents import Action, Agent, AgentError, AnthropicAgent, Cassette, ReaderProfile, ScriptedAgent
from h9eval.closedloop.analysis import episodes_frame, export_task, pass_hat_k, pass_k_frame, steps_frame
from h9eval.closedloop.episode import Episode, EpisodeConfig, StepRecord, StressSettings, excess_steps, run_episode, run_oracle
from h9eval.closedloop.worlds import Outcome, World, make_world, parse_world_spec, world_registry

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
    "episodes_frame",
    "excess_steps",
    "export_task",
    "make_world",
    "parse_world_spec",
    "pass_hat_k",
    "pass_k_frame",
    "run_episode",
    "run_oracle",
    "steps_frame",
    "world_registry",
]
