"""What a world's tool results are made of around their informative lines, and how big they are.

Real agents read source files, test logs, directory listings and search results, most of them
irrelevant to the step at hand; harness9's offload hook, the masking policies and the
summarizers all act on that bulk. :func:`filler` writes such text, deterministically from a
seed, in one of :data:`FILLER_KINDS`. It never contains a token shaped like a world's nonce
(``K-1a2b3c4d``), nor the phrases the scripted agent or the worlds' checks read (no test-run
totals, no ``lookup``/``audit`` lines), so it can only cost tokens, never answer a question.

:class:`SizeTable` is the distribution of tool-result sizes in the recorded sessions under
``shared/data/recorded`` (982 results of 13 sessions by Claude Code, mini-SWE-agent, OpenHands
and SWE-agent): its quantiles are shipped as ``tool_result_sizes.csv`` beside this module, and
:func:`derive_size_table` is the function that derived them (``python -m
h9eval.closedloop.worlds.filler RECORDED_DIR`` rewrites the file). A world with
``result_sizes="recorded"`` draws each result's total size from it (inverse CDF, seeded by the
call), so an episode's token growth has the recorded sessions' mix of small results and
occasional 10-40 KB outputs.
"""

from __future__ import annotations

import bisect
import csv
import io
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from h9eval.tasks.recorded import load_tasks

__all__ = ["FILLER_KINDS", "SIZE_TABLE_PATH", "SizeTable", "derive_size_table", "filler", "size_table", "splice"]

FILLER_KINDS = ("source", "test_log", "listing", "search")
SIZE_TABLE_PATH = Path(__file__).with_name("tool_result_sizes.csv")
#: quantiles stored in the shipped table (every percentile, plus the tail in finer steps)
_QUANTILES = tuple(i / 100 for i in range(100)) + (0.995, 0.999, 1.0)

_MODULES = (
    "storage",
    "client",
    "server",
    "render",
    "parser",
    "schema",
    "config",
    "router",
    "cache",
    "worker",
    "metrics",
    "session",
    "auth",
    "billing",
    "export",
    "importer",
    "scheduler",
    "queue",
    "events",
    "search",
)
_NAMES = (
    "load",
    "save",
    "parse",
    "render",
    "flush",
    "merge",
    "resolve",
    "validate",
    "encode",
    "decode",
    "fetch",
    "update",
    "handle",
    "register",
    "collect",
    "normalize",
    "build",
    "apply",
    "close",
    "open",
)
_NOUNS = (
    "config",
    "record",
    "buffer",
    "entry",
    "payload",
    "request",
    "response",
    "segment",
    "token",
    "index",
    "batch",
    "header",
    "options",
    "context",
    "result",
    "offset",
    "window",
    "cursor",
    "schema",
    "state",
)
_DIRS = ("src", "lib", "tests", "docs", "scripts", "internal", "pkg", "tools", "examples", "assets")
_EXTS = (".py", ".py", ".py", ".go", ".ts", ".md", ".toml", ".json", ".yaml", ".txt")


def filler(nbytes: int, seed: str, kind: str | None = None) -> str:
    """``nbytes`` bytes (exactly; ASCII) of text of ``kind`` (one of :data:`FILLER_KINDS`;
    ``None``: drawn from the seed), deterministic from ``seed``."""
    if nbytes <= 0:
        return ""
    rng = random.Random(seed)
    kind = kind or rng.choice(FILLER_KINDS)
    make = _MAKERS[kind]
    lines: list[str] = []
    total = 0
    while total < nbytes:
        line = make(rng)
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:nbytes]


def splice(info: str, pad: str, position: str, seed: str) -> str:
    """``info`` (the informative lines) placed in ``pad``: ``head`` before it, ``tail`` after it,
    ``anywhere`` between two of its lines chosen from ``seed`` (the first line included)."""
    if not pad:
        return info
    if position == "head":
        return info + "\n" + pad
    if position == "tail":
        return pad + "\n" + info
    lines = pad.split("\n")
    at = random.Random(seed).randrange(len(lines) + 1)
    return "\n".join(lines[:at] + [info] + lines[at:])


def _noun(rng: random.Random) -> str:
    return rng.choice(_NOUNS)


