"""An exclusive lock on a folder: one writer at a time (two sweeps into one results folder
would mark a cell ok while another run clears its parts; two runs into one folder would leave
one run's manifest beside the other's tables).

The lock is :mod:`filelock`'s ``flock`` on a file in the folder, which the kernel releases when
its holder dies, so a lock left by a killed process never blocks a resume. filelock opens the
file with ``O_NOFOLLOW`` and never truncates it before holding it, so a symbolic link planted at
the lock file's name is refused; a planted hard link is refused here (the holder's pid, which
the lock file holds for a second writer's message, would otherwise be written into whatever
file the link shares).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from h9eval.core.errors import FormatError

__all__ = ["LOCK_NAME", "folder_lock"]

LOCK_NAME = ".h9eval.lock"
"""The lock file's name inside the locked folder."""


class _HardLinked(OSError):
    """The lock file has another name: the pid is not written through it."""


def _holder(p: Path) -> str:
    """The pid a holder wrote into the lock file (read without following a link)."""
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except OSError:
        return "unknown"
    try:
        return os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
    finally:
        os.close(fd)


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str], *, what: str = "results folder") -> Iterator[Path]:
    """Hold the exclusive lock on ``folder`` (which must exist) for the block; a second holder
    (another process, or another ``folder_lock`` in this one) gets one :class:`FormatError`
    naming the folder and the pid holding it. A lock file that is a symbolic link or has a
    second hard link is refused (:class:`FormatError` naming it), never written through.
    Yields the lock file's path."""
    p = Path(folder) / LOCK_NAME
    held: list[int] = []

    def _acquired(fd: int) -> None:
        if os.fstat(fd).st_nlink > 1:
            raise _HardLinked(errno.EMLINK, "hard-linked")
        # A pid left by a dead holder is simply overwritten: its flock went with it.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        held[:] = [fd]

    # thread_local=False: a lock taken in one thread may be released by the code's own exit path
    lock = FileLock(p, timeout=0, on_acquired=_acquired, thread_local=False, mode=0o644)
    try:
        lock.acquire()
    except Timeout:
        raise FormatError(
            f"another h9eval process (pid {_holder(p)}) is writing this {what}; wait for it to finish", path=str(folder)
        ) from None
    except _HardLinked:
        raise FormatError(
            f"the lock file of the {what} has another hard link; refusing to write through it (remove it)", path=str(p)
        ) from None
    except OSError as e:
        why = "is a symbolic link; refusing to follow it" if e.errno == errno.ELOOP else (e.strerror or str(e))
        raise FormatError(f"cannot take the lock file of the {what}: {why}", path=str(p)) from None
    try:
        yield p
    finally:
        try:
            for fd in held:  # the pid goes with the hold (the file stays, for the next holder)
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
        finally:
            lock.release()
