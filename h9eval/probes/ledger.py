"""The loss ledger: at every compaction of a run, each live item is PRESERVED, DEGRADED, LOST or STALE.

For each call that compacted (a compaction *round*: the 1st, 2nd, ... such call of the run) the
view sent at that call is searched for every item live at it (:mod:`h9eval.probes.items`).

States, by a stated rule (exact use: generic text can never pass):

* ``PRESERVED``: the exact value (or one of its listed spellings) occurs in the view, bounded by
  non-word characters, case-sensitive;
* ``STALE`` (``superseded_value`` items): the current value does not occur exactly but a value it
  replaced does: the view shows an old value as current;
* ``DEGRADED``: not exact, but part of it survives: a path's file name without its directories,
  an identifier's or quantity's digits without the rest (``6493`` of ``HOOL-6493``, ``100`` of
  ``100 characters``), the value with another case or punctuation, or at least half the words
  (of three letters or more) of a multi-word value;
* ``LOST``: none of these.

Where an exact value survived (``location``): ``system``/``task`` (the system message or the
first task message: pinned there, not remembered), ``anchor:<type>`` (inside that anchor's
section of a compaction summary), ``summary`` (elsewhere in a summary), ``placeholder`` (an
offload placeholder's preview) or ``tail`` (a message kept verbatim). ``pinned`` says whether the
item's value already occurs in the task's system or first task message (survival curves leave
those out: they measure pinning, not memory). ``next_use_call``: the first later model call whose
message or tool-call arguments contain the value (in the recorded transcript): when a LOST item is
used again, the loss mattered there (a re-read, a redone step, a rule needed again).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from h9eval.compaction.anchors import ANCHOR_HEADERS, COMPACTION_MARKER
from h9eval.core.history import common_prefix_len
from h9eval.core.messages import Message
from h9eval.probes.items import Item, task_items
from h9eval.tasks.model import Task
from h9eval.tasks.text import WORD_RUN, WordPostings, normalize, normalized_message, render_message

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BASES",
    "STATES",
    "RenderedView",
    "rendered_view",
    "LedgerEvent",
    "classify_events",
    "events_from_replay",
    "fill_events",
    "item_state",
    "ledger_rows",
    "run_ledger",
]

STATES: tuple[str, ...] = ("PRESERVED", "DEGRADED", "STALE", "LOST")
_OFFLOAD_PREFIX = "[offloaded:"
_HEADER = re.compile(r"^#{2,3}\s*(.+?)\s*$", re.MULTILINE)
_HEADER_TYPE = {v.lstrip("#").strip(): k for k, v in ANCHOR_HEADERS.items()}
_WORD = re.compile(r"[A-Za-z]{3,}")
_DIGITS = re.compile(r"\d+(?:\.\d+)*")


def _anchored_runs(value: str) -> list[tuple[str, int]]:
    """The maximal word runs of ``value`` that are maximal word runs of any text holding ``value``
    bounded (:func:`_bounded`), each with its offset in ``value``: those with a non-word character of
    ``value`` or a checked end on each side (an end is checked when its character is alphanumeric;
    ``\\w`` is exactly alphanumeric or ``_``, the characters :func:`_bounded` calls glued)."""
    out = []
    for m in WORD_RUN.finditer(value):
        left = m.start() > 0 or value[0].isalnum()
        right = m.end() < len(value) or value[-1].isalnum()
        if left and right:
            out.append((m.group(), m.start()))
    return out


def _bounded(text: str, value: str, start: int = 0) -> int:
    """The first index of ``value`` in ``text`` (from ``start``) with no word character glued to either
    end; -1."""
    if not value:
        return -1
    n = len(value)
    while True:
        i = text.find(value, start)
        if i < 0:
            return -1
        before = text[i - 1] if i > 0 else " "
        after = text[i + n] if i + n < len(text) else " "
        glued_before = value[0].isalnum() and (before.isalnum() or before == "_")
        glued_after = value[-1].isalnum() and (after.isalnum() or after == "_")
        if not glued_before and not glued_after:
            return i
        start = i + 1


def _starts_of(texts: Sequence[str]) -> list[int]:
    """Where each of ``texts`` starts once they are joined by one character."""
    out, at = [], 0
    for t in texts:
        out.append(at)
        at += len(t) + 1
    return out


class _Joined:
    """Texts joined by a newline, with where each starts: the newline is no word character, so a
    bounded match (:func:`_bounded`) that lies within one text is a match in that text itself."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts
        self.joined = "\n".join(texts)
        self.starts = _starts_of(texts)

    def text_of(self, at: int) -> int:
        """The index of the text holding position ``at`` (a joining newline: the text before it)."""
        return bisect_right(self.starts, at) - 1

    def first_within(self, value: str, start: int = 0) -> int:
        """The first bounded ``value`` from ``start`` that lies within one text (not into a joining
        newline); -1."""
        while True:
            i = _bounded(self.joined, value, start)
            if i < 0:
                return -1
            k = self.text_of(i)
            if i + len(value) <= self.starts[k] + len(self.texts[k]):
                return i
            start = i + 1


