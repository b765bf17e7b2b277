"""The scripted agent: a pure function of the serialised view it receives (the offline default).

At every step it parses only that view (tool results, its own earlier notes in assistant
messages, summaries and anchors, offload placeholders; what it trusts depends on its
:class:`~h9eval.closedloop.agents.reading.ReaderProfile`) into known facts, completed steps and
active rules, then takes the first subgoal whose inputs are known. When a needed result was
offloaded it re-fetches the placeholder's path with ``read_file``; when no trace of a step is
left it redoes the discovery; when a rule is not visible it takes the rule-violating default
(``search`` before ``grep``, the first ``grep`` hit even under ``vendor/``, commit without a
test run); when a step's completion is not visible it redoes the step (a second refund); when
the task statement is gone it declares itself done. It keeps no state between calls: its
memory is the note it writes into each assistant message, which compaction may remove.

What it can stand in for: a diligent, literal agent whose next action is decided by what the
compacted view still shows. It measures whether a compaction policy keeps the facts, rules and
completion markers a task needs at the step it needs them, in closed loop, deterministically
and for free. What it cannot stand in for: a model's judgement. It never infers a lost value
from context, never asks the user, never checks the world (``lookup_order``) before redoing
a side effect, reads summaries with fixed patterns (a summary that
paraphrases a value it would have used is lost to it, where a model might recover it), and
is not misled by plausible-looking but wrong text the way a model can be. Its success rates
are therefore a measure of *information retention at the point of need*, not a prediction of
a particular model's success; the live agent (:mod:`h9eval.closedloop.agents.live`) is the
check against a real model.

It knows the eight built-in worlds' text conventions (the way a skilled user knows the tools'
output formats) but imports nothing from :mod:`h9eval.closedloop.worlds`: everything it uses
comes from the view. Its notes quote what each tool result said (the world's own words) in a
framing drawn, seeded by the fact, from a vocabulary (:data:`PHRASINGS`, ``phrasing=``) that holds
no summarizer cue; it never reads the framing back, so its success does not depend on whether a
summarizer recognises its wording. When the task's details are gone from the view and the system
prompt names a task file, it re-reads that file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from h9eval.closedloop.agents.base import Action
from h9eval.closedloop.agents.reading import (
    PROFILES,
    ReaderProfile,
    Reading,
    SeenCall,
    read_view,
)
from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.core.messages import Message, message_from_json

__all__ = ["PHRASINGS", "ScriptedAgent"]

_TASK = re.compile(r"TASK (\w+):")
#: parsed messages the agent memoises (a long episode's distinct messages fit many times over)
_MEMO_MAX = 20_000
#: how the serialised view begins (serialize_view: sorted keys, compact)
_MESSAGES_OPEN = '{"messages":['
_DECODER = json.JSONDecoder()
#: the workspace file a world names in its system prompt when the task can be re-read
_TASK_FILE = "TASK.md"

#: vocabularies of the agent's notes: each note quotes what a tool result said (the fact, the
#: world's own words) inside a framing drawn from one vocabulary, seeded by the fact. None of
#: them holds a fixed cue (``because``, ``decided to``) that a summarizer could key on, and the
#: agent never reads the framing back: swapping vocabularies must not change what it does.
PHRASINGS: dict[str, tuple[str, ...]] = {
    "plain": (
        "Noted: {fact}.",
        "Result: {fact}.",
        "{fact}; next step.",
        "Observed {fact}.",
        "The tool reported {fact}.",
        "So far: {fact}.",
    ),
    "alt": (
        "Seen: {fact}.",
        "{fact} (logged).",
        "Got {fact}.",
        "Memo: {fact}.",
        "Tool output: {fact}.",
        "Keeping {fact} in mind.",
    ),
}


class ScriptedAgent:
    """The scripted agent; ``profile`` is a :data:`PROFILES` name or a :class:`ReaderProfile`."""

    def __init__(self, profile: str | ReaderProfile = "full", *, phrasing: str = "plain") -> None:
        if isinstance(profile, str):
            if profile not in PROFILES:
                raise ConfigError(did_you_mean(profile, PROFILES, what="reader profile"))
            profile = PROFILES[profile]
        if phrasing not in PHRASINGS:
            raise ConfigError(did_you_mean(phrasing, PHRASINGS, what="phrasing"))
        self.profile = profile
        self.phrasing = phrasing
        # a memo of a pure function (message JSON -> Message), not memory: consecutive views share
        # most messages, and reusing their objects keeps a step's cost from growing with the
        # history (a string's hash is computed once per object)
        self._parsed: dict[tuple[Any, ...], Message] = {}
        # the previous view's text up to the end of its message list, and its messages (the same
        # pure function, memoised: a view that extends the previous one decodes only what is new)
        self._last: tuple[str, tuple[Message, ...]] | None = None

    def _messages(self, view_json: str) -> tuple[Message, ...]:
        """The view's messages. A view that starts with the whole previous message list (no
        compaction since) has only its new messages decoded: the step's cost stays flat."""
        prev = self._last
        if prev is not None and view_json.startswith(prev[0]):
            rest, end = self._decode_from(view_json, len(prev[0]), len(prev[1]))
            if rest is not None:
                return self._remember(view_json, end, prev[1] + rest)
        if view_json.startswith(_MESSAGES_OPEN):
            rest, end = self._decode_from(view_json, len(_MESSAGES_OPEN), 0)
            if rest is not None:
                return self._remember(view_json, end, rest)
        self._last = None
        return tuple(self._message(obj, i) for i, obj in enumerate(json.loads(view_json)["messages"]))

    def _remember(self, view_json: str, end: int, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        self._last = (view_json[:end], messages)
        return messages

    def _decode_from(self, text: str, at: int, first: int) -> tuple[tuple[Message, ...], int] | tuple[None, int]:
        """Decode the message objects of ``text`` from ``at`` (right after the list's ``[``, or
        right after element ``first - 1``) to the list's ``]``, and return them with the index of
        that ``]``; ``None`` when the text is not in that form (the caller parses it whole)."""
        out: list[Message] = []
        i, after_element = at, first > 0
        while True:
            sep = text[i : i + 1]
            if sep == "]":
                return tuple(out), i
            if after_element:
                if sep != ",":
                    return None, i
                i += 1
            try:
                obj, i = _DECODER.raw_decode(text, i)
            except ValueError:
                return None, i
            if not isinstance(obj, dict):
                return None, i
            out.append(self._message(obj, first + len(out)))
            after_element = True

    def _message(self, obj: dict[str, Any], i: int) -> Message:
        memo = self._parsed
        if len(memo) > _MEMO_MAX:
            memo.clear()
        calls = obj.get("tool_calls") or ()
        key = (
            obj.get("role"),
            obj.get("content"),
            obj.get("tool_call_id"),
            obj.get("is_error"),
            tuple((c.get("id"), c.get("name"), c.get("arguments")) for c in calls if isinstance(c, dict)),
        )
        m = memo.get(key)
        if m is None:
            m = memo[key] = message_from_json(obj, where=f"view.messages[{i}]")
        return m

    @property
    def agent_id(self) -> str:
        p = self.profile
        k = f",k={p.last_k_messages}" if p.last_k_messages is not None else ""
        ph = "" if self.phrasing == "plain" else f",phrasing={self.phrasing}"
        if p.name in PROFILES and PROFILES[p.name] == p:
            return f"scripted:{p.name}{k}{ph}"
        return f"scripted:{p.name}(notes={p.read_notes},summaries={p.read_summaries}{k}){ph}"

    def __repr__(self) -> str:
        return f"ScriptedAgent(profile={self.profile.name!r})"

    def act(self, view_json: str) -> Action:
        r = read_view(self._messages(view_json), self.profile)
        kind = _task_kind(r)
        note = _note(r, self.phrasing)
        if kind is None or kind not in _SOLVERS:
            action = _need_task(r, "Done: there is no task left in view.")
            if action.done:
                return Action.finish(action.note)
            return Action(note=note, tool=action.tool, arguments=action.arguments)
        action = _SOLVERS[kind](r)
        # the todo list is worked off right before the step that ends the task
        if action.tool in _FINAL_TOOLS[kind] or (action.done and action.note in _FINAL_DONE):
            todo = _todo_action(r)
            if todo is not None:
                action = todo
        if action.done:
            return Action.finish((note + " " if note else "") + action.note)
        return Action(note=note, tool=action.tool, arguments=action.arguments)


# -- shared reading helpers ------------------------------------------------------------------
def _task_texts(r: Reading) -> tuple[str, ...]:
    """Where the task can be read: a visible re-read of the task file, user messages, summaries."""
    files = tuple(
        c.result
        for c in r.calls_named("read_file")
        if c.arg("path") == _TASK_FILE and _ok(c) and c.placeholder_path is None
    )
    return tuple(t for t in files if t) + r.user_texts + r.summaries


def _task_kind(r: Reading) -> str | None:
    for t in _task_texts(r):
        m = _TASK.search(t)
        if m:
            return m.group(1)
    return None


def _task_header(r: Reading) -> str:
    """The task's first sentence (where every world puts what the task needs)."""
    for t in _task_texts(r):
        m = re.search(r"TASK \w+:[^\n]*?\.(?=\s|$)", t)
        if m:
            return m.group(0)
    return ""


def _task_list(r: Reading, count: re.Pattern[str], item: re.Pattern[str]) -> list[re.Match[str]] | None:
    """The task's list of items (matches of ``item``) from the first task text that holds as many
    as its header's ``count`` says; ``None`` when no visible text holds the whole list."""
    m = count.search(_task_header(r))
    if m is None:
        return None
    n = int(m.group(1))
    for t in _task_texts(r):
        items = list(item.finditer(t))
        if len(items) == n:
            return items
    return None


def _need_task(r: Reading, fallback: str = "Done: the task's details are gone.") -> Action:
    """The task's details are not in view: re-read the task file when the system prompt names one
    (and no read of it is in view), else declare the task done (a literal agent's false "done")."""
    if _TASK_FILE in r.system:
        reads = [c for c in r.calls_named("read_file") if c.arg("path") == _TASK_FILE]
        fetch = _refetch(reads)
        if fetch is not None:
            return fetch
        if not any(_ok(c) for c in reads):
            return Action.call("read_file", path=_TASK_FILE)
    return Action.finish(fallback)


def _refetch(calls: tuple[SeenCall, ...] | list[SeenCall]) -> Action | None:
    """Re-fetch the newest call among ``calls`` whose result is an unread offload placeholder."""
    for c in reversed(list(calls)):
        if c.placeholder_path is not None:
            return Action.call("read_file", path=c.placeholder_path)
    return None


def _ok(c: SeenCall) -> bool:
    return c.result is not None and not c.is_error


_TODO_LIST = re.compile(r"Todo list \(mark each item with mark_todo before you finish\): ([^\n]*)\.")
_TODO_ITEM = re.compile(r"TD-[0-9a-f]{8}")
_TODO_DONE = re.compile(r"Marked (TD-[0-9a-f]{8}) as done")


def _todo_action(r: Reading) -> Action | None:
    items = [i for m in r.search(_TODO_LIST) for i in _TODO_ITEM.findall(m.group(1))]
    done = {m.group(1) for m in r.search(_TODO_DONE)}
    for item in dict.fromkeys(items):
        if item not in done:
            return Action.call("mark_todo", item=item)
    return None


# -- notes: what the last visible message taught the agent -------------------------------------
def _note(r: Reading, phrasing: str) -> str:
    """The facts the last visible message taught the agent, each quoted in a framing drawn from
    the ``phrasing`` vocabulary (seeded by the fact, so equal views give equal notes)."""
    return " ".join(_frame(f, phrasing) for f in _facts(r))


def _frame(fact: str, phrasing: str) -> str:
    templates = PHRASINGS[phrasing]
    h = int.from_bytes(hashlib.sha256(f"{phrasing}\0{fact}".encode()).digest()[:4], "big")
    return templates[h % len(templates)].format(fact=fact)


def _facts(r: Reading) -> list[str]:
    last = r.last
    if last is None:
        return []
    if not last.is_tool_result:
        if "escalate(ticket_id) instead of refund" in last.content:
            return ["the user's correction: escalate(ticket_id) instead of refund"]
        m = _RULES_UPDATE.search(last.content)
        return [m.group(0)] if m else []
    call = next((c for c in r.calls if c.call_id == last.tool_call_id), None)
    if call is None or call.result is None:
        return []
    text = call.result
    facts = [m.group(0) for pat in _NOTE_FACTS for m in pat.finditer(text)]
    if _RULE_VENDOR.search(text) and call.name == "read_file":
        facts.append("RULES.md says: never edit vendor/; run tests before commit; use grep, not search")
    if _POLICY_CANCEL.search(text) and call.name == "read_file":
        facts.append(
            "POLICY.md says: a delivered order is never cancelled; verify_user(user_id) for the order's user before a "
            "postcode change; "
            "Only a delivered order can be returned"
        )
    if _EDITED.search(text):
        facts.append(f"files modified so far: {', '.join(_modified_files(r))}")
    if call.name == "open_doc":
        facts.extend(f"{call.arg('doc_id')}: {m.group(0)}" for m in _VALUE_SENTENCE.finditer(text))
    return facts


# -- fact_chain ---------------------------------------------------------------------------------
_KEY = r"K-[0-9a-f]{8}"
_LOOKUP = re.compile(rf"lookup ({_KEY}) -> ({_KEY})")
_AUDIT_DONE = re.compile(r"[Aa]udit (A-[0-9a-f]{8}):? passed")
_HEADER_FC = re.compile(rf"from key ({_KEY}), do (\d+) lookups, run the audits \(([^)]*)\)")


def _solve_fact_chain(r: Reading) -> Action:
    m = _HEADER_FC.search(_task_header(r))
    if m is None:
        return _need_task(r)
    start, hops = m.group(1), int(m.group(2))
    sections = re.findall(r"A-[0-9a-f]{8}", m.group(3))
    if any(
        ("Submission recorded." in (c.result or "") or "already submitted" in (c.result or ""))
        for c in r.calls_named("submit")
    ) or any("Submission recorded" in n for n in r.notes + r.summaries):
        return Action.finish("Done: the answer was submitted.")
    mapping: dict[str, str] = {}
    for mm in r.search(_LOOKUP):
        mapping.setdefault(mm.group(1), mm.group(2))
    chain = [start]
    while len(chain) <= hops and chain[-1] in mapping:
        chain.append(mapping[chain[-1]])
    if len(chain) <= hops:
        cur = chain[-1]
        fetch = _refetch([c for c in r.calls_named("lookup") if c.arg("key") == cur])
        return fetch or Action.call("lookup", key=cur)
    audited = {mm.group(1) for mm in r.search(_AUDIT_DONE)}
    for s in sections:
        if s not in audited:
            fetch = _refetch([c for c in r.calls_named("audit") if c.arg("section") == s])
            return fetch or Action.call("audit", section=s)
    return Action.call("submit", answer=chain[hops], receipt=chain[1])


# -- mini_repo ----------------------------------------------------------------------------------
_N = r"N-[0-9a-f]{8}"
_FAILED = re.compile(rf"compute_(\w+)\(\) returned '({_N}|)', expected '({_N})'")
_GREEN = re.compile(r"all \d+ tests passed")
_TEST_SUMMARY = re.compile(r"\d+ failed, \d+ passed|all \d+ tests passed")
_EDITED = re.compile(r"Edited (\S+): 1 replacement")
_COMMITTED = re.compile(r"Committed \d+ file")
_ALREADY_COMMITTED = "the work was already committed"
_MODIFIED_NOTE = re.compile(r"files modified so far: ([^\n]*)")
_RULE_VENDOR = re.compile(r"never edit (?:files under )?vendor/", re.IGNORECASE)
_RULE_TESTS = re.compile(r"run tests before commit", re.IGNORECASE)
_RULE_GREP = re.compile(r"use grep,? not search", re.IGNORECASE)


def _modified_files(r: Reading) -> list[str]:
    files = [c.arg("path") for c in r.calls_named("edit") if _ok(c) and _EDITED.search(c.result or "")]
    for n in r.notes:
        for m in _MODIFIED_NOTE.finditer(n):
            files.extend(re.findall(r"[\w./-]+\.py\b", m.group(1)))
    return sorted(set(files))


def _mini_repo_committed(r: Reading) -> bool:
    return any(
        _COMMITTED.search(c.result or "") or _ALREADY_COMMITTED in (c.result or "") for c in r.calls_named("commit")
    ) or any(_COMMITTED.search(n) for n in r.notes + r.summaries)


def _mini_repo_failures(source: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Failing function -> (bad, good) value, from the texts that hold the latest test state."""
    failures: dict[str, tuple[str, str]] = {}
    for t in source:
        for m in _FAILED.finditer(t):
            failures.setdefault(m.group(1), (m.group(2), m.group(3)))
    return failures


def _mini_repo_fix(
    r: Reading, func: str, bad: str, good: str, ok_edits: Sequence[Any], after: int, *, no_vendor: bool, use_grep: bool
) -> Action:
    """The next step towards fixing ``compute_<func>``: edit a file a search found, else fetch the
    search again, else search."""
    # a target edited before the latest run that still fails was the wrong file
    tried = {c.arg("path") for c in ok_edits if c.arg("new") == good and c.position < after}
    finds = [c for c in r.calls if c.name in ("grep", "search") and func in (c.arg("pattern") or c.arg("query"))]
    hits: list[str] = []
    for c in finds:
        hits.extend(re.findall(rf"^(\S+\.py):\d+: def compute_{func}\(\):", c.result or "", re.MULTILINE))
    hits = [h for h in dict.fromkeys(hits) if h not in tried and not (no_vendor and h.startswith("vendor/"))]
    if hits:
        return Action.call("edit", path=hits[0], old=bad, new=good)
    fetch = _refetch(finds)
    if fetch is not None:
        return fetch
    return (
        Action.call("grep", pattern=f"compute_{func}") if use_grep else Action.call("search", query=f"compute_{func}")
    )


def _solve_mini_repo(r: Reading) -> Action:
    if _mini_repo_committed(r):
        return Action.finish("Done: the work is committed.")
    no_vendor = bool(r.search(_RULE_VENDOR))
    tests_first = bool(r.search(_RULE_TESTS))
    use_grep = bool(r.search(_RULE_GREP))
    work = [c for c in r.calls if c.name in ("run_tests", "edit", "grep", "search", "commit")]
    if not (no_vendor or tests_first or use_grep) and not work and not r.search(_FAILED):
        rules_reads = [c for c in r.calls_named("read_file") if c.arg("path") == "RULES.md"]
        return _refetch(rules_reads) or Action.call("read_file", path="RULES.md")
    runs = [c for c in r.calls_named("run_tests") if c.result is not None]
    if runs and not _TEST_SUMMARY.search(runs[-1].result or "") and runs[-1].placeholder_path:
        return Action.call("read_file", path=runs[-1].placeholder_path)
    return _mini_repo_work(r, runs, no_vendor=no_vendor, tests_first=tests_first, use_grep=use_grep)


def _mini_repo_work(r: Reading, runs: Sequence[Any], *, no_vendor: bool, tests_first: bool, use_grep: bool) -> Action:
    """With the rules read: fix what the latest visible test run says fails, then commit."""
    edits = [c for c in r.calls_named("edit") if c.result is not None]
    ok_edits = [c for c in edits if _ok(c)]
    latest = next((c for c in reversed(runs) if _TEST_SUMMARY.search(c.result or "")), None)
    # the latest visible test run is the truth; without one, whatever notes and summaries say
    failures = _mini_repo_failures([latest.result or ""] if latest is not None else list(r.texts()))
    after = latest.position if latest is not None else -1
    if not failures:
        last_edit_pos = max((c.position for c in ok_edits), default=-1)
        green = latest is not None and bool(_GREEN.search(latest.result or ""))
        if (green and after > last_edit_pos) or (ok_edits and not tests_first):
            return Action.call("commit", files=_modified_files(r))
        return Action.call("run_tests")
    goods = {good for _, good in failures.values()}
    if any(c.is_error and c.position > after and c.arg("new") in goods for c in edits):
        return Action.call("run_tests")  # an edit did not apply: learn the real state first
    pending = [
        (f, bad, good)
        for f, (bad, good) in failures.items()
        if not any(c.arg("new") == good and c.position > after for c in ok_edits)
    ]
    if pending:
        func, bad, good = pending[0]
        return _mini_repo_fix(r, func, bad, good, ok_edits, after, no_vendor=no_vendor, use_grep=use_grep)
    if tests_first:
        return Action.call("run_tests")
    return Action.call("commit", files=_modified_files(r))


# -- ticket_queue -------------------------------------------------------------------------------
_T = r"T-[0-9a-f]{8}"
_O = r"O-[0-9a-f]{8}"
_REFUND_TICKET = re.compile(rf"Ticket ({_T}): please refund order ({_O}), amount ([0-9.]+)\.")
_REFER_TICKET = re.compile(
    rf"Ticket ({_T}): the customer of ticket ({_T}) asks whether the refund of ([0-9.]+) for order ({_O}) went through"
)
_QUEUE_EMPTY = "Queue empty"
_REFUND_DONE = re.compile(rf"Refund (RF-[0-9a-f]{{8}}) issued for order ({_O}) \(([0-9.]+)\)")
_CLOSED = re.compile(rf"Ticket ({_T}) closed\b")
_ESCALATED = re.compile(rf"Ticket ({_T}) escalated")
_REPLIED = re.compile(rf"Reply sent on ticket ({_T})")
_CORRECTION = re.compile(r"escalate\(ticket_id\) instead of refund")


def _solve_ticket_queue(r: Reading) -> Action:
    tickets = [c for c in r.calls_named("next_ticket") if c.result is not None]
    current = tickets[-1] if tickets else None
    if current is not None and _QUEUE_EMPTY in (current.result or ""):
        return Action.finish("Done: the queue is empty.")
    closed = {g for m in r.search(_CLOSED) for g in m.groups() if g}
    closed |= {c.arg("ticket_id") for c in r.calls_named("close_ticket") if c.result is not None}
    if current is None:
        return Action.call("next_ticket")
    text = current.result or ""
    refund_t = _REFUND_TICKET.search(text)
    refer_t = _REFER_TICKET.search(text)
    if refund_t is None and refer_t is None:
        return _refetch([current]) or Action.call("next_ticket")
    tid = (refund_t or refer_t).group(1)  # type: ignore[union-attr]
    if tid in closed:
        return Action.call("next_ticket")
    refunds = {m.group(2): m.group(1) for m in reversed(r.search(_REFUND_DONE))}  # first refund wins
    escalated = {m.group(1) for m in r.search(_ESCALATED)} | {
        c.arg("ticket_id") for c in r.calls_named("escalate") if _ok(c)
    }
    replied = {m.group(1) for m in r.search(_REPLIED)}
    if refund_t is not None:
        order, amount = refund_t.group(2), refund_t.group(3)
        if order in refunds or tid in escalated:
            return Action.call("close_ticket", ticket_id=tid)
        if r.search(_CORRECTION):
            return Action.call("escalate", ticket_id=tid)
        return Action.call("refund", order_id=order, amount=amount)
    assert refer_t is not None
    amount, order = refer_t.group(3), refer_t.group(4)
    if tid in replied:
        return Action.call("close_ticket", ticket_id=tid)
    if order in refunds:
        return Action.call("reply", ticket_id=tid, refund_id=refunds[order])
    return Action.call("refund", order_id=order, amount=amount)


# -- retail_db ----------------------------------------------------------------------------------
_ORD = r"O-[0-9a-f]{8}"
_RD_COUNT = re.compile(r"handle the (\d+) customer requests")
_RD_REQ = re.compile(
    rf"^\d+\. (?:(cancel|return) order ({_ORD})|change the delivery postcode of order ({_ORD}) to (P-[0-9a-f]{{8}}))$",
    re.MULTILINE,
)
_RD_ORDER = re.compile(rf"order ({_ORD}): status=(\w+) user=(U-[0-9a-f]{{8}}) postcode=(P-[0-9a-f]{{8}})")
_RD_DONE = re.compile(
    rf"Order ({_ORD}) (?:cancelled|returned)\.|Request on order ({_ORD}) refused|order ({_ORD}) is already "
    r"(?:cancelled|returned)"
)
_RD_POSTCODE = re.compile(rf"Postcode of order ({_ORD}) set to (P-[0-9a-f]{{8}})")
_RD_VERIFIED = re.compile(r"User (U-[0-9a-f]{8}) verified")
_POLICY_CANCEL = re.compile(r"delivered order is never cancelled", re.IGNORECASE)
_POLICY_VERIFY = re.compile(r"verify_user\(user_id\) for the order's user")
_POLICY_RETURN = re.compile(r"Only a delivered order can be returned")


def _solve_retail_db(r: Reading) -> Action:
    reqs = _task_list(r, _RD_COUNT, _RD_REQ)
    if reqs is None:
        return _need_task(r)
    no_cancel, verify, no_return = (
        bool(r.search(_POLICY_CANCEL)),
        bool(r.search(_POLICY_VERIFY)),
        bool(r.search(_POLICY_RETURN)),
    )
    work = [c for c in r.calls if c.name not in ("read_file",)]
    if not (no_cancel or verify or no_return) and not work:
        reads = [c for c in r.calls_named("read_file") if c.arg("path") == "POLICY.md"]
        return _refetch(reads) or Action.call("read_file", path="POLICY.md")
    done = {g for m in r.search(_RD_DONE) for g in m.groups() if g}
    postcodes = {m.group(1): m.group(2) for m in r.search(_RD_POSTCODE)}
    verified = {m.group(1) for m in r.search(_RD_VERIFIED)}
    orders: dict[str, tuple[str, str, str]] = {}
    for m in r.search(_RD_ORDER):
        orders.setdefault(m.group(1), (m.group(2), m.group(3), m.group(4)))
    for req in reqs:
        kind, oid, new_pc = req.group(1) or "postcode", req.group(2) or req.group(3), req.group(4)
        if oid in done or (kind == "postcode" and postcodes.get(oid) == new_pc):
            continue
        if oid not in orders:
            fetch = _refetch([c for c in r.calls_named("get_order") if c.arg("order_id") == oid])
            return fetch or Action.call("get_order", order_id=oid)
        status, user, pc = orders[oid]
        if kind == "postcode":
            if pc == new_pc:
                continue
            if verify and user not in verified:
                return Action.call("verify_user", user_id=user)
            return Action.call("update_postcode", order_id=oid, postcode=new_pc)
        if status in ("cancelled", "returned"):
            continue
        if kind == "cancel":
            return (
                Action.call("refuse", order_id=oid)
                if no_cancel and status == "delivered"
                else Action.call("cancel_order", order_id=oid)
            )
        return (
            Action.call("refuse", order_id=oid)
            if no_return and status == "pending"
            else Action.call("return_order", order_id=oid)
        )
    return Action.finish("Done: every request is handled.")


# -- constraints --------------------------------------------------------------------------------
_MT = r"M-[0-9a-f]{8}"
_CN_COUNT = re.compile(r"for each of the (\d+) meetings")
_CN_MEETING = re.compile(_MT)
_RULES = re.compile(r"never book on (\w+); the cost must not exceed (\d+); prefer room (\w+)")
_RULES_UPDATE = re.compile(
    r"Update from the user: these replace my earlier constraints from now on: never book on \w+; the cost must not "
    r"exceed \d+; prefer room \w+"
)
_CN_SLOT = re.compile(rf"slot (S-[0-9a-f]{{8}}) for ({_MT}): day=(\w+) room=(\w+) cost=(\d+)")
_CN_BOOKED = re.compile(rf"Booked meeting ({_MT}) into slot|meeting ({_MT}) is already booked")


def _solve_constraints(r: Reading) -> Action:
    header_n = _CN_COUNT.search(_task_header(r))
    listed = next((t for t in _task_texts(r) if "Meetings: " in t), "")
    meetings = list(dict.fromkeys(_CN_MEETING.findall(listed.partition("Meetings: ")[2])))
    if header_n is None or len(meetings) != int(header_n.group(1)):
        return _need_task(r)
    update = r.search(_RULES_UPDATE)
    rules_m = (
        _RULES.search(update[-1].group(0))
        if update
        else next((m for t in _task_texts(r) for m in _RULES.finditer(t)), None)
    )
    booked = {g for m in r.search(_CN_BOOKED) for g in m.groups() if g}
    slots: dict[str, list[tuple[str, str, str, int]]] = {}
    for m in r.search(_CN_SLOT):
        lst = slots.setdefault(m.group(2), [])
        if all(x[0] != m.group(1) for x in lst):
            lst.append((m.group(1), m.group(3), m.group(4), int(m.group(5))))
    for mid in meetings:
        if mid in booked:
            continue
        if mid not in slots:
            fetch = _refetch([c for c in r.calls_named("list_slots") if c.arg("meeting_id") == mid])
            return fetch or Action.call("list_slots", meeting_id=mid)
        # a listing offloaded to a file shows a preview: read the whole listing before choosing
        fetch = _refetch([c for c in r.calls_named("list_slots") if c.arg("meeting_id") == mid])
        if fetch is not None:
            return fetch
        options = slots[mid]
        if rules_m is not None:
            day, cap, room = rules_m.group(1), int(rules_m.group(2)), rules_m.group(3)
            ok = [x for x in options if x[1] != day and x[3] <= cap]
            options = [x for x in ok if x[2] == room] + [x for x in ok if x[2] != room] + options
        return Action.call("book", meeting_id=mid, slot_id=options[0][0])
    return Action.finish("Done: every meeting is booked.")


# -- evidence_search ----------------------------------------------------------------------------
_ES_COUNT = re.compile(r"answer the (\d+) questions")
_ES_QUESTION = re.compile(r"(Q-[0-9a-f]{8}): What is the (\w+) of (\w+)\?")
_ES_ANSWERED = re.compile(r"Answer to (Q-[0-9a-f]{8}) recorded|question (Q-[0-9a-f]{8}) was already answered")
_ES_HIT = re.compile(r"^(D-[0-9a-f]{8}) \(", re.MULTILINE)
_VALUE_SENTENCE = re.compile(r"The (\w+) of (\w+) is (V-[0-9a-f]{8})\.")
_ES_NOTED = re.compile(r"(D-[0-9a-f]{8}): The (\w+) of (\w+) is (V-[0-9a-f]{8})\.")


def _solve_evidence_search(r: Reading) -> Action:
    qs = _task_list(r, _ES_COUNT, _ES_QUESTION)
    if qs is None:
        return _need_task(r)
    answered = {g for m in r.search(_ES_ANSWERED) for g in m.groups() if g}
    opened = [c for c in r.calls_named("open_doc") if c.result is not None]
    for q in qs:
        qid, attr, subj = q.group(1), q.group(2), q.group(3)
        if qid in answered:
            continue
        evidence: dict[str, str] = {}
        for c in opened:
            for m in _VALUE_SENTENCE.finditer(c.result or ""):
                if (m.group(1), m.group(2)) == (attr, subj):
                    evidence.setdefault(c.arg("doc_id"), m.group(3))
        for m in r.search(_ES_NOTED):
            if (m.group(2), m.group(3)) == (attr, subj):
                evidence.setdefault(m.group(1), m.group(4))
        if evidence:
            value = next(iter(evidence.values()))
            return Action.call(
                "answer", question_id=qid, value=value, evidence=sorted(d for d, v in evidence.items() if v == value)
            )
        query = f"the {attr} of {subj}"
        searches = [c for c in r.calls_named("search") if c.arg("query") == query]
        hits = [h for c in searches for h in _ES_HIT.findall(c.result or "")]
        read = {c.arg("doc_id") for c in opened if c.placeholder_path is None}
        for h in dict.fromkeys(hits):
            if h not in read:
                fetch = _refetch([c for c in opened if c.arg("doc_id") == h])
                return fetch or Action.call("open_doc", doc_id=h)
        fetch = _refetch(searches)
        if fetch is not None:
            return fetch
        if not hits:
            return Action.call("search", query=query)
    return Action.finish("Done: every question is answered.")


# -- debug_session ------------------------------------------------------------------------------
_HYP = r"H-[0-9a-f]{8}"
_DS_LISTED = re.compile(rf"^hypothesis ({_HYP}): ", re.MULTILINE)
_DS_FAILED = re.compile(rf"hypothesis ({_HYP}) failed")
_DS_FIXED = re.compile(rf"hypothesis ({_HYP}) fixed the bug")
_DS_COMMITTED = re.compile(rf"Committed fix ({_HYP})|a fix was already committed")


def _solve_debug_session(r: Reading) -> Action:
    if "TASK debug_session: find the fix" not in _task_header(r):
        return _need_task(r)
    if r.search(_DS_COMMITTED):
        return Action.finish("Done: the working fix was committed.")
    fixed = r.search(_DS_FIXED)
    if fixed:
        return Action.call("commit", hypothesis_id=fixed[0].group(1))
    failed = {m.group(1) for m in r.search(_DS_FAILED)}
    # a try whose result was offloaded and not read back: its verdict is in the file
    for c in reversed(r.calls_named("try_fix")):
        if c.placeholder_path is not None and c.arg("hypothesis_id") not in failed:
            return Action.call("read_file", path=c.placeholder_path)
    lists = [c for c in r.calls_named("list_hypotheses") if c.result is not None]
    listed = [h for c in lists for h in _DS_LISTED.findall(c.result or "")]
    if not listed:
        return _refetch(lists) or Action.call("list_hypotheses")
    for h in dict.fromkeys(listed):
        if h not in failed:
            return Action.call("try_fix", hypothesis_id=h)
    # every hypothesis in view failed: an offloaded list shows only its preview, read it whole
    return _refetch(lists) or Action.finish("Done: no hypothesis is left to try.")


# -- artifact_trail -----------------------------------------------------------------------------
_AT_COUNT = re.compile(r"publish the (\d+) components")
_AT_BUILT = re.compile(r"built artifact (dist/([\w-]+)/[\w.-]+\.whl)@(sha256-[0-9a-f]{12})")
_AT_TESTED = re.compile(r"tested (dist/[\w-]+/[\w.-]+\.whl): ok")
_AT_PUBLISHED = re.compile(r"Published \d+ artifact|the release was already published")


def _solve_artifact_trail(r: Reading) -> Action:
    header_n = _AT_COUNT.search(_task_header(r))
    listed = next((t for t in _task_texts(r) if "\nComponents: " in t), "")
    comps = [
        c.strip() for c in listed.partition("\nComponents: ")[2].split("\n")[0].rstrip(".").split(",") if c.strip()
    ]
    if header_n is None or len(comps) != int(header_n.group(1)):
        return _need_task(r)
    if r.search(_AT_PUBLISHED):
        return Action.finish("Done: the release is published.")
    latest: dict[str, tuple[str, str]] = {}
    for m in r.search(_AT_BUILT):  # tool results before notes: a note repeats its own result
        latest[m.group(2)] = (m.group(1), m.group(3))
    for c in r.calls_named("build"):
        for m in _AT_BUILT.finditer(c.result or ""):
            latest[m.group(2)] = (m.group(1), m.group(3))  # the newest visible build wins
    tested = {m.group(1) for m in r.search(_AT_TESTED)}
    for comp in comps:
        if comp not in latest:
            fetch = _refetch([c for c in r.calls_named("build") if c.arg("component") == comp])
            return fetch or Action.call("build", component=comp)
        path = latest[comp][0]
        if path not in tested:
            fetch = _refetch([c for c in r.calls_named("test_artifact") if c.arg("path") == path])
            return fetch or Action.call("test_artifact", path=path)
    return Action.call("publish", manifest=[f"{latest[c][0]}@{latest[c][1]}" for c in comps])


#: lines of a tool result the agent's note quotes (the world's own words)
_NOTE_FACTS: tuple[re.Pattern[str], ...] = (
    _LOOKUP,
    _AUDIT_DONE,
    re.compile(r"Submission recorded"),
    _FAILED,
    _GREEN,
    _COMMITTED,
    _REFUND_DONE,
    _CLOSED,
    _ESCALATED,
    _REPLIED,
    _RD_ORDER,
    _RD_DONE,
    _RD_POSTCODE,
    _RD_VERIFIED,
    re.compile(rf"Booked meeting {_MT} into slot S-[0-9a-f]{{8}}"),
    re.compile(r"Answer to Q-[0-9a-f]{8} recorded"),
    _DS_FAILED,
    _DS_FIXED,
    re.compile(rf"Committed fix {_HYP}"),
    _AT_BUILT,
    _AT_TESTED,
    re.compile(r"Published \d+ artifact"),
)

_SOLVERS: dict[str, Callable[[Reading], Action]] = {
    "fact_chain": _solve_fact_chain,
    "mini_repo": _solve_mini_repo,
    "ticket_queue": _solve_ticket_queue,
    "retail_db": _solve_retail_db,
    "constraints": _solve_constraints,
    "evidence_search": _solve_evidence_search,
    "debug_session": _solve_debug_session,
    "artifact_trail": _solve_artifact_trail,
}
#: the calls that end a task: the todo list is worked off before them
_FINAL_TOOLS: dict[str, tuple[str, ...]] = {
    "fact_chain": ("submit",),
    "mini_repo": ("commit",),
    "ticket_queue": (),
    "retail_db": (),
    "constraints": (),
    "evidence_search": (),
    "debug_session": ("commit",),
    "artifact_trail": ("publish",),
}
#: "done" notes that end a task by finishing it (worlds without a final call)
_FINAL_DONE = (
    "Done: the queue is empty.",
    "Done: every request is handled.",
    "Done: every meeting is booked.",
    "Done: every question is answered.",
)
