"""Drift probes: validity controls (keep_all, drop_all, unanswerable, fact deletion), scorers
that must be able to fail, the tables, checkpoints and the Anthropic adapter (mock transport)."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h9eval.compaction.anchors import COMPACTION_MARKER, Anchor
from h9eval.compaction.records import CompactionRecord, Tier
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message, ToolCall, assistant, system, tool_result, user
from h9eval.probes import (
    DRIFT_COLUMNS,
    PROBE_COLUMNS,
    PROBE_KINDS,
    SUMMARY_COLUMNS,
    JudgeAgreement,
    LLMScorer,
    PromptCache,
    RecallScorer,
    TextIndex,
    checkpoints,
    count_anchor_overwrites,
    drift_table,
    judge_agreement,
    make_scorer,
    next_action_probe,
    normalize,
    normalize_arguments,
    probe_checkpoints,
    probe_view,
    probes_for,
    scorer_registry,
    semantic_available,
    summarize_drift,
)
from h9eval.probes.llm import action_score, parse_tool_call
from h9eval.tasks.model import AnchorTruth, Fact, Intent, IntentChange, Task, TaskSource

# ---------------------------------------------------------------------------------------------
# A small hand-built task. Every fact's answer occurs only in the sentence that plants it.

PORT_SENTENCE = "The staging service listens on port 24077."
VENDOR_SENTENCE = "Never modify anything under vendor/legacy/ in this repo."


def make_task(*, source: str = "synthetic") -> Task:
    msgs = [
        system("You are a careful coding agent. Use the tools to inspect and edit files."),  # 0
        user(
            "Fix the flaky test tests/test_cache.py::test_evict in acme/widgets; "
            "the race is probably in src/widgets/cache.py."
        ),  # 1
        assistant(
            "Let me read the cache module.", [ToolCall("c1", "read_file", '{"path": "src/widgets/cache.py"}')]
        ),  # 2
        tool_result("c1", "class Cache:\n    def evict(self):\n        self.items.pop(next(iter(self.items)))\n"),  # 3
        user(f"Two things to keep in mind. {PORT_SENTENCE} {VENDOR_SENTENCE}"),  # 4
        assistant(
            "I decided to use an OrderedDict for the eviction order because it keeps insertion order.",
            [ToolCall("c2", "edit_file", '{"path": "src/widgets/cache.py", "old": "dict()", "new": "OrderedDict()"}')],
        ),  # 5
        tool_result("c2", "edited 1 line"),  # 6
        assistant(
            "I tried wrapping evict in a threading.Lock; it failed with DeadlockDetectedError.",
            [ToolCall("c3", "bash", '{"command": "pytest -q  tests/test_cache.py"}')],
        ),  # 7
        tool_result("c3", "1 passed in 0.12s"),  # 8
        user("Also expose the cache size limit as the setting CACHE_MAX_ENTRIES."),  # 9
        assistant(
            "Next I will add CACHE_MAX_ENTRIES to src/widgets/settings.py.",
            [
                ToolCall(
                    "c4",
                    "edit_file",
                    '{"path": "src/widgets/settings.py", "old": "", "new": "CACHE_MAX_ENTRIES = 512"}',
                )
            ],
        ),  # 10
        tool_result("c4", "edited 1 line"),  # 11
        assistant("Done: the test is deterministic now."),  # 12
    ]
    return Task(
        task_id="hand-1",
        source=TaskSource(kind=source),
        messages=tuple(msgs),
        tools=({"name": "read_file"}, {"name": "edit_file"}, {"name": "bash"}),
        intent=Intent(
            statement=msgs[1].content,
            key_terms=("tests/test_cache.py::test_evict", "acme/widgets", "src/widgets/cache.py"),
            changes=(
                IntentChange(
                    message_index=9,
                    statement="Fix the flaky test and expose the limit as CACHE_MAX_ENTRIES",
                    key_terms=("CACHE_MAX_ENTRIES",),
                ),
            ),
        ),
        anchors=(
            AnchorTruth(
                kind="key_decision",
                message_index=5,
                text="Use an OrderedDict for eviction order",
                key_terms=("OrderedDict",),
            ),
            AnchorTruth(
                kind="artifact",
                message_index=5,
                text="modified src/widgets/cache.py",
                key_terms=("src/widgets/cache.py",),
            ),
            AnchorTruth(
                kind="tried_solution",
                message_index=7,
                text="threading.Lock around evict failed with DeadlockDetectedError",
                key_terms=("threading.Lock", "DeadlockDetectedError"),
            ),
            AnchorTruth(
                kind="next_step",
                message_index=10,
                text="add CACHE_MAX_ENTRIES to src/widgets/settings.py",
                key_terms=("src/widgets/settings.py",),
                until_index=12,
            ),
        ),
        facts=(
            Fact(
                fact_id="F1",
                question="Which port does the staging service listen on?",
                answer="24077",
                kind="number",
                message_index=4,
                variants=("port 24077",),
            ),
            Fact(
                fact_id="F2",
                question="Which directory must never be modified?",
                answer="vendor/legacy/",
                kind="constraint",
                message_index=4,
                variants=("vendor/legacy",),
            ),
            # Planted in the ground truth but never said in the transcript: unanswerable.
            Fact(
                fact_id="F3",
                question="What is the release codename?",
                answer="blue-whale-42",
                kind="identifier",
                message_index=6,
            ),
        ),
    )


END = 11  # checkpoint covering messages 0..11 (the view sent for the call at message 12)


def scores(rows: list[dict[str, Any]], *, scope: str = "view", method: str = "recall") -> dict[str, float]:
    return {
        r["probe_id"]: r["score"] for r in rows if r["scope"] == scope and r["method"] == method and r["answerable"]
    }


def drop_sentences(task: Task, sentences: list[str]) -> list[Message]:
    return [m.with_content(_strip(m.content, sentences)) for m in task.messages]


def _strip(text: str, sentences: list[str]) -> str:
    for s in sentences:
        text = text.replace(s, "")
    return text


# ---------------------------------------------------------------------------------------------
# probes_for


def test_probes_for_kinds_and_currency() -> None:
    task = make_task()
    ps = {p.probe_id: p for p in probes_for(task, END)}
    assert set(ps) == {
        "intent@9",
        "anchor:key_decision:0",
        "anchor:artifact:1",
        "anchor:tried_solution:2",
        "anchor:next_step:3",
        "fact:F1",
        "fact:F2",
        "fact:F3",
        "key_terms",
    }
    # The whole intent in force after the change, not only the change's own term.
    assert ps["intent@9"].expected == (*task.intent.key_terms, "CACHE_MAX_ENTRIES")
    assert ps["key_terms"].expected == task.intent.key_terms
    # Before the change the two are one question: only the intent probe is asked.
    assert [p.kind for p in probes_for(task, 8)].count("key_terms") == 0
    assert ps["fact:F1"].scoring == "answer" and ps["fact:F1"].candidates == ("24077", "port 24077")
    assert all(p.kind in PROBE_KINDS for p in ps.values())
    # Before the intent change, before the decision; after next_step's until_index.
    early = {p.probe_id for p in probes_for(task, 4)}
    assert "intent@0" in early and "anchor:key_decision:0" not in early and "fact:F1" in early
    assert "anchor:next_step:3" not in {p.probe_id for p in probes_for(task, 12)}


def test_superseded_fact_not_probed() -> None:
    task = make_task()
    f = Fact(
        fact_id="OLD", question="q", answer="24077", kind="number", message_index=4, superseded_at=9, superseded_by="F1"
    )
    t2 = Task(task_id="t2", source=task.source, messages=task.messages, intent=task.intent, facts=(f,))
    assert "fact:OLD" in {p.probe_id for p in probes_for(t2, 8)}
    assert "fact:OLD" not in {p.probe_id for p in probes_for(t2, 9)}


def test_unanswerable_probe_flagged_and_excluded() -> None:
    task = make_task()
    ps = {p.probe_id: p for p in probes_for(task, END)}
    assert ps["fact:F3"].answerable is False
    assert all(p.answerable for k, p in ps.items() if k != "fact:F3")
    # A key-term probe keeps only the terms the agent has seen; unseen ones are listed.
    t = Task(
        task_id="t",
        source=task.source,
        messages=task.messages,
        intent=Intent(statement="x", key_terms=("acme/widgets", "never-said-term-123")),
    )
    kt = next(p for p in probes_for(t, END) if p.kind == "intent")
    assert kt.expected == ("acme/widgets",) and kt.unseen == ("never-said-term-123",) and kt.answerable

    rows = probe_view(task, [task.messages[0]], END, checkpoint=3)
    f3 = [r for r in rows if r["probe_id"] == "fact:F3"]
    assert len(f3) == 2 and all(not r["answerable"] and math.isnan(r["score"]) and not r["passed"] for r in f3)
    df = drift_table(rows)
    assert df.loc[df.probe_id == "fact:F3", "retention"].isna().all()
    summ = summarize_drift(df)
    view = summ[summ.scope == "view"].iloc[0]
    # 8 answerable probes; F3 is neither a loss nor counted.
    assert view["n_observations"] == 8


# ---------------------------------------------------------------------------------------------
# validity controls on the hand-built task


def test_keep_all_scores_one() -> None:
    task = make_task()
    for idx in (4, 8, END):
        rows = probe_view(task, task.messages[: idx + 1], idx)
        s = scores(rows)
        assert s and all(v == 1.0 for v in s.values()), (idx, s)
        # No compaction message: nothing retained in the anchors scope.
        assert all(v == 0.0 for v in scores(rows, scope="anchors").values())
        assert all(r["baseline_score"] == 1.0 for r in rows if r["answerable"])


def test_drop_all_scores_near_zero() -> None:
    task = make_task()
    rows = probe_view(task, [task.messages[0], task.messages[END]], END)
    s = scores(rows)
    assert len(s) == 8
    assert sum(s.values()) / len(s) <= 0.05, s
    summ = summarize_drift(drift_table(rows))
    assert summ.loc[summ.scope == "view", "mean_retention"].iloc[0] <= 0.05


def test_deleting_fact_sentences_loses_exactly_the_facts() -> None:
    task = make_task()
    view = drop_sentences(task, [PORT_SENTENCE, VENDOR_SENTENCE])[: END + 1]
    rows = probe_view(task, view, END)
    s = scores(rows)
    facts = {k: v for k, v in s.items() if k.startswith("fact:")}
    rest = {k: v for k, v in s.items() if not k.startswith("fact:")}
    assert facts == {"fact:F1": 0.0, "fact:F2": 0.0}
    assert rest and all(v == 1.0 for v in rest.values()), rest


def test_anchors_scope_reads_latest_compaction_message() -> None:
    task = make_task()
    old = Message("user", f"{COMPACTION_MARKER}\n## Anchors\n\n### User Intent\nport 24077\n\n## Summary\nold")
    comp = Message(
        "user",
        f"{COMPACTION_MARKER}\n## Anchors\n\n### User Intent\nFix tests/test_cache.py::test_evict in acme/widgets\n\n"
        "### Execution Progress\nN/A\n\n### Key Decisions\n- OrderedDict for eviction order\n\n"
        "### Tried Solutions\n- threading.Lock: DeadlockDetectedError\n\n### Next Steps\nN/A\n\n"
        "### Artifacts\n- src/widgets/cache.py\n\n## Summary\nWorking on CACHE_MAX_ENTRIES.\n\n"
        "## Offloaded References\n- offload/vendor/legacy/x.txt (3行) - offloaded tool result\n",
    )
    view = [task.messages[0], old, comp, *task.messages[10:12]]
    rows = probe_view(task, view, END, tier=Tier.FULL)
    a = scores(rows, scope="anchors")
    assert a["anchor:key_decision:0"] == 1.0 and a["anchor:tried_solution:2"] == 1.0
    assert a["anchor:artifact:1"] == 1.0  # an extra anchor type is parsed too
    assert a["intent@9"] == 1.0 and a["key_terms"] == 1.0
    # Only the latest compaction message counts, and not its offloaded-references list.
    assert a["fact:F1"] == 0.0 and a["fact:F2"] == 0.0
    # next_step is in the tail (message 10), not the anchors.
    assert a["anchor:next_step:3"] == 0.0 and scores(rows)["anchor:next_step:3"] == 1.0
    assert {r["tier_at_checkpoint"] for r in rows} == {"full"}


# ---------------------------------------------------------------------------------------------
# recall's matcher


def test_normalize() -> None:
    assert normalize("  `src/a.py`,  \n\t 'Port: 8080!' ") == "src/a.py port: 8080"
    assert normalize("eu-west-3 (HOST_NAME)") == "eu-west-3 host_name"


def test_matcher_boundaries_fuzzy_and_numbers() -> None:
    idx = TextIndex.of("The job failed with DeadlockDetectdError after 45000 ms; see parse_args() in cli/main.py.")
    assert idx.present("DeadlockDetectedError")  # one dropped letter: fuzzy
    assert idx.present("CLI/Main.py") and idx.present("parse_args")
    assert not idx.present("parse")  # glued to "_args": a different identifier
    assert not idx.present("4500")  # a prefix of 45000 is not 4500
    assert not idx.present("after 46000 ms")  # numbers are never fuzzy
    assert idx.present("after 45000 ms")
    assert not idx.present("")
    assert not TextIndex.of("DeadlockDetectdError", fuzzy=False).present("DeadlockDetectedError")


@settings(max_examples=150, deadline=None)
@given(
    words=st.lists(st.text(alphabet="abcdefgh_.-/:0123456789 ,`'()", min_size=1, max_size=12), min_size=1, max_size=30),
    pick=st.integers(min_value=0),
)
def test_normalize_idempotent_and_every_word_of_a_text_is_present(words: list[str], pick: int) -> None:
    text = " ".join(words)
    assert normalize(normalize(text)) == normalize(text)
    term = words[pick % len(words)]
    # A whole chunk of the text is always found in it (the keep_all property, at the matcher level).
    assert TextIndex.of(text).present(term) == bool(normalize(term))


def test_recall_low_on_unrelated_view() -> None:
    task = make_task()
    unrelated = [
        system("You are a cooking assistant."),
        user("How long should I boil an egg? I like the yolk soft and the white set."),
        assistant("About six minutes in boiling water, then cool it under cold water."),
    ]
    rows = probe_view(task, unrelated, END)
    s = scores(rows)
    assert max(s.values()) == 0.0, s


def test_recall_fast_on_a_megabyte_view() -> None:
    task = make_task()
    filler = " ".join(f"line {i} of a long log with token{i % 977} and value {i * 7}" for i in range(22_000))
    assert len(filler) > 1_000_000
    view = [task.messages[0], tool_result("cx", filler), *task.messages[1 : END + 1]]
    RecallScorer()  # warm the class
    t0 = time.perf_counter()
    rows = probe_view(task, view, END)
    assert time.perf_counter() - t0 < 2.0
    assert all(v == 1.0 for v in scores(rows).values())
    t0 = time.perf_counter()
    rows = probe_view(task, [task.messages[0], tool_result("cx", filler)], END)
    assert time.perf_counter() - t0 < 2.0  # misses: fuzzy path on 1 MB for every term
    assert max(scores(rows).values()) == 0.0


# ---------------------------------------------------------------------------------------------
# registry


def test_scorer_registry_and_did_you_mean() -> None:
    assert {"recall", "semantic", "llm"} <= set(scorer_registry())
    with pytest.raises(ConfigError, match="did you mean 'recall'"):
        make_scorer("recal")
    with pytest.raises(ConfigError, match="did you mean 'fuzzy_threshold'"):
        make_scorer("recall", fuzy_threshold=80)
    with pytest.raises(ConfigError, match="fuzzy_threshold"):
        make_scorer("recall", fuzzy_threshold=0)
    with pytest.raises(ConfigError, match="scopes"):
        RecallScorer(scopes=("anchor",))
    with pytest.raises(ConfigError, match="given twice"):
        probe_view(make_task(), [], END, scorers=("recall", "recall"))


def test_import_is_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, h9eval.probes; print(sorted(m for m in ('torch','anthropic','sentence_transformers') if m in "
        "sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


# ---------------------------------------------------------------------------------------------
# semantic


@pytest.mark.skipif(semantic_available(), reason="semantic extra installed: the missing-extra error cannot be shown")
def test_semantic_missing_extra_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"semantic.*pip install 'h9eval\[semantic\]'"):
        make_scorer("semantic")


@pytest.mark.skipif(not semantic_available(), reason="needs the semantic extra (pip install 'h9eval[semantic]')")
def test_semantic_scores_related_high_and_unrelated_low() -> None:
    task = make_task()
    comp = Message(
        "user",
        f"{COMPACTION_MARKER}\n## Anchors\n\n### Key Decisions\n- Chose an OrderedDict to keep the eviction order\n\n"
        "### Tried Solutions\n- Wrapping evict in a threading.Lock deadlocked (DeadlockDetectedError)\n\n## "
        "Summary\nCache work.",
    )
    unrelated = Message(
        "user",
        f"{COMPACTION_MARKER}\n## Anchors\n\n### Key Decisions\n- Boil eggs for six minutes\n\n## Summary\nCooking.",
    )
    sem = make_scorer("semantic")
    good = scores(probe_view(task, [task.messages[0], comp], END, scorers=[sem]), scope="anchors", method="semantic")
    bad = scores(
        probe_view(task, [task.messages[0], unrelated], END, scorers=[sem]), scope="anchors", method="semantic"
    )
    assert good["anchor:tried_solution:2"] > 0.6
    assert bad["anchor:tried_solution:2"] < 0.3
    assert max(bad.values()) < 0.4
    # No compaction message: 0.
    none = scores(
        probe_view(task, [task.messages[0]], END, scorers=[sem], baseline=False), scope="anchors", method="semantic"
    )
    assert set(none.values()) == {0.0}


# ---------------------------------------------------------------------------------------------
# llm, with fake clients


class FakeClient:
    """``complete`` answers with ``fn(system, user)`` and records the calls."""

    def __init__(self, fn: Callable[[str, str], str]) -> None:
        self.fn = fn
        self.calls: list[tuple[str, str, int]] = []

    def complete(self, system: str, user: str, *, max_tokens: int) -> str:
        self.calls.append((system, user, max_tokens))
        return self.fn(system, user)


def echo_context(system: str, user: str) -> str:
    """An answerer that 'answers' with everything it was shown (it knows what the view knows)."""
    m = re.search(r"<context>\n(.*)\n</context>", user, re.DOTALL)
    return m.group(1) if m else ""


def matching_judge(system: str, user: str) -> str:
    """A judge that says yes when the reference's specifics are in the answer."""
    answer = user.split("Answer to grade:\n", 1)[1].rsplit("\n\nDoes the answer", 1)[0]
    idx = TextIndex.of(answer)
    if m := re.search(r"Key specifics: (.*)", user):
        terms = [t.strip() for t in m.group(1).split(",")]
        return "yes" if sum(map(idx.present, terms)) >= len(terms) / 2 else "no"
    ref = re.search(r"Reference answer: (.*)", user).group(1)  # type: ignore[union-attr]
    alts = re.search(r"Also acceptable: (.*)", user)
    cands = [ref] + (alts.group(1).split("; ") if alts else [])
    return "yes" if idx.any_present(cands) else "no"


