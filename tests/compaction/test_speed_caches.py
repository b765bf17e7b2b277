"""The caches and shortcuts that make compaction work happen once give the same results as the
work they replace."""

from __future__ import annotations

import random
import re
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from h9eval.compaction.base import CompactionEnv, LogicalClock, WallClock, _rfc3339, _uuid4_text
from h9eval.compaction.masking import IncrementalMasking, mask_observations
from h9eval.compaction.offload import CompactionOffloader, _first_lines
from h9eval.compaction.policies.progressive import ProgressiveCompactor
from h9eval.compaction.prompts import DEFAULT_PROMPTS, PromptSet, serialize_conversation
from h9eval.core.messages import Message, ToolCall, utf8_len


def _big(tag: str, n: int = 600) -> str:
    return "\n".join(f"{tag} line {i}" for i in range(n))


def test_offload_outcome_is_keyed_by_id_and_content(tmp_path: Path) -> None:
    off = CompactionOffloader(tmp_path, "s")
    a, b = Message("tool", _big("a"), (), "dup"), Message("tool", _big("b"), (), "dup")
    oa, ob = off.offload_tool_result(a), off.offload_tool_result(b)
    assert "a line 0" in oa.placeholder and "b line 0" in ob.placeholder
    assert off.offload_tool_result(Message("tool", _big("a"), (), "dup")) is oa  # equal content: reused


def test_first_lines_is_the_split_prefix() -> None:
    for text in ("", "x", "x\n", "\n\n", "a\nb\nc", "a\nb\nc\n"):
        for n in range(5):
            assert _first_lines(text, n) == "\n".join(text.split("\n")[:n])


def test_progressive_reuses_placeholder_messages_and_keeps_views(tmp_path: Path) -> None:
    pol = ProgressiveCompactor(context_window_tokens=1_000, min_tail_messages=2, offload_threshold_bytes=200)
    hist = [Message("system", "sys"), Message("user", "go")]
    for i in range(4):
        hist += [
            Message("assistant", "", (ToolCall(f"c{i}", "run", "{}"),)),
            Message("tool", _big(f"r{i}", 60), (), f"c{i}"),
        ]
    hist += [Message("assistant", "ok"), Message("user", "more")]
    run = pol.start(CompactionEnv(offload_root=tmp_path, session_id="s", seed=0))
    v1, v2 = run.compact(hist).view, run.compact(list(hist)).view
    assert v1 == v2 and v1[3].content.startswith("[offloaded: ")
    assert v1[3] is v2[3]
    fresh = pol.start(CompactionEnv(offload_root=tmp_path / "other", session_id="s", seed=0)).compact(hist).view
    assert run.compact(hist).tier.label == "warn" and fresh == v1


def test_utf8_len_matches_encoding() -> None:
    for s in ("", "abc", "é", "日本語", "\ud800x", "emoji 😀"):
        assert utf8_len(s) == len(s.encode("utf-8", "surrogatepass"))
    m = Message("tool", "日本", (), "é")
    assert m.content_nbytes == 6 and m.nbytes == 8 and m.with_content("ab").nbytes == 4


def test_seeded_ids_are_uuid4_text() -> None:
    rng = random.Random(3)
    for n in [0, 2**128 - 1] + [rng.getrandbits(128) for _ in range(2_000)]:
        assert _uuid4_text(n) == str(uuid.UUID(int=n, version=4))


def test_clocks_print_rfc3339_as_before() -> None:
    starts = (
        datetime(2026, 1, 1, tzinfo=timezone.utc),
        datetime(2026, 1, 1, 23, 59, 59, 998_500, tzinfo=timezone(timedelta(hours=2))),
        datetime(2026, 1, 1, 23, 59, 58, 999_000, tzinfo=timezone(timedelta(hours=-5))),
        datetime(2026, 3, 1, 0, 0, 0, 500),
    )
    for start in starts:
        clock, t = LogicalClock(start), start
        for _ in range(3_000):
            t += timedelta(milliseconds=1)
            assert clock.timestamp() == _rfc3339(t)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}(Z|[+-]\d\d:\d\d)", WallClock().timestamp())


