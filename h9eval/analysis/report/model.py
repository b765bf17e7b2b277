"""What a report is made of: titled sections holding text, notes, tables and figures.

Kept apart from the renderer (:mod:`h9eval.analysis.report.render`) so that the modules building
sections need not import it. One :class:`Section` type serves every part of every report (the
answer box, the open-loop and closed-loop sections, setup and trust).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PARTS", "Section", "num_text", "short_list"]

PARTS: tuple[str, ...] = ("answer", "results", "details")
"""Where a section goes on the page, in this order: ``answer`` (the box at the top, always open),
``results`` (the findings, each in a collapsible block) and ``details`` (setup, provenance and
trust checks, collapsible, last)."""


@dataclass
class Section:
    """One report section: ``title``, ``part`` (one of :data:`PARTS`) and its ``blocks`` in
    order, each ``(kind, payload)`` with kind ``text``, ``note`` (a caveat, highlighted),
    ``rec`` (the recommendation), ``caveat`` (a warning the reader must not miss), ``caveats``
    (a list, one line each), ``code``,
    ``table`` (``(DataFrame, caption)``), ``figure`` (``(file stem, matplotlib figure,
    caption)``) or ``link`` (``(href, text)``: a page written beside the report). A section with
    no blocks is left out of the page."""

    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)
    part: str = "results"

    def text(self, s: str) -> None:
        self.blocks.append(("text", s))

    def note(self, s: str) -> None:
        self.blocks.append(("note", s))

    def rec(self, s: str) -> None:
        self.blocks.append(("rec", s))

    def caveat(self, s: str) -> None:
        self.blocks.append(("caveat", s))

    def caveats(self, items: Iterable[str]) -> None:
        """Caveats one line each (a bulleted list)."""
        self.blocks.append(("caveats", list(items)))

    def code(self, s: str) -> None:
        self.blocks.append(("code", s))

    def table(self, df: Any, caption: str = "") -> None:
        self.blocks.append(("table", (df, caption)))

    def figure(self, name: str, fig: Any, caption: str) -> None:
        self.blocks.append(("figure", (name, fig, caption)))

    def link(self, href: str, text: str) -> None:
        """A link to a page written beside the report (relative ``href``)."""
        self.blocks.append(("link", (href, text)))


def short_list(items: Iterable[Any], noun: str = "", *, shown: int = 3) -> str:
    """``"12 tasks: a, b, c, …"``: a list a table cell can hold, with its count; every item when
    there are at most ``shown + 1`` of them (hiding one item saves nothing)."""
    xs = [str(x) for x in items]
    if not xs:
        return ""
    if len(xs) <= shown + 1:
        return (f"{len(xs)} {noun}: " if noun else "") + ", ".join(xs)
    head = ", ".join([*xs[:shown], "…"])
    return f"{len(xs)} {noun}: {head}" if noun else f"{head} ({len(xs)} in all)"


def num_text(v: Any, fmt: str = "{:.3f}") -> str:
    """``v`` formatted, or ``–`` for a missing number."""
    return "–" if v is None or (isinstance(v, float) and v != v) else fmt.format(v)
