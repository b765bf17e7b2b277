"""Text the probes look at: rendering a view, normalising it, and finding terms in it fast.

Rendering: each message becomes ``[role]`` (``[tool result <id>]`` for a tool result) followed
by its content and one ``[tool call <name>] <arguments>`` line per tool call, so file paths that
only occur in tool-call arguments are visible to the probes too.

Normalisation (:func:`normalize`): casefold, replace every character that is not a word
character, whitespace or one of ``_ . / - :`` by a space, collapse whitespace. Those five are
kept because they are part of identifiers, paths, versions and ports (``src/a.py``,
``eu-west-3``, ``host:8080``); quotes, backticks, brackets and commas are formatting.

Matching (:class:`TextIndex`): a term is *present* when its normalised form occurs with no
word character glued to either end (``4500`` is not found in ``45000``, ``parse`` not in
``parse_args``), or, for terms of at least ``fuzzy_min_chars`` characters, when
``rapidfuzz.fuzz.partial_ratio`` finds an alignment scoring at least ``fuzzy_threshold`` whose
digit runs equal the term's (numbers are never fuzzy: ``4500 ms`` never matches ``4800 ms``).
The exact test runs first; the fuzzy one only for terms the exact test missed, and only after a
cheap pigeonhole prefilter (see :meth:`TextIndex.fuzzy_present`), so a ~1 MB view costs
milliseconds per term.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any


from h9eval.compaction.anchors import (
    ANCHOR_TYPES,
    COMPACTION_MARKER,
    EXTRA_ANCHOR_TYPES,
    is_no_information,
    parse_anchors_and_summary,
)
from h9eval.core.messages import Message

__all__ = [
    "WORD_RUN",
    "WordPostings",
    "ALL_ANCHOR_TYPES",
    "DEFAULT_FUZZY_THRESHOLD",
    "DEFAULT_FUZZY_MIN_CHARS",
    "normalize",
    "render_message",
    "render_messages",
    "normalized_message",
    "normalize_messages",
    "latest_compaction_text",
    "TextIndex",
    "TranscriptText",
    "PrefixTextIndex",
    "ViewTexts",
    "ViewTextIndex",
]

ALL_ANCHOR_TYPES: tuple[str, ...] = ANCHOR_TYPES + EXTRA_ANCHOR_TYPES
"""Every anchor type h9eval knows; the anchors scope parses with all of them so that a policy
with ``extra_anchors`` is credited for its constraint/artifact sections."""

DEFAULT_FUZZY_THRESHOLD = 90.0
"""rapidfuzz ``partial_ratio`` score (0-100) at or above which a fuzzy alignment counts."""
DEFAULT_FUZZY_MIN_CHARS = 8
"""Normalised terms shorter than this are matched exactly only: below ~10 characters one
substituted character already drops ``partial_ratio`` under 90, and short terms (numbers,
ports) are exactly where a near miss is a different value."""

_NOT_KEPT = re.compile(r"[^\w\s./:\-]+")
_WS = re.compile(r"\s+")
_DIGITS = re.compile(r"\d+")


# ASCII characters normalize() replaces by a space: all but word characters, whitespace and ./:-
_ASCII_NOT_KEPT = {i: " " for i in range(128) if not (chr(i).isalnum() or chr(i) in "_./:-" or chr(i).isspace())}


def normalize(text: str) -> str:
    """Casefolded text with formatting punctuation removed and whitespace collapsed (see module)."""
    if text.isascii():
        # the same result without the regular expressions, a fifth of their time (loading a
        # 10^5-message session normalises every message once)
        return " ".join(text.lower().translate(_ASCII_NOT_KEPT).split())
    t = _NOT_KEPT.sub(" ", text.casefold())
    return _WS.sub(" ", t).strip()


def render_message(m: Message) -> str:
    """One message as plain text: a role header, the content, then its tool calls."""
    head = f"[tool result {m.tool_call_id}]" if m.is_tool_result else f"[{m.role}]"
    parts = [head, m.content]
    for tc in m.tool_calls:
        parts.append(f"[tool call {tc.name}] {tc.arguments}")
    return "\n".join(parts)


# Normalised messages, shared by every view and history: consecutive views of a replay repeat
# most of their messages, and normalising a multi-megabyte view is the main cost of probing it.
# Bounded by total characters (FIFO), not by count, since tool results vary from bytes to MBs.
_NORM: OrderedDict[Message, str] = OrderedDict()
_NORM_CHARS = 0
_NORM_MAX_CHARS = 64_000_000
_NORM_LOCK = threading.Lock()


def normalized_message(m: Message) -> str:
    """:func:`normalize` of :func:`render_message` of ``m`` (cached)."""
    global _NORM_CHARS
    with _NORM_LOCK:
        hit = _NORM.get(m)
    if hit is not None:
        return hit
    t = normalize(render_message(m))
    with _NORM_LOCK:
        if m not in _NORM:
            _NORM[m] = t
            _NORM_CHARS += len(t)
            while _NORM_CHARS > _NORM_MAX_CHARS and len(_NORM) > 1:
                _, old = _NORM.popitem(last=False)
                _NORM_CHARS -= len(old)
    return t


def normalize_messages(messages: Iterable[Message]) -> str:
    """The normalised text of a view: each message normalised (cached), joined by newlines
    (so no term matches across two messages)."""
    return "\n".join(normalized_message(m) for m in messages)


def render_messages(messages: Iterable[Message]) -> str:
    """A whole view as plain text (messages separated by a blank line); what the llm answerer
    reads and what the recall scorer searches."""
    return "\n\n".join(render_message(m) for m in messages)


def _is_compaction(m: Message) -> bool:
    # Same test as the offline summarizer: a non-tool message that starts with the marker.
    return not m.is_tool_result and m.content.lstrip().startswith(COMPACTION_MARKER)


def latest_compaction_text(messages: Sequence[Message]) -> str | None:
    """Retained anchors + summary of the latest ``[Context Compaction]`` message, or ``None``.

    Parsed with every anchor type (``constraint``/``artifact`` included); anchors that carry no
    information (``N/A``, ``- N/A``, empty) are left out, and so is the ``## Offloaded
    References`` list that follows the summary (it names offload files, not task content).
    """
    for m in reversed(messages):
        if _is_compaction(m):
            body = m.content.lstrip()[len(COMPACTION_MARKER) :]
            anchors, summary = parse_anchors_and_summary(body, ALL_ANCHOR_TYPES)
            summary = summary.split("\n## Offloaded References", 1)[0]
            kept = [a.content for a in anchors if not is_no_information(a.content)]
            return "\n\n".join([*kept, summary]).strip()
    return None


def _is_word(c: str) -> bool:
    # Only an end that is itself a word character is guarded: "src/" may be followed by anything.
    return c.isalnum() or c == "_"


WORD_RUN = re.compile(r"\w+")
r"""Maximal runs of word characters: ``\w`` matches exactly the characters :func:`_is_word` accepts
(checked over every code point by the tests)."""


class WordPostings:
    """Each word run -> the messages holding it, in increasing order; messages are added in order
    (:meth:`add`, numbered from 0). The one index of which messages may hold a word-bounded value:
    a bounded occurrence of ``t`` puts each word run of ``t`` (:data:`WORD_RUN`) whole in the
    message it lies in, so only the messages holding all of them can hold it."""

    __slots__ = ("index", "n")

    def __init__(self) -> None:
        self.index: dict[str, list[int]] = {}
        self.n = 0

    def add(self, words: Iterable[str]) -> None:
        """The next message's distinct word runs."""
        d, index = self.n, self.index
        for w in words:
            hit = index.get(w)
            if hit is None:
                index[w] = [d]
            else:
                hit.append(d)
        self.n = d + 1

    def lists(self, runs: Iterable[str]) -> list[list[int]] | None:
        """Each run's messages, or ``None`` when a run is in no message."""
        out = []
        for w in runs:
            hit = self.index.get(w)
            if hit is None:
                return None
            out.append(hit)
        return out

    def holding_all(self, runs: Iterable[str], first: int = 0) -> Iterator[int]:
        """The messages from ``first`` on that hold every one of ``runs``, in order; none when a
        run is in no message, or when ``runs`` is empty (a value without word runs is searched in
        the text instead)."""
        lists = self.lists(set(runs))
        if not lists:
            return
        lists.sort(key=len)
        base, rest = lists[0], lists[1:]
        for d in base[bisect_left(base, first) :]:
            if all(_holds(p, d) for p in rest):
                yield d


