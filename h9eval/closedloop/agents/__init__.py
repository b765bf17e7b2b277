"""Closed-loop agents: the scripted agent (offline default) and the live Anthropic agent.

``make_agent("scripted")``, ``make_agent("scripted:raw_only")``,
``make_agent("anthropic", cassette="x.jsonl")`` build one from the CLI's ``--agent`` form.
"""

import inspect
from collections.abc import Mapping
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
from h9eval.closedloop.agents.scripted import PHRASINGS, ScriptedAgent
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
    "agent_spec",
    "make_agent",
    "parse_agent_spec",
    "PHRASINGS",
    "parse_view",
    "serialize_view",
]

AGENT_KINDS = ("scripted", "anthropic")
#: the live agent's numeric parameters (a string form carries every value as text)
_NUMERIC: dict[str, type] = {
    "max_tokens": int,
    "max_retries": int,
    "temperature": float,
    "timeout_s": float,
    "breaker_failures": int,
}


def make_agent(spec: str, /, *, call_limits: CallLimits | None = None, **params: Any) -> Agent:
    """An agent from ``KIND[:PROFILE][,KEY=VALUE...]`` (the CLI's ``--agent`` and a sweep's
    ``agents`` form): ``scripted`` (profile ``full``), ``scripted:raw_only``,
    ``scripted:last_k,phrasing=alt``, ``anthropic``, ``anthropic:cassette=x.jsonl,mode=replay``.
    ``params`` add to those in the form (:class:`ScriptedAgent`'s ``phrasing``;
    :class:`AnthropicAgent`'s parameters). ``call_limits``: the live agent's request timeout and
    retries (a scripted agent calls no model)."""
    kind, profile, given = parse_agent_spec(spec)
    if kind not in AGENT_KINDS:
        raise ConfigError(did_you_mean(kind, AGENT_KINDS, what="agent"))
    both = {**given, **params}
    if kind == "scripted":
        unknown = [k for k in both if k != "phrasing"]
        if unknown:
            raise ConfigError(did_you_mean(unknown[0], ["phrasing"], what="parameter of agent 'scripted'"))
        return ScriptedAgent(profile or "full", **both)
    if profile:
        raise ConfigError(f"agent 'anthropic' has no profile, got {spec!r}")
    if "api_key" in given:
        raise ConfigError(f"agent {spec!r}: never write an API key into an agent spec; set ANTHROPIC_API_KEY")
    accepted = [n for n in inspect.signature(AnthropicAgent.__init__).parameters if n != "self"]
    for k in both:
        if k not in accepted:
            raise ConfigError(did_you_mean(k, accepted, what="parameter of agent 'anthropic'"))
    for k, conv in _NUMERIC.items():
        if isinstance(given.get(k), str) and k not in params:
            try:
                both[k] = conv(given[k])
            except ValueError:
                raise ConfigError(f"agent {spec!r}: {k} must be a number, got {given[k]!r}") from None
    return AnthropicAgent(
        **(call_limits.apply(both, who="agent 'anthropic'", part="agent") if call_limits is not None else both)
    )


def parse_agent_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """``"scripted:raw_only,phrasing=alt"`` -> ``("scripted", "raw_only", {"phrasing": "alt"})``."""
    kind, _, rest = spec.partition(":")
    profile = ""
    params: dict[str, str] = {}
    for part in (p.strip() for p in rest.split(",")) if rest else ():
        key, eq, value = part.partition("=")
        if eq:
            if not key.strip() or key.strip() in params:
                raise ConfigError(f"agent {spec!r}: {part!r} must be KEY=VALUE with a new key")
            params[key.strip()] = value.strip()
        elif profile or not part:
            raise ConfigError(f"agent {spec!r}: expected KIND[:PROFILE][,KEY=VALUE...], got a second profile {part!r}")
        else:
            profile = part
    return kind, profile, params


def agent_spec(kind: str, profile: str = "", params: Mapping[str, Any] | None = None) -> str:
    """The string form of an agent (keys sorted): what a sweep's table form ``{kind, profile,
    params}`` is stored as, so a cell names its agent in one string."""
    parts = ([profile] if profile else []) + [f"{k}={v}" for k, v in sorted((params or {}).items())]
    for p in parts:
        if "," in p or (":" in p and "=" not in p):
            raise ConfigError(f"agent {kind!r}: a profile or parameter value may not contain ',' ({p!r})")
    return kind + (":" + ",".join(parts) if parts else "")
