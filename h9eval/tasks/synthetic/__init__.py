"""Seeded synthetic long-horizon agent sessions with known ground truth (issue 3 §2).

``generate(preset="long", seed=7)`` returns a :class:`~h9eval.tasks.model.Task`: a system
prompt, the user's task statement (a realistic software task in a fictional repository), then
``n_turns`` turns. A *turn* is one assistant message (one model call) with its tool call(s),
each followed by its tool result (``Message(role="tool", tool_call_id=...)``); the last turn
is the agent's final summary without tool calls. User messages in between state facts and
refine the goal.

Ground truth planted along the way:

* **facts** (constraint, identifier, number, path, preference), stated by the user or found in
  a tool output, some later superseded by a new value (``superseded_at``/``superseded_by``);
* **intent changes** (user messages in the middle of the session);
* **anchors**: failed approaches with their error (``tried_solution``), decisions with a
  rationale (``key_decision``), plans (``next_step``, ``until_index`` when done), progress
  milestones (``execution_progress``), constraints and touched files (``artifact``).

Every fact's answer and every anchor/intent-change key term occurs verbatim in the message at
its ``message_index``.

Tool-output sizes follow harness9's two offload thresholds: a share of outputs is above
10,000 bytes and comes from tools the tool-time offload hook handles (not ``read_file``,
``write_file``, ``edit_file``), a share is between 4,000 and 10,000 bytes (offloaded only at
compaction time), a small share are large ``read_file`` outputs (hook-exempt, so they too wait
for compaction) and the rest are small, lognormal. Large sizes are Pareto-distributed.

Layout: :mod:`.spec` (the spec and presets), :mod:`.slots` (fact slots and value makers),
:mod:`.builder` (planning and assembly), :mod:`.content` (the world and tool-output renderers).

Determinism: one ``random.Random(seed)`` drives everything (a second one for bulk text is
seeded from the first); no global randomness, clock or ``hash()`` of strings. The same preset,
seed and overrides give a byte-identical task (checked by a golden hash in the tests).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.tasks.model import Task
from h9eval.tasks.synthetic.builder import GENERATOR_VERSION, SyntheticBuilder
from h9eval.tasks.synthetic.spec import (
    PRESETS,
    SyntheticSpec,
    apply_overrides,
    check_seed,
    spec_overrides,
)

__all__ = [
    "GENERATOR_VERSION",
    "SyntheticSpec",
    "PRESETS",
    "generate",
    "generate_from_spec",
    "generate_many",
]


def generate(preset: str = "small", seed: int = 0, **overrides: Any) -> Task:
    """Generate one session from a named preset; ``overrides`` replace :class:`SyntheticSpec`
    fields (e.g. ``n_turns=200``). Same arguments → byte-identical task.

    Raises :class:`ConfigError` for an unknown preset or field (with a did-you-mean), an
    invalid value, or a seed that is not a non-negative integer.
    """
    if preset not in PRESETS:
        raise ConfigError(did_you_mean(str(preset), PRESETS, what="preset"))
    spec = apply_overrides(PRESETS[preset], overrides)
    return SyntheticBuilder(spec, check_seed(seed), preset, dict(overrides)).build()


def generate_from_spec(spec: SyntheticSpec, seed: int = 0) -> Task:
    """Generate one session from an explicit spec (recorded as preset ``custom``)."""
    if not isinstance(spec, SyntheticSpec):
        raise ConfigError(f"spec must be a SyntheticSpec; got {type(spec).__name__}")
    return SyntheticBuilder(spec, check_seed(seed), "custom", spec_overrides(spec)).build()


def generate_many(preset: str, seeds: Iterable[int], **overrides: Any) -> list[Task]:
    """``[generate(preset, s, **overrides) for s in seeds]``, validating the spec once."""
    if preset not in PRESETS:
        raise ConfigError(did_you_mean(str(preset), PRESETS, what="preset"))
    spec = apply_overrides(PRESETS[preset], overrides)
    return [SyntheticBuilder(spec, check_seed(s), preset, dict(overrides)).build() for s in seeds]
