"""A spending cap shared by every process of a sweep: ``--max-cost-usd`` (a spec's ``max_cost_usd``).

Before each paid model call the client *reserves* the most the call can cost: its input estimated
at :data:`BYTES_PER_TOKEN_BOUND` bytes per token (fewer bytes per token than Claude's tokenizers
give on English and code, so more tokens: an over-estimate) plus its full ``max_tokens`` of
output, at the model's list prices. When ``spent + reserved + this call`` would pass the cap the
call is not made: :class:`~h9eval.core.errors.BudgetExceeded` stops the run, and the ledger says
so (:meth:`Budget.stopped`), so the other workers stop at their next cell or call. After the call
the reservation is replaced by what the reply's usage says it cost (a failed call costs 0).

The ledger is a small JSON file in the results folder (:data:`SPEND_FILE`), read and written
under a file lock, so worker processes share it. It is started afresh by each invocation of a
sweep: the cap is what one invocation may spend; a rerun continues the unfinished cells with a
new allowance of the same size. Cache hits are free and never reach it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from h9eval.core.errors import BudgetExceeded, ConfigError

__all__ = ["BYTES_PER_TOKEN_BOUND", "SPEND_FILE", "Budget", "call_bound_usd", "check_max_cost"]

SPEND_FILE = "spend.json"
"""The ledger's name in a sweep's results folder."""

BYTES_PER_TOKEN_BOUND = 3
"""Bytes of request JSON counted as one input token when a call's cost is bounded in advance
(English and code run at about 3.5-4 bytes per token with Claude's tokenizers: 3 over-counts)."""


def check_max_cost(value: Any, *, where: str = "max_cost_usd") -> float | None:
    """``value`` as a cap in USD (a finite number > 0) or ``None``; else a :class:`ConfigError` naming ``where``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where} must be a number of US dollars > 0, got {value!r}")
    return float(value)


def call_bound_usd(request_bytes: int, max_tokens: int, price: tuple[float, float]) -> float:
    """The most a call can cost: ``request_bytes / 3`` input tokens and ``max_tokens`` output
    tokens at ``price`` (input, output USD per million tokens)."""
    return (math.ceil(request_bytes / BYTES_PER_TOKEN_BOUND) * price[0] + max_tokens * price[1]) / 1e6


@dataclass(frozen=True)
class Budget:
    """The cap ``max_cost_usd`` and the ledger file at ``path`` (see the module docstring).
    Picklable: it holds only the path and the cap, and reads the ledger under its lock each time."""

    path: str
    max_cost_usd: float

    def __post_init__(self) -> None:
        check_max_cost(self.max_cost_usd)

    def _lock(self) -> FileLock:
        return FileLock(self.path + ".lock")

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(Path(self.path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        return {"spent_usd": 0.0, "reserved_usd": 0.0, "calls": 0, "stopped": "", **data}

    def _write(self, data: dict[str, Any]) -> None:
        tmp = f"{self.path}.{os.getpid()}.tmp"
        Path(tmp).write_text(json.dumps({**data, "max_cost_usd": self.max_cost_usd}, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)

    def start(self) -> None:
        """A fresh ledger: nothing spent (each invocation of a sweep gets the whole cap)."""
        with self._lock():
            self._write({"spent_usd": 0.0, "reserved_usd": 0.0, "calls": 0, "stopped": ""})

    def state(self) -> dict[str, Any]:
        """The ledger: ``spent_usd``, ``reserved_usd`` (calls in flight), ``calls``, ``stopped``
        (why the cap stopped the run; ``""`` while it has not)."""
        with self._lock():
            return self._read()

    def stopped(self) -> str:
        """Why the cap stopped the run, or ``""``."""
        return str(self.state()["stopped"])

    def reserve(self, usd: float, *, who: str) -> None:
        """Hold ``usd`` for a call about to be made; :class:`BudgetExceeded` (and the ledger marked
        stopped) when it would take the spending past the cap, or the run has already stopped."""
        with self._lock():
            d = self._read()
            if not d["stopped"] and d["spent_usd"] + d["reserved_usd"] + usd > self.max_cost_usd:
                d["stopped"] = (
                    f"the next model call ({who}, up to ${usd:.4f}) would take the spending past "
                    f"max_cost_usd ${self.max_cost_usd:g} (${d['spent_usd']:.4f} spent)"
                )
                self._write(d)
            if d["stopped"]:
                raise BudgetExceeded(str(d["stopped"]))
            d["reserved_usd"] += usd
            self._write(d)

    def settle(self, reserved: float, actual: float) -> None:
        """Replace a reservation of ``reserved`` by the call's ``actual`` cost."""
        with self._lock():
            d = self._read()
            d["reserved_usd"] = max(0.0, d["reserved_usd"] - reserved)
            d["spent_usd"] += actual
            d["calls"] += 1
            self._write(d)
