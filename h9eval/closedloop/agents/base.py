"""What the episode hands an agent and what it gets back.

An agent sees one thing: ``view_json``, a JSON text serialising that step's compacted view
(``{"messages": [...], "tools": [...]}``, messages in FORMAT.md §2.1 form). It is a string, so
the agent cannot mutate the episode's messages or reach the world object behind them. The
agent answers with an :class:`Action`: a tool call (``tool`` and canonical-JSON
``arguments``) or ``done`` (no tool call), plus a free-text ``note`` that becomes the
assistant message's content, so an agent's memory lives in the transcript where compaction can
remove it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from h9eval.core.errors import H9Error
from h9eval.core.messages import Message
from h9eval.core.messages import messages_from_json

__all__ = ["Action", "Agent", "AgentError", "CallUsage", "ViewSerializer", "parse_view", "serialize_view"]


class AgentError(H9Error):
    """An agent could not produce an action (an API failure, a cassette miss in replay)."""


@dataclass(frozen=True, slots=True)
class CallUsage:
    """Tokens of one model call as the provider reported them (zeros for scripted agents)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    #: list-price cost of the call (0.0 when the model's price is unknown)
    cost_usd: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Action:
    """One agent step: a tool call, or ``done`` when ``tool`` is ``None``."""

    note: str = ""
    tool: str | None = None
    #: the call's arguments as canonical JSON text (sorted keys, compact)
    arguments: str = "{}"
    usage: CallUsage | None = None

    @property
    def done(self) -> bool:
        return self.tool is None

    @property
    def args(self) -> dict[str, Any]:
        return dict(json.loads(self.arguments))

    @classmethod
    def call(cls, tool: str, note: str = "", **args: Any) -> Action:
        return cls(note=note, tool=tool, arguments=canonical_json(args))

    @classmethod
    def finish(cls, note: str) -> Action:
        return cls(note=note)


def canonical_json(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@runtime_checkable
class Agent(Protocol):
    """Anything that maps a serialised view to an action.

    ``agent_id`` names the agent and its parameters (it keys results and pairing).
    """

    @property
    def agent_id(self) -> str: ...

    def act(self, view_json: str) -> Action: ...


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def serialize_view(view: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> str:
    """The one serialised form every agent receives (sorted keys: equal views, equal text):
    ``{"messages":[...],"tools":[...]}``, compact, each message in FORMAT.md §2.1 form."""
    return _assemble([_dumps(m.to_json()) for m in view], _dumps([dict(t) for t in tools]))


def _assemble(fragments: Sequence[str], tools_json: str) -> str:
    # the text json.dumps gives the whole object (sorted keys: "messages" before "tools")
    return '{"messages":[' + ",".join(fragments) + '],"tools":' + tools_json + "}"


class ViewSerializer:
    """:func:`serialize_view` for the views of one episode, step after step, at a cost that does
    not grow with the history: consecutive views share most messages (frozen values), so each
    message is serialised once, when it first appears, and a step joins the texts."""

    def __init__(self, tools: Sequence[Mapping[str, Any]]) -> None:
        self._tools_json = _dumps([dict(t) for t in tools])
        # keyed by identity (a message's value hash walks its fields); each entry holds its
        # message, so an id is never reused while its entry lives
        self._fragments: dict[int, tuple[Message, str]] = {}

    def __call__(self, view: Sequence[Message]) -> str:
        known = self._fragments
        fresh: dict[int, tuple[Message, str]] = {}
        texts = []
        for m in view:
            entry = known.get(id(m))
            if entry is None:
                entry = (m, _dumps(m.to_json()))
            fresh[id(m)] = entry
            texts.append(entry[1])
        # keep only this view's messages: a later view is built from them and new arrivals
        self._fragments = fresh
        return _assemble(texts, self._tools_json)


@dataclass(frozen=True, slots=True)
class ParsedView:
    messages: tuple[Message, ...]
    tools: tuple[Mapping[str, Any], ...]


def parse_view(view_json: str) -> ParsedView:
    """Back from :func:`serialize_view` (frozen messages; the tools as plain mappings)."""

    d = json.loads(view_json)
    return ParsedView(tuple(messages_from_json(d["messages"], where="view.messages")), tuple(d.get("tools", ())))
