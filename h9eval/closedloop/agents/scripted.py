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

It knows the three built-in worlds' text conventions (the way a skilled user knows the tools'
output formats) but imports nothing from :mod:`h9eval.closedloop.worlds`: everything it uses
comes from the view.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from h9eval.closedloop.agents.base import Action, parse_view
from h9eval.closedloop.agents.reading import (
    PROFILES,
    ReaderProfile,
    Reading,
    SeenCall,
    read_view,
)
from h9eval.core.errors import ConfigError, did_you_mean

__all__ = ["ScriptedAgent"]

_TASK = re.compile(r"TASK (fact_chain|mini_repo|ticket_queue):")


class ScriptedAgent:
    """The scripted agent; ``profile`` is a :data:`PROFILES` name or a :class:`ReaderProfile`."""

    def __init__(self, profile: str | ReaderProfile = "full") -> None:
        if isinstance(profile, str):
            if profile not in PROFILES:
                raise ConfigError(did_you_mean(profile, PROFILES, what="reader profile"))
            profile = PROFILES[profile]
        self.profile = profile

    @property
    def agent_id(self) -> str:
        p = self.profile
        k = f",k={p.last_k_messages}" if p.last_k_messages is not None else ""
        return f"scripted:{p.name}{k}" if p.name in PROFILES and PROFILES[p.name] == p else f"scripted:{p.name}(notes={p.read_notes},summaries={p.read_summaries}{k})"

    def __repr__(self) -> str:
        return f"ScriptedAgent(profile={self.profile.name!r})"

    def act(self, view_json: str) -> Action:
        view = parse_view(view_json)
        r = read_view(view.messages, self.profile)
        kind = _task_kind(r)
        if kind is None:
            return Action.finish("Done: there is no task left in view.")
        note = _note(r)
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
def _task_kind(r: Reading) -> str | None:
    for t in r.user_texts + r.summaries:
        m = _TASK.search(t)
        if m:
            return m.group(1)
    return None


def _task_header(r: Reading) -> str:
    """The task's first sentence (where every world puts what the task needs)."""
    for t in r.user_texts + r.summaries:
        m = re.search(r"TASK \w+:[^\n]*?\.(?=\s|$)", t)
        if m:
            return m.group(0)
    return ""


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
def _note(r: Reading) -> str:
    last = r.last
    if last is None:
        return ""
    if not last.is_tool_result:
        if "escalate(ticket_id) instead of refund" in last.content:
            return "Decided to escalate from now on because of the user's correction: escalate(ticket_id) instead of refund."
        return ""
    call = next((c for c in r.calls if c.call_id == last.tool_call_id), None)
    if call is None or call.result is None:
        return ""
    text = call.result
    parts: list[str] = []
    for m in _LOOKUP.finditer(text):
        parts.append(f"Decided to continue the chain because lookup {m.group(1)} -> {m.group(2)}.")
    for m in _AUDIT_DONE.finditer(text):
        parts.append(f"Audit {m.group(1)} passed, so I decided it is done.")
    if "Submission recorded." in text:
        parts.append("Submission recorded, so I decided the task is done.")
    if _RULE_VENDOR.search(text) and call.name == "read_file":
        parts.append("Decided to follow RULES.md because it says: never edit vendor/; run tests before commit; use grep, not search.")
    for m in _FAILED.finditer(text):
        parts.append(f"Tests fail because compute_{m.group(1)}() returned '{m.group(2)}', expected '{m.group(3)}'.")
    if _GREEN.search(text):
        parts.append("Decided the fix works because all tests passed.")
    if _EDITED.search(text):
        mods = ", ".join(_modified_files(r))
        parts.append(f"Edited {call.arg('path')} because its function returned the wrong value; files modified so far: {mods}")
    if _COMMITTED.search(text):
        parts.append("Committed the work, so I decided the task is done.")
    for m in _REFUND_DONE.finditer(text):
        parts.append(f"Refund {m.group(1)} issued for order {m.group(2)} ({m.group(3)}), because the ticket asked for it.")
    for m in _CLOSED.finditer(text):
        parts.append(f"Closed ticket {m.group(1)} because it was handled.")
    for m in _ESCALATED.finditer(text):
        parts.append(f"Ticket {m.group(1)} escalated because of the correction.")
    for m in _REPLIED.finditer(text):
        parts.append(f"Reply sent on ticket {m.group(1)}, so I decided it is answered.")
    return " ".join(parts)


