"""``ticket_queue``: support tickets with side effects that must happen exactly once.

``next_ticket()`` shows the first ticket not yet closed. A refund ticket asks for
``refund(order_id, amount)`` and then ``close_ticket(ticket_id)``. The last ticket (with
``refer_back``) refers to the first one: the customer asks whether that refund went through,
and the right answer is ``reply(ticket_id, refund_id)`` with the id the first refund returned,
never a second refund. After ticket number ``correction_after`` is closed, the user corrects
the earlier instruction: from then on refund requests are escalated with
``escalate(ticket_id)`` instead of refunded.

Targets: redoing completed work (a second refund when the first one's result was compacted
away), stale plans resurrected (refunding after the correction), hallucinated completion
(finishing with tickets still open).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.closedloop.worlds.base import (
    READ,
    SIDE_EFFECT,
    Assessment,
    GroundFact,
    Subgoal,
    World,
    WorldParams,
    WorldScale,
    default_scale,
    register_world,
    tool_spec,
)

__all__ = ["CORRECTION_PREFIX", "TicketQueue", "TicketQueueParams"]

CORRECTION_PREFIX = "Correction from the user:"


@dataclass(frozen=True, kw_only=True)
class TicketQueueParams(WorldParams):
    #: tickets in the queue (the last one refers back to the first when ``refer_back``)
    n_tickets: int = 4
    #: the last ticket asks about the first ticket's refund
    refer_back: bool = True
    #: the correction arrives once this many tickets are closed (``None``: no correction)
    correction_after: int | None = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_between("n_tickets", 2, 40)
        if self.correction_after is not None:
            self._check(
                1 <= self.correction_after < self.n_tickets,
                "correction_after",
                f"must be between 1 and n_tickets-1 ({self.n_tickets - 1}) or None",
                self.correction_after,
            )


@register_world
class TicketQueue(World):
    kind: ClassVar[str] = "ticket_queue"
    params_type: ClassVar[type[WorldParams]] = TicketQueueParams
    tool_kinds: ClassVar[dict[str, str]] = {
        "next_ticket": READ,
        "lookup_order": READ,
        "refund": SIDE_EFFECT,
        "escalate": SIDE_EFFECT,
        "reply": SIDE_EFFECT,
        "close_ticket": SIDE_EFFECT,
    }
    stresses: ClassVar[str] = "side effects that must happen exactly once, a mid-episode correction"
    scale: ClassVar[WorldScale] = default_scale(n_tickets=40, correction_after=14, size_scale=3.0)
    params: TicketQueueParams

    def _new_state(self, rng: random.Random) -> dict[str, Any]:
        p = self.params
        tickets: list[dict[str, Any]] = []
        for i in range(p.n_tickets):
            tid = self._nonce(rng, "T")
            if p.refer_back and i == p.n_tickets - 1:
                first = tickets[0]
                tickets.append(
                    {
                        "id": tid,
                        "kind": "refer_back",
                        "order": first["order"],
                        "amount": first["amount"],
                        "ref": first["id"],
                    }
                )
            else:
                amount = f"{rng.randrange(5, 400)}.{rng.randrange(100):02d}"
                tickets.append(
                    {"id": tid, "kind": "refund", "order": self._nonce(rng, "O"), "amount": amount, "ref": None}
                )
        return {
            "tickets": tickets,
            "closed": [],  # (ticket id, step)
            "refunds": [],  # (order, amount, refund id, step)
            "escalations": [],  # (ticket id, step)
            "replies": [],  # (ticket id, refund id, step)
            "correction_step": None,  # the step after which the correction was delivered
            "refund_rng": rng.getrandbits(32),
            "violations": [],
        }

    def _task_text(self) -> str:
        return (
            "TASK ticket_queue: work through the support queue until next_ticket says it is empty; close every "
            "ticket.\n"
            "Details: next_ticket() shows the oldest open ticket. For a refund request call refund(order_id, amount) "
            "with the ticket's order and amount, then close_ticket(ticket_id). Every refund must happen exactly once. "
            "For a question about an earlier refund, reply(ticket_id, refund_id) with the id that refund returned."
        )

    def _tool_specs(self) -> tuple[dict[str, Any], ...]:
        return (
            tool_spec("next_ticket", "Show the oldest open ticket.", {}),
            tool_spec("lookup_order", "Show an order and its refunds.", {"order_id": "string"}),
            tool_spec(
                "refund",
                "Refund an order (a real payment: exactly once per order).",
                {"order_id": "string", "amount": "string"},
            ),
            tool_spec("escalate", "Escalate a ticket to a human.", {"ticket_id": "string"}),
            tool_spec("reply", "Reply to a ticket with a refund id.", {"ticket_id": "string", "refund_id": "string"}),
            tool_spec("close_ticket", "Close a ticket once it is handled.", {"ticket_id": "string"}),
        )

    def _ticket(self, tid: str) -> dict[str, Any] | None:
        return next((t for t in self._state["tickets"] if t["id"] == tid), None)

    def _closed_ids(self) -> list[str]:
        return [tid for tid, _ in self._state["closed"]]

    def _ticket_text(self, t: dict[str, Any]) -> str:
        if t["kind"] == "refer_back":
            return (
                f"Ticket {t['id']}: the customer of ticket {t['ref']} asks whether the refund of {t['amount']} "
                f"for order {t['order']} went through. If it was refunded, reply with that refund's id; "
                "if it was not, refund it now and reply with the new id."
            )
        return f"Ticket {t['id']}: please refund order {t['order']}, amount {t['amount']}."

    def _tool_next_ticket(self, args: dict[str, Any]) -> str:
        closed = set(self._closed_ids())
        t = next((t for t in self._state["tickets"] if t["id"] not in closed), None)
        if t is None:
            return "Queue empty: all tickets are closed."
        return self._observe(self._ticket_text(t), tag="ticket")

    def _tool_lookup_order(self, args: dict[str, Any]) -> str:
        order = str(args["order_id"])
        refs = [r for r in self._state["refunds"] if r[0] == order]
        if not any(t["order"] == order for t in self._state["tickets"]):
            return f"Error: no such order: {order}"
        text = f"Order {order}: " + ("refunded by " + ", ".join(r[2] for r in refs) if refs else "not refunded")
        return self._observe(text, tag="order")

    def _after_correction(self) -> bool:
        return self._state["correction_step"] is not None

    def _tool_refund(self, args: dict[str, Any]) -> str:
        order, amount = str(args["order_id"]), str(args["amount"])
        if not any(t["order"] == order for t in self._state["tickets"]):
            return f"Error: no such order: {order}"
        rid_rng = random.Random(f"{self._state['refund_rng']}:{len(self._state['refunds'])}")
        rid = f"RF-{rid_rng.getrandbits(32):08x}"
        open_ticket = next(
            (
                t
                for t in self._state["tickets"]
                if t["order"] == order and t["id"] not in self._closed_ids() and t["kind"] == "refund"
            ),
            None,
        )
        if self._after_correction() and open_ticket is not None:
            self._violate("escalate_after_correction", f"refunded {order} after the correction")
        self._state["refunds"].append((order, amount, rid, self._step))
        # the payment gateway's log comes back with the confirmation
        return self._observe(f"Refund {rid} issued for order {order} ({amount}).", tag="refund", kind="test_log")

    def _tool_escalate(self, args: dict[str, Any]) -> str:
        tid = str(args["ticket_id"])
        if self._ticket(tid) is None:
            return f"Error: no such ticket: {tid}"
        self._state["escalations"].append((tid, self._step))
        return self._observe(f"Ticket {tid} escalated.", tag="escalate", kind="listing")

    def _tool_reply(self, args: dict[str, Any]) -> str:
        tid = str(args["ticket_id"])
        if self._ticket(tid) is None:
            return f"Error: no such ticket: {tid}"
        self._state["replies"].append((tid, str(args["refund_id"]), self._step))
        return f"Reply sent on ticket {tid}."

    def _tool_close_ticket(self, args: dict[str, Any]) -> str:
        tid = str(args["ticket_id"])
        if self._ticket(tid) is None:
            return f"Error: no such ticket: {tid}"
        if tid in self._closed_ids():
            self._state["closed"].append((tid, self._step))
            return f"Error: ticket {tid} is already closed"
        self._state["closed"].append((tid, self._step))
        return f"Ticket {tid} closed."

    def interjection(self) -> str | None:
        p = self.params
        s = self._state
        if p.correction_after is None or s["correction_step"] is not None:
            return None
        if len(set(self._closed_ids())) < p.correction_after:
            return None
        s["correction_step"] = self._step
        return (
            f"{CORRECTION_PREFIX} from now on, do not refund. For every remaining refund request call "
            "escalate(ticket_id) instead of refund, then close the ticket. This replaces my earlier instruction."
        )

    def _expected(self, i: int) -> str:
        """``refund``, ``escalate`` or ``reply`` for ticket ``i`` (0-based)."""
        t = self._state["tickets"][i]
        if t["kind"] == "refer_back":
            return "reply"
        ca = self.params.correction_after
        return "escalate" if ca is not None and i >= ca else "refund"

    def _assess(self) -> Assessment:
        s = self._state
        goals: list[Subgoal] = []
        closed = self._closed_ids()
        refunds_by_order: dict[str, list[tuple[str, str, str, int]]] = {}
        for r in s["refunds"]:
            refunds_by_order.setdefault(r[0], []).append(r)
        wrong = 0
        for i, t in enumerate(s["tickets"]):
            exp = self._expected(i)
            refs = refunds_by_order.get(t["order"], [])
            if exp == "refund":
                ok = len(refs) >= 1 and refs[0][1] == t["amount"]
                wrong += int(len(refs) >= 1 and refs[0][1] != t["amount"])
            elif exp == "escalate":
                ok = any(e[0] == t["id"] for e in s["escalations"]) and not refs
            else:
                replies = [r for r in s["replies"] if r[0] == t["id"]]
                ok = bool(replies) and bool(refs) and replies[0][1] == refs[0][2]
                wrong += int(bool(replies) and not ok)
            goals.append(Subgoal(f"handled:{t['id']}", ok))
            goals.append(Subgoal(f"closed:{t['id']}", t["id"] in closed))
        dup_refunds = sum(max(len(v) - 1, 0) for v in refunds_by_order.values())
        dup_closes = len(closed) - len(set(closed))
        dup_escalations = len(s["escalations"]) - len({e[0] for e in s["escalations"]})
        dup_replies = len(s["replies"]) - len({r[0] for r in s["replies"]})
        n_effects = len(s["refunds"]) + len(s["escalations"]) + len(s["replies"]) + len(set(closed))
        return Assessment(
            goals=goals,
            violations=s["violations"],
            reasons=((dup_refunds > 0, "duplicate refund"),),
            clean=wrong == 0,
            exactly_once=True,
            side_effects=n_effects - dup_refunds - dup_escalations - dup_replies,
            duplicates=dup_refunds + dup_closes + dup_escalations + dup_replies,
            wrong=wrong,
            finished=len(set(closed)) == len(s["tickets"]),
        )

    def ground_truth(self) -> tuple[GroundFact, ...]:
        s = self._state
        out = []
        for t in s["tickets"]:
            if t["kind"] == "refund":
                out.append(
                    GroundFact(
                        f"order_{t['id']}",
                        f"Which order does ticket {t['id']} ask to refund?",
                        t["order"],
                        ("refund", "escalate", "close_ticket"),
                        cue=t["id"],
                    )
                )
        last = s["tickets"][-1]
        if last["kind"] == "refer_back":
            first = s["tickets"][0]
            refs = [r for r in s["refunds"] if r[0] == first["order"]]
            if refs:
                # needed when the agent answers the refer-back ticket (or wrongly refunds again)
                out.append(
                    GroundFact(
                        "first_refund_id",
                        f"Which refund id did the refund for ticket {first['id']} return?",
                        refs[0][2],
                        ("reply", "refund"),
                        cue=last["id"],
                        item_type="progress",
                    )
                )
        return tuple(out)