class RenderedView:  # built with rendered_view()
    """A view rendered once: each message's text, its location kind and its anchor sections.

    Built from the previous round's view (``previous``), the messages both share at their start
    are not rendered again, and every search result of the previous view that lies in that shared
    text is reused (the rest of the view is searched from where the shared text ends): a policy
    that keeps its history (``keep_all``, a view-mode run before it compacts) sends views that
    grow by a window per fill round, and searching each whole view made its ledger quadratic."""

    messages: tuple[Message, ...]
    texts: tuple[str, ...]
    kinds: tuple[str, ...]

    def __init__(self, view: Sequence[Message], previous: RenderedView | None = None) -> None:
        msgs = tuple(view)
        k = common_prefix_len(previous.messages, msgs) if previous is not None else 0
        first_user = next((i for i, m in enumerate(msgs) if m.role == "user"), None)
        texts = list(previous.texts[:k]) if previous is not None else []
        texts += [render_message(m) for m in msgs[k:]]
        # a shared message's kind is the same in both views: the first user message, if the shared
        # part holds one, is the first of both
        kinds = list(previous.kinds[:k]) if previous is not None else []
        kinds += [_kind(m, i, first_user) for i, m in enumerate(msgs[k:], k)]
        self.messages, self.texts, self.kinds = msgs, tuple(texts), tuple(kinds)
        self._text = _Joined(self.texts)
        self.joined, self.starts = self._text.joined, self._text.starts
        self._shared = k
        # the end of the text both views share (the joining newline after it, or the end of a view,
        # is no word character in either, so a match ending there is bounded in both or in neither)
        self._shared_end = len(self.joined) if k == len(msgs) else self.starts[k] - 1 if k else -1
        # the previous view shared whole and more than half of this one: a view that grew; the second
        # of a run of such views on, an index of its runs' messages answers its searches (taken over
        # from round to round: building one costs more than the searches of a single round)
        self._grew = previous is not None and k == len(previous.messages) and self._shared_end > len(self.joined) // 2
        self._indexed = self._grew and previous is not None and previous._grew
        self._norms: list[str] | None = None
        self._normalized: str | None = None
        self._norm_end: int | None = None
        self._found: dict[tuple[str, str], int] = {}
        # per space (joined, normalized): the word runs of the text; in a view that grew, each
        # message's runs and each run's messages
        self._runs: list[set[str] | None] = [None, None]
        self._msg_runs: list[list[frozenset[str]] | None] = [None, None]
        self._postings: list[WordPostings | None] = [None, None]
        self._norm_starts: list[int] | None = None
        self._previous = previous
        if previous is not None:
            previous._previous = None  # one round back is all a search needs: no chain of views

    @classmethod
    def of(cls, view: Sequence[Message], previous: RenderedView | None = None) -> RenderedView:
        return cls(view, previous)

    @property
    def normalized(self) -> str:
        """:func:`normalize` of :attr:`joined`: each message normalised once (messages never normalise
        to nothing, and the joining whitespace collapses to one space)."""
        if self._normalized is None:
            self._normalized = " ".join(self._norm_list())
        return self._normalized

    def _norm_list(self) -> list[str]:
        if self._norms is None:
            prev = self._previous._norms if self._previous is not None else None
            k = self._shared if prev is not None else 0
            self._norms = (prev[:k] if prev is not None else []) + [normalized_message(m) for m in self.messages[k:]]
        return self._norms

    def _norm_shared_end(self) -> int:
        """:attr:`_shared_end` in :attr:`normalized` (computed once: every normalised search asks)."""
        if self._norm_end is None:
            k = self._shared
            self._norm_end = (
                len(self.normalized) if k == len(self.messages) else self._norm_start_list()[k] - 1 if k else -1
            )
        return self._norm_end

    def find(self, value: str, *, space: str = "joined") -> int:
        """The first bounded occurrence of ``value`` (:func:`_bounded`) in :attr:`joined`
        (``space="joined"``), in :attr:`normalized` (``"normalized"``) or lying within one message's
        text (``"message"``); -1."""
        key = (space, value)
        got = self._found.get(key)
        if got is not None:
            return got
        start = 0
        prev = self._previous._found.get(key) if self._previous is not None else None
        if prev is not None:
            end = self._norm_shared_end() if space == "normalized" else self._shared_end
            if 0 <= prev and prev + len(value) <= end:
                self._found[key] = prev  # in the shared text, and nothing bounded before it there
                return prev
            if prev < 0:
                start = max(0, end - len(value) + 1)  # the shared text holds no bounded match
        i = self._search(value, space, start)
        self._found[key] = i
        return i

    def _search(self, value: str, space: str, start: int) -> int:
        """:meth:`find`'s search from ``start``, narrowed by the word runs a bounded match must show
        whole (:func:`_anchored_runs`). In a view that keeps growing (the previous one plus new
        messages, more than half of it shared, for the second round running), each run's messages
        are indexed: a match lying within one message lies in a message having all of them, and any
        match lies, at each run's offset in ``value``, at or after the first message having it;
        look-ups instead of a scan of the view up to the first match (the items new to a round of a
        growing view are found near its end). A mostly new view keeps one set of its runs, to rule
        out the values it cannot hold (a compacted view has lost most); a view mostly shared but
        rewritten in its middle is searched from ``start`` (most of its answers are the previous
        view's)."""
        normalized = space == "normalized"
        runs = _anchored_runs(value)
        if runs and self._indexed:
            postings = self._run_index(normalized)
            if space == "message":
                return self._first_within_messages(value, postings, [run for run, _ in runs], start)
            found = postings.lists(run for run, _ in runs)
            if found is None:
                return -1
            starts = self._norm_start_list() if normalized else self.starts
            start = max([start] + [starts[p[0]] - offset for p, (_, offset) in zip(found, runs)])
        elif runs and self._shared_end <= len(self.joined) // 2:
            have = self._runs[1 if normalized else 0]
            if have is None:
                have = self._runs[1 if normalized else 0] = set(
                    WORD_RUN.findall(self.normalized if normalized else self.joined)
                )
            if any(run not in have for run, _ in runs):
                return -1
        if space == "message":
            return self._text.first_within(value, start)
        return _bounded(self.normalized if normalized else self.joined, value, start)

    def _first_within_messages(self, value: str, postings: WordPostings, runs: list[str], start: int) -> int:
        """The first bounded ``value`` at or after ``start`` lying within one message, looked for only
        in the messages having every one of its anchored ``runs``."""
        first = self._text.text_of(start) if start > 0 else 0
        for j in postings.holding_all(runs, first):
            at = _bounded(self.texts[j], value, max(0, start - self.starts[j]))  # its ends are the joiner's
            if at >= 0:
                return self.starts[j] + at
        return -1

    def _run_index(self, normalized: bool) -> WordPostings:
        """Each word run of the text and the messages having it, in order. The previous view's index is
        taken over and extended by the new messages, so a view that keeps growing is indexed once in
        all (a view rewritten in its middle keeps the one set of its runs instead)."""
        i = 1 if normalized else 0
        index = self._postings[i]
        if index is not None:
            return index
        texts = self._norm_list() if normalized else self.texts
        prev = self._previous
        prev_runs = prev._msg_runs[i] if prev is not None else None
        k = self._shared if prev_runs is not None else 0
        runs = (prev_runs[:k] if prev_runs is not None else []) + [frozenset(WORD_RUN.findall(t)) for t in texts[k:]]
        self._msg_runs[i] = runs
        before = prev._postings[i] if prev is not None and prev_runs is not None else None
        if prev is not None and before is not None and k == len(prev.messages):
            index = before  # shared whole: this view extends the previous one's index
            prev._postings[i] = None  # the previous view rebuilds its own if asked again
            assert index.n == k  # its next message is this view's k-th
        else:
            index, k = WordPostings(), 0
        for j in range(k, len(runs)):
            index.add(runs[j])
        self._postings[i] = index
        return index

    def _norm_start_list(self) -> list[int]:
        """Where each message's normalised text starts in :attr:`normalized` (joined by one space)."""
        if self._norm_starts is None:
            self._norm_starts = _starts_of(self._norm_list())
        return self._norm_starts

    def location(self, values: Sequence[str]) -> str | None:
        """Where the first of ``values`` occurs exactly (see the module docstring), else ``None``."""
        # The first message holding any value bounded within it: a match in the joined text that
        # lies within one message is a match in that message's own text, and the reverse.
        hits = [self._text.text_of(at) for v in values if v and (at := self.find(v, space="message")) >= 0]
        if not hits:
            return None
        t = min(hits)
        text, kind = self.texts[t], self.kinds[t]
        for v in values:
            at = _bounded(text, v)
            if at < 0:
                continue
            if kind != "summary":
                return kind
            headers = [(m.start(), m.group(1)) for m in _HEADER.finditer(text)]
            k = bisect_right([h[0] for h in headers], at) - 1
            if k >= 0 and headers[k][1] in _HEADER_TYPE:
                return f"anchor:{_HEADER_TYPE[headers[k][1]]}"
            return "summary"
        raise AssertionError("a message found to hold a value holds none")  # pragma: no cover