def test_llm_with_informed_fakes_scores_full_history_high() -> None:
    task = make_task()
    answerer, judge = FakeClient(echo_context), FakeClient(matching_judge)
    llm = LLMScorer(answerer=answerer, judge=judge)
    rows = probe_view(task, task.messages[: END + 1], END, scorers=[llm])
    s = scores(rows, method="llm")
    assert len(s) == 8 and all(v == 1.0 for v in s.values()), s
    assert set(scores(rows, method="llm_exact")) == {"fact:F1", "fact:F2"}
    # Answerer asked once per distinct question (view + baseline), judge once per probe.
    n_questions = len({p.question for p in probes_for(task, END) if p.answerable})
    assert len(answerer.calls) == 2 * n_questions and len(judge.calls) == 2 * 8
    assert all(r["baseline_score"] == 1.0 for r in rows if r["answerable"])
    assert judge_agreement(drift_table(rows)) == JudgeAgreement(
        n=2, agreement=1.0, judge_yes_exact_no=0, judge_no_exact_yes=0
    )


def test_llm_low_when_answerer_is_wrong() -> None:
    task = make_task()
    wrong = FakeClient(lambda s, u: "The port is 8080 and nothing else is known.")
    honest_judge = FakeClient(matching_judge)
    rows = probe_view(
        task, task.messages[: END + 1], END, scorers=[LLMScorer(answerer=wrong, judge=honest_judge)], baseline=False
    )
    s = scores(rows, method="llm")
    assert max(s.values()) == 0.0
    assert all(math.isnan(r["baseline_score"]) for r in rows)
    # A lenient judge that always says yes disagrees with exact matching on every fact.
    lenient = FakeClient(lambda s, u: "Yes.")
    rows = probe_view(
        task, task.messages[: END + 1], END, scorers=[LLMScorer(answerer=wrong, judge=lenient)], baseline=False
    )
    agr = judge_agreement(drift_table(rows))
    assert agr.n == 2 and agr.agreement == 0.0 and agr.judge_yes_exact_no == 2


