"""Closed-loop agents: the scripted agent (offline default) and the live Anthropic agent."""

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

__all__ = ["PROFILES", "Action", "Agent", "AgentError", "AnthropicAgent", "CallUsage", "Cassette", "ReaderProfile", "ScriptedAgent", "parse_view", "serialize_view"]
