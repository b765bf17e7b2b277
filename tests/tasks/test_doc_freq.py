"""Document frequency of key terms (issue 28): :meth:`TranscriptText.message_count` against the
plain definition, on both of its paths (whole-text search and the word index).

The plain definition: the number of messages whose normalised text holds an occurrence of the
normalised term with no word character (``c.isalnum() or c == "_"``) glued to an end that is
itself a word character.
"""

from __future__ import annotations

import random
import re
import sys

import pytest

from h9eval.core.messages import Message
from h9eval.tasks import text as text_mod
from h9eval.tasks.keyterms import filter_key_terms
from h9eval.tasks.recorded._common import Transcript, build_intent
from h9eval.tasks.text import TranscriptText, normalize, normalized_message


def is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


def holds(part: str, t: str) -> bool:
    """``part`` has a word-bounded occurrence of ``t`` (written out, no str.find)."""
    for i in range(len(part) - len(t) + 1):
        if part[i : i + len(t)] != t:
            continue
        j = i + len(t)
        if is_word(t[0]) and i > 0 and is_word(part[i - 1]):
            continue
        if is_word(t[-1]) and j < len(part) and is_word(part[j]):
            continue
        return True
    return False


def plain_count(parts: list[str], t: str) -> int:
    return 0 if not t else sum(holds(p, t) for p in parts)


# Words and edges the index must get right: non-ASCII letters and digits (word characters), a
# combining accent and punctuation (not word characters), casefolding that changes length.
ALPHABET = list("ab_1 ./-:") + ["é", "ß", "Σ", "数", "٣", "²", "\u0301", "ﬁ", "İ", "ǅ", ",", "`", "(", "\t"]
VOCAB = ["src/", ".py", "a-b", "src/a.py", "a", "b", "ab", "a_b", "ab_", "_ab", "straße", "strasse", "-x", "/", "..."]


def random_text(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        out.append(rng.choice(VOCAB) if rng.random() < 0.4 else rng.choice(ALPHABET))
        out.append(rng.choice(["", " ", " ", "/", "-"]))
    return "".join(out)


def transcript(rng: random.Random, n_messages: int) -> tuple[list[Message], list[str]]:
    msgs = [
        Message(rng.choice(["user", "assistant", "tool"]), random_text(rng, rng.randint(0, 12)))
        for _ in range(n_messages)
    ]
    return msgs, [normalized_message(m) for m in msgs]


def terms_for(rng: random.Random, parts: list[str], n: int) -> list[str]:
    """Terms as the filter sees them (normalised): pieces of the messages, cut anywhere (so across
    word boundaries and with punctuation at either end), the vocabulary, and random text."""
    out = ["", " ", "/", "-", ".", "user", "tool"]
    for _ in range(n):
        r = rng.random()
        if r < 0.5 and any(parts):
            p = rng.choice([p for p in parts if p])
            i = rng.randrange(len(p))
            out.append(normalize(p[i : i + rng.randint(1, 8)]))
        elif r < 0.8:
            out.append(normalize(rng.choice(VOCAB)))
        else:
            out.append(normalize(random_text(rng, rng.randint(1, 3))))
    return out


def test_word_character_is_the_regex_word_character() -> None:
    # The index cuts words with \w and splits on whitespace; both must agree with the matcher's
    # idea of a word character on every code point.
    word = re.compile(r"\w")
    chars = map(chr, range(sys.maxunicode + 1))
    assert [c for c in chars if bool(word.fullmatch(c)) != is_word(c)] == []
    assert [c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace() and is_word(c)] == []


@pytest.mark.parametrize("indexed", [False, True], ids=["search", "index"])
def test_message_count_is_the_plain_definition(indexed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_mod, "DOC_INDEX_AFTER_SCANS", 0 if indexed else 10**9)
    rng = random.Random(28)
    n_checked = n_nonzero = n_partial = 0
    for _ in range(60):
        msgs, parts = transcript(rng, rng.randint(0, 30))
        whole = TranscriptText(msgs)
        for t in terms_for(rng, parts, 25):
            want = plain_count(parts, t)
            assert whole.message_count(t) == want, (t, parts)
            stop = rng.randint(0, max(want, 1))
            got = whole.message_count(t, stop)
            assert (got == want) if want <= stop else (stop < got <= want), (t, stop, want, got)
            n_checked += 1
            n_nonzero += want > 0
            n_partial += want > stop
        if msgs:  # (an empty transcript is indexed at once: there is nothing to read)
            assert whole.words_indexed == indexed
    assert n_checked > 1000 and n_nonzero > 300 and n_partial > 100


@pytest.mark.parametrize("indexed", [False, True], ids=["search", "index"])
def test_message_count_cases(indexed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_mod, "DOC_INDEX_AFTER_SCANS", 0 if indexed else 10**9)
    contents = ["parse parse parse", "parse_args", "see src/a.py:3", "a b", "b a", "x-src/ y", "straße", "数据 x"]
    whole = TranscriptText([Message("user", c) for c in contents])
    assert whole.message_count("parse") == 1  # documents, not occurrences; not inside parse_args
    assert whole.message_count("src/") == 2  # a term ending in a non-word character: no right guard
    assert whole.message_count(".py") == 1 and whole.message_count("py") == 1
    assert whole.message_count("a b") == 1  # a term across a word boundary
    assert whole.message_count("b") == 2 and whole.message_count("user b") == 1  # the role header is part of it
    assert whole.message_count("a user") == 0  # never across two messages
    assert whole.message_count(normalize("STRASSE")) == 1 and whole.message_count("数据") == 1
    assert whole.message_count("") == 0 and whole.message_count("-") == 1


def test_index_is_built_only_after_enough_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_mod, "DOC_INDEX_AFTER_SCANS", 2)
    whole = TranscriptText([Message("user", f"m{i} common") for i in range(50)])
    assert whole.message_count("m7") == 1 and not whole.words_indexed  # one whole-text search
    assert whole.message_count("common", 10) == 11 and not whole.words_indexed  # stopped early
    assert whole.message_count("m8") == 1 and not whole.words_indexed
    assert whole.message_count("m9") == 1 and whole.words_indexed  # two texts read: indexed
    assert whole.message_count("common") == 50 and whole.message_count("m1 common") == 1


