"""Typed items: what a compacted context must keep, with its type, exact value and lifecycle.

Every item a ledger tracks comes from a task's ground truth (:class:`~h9eval.tasks.model.Task`):

==================== ======================================================================
type                 from
==================== ======================================================================
``goal``             the intent's key terms (each term an item; a refinement adds its terms)
``safety_rule``      a ``constraint`` fact or anchor worded as a prohibition ("never", "must
                     not", "do not", "don't": the rule an agent must not break)
``side_constraint``  any other ``constraint`` fact or anchor (a limit to respect)
``user_preference``  a ``preference`` fact
``fact``             an ``identifier`` or ``number`` fact, a ``key_decision`` anchor
``superseded_value`` a fact that replaced an earlier value of the same question: its stale
                     values are the answers it superseded (a view that shows one of them and
                     not the current value is STALE)
``artifact``         an ``artifact`` anchor, a ``path`` fact, a derived ``edited_file_NN`` fact
``failed_approach``  a ``tried_solution`` anchor, a derived ``failed_command_NN`` fact
``progress``         an ``execution_progress`` anchor
``next_step``        a ``next_step`` anchor (live until it is done: ``until_index``)
==================== ======================================================================

Lifecycle: an item is introduced at its message and live until it is superseded (a fact's
``superseded_at``, an anchor's ``until_index``). An anchor whose key terms are all one fact's
answer planted at the same message is that fact (tracked once). Recorded sessions carry only
what their loader derives (goal, artifacts, failed commands): :func:`unavailable_types` says
which types a task cannot have, so a survival curve never reads "nothing lost" for a type that
was never there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from h9eval.tasks.model import Task

__all__ = ["ITEM_TYPES", "Item", "task_items", "unavailable_types"]

ITEM_TYPES: tuple[str, ...] = (
    "goal",
    "safety_rule",
    "side_constraint",
    "user_preference",
    "fact",
    "superseded_value",
    "artifact",
    "failed_approach",
    "progress",
    "next_step",
)
_PROHIBITION = re.compile(r"\b(never|must not|mustn't|do not|don't|not allowed|forbidden)\b", re.IGNORECASE)
_ANCHOR_TYPE = {
    "artifact": "artifact",
    "tried_solution": "failed_approach",
    "execution_progress": "progress",
    "next_step": "next_step",
    "key_decision": "fact",
}
_FACT_TYPE = {"preference": "user_preference", "identifier": "fact", "number": "fact", "path": "artifact"}
MAX_GOAL_TERMS = 6
"""Key terms of the intent tracked as goal items (the most specific first, as the task lists them)."""


@dataclass(frozen=True, kw_only=True)
class Item:
    """One thing a view must keep: ``value`` is what counts as kept (exact, word-bounded)."""

    item_id: str
    item_type: str
    value: str
    """The exact value; :data:`variants` are accepted spellings (case, separators) of it."""
    variants: tuple[str, ...] = ()
    introduced_at: int
    """Transcript index of the message that introduced it."""
    until: int | None = None
    """Exclusive index from which it is no longer current (superseded or done); ``None``: never."""
    stale_values: tuple[str, ...] = ()
    """Earlier values this one replaced (``superseded_value``)."""
    text: str = ""
    """The sentence the item came from (for reports)."""

    def live_at(self, message_index: int) -> bool:
        return self.introduced_at <= message_index and (self.until is None or message_index < self.until)


def _constraint_type(*texts: str) -> str:
    return "safety_rule" if any(_PROHIBITION.search(t) for t in texts if t) else "side_constraint"


def _fact_items(task: Task) -> tuple[list[Item], set[tuple[int, str]]]:
    items: list[Item] = []
    taken: set[tuple[int, str]] = set()
    by_question: dict[str, list[str]] = {}
    for f in sorted(task.facts, key=lambda f: f.message_index):
        earlier = tuple(by_question.get(f.question, ()))
        by_question.setdefault(f.question, []).append(f.answer)
        anchor_text = next(
            (a.text for a in task.anchors if a.message_index == f.message_index and f.answer in a.key_terms), ""
        )
        if earlier:
            kind = "superseded_value"
        elif f.kind == "constraint":
            kind = _constraint_type(f.question, anchor_text)
        elif f.kind == "derived":
            kind = "artifact" if f.fact_id.startswith("edited_file") else "failed_approach"
        else:
            kind = _FACT_TYPE.get(f.kind, "fact")
        items.append(
            Item(
                item_id=f.fact_id,
                item_type=kind,
                value=f.answer,
                variants=tuple(f.variants),
                introduced_at=f.message_index,
                until=f.superseded_at,
                stale_values=earlier,
                text=anchor_text or f.question,
            )
        )
        taken.add((f.message_index, f.answer))
    return items, taken


def task_items(task: Task) -> list[Item]:
    """Every typed item of ``task``, in order of introduction (see the module docstring)."""
    items, taken = _fact_items(task)
    for k, a in enumerate(task.anchors):
        if not a.key_terms or all((a.message_index, t) in taken for t in a.key_terms):
            continue  # the anchor is a fact planted with it: tracked once, as the fact
        if a.kind == "constraint":
            kind = _constraint_type(a.text)
        else:
            kind = _ANCHOR_TYPE.get(a.kind)
        if kind is None:
            continue
        items.append(
            Item(
                item_id=f"{a.kind}_{k:03d}",
                item_type=kind,
                value=a.key_terms[0],
                variants=a.key_terms[1:2],
                introduced_at=a.message_index,
                until=a.until_index,
                text=a.text,
            )
        )
    goal_terms = list(task.intent.key_terms[:MAX_GOAL_TERMS])
    for j, term in enumerate(goal_terms):
        items.append(Item(item_id=f"goal_{j:02d}", item_type="goal", value=term, introduced_at=0, text=term))
    seen = set(goal_terms)
    for k, c in enumerate(task.intent.changes):
        for term in c.key_terms:
            if term not in seen and len(seen) < 2 * MAX_GOAL_TERMS:
                seen.add(term)
                items.append(
                    Item(
                        item_id=f"goal_{len(seen) - 1:02d}",
                        item_type="goal",
                        value=term,
                        introduced_at=c.message_index,
                        text=task.intent.statement_of(k)[:200],  # at most 2 * MAX_GOAL_TERMS times
                    )
                )
    return sorted(items, key=lambda i: (i.introduced_at, i.item_id))


def unavailable_types(task: Task, items: Sequence[Item] | None = None) -> tuple[str, ...]:
    """The item types ``task`` has no item of (a recorded session has no planted constraints)."""
    have = {i.item_type for i in (items if items is not None else task_items(task))}
    return tuple(t for t in ITEM_TYPES if t not in have)
