"""``fact_chain``: a chain of lookups whose first answer is needed at the very end.

The task gives a start key. ``lookup(key)`` returns the next key (``lookup K-a -> K-b``); after
``hops`` lookups the agent runs ``audit(section)`` for each of ``gap_steps`` sections named in
the task (the steps between finding the first value and using it), then
``submit(answer=<last key>, receipt=<key returned by the first lookup>)``. Keys and sections
are per-episode random nonces, so a right submission proves the values were read, not guessed.

Targets: exact details lost (the receipt from hop 1), re-reads (the agent repeats a lookup whose
result vanished), wrong commands (a submission with a stale or missing value).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.closedloop.worlds.base import (
    READ,
    SIDE_EFFECT,
    GroundFact,
    Outcome,
    Subgoal,
    Violation,
    World,
    WorldParams,
    WorldScale,
    register_world,
    tool_spec,
)

__all__ = ["FactChain", "FactChainParams"]


@dataclass(frozen=True, kw_only=True)
class FactChainParams(WorldParams):
    #: lookups in the chain (the first one's answer is the receipt)
    hops: int = 3
    #: audit steps between the chain and the submission
    gap_steps: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check(1 <= self.hops <= 200, "hops", "must be between 1 and 200", self.hops)
        self._check(0 <= self.gap_steps <= 200, "gap_steps", "must be between 0 and 200", self.gap_steps)


@register_world
class FactChain(World):
    kind: ClassVar[str] = "fact_chain"
    params_type: ClassVar[type[WorldParams]] = FactChainParams
    tool_kinds: ClassVar[dict[str, str]] = {"lookup": READ, "audit": READ, "submit": SIDE_EFFECT}
    stresses: ClassVar[str] = "an exact value read at the first step and needed at the last (the receipt)"
    scale: ClassVar[WorldScale] = WorldScale(
        params={"hops": 80, "gap_steps": 70, "result_sizes": "recorded", "size_scale": 1.8, "fact_position": "anywhere", "task_file": True},
        window_tokens=32_000,
        max_steps=300,
    )
    params: FactChainParams

    def _new_state(self, rng: random.Random) -> dict[str, Any]:
        keys = [self._nonce(rng, "K") for _ in range(self.params.hops + 1)]
        return {
            "keys": keys,
            "sections": [self._nonce(rng, "A") for _ in range(self.params.gap_steps)],
            "looked_up": [],  # keys looked up, in order (repeats kept)
            "audited": [],  # (section, step)
            "submissions": [],  # (answer, receipt, step)
        }

    def _task_text(self) -> str:
        s = self._state
        sections = ", ".join(s["sections"]) if s["sections"] else "none"
        return (
            f"TASK fact_chain: starting from key {s['keys'][0]}, do {self.params.hops} lookups, "
            f"run the audits ({sections}), then submit the last key with the first lookup's key as the receipt.\n"
            f"Details: lookup(key) returns the next key. Do {self.params.hops} lookups in a row, each with "
            "the key the previous one returned. Then call audit(section) once for each audit section listed above. "
            "Finally call submit(answer=<key returned by the last lookup>, receipt=<key returned by the first lookup>) exactly once."
        )

    def _tool_specs(self) -> tuple[dict[str, Any], ...]:
        return (
            tool_spec("lookup", "Look a key up; returns the next key in the chain.", {"key": "string"}),
            tool_spec("audit", "Run the audit of one section.", {"section": "string"}),
            tool_spec("submit", "Submit the final answer with its receipt (once).", {"answer": "string", "receipt": "string"}),
        )

    def _tool_lookup(self, args: dict[str, Any]) -> str:
        key = str(args["key"])
        keys = self._state["keys"]
        if key not in keys[:-1]:
            return f"Error: no entry for key {key}"
        self._state["looked_up"].append(key)
        nxt = keys[keys.index(key) + 1]
        return self._observe(f"lookup {key} -> {nxt}", tag="lookup")

    def _tool_audit(self, args: dict[str, Any]) -> str:
        section = str(args["section"])
        if section not in self._state["sections"]:
            return f"Error: unknown audit section {section}"
        self._state["audited"].append((section, self._step))
        return self._observe(f"audit {section}: passed", tag="audit")

    def _tool_submit(self, args: dict[str, Any]) -> str:
        self._state["submissions"].append((str(args["answer"]), str(args["receipt"]), self._step))
        if len(self._state["submissions"]) > 1:
            return "Error: an answer was already submitted"
        return "Submission recorded."

    def check(self) -> Outcome:
        s = self._state
        keys = s["keys"]
        looked = set(s["looked_up"])
        goals = [Subgoal(f"hop{i + 1}", keys[i] in looked) for i in range(self.params.hops)]
        subs = s["submissions"]
        first = subs[0] if subs else None
        audit_steps = {sec: st for sec, st in reversed(s["audited"])}
        violations = []
        for sec in s["sections"]:
            ok = sec in audit_steps and (first is None or audit_steps[sec] < first[2])
            goals.append(Subgoal(f"audit:{sec}", ok))
            if first is not None and not ok:
                violations.append(Violation(first[2], "audit_before_submit", f"submitted before auditing {sec}"))
        right = first is not None and first[0] == keys[-1] and first[1] == keys[1]
        goals.append(Subgoal("submit", right))
        todo_goals, todo_dups = self._todo_subgoals()
        goals.extend(todo_goals)
        dup_submits = max(len(subs) - 1, 0)
        success = all(g.reached for g in goals) and not violations and dup_submits == 0
        failure = ""
        if not success:
            failure = (
                "no submission" if first is None
                else "wrong answer" if first[0] != keys[-1]
                else "wrong receipt" if first[1] != keys[1]
                else next((f"subgoal {g.name} not reached" for g in goals if not g.reached), "duplicate side effect")
            )
        return Outcome(
            success=success,
            subgoals=tuple(goals),
            violations=tuple(violations),
            side_effects=min(len(subs), 1) + len(set(s["todo_marked"])),
            duplicate_side_effects=dup_submits + todo_dups,
            wrong_side_effects=int(first is not None and not right),
            finished=first is not None,
            failure=failure,
        )

    def ground_truth(self) -> tuple[GroundFact, ...]:
        keys = self._state["keys"]
        facts = [GroundFact("start_key", "Which key does the chain start from?", keys[0], ("lookup",))]
        facts.append(GroundFact("receipt", "Which key did the first lookup return (the receipt)?", keys[1], ("submit",)))
        facts.append(GroundFact("answer", "Which key did the last lookup return (the answer)?", keys[-1], ("submit",)))
        return tuple(facts)