def test_llm_drop_all_low_and_anchors_scope_without_compaction() -> None:
    task = make_task()
    llm = LLMScorer(answerer=FakeClient(echo_context), judge=FakeClient(matching_judge), scopes=("view", "anchors"))
    rows = probe_view(task, [task.messages[0], task.messages[END]], END, scorers=[llm], baseline=False)
    assert max(scores(rows, method="llm").values()) == 0.0
    assert set(scores(rows, method="llm", scope="anchors").values()) == {0.0}


def test_llm_cuts_long_views_in_the_middle() -> None:
    task = make_task()
    seen: list[str] = []
    fake = FakeClient(lambda s, u: seen.append(u) or "unknown")
    llm = LLMScorer(answerer=fake, judge=FakeClient(lambda s, u: "no"), max_view_chars=2000)
    big = [task.messages[0], tool_result("x", "y" * 50_000), task.messages[END]]
    probe_view(task, big, END, scorers=[llm], baseline=False)
    assert seen and all(len(u) < 3000 and "characters omitted" in u for u in seen)


def test_llm_needs_a_key_without_a_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        make_scorer("llm")
    with pytest.raises(ConfigError, match="complete"):
        LLMScorer(answerer=object())


# ---------------------------------------------------------------------------------------------
# next action (recorded tasks)


