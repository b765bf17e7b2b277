"""What a session format declares: how its files are recognised and how they load.

Each format module of this package declares its formats in a module-level ``RECORDED_FORMATS`` tuple of
:class:`RecordedFormat` values; :mod:`h9eval.tasks.recorded` finds every module of the package, so adding a
format is one file. Detection runs the formats' declared tests in ``detect_order`` (lower first): a format
whose files another's test would also accept declares a smaller number than that one (h9eval's own task
lines also hold ``messages``, so they are tested before the chat formats).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h9eval.tasks.model import Task

__all__ = ["RecordedFormat"]


@dataclass(frozen=True, kw_only=True)
class RecordedFormat:
    """One session format: its name, how to recognise it, how to load it."""

    name: str
    """The name ``format=`` takes and :func:`~h9eval.tasks.recorded.detect_format` returns."""
    described: str
    """How the format reads in the list of expected formats ("a SWE-agent .traj")."""
    detect_order: int
    """Where the format's tests run among all formats' (lower first)."""
    listed_order: int = 100
    """Where the format stands in the one-line list of expected formats (lower first). Apart from
    ``detect_order`` because detection runs the narrowest tests first, while the list a user reads
    names the most common format first."""
    load: Callable[..., Task]
    """``load(path, **options) -> Task``: one session."""
    options: frozenset[str] = frozenset()
    """The keyword options ``load`` accepts."""
    load_all: Callable[[Path], list[Task]] | None = None
    """``load_all(path) -> [Task]``: every session of a file that may hold several (one per line)."""
    matches_json: Callable[[Any], bool] | None = None
    """A whole-file JSON value is this format's."""
    matches_jsonl: Callable[[Any, Path], bool] | None = None
    """``matches_jsonl(first_record, path)``: a JSON-lines file whose first record is this is this format's."""
    matches_dir: Callable[[Path], bool] | None = None
    """A folder is one session of this format."""
    near_miss_json: Callable[[Any], str | None] | None = None
    """A whole-file JSON value that is *almost* this format (a part of a session): the one line to say."""
    recorded: bool = True
    """A recorded-session format (``False``: h9eval's own task files, which carry the ground truth)."""
    suffixes: tuple[str, ...] = field(default=(".jsonl", ".json", ".traj"))
    """File name endings a folder walk picks up for this format."""
    skip_file: Callable[[Path], bool] | None = None
    """A file of a folder walk that is not a session although it looks like one (Claude Code's own
    compaction calls)."""

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"RecordedFormat.name must be a non-empty identifier, got {self.name!r}")
        if self.matches_json is None and self.matches_jsonl is None and self.matches_dir is None:
            raise ValueError(f"RecordedFormat {self.name}: declare at least one of matches_json/jsonl/dir")
