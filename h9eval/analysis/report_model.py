"""What a report is made of: titled sections holding text, notes, tables and figures.

Kept apart from :mod:`h9eval.analysis.report` (the renderer) so that modules building sections
(:mod:`h9eval.analysis.report_sections`, ...) need not import the renderer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Section"]


@dataclass
class Section:
    """One report section: ``title`` and its ``blocks`` in order, each ``(kind, payload)`` with
    kind ``text``, ``note`` (a caveat, highlighted), ``link`` (``(href, text)``), ``rec`` (the recommendation), ``caveat`` (the box at the top), ``code``,
    ``table`` (``(DataFrame, caption)``) or ``figure`` (``(file stem, matplotlib figure, caption)``)."""

    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def text(self, s: str) -> None:
        self.blocks.append(("text", s))

    def note(self, s: str) -> None:
        self.blocks.append(("note", s))

    def rec(self, s: str) -> None:
        self.blocks.append(("rec", s))

    def caveat(self, s: str) -> None:
        self.blocks.append(("caveat", s))

    def code(self, s: str) -> None:
        self.blocks.append(("code", s))

    def table(self, df: Any, caption: str = "") -> None:
        self.blocks.append(("table", (df, caption)))

    def link(self, href: str, text: str) -> None:
        """A link to a page written beside the report (``href`` relative to it)."""
        self.blocks.append(("link", (href, text)))

    def figure(self, name: str, fig: Any, caption: str) -> None:
        self.blocks.append(("figure", (name, fig, caption)))
