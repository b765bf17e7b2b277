"""Closed-loop worlds: deterministic, seeded, pure-Python environments with hidden state.

``make_world("fact_chain", hops=4)`` builds one; ``world_registry()`` lists them.
"""

from h9eval.closedloop.worlds.base import (
    FACT_POSITIONS,
    GroundFact,
    LedgerEntry,
    Outcome,
    Subgoal,
    Violation,
    World,
    WorldParams,
    make_world,
    parse_world_spec,
    register_world,
    world_registry,
)

__all__ = [
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
