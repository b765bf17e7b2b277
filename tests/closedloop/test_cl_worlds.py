"""Each closed-loop world's tools and check() semantics, the registry and parameter validation."""

from __future__ import annotations

import pytest

from h9eval.closedloop.worlds import make_world, parse_world_spec, world_registry
from h9eval.closedloop.worlds.mini_repo import MiniRepo
from h9eval.core.errors import ConfigError


def test_registry_and_bad_names() -> None:
    assert set(world_registry()) >= {"fact_chain", "mini_repo", "ticket_queue"}
    with pytest.raises(ConfigError, match="did you mean 'fact_chain'"):
        make_world("fact_chian")
    with pytest.raises(ConfigError, match="did you mean 'hops'"):
        make_world("fact_chain", hosp=3)
    with pytest.raises(ConfigError, match="FactChainParams.hops must be between 1 and 200, got 0"):
        make_world("fact_chain", hops=0)
    with pytest.raises(ConfigError, match="world 'fact_chain': hops must be an integer, got '3'"):
        make_world("fact_chain", hops="3")
    with pytest.raises(ConfigError, match="fact_position must be one of head, tail"):
        make_world("mini_repo", fact_position="middle")
    with pytest.raises(ConfigError, match="correction_after must be between 1 and n_tickets-1"):
        make_world("ticket_queue", n_tickets=3, correction_after=3)
    assert parse_world_spec("mini_repo:7") == ("mini_repo", 7)
    with pytest.raises(ConfigError, match="KIND:SEED"):
        parse_world_spec("mini_repo")
    w = make_world("fact_chain")
    with pytest.raises(ConfigError, match="call reset"):
        w.step("lookup", {"key": "x"})


def test_reset_is_seeded_and_padding_exact() -> None:
    a, b, c = (make_world("fact_chain", padding_bytes=777, padding_jitter_frac=0.0) for _ in range(3))
    a.reset(5), b.reset(5), c.reset(6)
    assert a.task_prompt == b.task_prompt != c.task_prompt
    k0 = a._state["keys"][0]
    out = a.step("lookup", {"key": k0})
    assert out == b.step("lookup", {"key": k0})
    assert len(out.encode()) == len(out.split("\n", 1)[0].encode()) + 1 + 777
    assert out.startswith(f"lookup {k0} -> ")
    jit = make_world("fact_chain", hops=5, padding_bytes=1000, padding_jitter_frac=0.5)
    jit.reset(5)
    sizes = [len(jit.step("lookup", {"key": k}).encode()) for k in jit._state["keys"][:-1]]
    assert len(set(sizes)) > 1 and all(500 <= n - 32 <= 1500 for n in sizes)
    tail = make_world("fact_chain", padding_bytes=300, fact_position="tail")
    tail.reset(5)
    assert tail.step("lookup", {"key": k0}).split("\n")[-1].startswith(f"lookup {k0} -> ")


def test_fact_chain_check() -> None:
    w = make_world("fact_chain", hops=2, gap_steps=1, padding_bytes=0)
    w.reset(1)
    keys, sec = w._state["keys"], w._state["sections"][0]
    assert w.step("lookup", {"key": "K-00000000"}).startswith("Error: no entry")
    assert w.step("lookup", {"key": keys[0]}) == f"lookup {keys[0]} -> {keys[1]}"
    w.step("lookup", {"key": keys[1]})
    snap = w.snapshot()
    # submitting before the audit is a violation, even with the right values
    w.step("submit", {"answer": keys[2], "receipt": keys[1]})
    o = w.check()
    assert not o.success and [v.rule for v in o.violations] == ["audit_before_submit"]
    w.restore(snap)
    w.step("audit", {"section": sec})
    w.step("submit", {"answer": keys[2], "receipt": keys[0]})  # wrong receipt
    o = w.check()
    assert not o.success and o.failure == "wrong receipt" and o.wrong_side_effects == 1
    w.restore(snap)
    w.step("audit", {"section": sec})
    assert w.step("submit", {"answer": keys[2], "receipt": keys[1]}) == "Submission recorded."
    o = w.check()
    assert o.success and o.subgoals_reached == o.subgoals_total == 4 and o.finished
    assert w.step("submit", {"answer": keys[2], "receipt": keys[1]}).startswith("Error")
    o = w.check()
    assert not o.success and o.duplicate_side_effects == 1
    assert [e.kind for e in w.ledger] == ["read", "read", "read", "read", "side_effect", "side_effect"]
    assert w.step("missing_tool", {}).startswith("Error: unknown tool")
    assert w.step("lookup", {}).startswith("Error: missing argument 'key'")


