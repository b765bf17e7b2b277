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
    msgs = [Message(rng.choice(["user", "assistant", "tool"]), " ".join(rng.choice(words) for _ in range(rng.randint(0, 6))), (), "") for _ in range(60)]
    terms = [*words, "src/app.pyx", "confg.yaml", "port 8081", "ValueError: bda", "gamma", "alpha beta", "zzz", "8080"]
    whole = TranscriptText(msgs)
    for i in [-1, 0, 1, 5, 17, 30, 59]:
        want = TextIndex(normalize_messages(msgs[: i + 1]))
        got = whole.prefix(i)
        assert got.text == want.text
        for t in terms:
            assert (got.present(t), got.first_position(t), got.last_position(t)) == (want.present(t), want.first_position(t), want.last_position(t)), (i, t)
