"""Closed-loop worlds: deterministic, seeded, pure-Python environments with hidden state.

``make_world("fact_chain", hops=4)`` builds one; ``world_registry()`` lists them. The built-in
worlds are imported here, explicitly, so the look-ups below always see them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from h9eval.closedloop.worlds.base import (
    FACT_POSITIONS,
    WORLDS,
    GroundFact,
    LedgerEntry,
    Outcome,
    Subgoal,
    Violation,
    World,
    WorldParams,
    WorldScale,
    register_world,
)
from h9eval.closedloop.worlds.artifact_trail import ArtifactTrail
from h9eval.closedloop.worlds.constraints import Constraints
from h9eval.closedloop.worlds.debug_session import DebugSession
from h9eval.closedloop.worlds.evidence_search import EvidenceSearch
from h9eval.closedloop.worlds.fact_chain import FactChain
from h9eval.closedloop.worlds.mini_repo import MiniRepo
from h9eval.closedloop.worlds.retail_db import RetailDb
from h9eval.closedloop.worlds.ticket_queue import TicketQueue
from h9eval.core.errors import ConfigError

__all__ = [
    "ArtifactTrail",
    "Constraints",
    "DebugSession",
    "EvidenceSearch",
    "RetailDb",
    "WorldScale",
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
    "WORLDS",
    "make_world",
    "parse_world_spec",
    "register_world",
    "world_registry",
]


def world_registry() -> dict[str, type[World]]:
    """All registered worlds by kind."""
    return dict(WORLDS.items())


def make_world(kind: str, /, **params: Any) -> World:
    """A world by kind with validated parameters; unknown names get did-you-mean errors and a
    value of the wrong basic type (``hops="3"`` from a config file) an error naming the field,
    by the rule policies follow (:func:`h9eval.core.registry.check_param_types`)."""
    cls = WORLDS.get(kind)
    WORLDS.check_params(kind, params, [f.name for f in dataclasses.fields(cls.params_type) if f.init])
    WORLDS.check_param_types(kind, cls.params_type, params)
    return cls(cls.params_type(**params))


def parse_world_spec(text: str) -> tuple[str, int]:
    """``"fact_chain:7"`` -> ``("fact_chain", 7)`` (the CLI's ``--world`` form)."""
    kind, sep, seed = text.partition(":")
    if not sep or not seed.strip().lstrip("-").isdigit():
        raise ConfigError(f"--world must be KIND:SEED (an integer seed), got {text!r}")
    WORLDS.get(kind)
    return kind, int(seed)