def _bounded_occurrences(text: str, t: str, start: int = 0, end: int | None = None) -> Iterator[int]:
    """Starts, in order, of the occurrences of normalised ``t`` in ``text[start:end]`` with no word
    character glued to its ends (the characters around them are read from ``text`` itself).

    str.find, not a regex: a pattern that starts with a look-behind defeats the regex engine's
    literal scan and costs ~20 ms per term on a 4 MB text."""
    guard_l, guard_r = _is_word(t[0]), _is_word(t[-1])
    i = text.find(t, start, end)
    while i >= 0:
        j = i + len(t)
        if not (guard_l and i > 0 and _is_word(text[i - 1])) and not (guard_r and j < len(text) and _is_word(text[j])):
            yield i
        i = text.find(t, i + 1, end)


def _fuzz() -> Any:
    """rapidfuzz's ``fuzz`` module, imported at the first fuzzy test (a tenth of ``import
    h9eval`` otherwise, for every command)."""
    from rapidfuzz import fuzz

    return fuzz


def _grams(term: str, n: int = 3) -> list[str]:
    return [term[i : i + n] for i in range(0, len(term) - n + 1, n)]


@dataclass
class TextIndex:
    """Normalised text with cached term lookups.

    ``fuzzy_threshold``: rapidfuzz score 0-100 (default 90); ``fuzzy_min_chars``: shortest
    normalised term that may match fuzzily (default 8); ``fuzzy=False`` disables fuzzy matching.
    """

    text: str
    fuzzy_threshold: float = DEFAULT_FUZZY_THRESHOLD
    fuzzy_min_chars: int = DEFAULT_FUZZY_MIN_CHARS
    fuzzy: bool = True
    _cache: dict[str, bool] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, raw: str, **kw: object) -> TextIndex:
        """Index of ``raw`` (un-normalised) text."""
        return cls(normalize(raw), **kw)  # type: ignore[arg-type]

    def present(self, term: str) -> bool:
        """Is ``term`` (raw; normalised here) in the text? Empty terms are never present."""
        t = normalize(term)
        if not t:
            return False
        hit = self._cache.get(t)
        if hit is None:
            hit = self.exact_present(t) or self.fuzzy_present(t)
            self._cache[t] = hit
        return hit

    def any_present(self, terms: Iterable[str]) -> bool:
        return any(self.present(t) for t in terms)

    def exact_present(self, t: str) -> bool:
        """Normalised ``t`` occurs with no word character glued to its ends."""
        return next(_bounded_occurrences(self.text, t), None) is not None

    def first_position(self, term: str) -> int | None:
        """Offset of the first occurrence of ``term`` (as :meth:`present` finds it), or ``None``."""
        return self._position(term, last=False)

    def last_position(self, term: str) -> int | None:
        """Offset of the last exact occurrence of ``term`` (a fuzzy match's offset when only
        the fuzzy test finds it), or ``None``."""
        return self._position(term, last=True)

    def _position(self, term: str, *, last: bool) -> int | None:
        t = normalize(term)
        if not t or not self.present(t):
            return None
        found = self._exact_position(t, last=last)
        if found is not None:
            return found
        al = _fuzz().partial_ratio_alignment(t, self.text, score_cutoff=self.fuzzy_threshold)
        return None if al is None else al.dest_start

    def _exact_position(self, t: str, *, last: bool) -> int | None:
        found: int | None = None
        for i in _bounded_occurrences(self.text, t):
            if not last:
                return i
            found = i
        return found

    def _any_gram(self, grams: list[str]) -> bool:
        return any(g in self.text for g in grams)

    def fuzzy_present(self, t: str) -> bool:
        """A ``partial_ratio`` alignment >= threshold with the same digit runs as ``t``.

        Prefilter (thresholds >= 90 only): a score of 90 allows at most 0.2·n insertions or
        deletions against a term of n characters, and each one breaks at most one of its
        floor(n/3) disjoint 3-grams; for n >= 6 that leaves one intact, so when none of them
        occurs anywhere in the text no alignment can reach the threshold and rapidfuzz is not
        called.
        """
        if not self.fuzzy or len(t) < self.fuzzy_min_chars or len(self.text) < len(t):
            return False
        if self.fuzzy_threshold >= 90 and not self._any_gram(_grams(t)):
            return False
        al = _fuzz().partial_ratio_alignment(t, self.text, score_cutoff=self.fuzzy_threshold)
        if al is None:
            return False
        # Widen the aligned window to whole words before comparing numbers, so that a match
        # inside "45000" is compared as 45000, not as the "4500" it overlaps.
        return _digits_match(self.text, t, al.dest_start, al.dest_end, len(self.text))