def _kind(m: Message, i: int, first_user: int | None) -> str:
    if m.role == "system" and i == 0:
        return "system"
    if COMPACTION_MARKER in m.content:
        return "summary"
    if m.content.startswith(_OFFLOAD_PREFIX):
        return "placeholder"
    if i == first_user:
        return "task"
    return "tail"


def rendered_view(view: Sequence[Message], previous: RenderedView | None = None) -> RenderedView:
    """A view rendered once for judging many items (:func:`item_state`); ``previous``: the view
    of the round before, whose renderings and search results the two share are reused."""
    return RenderedView.of(view, previous)


def _degraded(item: Item, view: RenderedView) -> bool:
    value = item.value
    if "/" in value.strip("/"):
        base = value.rstrip("/").rsplit("/", 1)[-1]
        if base and view.find(base) >= 0:
            return True
    digits = _DIGITS.findall(value)
    if digits and value.strip() not in digits and any(view.find(d) >= 0 for d in digits if len(d) >= 2):
        return True
    norm = normalize(value)
    if norm and view.find(norm, space="normalized") >= 0:
        return True
    words = _WORD.findall(value)
    if len(words) >= 2:
        found = sum(1 for w in words if view.find(w) >= 0)
        return 2 * found >= len(words)
    return False


def item_state(item: Item, view: RenderedView) -> tuple[str, str | None]:
    """``(state, location)`` of ``item`` in a rendered view (see the module docstring)."""
    where = view.location((item.value, *item.variants))
    if where is not None:
        return "PRESERVED", where
    if item.stale_values and view.location(item.stale_values) is not None:
        return "STALE", None
    if _degraded(item, view):
        return "DEGRADED", None
    return "LOST", None


