"""The offline free-text summarizer: a chronological prose digest, no section structure.

:class:`OfflineFreeTextSummarizer` (registered as ``offline_free_text``) answers the free-text
template with ``## Summary`` only, so every anchor parses as ``N/A``. It does not render the
anchor variant's extraction as prose: it keeps something else, so that "anchors on vs off" is a
comparison of two different things kept under the same budget.

What it keeps, in order::

    ## Summary
    Task: <the task's one sentence, as the anchor variant's intent>.
    This segment: <counts>. Totals so far: <running totals>.
    (N earlier events omitted)
    User: <first sentence of a later user message>
    Assistant: <first sentence of an assistant message>
    Ran <tool: short arg> -> ok | failed: <error line>
    ...

one line per event of the head, oldest first (consecutive identical tool lines collapse to
``(xN)``). Nothing is chosen by a cue: no decision, intention or constraint rule, no file list.
Incrementally, the previous digest's event lines come first and are the first to go.

Budget: the same as the anchor variant, at most ``request.max_output_tokens * 4`` UTF-8 bytes,
and at most ``max_events`` event lines; over budget the oldest event lines go first (counted in
the ``earlier events omitted`` line), then lines are clipped shorter (down to 40 characters),
then the text is cut at the byte budget. Deterministic. Imports nothing from the probes, the
key-term extractor or the synthetic generator (``tests/test_offline_independence.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from h9eval.compaction.anchors import go_trim
from h9eval.core.errors import ConfigError
from h9eval.compaction.summary import SummaryRequest
from h9eval.summarizers.offline import (
    OfflineSummarizer,
    ParsedHead,
    ToolStep,
    clip_text,
    collapse_steps,
    count_lines,
    first_sentence,
    fit_sections,
    intent_lines,
    same_task,
    SummarySection,
)

__all__ = ["OfflineFreeTextSummarizer"]

_OMITTED = re.compile(r"^\((\d+) earlier events omitted\)$")
_TASK = "Task: "


@dataclass(frozen=True, kw_only=True)
class OfflineFreeTextSummarizer(OfflineSummarizer):
    """Chronological prose digest under ``## Summary`` only (module docstring).

    ``max_events``: event lines kept, oldest dropped first; default 30. ``max_item_chars`` caps
    each line and ``max_intent_chars`` the task sentence; the section caps of the anchor
    variant do not apply.
    """

    max_events: int = 30

    name = "offline_free_text"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_events < 1:
            raise ConfigError(f"max_events ({self.max_events}) must be >= 1")

    def _render(self, p: ParsedHead, request: SummaryRequest) -> str:
        prev_task, prior_events, prior_omitted = _read_digest(p.prior_summary)
        if not prev_task and p.prior_anchors.get("user_intent"):
            prev_task = intent_lines(p.prior_anchors["user_intent"])[0]
        # A previous digest's task wins: the head's first user message is then a later request
        # (the head of a later compaction no longer holds the task), kept as an event.
        task = prev_task or p.task
        events = prior_events + self._event_lines(p, skip_task=not prev_task)
        digest = SummarySection(
            "events",
            events,
            self.max_events,
            lambda k: f"({k + prior_omitted} earlier events omitted)",
        )
        head = ([f"{_TASK}{task.rstrip('.')}."] if task else []) + [" ".join(count_lines(p))]
        # The task and count lines are not events: only the digest shrinks.
        return fit_sections(lambda cap: _prose(head, digest, cap), [digest], [], request, self.max_item_chars)

    def _event_lines(self, p: ParsedHead, *, skip_task: bool) -> list[str]:
        c = self.max_item_chars
        out: list[str] = []
        steps: list[ToolStep] = []

        def flush() -> None:
            for line, group in collapse_steps(steps):
                s = group[0]
                out.append(f"Ran {line}" + (f": {s.error}" if s.outcome == "failed" and s.error else ""))
            steps.clear()

        for e in p.events:
            if e.kind == "tool" and e.step is not None:
                steps.append(e.step)
                continue
            flush()
            first = first_sentence(e.text, c)
            if e.kind == "user":
                if skip_task and p.task and same_task(first, p.task):
                    continue  # the task has its own line
                out.append(f"User: {first}")
            elif first:
                out.append(f"Assistant: {first}")
        flush()
        return out


def _read_digest(summary: str) -> tuple[str, list[str], int]:
    """Task, event lines and omitted count of a previous digest (other summaries: all lines)."""
    task, events, omitted = "", [], 0
    for ln in summary.split("\n"):
        t = go_trim(ln)
        m = _OMITTED.match(t)
        if not t or t.startswith("This segment: "):
            continue
        if t.startswith(_TASK) and not task:
            task = t[len(_TASK) :].rstrip(".")
        elif m:
            omitted = int(m.group(1))
        else:
            events.append(t)
    return task, events, omitted


def _prose(head: list[str], digest: SummarySection, cap: int) -> str:
    lines = head + digest.visible(cap)
    return "## Summary\n" + "\n".join(
        clip_text(x, 2 * max(cap, 60)) if i < len(head) else x for i, x in enumerate(lines)
    )