class TranscriptText:
    """The normalised text of a whole transcript and where each message ends in it.

    The uncompacted history at a checkpoint is a prefix of the transcript, and probing checks
    every probe against it at every checkpoint. Searching each prefix again made probe
    marking quadratic in the session's length (a 5,000-call task did not finish in 15
    minutes); here each term's exact occurrences are found once, in the whole text, and a
    prefix keeps those that end inside it. Messages are joined by a newline, so a term never
    spans two messages and a prefix ends where the whole text has a non-word character.
    """

    def __init__(self, messages: Sequence[Message]) -> None:
        parts = [normalized_message(m) for m in messages]
        self.text = "\n".join(parts)
        self.ends: list[int] = []  # ends[i]: length of the text of messages[: i + 1]
        pos = -1
        for part in parts:
            pos += len(part) + 1
            self.ends.append(pos)
        self._occ: dict[str, list[int]] = {}
        self._gram_end: dict[str, float] = {}
        self._fuzzy: dict[tuple[str, float], _FuzzyScan] = {}
        self._postings: WordPostings | None = None  # word -> messages holding it (message_count)
        self._scanned_chars = 0  # characters message_count has searched without the postings

    def occurrences(self, t: str) -> list[int]:
        """Starts of the word-bounded exact occurrences of normalised ``t`` (cached)."""
        hit = self._occ.get(t)
        if hit is None:
            hit = self._occ[t] = list(_bounded_occurrences(self.text, t))
        return hit

    @property
    def words_indexed(self) -> bool:
        """Whether :meth:`message_count` has indexed the messages' words (after enough searches)."""
        return self._postings is not None

    def message_count(self, t: str, stop_above: float = float("inf")) -> int:
        """How many messages hold a word-bounded exact occurrence of normalised ``t`` (an
        occurrence is counted for the message it starts in, as :meth:`occurrences` would place it);
        counting stops at the first count above ``stop_above``, which is then returned.

        A key-term filter asks this for every distinct term of every user prompt: searching the
        whole text for each made a chat log quadratic (2,711 terms x 4.3 MB). So once the searches
        have read :data:`DOC_INDEX_AFTER_SCANS` times the text, the words of every message are
        indexed (one pass) and a term is looked for only in the messages that hold all of its word
        runs as whole words: a word-bounded occurrence of ``t`` puts each maximal run of word
        characters of ``t`` between two non-word characters (one of ``t``'s own, a guarded end, or
        the newline between messages), so each is a whole word of that message. A term with no word
        character is always searched in the whole text."""
        if not t:
            return 0
        runs = WORD_RUN.findall(t)
        if self._postings is None:
            if not runs or self._scanned_chars < DOC_INDEX_AFTER_SCANS * len(self.text):
                return self._count_by_search(t, stop_above)
            self._postings = self._index_words()
        if not runs:
            return self._count_by_search(t, stop_above)
        return self._count_by_postings(t, runs, stop_above)

    def _count_by_search(self, t: str, stop_above: float) -> int:
        text, ends = self.text, self.ends
        n = start = 0
        while n <= stop_above:
            i = next(_bounded_occurrences(text, t, start), -1)
            if i < 0:
                start = len(text)
                break
            d = bisect_right(ends, i)  # the message holding this occurrence
            n += 1
            start = ends[d]  # on to the first occurrence after that message
        self._scanned_chars += start
        return n

    def _index_words(self) -> WordPostings:
        """Each word (maximal run of word characters) -> the messages holding it, in order.

        A message's words are those of its whitespace-separated chunks (whitespace is never a word
        character), and a chunk's words are found once however often it recurs: a third less time
        than a regular-expression pass over the whole text."""
        text = self.text
        words_of: dict[str, tuple[str, ...]] = {}
        postings = WordPostings()
        start = 0
        for end in self.ends:
            words: set[str] = set()
            for chunk in set(text[start:end].split()):
                in_chunk = words_of.get(chunk)
                if in_chunk is None:
                    in_chunk = words_of[chunk] = tuple(WORD_RUN.findall(chunk))
                words.update(in_chunk)
            postings.add(words)
            start = end + 1
        return postings

    def _count_by_postings(self, t: str, runs: list[str], stop_above: float) -> int:
        assert self._postings is not None
        text, ends = self.text, self.ends
        n = 0
        for d in self._postings.holding_all(runs):
            start = ends[d - 1] + 1 if d else 0
            if next(_bounded_occurrences(text, t, start, ends[d]), None) is not None:
                n += 1
                if n > stop_above:
                    break
        return n

    def gram_end(self, g: str) -> float:
        """End of the first occurrence of ``g`` (infinity when there is none; cached)."""
        hit = self._gram_end.get(g)
        if hit is None:
            i = self.text.find(g)
            hit = self._gram_end[g] = float("inf") if i < 0 else i + len(g)
        return hit

    def fuzzy_in_prefix(self, t: str, end: int, threshold: float) -> bool:
        """:meth:`TextIndex.fuzzy_present` of normalised ``t`` in ``self.text[:end]``, without
        aligning ``t`` against the whole prefix at every checkpoint (cubic over a replay).

        The text is cut into chunks of :data:`FUZZY_CHUNK_CHARS` overlapping by twice the
        term's length, each padded with NULs where it was cut (so no alignment is scored
        against an edge that is not one); each chunk's best alignment of at least
        ``threshold`` is computed once per term and kept. A prefix's best alignment is the
        first highest of the chunks that end inside it and of one fresh alignment over its
        last stretch; as before, ``t`` is present when that alignment's widened window has the
        same digit runs as ``t``. Chunks are scanned only as far as a checkpoint asks.
        """
        state = self._fuzzy.get((t, threshold))
        if state is None:
            state = self._fuzzy[(t, threshold)] = _FuzzyScan(t, threshold, self.text)
        return state.present(end)

    def prefix(self, message_index: int, **kw: object) -> PrefixTextIndex:
        """The index of ``messages[: message_index + 1]``'s text (``TextIndex`` options in ``kw``).

        Its ``text`` is sliced from the whole text only if read: copying the prefix at every
        checkpoint made probing quadratic in the session again, and its lookups do not need it."""
        end = self.ends[message_index] if message_index >= 0 else 0
        return PrefixTextIndex(_LAZY_PREFIX, whole=self, end=end, **kw)  # type: ignore[arg-type]


