"""``debug_session``: a long debugging session in which a failed approach must not be retried.

``list_hypotheses()`` lists the candidate fixes (``H-...`` ids with a one-line description);
``try_fix(hypothesis_id)`` applies one and runs the test suite: a long log that says, somewhere,
whether the fix worked (``hypothesis H-... failed: <reason>``) and reverts a failed one. Only one
hypothesis, late in the list, works; ``commit(hypothesis_id)`` ends the task with it.

The state check: the committed fix is the working one, committed once, and no hypothesis was
tried twice after it failed (each retry is a violation at its step). Targets: what was already
tried and ruled out (harness9's "Tried Solutions" anchor), over many steps of large logs.
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

__all__ = ["DebugSession", "DebugSessionParams"]

_CHANGES = ("pin", "widen", "guard", "reorder", "cache", "retry", "lock", "normalize", "escape", "flush")
_TARGETS = (
    "the parser",
    "the cache key",
    "the retry loop",
    "the date format",
    "the pool size",
    "the encoder",
    "the lock order",
    "the timeout",
)
_REASONS = (
    "the same assertion still fails",
    "a different test now fails",
    "the test times out",
    "the fix breaks the build",
)


@dataclass(frozen=True, kw_only=True)
class DebugSessionParams(WorldParams):
    #: candidate fixes listed by ``list_hypotheses``
    n_hypotheses: int = 6
    #: the working fix is drawn from the last this-share of the list
    late_frac: float = 0.3

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_between("n_hypotheses", 2, 200)
        self._check(0.0 < self.late_frac <= 1.0, "late_frac", "must be in (0, 1]", self.late_frac)


@register_world
class DebugSession(World):
    kind: ClassVar[str] = "debug_session"
    params_type: ClassVar[type[WorldParams]] = DebugSessionParams
    tool_kinds: ClassVar[dict[str, str]] = {"list_hypotheses": READ, "try_fix": SIDE_EFFECT, "commit": SIDE_EFFECT}
    stresses: ClassVar[str] = "approaches already tried and ruled out, over many large test logs"
    scale: ClassVar[WorldScale] = default_scale(n_hypotheses=150, late_frac=0.3, size_scale=2.0)
    params: DebugSessionParams

    def _new_state(self, rng: random.Random) -> dict[str, Any]:
        p = self.params
        hyps = [
            {
                "id": self._nonce(rng, "H"),
                "text": f"{rng.choice(_CHANGES)} {rng.choice(_TARGETS)}",
                "reason": rng.choice(_REASONS),
            }
            for _ in range(p.n_hypotheses)
        ]
        late = max(1, round(p.n_hypotheses * p.late_frac))
        good = rng.randrange(p.n_hypotheses - late, p.n_hypotheses)
        return {"hyps": hyps, "good": hyps[good]["id"], "tries": [], "commits": [], "violations": []}

    def _task_text(self) -> str:
        return (
            "TASK debug_session: find the fix for the failing test test_checkout and commit it.\n"
            "Details: list_hypotheses() lists the candidate fixes. try_fix(hypothesis_id) applies one, runs the tests "
            "and reverts it when it fails; only one works. Never retry a hypothesis that already failed. "
            "Finish with commit(hypothesis_id) of the fix that worked, once."
        )

    def _tool_specs(self) -> tuple[dict[str, Any], ...]:
        return (
            tool_spec("list_hypotheses", "List the candidate fixes.", {}),
            tool_spec(
                "try_fix",
                "Apply one candidate fix and run the tests (a failed fix is reverted).",
                {"hypothesis_id": "string"},
            ),
            tool_spec("commit", "Commit the fix that worked (once).", {"hypothesis_id": "string"}),
        )

    def _tool_list_hypotheses(self, args: dict[str, Any]) -> str:
        lines = [f"hypothesis {h['id']}: {h['text']}" for h in self._state["hyps"]]
        return "candidate fixes:\n" + "\n".join(lines)

    def _tool_try_fix(self, args: dict[str, Any]) -> str:
        hid = str(args["hypothesis_id"])
        h = next((x for x in self._state["hyps"] if x["id"] == hid), None)
        if h is None:
            return f"Error: no such hypothesis: {hid}"
        if any(t == hid for t, _ in self._state["tries"]) and hid != self._state["good"]:
            self._violate("no_retry", f"retried {hid}, which had failed")
        self._state["tries"].append((hid, self._step))
        if hid == self._state["good"]:
            line = f"hypothesis {hid} fixed the bug: test_checkout passes"
        else:
            line = f"hypothesis {hid} failed: {h['reason']} (reverted)"
        return self._observe(line, tag="try", kind="test_log")

    def _tool_commit(self, args: dict[str, Any]) -> str:
        refusal = self._once("commits", (str(args["hypothesis_id"]), self._step), "Error: a fix was already committed")
        return refusal or f"Committed fix {args['hypothesis_id']}."

    def _assess(self) -> Assessment:
        s = self._state
        good = s["good"]
        first = s["commits"][0] if s["commits"] else None
        wrong_fix = first is not None and first[0] != good
        return Assessment(
            goals=[
                Subgoal("found", any(t == good for t, _ in s["tries"])),
                Subgoal("committed", first is not None and not wrong_fix),
            ],
            violations=s["violations"],
            reasons=((first is None, "no commit"), (wrong_fix, "wrong fix committed")),
            exactly_once=True,
            side_effects=len(s["tries"]) + min(len(s["commits"]), 1),
            # a retry of a failed fix is a repeated side effect too
            duplicates=max(len(s["commits"]) - 1, 0) + len(s["violations"]),
            wrong=int(wrong_fix),
            finished=first is not None,
        )

    def ground_truth(self) -> tuple[GroundFact, ...]:
        s = self._state
        facts = [GroundFact("working_fix", "Which hypothesis fixed the bug?", s["good"], ("commit",))]
        failed = [t for t, _ in s["tries"] if t != s["good"]]
        if failed:
            facts.append(
                GroundFact(
                    "first_failed",
                    "Which hypothesis was tried first and failed?",
                    failed[0],
                    ("try_fix",),
                    cue="",
                    item_type="failed_approach",
                    breaks=("no_retry",),
                )
            )
        return tuple(facts)