def _name(rng: random.Random) -> str:
    return rng.choice(_NAMES)


def _ident(rng: random.Random) -> str:
    return f"{_name(rng)}_{_noun(rng)}"


def _path(rng: random.Random) -> str:
    return f"{rng.choice(_DIRS)}/{rng.choice(_MODULES)}/{_noun(rng)}{rng.choice(_EXTS)}"


def _indent(rng: random.Random) -> str:
    return "    " * rng.randrange(3)


def _module(rng: random.Random) -> str:
    return rng.choice(_MODULES)


#: a line template: the random stream and what was drawn with the choice of template (an indent,
#: a module name) -> one line
_Template = Callable[[random.Random, str], str]


def _weighted_line(
    rng: random.Random,
    templates: Sequence[tuple[float, _Template]],
    context: Callable[[random.Random], str] | None = None,
) -> str:
    """One line from ``templates`` (``(bound, template)``, bounds cumulative, the last 1.0): the
    first whose bound is above one draw; ``context`` (an indent, a module) is drawn right after it."""
    r = rng.random()
    drawn = context(rng) if context is not None else ""
    for bound, make in templates:
        if r < bound:
            return make(rng, drawn)
    raise ValueError(f"a template table must end at bound 1.0, got {templates[-1][0]}")


_SOURCE_LINES: tuple[tuple[float, _Template], ...] = (
    (0.12, lambda rng, _: f"def {_ident(rng)}({_noun(rng)}, {_noun(rng)}=None):"),
    (0.20, lambda rng, ind: f'{ind}"""{_name(rng).capitalize()} the {_noun(rng)} from its {_noun(rng)}."""'),
    (0.35, lambda rng, ind: f"{ind}if {_noun(rng)} is None:"),
    (0.55, lambda rng, ind: f"{ind}{_noun(rng)} = {_ident(rng)}({_noun(rng)}, {rng.randrange(64)})"),
    (0.65, lambda rng, ind: f"{ind}return {_noun(rng)}.{_name(rng)}()"),
    (0.72, lambda rng, _: f"from {_module(rng)}.{_noun(rng)} import {_ident(rng)}"),
    (0.80, lambda rng, ind: f"{ind}# keep the {_noun(rng)} sorted by {_noun(rng)}"),
    (0.90, lambda rng, ind: f"{ind}for {_noun(rng)} in self.{_noun(rng)}s:"),
    (1.0, lambda rng, _: ""),
)
_TEST_LOG_LINES: tuple[tuple[float, _Template], ...] = (
    (
        0.55,
        lambda rng, mod: (
            f"tests/{mod}/test_{_noun(rng)}.py::test_{_ident(rng)} PASSED"
            f"{' ' * rng.randrange(1, 8)}[{rng.randrange(100):3d}%]"
        ),
    ),
    (0.65, lambda rng, mod: f"tests/{mod}/test_{_noun(rng)}.py::test_{_ident(rng)} SKIPPED (needs {_noun(rng)})"),
    (
        0.80,
        lambda rng, _: (
            f"  {_module(rng)}/{_noun(rng)}.py:{rng.randrange(1, 900)}: DeprecationWarning: {_ident(rng)} is deprecated"
        ),
    ),
    (0.90, lambda rng, _: f"collected {rng.randrange(20, 900)} items / {rng.randrange(5)} deselected"),
    (
        1.0,
        lambda rng, _: (
            f"[{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}] "
            f"{_name(rng)} {_noun(rng)} in {rng.random():.3f}s"
        ),
    ),
)
_SEARCH_LINES: tuple[tuple[float, _Template], ...] = (
    (0.7, lambda rng, _: f"{_path(rng)}:{rng.randrange(1, 1200)}:    {_noun(rng)} = {_ident(rng)}({_noun(rng)})"),
    (0.9, lambda rng, _: f"{_path(rng)}:{rng.randrange(1, 1200)}:def {_ident(rng)}(self, {_noun(rng)}):"),
    (1.0, lambda rng, _: f"{_path(rng)}:{rng.randrange(1, 1200)}:# NOTE({_name(rng)}): {_noun(rng)} handling"),
)


