"""Probe quality: the placebo control, pinned answers, one probe per question, recorded facts
that only the right answer passes, generic key terms, and the llm scorer's persistent cache
and audit table. Each test states a value that a regression would change."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from h9eval.core.errors import ConfigError
from h9eval.core.messages import ToolCall, assistant, system, tool_result, user
from h9eval.probes import (
    AUDIT_COLUMNS,
    PLACEBO_COLUMNS,
    PLACEBO_MAX_PASS_RATE,
    LLMScorer,
    PromptCache,
    TextIndex,
    drift_table,
    judge_agreement,
    judge_agreement_table,
    placebo_by_kind,
    placebo_partners,
    placebo_results,
    placebo_table,
    probe_view,
    probes_for,
    summarize_drift,
    with_placebo,
)
from h9eval.probes.placebo import (
    DEFAULT_PLACEBO_PARTNERS,
    PLACEBO_FALSE_PASS_RATE,
    lifetime_probes,
    placebo_excluded,
    sweep_placebo,
    task_family,
)
from h9eval.probes.probe import FINAL_KEY_TERMS, Probe, answer_found
from h9eval.probes.recall import recall_score
from h9eval.tasks.keyterms import filter_key_terms, is_generic_term
from h9eval.tasks.model import AnchorTruth, Fact, Intent, IntentChange, Task, TaskSource
from h9eval.tasks.recorded._common import (
    Transcript,
    derive_facts,
    is_generic_error,
    is_scratch_path,
)
from h9eval.tasks.synthetic import generate

# ---------------------------------------------------------------------------------------------
# Two tiny unrelated tasks whose placebo rates are computed by hand.


def task_a() -> Task:
    msgs = (
        system("You are a coding agent."),
        user("Fix alpha_mod.py so that beta-77x stops crashing."),
        assistant("Reading.", [ToolCall("a1", "bash", '{"command": "cat alpha_mod.py"}')]),
        tool_result("a1", "PORT = 24077\nLEGACY = 'vendor/legacy/'"),
        assistant("Done."),
    )
    return Task(
        task_id="A",
        source=TaskSource(kind="recorded"),
        messages=msgs,
        intent=Intent(statement=msgs[1].content, key_terms=("alpha_mod.py", "beta-77x")),
        facts=(
            Fact(fact_id="F1", question="port?", answer="24077", kind="derived", message_index=3),
            Fact(fact_id="F2", question="legacy dir?", answer="vendor/legacy/", kind="derived", message_index=3),
        ),
    )


def task_b() -> Task:
    msgs = (
        system("You are a coding agent."),
        user("Speed up gamma.py; alpha_mod.py is unrelated. The port is 24077 here too."),
        assistant("Done."),
    )
    return Task(
        task_id="B",
        source=TaskSource(kind="recorded"),
        messages=msgs,
        intent=Intent(statement=msgs[1].content, key_terms=("gamma.py",)),
        facts=(Fact(fact_id="G1", question="which file?", answer="gamma.py", kind="derived", message_index=1),),
    )


def test_placebo_rates_on_a_fixed_pair_equal_hand_computed_values() -> None:
    res = {(r.task_id, r.probe_id): r for r in placebo_results([task_b(), task_a()])}
    # A against B's history: intent finds alpha_mod.py, not beta-77x -> 1/2 = 0.5 >= 0.5: pass;
    # F1 "24077" is in B: pass; F2 "vendor/legacy/" is not: fail.
    assert {k: (r.n_partners, r.n_passed, r.placebo_rate, r.excluded) for k, r in res.items() if k[0] == "A"} == {
        ("A", "intent@0"): (1, 1, 1.0, True),
        ("A", "fact:F1"): (1, 1, 1.0, True),
        ("A", "fact:F2"): (1, 0, 0.0, False),
    }
    # B against A's history: gamma.py is nowhere in A.
    assert {k: r.placebo_rate for k, r in res.items() if k[0] == "B"} == {("B", "intent@0"): 0.0, ("B", "fact:G1"): 0.0}
    kinds = placebo_by_kind(placebo_table(res.values())).set_index("probe_kind")
    assert kinds.loc["derived_fact", "placebo_rate"] == pytest.approx(1 / 3)  # 1 pass in 3 scorings
    assert kinds.loc["intent", "placebo_rate"] == 0.5 and kinds.loc["intent", "n_excluded"] == 1
    assert tuple(placebo_table([task_a(), task_b()]).columns) == PLACEBO_COLUMNS


def test_placebo_pairing_is_seeded_deterministic_and_skips_the_same_family() -> None:
    def t(tid: str, seed: int | None = None) -> Task:
        kind = "synthetic" if seed is not None else "recorded"
        return Task(
            task_id=tid, source=TaskSource(kind=kind, seed=seed), messages=(user("x"),), intent=Intent(statement="x")
        )

    tasks = [
        t("cc:s1"),
        t("cc:s1/agent-x"),
        t("cc:s2"),
        t("synthetic-small-3", 3),
        t("synthetic-long-3", 3),
        t("m:1"),
        t("m:2"),
    ]
    assert task_family(tasks[1]) == task_family(tasks[0]) and task_family(tasks[3]) == task_family(tasks[4])
    p1 = placebo_partners(tasks, seed=5, n_partners=3)
    assert p1 == placebo_partners(list(reversed(tasks)), seed=5, n_partners=3)  # input order does not matter
    assert all(len(v) == 3 for v in p1.values())
    assert "cc:s1/agent-x" not in p1["cc:s1"] and "cc:s1" not in p1["cc:s1/agent-x"]
    assert "synthetic-long-3" not in p1["synthetic-small-3"]
    assert any(placebo_partners(tasks, seed=s, n_partners=3) != p1 for s in range(6, 12))
    with pytest.raises(ConfigError, match="n_partners"):
        placebo_partners(tasks, n_partners=0)
    with pytest.raises(ConfigError, match="distinct task ids"):
        placebo_partners([tasks[0], tasks[0]])


def test_placebo_fills_probe_rows_and_summaries_leave_excluded_probes_out() -> None:
    a = task_a()
    placebo = placebo_results([a, task_b()])
    end = len(a.messages) - 1
    rows = probe_view(a, a.messages, end, placebo=placebo)
    by_probe = {r["probe_id"]: r for r in rows if r["scope"] == "view"}
    assert by_probe["fact:F1"]["placebo_rate"] == 1.0 and by_probe["fact:F1"]["placebo_excluded"]
    assert by_probe["fact:F2"]["placebo_rate"] == 0.0 and not by_probe["fact:F2"]["placebo_excluded"]
    plain = probe_view(a, a.messages, end)
    assert all(math.isnan(r["placebo_rate"]) and not r["placebo_excluded"] for r in plain)
    filled = with_placebo(drift_table(plain), placebo_table(placebo))
    assert filled.loc[filled.probe_id == "fact:F1", "placebo_excluded"].all()
    view = summarize_drift(drift_table(rows)).set_index("scope").loc["view"]
    assert view["n_observations"] == 1 and view["n_placebo_excluded"] == 2  # only F2 is kept


# ---------------------------------------------------------------------------------------------
# pinned answers (synthetic key terms: the repository name is in the system prompt)


def test_synthetic_key_terms_in_the_system_prompt_leave_the_score_and_are_flagged() -> None:
    t = generate("small", 0)
    repo = t.intent.key_terms[0]
    assert repo in t.messages[0].content
    end = len(t.messages) - 1
    kt = next(p for p in probes_for(t, end) if p.kind == "key_terms")
    assert kt.pinned == (repo,) and repo not in kt.expected and kt.answer_pinned  # the rest is in the task message
    # drop_all's view when the last message is a tool result: the system message alone. The
    # repo name used to give it 1/3 of the key terms.
    rows = probe_view(t, [t.messages[0]], end)
    kt_row = next(r for r in rows if r["probe_kind"] == "key_terms" and r["scope"] == "view")
    assert kt_row["score"] == 0.0 and kt_row["answer_pinned"]
    facts = [r for r in rows if r["probe_kind"] == "fact" and r["answerable"]]
    assert facts and not any(r["answer_pinned"] for r in facts)


def test_a_probe_all_of_whose_terms_are_in_the_system_prompt_keeps_them_and_is_pinned() -> None:
    msgs = (system("Repo acme/tool. Branch main-77."), user("Do the thing in acme/tool."), assistant("ok"))
    t = Task(
        task_id="p",
        source=TaskSource(kind="recorded"),
        messages=msgs,
        intent=Intent(statement="x", key_terms=("acme/tool",)),
    )
    (intent,) = probes_for(t, 2)
    assert intent.expected == ("acme/tool",) and intent.pinned == () and intent.answer_pinned


# ---------------------------------------------------------------------------------------------
# one question, one probe


def test_synthetic_intent_probe_checks_the_whole_intent_in_force() -> None:
    t = generate("small", 0)
    (ch,) = t.intent.changes
    before = next(p for p in probes_for(t, ch.message_index - 1) if p.kind == "intent")
    after = next(p for p in probes_for(t, ch.message_index) if p.kind == "intent")
    assert ch.key_terms[0] not in before.expected
    # Not only the change's own term: the statement's terms (minus the pinned repo name) too.
    assert set(after.expected) == set(t.intent.key_terms[1:]) | set(ch.key_terms)
    # Before the change key_terms and intent are one question; after it, two.
    assert [p.kind for p in probes_for(t, ch.message_index - 1)].count("key_terms") == 0
    assert [p.kind for p in probes_for(t, ch.message_index)].count("key_terms") == 1


def test_synthetic_constraint_facts_are_not_probed_again_as_anchors() -> None:
    t = generate("small", 0)
    end = len(t.messages) - 1
    ps = probes_for(t, end, check_answerable=False)
    constraint_facts = [f for f in t.facts if f.kind == "constraint" and f.live_at(end)]
    assert constraint_facts and [a for a in t.anchors if a.kind == "constraint"]  # the task still has both
    fact_ids = {p.probe_id for p in ps if p.kind == "fact"}
    assert {f"fact:{f.fact_id}" for f in constraint_facts} <= fact_ids
    assert not [p for p in ps if p.kind == "constraint"]
    # An anchor that is not a fact's answer is still probed.
    extra = AnchorTruth(kind="constraint", message_index=1, text="never touch vendored code", key_terms=("vendored",))
    t2 = Task(
        task_id="t2", source=t.source, messages=t.messages, intent=t.intent, anchors=(*t.anchors, extra), facts=t.facts
    )
    assert len([p for p in probes_for(t2, end, check_answerable=False) if p.kind == "constraint"]) == 1


def test_identical_facts_are_probed_once() -> None:
    a = task_a()
    dup = Fact(fact_id="F9", question="port again?", answer="24077", kind="derived", message_index=3)
    t = Task(task_id="d", source=a.source, messages=a.messages, intent=a.intent, facts=(*a.facts, dup))
    ids = [p.probe_id for p in probes_for(t, 4)]
    assert "fact:F1" in ids and "fact:F9" not in ids


def test_unanswerable_key_term_probes_are_not_counted() -> None:
    a = task_a()
    t = Task(
        task_id="u",
        source=a.source,
        messages=a.messages,
        intent=Intent(
            statement="x",
            key_terms=("never-said-1",),
            changes=(IntentChange(message_index=3, statement="y", key_terms=("never-said-2",)),),
        ),
    )
    ps = probes_for(t, 4)
    assert [p.answerable for p in ps if p.kind in ("intent", "key_terms")] == [False, False]
    rows = probe_view(t, t.messages, 4)
    summ = summarize_drift(drift_table(rows)).set_index("scope").loc["view"]
    assert (
        summ["n_observations"] == 0 and math.isnan(summ["retention_intent"]) and math.isnan(summ["retention_key_terms"])
    )
    assert not lifetime_probes(t)  # no answerable probe: nothing to placebo-test either


# ---------------------------------------------------------------------------------------------
# ordinals


def test_ordinal_fact_needs_the_previous_file_before_it() -> None:
    p = Probe(
        probe_id="x",
        kind="derived_fact",
        question="2nd?",
        expected=("src/b.py",),
        message_index=0,
        scoring="answer",
        after=("src/a.py",),
    )
    assert answer_found(p, TextIndex.of("edited src/a.py, then src/b.py"))
    assert not answer_found(p, TextIndex.of("edited src/b.py"))  # cannot tell it was the 2nd
    assert not answer_found(p, TextIndex.of("edited src/b.py, later src/a.py"))
    assert answer_found(p, TextIndex.of("read src/b.py; edited src/a.py; edited src/b.py"))  # an occurrence after a
    msgs = (
        system("s"),
        user("task"),
        assistant("", [ToolCall("e1", "Edit", '{"file_path": "src/a.py"}')]),
        tool_result("e1", "ok"),
        assistant("", [ToolCall("e2", "Edit", '{"file_path": "src/b.py"}')]),
        tool_result("e2", "ok"),
    )
    tr = Transcript(messages=list(msgs))
    facts, _ = derive_facts(tr, None)
    t = Task(
        task_id="o",
        source=TaskSource(kind="recorded"),
        messages=msgs,
        intent=Intent(statement="task"),
        facts=tuple(facts),
    )
    second = next(p for p in probes_for(t, 5) if p.probe_id == "fact:edited_file_02")
    assert second.after == ("src/a.py", "a.py") and second.answerable
    assert recall_score(second, TextIndex.of("[tool call Edit] src/b.py")) == 0.0
    assert recall_score(second, TextIndex.of("Files: src/a.py, src/b.py")) == 1.0


# ---------------------------------------------------------------------------------------------
# recorded facts and key terms


def test_scratch_paths() -> None:
    assert is_scratch_path("reproduce.py", None) and is_scratch_path("/testbed/test_fix.py", None)
    assert is_scratch_path("/tmp/x/sphinx/verify_fix.py", "/tmp/x/sphinx")
    assert is_scratch_path("/home/u/.claude/plans/p.md", "/home/u/proj")  # outside the working directory
    assert not is_scratch_path("/tmp/x/sphinx/sphinx/ext/autodoc/typehints.py", "/tmp/x/sphinx")
    assert not is_scratch_path("django/contrib/admin/utils.py", None)
    assert not is_scratch_path("setup.py", None) and not is_scratch_path("/home/u/proj/mix.exs", "/home/u/proj")
    assert not is_scratch_path("README.md", None)


def _failure_transcript(outputs: list[tuple[str, int | None, bool]]) -> Transcript:
    tr = Transcript()
    tr.add(system("s"))
    tr.add_prompt(user("task"))
    for k, (text, rc, is_err) in enumerate(outputs):
        tr.add(assistant("", [ToolCall(f"c{k}", "bash", json.dumps({"command": f"run {k}"}))]))
        tr.add(tool_result(f"c{k}", text, is_error=is_err), returncode=rc)
    return tr


def test_failure_facts_need_the_specific_error_and_are_deduplicated() -> None:
    assert is_generic_error("TypeError") and is_generic_error("exit code 1") and is_generic_error("Exit code 128")
    assert is_generic_error("<tool_use_error>Sibling tool call errored</tool_use_error>")
    assert not is_generic_error("TypeError: required field 'lineno' missing")
    tr = _failure_transcript(
        [
            ("Traceback\nTypeError: bad operand", 1, False),
            ("", 1, False),  # only "exit code 1": no fact
            ("<tool_use_error>Sibling tool call errored</tool_use_error>", None, True),  # names no error
            ("cp: cannot create regular file '/etc/x': Permission denied", 1, False),
            ("cp: cannot create regular file '/etc/x': Permission denied", 1, False),
            ("cp: cannot create regular file '/etc/x': Permission denied", 1, False),
        ]
    )
    facts, meta = derive_facts(tr, None)
    fails = [f for f in facts if f.fact_id.startswith("failed_command_")]
    assert [f.answer for f in fails] == [
        "TypeError: bad operand",
        "cp: cannot create regular file '/etc/x': Permission denied",
    ]
    assert all(f.variants == () for f in fails)
    assert (meta["n_failed_commands"], meta["n_generic_failures"], meta["n_duplicate_failures"]) == (6, 2, 2)
    # Another failure with the same class no longer passes the probe.
    t = Task(
        task_id="f",
        source=TaskSource(kind="recorded"),
        messages=tuple(tr.messages),
        intent=Intent(statement="task"),
        facts=tuple(facts),
    )
    p = next(q for q in probes_for(t, len(tr.messages) - 1) if q.probe_id == "fact:failed_command_01")
    assert recall_score(p, TextIndex.of("TypeError: unsupported type for timedelta (exit code 1)")) == 0.0


def test_edited_file_facts_skip_scratch_scripts() -> None:
    tr = Transcript(cwd="/testbed")
    tr.add(system("s"))
    tr.add_prompt(user("task"))
    for k, path in enumerate(
        ["/testbed/reproduce_issue.py", "/testbed/pkg/core.py", "/testbed/test_fix.py", "/testbed/pkg/utils.py"]
    ):
        tr.add(
            assistant("", [ToolCall(f"e{k}", "str_replace_editor", json.dumps({"command": "create", "path": path}))])
        )
        tr.add(tool_result(f"e{k}", "ok"))
    facts, meta = derive_facts(tr, None)
    edited = {f.fact_id: f for f in facts if f.fact_id.startswith("edited_file_")}
    assert [f.answer for f in edited.values()] == ["/testbed/pkg/core.py", "/testbed/pkg/utils.py"]
    assert edited["edited_file_01"].question.startswith("Which file was the 1st distinct")
    assert edited["edited_file_02"].variants == ("pkg/utils.py",)  # a bare "utils.py" names any project's file
    assert meta["n_scratch_files"] == 2


def test_generic_and_transcript_wide_key_terms_are_dropped() -> None:
    assert (
        is_generic_term("print") and is_generic_term("42") and is_generic_term("curl") and not is_generic_term("8000")
    )

    def doc_freq(docs: list[str]) -> Callable[[str, float], int]:
        return lambda term, stop_above: sum(TextIndex(d, fuzzy=False).present(term) for d in docs)

    docs = ["curl web.chal.csaw.io:8000"] * 12 + ["ls", "cat flag.txt"] + ["thinking"] * 8  # 22 messages
    terms = ("web.chal.csaw.io", "curl", "10", "flag.txt", "8000")
    assert filter_key_terms(terms, len(docs), doc_freq=doc_freq(docs)) == ("flag.txt",)
    # Too few messages for frequencies to mean anything: only the generic filter applies.
    assert filter_key_terms(terms, 5, doc_freq=doc_freq(docs[:5])) == ("web.chal.csaw.io", "flag.txt", "8000")


# ---------------------------------------------------------------------------------------------
# llm scorer: a persistent cache shared by runs, and an audit table


def _mock_anthropic(reply_for: Any) -> tuple[Any, list[dict[str, Any]]]:
    httpx2 = pytest.importorskip("httpx2")
    pytest.importorskip("anthropic")
    sent: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        body = json.loads(request.content)
        sent.append(body)
        text = reply_for(body["system"], body["messages"][0]["content"])
        return httpx2.Response(
            200,
            json={
                "id": "m", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 1000, "output_tokens": 10},
            },
        )  # fmt: skip

    return httpx2.Client(transport=httpx2.MockTransport(handler)), sent


def _reply(system_prompt: str, user_msg: str) -> str:
    if "grade answers" in system_prompt:
        return "yes" if "24077" in user_msg.split("Answer to grade:", 1)[1] else "no"
    return "The port is 24077." if "24077" in user_msg else "unknown"


def test_two_identical_llm_runs_call_the_api_once_and_audit_every_reply(tmp_path: Any) -> None:
    from h9eval.probes.llm import AnthropicTextClient
    from h9eval.summarizers.cache import ResponseCache

    http, sent = _mock_anthropic(_reply)
    cache_file = tmp_path / "shared.sqlite"
    a = task_a()

    view = a.messages[:4]  # differs from the baseline history, so no prompt repeats within a run

    def run() -> tuple[LLMScorer, list[dict[str, Any]]]:
        client = AnthropicTextClient(
            api_key="sk-test", base_url="http://fake.invalid", http_client=http, cache=cache_file
        )
        sc = LLMScorer(answerer=client)
        return sc, probe_view(a, view, 4, scorers=[sc], run_id="r1", checkpoint=2)

    first, rows1 = run()
    n_calls = len(sent)
    assert n_calls > 0
    second, rows2 = run()
    assert len(sent) == n_calls  # the second run came entirely from the SQLite file
    # (The judge prompt of the view and of the baseline coincide when the answers do: the first
    # run already reuses those.)
    lookups = first.answerer.calls + first.answerer.cache_hits
    assert first.answerer.calls == n_calls and second.answerer.calls == 0 and second.answerer.cache_hits == lookups
    assert [r["score"] for r in rows1] == [r["score"] for r in rows2]

    audit1, audit2 = first.audit_frame(), second.audit_frame()
    assert tuple(audit1.columns) == AUDIT_COLUMNS and len(audit1) == len(audit2) == lookups
    assert int((~audit1["cache_hit"]).sum()) == n_calls and audit2["cache_hit"].all()
    # claude-haiku-4-5 list price: 1000 input + 10 output tokens per call.
    assert audit1["cost_usd"].tolist() == pytest.approx(audit2["cost_usd"].tolist())
    assert audit1["cost_usd"].gt(0).all()
    assert (
        first.answerer.cost_usd
        == pytest.approx(audit1.loc[~audit1["cache_hit"], "cost_usd"].sum())
        == n_calls * (1000 * 1.0 + 10 * 5.0) / 1e6
    )
    assert second.answerer.cost_usd == 0.0  # nothing was spent
    judged = audit1[(audit1.role == "judge") & (audit1.probe_id == "fact:F1") & (audit1.context == "view")].iloc[0]
    assert (
        judged["answer"] == "The port is 24077."
        and judged["reply"] == "yes"
        and judged["verdict"] == 1.0
        and judged["exact"] == 1.0
    )
    assert judged["task_id"] == "A" and judged["run_id"] == "r1" and judged["checkpoint_call_index"] == 2
    assert "Reference answer: 24077" in judged["reference"]
    assert set(audit1.context) == {"view", "history"}  # the baseline's replies are audited too

    # One file serves summaries and probes; the probe rows are counted apart.
    store = ResponseCache(cache_file)
    assert len(PromptCache(store)) == n_calls == store.count(summarizer_id_prefix="llm_probe")
    assert store.count(summarizer_id_prefix="offline") == 0


def test_judge_agreement_returns_n_overall_and_per_run() -> None:
    a = task_a()
    lenient = LLMScorer(answerer=FakeText(lambda s, u: "The port is 8080."), judge=FakeText(lambda s, u: "yes"))
    honest = LLMScorer(
        answerer=FakeText(lambda s, u: "The port is 24077, the folder vendor/legacy/."),
        judge=FakeText(lambda s, u: "yes"),
    )
    rows = probe_view(a, a.messages, 4, scorers=[lenient], run_id="lenient", baseline=False)
    rows += probe_view(a, a.messages, 4, scorers=[honest], run_id="honest", baseline=False)
    df = drift_table(rows)
    overall = judge_agreement(df)
    assert (overall.n, overall.agreement, overall.judge_yes_exact_no) == (4, 0.5, 2)
    per = judge_agreement_table(df).set_index("run_id")
    assert (
        per.loc["honest", "agreement"] == 1.0
        and per.loc["lenient", "agreement"] == 0.0
        and per.loc["lenient", "n"] == 2
    )
    assert judge_agreement(drift_table(probe_view(a, a.messages, 4))).n == 0  # no llm rows
    with pytest.raises(ConfigError, match="by="):
        judge_agreement_table(df, by=("method",))


class FakeText:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def complete(self, system: str, user: str, *, max_tokens: int) -> str:
        return str(self.fn(system, user))


@pytest.mark.parametrize(
    ("n_passed", "n_partners", "excluded"),
    [
        (0, 8, False),
        (1, 8, True),
        (1, 10, False),
        (2, 16, True),
        (1, 9, True),
        (2, 20, False),
        (3, 20, True),
        (0, 0, False),
    ],
)
def test_the_threshold_is_the_stated_false_pass_rate(n_passed: int, n_partners: int, excluded: bool) -> None:
    """The stated rate is 0.10: one chance pass in 8 partners (0.125) is excluded, one in 10 is
    not. Mutants killed: the old 0.25 (or any value from 0.125 up) keeps 1 in 8; 0.05 drops 1 in 10."""
    assert PLACEBO_FALSE_PASS_RATE == PLACEBO_MAX_PASS_RATE
    assert placebo_excluded(n_passed, n_partners) is excluded


def test_a_sweeps_placebo_uses_every_unrelated_task_and_fills_up_with_synthetic_partners() -> None:
    tasks = [task_a(), task_b()]  # two recorded families: one partner each among them, 7 generated
    res = sweep_placebo(tasks)
    by_task = {r.task_id: r.partners for r in res}
    assert by_task["A"][0] == "B" and by_task["B"][0] == "A"
    assert all(len(p) == DEFAULT_PLACEBO_PARTNERS == 8 for p in by_task.values())
    assert all(pid.startswith("synthetic-") for p in by_task.values() for pid in p[1:])
    many = [generate("small", s, n_turns=12) for s in range(10)]  # 10 families: 9 partners each, none generated
    got = {r.task_id: r.partners for r in sweep_placebo(many)}
    assert all(len(p) == 9 and not any(x.startswith("synthetic-small-91") for x in p) for p in got.values())


def test_filtered_key_terms_are_not_re_extracted_from_the_statement() -> None:
    msgs = (system("s"), user("Work on bead spotter-4te."), assistant("ok"))

    def intent_probe(meta: dict[str, Any]) -> Probe:
        t = Task(
            task_id="k",
            source=TaskSource(kind="recorded"),
            messages=msgs,
            intent=Intent(statement=msgs[1].content),
            metadata=meta,
        )
        return next(p for p in probes_for(t, 2) if p.kind == "intent")

    assert intent_probe({}).expected == ("spotter-4te",)  # a task without terms: extracted
    final = intent_probe({FINAL_KEY_TERMS: True})  # the loader's filter left none: ask for the statement
    assert final.scoring == "answer" and final.expected == (msgs[1].content,) and final.answer_pinned


def test_prompt_cache_refuses_an_old_layout_file_and_the_scorer_cache_needs_the_default_client(tmp_path: Any) -> None:
    import sqlite3

    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as conn:
        conn.execute("CREATE TABLE replies (key TEXT PRIMARY KEY, text TEXT NOT NULL, created_at REAL NOT NULL)")
    with pytest.raises(ConfigError, match="earlier layout"):
        PromptCache(old)
    mem = PromptCache()
    mem.put("k", "v")
    assert mem.get("k") == "v" and len(mem) == 1 and mem.get_reply("k").cache_hit  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="default Anthropic client"):
        LLMScorer(answerer=FakeText(lambda s, u: "x"), cache=tmp_path / "c.sqlite")


def test_run_probe_fn_builds_the_llm_scorer_once_on_the_given_cache_file(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("anthropic")
    from h9eval.probes.runner import make_probe_fn

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    cache_file = tmp_path / "summary_cache.sqlite"
    fn = make_probe_fn(["recall", "llm"], cache=cache_file)
    assert cache_file.is_file() and len(PromptCache(cache_file)) == 0  # the sweep's file, not a private one
    llm = fn.scorers[1]
    assert isinstance(llm, LLMScorer) and llm.answerer.cache.path == cache_file and llm.audit_frame().empty


def test_placebo_table_is_deterministic_per_seed() -> None:
    tasks = [generate("small", s, n_turns=20) for s in (1, 2, 3)]
    a = placebo_table(tasks, seed=3)
    assert a.equals(placebo_table(list(reversed(tasks)), seed=3)) and len(a) > 0
    assert set(a["n_partners"]) == {2}  # each task against both others (fewer than 8 exist)
