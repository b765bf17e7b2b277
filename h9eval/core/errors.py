"""Errors h9eval raises on purpose.

Every error a user can cause by bad input derives from :class:`H9InputError`; the CLI turns it
into one line on stderr and exit status 2, never a traceback. The message always names the file,
line/record or field and what was expected.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class H9Error(Exception):
    """Base class of every error h9eval raises deliberately."""


class H9InputError(H9Error, ValueError):
    """Bad input (file, record, field, parameter): exit status 2 in the CLI."""


class ConfigError(H9InputError):
    """An invalid configuration value; the message names the field, the rule and the value."""


class FormatError(H9InputError):
    """A file or record that does not have the expected shape.

    ``path`` and ``where`` (a line number, record index or JSON path) are kept as attributes so
    callers can re-raise with more context.
    """

    def __init__(self, message: str, *, path: str | None = None, where: str | None = None) -> None:
        self.path = path
        self.where = where
        prefix = ""
        if path is not None:
            prefix = f"{path}"
            if where is not None:
                prefix += f":{where}"
            prefix += ": "
        super().__init__(prefix + message)


class SummarizerError(H9Error):
    """A summarizer call failed (timeout, API error, empty reply)."""


class BreakerOpenError(SummarizerError):
    """A summary was not requested: the client's circuit breaker is open after consecutive failed
    calls (:class:`h9eval.core.anthropic.CircuitBreaker`). The policy falls back as for any failed
    summary; the calls table counts these apart (``summarizer_breaker_skips``)."""


class CellsFailed(H9Error):
    """Some cells of a sweep failed while the others' results were kept: exit status 1 in the CLI
    (not bad input). Defined here, below the sweeps layer, so that the CLI can catch it without
    importing the sweep machinery for every command; the sweep raises
    :class:`h9eval.sweeps.sweep.SweepFailed`, which carries the result."""


class BudgetExceeded(H9Error):
    """A model call was not made: it would take the run's spending past its ``max_cost_usd``.
    Unlike a failed call it is never turned into a fallback: it stops the run (a sweep keeps its
    finished cells and resumes from the unfinished ones)."""


def did_you_mean(name: str, choices: Iterable[str], *, what: str, cutoff: float = 0.6) -> str:
    """Return ``unknown <what> 'x'; did you mean 'y'? available: a, b`` for an unknown name.
    ``cutoff``: the least :mod:`difflib` similarity of a suggestion (lower it for short names)."""
    choices = sorted(choices)
    close = difflib.get_close_matches(name, choices, n=3, cutoff=cutoff)
    msg = f"unknown {what} {name!r}"
    if close:
        msg += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    msg += " available: " + ", ".join(choices)
    return msg
