"""Key-term extraction for task statements (recorded sessions' ``Intent.key_terms``).

A recall probe asks whether a compacted context still names the things the task is about:
file paths, error names, code identifiers, issue/bead ids, version numbers. This module pulls
those out of free text with regular expressions only (no model, no randomness), so the same
statement always yields the same terms in the same order.

Order: terms are grouped by category, in decreasing order of how specific they are
(paths, then error names, then code identifiers, then ids/slugs, then numbers); within a
category, by first occurrence in the text. Duplicates (exact string) are dropped; the list is
capped at ``max_terms``.

Generic terms (:func:`filter_key_terms`): a term that any session would contain (``print``,
``curl``, ``10``) or that this transcript repeats in a large share of its messages cannot tell
a policy that remembers from one that does not (the recent tail holds it anyway). The
recorded loaders drop both kinds before the terms become probes.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence

__all__ = [
    "extract_key_terms",
    "filter_key_terms",
    "is_generic_term",
    "DEFAULT_MAX_TERMS",
    "GENERIC_TERMS",
    "KEYTERM_MAX_DF_FRAC",
    "KEYTERM_MIN_DOCS",
]

DEFAULT_MAX_TERMS = 20
"""Default cap on the number of key terms (terms, not characters)."""

KEYTERM_MAX_DF_FRAC = 0.3
"""A key term present in more than this fraction of a transcript's messages (the task prompt
not counted) is dropped: it is in every recent tail, so it measures nothing about memory.
Chosen on the shipped recorded sessions, where it drops ``curl``, ``hex.pm``, a bead id that is
part of every command's working directory and ``Dataset`` (60 % of messages), and keeps task
subjects such as ``RenameIndex`` (29 %)."""

KEYTERM_MIN_DOCS = 20
"""The document-frequency filter needs at least this many messages (besides the prompt): in
a 2-message transcript every term has a frequency of 0 or 1."""

GENERIC_TERMS = frozenset(
    {
        # builtins and everyday calls of the languages in the shipped sessions
        "print",
        "len",
        "str",
        "int",
        "float",
        "dict",
        "list",
        "set",
        "tuple",
        "bool",
        "type",
        "range",
        "open",
        "getattr",
        "setattr",
        "hasattr",
        "isinstance",
        "repr",
        "format",
        "super",
        "self",
        "none",
        "true",
        "false",
        "null",
        "main",
        "__init__",
        "__main__",
        "console.log",
        # shell commands every agent runs
        "curl",
        "wget",
        "ls",
        "cat",
        "grep",
        "sed",
        "awk",
        "echo",
        "cd",
        "git",
        "pip",
        "python",
        "python3",
        "pytest",
        "bash",
        "sh",
        "make",
        "npm",
        "node",
        "mix",
        "go",
        "cargo",
        "sudo",
    }
)
"""Tokens (casefolded) too common in agent sessions to identify a task."""

# URLs are removed first: their pieces look like paths and dotted identifiers but a probe that
# looks for "docs.pytest.org" in a summary measures nothing useful.
_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>()\"'`]+")

_EXT = (
    r"py|pyi|pyx|js|jsx|ts|tsx|ex|exs|heex|eex|rs|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|swift|"
    r"md|rst|txt|json|jsonl|yaml|yml|toml|cfg|ini|conf|lock|html|htm|css|scss|sh|bash|zsh|sql|"
    r"xml|csv|ipynb|proto|graphql|vue|svelte|dockerfile|mk|gradle|lua|pl|r|scala|dart|tf"
)
# A path with at least one slash (optionally rooted, ~ or ./), or a bare file name with a
# known extension. The character class avoids swallowing trailing punctuation.
_PATH = re.compile(
    r"(?<![\w/.-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*\w"
    r"|(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:" + _EXT + r")\b",
    re.IGNORECASE,
)
_ERROR = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Exit|Interrupt|Failure)\b")
_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_IDENT_IN_TICKS = re.compile(r"^[A-Za-z_][\w.:]*(?:\(\))?$")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?(?![\w(])")
_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\(")
_SNAKE = re.compile(r"(?<![\w.-])_*[a-z][a-z0-9]*(?:_[a-z0-9]+)+_*(?![\w-])")
_CAMEL = re.compile(
    r"(?<![\w.])(?:[A-Z][a-z0-9]+){2,}[A-Za-z0-9]*(?![\w])|(?<![\w.])[A-Z]{2,}[a-z]+[A-Za-z0-9]*(?![\w])"
    r"|(?<![\w.])[a-z]+[A-Z][A-Za-z0-9]*(?![\w])"
)
_CLI_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
# Slugs/ids with a digit: bead ids (spotter-4te), SWE-bench ids (django__django-15695), tickets.
_SLUG = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9]*(?:[-_]{1,2}[A-Za-z0-9]+)*-[A-Za-z0-9]*\d[A-Za-z0-9]*(?![\w-])")
# A hyphenated token written at least twice ("spotter-fum ... spotter-fum") is a name, not prose.
_HYPHENATED = re.compile(r"(?<![\w-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w-])")
_ISSUE = re.compile(r"(?<![\w#])#\d+\b")
_VERSION = re.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)*(?:[a-z]+\d*)?(?![\w.]*\w)")
_INT = re.compile(r"(?<![\w.,#/-])\d{2,}(?![\w.,]*\d)")

# Common English/markdown words that the CamelCase/slug patterns would otherwise pick up.
_STOP = frozenset(
    {
        "e.g",
        "i.e",
        "etc",
        "vs",
        "GitHub",
        "JavaScript",
        "TypeScript",
        "README",
        "iOS",
        "macOS",
        "OpenAI",
        "YouTube",
        "PowerShell",
        "--git",
    }
)

# (category rank, pattern, group) in rank order; lower rank = listed first.
_CATEGORIES: tuple[tuple[int, re.Pattern[str], int], ...] = (
    (0, _PATH, 0),
    (1, _ERROR, 0),
    (2, _BACKTICK, 1),
    (3, _DOTTED, 0),
    (3, _CALL, 1),
    (3, _CAMEL, 0),
    (3, _SNAKE, 0),
    (3, _CLI_FLAG, 0),
    (4, _SLUG, 0),
    (4, _ISSUE, 0),
    (5, _VERSION, 0),
    (6, _INT, 0),
)


def _clean(term: str) -> str:
    term = term.strip().strip(".,;:!?'\"")
    if term.startswith(("a/", "b/")) and len(term) > 2:
        term = term[2:]  # git diff's a/ b/ prefixes
    if term.endswith("()"):
        term = term[:-2]
    return term


def _keep(term: str, rank: int) -> bool:
    if len(term) < 2 or term in _STOP:
        return False
    if rank == 0:
        if term.startswith("-"):
            return False  # "--title/--notes": option lists, not paths
        # Prose slash lists ("and/or", "issues/tasks/epics") are not paths: an unrooted path
        # needs a file extension, a digit or an underscore somewhere.
        if "/" in term and not term.startswith(("/", "~", "./", "../")) and not re.search(r"[._\d]", term):
            return False
        return True
    if rank == 2:
        return bool(_IDENT_IN_TICKS.match(term))
    if rank == 3:
        # "relevant._" (markdown emphasis after a full stop) is not a dotted name.
        return len(term) >= 3 and all(re.search(r"[A-Za-z0-9]", c) for c in term.split("."))
    return True


def _in_spans(pos: int, spans: list[tuple[int, int]]) -> bool:
    """Whether ``pos`` lies in one of ``spans`` (sorted, non-overlapping: finditer's order),
    by bisection: a linear scan made a multi-MB prompt quadratic."""
    i = bisect.bisect_right(spans, (pos, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= pos < spans[i][1]


def extract_key_terms(text: str, *, max_terms: int = DEFAULT_MAX_TERMS) -> tuple[str, ...]:
    """Identifiers, file paths, error names, ids and numbers found in ``text``.

    ``max_terms``: cap on the number of terms returned (default 20); ``0`` returns ``()``.
    Deterministic: same text, same tuple. Matches of the other categories that lie inside a
    path (``test_operations`` in ``tests/migrations/test_operations.py``) are ignored: the
    path already carries them.
    """
    if max_terms <= 0 or not text:
        return ()
    # Blank out URLs but keep offsets, so positions stay comparable across categories.
    text = _URL.sub(lambda m: " " * len(m.group(0)), text)
    found: dict[str, tuple[int, int]] = {}
    path_spans: list[tuple[int, int]] = []
    for rank, pat, group in _CATEGORIES:
        for m in pat.finditer(text):
            term = _clean(m.group(group))
            if not _keep(term, rank):
                continue
            pos = m.start(group)
            if rank == 0:
                path_spans.append((m.start(), m.end()))
            elif _in_spans(pos, path_spans):
                continue
            prev = found.get(term)
            if prev is None or (rank, pos) < prev:
                found[term] = (rank, pos)
    counts: dict[str, int] = {}  # text.count once per distinct term, not per match
    for m in _HYPHENATED.finditer(text):
        term = m.group(0)
        if term in found or len(term) < 5:
            continue
        n = counts.get(term)
        if n is None:  # setdefault would evaluate text.count at every match
            n = counts[term] = text.count(term)
        if n >= 2:
            if not _in_spans(m.start(), path_spans):
                found[term] = (4, m.start())
    ordered = sorted(found.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0]))
    return tuple(t for t, _ in ordered[:max_terms])


def is_generic_term(term: str) -> bool:
    """``True`` for :data:`GENERIC_TERMS` and for numbers of at most two digits (``10``,
    ``42``: counts, line offsets, exit codes, found in any session)."""
    t = term.strip()
    return t.casefold() in GENERIC_TERMS or (t.isdigit() and len(t) <= 2)


def filter_key_terms(
    terms: Sequence[str],
    n_documents: int,
    *,
    doc_freq: Callable[[str, float], int],
    max_df_frac: float = KEYTERM_MAX_DF_FRAC,
    min_docs: int = KEYTERM_MIN_DOCS,
) -> tuple[str, ...]:
    """``terms`` without generic ones (:func:`is_generic_term`) and, when there are at least
    ``min_docs`` documents, without those present in more than ``max_df_frac`` of them.

    ``n_documents``: how many documents there are, one per transcript message (the task prompt
    left out); ``doc_freq(term, stop_above)``: in how many of them ``term`` is present, matched as
    the probes match, so a term counts where a probe would find it; it may stop counting once the
    count exceeds ``stop_above`` (this filter's limit, ``max_df_frac * n_documents``) and return
    that count. Order kept.
    """
    kept = [t for t in terms if not is_generic_term(t)]
    if n_documents < min_docs or not kept:
        return tuple(kept)
    limit = max_df_frac * n_documents
    return tuple(t for t in kept if doc_freq(t, limit) <= limit)