def test_serialization_and_templates_as_before() -> None:
    head = [
        Message("user", "hi"),
        Message("assistant", "", (ToolCall("1", "ls", "{}"),)),
        Message("tool", "out", (), "1"),
        Message("assistant", ""),
    ]
    assert serialize_conversation(head) == "[user]: hi\n[tool_call ls(1)]: {}\n[tool_result 1]: out"
    assert serialize_conversation([]) == ""
    ps = PromptSet(
        first="A {conversation} {previous_compaction} {other}", incremental="P={previous_compaction} C={conversation}"
    )
    assert ps.render_first("x {conversation}") == "A x {conversation} {previous_compaction} {other}"
    assert ps.render_incremental("p", "c") == "P=p C=c"
    assert DEFAULT_PROMPTS.render_first("CONV").endswith("Conversation:\nCONV")


def _random_history(rng: random.Random, n: int, placeholder: str) -> list[Message]:
    msgs = [Message("system", "s"), Message("user", "task")]
    for t in range(n):
        ids = [rng.choice(["call_0", f"c{t}", f"c{t}b", "x"]) for _ in range(rng.choice([0, 1, 1, 2]))]
        msgs.append(Message("assistant", f"a{t}", tuple(ToolCall(i, "run", "{}") for i in ids)))
        for i in ids + ([rng.choice(["orphan", "call_0"])] if rng.random() < 0.1 else []):
            body = placeholder if rng.random() < 0.05 else "\n".join(f"out {t} {k}" for k in range(rng.randint(1, 5)))
            msgs.append(Message("tool", body, (), i))
        if rng.random() < 0.3:
            msgs.append(Message("user", f"u{t}"))
    return msgs


@pytest.mark.parametrize("unit", ["assistant_turns", "tool_results"])
@pytest.mark.parametrize("placeholder", ["<MASKED>", "Old environment output: ({lines} lines omitted)"])
@pytest.mark.parametrize("keep", [0, 1, 3])
def test_incremental_masking_equals_masking_the_whole_history(unit: str, placeholder: str, keep: int) -> None:
    for seed in range(6):
        rng = random.Random(seed)
        full = _random_history(rng, 40, placeholder)
        cuts = sorted(rng.sample(range(3, len(full) + 1), 15))
        view, wb = (
            IncrementalMasking(keep, placeholder, window_unit=unit),
            IncrementalMasking(keep, placeholder, window_unit=unit),
        )
        wb_hist: list[Message] = []
        prev = 0
        for c in cuts:
            out, n, nbytes = view.mask(full[:c])
            want, want_n = mask_observations(full[:c], keep, placeholder, window_unit=unit)
            assert (list(out), n, nbytes) == (want, want_n, sum(m.nbytes for m in want))
            # write-back: the history is the previous masked list plus the new messages
            wb_hist = wb_hist + full[prev:c]
            out, n, nbytes = wb.mask(wb_hist)
            want, want_n = mask_observations(wb_hist, keep, placeholder, window_unit=unit)
            assert (list(out), n, nbytes) == (want, want_n, sum(m.nbytes for m in want))
            if n:
                wb_hist = list(out)
            prev = c
        # a history that is neither extension starts over
        out, n, _ = view.mask(full[: cuts[0]])
        assert (list(out), n) == mask_observations(full[: cuts[0]], keep, placeholder, window_unit=unit)