DOC_INDEX_AFTER_SCANS = 64
""":meth:`TranscriptText.message_count` indexes the words of the messages once its whole-text
searches have read this many times the text. Indexing a 140 MB, 10^5-message chat log took 5 s,
about as long as 60-100 whole-text searches of it (0.05-0.09 s each), so waiting that long before
indexing costs at most about twice the cheaper choice, and an agent's session (one prompt, a few
terms) is never indexed."""


def _holds(postings: list[int], d: int) -> bool:
    i = bisect_left(postings, d)
    return i < len(postings) and postings[i] == d


FUZZY_CHUNK_CHARS = 16_384
"""Characters of transcript text per chunk of :meth:`TranscriptText.fuzzy_in_prefix`."""

_Alignment = tuple[float, int, int]  # (score, start, end) in the whole text


def _digits_match(text: str, t: str, s: int, e: int, limit: int) -> bool:
    """The digit-run check of :meth:`TextIndex.fuzzy_present` on ``text[:limit]``, from the
    window trimmed of the non-word characters at its ends (of equally good windows a chunk may
    pick one shifted by a space, which must not widen into the number before it)."""
    while s < e and not text[s].isalnum():
        s += 1
    while e > s and not text[e - 1].isalnum():
        e -= 1
    while s > 0 and text[s - 1].isalnum():
        s -= 1
    while e < limit and text[e].isalnum():
        e += 1
    return _DIGITS.findall(t) == _DIGITS.findall(text[s:e])


