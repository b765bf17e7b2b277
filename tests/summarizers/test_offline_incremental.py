"""The offline summarizers' head scan resumed from the previous head (issue 18) gives exactly
what reading the whole head gives, whatever the next head is: longer, cut before a pending
call, paired differently, equal but not the same objects, or unrelated."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pytest

import h9eval.summarizers.offline as off
from h9eval.compaction.anchors import COMPACTION_MARKER
from h9eval.compaction.policies import make_policy
from h9eval.core.messages import Message, ToolCall, assistant, system, tool_result, user
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.tasks.synthetic import generate

TEXTS = (
    "I'll use the parser instead of regexes because the grammar is nested.",
    "Let me run the tests first.",
    "The root cause is a missing import in config.py.",
    "",
    "Now I need to edit src/app.py and then rerun pytest.",
)
OUTPUTS = (
    "ok\n3 passed",
    "Traceback (most recent call last):\nValueError: bad",
    "<returncode>1</returncode>\nfatal: no repo",
    "",
)


def _history(rng: random.Random, n: int) -> list[Message]:
    """Messages of every kind parse_head reads. Results mostly follow their call; some come a
    few messages late, twice, or never."""
    out: list[Message] = [system("You are an agent.")]
    late: list[str] = []
    k = 0
    while len(out) < n:
        r = rng.random()
        if r < 0.12:
            out.append(
                user(
                    rng.choice(
                        (
                            "Fix the failing config test; you must not touch tests/.",
                            "continue",
                            "Also update the README.",
                        )
                    )
                )
            )
        elif r < 0.15:
            out.append(
                user(f"{COMPACTION_MARKER}\n## Anchors\n\n### User Intent\nEarlier task {k}.\n\n## Summary\nbefore")
            )
        elif r < 0.25:
            out.append(assistant(rng.choice(TEXTS)))
        else:
            calls = []
            for _ in range(rng.choice((1, 1, 2))):
                k += 1
                cmd = rng.choice(("pytest -q", "sed -i s/a/b/ src/app.py", "cat README.md > docs/x.md", "ls"))
                calls.append(ToolCall(f"c{k}", "bash", json.dumps({"command": cmd})))
            out.append(assistant(rng.choice(TEXTS), calls))
            due, late = late, []
            for tc in calls:
                x = rng.random()
                if x < 0.1:
                    late.append(tc.id)  # after the next assistant message
                elif x > 0.03 or not due:
                    due.append(tc.id)
                # else: never answered
            for cid in due:
                out.append(tool_result(cid, rng.choice(OUTPUTS), is_error=rng.random() < 0.1))
                if rng.random() < 0.04:
                    out.append(tool_result(cid, "a second result for the same call"))
    return out


def _heads(rng: random.Random, history: list[Message]) -> Iterator[list[Message]]:
    """What a replay's summaries pass: growing prefixes (the full tier) or growing halves (the
    soft tier) for a while each, and now and then a surprise."""
    end, halves = 3, False
    while end < len(history):
        end = min(len(history), end + rng.randint(1, 6))
        head = history[1:end]
        if rng.random() < 0.1:
            halves = not halves
        r = rng.random()
        if r < 0.03:
            yield [Message(m.role, m.content, m.tool_calls, m.tool_call_id, m.is_error) for m in head]  # equal copies
        elif r < 0.06:
            yield head[rng.randint(1, max(1, len(head) - 1)) :]  # not a prefix of anything before
        elif r < 0.09:
            yield head[: rng.randint(0, len(head))]  # shorter than the last
        else:
            yield head[: len(head) // 2] if halves else head


def _from_scratch(head: list[Message], **kw: int) -> off.ParsedHead:
    kept = dict(off._KEPT_SCANS)
    off._KEPT_SCANS.clear()
    try:
        return off.parse_head(head, **kw)
    finally:
        off._KEPT_SCANS.clear()
        off._KEPT_SCANS.update(kept)


@pytest.mark.parametrize("seed", range(12))
def test_a_resumed_scan_equals_reading_the_whole_head(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    off.clear_caches()
    fed, refused = [0], [0]
    feed, pairs = off._Scan.feed, off._Scan.still_pairs

    def counting_feed(self: off._Scan, messages: list[Message], results: dict[str, Message]) -> None:
        fed[0] += len(messages)
        feed(self, messages, results)

    def counting_pairs(self: off._Scan, results: dict[str, Message]) -> bool:
        ok = pairs(self, results)
        refused[0] += not ok
        return ok

    monkeypatch.setattr(off._Scan, "feed", counting_feed)
    monkeypatch.setattr(off._Scan, "still_pairs", counting_pairs)
    history = _history(rng, 400)
    total = 0
    for i, head in enumerate(_heads(rng, history)):
        kw = {"max_item_chars": 60 if i % 7 == 0 else 200}  # two caps: two kept scans
        got = off.parse_head(head, **kw)
        fed_now = fed[0]
        want = _from_scratch(head, **kw)
        fed[0] = fed_now  # the reference's reading is not the resumed scan's
        assert got == want, f"seed {seed}, head {i} ({len(head)} messages)"
        total += len(head)
    # most messages were not read again, although copies and unrelated heads are read whole
    assert fed[0] < total / 2, (fed[0], total)


def test_a_kept_scan_whose_call_now_has_a_result_is_not_resumed(monkeypatch: pytest.MonkeyPatch) -> None:
    off.clear_caches()
    refused = []
    pairs = off._Scan.still_pairs
    monkeypatch.setattr(
        off._Scan, "still_pairs", lambda self, results: refused.append(not pairs(self, results)) or not refused[-1]
    )
    c1 = ToolCall("c1", "bash", json.dumps({"command": "pytest -q"}))
    c2 = ToolCall("c2", "bash", json.dumps({"command": "ls"}))
    # c1's result comes after c2's: the first head ends with c2 answered, so its scan is kept
    first = [
        user("Fix the failing config test, please, in src/config.py."),
        assistant("Let me run the tests.", [c1]),
        assistant("", [c2]),
        tool_result("c2", "a.py"),
    ]
    before = off.parse_head(first)
    assert before.steps[0].outcome == "no result"
    later = [*first, tool_result("c1", "Traceback (most recent call last):\nValueError: bad")]
    got = off.parse_head(later)
    assert refused == [True]
    assert got.steps[0].outcome == "failed" and got == _from_scratch(later)


def test_a_view_mode_replay_gives_the_same_summaries_as_reading_every_head_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task = generate("small", seed=4, n_turns=120)
    window = sum(m.nbytes for m in task.messages) // 4 * 6 // 10  # soft and full tiers, ~30 summaries

    def run() -> tuple[str, str]:
        off.clear_caches()
        res = replay(
            task, make_policy("progressive", context_window_tokens=window), config=ReplayConfig(history_mode="view")
        )
        assert int(res.compactions["summarized"].gt(0).sum()) >= 20
        cols = [c for c in res.compactions.columns if c != "duration_ns"]
        return res.compactions[cols].to_csv(index=False), res.calls["tier_name"].to_csv(index=False)

    resumed = run()
    scan = off._scan_head

    def whole(head: list[Message], n: int) -> off._Scan:
        off._KEPT_SCANS.clear()
        return scan(head, n)

    monkeypatch.setattr(off, "_scan_head", whole)
    assert run() == resumed


def test_the_literal_prefilters_answer_as_the_patterns_do() -> None:
    """The exit-status and failure tests skip their patterns when a tool result lacks their
    literals; on random texts built from the patterns' own pieces (case variants, the non-ASCII
    letters re.I folds onto ASCII ones) they answer exactly as the plain patterns."""
    import random

    from h9eval.summarizers import offline

    rng = random.Random(7)
    pieces = [
        "<returncode>", "</returncode>", "<RETURNCODE>", " 0", "1", "-2", "exit status", "EXIT CODE:",
        "exited with code ", "Exit code", "ex\u0131t status", "\u017f", "\n", "  ",
        "Traceback (most recent call last)", "Error:", "error:", "ERROR:", "fatal:", "FAILED", "command not found",
        "xFAILED", "Errors:", "ok", "\u00e9", "\t",
    ]  # fmt: skip
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        m = offline._RC.search(text)
        assert offline._exit_status(text) == (None if not m else int(next(g for g in m.groups() if g is not None)))
        result = Message(role="tool", content=text, tool_call_id="c1")
        rc = offline._exit_status(text)
        want = rc != 0 if rc is not None else bool(offline._FAIL_TEXT.search(text))
        assert offline._failed(result) is want, text
