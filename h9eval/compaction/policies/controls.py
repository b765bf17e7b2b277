"""Control policies for the probes: remember everything, or forget everything.

``keep_all`` is the upper bound (no compaction: tier ``NONE`` always) and ``drop_all`` the
lower bound (system message + the last message at every call: tier ``EMERGENCY``, the tier of
harness9's forced truncation, whenever something was dropped; ``NONE`` when there was nothing
to drop). See :mod:`h9eval.compaction._peer` for the tier mapping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.compaction._peer import peer_record
from h9eval.compaction.base import Compaction, CompactionEnv, Policy, PolicyRun, register
from h9eval.compaction.records import Tier
from h9eval.compaction.budget import force_legacy_last1
from h9eval.core.messages import Message
from h9eval.core.tokens import estimate_tokens

__all__ = ["KeepAll", "DropAll"]


@register
@dataclass(frozen=True, kw_only=True)
class KeepAll(Policy):
    """Control: never compact; the view is always the full history (no parameters).

    What a model with an unbounded window would see; the probes' upper bound."""

    kind: ClassVar[str] = "keep_all"
    source: ClassVar[str] = "control: no compaction (upper bound for the probes)"
    claims_budget: ClassVar[bool] = False

    def start(self, env: CompactionEnv | None = None) -> _KeepAllRun:
        return _KeepAllRun(env or CompactionEnv())


class _KeepAllRun(PolicyRun):
    def __init__(self, env: CompactionEnv) -> None:
        self.env = env

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        start_ns = self.env.clock.now_ns()
        tb = tokens if tokens is not None else estimate_tokens(history)
        return Compaction(
            tuple(history), peer_record(self.env, history, history, Tier.NONE, tokens_before=tb, start_ns=start_ns)
        )

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._auto(history)


@register
@dataclass(frozen=True, kw_only=True)
class DropAll(Policy):
    """Control: forget everything; keep the system message and the last message (no parameters).

    Exactly harness9's legacy forced truncation (``legacy_last1``): system + last message, then
    the tool pairs are repaired, so a last message that is a tool result is dropped too (its
    call is gone) and the view is the system message alone. Applied at every call; the probes'
    lower bound. Tier ``EMERGENCY`` whenever something was dropped.
    """

    kind: ClassVar[str] = "drop_all"
    source: ClassVar[str] = "control: forget everything but the system and last message (lower bound)"
    claims_budget: ClassVar[bool] = False

    def start(self, env: CompactionEnv | None = None) -> _DropAllRun:
        return _DropAllRun(env or CompactionEnv())


class _DropAllRun(PolicyRun):
    def __init__(self, env: CompactionEnv) -> None:
        self.env = env

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        start_ns = self.env.clock.now_ns()
        tb = tokens if tokens is not None else estimate_tokens(history)
        out = force_legacy_last1(history)
        tier = Tier.EMERGENCY if out != list(history) else Tier.NONE
        return Compaction(tuple(out), peer_record(self.env, history, out, tier, tokens_before=tb, start_ns=start_ns))

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._auto(history)