class _FuzzyScan:
    """One term's chunked fuzzy search of a transcript (see :meth:`TranscriptText.fuzzy_in_prefix`)."""

    def __init__(self, t: str, threshold: float, text: str) -> None:
        self.t, self.threshold, self.text = t, threshold, text
        self.overlap = 2 * len(t)
        self.ends: list[int] = []  # content end of each scanned chunk
        self.best: list[_Alignment | None] = []  # first highest alignment of chunks 0..k

    def _align(self, start: int, stop: int, *, pad_left: bool, pad_right: bool) -> _Alignment | None:
        pad = "\0" * len(self.t)
        left = pad if pad_left else ""
        hay = left + self.text[start:stop] + (pad if pad_right else "")
        al = _fuzz().partial_ratio_alignment(self.t, hay, score_cutoff=self.threshold)
        if al is None:
            return None
        s = max(al.dest_start - len(left), 0) + start
        e = min(al.dest_end - len(left), stop - start) + start
        return (al.score, s, e) if e > s else None

    def present(self, end: int) -> bool:
        n, step = len(self.text), FUZZY_CHUNK_CHARS
        # scan every chunk that ends (with room for a whole window) inside the prefix
        while True:
            k = len(self.ends)
            start = k * step
            stop = min(start + step + self.overlap, n)
            if start >= n or stop > end - len(self.t) or (k and self.ends[-1] >= n):
                break
            got = self._align(start, stop, pad_left=start > 0, pad_right=stop < n)
            prev = self.best[-1] if self.best else None
            self.ends.append(stop)
            self.best.append(got if got is not None and (prev is None or got[0] > prev[0]) else prev)
        k = bisect_right(self.ends, end - len(self.t))
        best = self.best[k - 1] if k else None
        tail_start = k * step
        if tail_start < end:  # the prefix's last stretch: its true end is the prefix's end
            tail = self._align(tail_start, end, pad_left=tail_start > 0, pad_right=False)
            if tail is not None and (best is None or tail[0] > best[0]):
                best = tail
        return best is not None and _digits_match(self.text, self.t, best[1], best[2], end)


