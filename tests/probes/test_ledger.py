"""The loss ledger: typed items, the state rule (each clause killed by a test), survival curves
against an independent computation, the controls, the diff page and the calibration table."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from h9eval.analysis.ledger import CLIFF_SURVIVAL, cliff_rounds, survival_curves
from h9eval.compaction.anchors import COMPACTION_MARKER
from h9eval.core.messages import Message
from h9eval.probes.calibration import calibration_table
from h9eval.probes.items import ITEM_TYPES, Item, task_items, unavailable_types
from h9eval.probes.ledger import LedgerEvent, item_state, ledger_rows, rendered_view
from h9eval.runs.run import run_task
from h9eval.tasks.synthetic import generate


@pytest.fixture(scope="module")
def task():  # type: ignore[no-untyped-def]
    return generate("medium", seed=1)


def _item(value: str, *, kind: str = "fact", variants: tuple[str, ...] = (), stale: tuple[str, ...] = ()) -> Item:
    return Item(item_id="x", item_type=kind, value=value, variants=variants, introduced_at=0, stale_values=stale)


def _state(value: str, text: str, **kw: object) -> str:
    return item_state(_item(value, **kw), rendered_view([Message("assistant", text)]))[0]  # type: ignore[arg-type]


def test_items_are_typed_from_the_ground_truth(task) -> None:  # type: ignore[no-untyped-def]
    items = task_items(task)
    kinds = {i.item_type for i in items}
    assert kinds <= set(ITEM_TYPES)
    # the synthetic generator plants every type: rules given early, values updated later, failed approaches
    assert {"goal", "safety_rule", "user_preference", "superseded_value", "failed_approach", "artifact"} <= kinds
    rule = next(i for i in items if i.item_type == "safety_rule")
    question = next(f.question for f in task.facts if f.fact_id == rule.item_id)
    assert any(w in f"{question} {rule.text}".lower() for w in ("never", "must not", "do not", "don't"))
    sup = next(i for i in items if i.item_type == "superseded_value")
    assert sup.stale_values and sup.value not in sup.stale_values
    assert len({i.item_id for i in items}) == len(items)


def test_recorded_sessions_say_which_types_they_cannot_have(shared: Path) -> None:
    from h9eval.tasks import load_tasks_from_spec

    t = load_tasks_from_spec(str(shared / "data/recorded/claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"))[0]
    missing = unavailable_types(t)
    assert "safety_rule" in missing and "user_preference" in missing and "artifact" not in missing


@pytest.mark.parametrize(
    ("value", "text", "want"),
    [
        ("src/ingest/metrics.py", "we edited src/ingest/metrics.py today", "PRESERVED"),
        ("src/ingest/metrics.py", "we edited metrics.py today", "DEGRADED"),  # file name without its path
        ("HOOL-6493", "ticket 6493 is open", "DEGRADED"),  # digits without their prefix
        ("100 characters", "lines up to 100", "DEGRADED"),  # a number without its unit
        ("ruff format", "use Ruff Format", "DEGRADED"),  # another case
        ("HOOL-6493", "ticket HOOL-64930 is open", "LOST"),  # glued digits are another value
        ("third_party/", "remember to follow the rules", "LOST"),  # generic text never passes
        ("enable_manifest_v2", "flag ENABLE_MANIFEST_V2 is set", "DEGRADED"),  # normalised match only
        ("enable_manifest_v2", "flag enable_manifest_v2_old", "LOST"),  # glued: another identifier
    ],
)
def test_the_state_rule_clause_by_clause(value: str, text: str, want: str) -> None:
    assert _state(value, text) == want


def test_stale_when_the_old_value_shows_and_the_current_does_not() -> None:
    assert _state("ruff format", "Formatter: yapf (as agreed)", stale=("yapf",)) == "STALE"
    assert _state("ruff format", "Formatter: yapf, now ruff format", stale=("yapf",)) == "PRESERVED"
    assert _state("ruff format", "nothing here", stale=("yapf",)) == "LOST"


def test_where_an_item_survived() -> None:
    summary = f"{COMPACTION_MARKER}\n## Anchors\n### Key Decisions\n- keep MIN_WINDOW_SIZE\n## Summary\nuse yapf"
    view = rendered_view(
        [
            Message("system", "sys"),
            Message("user", "task text"),
            Message("user", summary),
            Message("tool", "[offloaded: x.txt | 3 行 / 9 bytes]\nHOOL-1 preview", tool_call_id="c"),
            Message("assistant", "run tests for HOOL-2"),
        ]
    )
    assert item_state(_item("MIN_WINDOW_SIZE"), view) == ("PRESERVED", "anchor:key_decision")
    assert item_state(_item("yapf"), view) == ("PRESERVED", "summary")
    assert item_state(_item("HOOL-1"), view) == ("PRESERVED", "placeholder")
    assert item_state(_item("HOOL-2"), view) == ("PRESERVED", "tail")
    assert item_state(_item("task"), view) == ("PRESERVED", "task")


def _scrub(messages: tuple[Message, ...], values: list[str]) -> list[Message]:
    out = []
    for m in messages:
        c = m.content
        for v in values:
            c = c.replace(v, "[removed]")
        out.append(replace(m, content=c))
    return out


def test_a_view_without_exactly_the_constraints_shows_them_lost_and_nothing_else(task) -> None:  # type: ignore[no-untyped-def]
    items = task_items(task)
    rules = [i for i in items if i.item_type in ("safety_rule", "side_constraint")]
    assert rules
    end = len(task.messages) - 1
    full = ledger_rows(
        task,
        [LedgerEvent(basis="fill", round=1, call_index=0, message_index=end, tier_name="x", view=task.messages)],
        run_id="r",
    )
    scrubbed = ledger_rows(
        task,
        [
            LedgerEvent(
                basis="fill",
                round=1,
                call_index=0,
                message_index=end,
                tier_name="x",
                view=_scrub(task.messages, [i.value for i in rules]),
            )
        ],
        run_id="r",
    )
    before = {r["item_id"]: r["state"] for r in full}
    after = {r["item_id"]: r["state"] for r in scrubbed}
    changed = {k for k in after if after[k] != before[k]}
    rule_ids = {i.item_id for i in rules if before.get(i.item_id) == "PRESERVED"}
    assert rule_ids and changed == rule_ids
    # LOST, or DEGRADED where a part of the value survives elsewhere in the transcript (a module
    # path's words): the stated rule; at least one rule is gone without a trace
    assert all(after[k] in ("LOST", "DEGRADED") for k in rule_ids)
    assert sum(after[k] == "LOST" for k in rule_ids) >= len(rule_ids) - 1


def test_survival_curves_match_an_independent_computation() -> None:
    rows = []
    # two tasks, two rounds; task t1 keeps 2 of 4 goals at round 1 and 1 of 4 at round 2, t2 keeps 1/2 then 0/2
    for task_id, states in (
        ("t1", [["PRESERVED"] * 2 + ["LOST"] * 2, ["PRESERVED"] + ["LOST"] * 3]),
        ("t2", [["PRESERVED", "DEGRADED"], ["LOST", "STALE"]]),
    ):
        for rnd, st in enumerate(states, start=1):
            for k, s in enumerate(st):
                rows.append(
                    {
                        "run_id": f"{task_id}-r",
                        "task_id": task_id,
                        "basis": "fill",
                        "round": rnd,
                        "item_id": f"i{k}",
                        "item_type": "goal",
                        "state": s,
                        "pinned": False,
                    }
                )
    rows.append({**rows[0], "item_id": "pinned", "pinned": True, "state": "LOST"})  # left out of every curve
    rows.append({**rows[0], "basis": "compaction", "state": "LOST"})  # another basis
    ledger = pd.DataFrame(rows)
    runs = pd.DataFrame(
        {"run_id": ["t1-r", "t2-r"], "policy_kind": "p", "policy_name": "p", "params_hash": "h", "history_mode": "view"}
    )
    c = survival_curves(ledger, runs).set_index("round")
    assert c.loc[1, "survival"] == pytest.approx((2 / 4 + 1 / 2) / 2)  # the mean of per-task shares
    assert c.loc[2, "survival"] == pytest.approx((1 / 4 + 0) / 2)
    assert c.loc[2, "stale"] == pytest.approx((0 + 1 / 2) / 2) and c.loc[1, "degraded"] == pytest.approx(0.25)
    assert list(c["n_tasks"]) == [2, 2] and list(c["n_items"]) == [6, 6]
    cliff = cliff_rounds(c.reset_index())
    assert int(cliff["cliff_round"].iloc[0]) == 2 and CLIFF_SURVIVAL == 0.5  # 0.5 is not below 0.5; 0.125 is


def test_controls_keep_all_flat_at_one_and_drop_all_at_zero() -> None:
    res = []
    for pol in ("keep_all", "drop_all"):
        res += run_task("synthetic:small:3", pol, window=6000)
    ledger = pd.concat([r.ledger for r in res])
    runs = pd.DataFrame(
        {
            "run_id": [r.run_id for r in res],
            "policy_kind": [r.policy_kind for r in res],
            "policy_name": [r.policy_kind for r in res],
            "params_hash": "h",
            "history_mode": "view",
        }
    )
    c = survival_curves(ledger, runs)
    keep, drop = c[c["label"] == "keep_all"], c[c["label"] == "drop_all"]
    assert len(keep) >= 3 and len(drop) >= 3  # several fill rounds were reached
    assert (keep["survival"] == 1.0).all() and (drop["survival"] == 0.0).all()
    assert not ledger[(ledger["basis"] == "compaction") & (ledger["run_id"] == res[0].run_id)].shape[0]


def test_run_and_sweep_store_the_ledger_and_the_page_shows_a_round(tmp_path: Path) -> None:
    from h9eval.results.store import load_results
    from h9eval.sweeps.sweep import sweep

    out = tmp_path / "run"
    [r] = run_task("synthetic:small:0", "progressive", window=9000, out_dir=out)
    stored = pd.read_parquet(out / "ledger.parquet")
    assert len(stored) == len(r.ledger) > 0 and set(stored["state"]) <= {"PRESERVED", "DEGRADED", "STALE", "LOST"}
    p = subprocess.run(
        [sys.executable, "-m", "h9eval", "ledger", str(out)], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr
    page = (out / "ledger.html").read_text(encoding="utf-8")
    assert "Round 1:" in page and "Left the view" in page
    spec = {
        "name": "led",
        "tasks": ["synthetic:small:0"],
        "policies": [{"kind": "progressive", "params": {"context_window_tokens": 9000}}],
    }
    s = sweep(spec, out_dir=tmp_path / "sw", workers=0, progress=False)
    res = load_results(s.out_dir)
    assert len(res.ledger) == len(r.ledger) and res.ledger["run_id"].nunique() == 1
    rid = res.runs["run_id"].iloc[0]
    p = subprocess.run(
        [sys.executable, "-m", "h9eval", "ledger", str(s.out_dir), "--run-id", rid],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    bad = subprocess.run([sys.executable, "-m", "h9eval", "ledger", str(s.out_dir)], capture_output=True, text=True)
    assert bad.returncode == 2 and "--run-id" in bad.stderr and "Traceback" not in bad.stderr


def test_calibration_against_the_real_claude_code_summaries(shared: Path) -> None:
    t = calibration_table([shared / "data/recorded/claude-code"]).set_index("item_type")
    assert t.loc["all", "n_sessions"] == 2 and t.loc["all", "n_items"] > 20
    assert 0 <= t.loc["all", "real"] <= 1
    assert t.loc["artifact", "gap_offline"] == pytest.approx(t.loc["artifact", "offline"] - t.loc["artifact", "real"])
    # the real summary names every edited file: the stand-ins keep fewer (pessimistic on artifacts)
    assert t.loc["artifact", "real"] > t.loc["artifact", "offline"]
    assert json.dumps(t.reset_index().to_dict("records"))  # a plain table a README can print


def _naive_next_use(texts: list[str], values: tuple[str, ...], start: int) -> int | None:
    """The rule as written: the first call at or after ``start`` whose own text holds a bounded value."""
    from h9eval.probes.ledger import _bounded

    return next((k for k in range(start, len(texts)) if any(_bounded(texts[k], v) >= 0 for v in values)), None)


def test_the_use_index_finds_the_calls_a_scan_of_each_call_finds() -> None:
    from h9eval.probes.ledger import _UseIndex

    texts = [
        "edit HOOL-12 now",  # HOOL-1 glued here: not a use
        "HOOL-1",  # the whole text: bounded at both ends
        "see a\nb",  # "a\nb" lies within one call
        "tail a",  # "a\nb" across this call and the next is no use of either
        "b then HOOL-1x and _HOOL-1",  # glued on one side each
        "",
        "x HOOL-1 y; a\nb",
    ]
    index = _UseIndex(texts)
    for values in (("HOOL-1",), ("a\nb",), ("HOOL-12", "a\nb"), ("missing",), ("b",), ("a",)):
        item = _item(values[0], variants=values[1:])
        for start in range(len(texts) + 1):
            assert index.first_from(item, start) == _naive_next_use(texts, values, start), (values, start)


def test_a_value_split_across_two_messages_is_not_located() -> None:
    # the whole-view search that rules values out must not let a match across a message boundary in
    view = rendered_view([Message("user", "tail of HOOL"), Message("assistant", "-7 starts here")])
    assert "HOOL\n" in view.joined or "HOOL" in view.joined
    assert view.location(("HOOL-7",)) is None
    view2 = rendered_view([Message("user", "x"), Message("assistant", "HOOL-7 here")])
    assert view2.location(("HOOL-7",)) == "tail"


def test_a_view_built_on_the_previous_round_judges_every_item_as_a_fresh_one() -> None:
    # views that grow, get rewritten, shrink and repeat, over messages whose texts put values at
    # the shared text's very end, glue them, split them across messages or hold them only when
    # normalised: the reused search results must give exactly the fresh view's states
    import random

    from h9eval.probes.ledger import _bounded, _Joined
    from h9eval.tasks.text import normalize

    rng = random.Random(7)
    pool = [
        Message("system", "sys HOOL-1"),
        Message("user", "task: keep src/app/main.py"),
        Message("assistant", "value HOOL-12 glued"),
        Message("tool", "ends with HOOL-1", tool_call_id="a"),
        Message("assistant", "x HOOL-1"),
        Message("user", "-9 begins; Hool 1 case"),
        Message("assistant", f"{COMPACTION_MARKER}\n## Anchors\n### Key Decisions\n- use main.py\n## Summary\nold 42"),
        Message("tool", "[offloaded: f.txt | 1 line / 3 bytes]\nrate 100 per second", tool_call_id="b"),
        Message("assistant", "the rate limit is 250 characters and retry three times"),
    ]
    items = [
        _item("HOOL-1"),
        _item("HOOL-12"),
        _item("HOOL-1\n-9"),
        _item("src/app/main.py"),
        _item("rate limit 100", stale=("HOOL-12",)),
        _item("retry three times", variants=("Retry 3",)),
        _item("hool 1"),
        _item("250 characters"),
        _item("no such value at all"),
        _item("42"),
    ]
    previous = None
    view: list[Message] = []
    for _ in range(300):
        move = rng.random()
        if move < 0.5 or not view:
            view = view + rng.sample(pool, rng.randint(1, 3))
        elif move < 0.7:
            view = view[: rng.randint(0, len(view))]
        elif move < 0.85:
            cut = rng.randint(0, len(view))
            view = view[:cut] + [Message("user", "rewritten HOOL-1 " + str(rng.random()))] + view[cut + 1 :]
        # else: the same view again
        built = rendered_view(view, previous)
        fresh = rendered_view(view)
        assert built.joined == fresh.joined and built.normalized == fresh.normalized
        assert fresh.normalized == normalize(fresh.joined)
        for item in items:
            assert item_state(item, built) == item_state(item, fresh), (item.value, len(view))
            for v in (item.value, *item.variants, *item.stale_values):
                assert built.find(v) == _bounded(built.joined, v), (v, len(view))
                assert built.find(v, space="message") == _Joined(built.texts).first_within(v), (v, len(view))
                nv = normalize(v)
                if nv:
                    assert built.find(nv, space="normalized") == _bounded(built.normalized, nv), (nv, len(view))
        previous = built


def test_reused_results_at_the_edge_of_the_shared_text() -> None:
    sys_, a, b = Message("system", "s"), Message("assistant", "x HOOL"), Message("user", "y")
    # a value ending in the joining newline is in no message, whether the next message follows or not
    for view in ([sys_, a, b], [sys_, a]):
        assert rendered_view(view).location(("HOOL\n",)) is None
        assert rendered_view(view, rendered_view([sys_, a, b])).location(("HOOL\n",)) is None
    # in the joined text it is there while a message follows, and gone when the view ends with ``a``
    # (a path's file name, the DEGRADED clause, ending in a newline)
    odd_path = _item("/q/HOOL\n")
    assert item_state(odd_path, rendered_view([sys_, a, b])) == ("DEGRADED", None)
    assert item_state(odd_path, rendered_view([sys_, a])) == ("LOST", None)
    both = rendered_view([sys_, a, b])
    assert item_state(odd_path, both) == ("DEGRADED", None)
    assert item_state(odd_path, rendered_view([sys_, a], both)) == ("LOST", None)
    # a match that begins in the shared text and ends in a new message (in the normalised text, where
    # a message's role follows the one before it): found although the previous view had none
    ho = Message("assistant", "x HO")
    before = rendered_view([sys_, ho, b])
    assert item_state(_item("HO user 9"), before) == ("LOST", None)
    after = rendered_view([sys_, ho, Message("user", "9 z")], before)
    assert item_state(_item("HO user 9"), after) == ("DEGRADED", None)
    # a match the previous view found right at the end of the shared text stays found
    shared_end = rendered_view([sys_, a], rendered_view([sys_, Message("assistant", "x HOOL"), b]))
    assert item_state(_item("HOOL"), shared_end) == ("PRESERVED", "tail")


def test_the_use_index_ignores_a_match_ending_in_the_joining_newline() -> None:
    from h9eval.probes.ledger import _UseIndex

    assert _UseIndex(["x HOOL", "y"]).first_from(_item("HOOL\n"), 0) is None


def test_the_word_run_shortcut_never_rules_out_a_bounded_match() -> None:
    # the shortcut says "absent" only when a run a bounded match must show whole is no run of the
    # text; against the plain search on values and texts built from characters at the edges of the
    # rule (underscores, digits, non-ASCII letters and digits, separators)
    import random

    from h9eval.probes.ledger import _anchored_runs, _bounded, _Joined

    assert _anchored_runs("HOOL-6493") == [("HOOL", 0), ("6493", 5)]
    assert _anchored_runs("_x-y") == [("y", 3)]  # a leading underscore is not checked: "_x" may be glued
    assert _anchored_runs("x-y_") == [("x", 0)]
    assert _anchored_runs("--") == []
    rng = random.Random(3)
    alphabet = ["a", "b", "_", "1", "é", "²", "-", " ", ".", "/", "\n"]
    indexed = 0
    for n in range(6000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(1, 5))]
        msgs = [Message("user", t) for t in texts]
        # a view alone (the run set) and one built on two views of its first messages (the run index
        # once a view grew twice running)
        a = rng.randint(1, len(msgs))
        b = rng.randint(a, len(msgs))
        view = rendered_view(msgs) if n % 2 else rendered_view(msgs, rendered_view(msgs[:b], rendered_view(msgs[:a])))
        indexed += view._indexed
        assert view.find(value) == _bounded(view.joined, value), (value, texts)
        assert view.find(value, space="message") == _Joined(view.texts).first_within(value), (value, texts)
        assert view.find(value, space="normalized") == _bounded(view.normalized, value), (value, texts)
    assert indexed > 500  # the index answered many of them


def test_a_view_whose_index_the_next_one_took_over_still_answers_alone() -> None:
    # a view that grew takes over its previous view's run index and extends it; the previous view,
    # asked again, must answer from its own text (not from runs of messages it does not have)
    from h9eval.probes.ledger import _bounded, _Joined

    first = [Message("system", "s"), Message("user", "keep HOOL-1 and more text"), Message("assistant", "x")]
    v0 = rendered_view(first, rendered_view(first[:2]))
    v1 = rendered_view([*first, Message("assistant", "y")], v0)  # a view that grew twice running
    assert v1.find("HOOL-1") >= 0  # builds v1's index
    assert v1._postings[0] is not None
    late = [Message("tool", "late ZORP-9 here", tool_call_id="a"), Message("assistant", "again ZORP-9")]
    v2 = rendered_view([*v1.messages, *late], v1)  # a run new in two messages: the first one counts
    assert v2.find("ZORP-9") == _bounded(v2.joined, "ZORP-9") > 0
    assert v2.find("ZORP-9", space="message") == _Joined(v2.texts).first_within("ZORP-9") > 0
    for v in ("ZORP-9", "late", "HOOL-1", "x"):
        assert v1.find(v) == _bounded(v1.joined, v), v
        assert v2.find(v) == _bounded(v2.joined, v), v
        assert v1.find(v, space="message") == _Joined(v1.texts).first_within(v), v
