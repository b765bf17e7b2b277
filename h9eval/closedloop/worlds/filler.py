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
from collections.abc import Sequence
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
    "storage", "client", "server", "render", "parser", "schema", "config", "router", "cache", "worker",
    "metrics", "session", "auth", "billing", "export", "importer", "scheduler", "queue", "events", "search",
)
_NAMES = (
    "load", "save", "parse", "render", "flush", "merge", "resolve", "validate", "encode", "decode",
    "fetch", "update", "handle", "register", "collect", "normalize", "build", "apply", "close", "open",
)
_NOUNS = (
    "config", "record", "buffer", "entry", "payload", "request", "response", "segment", "token", "index",
    "batch", "header", "options", "context", "result", "offset", "window", "cursor", "schema", "state",
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
    i = 0
    while total < nbytes:
        i += 1
        line = make(rng, i)
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


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(_NAMES)}_{rng.choice(_NOUNS)}"


def _path(rng: random.Random) -> str:
    return f"{rng.choice(_DIRS)}/{rng.choice(_MODULES)}/{rng.choice(_NOUNS)}{rng.choice(_EXTS)}"


def _source_line(rng: random.Random, i: int) -> str:
    r = rng.random()
    indent = "    " * rng.randrange(3)
    if r < 0.12:
        return f"def {_ident(rng)}({rng.choice(_NOUNS)}, {rng.choice(_NOUNS)}=None):"
    if r < 0.20:
        return f'{indent}"""{rng.choice(_NAMES).capitalize()} the {rng.choice(_NOUNS)} from its {rng.choice(_NOUNS)}."""'
    if r < 0.35:
        return f"{indent}if {rng.choice(_NOUNS)} is None:"
    if r < 0.55:
        return f"{indent}{rng.choice(_NOUNS)} = {_ident(rng)}({rng.choice(_NOUNS)}, {rng.randrange(64)})"
    if r < 0.65:
        return f"{indent}return {rng.choice(_NOUNS)}.{rng.choice(_NAMES)}()"
    if r < 0.72:
        return f"from {rng.choice(_MODULES)}.{rng.choice(_NOUNS)} import {_ident(rng)}"
    if r < 0.80:
        return f"{indent}# keep the {rng.choice(_NOUNS)} sorted by {rng.choice(_NOUNS)}"
    if r < 0.90:
        return f"{indent}for {rng.choice(_NOUNS)} in self.{rng.choice(_NOUNS)}s:"
    return ""


def _test_log_line(rng: random.Random, i: int) -> str:
    r = rng.random()
    mod = rng.choice(_MODULES)
    if r < 0.55:
        return f"tests/{mod}/test_{rng.choice(_NOUNS)}.py::test_{_ident(rng)} PASSED{' ' * rng.randrange(1, 8)}[{rng.randrange(100):3d}%]"
    if r < 0.65:
        return f"tests/{mod}/test_{rng.choice(_NOUNS)}.py::test_{_ident(rng)} SKIPPED (needs {rng.choice(_NOUNS)})"
    if r < 0.80:
        return f"  {rng.choice(_MODULES)}/{rng.choice(_NOUNS)}.py:{rng.randrange(1, 900)}: DeprecationWarning: {_ident(rng)} is deprecated"
    if r < 0.90:
        return f"collected {rng.randrange(20, 900)} items / {rng.randrange(5)} deselected"
    return f"[{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}] {rng.choice(_NAMES)} {rng.choice(_NOUNS)} in {rng.random():.3f}s"


def _listing_line(rng: random.Random, i: int) -> str:
    perm = rng.choice(("-rw-r--r--", "-rw-r--r--", "drwxr-xr-x", "-rwxr-xr-x"))
    size = rng.randrange(96, 48_000)
    month = rng.choice(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"))
    return f"{perm} 1 dev dev {size:6d} {month} {rng.randrange(1, 29):2d} {rng.randrange(24):02d}:{rng.randrange(60):02d} {_path(rng)}"


def _search_line(rng: random.Random, i: int) -> str:
    r = rng.random()
    if r < 0.7:
        return f"{_path(rng)}:{rng.randrange(1, 1200)}:    {rng.choice(_NOUNS)} = {_ident(rng)}({rng.choice(_NOUNS)})"
    if r < 0.9:
        return f"{_path(rng)}:{rng.randrange(1, 1200)}:def {_ident(rng)}(self, {rng.choice(_NOUNS)}):"
    return f"{_path(rng)}:{rng.randrange(1, 1200)}:# NOTE({rng.choice(_NAMES)}): {rng.choice(_NOUNS)} handling"


_MAKERS = {"source": _source_line, "test_log": _test_log_line, "listing": _listing_line, "search": _search_line}


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
        return cls(tuple(float(r["quantile"]) for r in rows), tuple(int(r["bytes"]) for r in rows), n_results, n_sessions)


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