def _listing_line(rng: random.Random) -> str:
    perm = rng.choice(("-rw-r--r--", "-rw-r--r--", "drwxr-xr-x", "-rwxr-xr-x"))
    size = rng.randrange(96, 48_000)
    month = rng.choice(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"))
    day, hour, minute = rng.randrange(1, 29), rng.randrange(24), rng.randrange(60)
    return f"{perm} 1 dev dev {size:6d} {month} {day:2d} {hour:02d}:{minute:02d} {_path(rng)}"


#: one line of each kind
_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "source": lambda rng: _weighted_line(rng, _SOURCE_LINES, _indent),
    "test_log": lambda rng: _weighted_line(rng, _TEST_LOG_LINES, _module),
    "listing": _listing_line,
    "search": lambda rng: _weighted_line(rng, _SEARCH_LINES),
}


# -- the size distribution ----------------------------------------------------------------------
@dataclass(frozen=True)
class SizeTable:
    """Quantiles of tool-result sizes in bytes (``quantiles`` increasing from 0 to 1)."""

    quantiles: tuple[float, ...]
    sizes_bytes: tuple[int, ...]
    #: results and sessions the table was derived from
    n_results: int
    n_sessions: int

    def draw(self, u: float) -> int:
        """The size at quantile ``u`` in [0, 1) (linear between stored quantiles)."""
        q = self.quantiles
        i = bisect.bisect_right(q, u) - 1
        i = min(max(i, 0), len(q) - 2)
        lo, hi = q[i], q[i + 1]
        f = (u - lo) / (hi - lo) if hi > lo else 0.0
        return round(self.sizes_bytes[i] + f * (self.sizes_bytes[i + 1] - self.sizes_bytes[i]))

    @property
    def mean_bytes(self) -> float:
        """The mean of the interpolated distribution (trapezoids between stored quantiles)."""
        q, s = self.quantiles, self.sizes_bytes
        return sum((q[i + 1] - q[i]) * (s[i] + s[i + 1]) / 2 for i in range(len(q) - 1))

    def to_csv(self) -> str:
        out = io.StringIO()
        out.write(f"# tool-result sizes of {self.n_results} results in {self.n_sessions} recorded sessions\n")
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["quantile", "bytes"])
        for qq, b in zip(self.quantiles, self.sizes_bytes):
            w.writerow([f"{qq:.3f}", b])
        return out.getvalue()

    @classmethod
    def from_csv(cls, text: str) -> SizeTable:
        head, _, body = text.partition("\n")
        words = head.split()
        n_results, n_sessions = int(words[words.index("of") + 1]), int(words[words.index("in") + 1])
        rows = list(csv.DictReader(io.StringIO(body)))
        return cls(
            tuple(float(r["quantile"]) for r in rows), tuple(int(r["bytes"]) for r in rows), n_results, n_sessions
        )


def derive_size_table(sizes_per_session: Sequence[Sequence[int]]) -> SizeTable:
    """The quantile table of the given tool-result sizes (one sequence per session)."""
    sizes = sorted(s for sess in sizes_per_session for s in sess)
    if not sizes:
        raise ValueError("no tool results to derive a size table from")
    n = len(sizes)
    # the empirical quantile at the nearest rank below (q = 1 is the largest result)
    out = tuple(sizes[min(int(q * (n - 1) + 1e-9), n - 1)] for q in _QUANTILES)
    return SizeTable(_QUANTILES, out, n, sum(1 for s in sizes_per_session if s))


def recorded_sizes(root: str | Path) -> list[list[int]]:
    """Byte sizes of every tool result of every recorded session under ``root``."""
    return [[m.nbytes for m in t.messages if m.is_tool_result] for t in load_tasks(root)]


@lru_cache(maxsize=1)
def size_table() -> SizeTable:
    """The shipped table (``tool_result_sizes.csv``)."""
    return SizeTable.from_csv(SIZE_TABLE_PATH.read_text(encoding="utf-8"))


if __name__ == "__main__":  # pragma: no cover - the derivation script
    SIZE_TABLE_PATH.write_text(derive_size_table(recorded_sizes(sys.argv[1])).to_csv(), encoding="utf-8")