def chat_log(rng: random.Random, n: int) -> Transcript:
    words = ["src/a.py", "src/b.py", "KeyError", "parse_args", "v1.2.3", "straße.py", "a-b-c", "x_1", "4500", "x.py"]
    tr = Transcript()
    tr.add(Message("system", "sys"))
    for i in range(1, n):
        text = " ".join(rng.choice(words) + rng.choice(["", "", ",", "/", "_z"]) for _ in range(rng.randint(1, 6)))
        if i % 3 == 1:
            tr.add_prompt(Message("user", text))
        else:
            tr.add(Message("assistant", text))
    return tr


def test_key_terms_do_not_depend_on_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The intent of a chat log is the same whether terms are counted by search, by the index, or
    by the plain definition."""
    rng = random.Random(5)
    for _ in range(5):
        tr = chat_log(rng, 90)
        intents = []
        for after in (10**9, 0):
            monkeypatch.setattr(text_mod, "DOC_INDEX_AFTER_SCANS", after)
            intents.append(build_intent(tr))
        assert intents[0] == intents[1]
        first_at = tr.user_prompts[0][0]
        parts = [normalized_message(m) for j, m in enumerate(tr.messages) if j != first_at]
        for ch in intents[0].changes:
            for term in ch.key_terms:
                assert plain_count(parts, normalize(term)) <= 0.3 * len(parts)
        all_terms = {t for ch in intents[0].changes for t in ch.key_terms}
        assert all_terms, "some terms are kept"


def test_filter_passes_its_limit() -> None:
    asked: list[tuple[str, float]] = []

    def doc_freq(term: str, stop_above: float) -> int:
        asked.append((term, stop_above))
        return 7 if term == "often" else 6

    assert filter_key_terms(("often", "rare"), 20, doc_freq=doc_freq, max_df_frac=0.3) == ("rare",)
    assert asked == [("often", 6.0), ("rare", 6.0)]
