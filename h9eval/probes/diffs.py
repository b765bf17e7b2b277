"""What each compaction round took out of the view: the rows of the ``diffs`` table.

For each compaction round of a run's ledger (the run's own view rewrites, see
:func:`h9eval.probes.ledger.events_from_replay`): the messages that left the view (previews), the
summary written, the anchors before and after the merge (where ``N/A`` erased a value the previous
summary had), and the items whose state changed, each LOST or STALE one with the first later call
that used it again (and, in a closed-loop episode, what that call did as the world saw it). A run
computes them while it holds its views, so the ledger pages and the report draw them from the stored
table and replay nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from h9eval.compaction.anchors import (
    ANCHOR_TYPES,
    COMPACTION_MARKER,
    EXTRA_ANCHOR_TYPES,
    is_no_information,
    parse_anchors_and_summary,
)
from h9eval.core.messages import Message

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MAX_LEFT_SHOWN", "PREVIEW_CHARS", "compaction_diffs", "item_changes"]

PREVIEW_CHARS = 160
"""Characters of a message that left the view kept in its preview."""
MAX_LEFT_SHOWN = 40
"""Previews kept per round (``n_left`` counts them all): a round that drops a thousand messages is
told by its count, its first previews and its items."""
_ALL_ANCHORS = (*ANCHOR_TYPES, *EXTRA_ANCHOR_TYPES)


def _key(m: Message) -> tuple[str, str, str]:
    return (m.role, m.tool_call_id, m.content)


def _preview(m: Message) -> str:
    text = " ".join(m.content.split())
    calls = "; ".join(f"{tc.name}({tc.arguments[:60]})" for tc in m.tool_calls)
    body = text[:PREVIEW_CHARS] + ("…" if len(text) > PREVIEW_CHARS else "")
    return f"[{m.role}] {body}" + (f" {{calls: {calls}}}" if calls else "")


def _summary_of(view: Sequence[Message]) -> str | None:
    for m in view:
        if COMPACTION_MARKER in m.content:
            return m.content
    return None


def _anchors(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    anchors, _ = parse_anchors_and_summary(text, _ALL_ANCHORS)
    return {a.type: a.content for a in anchors}


def item_changes(ledger: pd.DataFrame, described: Mapping[tuple[str, int], str] | None = None) -> list[dict[str, Any]]:
    """Per compaction round of a ledger, the items whose state changed since the previous round.

    Args:
        ledger: one run's ledger rows (its ``compaction`` rounds are used).
        described: ``(item id, call index) -> what that call did to the item`` (closed loop).

    Returns:
        One dict per round, in round order: ``round``, ``call_index``, ``tier_name``,
        ``lost``/``stale``/``degraded``/``recovered`` (``"type: value"``), ``used_later`` (item -> first
        later call that used it) and ``touched`` (item -> what that call did).
    """
    import pandas as pd

    described = described or {}
    led = ledger[ledger["basis"] == "compaction"]
    out = []
    previous_state: dict[str, str] = {}
    for rnd, g in led.groupby("round", sort=True):
        changed: dict[str, list[str]] = {"lost": [], "stale": [], "degraded": [], "recovered": []}
        used: dict[str, int] = {}
        touched: dict[str, str] = {}
        for r in g.itertuples(index=False):
            old = previous_state.get(r.item_id, "PRESERVED")
            if r.state != old:
                key = "recovered" if r.state == "PRESERVED" else r.state.lower()
                changed[key].append(f"{r.item_type}: {r.value}")
                if r.state in ("LOST", "STALE") and not pd.isna(r.next_use_call):
                    used[f"{r.item_type}: {r.value}"] = int(r.next_use_call)
                    what = described.get((r.item_id, int(r.next_use_call)))
                    if what is not None:
                        touched[f"{r.item_type}: {r.value}"] = what
            previous_state[r.item_id] = r.state
        out.append(
            {
                "round": int(rnd),
                "call_index": int(g["call_index"].iloc[0]),
                "tier_name": str(g["tier_name"].iloc[0]),
                **changed,
                "used_later": used,
                "touched": touched,
            }
        )
    return out


def compaction_diffs(
    views: Sequence[Sequence[Message]],
    ledger: pd.DataFrame,
    described: Mapping[tuple[str, int], str] | None = None,
    *,
    run_id: str,
) -> list[dict[str, Any]]:
    """One row per compaction round of a run (see the module docstring).

    Args:
        views: every view the run sent, by call index.
        ledger: the run's ledger rows (:mod:`h9eval.probes.ledger`; its ``compaction`` rounds are used).
        described: ``(item id, call index) -> what that call did to the item`` (closed-loop episodes:
            :func:`h9eval.closedloop.ledger.first_touches`); empty for a replay.
        run_id: the run the rows belong to.

    Returns:
        Row dicts with ``run_id``, :func:`item_changes`' keys, ``n_left`` and ``left`` (at most
        :data:`MAX_LEFT_SHOWN` previews of the messages that left the view), ``summary`` (the summary
        in this view when it is new, else ``None``), ``anchors_before``/``anchors_after`` (type -> text)
        and ``na_erased`` (anchor types whose known value now reads N/A).
    """
    rows = []
    for ch in item_changes(ledger, described):
        call = ch["call_index"]
        view = views[call]
        prev = views[call - 1] if call > 0 else ()
        now = Counter(_key(m) for m in view)
        left = []
        n_left = 0
        for m in prev:
            k = _key(m)
            if now[k] > 0:
                now[k] -= 1
            else:
                n_left += 1
                if len(left) < MAX_LEFT_SHOWN:
                    left.append(_preview(m))
        before, after = _summary_of(prev), _summary_of(view)
        a_before, a_after = _anchors(before), _anchors(after)
        erased = [
            t
            for t, v in a_after.items()
            if is_no_information(v) and not is_no_information(a_before.get(t, "")) and t in a_before
        ]
        rows.append(
            {
                "run_id": run_id,
                **ch,
                "n_left": n_left,
                "left": left,
                "summary": after if after != before else None,
                "anchors_before": a_before,
                "anchors_after": a_after,
                "na_erased": erased,
            }
        )
    return rows