def _tool_history(rng: random.Random, n: int, placeholder: str) -> list[Message]:
    """Tool uses of two tools with parallel calls, reused ids, orphans and short results."""
    msgs = [Message("system", "s"), Message("user", "task")]
    for t in range(n):
        ids = [rng.choice(["call_0", f"c{t}", f"c{t}b", "x"]) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
        calls = tuple(
            ToolCall(i, rng.choice(["run", "read"]), rng.choice(["{}", '{"p": 1}', '{"cmd": "ls -la"}'])) for i in ids
        )
        msgs.append(Message("assistant", f"a{t}", calls))
        for i in ids + ([rng.choice(["orphan", "call_0"])] if rng.random() < 0.1 else []):
            body = rng.choice([placeholder, "ok", "\n".join(f"out {t} {k}" for k in range(rng.randint(1, 9)))])
            msgs.append(Message("tool", body, (), i))
    return msgs


@pytest.mark.parametrize("inputs", [False, True, ("read",)])
@pytest.mark.parametrize("exclude", [(), ("run",)])
@pytest.mark.parametrize("keep", [0, 2, 5])
def test_incremental_clearing_equals_clearing_the_whole_history(
    inputs: bool | tuple[str, ...], exclude: tuple[str, ...], keep: int
) -> None:
    from h9eval.compaction.policies.clear_tool_uses import CLEAR_PLACEHOLDER, IncrementalClearing, clear_tool_uses

    kw = dict(keep_tool_uses=keep, exclude_tools=exclude, clear_tool_inputs=inputs, placeholder=CLEAR_PLACEHOLDER)
    for seed in range(5):
        rng = random.Random(seed)
        full = _tool_history(rng, 40, CLEAR_PLACEHOLDER)
        cuts = sorted(rng.sample(range(3, len(full) + 1), 15))
        view, wb = IncrementalClearing(**kw), IncrementalClearing(**kw)  # type: ignore[arg-type]
        wb_hist: list[Message] = []
        prev = 0
        for c in cuts:
            out, n = view.update(full[:c])
            want, want_n = clear_tool_uses(full[:c], **kw)  # type: ignore[arg-type]
            assert (out, n, view.out_bytes, view.src_bytes) == (
                want,
                want_n,
                sum(m.nbytes for m in want),
                sum(m.nbytes for m in full[:c]),
            )
            wb_hist = wb_hist + full[prev:c]
            out, n = wb.update(wb_hist)
            want, want_n = clear_tool_uses(wb_hist, **kw)  # type: ignore[arg-type]
            assert (out, n, wb.out_bytes) == (want, want_n, sum(m.nbytes for m in want))
            if n and rng.random() < 0.8:  # written back (or, sometimes, not)
                wb_hist = list(out)
            prev = c
        out, n = view.update(full[: cuts[0]])  # neither extension: starts over
        assert (out, n) == clear_tool_uses(full[: cuts[0]], **kw)  # type: ignore[arg-type]


def _budget_compact_harness9(msgs: list[Message], budget: int, k: int) -> list[Message]:
    """TokenBudgetCompactor.Compact as harness9 writes it: every head end from the longest down."""
    from h9eval.compaction.repair import repair_tool_pairs

    if not msgs or sum(m.nbytes for m in msgs) // 4 <= budget or msgs[0].role != "system" or len(msgs) - 1 <= k:
        return list(msgs)
    rest, tail = msgs[1:], msgs[len(msgs) - k :]
    for head_end in range(len(rest) - k, 0, -1):
        cand = [msgs[0], *rest[:head_end], *tail]
        if sum(m.nbytes for m in cand) // 4 <= budget:
            return repair_tool_pairs(cand)
    return repair_tool_pairs([msgs[0], *tail])


def test_budget_compact_by_bisection_equals_harness9s_loop() -> None:
    from h9eval.compaction.budget import budget_compact
    from h9eval.core.history import PrefixBytes

    for seed in range(8):
        rng = random.Random(seed)
        full = _tool_history(rng, 30, "x")
        sizes = PrefixBytes()
        for c in range(1, len(full) + 1):
            msgs = full[:c]
            total = sum(m.nbytes for m in msgs) // 4
            for budget in {1, max(1, total // 3), max(1, total - 5), total, total + 1}:
                for k in (1, 3, 6):
                    want = _budget_compact_harness9(msgs, budget, k)
                    assert budget_compact(msgs, budget, k) == want
                    assert budget_compact(msgs, budget, k, cum=sizes.update(msgs)) == want


def test_greedy_index_keeps_what_the_v3_walk_keeps() -> None:
    """The block-skipping emergency walk keeps the same messages as visiting every message, as
    the history grows, is rewritten (write-back) or replaced, with free (cost-0) messages,
    budgets below the anchor and histories of many blocks."""
    from h9eval.compaction.budget import GreedyIndex, force_anchor_greedy_v3

    for seed in range(6):
        rng = random.Random(seed)
        msgs = [Message("system", "s" * rng.randint(0, 40)), Message("user", "task " * rng.randint(0, 30))]
        for t in range(400):
            r = rng.random()
            if r < 0.2:
                msgs.append(Message("user", "ok"[: rng.randint(0, 2)]))  # free: fewer than 4 bytes
            elif r < 0.5:
                msgs.append(Message("assistant", "", (ToolCall(f"c{t}", "run", "{}"),)))
                msgs.append(Message("tool", "x" * rng.choice([1, 10, 200, 5_000, 40_000]), (), f"c{t}"))
            else:
                msgs.append(Message("assistant", "y" * rng.randint(0, 300)))
        index = GreedyIndex()
        hist: list[Message] = []
        for c in range(3, len(msgs), 7):
            hist = hist + msgs[len(hist) : c] if rng.random() < 0.8 else msgs[:c]
            for budget in (0, 1, 50, 2_000, 20_000, 10**9):
                assert force_anchor_greedy_v3(hist, budget, index=index) == force_anchor_greedy_v3(hist, budget), (
                    seed,
                    c,
                    budget,
                )
            if rng.random() < 0.2:  # a write-back: the emergency view becomes the history
                hist = force_anchor_greedy_v3(hist, 2_000)
                msgs = [*hist, *msgs[c:]]


@pytest.mark.parametrize("kind", ["observation_masking", "clear_tool_uses"])
def test_kept_prefix_hint_is_the_common_prefix(kind: str) -> None:
    """A policy's ``kept_prefix`` hint, which lets a write-back skip comparing the lists, is the
    number of leading messages its view shares with its input, in both history modes."""
    from h9eval.compaction.policies import make_policy
    from h9eval.core.history import common_prefix_len

    params = (
        {"keep_recent_turns": 2}
        if kind == "observation_masking"
        else {"trigger_tokens": 40, "keep_tool_uses": 2, "clear_tool_inputs": True}
    )
    for seed in range(4):
        rng = random.Random(seed)
        full = _tool_history(rng, 60, "<MASKED>")
        for write_back in (False, True):
            run = make_policy(kind, **params).start()
            hist: list[Message] = []
            prev = 0
            for c in sorted(rng.sample(range(3, len(full) + 1), 25)):
                hist = hist + full[prev:c] if write_back else full[:c]
                prev = c
                comp = run.compact(hist)
                assert comp.kept_prefix == common_prefix_len(hist, comp.view), (seed, write_back, c)
                if write_back and list(comp.view) != hist:
                    hist = list(comp.view)


def test_the_history_estimate_follows_the_history_whatever_is_reused() -> None:
    """A history passed again with messages appended is summed from the previous count; any
    change to the earlier messages (same first and last objects, another middle, or equal
    copies) gives harness9's estimate of the whole list, as does a shorter history."""
    from h9eval.core.tokens import estimate_tokens

    rng = random.Random(3)
    pool = [Message(rng.choice(["user", "assistant"]), "x" * rng.randint(1, 900)) for _ in range(40)]
    run = ProgressiveCompactor(context_window_tokens=10_000_000).start(CompactionEnv(clock=LogicalClock(), seed=1))
    hist = [Message("system", "s"), *pool[:5]]
    cases = []
    for i in range(5, 40):
        hist.append(pool[i])
        cases.append(list(hist))
    changed = list(hist)
    changed[7] = Message("user", "y" * 5000)  # first and last objects unchanged
    cases += [changed, [Message(m.role, m.content) for m in changed], hist[:10], list(hist)]
    for h in cases:
        rec = run.compact(h).record
        assert rec is not None and rec.tier == 0
        assert rec.tokens_before == rec.tokens_after == estimate_tokens(h) and rec.msgs_after == len(h)


def test_the_none_tier_shortcut_records_what_the_full_path_records() -> None:
    """Below the warn tier the default policy returns its input and a record without the tier
    machinery; an option that acts there (anti-thrash) takes the full path: same views and records."""
    msgs = [Message("system", "s"), *(Message("user", f"m{i} " * 30) for i in range(12))]
    plain = ProgressiveCompactor(context_window_tokens=100_000).start(CompactionEnv(clock=LogicalClock(), seed=1))
    full = ProgressiveCompactor(context_window_tokens=100_000, anti_thrash_frac=0.5).start(
        CompactionEnv(clock=LogicalClock(), seed=1)
    )
    assert plain._plain and not full._plain
    for n in (1, 5, 13):
        a, b = plain.compact(msgs[:n]), full.compact(msgs[:n])
        assert a.view == b.view == tuple(msgs[:n]) and a.record == b.record
