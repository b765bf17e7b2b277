"""The C-speed history comparisons give what a message-by-message loop gives."""

from __future__ import annotations

import random

from h9eval.core.history import PrefixBytes, common_prefix_len, extends
from h9eval.core.messages import Message


def _naive_prefix(a: list[Message], b: list[Message]) -> int:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def test_common_prefix_len_finds_the_first_difference() -> None:
    rng = random.Random(0)
    base = [Message("user", f"m{i}") for i in range(400)]
    for _ in range(300):
        a = base[: rng.randint(0, 400)]
        b = list(a[: rng.randint(0, len(a))]) + [Message("user", f"new{j}") for j in range(rng.randint(0, 5))]
        if b and rng.random() < 0.3:
            b[rng.randrange(len(b))] = Message("user", "changed")
        if rng.random() < 0.5:
            b = [Message(m.role, m.content) for m in b]  # equal, not the same objects
        assert common_prefix_len(a, b) == _naive_prefix(a, b)
        assert common_prefix_len(tuple(a), b) == _naive_prefix(a, b)


def test_extends_and_prefix_bytes() -> None:
    msgs = [Message("user", "x" * i) for i in range(50)]
    assert extends(msgs, msgs[:10]) and extends(tuple(msgs), msgs[:10]) and not extends(msgs[:5], msgs[:10])
    assert not extends(msgs, []) and not extends([Message("user", "other"), *msgs[1:]], msgs[:10])
    sizes = PrefixBytes()
    rng = random.Random(1)
    h: list[Message] = []
    for _ in range(200):
        r = rng.random()
        if r < 0.6:
            h = h + [Message("tool", "y" * rng.randint(0, 30), (), "c")]
        elif r < 0.8 and h:
            h = h[: rng.randint(0, len(h))] + [Message("user", "z" * rng.randint(0, 9))]  # a rewrite keeps a prefix
        else:
            h = [Message("user", "fresh" * rng.randint(0, 3))]
        cum = sizes.update(h)
        assert cum[: len(h) + 1] == [sum(m.nbytes for m in h[:i]) for i in range(len(h) + 1)] and len(cum) == len(h) + 1
