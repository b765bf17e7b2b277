"""Recognising a history that grew since the previous call, at C speed.

A replay hands a policy the same history again and again, each time with a few messages more
(view mode), or with a compaction's view written back and then extended (write-back mode).
A policy that keeps state between calls must tell the two apart from an unrelated history
without a Python-level pass over every message: that pass is what makes a long run quadratic.
Everything here compares lists with ``==``, which CPython does element by element in C with
an identity shortcut (about 5 ns a message); ``Message`` equality ignores only ``meta``.
"""

from __future__ import annotations

from collections.abc import Sequence

from h9eval.core.messages import Message

__all__ = [
    "as_list",
    "extends",
    "continued_from",
    "common_prefix_len",
    "kept_prefix_len",
    "PrefixBytes",
    "IncrementalView",
]

# Below this many messages a Python loop is cheaper than another pair of slices.
_LINEAR = 32


def as_list(msgs: Sequence[Message]) -> list[Message]:
    """``msgs`` itself when it is a list (no copy), else a list of it."""
    return msgs if isinstance(msgs, list) else list(msgs)


def extends(history: Sequence[Message], prefix: Sequence[Message]) -> bool:
    """Whether ``history`` starts with every message of the non-empty ``prefix``, its last one
    the same object (so a cache may miss an equal copy of its history, never accept another)."""
    n = len(prefix)
    if n == 0 or len(history) < n or history[n - 1] is not prefix[n - 1]:
        return False
    # a rewritten history differs near its end (the compacted span): fail fast there
    lo = max(n - _LINEAR, 0)
    if as_list(history[lo:n]) != as_list(prefix[lo:n]):
        return False
    return as_list(history[:lo]) == as_list(prefix[:lo])


def continued_from(
    history: Sequence[Message], source: Sequence[Message], view: Sequence[Message], *, view_first: bool
) -> bool | None:
    """How ``history`` continues an incremental view's last call: ``True`` when it extends the
    ``source`` the view was made from (view mode), ``False`` when it extends the ``view`` itself
    (it was written back), ``None`` when neither. ``view_first``: try the view first (the way
    the previous call continued), so either mode costs one list comparison per call."""
    for from_source in (False, True) if view_first else (True, False):
        if extends(history, source if from_source else view):
            return from_source
    return None


def common_prefix_len(a: Sequence[Message], b: Sequence[Message]) -> int:
    """How many leading messages ``a`` and ``b`` share (the same or equal messages).

    A write-back usually keeps all but the last few messages of the history, so the whole
    common part is compared in one C-level ``==`` first, and only a mismatch is located by
    halving (each probe compares slices in C, so the total stays linear at C speed)."""
    n = min(len(a), len(b))
    la, lb = as_list(a), as_list(b)
    # the whole common part in one comparison, without copies when the lengths agree
    if (la == lb) if len(la) == len(lb) else (la[:n] == lb[:n]):
        return n
    lo, hi = 0, n  # la[:lo] == lb[:lo], and the first mismatch is before hi
    while hi - lo > _LINEAR:
        mid = (lo + hi) // 2
        if la[lo:mid] == lb[lo:mid]:
            lo = mid
        else:
            hi = mid
    while lo < hi and (la[lo] is lb[lo] or la[lo] == lb[lo]):
        lo += 1
    return lo


def kept_prefix_len(history: Sequence[Message], previous: Sequence[Message]) -> int:
    """How many leading messages of ``previous`` (the history a cache describes) ``history``
    still starts with: all of them when it extends it, the kept prefix after a write-back that
    reused the messages it did not change, else 0. Histories of new, equal objects (a
    conformance case parses each step afresh) count as unrelated: comparing them would compare
    every message's text, which costs more than starting over."""
    if extends(history, previous):
        return len(previous)
    if not history or not previous or history[0] is not previous[0]:
        return 0
    return common_prefix_len(history, previous)


class PrefixBytes:
    """Cumulative harness9 byte counts of a history that grows between calls.

    ``update(history)`` returns ``cum`` with ``cum[i]`` the bytes of ``history[:i]``; only the
    messages after the part ``history`` shares with the previous call's (all of it in view
    mode, the kept prefix after a write-back) are summed in Python."""

    def __init__(self) -> None:
        self._msgs: list[Message] = []
        self._cum: list[int] = [0]

    def update(self, history: Sequence[Message]) -> list[int]:
        n = kept_prefix_len(history, self._msgs)
        if n < len(self._msgs):
            del self._msgs[n:], self._cum[n + 1 :]
        cum, total = self._cum, self._cum[-1]
        for m in history[n:]:
            total += m.nbytes
            cum.append(total)
        self._msgs.extend(history[n:])
        return cum


class IncrementalView:
    """What every view kept up to date between the calls of a run shares: the history it
    describes (``_src``), the view (``_out``, one message for each of it), the first index where
    they differ (``first_difference``), and how a call's history continues the last one.

    A history extends the previous history (view mode: only its new messages are taken in),
    extends the previous view (write-back mode: the view becomes the source, what it changed is
    the history's own content now), or is anything else, which starts over. A subclass starts
    over in ``_reset`` (calling ``_clear_view``), says in ``_adopt_view`` what else a written-back
    view resets, and takes in each new message after ``_append``; it changes the view only
    through ``_replace``."""

    def _clear_view(self) -> None:
        self._src: list[Message] = []
        self._out: list[Message] = []
        self._wrote_back = False  # the last call continued from the view
        self.first_difference = 0
        """Index of the first message the view changed (its length when none)."""

    def _reset(self) -> None:
        raise NotImplementedError

    def _adopt_view(self) -> None:
        """What a written-back view resets besides the source (nothing by default)."""

    def _continue(self, history: Sequence[Message]) -> int:
        """Index of the first message of ``history`` the view has not taken in."""
        from_src = continued_from(history, self._src, self._out, view_first=self._wrote_back)
        self._wrote_back = from_src is False
        if from_src is None:
            self._reset()
        elif not from_src:
            self._src = list(self._out)
            self.first_difference = len(self._src)
            self._adopt_view()
        return len(self._src)

    def _append(self, m: Message) -> None:
        if self.first_difference == len(self._src):
            self.first_difference += 1
        self._src.append(m)
        self._out.append(m)

    def _replace(self, i: int, m: Message) -> None:
        self._out[i] = m
        self.first_difference = min(self.first_difference, i)
