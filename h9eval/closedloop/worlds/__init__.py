"""Closed-loop worlds: deterministic, seeded, pure-Python environments with hidden state.

``make_world("fact_chain", hops=4)`` builds one; ``world_registry()`` lists them. The built-in
worlds are imported here, explicitly, so the look-ups below always see them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from h9eval.closedloop.worlds.base import _WORLDS
from h9eval.closedloop.worlds.base import (
    FACT_POSITIONS,
    GroundFact,
    LedgerEntry,
    Outcome,
    Subgoal,
    Violation,
    World,
    WorldParams,
    register_world,
)
from h9eval.closedloop.worlds.fact_chain import FactChain
from h9eval.closedloop.worlds.mini_repo import MiniRepo
from h9eval.closedloop.worlds.ticket_queue import TicketQueue
from h9eval.core.errors import ConfigError, did_you_mean

__all__ = [
    "FactChain",
    "MiniRepo",
    "TicketQueue",
    "FACT_POSITIONS",
    "GroundFact",
    "LedgerEntry",
    "Outcome",
    "Subgoal",
    "Violation",
    "World",
    "WorldParams",
    "make_world",
    "parse_world_spec",
    "register_world",
    "world_registry",
]


def world_registry() -> dict[str, type[World]]:
    """All registered worlds by kind."""
    return dict(sorted(_WORLDS.items()))


def make_world(kind: str, /, **params: Any) -> World:
    """A world by kind with validated parameters; unknown names get did-you-mean errors."""
    reg = world_registry()
    if kind not in reg:
        raise ConfigError(did_you_mean(kind, reg, what="world"))
    cls = reg[kind]
    names = [f.name for f in dataclasses.fields(cls.params_type) if f.init]
    for k in params:
        if k not in names:
            raise ConfigError(did_you_mean(k, names, what=f"parameter of world {kind!r}"))
    defaults = {f.name: f.default for f in dataclasses.fields(cls.params_type)}
    for k, v in params.items():
        # a wrong basic type (``hops="3"`` from a config file) fails here, naming the field
        d = defaults[k]
        if v is None:
            continue  # optional fields: the params' own validation decides
        want = bool if isinstance(d, bool) else int if isinstance(d, int) else str if isinstance(d, str) else None
        if want is not None and (not isinstance(v, want) or (want is int and isinstance(v, bool))):
            raise ConfigError(f"world {kind!r}: {k} must be {want.__name__}, got {v!r}")
    return cls(cls.params_type(**params))


def parse_world_spec(text: str) -> tuple[str, int]:
    """``"fact_chain:7"`` -> ``("fact_chain", 7)`` (the CLI's ``--world`` form)."""
    kind, sep, seed = text.partition(":")
    if not sep or not seed.strip().lstrip("-").isdigit():
        raise ConfigError(f"--world must be KIND:SEED (an integer seed), got {text!r}")
    world_registry_kinds = world_registry()
    if kind not in world_registry_kinds:
        raise ConfigError(did_you_mean(kind, world_registry_kinds, what="world"))
    return kind, int(seed)