def test_mini_repo_check_rules_fix_and_artifact_trail() -> None:
    w = make_world("mini_repo", n_bugs=2, padding_bytes=0)
    w.reset(2)
    assert isinstance(w, MiniRepo)
    bugs = w._state["bugs"]
    assert "Never edit files under vendor/" in w.step("read_file", {"path": "RULES.md"})
    out = w.step("run_tests", {})
    for b in bugs:
        assert (
            f"FAILED tests/test_{b['module']}.py::test_compute_{b['module']} - AssertionError: compute_{b['module']}() "
            f"returned '{b['bad']}', expected '{b['good']}'" in out
        )
    assert out.endswith("2 failed, 0 passed")
    hits = w.step("search", {"query": f"compute_{bugs[0]['module']}"}).split("\n")
    assert hits[1].startswith("vendor/") and hits[2].startswith("src/")  # the decoy first
    w.step("edit", {"path": f"vendor/{bugs[0]['module']}.py", "old": bugs[0]["bad"], "new": bugs[0]["good"]})
    for b in bugs:
        assert w.step("edit", {"path": f"src/{b['module']}.py", "old": b["bad"], "new": b["good"]}).startswith("Edited")
    assert w.step("edit", {"path": f"src/{bugs[0]['module']}.py", "old": bugs[0]["bad"], "new": "x"}).startswith(
        "Error: old text not found"
    )
    w.step("commit", {"files": [f"src/{b['module']}.py" for b in bugs]})  # no test run, vendor file missing
    o = w.check()
    assert not o.success
    assert sorted(v.rule for v in o.violations) == ["grep_not_search", "no_vendor_edits", "tests_before_commit"]
    assert {g.name: g.reached for g in o.subgoals}["artifact_trail"] is False  # the vendor edit is a modification too
    assert all(r for n, r in ((g.name, g.reached) for g in o.subgoals) if n.startswith("fix:"))

    w.reset(2)
    w.step("read_file", {"path": "RULES.md"})
    for b in bugs:
        w.step("edit", {"path": f"src/{b['module']}.py", "old": b["bad"], "new": b["good"]})
    assert w.step("run_tests", {}).startswith("all 2 tests passed")
    assert w.step("commit", {"files": sorted(f"src/{b['module']}.py" for b in bugs)}).startswith("Committed 2")
    o = w.check()
    assert o.success and not o.violations and o.subgoals_reached == o.subgoals_total


def test_ticket_queue_exactly_once_refer_back_and_correction() -> None:
    w = make_world("ticket_queue", n_tickets=4, correction_after=2, padding_bytes=0)
    w.reset(3)
    t = w._state["tickets"]
    assert w.interjection() is None
    assert w.step("next_ticket", {}).startswith(
        f"Ticket {t[0]['id']}: please refund order {t[0]['order']}, amount {t[0]['amount']}."
    )
    rid = w.step("refund", {"order_id": t[0]["order"], "amount": t[0]["amount"]}).split()[1]
    w.step("close_ticket", {"ticket_id": t[0]["id"]})
    w.step("refund", {"order_id": t[1]["order"], "amount": t[1]["amount"]})
    w.step("close_ticket", {"ticket_id": t[1]["id"]})
    correction = w.interjection()
    assert correction is not None and "escalate(ticket_id) instead of refund" in correction
    assert w.interjection() is None  # delivered once
    snap = w.snapshot()
    # a refund after the correction is a violation; a second refund of ticket 1 a duplicate
    w.step("refund", {"order_id": t[2]["order"], "amount": t[2]["amount"]})
    w.step("refund", {"order_id": t[0]["order"], "amount": t[0]["amount"]})
    o = w.check()
    assert (
        [v.rule for v in o.violations] == ["escalate_after_correction"]
        and o.duplicate_side_effects == 1
        and not o.success
    )
    w.restore(snap)
    w.step("escalate", {"ticket_id": t[2]["id"]})
    w.step("close_ticket", {"ticket_id": t[2]["id"]})
    assert f"the customer of ticket {t[0]['id']} asks" in w.step("next_ticket", {})
    w.step("reply", {"ticket_id": t[3]["id"], "refund_id": rid})
    w.step("close_ticket", {"ticket_id": t[3]["id"]})
    assert w.step("next_ticket", {}) == "Queue empty: all tickets are closed."
    o = w.check()
    assert o.success and o.finished and o.duplicate_side_effects == 0
    assert w.step("close_ticket", {"ticket_id": t[3]["id"]}).startswith("Error")
    assert w.check().duplicate_side_effects == 1
    truth = {f.fact_id: f.value for f in w.ground_truth()}
    assert truth["first_refund_id"] == rid


def test_todo_items_must_be_marked() -> None:
    w = make_world("fact_chain", hops=1, gap_steps=0, padding_bytes=0, todo_items=2)
    w.reset(4)
    items = w._state["todo"]
    assert all(i in w.task_prompt for i in items) and "mark_todo" in [s["name"] for s in w.tool_specs]
    k = w._state["keys"]
    w.step("lookup", {"key": k[0]})
    w.step("mark_todo", {"item": items[0]})
    w.step("submit", {"answer": k[1], "receipt": k[1]})
    o = w.check()
    assert not o.success and o.failure == f"subgoal todo:{items[1]} not reached"
    w.step("mark_todo", {"item": items[1]})
    assert w.check().success
    assert w.step("mark_todo", {"item": "TD-00000000"}).startswith("Error")
