"""Rows no JSON library is handed: nested deeper than :data:`MAX_ROW_DEPTH`, or not UTF-8.

Python's :mod:`json` recurses once per level of nesting and stops at the interpreter's recursion
limit (1,000 frames, less the stack already in use), and the JSON builder of :mod:`datasets`
(pyarrow, ujson) kills the process outright on a row nested some 10,000 deep (a segfault, nothing
printed). So nesting is measured here without parsing and without recursion: string literals are
cut out, the brackets left become +1/-1 steps, and the peak of their running sum is the depth.

:func:`screen_json_files` does this for every row of local JSON Lines files before the builder
reads them, and writes a copy without the bad rows when there are some; :func:`value_too_deep`
does it for a row already read (a parquet or Arrow row, and the JSON text in its values).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h9eval.core.errors import FormatError

__all__ = [
    "DEEP_REASON",
    "MAX_ROW_DEPTH",
    "NOT_UTF8_REASON",
    "Screened",
    "json_depth",
    "screen_json_files",
    "value_too_deep",
]

MAX_ROW_DEPTH = 500
"""Deepest nesting of lists and objects a dataset row may have (JSON text in its values included).
Real trajectories nest a few dozen levels; the limit stays well below the depth at which Python's
own JSON encoder gives up (about 1,000 less the caller's stack), so a row that passes converts."""
DEEP_REASON = f"row nested deeper than {MAX_ROW_DEPTH} levels"
NOT_UTF8_REASON = "row is not UTF-8 text"

# A JSON string literal (escapes included): brackets inside one are text, not nesting. Written as
# an unrolled loop so that matching a long string never backtracks.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_OPENERS = (ord("["), ord("{"))


def _depth_and_balance(text: bytes) -> tuple[int, int]:
    """``(peak nesting, brackets left open at the end)`` of JSON text, without parsing it."""
    if text.count(b"[") + text.count(b"{") == 0:
        return 0, -(text.count(b"]") + text.count(b"}"))
    import numpy as np

    brackets = np.frombuffer(_STRING.sub(b"", text).translate(None, _NOT_BRACKET), dtype=np.uint8)
    if brackets.size == 0:
        return 0, 0
    running = np.cumsum(np.where(np.isin(brackets, _OPENERS), 1, -1))
    return max(int(running.max()), 0), int(running[-1])


def json_depth(text: bytes | str) -> int:
    """The deepest nesting of lists and objects in JSON text (0 for a scalar), found iteratively."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return _depth_and_balance(raw)[0]


def _text_too_deep(text: str, limit: int) -> bool:
    # Cheap first: text with fewer opening brackets than the limit cannot nest deeper than it.
    if text.count("[") + text.count("{") <= limit:
        return False
    return json_depth(text) > limit


def value_too_deep(value: Any, limit: int = MAX_ROW_DEPTH) -> bool:
    """Whether a row read as Python values nests deeper than ``limit``, counting the JSON text in its
    strings (adapters decode text columns) at the depth where it sits. Walks with its own stack, so
    a row of any depth is measured without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]  # (value, containers around it)
    while stack:
        v, around = stack.pop()
        if isinstance(v, str):
            if _text_too_deep(v, limit - around):
                return True
            continue
        if isinstance(v, Mapping):
            children: Any = v.values()
        elif isinstance(v, (list, tuple)):
            children = v
        else:
            continue
        if around + 1 > limit:
            return True
        stack.extend((c, around + 1) for c in children)
    return False


@dataclass(frozen=True)
class Screened:
    """What to hand the JSON builder, and the rows left out of it."""

    files: list[str]
    """The files to read: each original, or its copy without its bad rows."""
    rows: dict[int, str]
    """Bad rows by row number over all the files in order (what the builder would have numbered
    them), with the reason each was left out."""


@dataclass
class _FileScan:
    rows: int | None  # None: a whole-file JSON document, its rows not counted yet
    bad: dict[int, str]  # row number within the file -> reason


def _scan_document(path: str, data: bytes) -> None:
    """A file that is one JSON document (an array of rows, or one object over several lines): it is
    refused, naming the file and line, if it is not UTF-8 or nests deeper than a row may."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise FormatError(
            "not UTF-8 text (the file is one JSON document, not one row per line)", path=path, where=f"line {line}"
        ) from None
    depth = json_depth(data)
    if depth > MAX_ROW_DEPTH + 1:  # one level is the document's own array or object
        raise FormatError(
            f"nested {depth} levels deep; a row may nest at most {MAX_ROW_DEPTH} "
            "(the file is one JSON document, not one row per line)",
            path=path,
        )


def _document_rows(path: str) -> int:
    """Rows of a whole-file document as the JSON builder makes them: an array's items, or the longest
    column of an object of columns. Parsed only once :func:`_scan_document` has passed it."""
    with open(path, "rb") as f:
        doc = json.loads(f.read())
    if isinstance(doc, list):
        return len(doc)
    if isinstance(doc, dict):
        return max((len(v) for v in doc.values() if isinstance(v, list)), default=1)
    return 1


def _scan_file(path: str) -> _FileScan:
    bad: dict[int, str] = {}
    row = -1
    unbalanced = False
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue  # the builder skips blank lines: they are not rows
            row += 1
            if row == 0 and line.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
                unbalanced = True  # a JSON array of rows: one document
                break
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                bad[row] = NOT_UTF8_REASON
                continue
            depth, balance = _depth_and_balance(line)
            if balance != 0:
                unbalanced = True  # a row cannot span lines: this file is one document (or broken)
                break
            if depth > MAX_ROW_DEPTH:
                bad[row] = DEEP_REASON
    if unbalanced:
        with open(path, "rb") as f:
            _scan_document(path, f.read())
        return _FileScan(rows=None, bad={})
    return _FileScan(rows=row + 1, bad=bad)


def _write_without(path: str, bad: Mapping[int, str], target: Path) -> None:
    """A copy of ``path`` without its bad rows, written whole or not at all (sweep workers open the
    same dataset at once)."""
    if target.exists():
        return  # named by the dataset's content hash: an existing copy is this one
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(path, "rb") as src, open(tmp, "wb") as out:
            row = -1
            for line in src:
                if line.strip():
                    row += 1
                    if row in bad:
                        continue
                out.write(line)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def screen_json_files(files: list[str], folder: Path) -> Screened:
    """Every row of local JSON Lines ``files`` checked for nesting and UTF-8 before the JSON builder
    reads one; a file with bad rows is replaced by a copy without them, written under ``folder``
    (which must be named by the files' content). A file that is one JSON document is checked whole."""
    scans = [_scan_file(f) for f in files]
    if not any(s.bad for s in scans):
        return Screened(files=list(files), rows={})
    out_files: list[str] = []
    rows: dict[int, str] = {}
    offset = 0
    for i, (f, scan) in enumerate(zip(files, scans)):
        if scan.bad:
            target = folder / f"{i}-{Path(f).name}"
            _write_without(f, scan.bad, target)
            out_files.append(str(target))
            rows.update({offset + r: reason for r, reason in scan.bad.items()})
        else:
            out_files.append(f)
        offset += scan.rows if scan.rows is not None else _document_rows(f)
    return Screened(files=out_files, rows=rows)
