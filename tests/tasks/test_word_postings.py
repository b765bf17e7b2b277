"""The one word -> messages index (``WordPostings``) that key-term counting and the loss ledger
share: which messages hold every one of a value's word runs, against a scan of each message."""

from __future__ import annotations

import random

import pytest

from h9eval.tasks.text import WORD_RUN, WordPostings

_WORDS = ("a", "b", "port", "8080", "x_y", "é", "日本", "z")


@pytest.mark.parametrize("seed", range(20))
def test_holding_all_is_every_message_from_first_with_every_run(seed: int) -> None:
    rng = random.Random(seed)
    texts = [" ".join(rng.choices(_WORDS, k=rng.randint(0, 6))) for _ in range(rng.randint(1, 40))]
    postings = WordPostings()
    for t in texts:
        postings.add(set(WORD_RUN.findall(t)))
    assert postings.n == len(texts)
    for _ in range(30):
        runs = rng.sample(_WORDS, rng.randint(1, 3))
        first = rng.randint(0, len(texts))
        expect = [d for d in range(first, len(texts)) if all(r in WORD_RUN.findall(texts[d]) for r in runs)]
        assert list(postings.holding_all(runs, first)) == expect
        lists = postings.lists(runs)
        if any(not any(r in WORD_RUN.findall(t) for t in texts) for r in runs):
            assert lists is None
        else:
            assert lists is not None and [p[0] for p in lists] == [
                next(d for d, t in enumerate(texts) if r in WORD_RUN.findall(t)) for r in runs
            ]


def test_a_small_index_by_hand() -> None:
    postings = WordPostings()
    for words in ({"a", "b"}, {"b"}, {"a", "b", "c"}, set(), {"a"}):
        postings.add(words)
    assert postings.index == {"a": [0, 2, 4], "b": [0, 1, 2], "c": [2]}
    assert list(postings.holding_all(["a", "b"])) == [0, 2]
    assert list(postings.holding_all(["a", "b"], first=1)) == [2]
    assert list(postings.holding_all(["a", "d"])) == [] and postings.lists(["d"]) is None
