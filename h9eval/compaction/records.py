"""CompactionRecord (harness9's JSON field names and order, spec §8) and the JSONL record store."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

from h9eval.compaction.anchors import Anchor
from h9eval.core.errors import FormatError
from h9eval.core.tokens import go_escape
from h9eval.core.paths import refuse_hard_link, safe_name
from h9eval.core.storage import tag_path

__all__ = [
    "EXTRA_MASKED",
    "EXTRA_NA_OVERWRITES",
    "EXTRA_NA_OVERWRITES_PREVENTED",
    "EXTRA_OFFLOAD_PLACEHOLDERS",
    "EXTRA_SUMMARY_CALLS",
    "EXTRA_THRASH_AVOIDED",
    "CompactionRecord",
    "FileRecordStore",
    "OffloadEntry",
    "Tier",
    "go_json_dumps",
]

# The keys of ``CompactionRecord.extra`` that the replay turns into columns of the calls table:
# the one spelling of each, shared by the policies that write them and the replay that reads them.
EXTRA_SUMMARY_CALLS = "summary_calls"
"""``list[SummaryCall]``: every summarizer call the compaction made, in order."""
EXTRA_THRASH_AVOIDED = "thrash_avoided"
"""``True`` when the anti-thrash guard reused the previous view instead of compacting again."""
EXTRA_MASKED = "masked"
"""``int``: tool results replaced by the observation-masking placeholder."""
EXTRA_NA_OVERWRITES = "na_overwrites"
"""``list[str]``: anchor kinds whose known content harness9's merge overwrote with an N/A."""
EXTRA_NA_OVERWRITES_PREVENTED = "na_overwrites_prevented"
"""``list[str]``: anchor kinds the N/A-safe merge kept instead of overwriting."""
EXTRA_OFFLOAD_PLACEHOLDERS = "offload_placeholders"
"""``dict[str, str]``: tool-call id -> placeholder text of the results this compaction offloaded."""
EXTRA_MIN_GAIN_DEFERRED = "min_gain_deferred"
"""``True`` when the minimum-gain rule deferred a summary that would not repay the cache it destroys."""


class Tier(IntEnum):
    """harness9's tiers; the integer is what the JSONL records store."""

    NONE = 0
    WARN = 1
    SOFT = 2
    FULL = 3
    EMERGENCY = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, v: int | str) -> Tier:
        if isinstance(v, str):
            try:
                return cls[v.upper()]
            except KeyError:
                raise ValueError(f"unknown tier {v!r}; expected one of none, warn, soft, full, emergency") from None
        return cls(int(v))


@dataclass(frozen=True, slots=True)
class OffloadEntry:
    """One offloaded tool result. ``file_path`` is relative to the offload root, ``/``-separated."""

    tool_call_id: str
    tool_name: str
    file_path: str
    bytes: int
    lines: int

    def to_json(self) -> dict[str, Any]:
        return {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "file_path": self.file_path,
            "bytes": self.bytes,
            "lines": self.lines,
        }


