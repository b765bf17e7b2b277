"""Text matching shared by the loaders and the probes."""

from __future__ import annotations


def test_prefix_index_answers_as_an_index_of_the_prefix_text() -> None:
    """TranscriptText.prefix (occurrences found once in the whole text) gives the answers a
    TextIndex built from the prefix's own text gives, exact, fuzzy and positions alike."""
    import random

    from h9eval.core.messages import Message
    from h9eval.tasks.text import TextIndex, TranscriptText, normalize_messages

    rng = random.Random(7)
    words = ["alpha", "beta", "src/app.py", "port 8080", "8081", "ValueError: bad", "config.yaml", "gamma_delta", "x"]
    msgs = [
        Message(
            rng.choice(["user", "assistant", "tool"]),
            " ".join(rng.choice(words) for _ in range(rng.randint(0, 6))),
            (),
            "",
        )
        for _ in range(60)
    ]
    terms = [*words, "src/app.pyx", "confg.yaml", "port 8081", "ValueError: bda", "gamma", "alpha beta", "zzz", "8080"]
    whole = TranscriptText(msgs)
    for i in [-1, 0, 1, 5, 17, 30, 59]:
        want = TextIndex(normalize_messages(msgs[: i + 1]))
        got = whole.prefix(i)
        assert got.text == want.text
        for t in terms:
            assert (got.present(t), got.first_position(t), got.last_position(t)) == (
                want.present(t),
                want.first_position(t),
                want.last_position(t),
            ), (i, t)


def test_a_prefix_index_copies_the_prefix_text_only_when_it_is_read() -> None:
    """Slicing the prefix's text at every checkpoint was quadratic in the session: lookups answer
    from the whole text, and ``text`` is sliced on first read (then kept)."""
    from h9eval.tasks.text import TranscriptText, normalize

    msgs, terms = _corpus(80)
    whole = TranscriptText(msgs)
    idx = whole.prefix(40)
    for t in terms:
        idx.present(t)
        idx.fuzzy_present(normalize(t))
    assert "text" not in idx.__dict__
    assert idx.text == whole.text[: whole.ends[40]] and idx.text is idx.text
    assert whole.prefix(-1).text == ""


def _corpus(n_msgs: int, seed: int = 7) -> tuple[list, list[str]]:
    import random

    from h9eval.core.messages import Message

    rng = random.Random(seed)
    words = [
        "alpha",
        "beta",
        "src/app.py",
        "port 8080",
        "8081",
        "ValueError: bad",
        "config.yaml",
        "gamma_delta",
        "x",
        "docs/runbooks/billing-worker-ops.md",
        "retry budget 45000",
    ]
    msgs = [
        Message(
            rng.choice(["user", "assistant", "tool"]),
            " ".join(rng.choice(words) for _ in range(rng.randint(0, 12))),
            (),
            "",
        )
        for _ in range(n_msgs)
    ]
    terms = [
        *words,
        "src/app.pyx",
        "confg.yaml",
        "port 8081",
        "ValueError: bda",
        "gamma_delat",
        "docs/runbook/billing-worker-ops.md",
        "retry budget 4500",
        "retry budgte 45000",
    ]
    return msgs, terms


def test_chunked_fuzzy_search_of_a_prefix_answers_as_the_prefix_index(monkeypatch) -> None:
    """With chunks far smaller than the text (so terms straddle chunk edges), fuzzy presence in
    every prefix is what a TextIndex of the prefix's own text says."""
    from h9eval.tasks import text
    from h9eval.tasks.text import TextIndex, TranscriptText, normalize_messages

    monkeypatch.setattr(text, "FUZZY_CHUNK_CHARS", 97)
    msgs, terms = _corpus(120)
    whole = TranscriptText(msgs)
    assert len(whole.text) > 20 * text.FUZZY_CHUNK_CHARS
    n_fuzzy = 0
    for i in range(0, 120, 7):
        want = TextIndex(normalize_messages(msgs[: i + 1]))
        got = whole.prefix(i)
        for t in terms:
            t = text.normalize(t)
            assert got.fuzzy_present(t) == want.fuzzy_present(t), (i, t)
            n_fuzzy += want.fuzzy_present(t) and not want.exact_present(t)
    assert n_fuzzy > 20  # the fuzzy path was exercised, not only exact matches


def test_a_term_is_aligned_against_each_stretch_of_the_transcript_about_once(monkeypatch) -> None:
    """Probing a term at every checkpoint aligns it against O(text) characters in all (it aligned
    against the whole prefix at each checkpoint: quadratic in the transcript per term)."""
    from h9eval.tasks import text
    from h9eval.tasks.text import TranscriptText

    monkeypatch.setattr(text, "FUZZY_CHUNK_CHARS", 200)
    from rapidfuzz import fuzz

    aligned = [0]

    class _Counting:
        @staticmethod
        def partial_ratio_alignment(s1: str, s2: str, **kw: object) -> object:
            aligned[0] += len(s2)
            return fuzz.partial_ratio_alignment(s1, s2, **kw)

    monkeypatch.setattr(text, "_fuzz", lambda: _Counting)
    msgs, _ = _corpus(400, seed=3)
    whole = TranscriptText(msgs)
    term = text.normalize("docs/runbook/billing-worker-ops.md")  # fuzzy only: never exact
    for i in range(len(msgs)):
        whole.prefix(i).fuzzy_present(term)
    assert aligned[0] < 3 * len(whole.text) + len(msgs) * 3 * (text.FUZZY_CHUNK_CHARS + 4 * len(term)), aligned[0]