# -- fact_chain ---------------------------------------------------------------------------------
_KEY = r"K-[0-9a-f]{8}"
_LOOKUP = re.compile(rf"lookup ({_KEY}) -> ({_KEY})")
_AUDIT_DONE = re.compile(r"[Aa]udit (A-[0-9a-f]{8}):? passed")
_HEADER_FC = re.compile(rf"from key ({_KEY}), do (\d+) lookups, run the audits \(([^)]*)\)")


def _solve_fact_chain(r: Reading) -> Action:
    m = _HEADER_FC.search(_task_header(r))
    if m is None:
        return Action.finish("Done: the task's details are gone.")
    start, hops = m.group(1), int(m.group(2))
    sections = re.findall(r"A-[0-9a-f]{8}", m.group(3))
    if any(("Submission recorded." in (c.result or "") or "already submitted" in (c.result or "")) for c in r.calls_named("submit")) or any(
        "Submission recorded" in n for n in r.notes + r.summaries
    ):
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
            files.extend(p.strip() for p in m.group(1).split(",") if p.strip())
    return sorted(set(files))


def _mini_repo_committed(r: Reading) -> bool:
    return any(_COMMITTED.search(c.result or "") or _ALREADY_COMMITTED in (c.result or "") for c in r.calls_named("commit")) or any(
        "Committed the work" in n for n in r.notes + r.summaries
    )


def _mini_repo_failures(source: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Failing function -> (bad, good) value, from the texts that hold the latest test state."""
    failures: dict[str, tuple[str, str]] = {}
    for t in source:
        for m in _FAILED.finditer(t):
            failures.setdefault(m.group(1), (m.group(2), m.group(3)))
    return failures


def _mini_repo_fix(r: Reading, func: str, bad: str, good: str, ok_edits: Sequence[Any], after: int, *, no_vendor: bool, use_grep: bool) -> Action:
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
    return Action.call("grep", pattern=f"compute_{func}") if use_grep else Action.call("search", query=f"compute_{func}")


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
    pending = [(f, bad, good) for f, (bad, good) in failures.items() if not any(c.arg("new") == good and c.position > after for c in ok_edits)]
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
_REFER_TICKET = re.compile(rf"Ticket ({_T}): the customer of ticket ({_T}) asks whether the refund of ([0-9.]+) for order ({_O}) went through")
_QUEUE_EMPTY = "Queue empty"
_REFUND_DONE = re.compile(rf"Refund (RF-[0-9a-f]{{8}}) issued for order ({_O}) \(([0-9.]+)\)")
_CLOSED = re.compile(rf"(?:Ticket ({_T}) closed\.|Closed ticket ({_T}))")
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
    escalated = {m.group(1) for m in r.search(_ESCALATED)} | {c.arg("ticket_id") for c in r.calls_named("escalate") if _ok(c)}
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


_SOLVERS: dict[str, Callable[[Reading], Action]] = {
    "fact_chain": _solve_fact_chain,
    "mini_repo": _solve_mini_repo,
    "ticket_queue": _solve_ticket_queue,
}
#: the calls that end a task: the todo list is worked off before them
_FINAL_TOOLS: dict[str, tuple[str, ...]] = {"fact_chain": ("submit",), "mini_repo": ("commit",), "ticket_queue": ()}
#: "done" notes that end a task by finishing it (ticket_queue has no final call)
_FINAL_DONE = ("Done: the queue is empty.",)