BASES: tuple[str, ...] = ("fill", "compaction")
"""What a round is. ``fill``: the k-th time the uncompacted history outgrew a whole window (the
first call whose ``raw_tokens_sent`` reaches k x the window): the same calls for every
configuration of a task, so survival is compared pairwise on the same checkpoints, and a policy
that never compacts (``keep_all``) is measured too. ``compaction``: the run's own k-th view
rewrite (see :func:`events_from_replay`): what the diff view of one run shows."""


@dataclass(frozen=True, kw_only=True)
class LedgerEvent:
    """One round of a run: the call, its view and the transcript index it covers."""

    basis: str
    round: int
    call_index: int
    message_index: int
    """The last transcript message the view covers."""
    tier_name: str
    view: Sequence[Message]


def _pinned(task: Task) -> str:
    first_user = next((m for m in task.messages if m.role == "user"), None)
    system = task.messages[0] if task.messages and task.messages[0].role == "system" else None
    return "\n".join(render_message(m) for m in (system, first_user) if m is not None)


def _uses(task: Task) -> tuple[list[int], list[str]]:
    """Each model call's transcript index and the text of what it did (content and tool arguments)."""
    at, texts = [], []
    for i, m in enumerate(task.messages):
        if m.role == "assistant":
            at.append(i)
            texts.append(m.content + "\n" + "\n".join(f"{tc.name} {tc.arguments}" for tc in m.tool_calls))
    return at, texts