def _views(seed: int = 5) -> tuple[list[list], list[str]]:
    """Successive views of one replay, as compaction makes them: a pinned head, a sliding tail of
    the transcript, and now and then a summary message that is new text."""
    import random

    from h9eval.core.messages import Message

    msgs, terms = _corpus(240, seed=seed)
    rng = random.Random(seed)
    # messages that end and start with the halves of a term, so it is only found across a boundary
    msgs[40] = Message("assistant", msgs[40].content + " docs/runbooks/billing", (), "")
    msgs[41] = Message("user", "worker-ops.md " + msgs[41].content, (), "")
    views = []
    for end in range(10, len(msgs), 9):
        start = max(1, end - rng.randint(15, 40))
        head = [msgs[0]]
        if rng.random() < 0.4:
            head.append(
                Message("user", f"[Context Compaction] summary {end}: " + " ".join(rng.sample(terms, 3)), (), "")
            )
        views.append(head + msgs[start : end + 1])
    views.append([])  # an empty view
    return views, terms


def test_view_cache_answers_as_an_index_of_each_views_own_text() -> None:
    """A ViewTexts shared by successive views (pieces searched once and remembered) answers every
    lookup as a fresh TextIndex of that view's text: exact, fuzzy (boundary-straddling
    alignments included), positions."""
    from h9eval.tasks import text
    from h9eval.tasks.text import TextIndex, ViewTexts, normalize_messages

    views, terms = _views()
    terms = [*terms, "runbooks/billing user worker-ops", "billing user worker-ops.md", "alpha beta gamma_delta"]
    cache = ViewTexts()
    n_fuzzy = n_seam = 0
    for view in views:
        want = TextIndex(normalize_messages(view))
        got = cache.index(view)
        assert got.text == want.text
        for t in terms:
            t = text.normalize(t)
            assert (got.exact_present(t), got.fuzzy_present(t)) == (want.exact_present(t), want.fuzzy_present(t)), t
            assert (got.present(t), got.first_position(t), got.last_position(t)) == (
                want.present(t),
                want.first_position(t),
                want.last_position(t),
            ), t
            fuzzy_only = want.fuzzy_present(t) and not want.exact_present(t)
            n_fuzzy += fuzzy_only
            n_seam += fuzzy_only and not any(TextIndex(p).fuzzy_present(t) for p in got.parts)
    assert n_fuzzy > 20 and n_seam > 0  # fuzzy hits, some only across a message boundary, were exercised


def test_view_cache_searches_each_piece_once(monkeypatch) -> None:
    """Probing successive views aligns and searches about each new message once, not each whole
    view again (that was O(probes x view) per checkpoint, quadratic over a replay)."""
    from rapidfuzz import fuzz

    from h9eval.tasks import text
    from h9eval.tasks.text import ViewTexts

    aligned = [0]

    class _Counting:
        @staticmethod
        def partial_ratio_alignment(s1: str, s2: str, **kw: object) -> object:
            aligned[0] += len(s2)
            return fuzz.partial_ratio_alignment(s1, s2, **kw)

    monkeypatch.setattr(text, "_fuzz", lambda: _Counting)
    from h9eval.core.messages import Message

    short, _ = _corpus(1200, seed=9)
    msgs = [Message("tool", " ".join(m.content for m in short[i : i + 6]), (), "") for i in range(0, len(short), 6)]
    views = [msgs[:1] + msgs[max(1, end - 60) : end + 1] for end in range(5, len(msgs), 9)]  # a sliding window
    term = text.normalize("docs/runbooks/payments-queue.md")  # shares 3-grams with the text, never found
    cache = ViewTexts()
    whole = 0
    for view in views:
        idx = cache.index(view)
        whole += len(idx.text)
        assert not idx.fuzzy_present(term) and not idx.exact_present(term)
    assert 0 < aligned[0] < whole / 3, (aligned[0], whole)


def test_normalize_ascii_fast_path_agrees_with_the_regular_expressions() -> None:
    """ASCII text is normalised by a translation table; it must give what the two regular
    expressions give (every ASCII character, control characters and \\x1c-\\x1f included)."""
    import random

    from h9eval.tasks import text

    def by_regex(s: str) -> str:
        return text._WS.sub(" ", text._NOT_KEPT.sub(" ", s.casefold())).strip()

    rng = random.Random(3)
    samples = ["".join(chr(rng.randrange(128)) for _ in range(rng.randint(0, 80))) for _ in range(3000)]
    samples += ["".join(chr(i) for i in range(128)), "  Src/App.PY,  `port`: 8080\\n\\tOK  "]
    for s in samples:
        assert s.isascii() and text.normalize(s) == by_regex(s), repr(s)


def test_view_cache_forgets_terms_no_view_asks_about() -> None:
    """A term's cached pieces are dropped once views stop asking about it, and each term keeps
    only the pieces of the latest view it was asked about (the cache's memory stays bounded)."""
    from h9eval.core.messages import Message
    from h9eval.tasks import text
    from h9eval.tasks.text import ViewTexts

    msgs = [Message("user", f"message {i} about src/mod_{i}.py") for i in range(200)]
    cache = ViewTexts()
    cache.index(msgs[:50]).present("src/never_there.py")
    assert set(cache._exact) == {text.normalize("src/never_there.py")}
    assert len(cache._exact[text.normalize("src/never_there.py")].neg) == 50
    cache.index(msgs[40:60]).present("src/never_there.py")
    assert len(cache._exact[text.normalize("src/never_there.py")].neg) == 20  # only the latest view's
    for i in range(text._STALE_GENERATIONS + 1):
        cache.index(msgs[i : i + 5]).present("message")
    assert text.normalize("src/never_there.py") not in cache._exact and text.normalize("message") in cache._exact