@dataclass(kw_only=True)
class CompactionRecord:
    """What one compaction did. Mutable only while the compactor fills it in.

    ``anchors``/``offloaded`` are ``None`` where harness9 writes ``null``; ``duration_ns`` is
    nanoseconds (harness9's ``duration``); ``timestamp`` RFC 3339 with nanoseconds.
    """

    id: str = ""
    session_id: str = ""
    timestamp: str = ""
    tier: Tier = Tier.NONE
    tokens_before: int = 0
    tokens_after: int = 0
    msgs_before: int = 0
    msgs_after: int = 0
    anchors: list[Anchor] | None = None
    offloaded: list[OffloadEntry] | None = None
    summarized: int = 0
    preserved_tail: int = 0
    summary_text: str = ""
    compression_ratio: float = 0.0
    duration_ns: int = 0
    error: str = ""
    # h9eval-only detail, never written to harness9's JSONL: summarizer usage, options' counters
    # (the keys the replay reads are the EXTRA_* constants above).
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """harness9's JSON object (Go field order; ``error`` omitted when empty)."""
        d: dict[str, Any] = {
            "id": self.id,
            "session_id": self.session_id,
            "timestamp": self.timestamp,
            "tier": int(self.tier),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "msgs_before": self.msgs_before,
            "msgs_after": self.msgs_after,
            "anchors": [a.to_json() for a in self.anchors] if self.anchors is not None else None,
            "offloaded": [o.to_json() for o in self.offloaded] if self.offloaded is not None else None,
            "summarized": self.summarized,
            "preserved_tail": self.preserved_tail,
            "summary_text": self.summary_text,
            "compression_ratio": self.compression_ratio,
            "duration": self.duration_ns,
        }
        if self.error:
            d["error"] = self.error
        return d

    def to_jsonl_line(self) -> str:
        return go_json_dumps(self.to_json()) + "\n"

    @classmethod
    def from_json(cls, d: Any, *, path: str | None = None, where: str | None = None) -> CompactionRecord:
        """Parse a harness9 record object; raises :class:`FormatError` naming the missing field."""
        if not isinstance(d, dict):
            raise FormatError(f"expected a record object, got {type(d).__name__}", path=path, where=where)
        required = ("tier", "tokens_before", "tokens_after", "msgs_before", "msgs_after")
        for k in required:
            if k not in d:
                raise FormatError(f"record lacks field {k!r}", path=path, where=where)
        try:
            anchors = d.get("anchors")
            off = d.get("offloaded")
            return cls(
                id=str(d.get("id", "")),
                session_id=str(d.get("session_id", "")),
                timestamp=str(d.get("timestamp", "")),
                tier=Tier.parse(d["tier"]),
                tokens_before=int(d["tokens_before"]),
                tokens_after=int(d["tokens_after"]),
                msgs_before=int(d["msgs_before"]),
                msgs_after=int(d["msgs_after"]),
                anchors=[Anchor(str(a["type"]), str(a["content"])) for a in anchors] if anchors is not None else None,
                offloaded=[
                    OffloadEntry(
                        str(o.get("tool_call_id", "")),
                        str(o.get("tool_name", "")),
                        str(o.get("file_path", "")),
                        int(o.get("bytes", 0)),
                        int(o.get("lines", 0)),
                    )
                    for o in off
                ]
                if off is not None
                else None,
                summarized=int(d.get("summarized", 0)),
                preserved_tail=int(d.get("preserved_tail", 0)),
                summary_text=str(d.get("summary_text", "")),
                compression_ratio=float(d.get("compression_ratio", 0.0)),
                duration_ns=int(d.get("duration", 0)),
                error=str(d.get("error", "")),
            )
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise FormatError(f"malformed record field: {e}", path=path, where=where) from None


def go_json_dumps(v: Any) -> str:
    """Go ``json.Encoder`` text: compact, struct field order kept, ``<>&`` and U+2028/9 escaped."""
    s = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    if not s.isascii():
        # Go's encoder writes invalid UTF-8 (here: a lone surrogate, which no UTF-8 file can
        # hold) as U+FFFD.
        s = re.sub("[\ud800-\udfff]", "\ufffd", s)
    return go_escape(s)


class FileRecordStore:
    """harness9's ``FileRecordStore``: ``<dir>/<session_id>.jsonl``, dir 0700, files 0600, append-only.

    Unlike harness9, a session id that is not a plain file name is mapped to a safe one
    (see :func:`h9eval.core.paths.safe_name`) so a record can never land outside ``dir``.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path_for(self, session_id: str) -> Path:
        return self.directory / (safe_name(session_id, allow_empty=True) + ".jsonl")

    def _check_directory(self) -> None:
        # The store's own folder and files are never reached through a symlink (one planted in a
        # results folder would send records elsewhere); the folders above it are the user's.
        if self.directory.is_symlink():
            raise FormatError("records folder is a symlink; refusing to write through it", path=str(self.directory))

    def remove(self, session_id: str) -> None:
        """Delete a session's record file (a rerun replaces it); never through a symlinked folder."""
        self._check_directory()
        p = self.path_for(session_id)
        if os.path.lexists(p):
            p.unlink()

    def append(self, rec: CompactionRecord) -> None:
        self._check_directory()
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        p = self.path_for(rec.session_id)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError as e:
            what = (
                "is a symlink; refusing to follow it"
                if p.is_symlink()
                else f"cannot open record file ({e.strerror or e})"
            )
            raise FormatError(what, path=str(p)) from None
        refuse_hard_link(p, what="record file", fd=fd)
        try:
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(rec.to_jsonl_line())
        except OSError as e:  # ENOSPC at the write or the close names no file by itself
            tag_path(e, p)
            raise

    def list(self, session_id: str) -> list[CompactionRecord]:
        p = self.path_for(session_id)
        if not p.exists():
            return []
        return read_records(p, strict=False)


def read_records(path: str | os.PathLike[str], *, strict: bool = True) -> list[CompactionRecord]:
    """Read a JSONL record file. ``strict`` (h9eval's readers) raises :class:`FormatError` on a
    bad line; non-strict (harness9's ``List``) skips lines that do not parse."""
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                out.append(CompactionRecord.from_json(d, path=str(path), where=f"line {i}"))
            except json.JSONDecodeError as e:
                if strict:
                    raise FormatError(
                        f"line is not JSON ({e.msg}); expected one compaction record per line",
                        path=str(path),
                        where=f"line {i}",
                    ) from None
            except FormatError:
                if strict:
                    raise
    return out