class _UseIndex:
    """The calls whose text uses each item, found once per item over all the calls' text joined.

    Rescanning every later call per (round, item) made a long run's ledger quadratic (a 3,000-call
    replay spent 90 % of its time there); one bounded search per value over the joined text finds
    the same calls: a match must lie within one call's text (the joining newline keeps the
    boundary test as it is at a text's ends)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._text = _Joined(texts)
        self._calls: dict[tuple[str, ...], list[int]] = {}

    def _calls_using(self, item: Item) -> list[int]:
        values = (item.value, *item.variants)
        found = self._calls.get(values)
        if found is None:
            hits: set[int] = set()
            for v in values:
                i = self._text.first_within(v)
                while i >= 0:
                    hits.add(self._text.text_of(i))
                    i = self._text.first_within(v, i + 1)
            found = self._calls[values] = sorted(hits)
        return found

    def first_from(self, item: Item, call: int) -> int | None:
        """The first call at or after ``call`` that uses ``item``, else ``None``."""
        calls = self._calls_using(item)
        j = bisect_left(calls, call)
        return calls[j] if j < len(calls) else None


def ledger_rows(
    task: Task, events: Sequence[LedgerEvent], *, run_id: str, items: Sequence[Item] | None = None
) -> list[dict[str, Any]]:
    """One row per (compaction round, live item): the ledger table's columns (see
    :data:`h9eval.results.schema.LEDGER_COLUMNS`)."""
    items = list(items) if items is not None else task_items(task)
    call_at, call_text = _uses(task)
    uses = _UseIndex(call_text)

    def next_use(item: Item, ev: LedgerEvent) -> int | None:
        return uses.first_from(item, bisect_right(call_at, ev.message_index))

    return classify_events(
        events, items, task_id=task.task_id, run_id=run_id, pinned_text=_pinned(task), next_use=next_use
    )


def classify_events(
    events: Sequence[LedgerEvent],
    items: Sequence[Item],
    *,
    task_id: str,
    run_id: str,
    pinned_text: str,
    next_use: Callable[[Item, LedgerEvent], int | None],
) -> list[dict[str, Any]]:
    """The ledger rows of ``events`` for ``items`` (every loop's ledger: the replay's and the closed
    loop's): each item live at an event judged by :func:`item_state` in the view it sent;
    ``pinned_text`` is what the run pins (its system and first task message); ``next_use(item,
    event)`` gives the call that first used a LOST, STALE or DEGRADED item after the event."""
    pinned = {i.item_id: any(_bounded(pinned_text, v) >= 0 for v in (i.value, *i.variants)) for i in items}
    rows: list[dict[str, Any]] = []
    view: RenderedView | None = None
    for ev in events:
        view = RenderedView.of(ev.view, view)
        for item in items:
            if not item.live_at(ev.message_index):
                continue
            state, where = item_state(item, view)
            used = next_use(item, ev) if state in ("LOST", "STALE", "DEGRADED") else None
            rows.append(
                {
                    "task_id": task_id,
                    "run_id": run_id,
                    "basis": ev.basis,
                    "round": ev.round,
                    "call_index": ev.call_index,
                    "message_index": ev.message_index,
                    "tier_name": ev.tier_name,
                    "item_id": item.item_id,
                    "item_type": item.item_type,
                    "state": state,
                    "location": where,
                    "pinned": pinned[item.item_id],
                    "value": item.value,
                    "introduced_at": item.introduced_at,
                    "next_use_call": used,
                }
            )
    return rows


MAX_COMPACTION_ROUNDS = 20
"""Compaction rounds a run's ledger records (the first ones): a view-mode run above its threshold
rewrites its view at every call, and thousands of near-identical rounds would swamp the table."""


def _event_at(row: Any, basis: str, round_: int, view: Sequence[Message]) -> LedgerEvent:
    """The round ``round_`` of ``basis`` at the call of ``row`` (a row of the calls table), which sent
    ``view``; it covers the transcript up to the message before the call's."""
    return LedgerEvent(
        basis=basis,
        round=round_,
        call_index=int(row.call_index),
        message_index=int(row.message_index) - 1,
        tier_name=str(row.tier_name),
        view=view,
    )


def events_from_replay(
    calls: pd.DataFrame, views: Sequence[Sequence[Message]], *, max_rounds: int = MAX_COMPACTION_ROUNDS
) -> list[LedgerEvent]:
    """The compaction rounds of a replay, each with the view it sent.

    A round is a call that compacted and whose view no longer starts with everything the
    previous call's view sent: it dropped, summarised, offloaded or masked something already
    sent (the event that also invalidates a provider's prompt cache). A compaction that only
    changed what is new since the last call (a fresh result offloaded as it arrives) loses
    nothing already seen and is not a round.
    """
    out: list[LedgerEvent] = []
    prev: Sequence[Message] = ()
    for row, view in zip(calls.itertuples(index=False), views):
        if len(out) >= max_rounds:
            break
        if bool(row.compacted) and prev and common_prefix_len(prev, view) < len(prev):
            out.append(_event_at(row, "compaction", len(out) + 1, view))
        prev = view
    return out


def fill_events(calls: pd.DataFrame, views: Sequence[Sequence[Message]]) -> list[LedgerEvent]:
    """The ``fill`` rounds of a replay (see :data:`BASES`): round k at the first call whose
    uncompacted history (``raw_tokens_sent``) reaches k windows; several windows crossed at once
    give their rounds at that one call (each is a fill the policy had to absorb)."""
    out: list[LedgerEvent] = []
    for row, view in zip(calls.itertuples(index=False), views):
        window = int(row.context_window_tokens)
        if window <= 0:
            continue
        while int(row.raw_tokens_sent) >= (len(out) + 1) * window:
            out.append(_event_at(row, "fill", len(out) + 1, view))
    return out


def run_ledger(
    task: Task, calls: pd.DataFrame, views: Sequence[Sequence[Message]], *, run_id: str
) -> list[dict[str, Any]]:
    """The ledger rows of a replay on both bases (:data:`BASES`), fill rounds first."""
    items = task_items(task)
    return ledger_rows(task, fill_events(calls, views), run_id=run_id, items=items) + ledger_rows(
        task, events_from_replay(calls, views), run_id=run_id, items=items
    )