_LAZY_PREFIX = "\x00lazy prefix\x00"
"""Stands for a :class:`PrefixTextIndex`'s text until it is read (compared by identity)."""


@dataclass
class PrefixTextIndex(TextIndex):
    """A :class:`TextIndex` of a prefix of a :class:`TranscriptText`, with the same answers:
    exact matches come from the whole text's occurrences, the fuzzy prefilter from its first
    3-gram occurrences; only a fuzzy alignment still reads the prefix."""

    whole: TranscriptText | None = None
    end: int = 0

    def __post_init__(self) -> None:
        if self.text is _LAZY_PREFIX:
            del self.text  # sliced on first read, by __getattr__

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: for ``text``, before anything has read it
        if name != "text" or "whole" not in self.__dict__:
            raise AttributeError(name)
        assert self.whole is not None
        self.text = self.whole.text[: self.end]
        return self.text

    def exact_present(self, t: str) -> bool:
        assert self.whole is not None
        occ = self.whole.occurrences(t)
        return bool(occ) and occ[0] + len(t) <= self.end

    def _exact_position(self, t: str, *, last: bool) -> int | None:
        assert self.whole is not None
        occ = self.whole.occurrences(t)
        k = bisect_right(occ, self.end - len(t))  # occurrences ending inside the prefix
        if k == 0:
            return None
        return occ[k - 1] if last else occ[0]

    def _any_gram(self, grams: list[str]) -> bool:
        assert self.whole is not None
        return any(self.whole.gram_end(g) <= self.end for g in grams)

    def fuzzy_present(self, t: str) -> bool:
        assert self.whole is not None
        if not self.fuzzy or len(t) < self.fuzzy_min_chars or self.end < len(t):
            return False
        if self.fuzzy_threshold >= 90 and not self._any_gram(_grams(t)):
            return False
        return self.whole.fuzzy_in_prefix(t, self.end, self.fuzzy_threshold)


