"""An exclusive lock on a folder: one writer at a time (two sweeps into one results folder
would mark a cell ok while another run clears its parts).

The lock is a ``fcntl.flock`` on a file in the folder, which the kernel releases when its
holder dies, so a lock left by a killed process never blocks a resume; the file holds the
holder's pid, for the error message a second writer gets.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from h9eval.core.errors import FormatError

__all__ = ["LOCK_NAME", "folder_lock"]

LOCK_NAME = ".h9eval.lock"
"""The lock file's name inside the locked folder."""


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str], *, what: str = "results folder") -> Iterator[Path]:
    """Hold the exclusive lock on ``folder`` (which must exist) for the block; a second holder
    gets one :class:`FormatError` naming the folder and the pid holding it. Yields the lock
    file's path."""
    p = Path(folder) / LOCK_NAME
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        raise FormatError(f"cannot create the lock file of the {what} ({e.strerror or e})", path=str(p)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise FormatError(
                f"another h9eval process (pid {holder}) is writing this {what}; wait for it to finish", path=str(folder)
            ) from None
        # A pid left by a dead holder is simply overwritten: its flock went with it.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield p
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)
