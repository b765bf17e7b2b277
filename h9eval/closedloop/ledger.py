"""The loss ledger of a closed-loop episode: what each compaction kept, lost or left stale of what
the world planted, and the agent's first later action that touched a lost item.

The items are the world's ground truth (:meth:`~h9eval.closedloop.worlds.World.ground_truth`),
each with the type its world gives it (:data:`h9eval.probes.items.ITEM_TYPES`: facts, rules and
constraints, preferences, superseded values, artifacts, failed approaches, progress) and the text
a view must hold for it to count as kept (``item_value``, else the value). The rounds and the
states are the open-loop ledger's (:mod:`h9eval.probes.ledger`, not restated here), with
positions counted in calls, since an episode has no fixed transcript (a write-back rewrites it):

* an item is introduced at the first call whose view holds its text (an item never shown to the
  agent is not tracked: no view could keep it), and one that a later fact ``supersedes`` is
  current until that fact appears (then a view showing only the old text is STALE);
* ``compaction`` rounds are the episode's own view rewrites and ``fill`` rounds the calls where
  everything that arrived (``raw_tokens_sent``: the history had nothing been compacted) first
  reaches k windows (a ``keep_all`` episode has fill rounds too);
* ``next_use_call`` of a LOST, STALE or DEGRADED item is the first call at or after the round
  whose action touched it, as the world saw it: a rule the item states was broken, a call that
  needed the item (the first call of a tool that consumes it, with its cue: the point of need
  ``facts_at_need`` uses), or a call whose arguments or (full) result
  hold its value (a re-read: a read, or a repeated call; a redone side effect; another use).
  :func:`first_touches` describes each touch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from h9eval.closedloop.episode import Episode
from h9eval.closedloop.worlds.base import GroundFact
from h9eval.probes.items import Item
from h9eval.probes.ledger import LedgerEvent, classify_events, events_from_replay, fill_events

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TOUCH_KINDS", "Touch", "episode_events", "episode_items", "episode_ledger", "first_touches"]


def _texts(m: Any) -> str:
    return m.content + "".join("\n" + tc.arguments for tc in m.tool_calls)


def episode_items(episode: Episode) -> list[Item]:
    """The episode's typed items (see the module docstring), in order of introduction."""
    wanted = {f.fact_id: (f.item_value or f.value) for f in episode.ground_truth}
    introduced: dict[str, int] = {}
    seen: set[int] = set()
    for call, view in enumerate(episode.views):
        for m in view:
            if id(m) in seen:
                continue
            seen.add(id(m))
            text = _texts(m)
            for fid, value in wanted.items():
                if fid not in introduced and value and value in text:
                    introduced[fid] = call
        if len(introduced) == len(wanted):
            break
    facts = {f.fact_id: f for f in episode.ground_truth}
    replaced_by = {f.supersedes: f.fact_id for f in episode.ground_truth if f.supersedes}
    items = []
    for f in episode.ground_truth:
        if f.fact_id not in introduced:
            continue
        old = facts.get(f.supersedes)
        newer = replaced_by.get(f.fact_id)
        items.append(
            Item(
                item_id=f.fact_id,
                item_type=f.item_type,
                value=wanted[f.fact_id],
                introduced_at=introduced[f.fact_id],
                until=introduced.get(newer) if newer else None,
                stale_values=(wanted[old.fact_id],) if old is not None else (),
                text=f.question,
            )
        )
    return sorted(items, key=lambda i: (i.introduced_at, i.item_id))


def _steps_frame(episode: Episode) -> pd.DataFrame:
    import pandas as pd

    # positions count calls: the event's message_index (one before the frame's) is its call
    return pd.DataFrame(
        {
            "call_index": [s.step - 1 for s in episode.steps],
            "message_index": [s.step for s in episode.steps],
            "compacted": [s.compacted for s in episode.steps],
            "tier_name": [s.tier_name for s in episode.steps],
            "raw_tokens_sent": [s.raw_tokens_sent for s in episode.steps],
            "context_window_tokens": [episode.context_window_tokens] * len(episode.steps),
        }
    )


def episode_events(episode: Episode) -> list[LedgerEvent]:
    """The episode's ledger rounds on both bases (:data:`h9eval.probes.ledger.BASES`), fill first.
    Needs the episode's views (every episode run here keeps them)."""
    frame = _steps_frame(episode)
    views = list(episode.views)
    return fill_events(frame, views) + events_from_replay(frame, views)


TOUCH_KINDS: tuple[str, ...] = ("rule broken", "redone", "needed", "re-read", "used")
"""How an action touched an item, the most telling first."""


@dataclass(frozen=True, kw_only=True)
class Touch:
    """An action of the episode that touched an item, as the world saw it."""

    call_index: int
    #: one of :data:`TOUCH_KINDS`
    kind: str
    #: the call (``tool {arguments}``) and, for a broken rule, the world's account of it
    detail: str


def _touches(episode: Episode, fact: GroundFact, item: Item) -> list[Touch]:
    out = []
    for v in episode.outcome.violations:
        if v.rule in fact.breaks:
            out.append(Touch(call_index=v.step - 1, kind="rule broken", detail=f"{v.rule}: {v.detail}"))
    kinds = {e.step: e.kind for e in episode.ledger}
    earlier: set[tuple[str, str]] = set()
    needed = False
    for s, result in zip(episode.steps, episode.results):
        if not s.tool:
            continue
        call = f"{s.tool} {s.arguments}"
        key = (s.tool, s.arguments)
        if (
            not needed
            and s.step - 1 >= item.introduced_at
            and s.tool in fact.consumed_by
            and (not fact.cue or fact.cue in s.arguments)
        ):
            # the point of need: the first call of a tool that consumes the item once it is known
            needed = True
            out.append(Touch(call_index=s.step - 1, kind="needed", detail=call))
        elif item.value in s.arguments or item.value in result:
            # a call that names the item, or whose result brings it back into view
            kind = kinds.get(s.step, "")
            what = (
                "redone"
                if key in earlier and kind == "side_effect"
                else "re-read"
                if key in earlier or kind in ("read", "refetch")
                else "used"
            )
            out.append(Touch(call_index=s.step - 1, kind=what, detail=call))
        earlier.add(key)
    # one call may touch an item several ways: the most telling first
    return sorted(out, key=lambda t: (t.call_index, TOUCH_KINDS.index(t.kind)))


def first_touches(episode: Episode, items: Sequence[Item] | None = None) -> dict[str, list[Touch]]:
    """Every touch of each item (item id -> touches in call order; see the module docstring)."""
    facts = {f.fact_id: f for f in episode.ground_truth}
    return {
        i.item_id: _touches(episode, facts[i.item_id], i)
        for i in (items if items is not None else episode_items(episode))
    }


def episode_ledger(episode: Episode, *, run_id: str, task_id: str) -> list[dict[str, Any]]:
    """The ``ledger`` table's rows of an episode (:data:`h9eval.results.schema.LEDGER_COLUMNS`)."""
    items = episode_items(episode)
    touches = first_touches(episode, items)

    def next_use(item: Item, ev: LedgerEvent) -> int | None:
        return next((t.call_index for t in touches[item.item_id] if t.call_index >= ev.call_index), None)

    return classify_events(
        episode_events(episode),
        items,
        task_id=task_id,
        run_id=run_id,
        pinned_text=episode.system_prompt + "\n" + episode.task_prompt,
        next_use=next_use,
    )
