"""Closed-loop agents: the scripted agent (offline default) and the live Anthropic agent.

``make_agent("scripted")``, ``make_agent("scripted:raw_only")``,
``make_agent("anthropic", cassette="x.jsonl")`` build one from the CLI's ``--agent`` form.
"""

from typing import Any

from h9eval.closedloop.agents.base import (
    Action,
    Agent,
    AgentError,
    CallUsage,
    parse_view,
    serialize_view,
)
from h9eval.closedloop.agents.live import AnthropicAgent, Cassette
from h9eval.closedloop.agents.reading import PROFILES, ReaderProfile
from h9eval.closedloop.agents.scripted import ScriptedAgent
from h9eval.core.anthropic import CallLimits
from h9eval.core.errors import ConfigError, did_you_mean

__all__ = [
    "AGENT_KINDS",
    "PROFILES",
    "Action",
    "Agent",
    "AgentError",
    "AnthropicAgent",
    "CallUsage",
    "Cassette",
    "ReaderProfile",
    "ScriptedAgent",
    "make_agent",
    "parse_view",
    "serialize_view",
]

AGENT_KINDS = ("scripted", "anthropic")


def make_agent(spec: str, /, *, call_limits: CallLimits | None = None, **params: Any) -> Agent:
    """An agent from ``KIND[:PROFILE]``: ``scripted`` (profile ``full``), ``scripted:raw_only``,
    ``scripted:last_k``, or ``anthropic`` (``params`` are :class:`AnthropicAgent`'s).
    ``call_limits``: the live agent's request timeout and retries (a scripted agent calls no model)."""
    kind, _, profile = spec.partition(":")
    if kind not in AGENT_KINDS:
        raise ConfigError(did_you_mean(kind, AGENT_KINDS, what="agent"))
    if kind == "scripted":
        if params:
            raise ConfigError(f"the scripted agent takes no parameters, got {sorted(params)}")
        return ScriptedAgent(profile or "full")
    if profile:
        raise ConfigError(f"agent 'anthropic' has no profile, got {spec!r}")
    return AnthropicAgent(**(call_limits.apply(params, who="agent 'anthropic'") if call_limits is not None else params))