def test_next_action_probe_and_scoring() -> None:
    task = make_task(source="recorded")
    p = next_action_probe(task, 6)
    assert p is not None and p.probe_id == "next_action@7"
    assert p.expected == ("bash", normalize_arguments('{"command": "pytest -q tests/test_cache.py"}'))
    assert next_action_probe(task, 11) is None  # the next assistant message has no tool call
    assert (
        action_score(p, '```json\n{"name": "bash", "arguments": {"command": "pytest -q   tests/test_cache.py"}}\n```')
        == 1.0
    )
    assert action_score(p, '{"name": "bash", "arguments": {"command": "ls"}}') == 0.5
    assert action_score(p, '{"name": "read_file", "arguments": {}}') == 0.0
    assert action_score(p, "I would run the tests.") == 0.0
    assert parse_tool_call('{"name": "x", "input": {"b": 1, "a": "  s  t "}}') == ("x", '{"a":"s t","b":1}')

    right = '{"name": "bash", "arguments": {"command": "pytest -q tests/test_cache.py"}}'
    fake = FakeClient(lambda s, u: right if "next tool call" in u else "unknown")
    rows = probe_view(
        task, task.messages[:7], 6, scorers=[LLMScorer(answerer=fake, judge=FakeClient(lambda s, u: "no"))]
    )
    na = [r for r in rows if r["probe_kind"] == "next_action"]
    assert len(na) == 1 and na[0]["score"] == 1.0 and na[0]["baseline_score"] == 1.0 and na[0]["method"] == "llm"
    assert any("Available tools: read_file, edit_file, bash" in u for _, u, _ in fake.calls)
    # Not for synthetic tasks, and never scored by recall.
    synth_rows = probe_view(make_task(), task.messages[:7], 6, scorers=[LLMScorer(answerer=fake)])
    assert not [r for r in synth_rows if r["probe_kind"] == "next_action"]
    assert not [r for r in probe_view(task, task.messages[:7], 6) if r["probe_kind"] == "next_action"]