# -- views of one replay ------------------------------------------------------------------------
@dataclass
class _TermState:
    """What is known of one term in the pieces of recent views (see :class:`ViewTexts`)."""

    neg: set[Any] = field(default_factory=set)  # pieces known not to hold the term
    pos: set[Any] = field(default_factory=set)  # pieces known to hold it (exact) / reach the threshold (fuzzy)
    used: int = 0  # the view generation that last asked


_Piece = tuple[str, str, bool, bool]  # (text before, message, cut before, text after): see ViewTextIndex._pieces
_STALE_GENERATIONS = 8
"""Term states not asked about for this many views are dropped (their memory is the point)."""


class ViewTexts:
    """Term lookups shared by the successive views of a replay, so that probing a view costs its
    new messages, not its whole text.

    Scoring recall at a checkpoint asks, for each live probe term, whether it is in the view; a
    term not exactly present is then aligned fuzzily against the whole view. Both were
    O(probes x view) per checkpoint, quadratic in the session over a replay. Consecutive views
    share most of their messages, and whether a term occurs in a message (or a fuzzy alignment
    of it reaches the threshold there) depends on the message's text alone, so each answer is
    kept per (term, piece) and a view asks only about its pieces not seen before. Pieces are
    the view's normalised messages and, for the fuzzy test, each message with the stretch of
    text before it (every window a whole-text alignment scores lies inside one of them).
    A fuzzy hit in any piece falls back to the whole-text alignment, so answers (and the
    digit-run check on the chosen window) are exactly :class:`TextIndex`'s.

    Memory: each term keeps only the pieces of the latest view it was asked about, and terms
    not asked about for :data:`_STALE_GENERATIONS` views are dropped. Thread-safe.
    """

    def __init__(self) -> None:
        self._exact: dict[str, _TermState] = {}
        self._fuzzy: dict[tuple[str, float], _TermState] = {}
        self._texts: dict[tuple[Any, ...], TextIndex] = {}
        self._gen = 0
        self._lock = threading.Lock()

    def index(self, messages: Sequence[Message], **kw: Any) -> ViewTextIndex:
        """The :class:`TextIndex` of ``messages`` (``TextIndex`` options in ``kw``), answering
        from and into this cache."""
        parts = tuple(normalized_message(m) for m in messages)
        with self._lock:
            self._gen += 1
            gen = self._gen
            self._exact = {k: s for k, s in self._exact.items() if s.used >= gen - _STALE_GENERATIONS}
            self._fuzzy = {k: s for k, s in self._fuzzy.items() if s.used >= gen - _STALE_GENERATIONS}
        return ViewTextIndex("\n".join(parts), **kw, views=self, parts=parts, generation=gen)

    def text_index(self, text: str, **kw: Any) -> TextIndex:
        """A :class:`TextIndex` of normalised ``text``, the same object while the text recurs (the
        latest compaction's anchors stay the same from one view to the next until the next one)."""
        key = (text, *sorted(kw.items()))
        with self._lock:
            hit = self._texts.get(key)
            if hit is None:
                hit = self._texts[key] = TextIndex(text, **kw)
                while len(self._texts) > 4:
                    del self._texts[next(iter(self._texts))]
        return hit

    def _state(self, states: dict[Any, _TermState], key: Any, gen: int) -> _TermState:
        st = states.get(key)
        if st is None:
            st = states[key] = _TermState()
        st.used = max(st.used, gen)
        return st


def _bucket(n: int) -> int:
    """Half-width of the boundary stretches for terms of ``n`` characters: the next power of two
    (so a view builds its stretches for a few widths, not one per term length)."""
    h = 8
    while h < n:
        h *= 2
    return h


