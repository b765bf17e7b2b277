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
    Assessment,
    GroundFact,
    Subgoal,
    Violation,
    World,
    WorldParams,
    WorldScale,
    default_scale,
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
        self._check_between("hops", 1, 200)
        self._check_between("gap_steps", 0, 200)


@register_world
class FactChain(World):
    kind: ClassVar[str] = "fact_chain"
    params_type: ClassVar[type[WorldParams]] = FactChainParams
    tool_kinds: ClassVar[dict[str, str]] = {"lookup": READ, "audit": READ, "submit": SIDE_EFFECT}
    stresses: ClassVar[str] = "an exact value read at the first step and needed at the last (the receipt)"
    scale: ClassVar[WorldScale] = default_scale(hops=80, gap_steps=70, size_scale=1.8)
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
            "Finally call submit(answer=<key returned by the last lookup>, receipt=<key returned by the first lookup>) "
            "exactly once."
        )

    def _tool_specs(self) -> tuple[dict[str, Any], ...]:
        return (
            tool_spec("lookup", "Look a key up; returns the next key in the chain.", {"key": "string"}),
            tool_spec("audit", "Run the audit of one section.", {"section": "string"}),
            tool_spec(
                "submit", "Submit the final answer with its receipt (once).", {"answer": "string", "receipt": "string"}
            ),
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
        refusal = self._once(
            "submissions",
            (str(args["answer"]), str(args["receipt"]), self._step),
            "Error: an answer was already submitted",
        )
        return refusal or "Submission recorded."

    def _assess(self) -> Assessment:
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
        dup_submits = max(len(subs) - 1, 0)
        return Assessment(
            goals=goals,
            violations=violations,
            reasons=(
                (first is None, "no submission"),
                (first is not None and first[0] != keys[-1], "wrong answer"),
                (first is not None and first[1] != keys[1], "wrong receipt"),
            ),
            # a submission before an audit leaves that audit's subgoal unreached: it names the failure
            rule_is_reason=False,
            clean=dup_submits == 0,
            side_effects=min(len(subs), 1),
            duplicates=dup_submits,
            wrong=int(first is not None and not right),
            finished=first is not None,
        )

    def ground_truth(self) -> tuple[GroundFact, ...]:
        keys = self._state["keys"]
        facts = [GroundFact("start_key", "Which key does the chain start from?", keys[0], ("lookup",))]
        facts.append(
            GroundFact("receipt", "Which key did the first lookup return (the receipt)?", keys[1], ("submit",))
        )
        facts.append(GroundFact("answer", "Which key did the last lookup return (the answer)?", keys[-1], ("submit",)))
        return tuple(facts)