# ---------------------------------------------------------------------------------------------
# Anthropic adapter (mock transport, never the network)

KEY = "sk-ant-test-KEY-never-shown-0123"


def test_anthropic_text_client_request_cache_and_errors(tmp_path: Any) -> None:
    httpx2 = pytest.importorskip("httpx2")
    pytest.importorskip("anthropic")
    from h9eval.probes.llm import AnthropicTextClient, LLMClientError

    sent: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        body = {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": "yes"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        return httpx2.Response(200, json=body)

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    opts: dict[str, Any] = {
        "api_key": KEY,
        "model": "claude-haiku-4-5",
        "base_url": "http://fake.invalid",
        "http_client": http,
    }
    c = AnthropicTextClient(**opts, cache=tmp_path / "c.sqlite")
    assert c.complete("sys", "usr", max_tokens=5) == "yes"
    assert c.complete("sys", "usr", max_tokens=5) == "yes"
    assert len(sent) == 1 and c.calls == 1 and c.cache_hits == 1 and c.input_tokens == 10
    assert sent[0]["temperature"] == 0 and sent[0]["system"] == "sys" and sent[0]["max_tokens"] == 5
    assert sent[0]["messages"] == [{"role": "user", "content": "usr"}]
    # The SQLite cache outlives the client; a different prompt is a miss.
    assert len(PromptCache(tmp_path / "c.sqlite")) == 1
    c2 = AnthropicTextClient(**opts, cache=tmp_path / "c.sqlite")
    assert c2.complete("sys", "usr", max_tokens=5) == "yes" and c2.calls == 0
    assert KEY not in repr(c2)

    def fail(request: Any) -> Any:
        return httpx2.Response(401, json={"type": "error", "error": {"type": "authentication_error", "message": "bad"}})

    failing = httpx2.Client(transport=httpx2.MockTransport(fail))
    bad = AnthropicTextClient(
        api_key=KEY, base_url="http://fake.invalid", http_client=failing, max_retries=0, cache=False
    )
    with pytest.raises(LLMClientError, match="HTTP 401") as ei:
        bad.complete("s", "u", max_tokens=5)
    assert KEY not in str(ei.value)


# ---------------------------------------------------------------------------------------------
# checkpoints, tables, summaries


def test_checkpoints_selection() -> None:
    v: tuple[Message, ...] = ()
    rows = [
        (0, 1, Tier.NONE, 100, v),
        {"call_index": 1, "message_index": 3, "tier": "soft", "tokens": 90, "view": v},
        (2, 5, 0, 120, v),
        (3, 7, 3, 80, v),
        {"call_index": 4, "message_index": 9, "tier": "none", "tokens": None, "view": v, "compacted": True},
        (5, 11, "none", 100, v),
    ]
    # the default is the grid shared by every policy: here (no every_k) only the last call
    assert [(c.call_index, c.n_compactions, c.reasons) for c in checkpoints(rows)] == [(5, 3, ("end",))]
    cps = checkpoints(rows, after_compaction=True)
    assert [(c.call_index, c.n_compactions, c.reasons) for c in cps] == [
        (1, 1, ("compaction",)),
        (3, 2, ("compaction",)),
        (4, 3, ("compaction",)),
        (5, 3, ("end",)),
    ]
    assert [c.call_index for c in checkpoints(rows, every_k=2, after_compaction=False, at_end=False)] == [1, 3, 5]
    assert checkpoints(rows, after_compaction=False, at_end=False) == []
    with pytest.raises(ConfigError, match="every_k"):
        checkpoints(rows, every_k=0)
    with pytest.raises(ConfigError, match="lacks 'view'"):
        checkpoints([{"call_index": 0, "message_index": 0, "tier": 0, "tokens": 1}])
    with pytest.raises(ConfigError, match="unknown tier"):
        checkpoints([(0, 0, "mega", 1, v)])


def test_tables_columns_and_intent_lost_after_compaction() -> None:
    task = make_task()
    full = task.messages[: END + 1]
    dropped = (task.messages[0], task.messages[END])
    calls = [
        (0, 4, Tier.NONE, None, task.messages[:5]),
        (1, 8, Tier.SOFT, None, full[:9]),
        (2, END, Tier.FULL, None, dropped),
        (3, END, Tier.FULL, None, dropped),
    ]
    rows = probe_checkpoints(task, calls, run_id="r1", scorers=["recall"], after_compaction=True)
    assert rows and all(tuple(r) == PROBE_COLUMNS for r in rows)
    df = drift_table(rows)
    assert tuple(df.columns) == DRIFT_COLUMNS and df.attrs["schema_version"] == 2
    assert sorted(df.checkpoint_call_index.unique()) == [1, 2, 3]
    assert (df.loc[df.checkpoint_call_index == 1, "tokens_at_checkpoint"] > 0).all()  # estimated
    recs = [
        CompactionRecord(anchors=[Anchor("user_intent", "fix"), Anchor("key_decision", "OrderedDict")]),
        CompactionRecord(anchors=None),  # a fallback: no anchors, skipped
        CompactionRecord(anchors=[Anchor("user_intent", "fix"), Anchor("key_decision", "- N/A")]),
        {"anchors": [{"type": "user_intent", "content": ""}, {"type": "key_decision", "content": "N/A"}]},
    ]
    assert count_anchor_overwrites(recs) == 2
    summ = summarize_drift(df, records={"r1": recs})
    assert tuple(summ.columns) == SUMMARY_COLUMNS
    v = summ[summ.scope == "view"].iloc[0]
    assert v["n_checkpoints"] == 3
    assert v["intent_lost_at_call"] == 2 and v["intent_lost_after_compaction"] == 2
    assert v["n_anchor_overwrites"] == 2
    assert v["retention_fact"] == pytest.approx(1 / 3)  # kept at call 1, lost at 2 and 3
    assert math.isnan(v["retention_derived_fact"])
    # Rows from a DataFrame round-trip; an unknown schema version is refused.
    assert drift_table(df[list(PROBE_COLUMNS)]).equals(df)
    bad = df[list(PROBE_COLUMNS)].assign(schema_version=99)
    with pytest.raises(ConfigError, match="schema_version"):
        drift_table(bad)
    # Version-1 rows (before answer_pinned / placebo) are read with neutral defaults.
    v1 = df[list(PROBE_COLUMNS[:-4])].assign(schema_version=1)
    up = drift_table(v1)
    assert tuple(up.columns) == DRIFT_COLUMNS and not up["answer_pinned"].any() and up["placebo_rate"].isna().all()
    assert list(up["after_compaction"]) == [bool(n > 0) for n in v1["n_compactions"]]


def test_probe_view_rejects_out_of_range_index() -> None:
    with pytest.raises(ConfigError, match="message_index"):
        probe_view(make_task(), [], 99)


# ---------------------------------------------------------------------------------------------
# the same controls on a synthetic task, when the generator is there


def _synthetic() -> Task:
    synthetic = pytest.importorskip("h9eval.tasks.synthetic", reason="h9eval.tasks.synthetic not available")
    return synthetic.generate(preset="small", seed=0)


def test_synthetic_controls() -> None:
    task = _synthetic()
    n = len(task.messages)
    # Checkpoints just before model calls: the view covers the messages before an assistant turn.
    idxs = [i - 1 for i, m in enumerate(task.messages) if m.role == "assistant" and i > 2]
    assert len(idxs) >= 8
    for idx in idxs[:: max(1, len(idxs) // 6)]:
        s = scores(probe_view(task, task.messages[: idx + 1], idx))
        assert s and all(v == 1.0 for v in s.values()), idx
    # drop_all keeps the system prompt (which names the repository, one of the task's key terms)
    # and the last message (a tool result may list files or state a port): near zero on average.
    means = []
    for idx in idxs[len(idxs) // 3 :]:
        drop = scores(probe_view(task, [task.messages[0], task.messages[idx]], idx))
        means.append(sum(drop.values()) / len(drop))
        assert means[-1] < 0.5, (idx, drop)
    assert sum(means) / len(means) < 0.15, means
    # Delete every sentence that states a live fact's answer: facts go to 0, the rest stays.
    idx = n - 2
    live = [p for p in probes_for(task, idx) if p.kind == "fact" and p.answerable]
    assert live
    pat = re.compile(
        r"[^.\n]*(?:" + "|".join(re.escape(c) for p in live for c in p.candidates) + r")[^.\n]*[.\n]?", re.IGNORECASE
    )
    view = [m.with_content(pat.sub("", m.content)) for m in task.messages[: idx + 1]]
    view = [
        Message(m.role, m.content, tuple(tc for tc in m.tool_calls if not pat.search(tc.arguments)), m.tool_call_id)
        for m in view
    ]
    s = scores(probe_view(task, view, idx))
    facts = [v for k, v in s.items() if k.startswith("fact:")]
    rest = [v for k, v in s.items() if not k.startswith("fact:")]
    assert facts and max(facts) == 0.0, s
    assert sum(rest) / len(rest) >= 0.9, s


def test_checkpoint_grid_is_the_tasks_and_the_same_for_every_policy() -> None:
    """Every policy is probed at the same calls (every k-th call index and the last), however
    often it compacts; the post-compaction rows are a labelled column, not extra checkpoints."""
    from h9eval.compaction import make_policy
    from h9eval.probes.drift import checkpoint_grid
    from h9eval.probes.runner import make_probe_fn
    from h9eval.runs.replay import ReplayConfig, replay
    from h9eval.tasks.synthetic import generate

    assert checkpoint_grid(10, 4) == (3, 7, 9) and checkpoint_grid(8, 4) == (3, 7) and checkpoint_grid(3, None) == (2,)
    assert checkpoint_grid(0, 3) == ()
    with pytest.raises(ConfigError, match="every_k"):
        checkpoint_grid(5, 0)
    task = generate("small", seed=0)
    fn = make_probe_fn(["recall"])
    grids, after = {}, {}
    for kind, params in (("keep_all", {}), ("drop_all", {}), ("progressive", {"context_window_tokens": 6000})):
        r = replay(
            task,
            make_policy(kind, **params),
            config=ReplayConfig(context_window_tokens=6000),
            probe_fn=fn,
            probe_every_k=5,
        )
        grids[kind] = sorted(set(r.probes["checkpoint_call_index"]))
        after[kind] = r.probes
        if kind != "keep_all":
            assert r.calls["compacted"].sum() > len(grids[kind]), "the policy must compact off the grid too"
    assert grids["keep_all"] == grids["drop_all"] == grids["progressive"] == list(checkpoint_grid(task.n_calls, 5))
    assert not after["keep_all"]["after_compaction"].any()
    p = after["progressive"]
    assert p["after_compaction"].any() and not p["after_compaction"].all()
    assert (p["after_compaction"] == (p["n_compactions"] > 0)).all()


def test_a_key_term_probe_with_no_term_in_the_history_is_unanswerable_and_left_out() -> None:
    """The task statement's key terms were never said in the transcript: the key-term probe is
    unanswerable (score NaN, never passed) and no aggregate counts it; counting it as
    answerable would score every policy 0 on it, keep_all included."""
    import dataclasses

    from h9eval.analysis import metrics as M

    base = make_task()
    task = dataclasses.replace(
        base, intent=dataclasses.replace(base.intent, key_terms=("never-said-term-123", "ZZZ_UNSEEN_42"))
    )
    kt = next(p for p in probes_for(task, END) if p.kind == "key_terms")
    assert not kt.answerable and kt.unseen == ("never-said-term-123", "ZZZ_UNSEEN_42")
    rows = probe_view(task, task.messages[: END + 1], END, run_id="r")  # the uncompacted view: keep_all
    kt_rows = [r for r in rows if r["probe_kind"] == "key_terms"]
    assert kt_rows and all(not r["answerable"] and math.isnan(r["score"]) and not r["passed"] for r in kt_rows)
    live = [r for r in rows if r["answerable"] and r["scope"] == "view"]
    assert live and all(r["score"] == 1.0 for r in live)
    import pandas as pd

    df = pd.DataFrame(rows)
    ret = M.retention(df, by=("run_id",))
    # the headline retention counts the answerable probes whose answer is not pinned
    assert ret["retention"].iloc[0] == 1.0 and ret["n_probes"].iloc[0] == sum(not r["answer_pinned"] for r in live)
    assert M.retention(df, by=("run_id",), pinned="include")["n_probes"].iloc[0] == len(live)
    assert "key_terms" not in set(M.retention(df, by=("probe_kind",))["probe_kind"])