@dataclass
class ViewTextIndex(TextIndex):
    """A :class:`TextIndex` of a view whose exact and fuzzy tests answer from a
    :class:`ViewTexts` (same answers; see there)."""

    views: ViewTexts | None = None
    parts: tuple[str, ...] = ()
    generation: int = 0
    _part_set: frozenset[str] | None = field(default=None, repr=False)
    _by_width: dict[int, frozenset[_Piece]] = field(default_factory=dict, repr=False)

    def _parts(self) -> frozenset[str]:
        if self._part_set is None:
            self._part_set = frozenset(self.parts)
        return self._part_set

    def exact_present(self, t: str) -> bool:
        # Messages are joined by a newline and normalised text holds no other one, so a term
        # (which holds none either) occurs in the view exactly when it occurs in one message.
        assert self.views is not None
        views, parts = self.views, self._parts()
        with views._lock:
            st = views._state(views._exact, t, self.generation)
            if not st.pos.isdisjoint(parts):
                return True
            st.pos &= parts
            st.neg &= parts
            new = parts - st.neg
            # one search of the new messages together; only a hit is looked for message by message
            if next(_bounded_occurrences("\n".join(new), t), None) is None:
                st.neg |= new
                return False
            for p in new:
                if next(_bounded_occurrences(p, t), None) is not None:
                    st.pos.add(p)
                    return True
                st.neg.add(p)
        raise AssertionError("unreachable: the joined messages held the term")

    def _pieces(self, n: int) -> frozenset[_Piece]:
        """The view's pieces for a term of ``n`` characters: each message with the
        ``h = _bucket(n)`` characters before it (every window of at most ``h`` characters lies in
        the piece of the message holding its last character), cut where the text goes on
        (marked by the NUL padding :meth:`_reaches` puts there, so no alignment is scored against
        an edge that is not one)."""
        h = _bucket(n)
        pieces = self._by_width.get(h)
        if pieces is None:
            text, out, start = self.text, set(), 0
            last = len(self.parts) - 1
            for i, p in enumerate(self.parts):
                s = max(start - h, 0)
                out.add((text[s:start], p, s > 0, i < last))
                start += len(p) + 1  # the newline between two messages
            pieces = self._by_width[h] = frozenset(out)
        return pieces

    def _reaches(self, t: str, pieces: Collection[_Piece]) -> bool:
        """Does a ``partial_ratio`` alignment of ``t`` in any of ``pieces`` reach the threshold?

        The pieces are laid end to end with NUL runs of ``len(t)`` between them and where a
        piece was cut (so a window never spans two pieces, and one that overlaps a NUL run scores
        no more than the window of the text it stands for) and aligned at once; the alignment
        also scores the shorter windows at its haystack's ends, so the piece that ends the text
        goes last and those that start it are aligned each on its own."""
        pad = "\0" * len(t)
        hays = [before + part + (pad if more else "") for before, part, cut, more in pieces if not cut]
        ordered = sorted((q for q in pieces if q[2]), key=lambda q: not q[3])  # the text's end last
        batch = "".join(pad + before + part + (pad if more else "") for before, part, _, more in ordered)
        for hay in [*hays, batch] if batch else hays:
            if _fuzz().partial_ratio_alignment(t, hay, score_cutoff=self.fuzzy_threshold) is not None:
                return True
        return False

    def _sort_pieces(self, t: str, pieces: list[_Piece], st: _TermState) -> None:
        """Put each of ``pieces`` in ``st.pos`` or ``st.neg``: one alignment when none reaches
        the threshold (the common case), halves searched apart when some do."""
        if not self._reaches(t, pieces):
            st.neg.update(pieces)
        elif len(pieces) == 1:
            st.pos.add(pieces[0])
        else:
            half = len(pieces) // 2
            self._sort_pieces(t, pieces[:half], st)
            self._sort_pieces(t, pieces[half:], st)

    def fuzzy_present(self, t: str) -> bool:
        """:meth:`TextIndex.fuzzy_present`, aligning ``t`` only against pieces not seen before;
        the whole text is aligned (as there) only when one of them reaches the threshold."""
        assert self.views is not None
        if not self.fuzzy or len(t) < self.fuzzy_min_chars or len(self.text) < len(t):
            return False
        views, pieces = self.views, self._pieces(len(t))
        with views._lock:
            st = views._state(views._fuzzy, (t, self.fuzzy_threshold), self.generation)
            st.pos &= pieces
            st.neg &= pieces
            new = pieces - st.neg - st.pos
            if new:
                self._sort_pieces(t, list(new), st)
            hit = bool(st.pos)
        return hit and TextIndex.fuzzy_present(self, t)
