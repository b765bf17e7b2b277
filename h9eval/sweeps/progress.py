"""A sweep's progress: tqdm's bar on a terminal or as a notebook widget, plain periodic lines
anywhere else (CI logs, a notebook's output captured to a file), where a bar would write one
multi-kilobyte carriage-return line per update."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

__all__ = ["LINE_EVERY_FRAC", "LINE_EVERY_S", "PlainProgress", "Progress", "in_notebook", "make_progress"]

LINE_EVERY_FRAC = 0.10
"""Plain output writes a line each time another tenth of the cells has finished ..."""
LINE_EVERY_S = 30.0
"""... or this many seconds after the previous line, whichever comes first."""


class Progress(Protocol):
    """What the sweep calls (the subset of tqdm's interface it uses)."""

    def update(self, n: int = 1) -> Any: ...

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> Any: ...

    def close(self) -> Any: ...


class PlainProgress:
    """One short line per tenth of the cells (or per ``LINE_EVERY_S`` seconds) and a last one on
    :meth:`close`: ``sweep demo: 24/40 cells (60%), ok=24 failed=0 remaining=16, 12 s``."""

    def __init__(
        self,
        *,
        total: int,
        initial: int = 0,
        desc: str,
        stream: TextIO,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.n = initial
        self.desc = desc
        self.stream = stream
        self._clock = clock
        self._t0 = self._last_t = clock()
        self._step = max(1, int(total * LINE_EVERY_FRAC))
        self._last_n = initial
        self._postfix = ""
        self._closed = False
        self._line()  # the starting point, so a log shows the sweep began

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self._clock()
        if self.n - self._last_n >= self._step or now - self._last_t >= LINE_EVERY_S or self.n >= self.total:
            self._line()

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        items = {**(dict(ordered_dict) if ordered_dict else {}), **kwargs}
        self._postfix = " ".join(f"{k}={v}" for k, v in items.items())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.n != self._last_n:
            self._line()

    def _line(self) -> None:
        now = self._clock()
        pct = f" ({100 * self.n // self.total}%)" if self.total else ""
        tail = f", {self._postfix}" if self._postfix else ""
        self.stream.write(f"{self.desc}: {self.n}/{self.total} cells{pct}{tail}, {now - self._t0:.0f} s\n")
        self.stream.flush()
        self._last_n, self._last_t = self.n, now


def in_notebook() -> bool:
    """Running in a Jupyter kernel (where tqdm draws a widget)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython() if hasattr(ipython, "get_ipython") else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def make_progress(*, total: int, initial: int, desc: str, stream: TextIO | None = None) -> Progress:
    """tqdm's widget in a notebook, its bar when ``stream`` (default stderr) is a terminal,
    else :class:`PlainProgress`."""
    out = stream if stream is not None else sys.stderr
    if in_notebook():
        from tqdm.auto import tqdm  # type: ignore[import-untyped]

        return tqdm(total=total, initial=initial, desc=desc, unit="cell")  # type: ignore[no-any-return]
    isatty = getattr(out, "isatty", None)
    if callable(isatty) and isatty():
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=desc, unit="cell", dynamic_ncols=True, file=out)  # type: ignore[no-any-return]
    return PlainProgress(total=total, initial=initial, desc=desc, stream=out)
