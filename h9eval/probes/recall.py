"""The ``recall`` scorer (offline, the default): are the probe's key terms / answer still in the text?

Per probe, in [0, 1]: for key-term probes the fraction of ``expected`` terms present; for
answer probes (facts) 1 when the answer or any variant is present (for ordinal facts: after
the preceding item, see :mod:`h9eval.probes.probe`), else 0. Presence is
:meth:`h9eval.tasks.text.TextIndex.present` (normalised, word-bounded exact match, then fuzzy
``partial_ratio`` >= ``fuzzy_threshold`` with equal numbers). Reported for ``scope="view"``
(the whole rendered view) and ``scope="anchors"`` (the latest compaction message's anchors and
summary only; 0 when the view holds no compaction message).

What it can tell: whether the literal information (paths, identifiers, numbers, error names,
fact values) is still anywhere in what the model would see. What it cannot: whether the model
would use it, whether it is stated as current (a superseded value that is still present also
"passes" the old fact's probe, and a probe for the new value cannot tell the two apart), or
whether a paraphrase kept the meaning (a summary that says "the license header" without
"MPL-2.0" scores 0). Short answers (numbers, ``3.12``) may also be found by coincidence in
unrelated text; word boundaries reduce but do not remove that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval.core.errors import ConfigError
from h9eval.probes.probe import Probe, answer_found
from h9eval.probes.scorers import SCOPES, ProbeInput, register_scorer
from h9eval.tasks.text import DEFAULT_FUZZY_MIN_CHARS, DEFAULT_FUZZY_THRESHOLD, TextIndex

__all__ = ["RecallScorer", "recall_score"]


def recall_score(p: Probe, idx: TextIndex) -> float:
    """One probe's recall score against an index (see the module docstring)."""
    if p.scoring == "answer":
        return 1.0 if answer_found(p, idx) else 0.0
    if not p.expected:
        return 0.0
    return sum(idx.present(t) for t in p.expected) / len(p.expected)


@register_scorer
@dataclass(frozen=True, kw_only=True)
class RecallScorer:
    """Key-term / answer presence.

    ``scopes``: which scopes to report (default both ``view`` and ``anchors``).
    ``fuzzy_threshold``: rapidfuzz ``partial_ratio`` score 0-100 for a fuzzy hit (default 90).
    ``fuzzy_min_chars``: shortest normalised term matched fuzzily (default 8).
    ``fuzzy``: ``False`` for exact matching only.
    """

    name: ClassVar[str] = "recall"
    methods: ClassVar[tuple[str, ...]] = ("recall",)
    baseline_is_one: ClassVar[bool] = True

    scopes: tuple[str, ...] = SCOPES
    fuzzy_threshold: float = DEFAULT_FUZZY_THRESHOLD
    fuzzy_min_chars: int = DEFAULT_FUZZY_MIN_CHARS
    fuzzy: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", tuple(self.scopes))
        for s in self.scopes:
            if s not in SCOPES:
                raise ConfigError(f"RecallScorer.scopes entries must be among {', '.join(SCOPES)}, got {s!r}")
        if not 0 < self.fuzzy_threshold <= 100:
            raise ConfigError(f"RecallScorer.fuzzy_threshold must be in (0, 100], got {self.fuzzy_threshold!r}")
        if self.fuzzy_min_chars < 1:
            raise ConfigError(f"RecallScorer.fuzzy_min_chars must be >= 1, got {self.fuzzy_min_chars!r}")

    def index(self, inp: ProbeInput, scope: str) -> TextIndex | None:
        return inp.index(
            scope, fuzzy_threshold=self.fuzzy_threshold, fuzzy_min_chars=self.fuzzy_min_chars, fuzzy=self.fuzzy
        )

    def score(self, probes: Sequence[Probe], inp: ProbeInput, scope: str) -> dict[str, list[float | None]]:
        idx = self.index(inp, scope)
        if idx is None:  # anchors scope without a compaction message: nothing retained there
            return {"recall": [None if p.kind == "next_action" else 0.0 for p in probes]}
        # next_action probes predict a tool call; presence of its name proves nothing.
        return {"recall": [None if p.kind == "next_action" else recall_score(p, idx) for p in probes]}
