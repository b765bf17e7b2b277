"""Progress of every step a user waits on (a sweep's cells, the tuner's stages, a report's
sections, loading a folder of sessions): tqdm's bar on a terminal or as a notebook widget,
plain periodic lines anywhere else (CI logs, a notebook's output captured to a file), where a
bar would write one multi-kilobyte carriage-return line per update.

A step that may be quick passes ``delay_s``: nothing is shown unless it is still running after
that many seconds. Worker processes call :func:`silence` (their progress is the sweep's)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

__all__ = [
    "QUIET_DELAY_S",
    "LINE_EVERY_FRAC",
    "LINE_EVERY_S",
    "NullProgress",
    "PlainProgress",
    "Progress",
    "in_notebook",
    "make_progress",
    "silence",
]

QUIET_DELAY_S = 2.0
"""A step that is often quick (loading a folder or a database of sessions, a report) shows its
progress only when it is still running after this many seconds."""
LINE_EVERY_FRAC = 0.10
"""Plain output writes a line each time another tenth of the cells has finished ..."""
LINE_EVERY_S = 30.0
"""... or this many seconds after the previous line, whichever comes first."""


class Progress(Protocol):
    """What the sweep calls (the subset of tqdm's interface it uses)."""

    def update(self, n: int = 1) -> Any: ...

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> Any: ...

    def set_description(self, desc: str | None = None, refresh: bool = True) -> Any: ...

    def close(self) -> Any: ...


_SILENT = False


def silence() -> None:
    """Show no progress from this process from now on (a sweep's worker processes)."""
    global _SILENT
    _SILENT = True


class NullProgress:
    """Progress that shows nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        pass

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


class PlainProgress:
    """One short line per tenth of the units (or per ``LINE_EVERY_S`` seconds) and a last one on
    :meth:`close`: ``sweep demo: 24/40 cells (60%), ok=24 failed=0 remaining=16, 12 s``. With
    ``delay_s``, nothing until that many seconds have passed."""

    def __init__(
        self,
        *,
        total: int,
        initial: int = 0,
        desc: str,
        stream: TextIO,
        unit: str = "cell",
        delay_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.n = initial
        self.desc = desc
        self.stream = stream
        self.unit = unit
        self._clock = clock
        self._t0 = self._last_t = clock()
        self._delay_s = delay_s
        self._step = max(1, int(total * LINE_EVERY_FRAC))
        self._last_n = initial
        self._postfix = ""
        self._closed = False
        self._shown = False
        if delay_s <= 0:
            self._line()  # the starting point, so a log shows the step began

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self._clock()
        if not self._shown and now - self._t0 < self._delay_s:
            return
        if (
            not self._shown
            or self.n - self._last_n >= self._step
            or now - self._last_t >= LINE_EVERY_S
            or self.n >= self.total
        ):
            self._line()

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        items = {**(dict(ordered_dict) if ordered_dict else {}), **kwargs}
        self._postfix = " ".join(f"{k}={v}" for k, v in items.items())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.n != self._last_n and (self._shown or self._clock() - self._t0 >= self._delay_s):
            self._line()

    def _line(self) -> None:
        now = self._clock()
        pct = f" ({100 * self.n // self.total}%)" if self.total else ""
        tail = f", {self._postfix}" if self._postfix else ""
        self.stream.write(f"{self.desc}: {self.n}/{self.total} {self.unit}s{pct}{tail}, {now - self._t0:.0f} s\n")
        self.stream.flush()
        self._last_n, self._last_t = self.n, now
        self._shown = True


def in_notebook() -> bool:
    """Running in a Jupyter kernel (where tqdm draws a widget)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython() if hasattr(ipython, "get_ipython") else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def make_progress(
    *,
    total: int,
    initial: int = 0,
    desc: str,
    stream: TextIO | None = None,
    unit: str = "cell",
    delay_s: float = 0.0,
    enabled: bool = True,
) -> Progress:
    """tqdm's widget in a notebook, its bar when ``stream`` (default stderr) is a terminal,
    else :class:`PlainProgress`; :class:`NullProgress` when not ``enabled`` or after
    :func:`silence`. ``unit``: what is counted (``"cell"``, ``"section"``, ``"file"``);
    ``delay_s``: show nothing unless the step is still running after that many seconds."""
    if not enabled or _SILENT:
        return NullProgress()
    out = stream if stream is not None else sys.stderr
    if in_notebook():
        from tqdm.auto import tqdm  # type: ignore[import-untyped]

        return tqdm(total=total, initial=initial, desc=desc, unit=unit, delay=delay_s)  # type: ignore[no-any-return]
    isatty = getattr(out, "isatty", None)
    if callable(isatty) and isatty():
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True, file=out, delay=delay_s)  # type: ignore[no-any-return]
    return PlainProgress(total=total, initial=initial, desc=desc, stream=out, unit=unit, delay_s=delay_s)
