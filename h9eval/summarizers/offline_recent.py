"""A second offline summarizer that extracts by recency, not by language cues.

:class:`OfflineRecentSummarizer` (registered as ``offline_recent``) writes the same anchor
format and the same one-sentence User Intent as :class:`~h9eval.summarizers.offline.
OfflineSummarizer`, under the same budget rules, but fills every other section by position:

* **Execution Progress**: the most recent ``recent_outputs`` tool calls, each with its outcome
  and the opening of its output (``max_output_chars``), older ones counted in one line.
* **Key Decisions**: the first sentence of each assistant message (newest ``max_items``).
* **Tried Solutions**: the most recent failed calls with the *last* line of their output.
* **Next Steps**: the last sentence of the latest assistant message.
* **Constraints**: the first sentence of each user message after the task.
* **Artifacts**: the paths in the arguments of the most recent tool calls, read or written.
* **Summary**: counts, running totals and the latest tool output.

No reasoning, intention or modal cue is used anywhere, so a retention result that holds under
both ``offline`` and ``offline_recent`` does not hinge on the default's cue rules; one that
holds under only one of them is a property of that extractor. Like the default, it imports
nothing from the probes, the key-term extractor or the synthetic generator, and does not key on
the generator's labels (``tests/test_offline_independence.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from h9eval.core.errors import ConfigError
from h9eval.summarizers.offline import (
    OfflineSummarizer,
    ParsedHead,
    clip_text,
    count_lines,
    dedupe,
    earlier_line,
    first_sentence,
    SummaryItems,
    omitted_line,
    sentence_list,
)

__all__ = ["OfflineRecentSummarizer"]


@dataclass(frozen=True, kw_only=True)
class OfflineRecentSummarizer(OfflineSummarizer):
    """Recency-based offline summarizer in harness9's anchor format (module docstring).

    ``recent_outputs``: tool calls kept in Execution Progress; default 6.
    ``max_output_chars``: characters of each kept output's opening; default 160.
    The other parameters are :class:`OfflineSummarizer`'s (``max_progress_lines`` is unused).
    """

    recent_outputs: int = 6
    max_output_chars: int = 160

    name = "offline_recent"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.recent_outputs < 1:
            raise ConfigError(f"recent_outputs ({self.recent_outputs}) must be >= 1")
        if self.max_output_chars < 40:
            raise ConfigError(f"max_output_chars ({self.max_output_chars}) must be >= 40 characters")

    def _new_items(self, p: ParsedHead) -> dict[str, SummaryItems]:
        n, c = self.max_items, self.max_item_chars
        outputs = [
            f"{s.label} -> {s.outcome}: {clip_text(s.excerpt, self.max_output_chars)}".rstrip(": ") for s in p.steps
        ]
        firsts = [first_sentence(t, c) for t in p.assistant_texts]
        last = sentence_list(p.assistant_texts[-1]) if p.assistant_texts else []
        failed = [f"{s.label} -> failed: {s.output_last_line}".rstrip(": ") for s in p.steps if s.outcome == "failed"]
        return {
            "execution_progress": (
                outputs or firsts,
                self.recent_outputs,
                (lambda k: f"earlier: {k} tool calls") if outputs else omitted_line("assistant messages"),
            ),
            "key_decision": (dedupe(firsts), n, omitted_line("assistant messages")),
            "tried_solution": (dedupe(failed), n, omitted_line("failures")),
            "next_step": ([clip_text(last[-1], c)] if last else [], 1, None),
            "constraint": (dedupe(first_sentence(u, c) for u in p.later_user), n, omitted_line("user messages")),
            "artifact": (self._recent_paths(p), n, omitted_line("paths")),
        }

    @staticmethod
    def _recent_paths(p: ParsedHead) -> list[str]:
        written = {path for path, _ in p.written}
        order: dict[str, None] = {}
        for s in p.steps:
            for path in s.paths:
                order.pop(path, None)  # re-inserted: a path used again counts as recent
                order[path] = None
        return [f"{x} (written)" if x in written else x for x in order]

    def _summary_lines(self, p: ParsedHead) -> list[str]:
        lines = count_lines(p)
        if p.steps:
            s = p.steps[-1]
            lines.append(f"Latest output: {s.label} -> {s.outcome}" + (f": {s.excerpt}" if s.excerpt else "") + ".")
        return lines + earlier_line(p)
