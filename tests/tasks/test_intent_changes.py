"""Intent changes that append (issue 28): a recorded task's refinements store what each prompt
adds, not the whole statement again, so a chat log of n user turns holds O(n) text; the statement
in force (``Intent.at``) is what it was; task files of version 1 still load."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from h9eval.core.errors import FormatError
from h9eval.core.messages import Message
from h9eval.probes.items import task_items
from h9eval.probes.probe import probes_for
from h9eval.tasks import Intent, IntentChange, Task, TaskSource, tasks_from_jsonl, tasks_to_jsonl
from h9eval.tasks.keyterms import extract_key_terms, filter_key_terms
from h9eval.tasks.recorded import load_task
from h9eval.tasks.synthetic import generate
from h9eval.tasks.text import normalize, normalized_message

V1 = Path(__file__).resolve().parents[1] / "data" / "tasks-v1"
WORDS = ["cache", "limit", "src/a.py", "KeyError", "parse_args", "tests/test_a.py", "4500", "straße", "x-1", "the"]


def write_chat(path: Path, n_turns: int, seed: int = 0) -> list[str]:
    """A chat log of ``n_turns`` user turns, each answered; returns the user prompts as written."""
    rng = random.Random(seed)
    prompts = []
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"role": "system", "content": "You are helpful."}) + "\n")
        for i in range(n_turns):
            words = [rng.choice(WORDS) for _ in range(rng.randint(0, 8))]
            if rng.random() < 0.2:
                words.append(f"src/mod_{i}/file_{i}.py")  # a term only this prompt names
            prompt = " ".join(words) if i else "Fix the KeyError in src/a.py"
            prompt = rng.choice(["", "  "]) + prompt + rng.choice(["", "\n"])  # blank prompts are not changes
            prompts.append(prompt)
            f.write(json.dumps({"role": "user", "content": prompt}, ensure_ascii=False) + "\n")
            f.write(json.dumps({"role": "assistant", "content": f"ok {i} " + rng.choice(WORDS)}) + "\n")
    return prompts


def cumulative_statements(prompts: list[str]) -> list[str]:
    """The statement in force after each non-blank later prompt, written out as a whole."""
    out, cur = [], prompts[0].strip()
    for p in prompts[1:]:
        if p.strip():
            cur = cur + "\n\n" + p.strip()
            out.append(cur)
    return out


@pytest.fixture(scope="module")
def long_chat(tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, list[str], Path]:
    path = tmp_path_factory.mktemp("chat") / "chat.jsonl"
    prompts = write_chat(path, 2000)
    return load_task(path), prompts, path


def test_a_long_chat_log_stores_linear_text(long_chat: tuple[Task, list[str], Path]) -> None:
    task, prompts, path = long_chat
    intent = task.intent
    assert len(intent.changes) > 1500 and all(c.appends for c in intent.changes)
    stored = len(intent.statement) + sum(len(c.statement) for c in intent.changes)
    assert stored <= sum(len(p) for p in prompts)  # each prompt once (the cumulative form: ~700 times that)
    written = json.loads(json.dumps(task.to_dict()))["intent"]["changes"]
    assert sum(len(c["statement"]) for c in written) < sum(len(p) for p in prompts)


def test_statement_in_force_is_the_cumulative_one(long_chat: tuple[Task, list[str], Path]) -> None:
    task, prompts, _ = long_chat
    intent, want = task.intent, cumulative_statements(prompts)
    assert len(intent.changes) == len(want)
    rng = random.Random(1)
    for k in sorted(rng.sample(range(len(want)), 40)) + [0, len(want) - 1]:
        ch = intent.changes[k]
        assert intent.statement_of(k) == want[k]
        now = intent.at(ch.message_index)
        assert (now.statement, now.message_index, now.key_terms, now.appends) == (
            want[k],
            ch.message_index,
            ch.key_terms,
            False,
        )
        assert intent.at(ch.message_index + 1).statement == want[k]  # the answer: still in force
        before = intent.at(ch.message_index - 1).statement
        assert before == (want[k - 1] if k else intent.statement)
    assert intent.at(0).statement == intent.statement == prompts[0].strip()
    assert intent.statement_of(-1) == intent.statement


def test_key_terms_of_the_changes(tmp_path: Path) -> None:
    """Each change's key terms are the previous ones followed by its prompt's (filtered) terms, at
    most 40 (later prompts are then not searched): computed here from the definition, with a
    document count of its own (a regular expression per term)."""
    path = tmp_path / "chat.jsonl"
    prompts = write_chat(path, 400, seed=3)
    task = load_task(path)
    parts = [normalized_message(m) for j, m in enumerate(task.messages) if j != 1]  # 1: the task prompt

    def doc_freq(term: str, stop_above: float) -> int:
        t = normalize(term)
        if not t:
            return 0
        left = r"(?<!\w)" if re.match(r"\w", t[0]) else ""
        right = r"(?!\w)" if re.match(r"\w", t[-1]) else ""
        pattern = re.compile(left + re.escape(t) + right)
        return sum(1 for p in parts if pattern.search(p))

    def keep(terms: tuple[str, ...]) -> tuple[str, ...]:
        return filter_key_terms(terms, len(parts), doc_freq=doc_freq)

    cur = keep(extract_key_terms(prompts[0].strip()))
    assert task.intent.key_terms == cur
    want = []
    for p in prompts[1:]:
        if p.strip():
            cur = tuple(dict.fromkeys(cur + keep(extract_key_terms(p.strip()))))[:40]
            want.append(cur)
    assert [c.key_terms for c in task.intent.changes] == want
    assert len(want[-1]) == 40 and len(want[len(want) // 4]) < 40  # the cap is reached half-way


def test_probe_terms_come_from_the_whole_statement_in_force() -> None:
    """A change without key terms (harness9's database) is probed on the terms of the whole
    statement in force, as when each change stored it: "alpha-beta" is a term only because the
    whole statement writes it twice."""
    prompts = ["Work on alpha-beta in src/a.py", "then alpha-beta again", "and also tests/test_b.py"]
    msgs = tuple(
        Message("user" if i % 2 == 0 else "assistant", prompts[i // 2] if i % 2 == 0 else "ok") for i in range(6)
    )
    appended = Intent(
        statement=prompts[0],
        changes=tuple(IntentChange(message_index=2 * k, statement=p, appends=True) for k, p in enumerate(prompts) if k),
    )
    whole = Intent(
        statement=prompts[0],
        changes=tuple(
            IntentChange(message_index=2 * k, statement=w) for k, w in enumerate(cumulative_statements(prompts), 1)
        ),
    )
    tasks = [
        Task(task_id="h", source=TaskSource(kind="harness9_db"), messages=msgs, intent=i) for i in (appended, whole)
    ]
    rows = [[probes_for(t, i) for i in range(len(msgs))] for t in tasks]
    assert rows[0] == rows[1]
    intent_probe = next(p for p in rows[0][2] if p.kind == "intent")
    assert "alpha-beta" in intent_probe.expected and "alpha-beta" not in extract_key_terms(prompts[1])


def test_version_1_task_files_still_load() -> None:
    """A task file written before changes could append (cumulative statements, version 1) loads as
    it was written and probes exactly as the same session loaded now."""
    (old,) = tasks_from_jsonl(V1 / "chat-refined.task.jsonl")
    new = load_task(V1 / "chat.jsonl")
    assert json.loads((V1 / "chat-refined.task.jsonl").read_text())["schema_version"] == 1
    assert not any(c.appends for c in old.intent.changes) and all(c.appends for c in new.intent.changes)
    assert old.intent.changes[-1].statement.count("\n\n") == 3  # cumulative, as stored then
    assert len(old.intent.changes) == len(new.intent.changes) == 3
    for i in range(len(new.messages)):
        assert old.intent.at(i) == new.intent.at(i)
        assert probes_for(old, i) == probes_for(new, i)
    assert task_items(old) == task_items(new)
    assert old.to_dict()["schema_version"] == 1 and new.to_dict()["schema_version"] == 2


def test_round_trip_keeps_appends(tmp_path: Path) -> None:
    new = load_task(V1 / "chat.jsonl")
    back = tasks_from_jsonl(tasks_to_jsonl([new], tmp_path / "t.jsonl"))[0]
    assert back == new and back.content_hash() == new.content_hash()
    changes = json.loads((tmp_path / "t.jsonl").read_text())["intent"]["changes"]
    assert [c["appends"] for c in changes] == [True, True, True]
    assert changes[0]["statement"] == "Also add a regression test in tests/test_cache.py"


def test_replacing_changes_keep_version_1() -> None:
    """Synthetic tasks replace the goal: their files are unchanged (version 1, no ``appends``)."""
    t = generate("long", seed=0)
    d = t.to_dict()
    assert d["schema_version"] == 1 and all("appends" not in c for c in d["intent"]["changes"])
    assert all(t.intent.at(c.message_index) == c for c in t.intent.changes)


def test_a_goal_after_refinements_starts_again() -> None:
    intent = Intent(
        statement="A",
        changes=(
            IntentChange(message_index=2, statement="B", appends=True),
            IntentChange(message_index=4, statement="C"),
            IntentChange(message_index=6, statement="D", appends=True),
            IntentChange(message_index=8, statement="E", appends=True),
        ),
    )
    assert [intent.at(i).statement for i in range(0, 10, 2)] == ["A", "A\n\nB", "C", "C\n\nD", "C\n\nD\n\nE"]
    assert intent.at(5) == IntentChange(message_index=4, statement="C")


def _task_line(changes: list[dict[str, object]], version: int) -> str:
    t = Task(task_id="t", source=TaskSource(kind="recorded"), messages=(), intent=Intent(statement="A"))
    d = t.to_dict()
    d["schema_version"] = version
    d["intent"]["changes"] = changes
    return json.dumps(d) + "\n"


@pytest.mark.parametrize(
    ("changes", "version", "message"),
    [
        (
            [{"message_index": 1, "statement": "B", "appends": "yes"}],
            2,
            r"intent\.changes\[0\]\.appends: expected true",
        ),
        ([{"message_index": 1, "statement": "B", "appends": True}], 1, r"intent\.changes\[0\]\.appends: .*version 2"),
        ([], 3, r"task schema_version 3 is not supported \(this h9eval reads 1, 2\)"),
    ],
)
def test_malformed_changes_are_refused(
    tmp_path: Path, changes: list[dict[str, object]], version: int, message: str
) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(_task_line(changes, version), encoding="utf-8")
    with pytest.raises(FormatError, match=r"t\.jsonl:line 1.*" + message):
        tasks_from_jsonl(p)


def _folded_terms(intent: Intent, idx: int) -> tuple[str, ...]:
    """The intent probe's terms written out: the statement's, then each change's at or before idx."""
    terms = intent.key_terms
    for ch in intent.changes:
        if ch.message_index <= idx:
            terms = tuple(dict.fromkeys(terms + ch.key_terms))
    return terms


@pytest.mark.parametrize("in_order", [True, False])
def test_intent_probe_terms_at_checkpoints_in_any_order(in_order: bool) -> None:
    """The intent probe's terms are extended from one checkpoint to the next, not rebuilt; asked in
    any order (and with the changes out of transcript order) they are the written-out fold."""
    rng = random.Random(7)
    changes = [
        IntentChange(message_index=2 * k + 1, statement=f"p{k}", key_terms=tuple(rng.sample(WORDS, 3)), appends=True)
        for k in range(30)
    ]
    if not in_order:
        rng.shuffle(changes)
    intent = Intent(statement="s", key_terms=("cache", "cache", "limit"), changes=tuple(changes))  # a repeated term
    msgs = tuple(Message("user" if i % 2 else "assistant", "x") for i in range(62))
    task = Task(task_id="o", source=TaskSource(kind="recorded"), messages=msgs, intent=intent, metadata={})
    checkpoints = list(range(0, 62, 3)) + rng.sample(range(62), 20) + [0, 61, 5]
    for i in checkpoints:
        got = next(p for p in probes_for(task, i, check_answerable=False) if p.kind == "intent").expected
        assert got == _folded_terms(intent, i), i
    assert _folded_terms(intent, 0) == ("cache", "cache", "limit")
