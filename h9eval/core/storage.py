"""Storage failures said as what they are, naming the file: the one line the CLI prints for an
``OSError`` or an SQLite error.

SQLite's errors name no file, and on a full disk SQLite does not always say so: a write that
finds no space can surface as ``disk I/O error``, or, when SQLite has already rolled the
transaction back, as ``cannot rollback - no transaction is active`` from the caller's own
rollback. :func:`connect` gives a connection whose errors carry the database's path
(:data:`PATH_ATTR`), and :func:`storage_error_line` says "disk full" whenever the error is
``ENOSPC``/``EDQUOT``, SQLite's ``database or disk is full``, or one of those two messages while
the file system holding the file has less than :data:`DISK_FULL_BYTES` free.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["DISK_FULL_BYTES", "PATH_ATTR", "connect", "free_bytes", "is_disk_full", "storage_error_line", "tag_path"]

DISK_FULL_BYTES = 1024 * 1024
"""Free bytes below which an ambiguous SQLite I/O error is taken for a full disk (SQLite needs a
few pages, a journal and a WAL frame for a commit; a file system this close to full fails one)."""

PATH_ATTR = "h9eval_path"
"""The attribute an exception carries the file it concerns in (set by :func:`tag_path`)."""

_AMBIGUOUS = ("disk i/o error", "cannot rollback", "cannot commit")


def tag_path(e: BaseException, path: str | os.PathLike[str]) -> None:
    """Record on ``e`` the file it concerns (the first tag wins: the innermost file)."""
    if getattr(e, PATH_ATTR, None) is None:
        setattr(e, PATH_ATTR, str(path))


class _NamedConnection(sqlite3.Connection):
    """An SQLite connection whose errors carry its file's path (:func:`tag_path`)."""

    h9eval_path: str = ""

    def execute(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().execute(*args, **kwargs)
        except sqlite3.Error as e:
            tag_path(e, self.h9eval_path)
            raise

    def executemany(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().executemany(*args, **kwargs)
        except sqlite3.Error as e:
            tag_path(e, self.h9eval_path)
            raise

    def executescript(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().executescript(*args, **kwargs)
        except sqlite3.Error as e:
            tag_path(e, self.h9eval_path)
            raise

    def commit(self) -> None:
        try:
            super().commit()
        except sqlite3.Error as e:
            tag_path(e, self.h9eval_path)
            raise

    def rollback(self) -> None:
        try:
            super().rollback()
        except sqlite3.Error as e:
            tag_path(e, self.h9eval_path)
            raise


def connect(
    database: str | os.PathLike[str], *, shown: str | os.PathLike[str] | None = None, **kwargs: Any
) -> sqlite3.Connection:
    """``sqlite3.connect(database, **kwargs)`` whose errors name ``shown`` (default
    ``database``; give the file when ``database`` is a ``file:`` URI)."""
    name = str(shown if shown is not None else database)
    try:
        con = sqlite3.connect(database, factory=_NamedConnection, **kwargs)
    except sqlite3.Error as e:
        tag_path(e, name)
        raise
    con.h9eval_path = name  # type: ignore[attr-defined]
    return con


def free_bytes(path: str | os.PathLike[str]) -> int | None:
    """Bytes an unprivileged writer may still use on the file system holding ``path`` (its
    nearest existing folder); ``None`` when that cannot be told."""
    p = Path(path)
    for d in (p, *p.parents):
        try:
            if d.is_dir():
                st = os.statvfs(d)
                return st.f_bavail * st.f_frsize
        except OSError:
            return None
    return None


def is_disk_full(e: BaseException, path: str | os.PathLike[str] | None) -> bool:
    """Whether ``e`` is a full disk (see the module docstring)."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if not isinstance(e, sqlite3.Error):
        return False
    msg = str(e).lower()
    if "database or disk is full" in msg or getattr(e, "sqlite_errorname", "") == "SQLITE_FULL":
        return True
    if path is None or not any(s in msg for s in _AMBIGUOUS):
        return False
    left = free_bytes(path)
    return left is not None and left < DISK_FULL_BYTES


def storage_error_line(e: BaseException) -> str:
    """One line for an ``OSError`` or SQLite error: the file it concerns first (when known),
    "disk full" when it is one, SQLite's or the system's own words after."""
    path = getattr(e, PATH_ATTR, None)
    if path is None and isinstance(e, OSError) and e.filename:
        path = str(e.filename)
    msg = " ".join(str(e).split()) or type(e).__name__
    if is_disk_full(e, path):
        left = free_bytes(path) if path is not None else None
        room = f"{left:,} bytes left on its file system" if left is not None else "no space left"
        msg = f"disk full ({room}; {msg})"
    if path is not None and path not in msg:
        msg = f"{path}: {msg}"
    return msg
