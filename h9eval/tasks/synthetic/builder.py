"""The synthetic session builder: plans the narrative over the turns, sizes every tool result,
renders the messages and resolves the planted ground truth to message indices."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from h9eval.compaction.offload import (
    HOOK_EXEMPT_TOOLS,
    OFFLOAD_COMPACTION_THRESHOLD_BYTES,
    OFFLOAD_HOOK_THRESHOLD_BYTES,
)
from h9eval.core.messages import Message, ToolCall
from h9eval.core.tokens import estimate_tokens
from h9eval.tasks.model import AnchorTruth, Fact, Intent, IntentChange, Task, TaskSource
from h9eval.tasks.synthetic import content as C
from h9eval.tasks.synthetic.slots import (
    KIND_WEIGHTS,
    SLOTS,
    slot_entities,
    Slot,
    slot_value,
)
from h9eval.tasks.synthetic.spec import (
    LARGE_MIN_BYTES,
    MEDIUM_MAX_BYTES,
    MEDIUM_MIN_BYTES,
    SMALL_MAX_BYTES,
    SyntheticSpec,
)

GENERATOR_VERSION = "1"
"""Bumped whenever the output for a given preset and seed changes."""


# ---------------------------------------------------------------------------------------------
# narrative vocabularies
# ---------------------------------------------------------------------------------------------
_PY_APPROACHES = (
    ("wrapping {fn} in functools.lru_cache", "lru_cache", "TypeError", "unhashable type: 'dict'"),
    ("pinning {dep} to an older release", "{dep}", "ImportError", "cannot import name '{cls}' from '{dep}'"),
    ("making {fn} a coroutine", "coroutine", "RuntimeError", "This event loop is already running"),
    ("switching the {noun} fixture to scope='session'", "scope='session'", "ScopeMismatch",
     "You tried to access the function scoped fixture monkeypatch with a session scoped request object"),
    ("replacing the settings dict in {mod} with a frozen dataclass", "frozen dataclass", "FrozenInstanceError", "cannot assign to field '{noun}'"),
    ("monkeypatching time.sleep in the test", "time.sleep", "AssertionError", "assert {x} == {y}"),
    ("casting the {noun} amounts to Decimal", "Decimal", "InvalidOperation", "[<class 'decimal.ConversionSyntax'>]"),
    ("caching the {noun} client at module level", "module level", "RuntimeError", "Event loop is closed"),
    ("clamping the delay inside {fn} with max() instead of min()", "max()", "AssertionError", "assert {x} <= {y}"),
)  # fmt: skip
_GO_APPROACHES = (
    ("switching {fn} to a sync.Map", "sync.Map", "panic", "interface conversion: interface {{}} is nil, not *{pkg}.{cls}"),
    ("adding a context.WithTimeout around {fn}", "context.WithTimeout", "timeout", "{op}: context deadline exceeded"),
    ("buffering the results channel in {fn}", "results channel", "fatal error", "all goroutines are asleep - deadlock!"),
    ("reusing one http.Client across {fn} calls", "http.Client", "race detected", "WARNING: DATA RACE in {fn}"),
    ("pinning {dep} to an older version", "{dep}", "build failed", "undefined: {cls}"),
    ("replacing the mutex in {cls} with an atomic.Int64", "atomic.Int64", "assertion failed", "expected {y}, got {x}"),
    ("caching the {noun} lookups in a package-level map", "package-level map", "fatal error", "concurrent map writes"),
)  # fmt: skip
_DECISIONS = (
    ("keep the fix inside {mod} rather than changing its callers", "because {n} call sites in other services depend on the current signature", "inside {mod}"),
    ("use {dep} instead of a hand-written helper", "because it is already a dependency and handles the edge cases", "{dep}"),
    ("store the cap in {const} instead of hard-coding it", "so ops can tune it per environment", "{const}"),
    ("write the regression test {newtest} before touching the implementation", "so the failure is pinned down first", "{newtest}"),
    ("return a typed {cls}Error instead of a bare exception", "so callers can tell timeouts from bad input", "{cls}Error"),
    ("keep {fn} as a deprecated alias for one release", "because downstream jobs still call it", "deprecated alias"),
    ("process {noun} records in chunks of {n}", "to keep memory bounded on large tenants", "chunks of {n}"),
    ("make the {noun} cache copy-on-write instead of locking it", "because reads outnumber writes a hundred to one", "copy-on-write"),
    ("measure deadlines with a monotonic clock", "because wall-clock jumps on CI explain the flakiness", "monotonic clock"),
)  # fmt: skip
_STEPS = (
    ("add {newtest} to {testfile}", "{newtest}"),
    ("update CHANGELOG.md under {ver}", "CHANGELOG.md"),
    ("remove the debug logging from {src}", "debug logging"),
    ("bump the version to {ver}", "{ver}"),
    ('open a draft PR titled "{title}"', "{title}"),
    ("double-check {const} in {cfg}", "{const}"),
    ("re-run the full suite with `{testcmd}`", "full suite"),
    ("document the new behaviour in {doc}", "{doc}"),
)  # fmt: skip
_INTENT_CHANGES = (
    ("also cover the async client in {newsrc}", "{newsrc}"),
    ("add a regression test named {newtest}", "{newtest}"),
    ("keep backwards compatibility with the v{n} config format", "v{n} config format"),
    ("leave {src} alone, the platform team is rewriting it", "{src}"),
    ("expose the cap as the environment variable {env}", "{env}"),
    ("target the {branch} branch instead of main", "{branch}"),
    ("emit a structured warning named {event} whenever the cap is hit", "{event}"),
)  # fmt: skip


@dataclass
class _Turn:
    """What the plan puts into one turn before rendering."""

    tools: list[str] = field(default_factory=list)
    user: list[str] = field(default_factory=list)  # sentences of a user message before the turn
    say: list[str] = field(default_factory=list)  # sentences of the assistant text before the leads
    extra: list[str] = field(default_factory=list)  # lines planted in the first tool result
    failure: C.Failure | None = None  # the run_tests call of a failed attempt
    edit_desc: str | None = None


class _Fields(dict):  # type: ignore[type-arg]
    """Lazy template fields: ``factories[name]()`` runs on first lookup, then is cached."""

    def __init__(self, factories: Mapping[str, Any]) -> None:
        super().__init__()
        self._factories = factories

    def __missing__(self, key: str) -> Any:
        v = self[key] = self._factories[key]()
        return v


@dataclass
class _Pending:
    """A ground-truth item whose message index is known only after assembly."""

    turn: int
    where: str  # "user", "assistant" or "result" (first tool result of the turn)
    make: Any  # callable(index) -> the record (or a mutable dict for facts)


# ---------------------------------------------------------------------------------------------
# the builder
# ---------------------------------------------------------------------------------------------
class SyntheticBuilder:
    def __init__(self, spec: SyntheticSpec, seed: int, preset: str, overrides: dict[str, Any]) -> None:
        self.spec = spec
        self.seed = seed
        self.preset = preset
        self.overrides = overrides
        self.rng = random.Random(seed)
        # Bulk text has its own stream so that reshaping a template does not move the narrative.
        self.crng = random.Random(self.rng.getrandbits(64))
        self.w = C.make_world(self.crng, pool_blocks=min(400, 40 + spec.n_turns // 10))
        self.T = spec.n_turns
        self.turns = [_Turn() for _ in range(self.T)]
        self.pending: list[_Pending] = []
        self.facts: list[dict[str, Any]] = []
        self.used: dict[str, None] = {}  # answers, questions and generated names already in use

    # -- helpers --------------------------------------------------------------------------
    def _fresh(self, make: Any, tries: int = 50) -> str:
        """A generated name not used before in this session (keeps probes unambiguous); when the
        vocabulary runs out, a counter is put before the extension (``client_2.py``)."""
        for _ in range(tries):
            v = make()
            if v not in self.used:
                self.used[v] = None
                return v
        base = make()
        head, dot, ext = base.rpartition(".") if "." in base.rsplit("/", 1)[-1] else (base, "", "")
        k = 2
        while (v := f"{head}_{k}{dot}{ext}") in self.used:
            k += 1
        self.used[v] = None
        return v

    def _fmt(self) -> _Fields:
        """Template fields drawn from the world; each is drawn on first use (``format_map``), so
        unique names are only reserved when a template actually uses them."""
        r, w = self.rng, self.w
        is_py = w.lang == "python"
        return _Fields({
            "fn": lambda: r.choice(w.functions), "mod": lambda: r.choice(w.src_files), "src": lambda: r.choice(w.src_files),
            "noun": lambda: r.choice(C.NOUNS), "dep": lambda: r.choice(w.deps)[0], "cls": lambda: r.choice(w.classes),
            "const": lambda: r.choice(w.consts), "n": lambda: r.randint(3, 64), "x": lambda: r.randint(31, 999),
            "y": lambda: r.randint(1, 30), "pkg": lambda: w.pkg, "op": lambda: r.choice(C.OPERATIONS),
            "testfile": lambda: r.choice(w.test_files), "cfg": lambda: r.choice(w.config_files),
            "doc": lambda: r.choice(w.doc_files), "testcmd": lambda: w.test_cmd,
            "ver": lambda: self._fresh(lambda: f"0.{r.randint(2, 40)}.{r.randint(0, 9)}"),
            "newtest": lambda: self._fresh(lambda: (
                f"test_{r.choice(w.py_functions)}_{r.choice(('regression', 'cap', 'empty_input', 'unicode', 'overflow'))}" if is_py
                else f"Test{r.choice(w.go_functions)}{r.choice(('Regression', 'Cap', 'EmptyInput', 'Overflow'))}")),
            "newsrc": lambda: self._fresh(lambda: (
                f"src/{w.pkg}/{r.choice(('aio', 'v2', 'streaming', 'compat'))}/{r.choice(C.MODULES)}.py" if is_py
                else f"internal/{r.choice(('async', 'v2', 'stream'))}{r.choice(C.MODULES)}/client.go")),
            "env": lambda: self._fresh(lambda: f"{w.pkg.upper()}_{r.choice(C.NOUNS).upper()}_{r.choice(('CAP', 'MAX', 'LIMIT'))}"),
            "branch": lambda: self._fresh(lambda: f"hotfix/{r.randint(1, 9)}.{r.randint(0, 20)}"),
            "event": lambda: self._fresh(lambda: f"{r.choice(C.NOUNS)}_{r.choice(('cap_hit', 'limit_reached', 'budget_exhausted'))}"),
            "title": lambda: self._fresh(lambda: f"{w.ticket_prefix}-{r.randint(1000, 9999)}: {r.choice(('clamp', 'fix', 'harden'))} {r.choice(C.NOUNS)} {r.choice(('handling', 'limits', 'retries'))}"),
        })  # fmt: skip

    def _turn_in(self, lo: int, hi: int) -> int:
        """A turn in [lo, hi] clipped to the usable range 1..T-2 (the last turn is the summary)."""
        lo = max(1, min(lo, self.T - 2))
        hi = max(lo, min(hi, self.T - 2))
        return self.rng.randint(lo, hi)

    def _at(self, turn: int, where: str, make: Any) -> None:
        self.pending.append(_Pending(turn, where, make))

    # -- planning -------------------------------------------------------------------------
    def _plan_statement(self) -> None:
        r, w = self.rng, self.w
        f = self._fmt()
        if w.lang == "python":
            test = r.choice(w.tests)
            tfile = test.split("::")[0]
            et, em = r.choice(C.PY_ERRORS)
        else:
            test = r.choice(w.tests)
            tfile = r.choice(w.test_files)
            et, em = r.choice(C.GO_ERRORS)
        em = em.format(x=f["x"], y=f["y"], noun=f["noun"], fn=f["fn"], kw="timeout", op=f["op"],
                       hex=f"{r.getrandbits(32):08x}", hex2=f"{r.getrandbits(32):08x}")  # fmt: skip
        self.target = C.Failure(test=test, file=tfile, err_type=et, err_msg=em)
        mod, fn, repo = f["mod"], f["fn"], f"{w.org}/{w.repo}"
        ticket = self._fresh(lambda: f"{w.ticket_prefix}-{r.randint(1000, 9999)}")
        sha = f"{r.getrandbits(28):07x}"
        kind = r.randrange(3)
        if kind == 0:
            self.statement = (
                f"In {repo}, the test {test} has been failing since commit {sha} with `{et}: {em}`. "
                f"Please find the root cause (probably in {mod}, around {fn}) and fix it. Don't skip or xfail "
                f"the test, and keep the public API of {mod} unchanged. Ticket: {ticket}."
            )
            self.goal = f"fix the failing test {test} in {repo}"
            self.key_terms = (repo, test, mod)
        elif kind == 1:
            self.statement = (
                f"In {repo}, add a configurable cap to {fn} in {mod}: the computed delay must never exceed "
                f"{f['const']}. Add tests to {tfile} (the new test {test} currently fails with `{et}: {em}`) "
                f"and make sure `{w.test_cmd}` passes. Ticket: {ticket}."
            )
            self.goal = f"add a configurable cap to {fn} in {mod}"
            self.key_terms = (repo, fn, mod)
        else:
            self.statement = (
                f"The CI job for {repo} is flaky: {test} fails in roughly one of five runs with `{et}: {em}`. "
                f"Make it deterministic without adding sleeps or retries to the test itself; the race is most "
                f"likely in {mod}. Ticket: {ticket}."
            )
            self.goal = f"make the flaky test {test} in {repo} deterministic"
            self.key_terms = (repo, test, mod)
        # Before this turn the target test still fails; from it on it passes (the fix landed).
        self.fix_turn = max(2, round(self.T * 0.75))

    def _plan_tools(self) -> None:
        r, s = self.rng, self.spec
        names = ("read_file", "bash", "grep", "run_tests", "edit_file", "list_dir", "write_file", "git_diff")
        weights = (0.25, 0.17, 0.12, 0.15, 0.15, 0.06, 0.03, 0.07)
        for t in range(self.T - 1):
            k = 1
            if r.random() < s.multi_call_share:
                k = r.choice((2, 2, 3))
            self.turns[t].tools = r.choices(names, weights, k=k)

    def _plan_facts(self) -> None:
        r, s, w = self.rng, self.spec, self.w
        kinds = [k for k, _ in KIND_WEIGHTS]
        kw = [p for _, p in KIND_WEIGHTS]
        by_kind = {k: [sl for sl in SLOTS if sl.kind == k] for k in kinds}
        n_sup = round(s.n_facts * s.superseded_share)
        sup = r.sample(range(s.n_facts), n_sup) if s.n_facts else []
        last_intro = max(1, int((self.T - 2) * 0.85))
        for i in range(s.n_facts):
            kind = r.choices(kinds, kw)[0]
            for _ in range(50):
                slot = r.choice(by_kind[kind])
                e = r.choice(slot_entities(w, slot.entities))
                q = slot.question.format(e=e)
                if q not in self.used:
                    break
                kind = r.choices(kinds, kw)[0]  # this slot may be used up: maybe another kind
            else:  # nearly full: take the first free (slot, entity) in a fixed order
                slot, e, q = next(
                    (sl, e, sl.question.format(e=e)) for sl in SLOTS for e in slot_entities(w, sl.entities)
                    if sl.question.format(e=e) not in self.used
                )  # fmt: skip
            self.used[q] = None
            ans, variants = self._value(slot, e)
            superseded = i in sup and self.T - 2 >= 2
            t1 = self._turn_in(1, min(last_intro, self.T - 3) if superseded else last_intro)
            f1 = self._plant(slot, e, q, ans, variants, t1, None)
            if superseded:
                new, nvar = self._value(slot, e)
                t2 = self._turn_in(t1 + 1, self.T - 2)
                f2 = self._plant(slot, e, q, new, nvar, t2, ans)
                f1["superseded_by"] = f2

    def _value(self, slot: Slot, e: str) -> tuple[str, tuple[str, ...]]:
        for _ in range(200):
            v, variants = slot_value(self.rng, self.w, slot, e)
            if v not in self.used:
                self.used[v] = None
                return v, tuple(x for x in dict.fromkeys(variants) if x != v)
        raise AssertionError("values exhausted")  # pragma: no cover

    def _plant(
        self, slot: Slot, e: str, q: str, ans: str, variants: tuple[str, ...], turn: int, old: str | None
    ) -> dict[str, Any]:
        by_user = self.rng.random() < self.spec.user_fact_share
        tpl = (
            (slot.user if old is None else slot.change_user)
            if by_user
            else (slot.found if old is None else slot.change_found)
        )
        text = tpl.format(e=e, v=ans, old=old)
        fact: dict[str, Any] = dict(kind=slot.kind, question=q, answer=ans, variants=variants, text=text, index=None)
        if by_user:
            self.turns[turn].user.append(text)
        else:
            self.turns[turn].extra.append(text)
        self.facts.append(fact)
        self._at(turn, "user" if by_user else "result", lambda i, fact=fact: fact.__setitem__("index", i))
        return fact

    def _plan_intent(self) -> None:
        r, s = self.rng, self.spec
        n = s.n_intent_changes
        self.intent_changes: list[dict[str, Any]] = []
        statement = self.goal
        picks = [
            _INTENT_CHANGES[j % len(_INTENT_CHANGES)]
            for j in r.sample(range(len(_INTENT_CHANGES)), min(n, len(_INTENT_CHANGES)))
        ]
        while len(picks) < n:
            picks.append(r.choice(_INTENT_CHANGES))
        for j, (tpl, key) in enumerate(picks):
            lo = int(self.T * (0.15 + 0.7 * j / n))
            hi = int(self.T * (0.15 + 0.7 * (j + 1) / n)) - 1
            t = self._turn_in(lo, hi)
            f = self._fmt()
            clause, term = tpl.format_map(f), key.format_map(f)
            statement = f"{statement}; also {clause}"
            msg = f"Change of plan: {clause}. To restate the goal: {statement}."
            self.turns[t].user.append(msg)
            self.turns[t].say.append(f"Understood, I'll {clause} as well.")
            rec = dict(statement=statement, key_terms=(term,))
            self.intent_changes.append(rec)
            self._at(t, "user", lambda i, rec=rec: rec.__setitem__("index", i))

    def _plan_failures(self) -> None:
        r, s, w = self.rng, self.spec, self.w
        approaches = _PY_APPROACHES if w.lang == "python" else _GO_APPROACHES
        n = s.n_failed_attempts
        if not n:
            return
        try_turns = sorted(r.sample(range(1, self.T - 2), n))
        order = r.sample(range(len(approaches)), min(n, len(approaches)))
        while len(order) < n:
            order.append(r.randrange(len(approaches)))
        for t, j in zip(try_turns, order):
            tpl, key, et, em = approaches[j]
            f = self._fmt()
            approach, term = tpl.format_map(f), key.format_map(f)
            msg = em.format_map(f)
            tr = self.turns[t]
            tr.tools = ["edit_file", "run_tests"]
            tr.say.append(f"Let me try {approach}.")
            tr.edit_desc = approach
            test = self.target
            tr.failure = C.Failure(test=test.test, file=test.file, err_type=et, err_msg=msg)
            self.turns[t + 1].say.append(
                f"That didn't work: {approach} fails with `{et}: {msg}`. Reverting it and trying something else."
            )
            text = f"Tried {approach}; it failed with {et}: {msg}"
            self._at(t + 1, "assistant", lambda i, text=text, term=term, et=et: AnchorTruth(
                kind="tried_solution", message_index=i, text=text, key_terms=(term, et)))  # fmt: skip

    def _plan_decisions(self) -> None:
        r = self.rng
        for _ in range(self.spec.n_decisions):
            tpl, why, key = _DECISIONS[r.randrange(len(_DECISIONS))]
            f = self._fmt()
            choice, rationale, term = tpl.format_map(f), why.format_map(f), key.format_map(f)
            t = self._turn_in(1, self.T - 2)
            self.turns[t].say.append(f"Decision: {choice}, {rationale}.")
            text = f"{choice}, {rationale}"
            self._at(t, "assistant", lambda i, text=text, term=term: AnchorTruth(
                kind="key_decision", message_index=i, text=text, key_terms=(term,)))  # fmt: skip

    def _plan_milestones(self) -> None:
        r, w = self.rng, self.w
        n = self.spec.n_milestones
        turns = sorted(self._turn_in(1, self.T - 2) for _ in range(n))
        total = r.randint(30, 240)
        passed = r.randint(1, total // 3)
        for t in turns:
            passed = min(total, passed + r.randint(1, max(1, total // max(1, n))))
            f = self._fmt()
            kind = r.randrange(3)
            if kind == 0:
                text, term = f"{passed}/{total} tests in {f['testfile']} pass now", f"{passed}/{total}"
            elif kind == 1:
                pct = r.randint(55, 97)
                text, term = f"coverage of {f['mod']} is up to {pct}%", f"{pct}%"
            else:
                script = self._fresh(
                    lambda: (
                        f"scripts/repro_{r.choice(C.NOUNS)}_{r.randint(2, 99)}.{'py' if w.lang == 'python' else 'go'}"
                    )
                )
                text, term = f"the reproduction script {script} now exits 0", script
            self.turns[t].say.append(f"Progress: {text}.")
            self._at(t, "assistant", lambda i, text=text, term=term: AnchorTruth(
                kind="execution_progress", message_index=i, text=text, key_terms=(term,)))  # fmt: skip

    def _plan_plans(self) -> None:
        r = self.rng
        n = self.spec.n_plans
        gap = max(2, self.T // max(1, 3 * n))
        for _ in range(n):
            tp = self._turn_in(1, self.T - 3)
            k = r.choice((2, 3))
            f = self._fmt()
            steps = [(tpl.format_map(f), key.format_map(f)) for tpl, key in r.sample(_STEPS, k)]
            self.turns[tp].say.append(
                "Next steps: " + "; ".join(f"{j + 1}) {s}" for j, (s, _) in enumerate(steps)) + "."
            )
            t = tp
            for s, term in steps:
                t += r.randint(1, gap)
                done = t if t <= self.T - 2 else None  # past the end: the step stays open
                if done is not None:
                    self.turns[done].say.append(f"Done with the step: {s}.")
                rec = dict(text=s, term=term, done=done, index=None, until=None)
                self._at(tp, "assistant", lambda i, rec=rec: rec.__setitem__("index", i))
                if done is not None:
                    self._at(done, "assistant", lambda i, rec=rec: rec.__setitem__("until", i))
                self.plan_steps.append(rec)

    # -- sizes ----------------------------------------------------------------------------
    def _assign_sizes(self) -> dict[tuple[int, int], tuple[str, int]]:
        """Size class and target bytes of every tool result, as exact (rounded) counts."""
        r, s = self.rng, self.spec
        results = [(t, k, tool) for t, tr in enumerate(self.turns) for k, tool in enumerate(tr.tools)]
        n = len(results)
        # A planted fact must stay readable: never in an output the hook replaces by a preview.
        hosts_fact = {(t, 0) for t, tr in enumerate(self.turns) if tr.extra}
        taken: dict[int, str] = {}

        def pick(cls: str, share: float, ok: Any) -> None:
            pool = [i for i, (t, k, tool) in enumerate(results) if i not in taken and ok(t, k, tool)]
            for i in r.sample(pool, min(len(pool), round(share * n))):
                taken[i] = cls

        pick(
            C.LARGE, s.large_output_share, lambda t, k, tool: tool not in HOOK_EXEMPT_TOOLS and (t, k) not in hosts_fact
        )
        pick("large_read", s.large_read_share, lambda t, k, tool: tool == "read_file" and (t, k) not in hosts_fact)
        pick(C.MEDIUM, s.medium_output_share, lambda t, k, tool: C.MEDIUM in C.ACTIONS[tool])
        out: dict[tuple[int, int], tuple[str, int]] = {}
        log_lo, log_hi = math.log(MEDIUM_MIN_BYTES), math.log(MEDIUM_MAX_BYTES)
        mu = math.log(s.small_output_median_bytes)
        for i, (t, k, _tool) in enumerate(results):
            cls = taken.get(i, C.SMALL)
            if cls in (C.LARGE, "large_read"):
                size = min(s.max_output_bytes, int(LARGE_MIN_BYTES * r.paretovariate(s.large_output_pareto_alpha)))
            elif cls == C.MEDIUM:
                size = int(math.exp(r.uniform(log_lo, log_hi)))
            else:
                size = min(SMALL_MAX_BYTES, max(40, int(r.lognormvariate(mu, s.small_output_sigma))))
            out[(t, k)] = (cls, size)
        return out

    # -- assembly -------------------------------------------------------------------------
    def build(self) -> Task:
        w, s = self.w, self.spec
        self.plan_steps: list[dict[str, Any]] = []
        self._plan_statement()
        self._plan_tools()
        self._plan_facts()
        self._plan_intent()
        self._plan_failures()
        self._plan_decisions()
        self._plan_milestones()
        self._plan_plans()
        sizes = self._assign_sizes()

        msgs: list[Message] = [
            Message(
                "system",
                C.SYSTEM_PROMPT.format(
                    org=w.org,
                    repo=w.repo,
                    root=w.root,
                    test_cmd=w.test_cmd,
                    lang_name="Python" if w.lang == "python" else "Go",
                ),
            ),  # fmt: skip
            Message("user", self.statement),
        ]
        where: dict[tuple[int, str], int] = {}
        artifacts: list[AnchorTruth] = []
        touched: dict[str, None] = {}
        sizes_out: list[tuple[str, int]] = []  # (tool, content bytes) per tool result
        crng = self.crng
        for t, tr in enumerate(self.turns):
            if tr.user:
                where[(t, "user")] = len(msgs)
                msgs.append(Message("user", " ".join(tr.user)))
            if t == self.T - 1:
                where[(t, "assistant")] = len(msgs)
                msgs.append(Message("assistant", self._final_text(touched, tr.say)))
                break
            rendered: list[C.Rendered] = []
            for k, tool in enumerate(tr.tools):
                cls, size = sizes[(t, k)]
                failure = None
                passing = False
                if tool == "run_tests":
                    if tr.failure is not None:
                        failure = tr.failure
                    else:
                        failure, passing = self.target, t >= self.fix_turn
                edit_path = None
                if tool == "edit_file" and tr.edit_desc is not None:
                    edit_path = self.target_src
                cjk = cls == C.SMALL and tool == "read_file" and crng.random() < s.cjk_share
                rendered.append(C.render(
                    crng, w, tool, cls, size, cjk=cjk, extra=tr.extra if k == 0 else (), failure=failure,
                    passing=passing, edit_path=edit_path, edit_desc=tr.edit_desc if tool == "edit_file" else None,
                ))  # fmt: skip
            text = " ".join([*tr.say, *(x.lead for x in rendered)])
            calls = tuple(
                ToolCall(f"toolu_{t:05d}_{k}", tool, json.dumps(x.args, separators=(",", ":"), ensure_ascii=False))
                for k, (tool, x) in enumerate(zip(tr.tools, rendered))
            )
            where[(t, "assistant")] = ai = len(msgs)
            msgs.append(Message("assistant", text, calls))
            for k, (call, x) in enumerate(zip(calls, rendered)):
                if k == 0:
                    where[(t, "result")] = len(msgs)
                msgs.append(Message("tool", x.output, (), call.id, x.is_error))
                sizes_out.append((call.name, len(x.output.encode("utf-8"))))
                if x.path is not None and x.path not in touched:
                    touched[x.path] = None
                    verb = "created" if call.name == "write_file" else "modified"
                    artifacts.append(
                        AnchorTruth(kind="artifact", message_index=ai, text=f"{verb} {x.path}", key_terms=(x.path,))
                    )

        # Resolve the planned ground truth to message indices.
        anchors: list[AnchorTruth] = list(artifacts)
        for p in self.pending:
            out = p.make(where[(p.turn, p.where)])
            if isinstance(out, AnchorTruth):
                anchors.append(out)
        for rec in self.plan_steps:
            anchors.append(
                AnchorTruth(
                    kind="next_step",
                    message_index=rec["index"],
                    text=rec["text"],
                    key_terms=(rec["term"],),
                    until_index=rec["until"],
                )
            )
        facts = self._facts_and_constraints(anchors)
        anchors.sort(key=lambda a: (a.message_index, a.kind, a.text))
        changes = tuple(
            IntentChange(message_index=c["index"], statement=c["statement"], key_terms=c["key_terms"])
            for c in sorted(self.intent_changes, key=lambda c: c["index"])
        )
        intent = Intent(statement=self.statement, key_terms=self.key_terms, changes=changes)
        return Task(
            task_id=self._task_id(),
            source=TaskSource(kind="synthetic", preset=self.preset, seed=self.seed),
            messages=tuple(msgs),
            tools=tuple(json.loads(json.dumps(C.TOOL_SCHEMAS))),  # a private copy: the dicts are mutable
            intent=intent,
            anchors=tuple(anchors),
            facts=facts,
            metadata=self._metadata(msgs, sizes_out, facts, anchors, changes),
        )

    @property
    def target_src(self) -> str:
        """The source file failed attempts edit (the module named in the statement)."""
        return self.key_terms[2]

    def _final_text(self, touched: Mapping[str, None], say: list[str]) -> str:
        files = ", ".join(touched) if touched else "no files"
        return " ".join(
            [
                *say,
                f"Summary: the task is finished ({self.goal}). Files touched: {files}. Verified with `{self.w.test_cmd}`; the suite passes.",
            ]
        )

    def _facts_and_constraints(self, anchors: list[AnchorTruth]) -> tuple[Fact, ...]:
        order = sorted(range(len(self.facts)), key=lambda j: (self.facts[j]["index"], j))
        ids = {id(self.facts[j]): f"F{n + 1:03d}" for n, j in enumerate(order)}
        out = []
        for j in order:
            f = self.facts[j]
            nxt = f.get("superseded_by")
            fact = Fact(
                fact_id=ids[id(f)], question=f["question"], answer=f["answer"], kind=f["kind"],
                message_index=f["index"], variants=tuple(f["variants"]),
                superseded_at=nxt["index"] if nxt else None, superseded_by=ids[id(nxt)] if nxt else None,
            )  # fmt: skip
            out.append(fact)
            if f["kind"] == "constraint":
                anchors.append(AnchorTruth(kind="constraint", message_index=f["index"], text=f["text"],
                                           key_terms=(f["answer"],), until_index=fact.superseded_at))  # fmt: skip
        return tuple(out)

    def _task_id(self) -> str:
        tid = f"synthetic-{self.preset}-{self.seed}"
        if self.overrides:
            h = hashlib.sha256(json.dumps(self.overrides, sort_keys=True).encode()).hexdigest()[:8]
            tid += f"-{h}"
        return tid

    def _metadata(self, msgs: list[Message], sizes_out: list[tuple[str, int]], facts: tuple[Fact, ...],
                  anchors: list[AnchorTruth], changes: tuple[IntentChange, ...]) -> dict[str, Any]:  # fmt: skip
        hook = sum(1 for tool, b in sizes_out if b > OFFLOAD_HOOK_THRESHOLD_BYTES and tool not in HOOK_EXEMPT_TOOLS)
        kinds: dict[str, int] = {}
        for a in anchors:
            kinds[a.kind] = kinds.get(a.kind, 0) + 1
        return {
            "generator": "h9eval.tasks.synthetic",
            "generator_version": GENERATOR_VERSION,
            "preset": self.preset,
            "seed": self.seed,
            "overrides": dict(self.overrides),
            "spec": dataclasses.asdict(self.spec),
            "language": self.w.lang,
            "repo": f"{self.w.org}/{self.w.repo}",
            "n_turns": self.T,
            "n_messages": len(msgs),
            "n_tool_results": len(sizes_out),
            "total_bytes": sum(m.nbytes for m in msgs),
            "estimated_tokens": estimate_tokens(msgs),
            "tool_output_bytes": sum(b for _, b in sizes_out),
            "max_tool_output_bytes": max((b for _, b in sizes_out), default=0),
            "n_outputs_over_10000_bytes": sum(1 for _, b in sizes_out if b > OFFLOAD_HOOK_THRESHOLD_BYTES),
            "n_outputs_hook_offloadable": hook,
            "n_outputs_4000_to_10000_bytes": sum(
                1 for _, b in sizes_out if OFFLOAD_COMPACTION_THRESHOLD_BYTES < b <= OFFLOAD_HOOK_THRESHOLD_BYTES
            ),
            "n_facts": len(facts),
            "n_superseded_facts": sum(1 for f in facts if f.superseded_by),
            "n_intent_changes": len(changes),
            "n_anchors_by_kind": dict(sorted(kinds.items())),
        }
