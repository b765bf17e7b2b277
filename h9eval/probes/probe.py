"""Probes: questions with known answers, derived from a :class:`Task`'s ground truth.

Positions: ``message_index`` is the index (0-based, into ``task.messages``) of the *last
transcript message the view was built from*, inclusive. The view sent at the model call whose
output sits at message ``m`` covers ``task.messages[:m]``, so its checkpoint index is ``m - 1``.

A probe is *answerable* at a checkpoint when its answer (or a variant), or at least one of its
key terms, occurs in the uncompacted transcript ``task.messages[:message_index + 1]`` (same
matcher as the recall scorer). For key-term probes only the terms that occur there are kept in
``expected`` (the rest go to ``unseen``): no policy can keep what the agent has not seen, so
the recall score of the uncompacted history is 1.0 by construction. Unanswerable probes are
reported but excluded from aggregate scores.

Pinned answers: every policy keeps the system message, and most keep the first task message
(harness9's emergency truncation, the windowed peers' ``keep_first``). A key term found in
the system message is moved from ``expected`` to ``pinned`` (it can never be lost, so it would
only add a floor: the repository name gave synthetic key terms 1/3 under ``drop_all``), unless
every term is there. A probe whose remaining answer is in the system message or the first
non-system message has ``answer_pinned=True``: it measures pinning, not memory, and reports
count it separately.

One question, one probe: the ``key_terms`` probe is left out while it equals the intent probe
(before any intent change, and on recorded sessions without one); an anchor item whose key
terms are all a fact's answer planted at the same message is probed once, as the fact; two
facts with the same answers are probed once.

Ordinals: a ``derived_fact`` that asks for the k-th distinct file edited (``edited_file_NN``)
carries the (k-1)-th file's candidates in ``after``; it is found only when an occurrence of the
(k-1)-th file precedes an occurrence of the k-th, so a view that lost the earlier edits cannot
place the file (the llm judge reads the ordinal from the question instead).
"""

from __future__ import annotations

import functools
import json
import re
import threading
import weakref
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message
from h9eval.tasks.text import TextIndex, TranscriptText, normalize, normalize_messages
from h9eval.tasks.keyterms import extract_key_terms
from h9eval.tasks.model import ANCHOR_KINDS, Fact, Intent, Task

__all__ = [
    "PASS_THRESHOLD",
    "PROBE_KINDS",
    "ANCHOR_PROBE_KINDS",
    "FINAL_KEY_TERMS",
    "QUESTIONS",
    "Probe",
    "probes_for",
    "next_action_probe",
    "history_index",
    "pinned_indexes",
    "answer_found",
    "mark_answerable",
    "mark_pinned",
    "normalize_arguments",
]

PASS_THRESHOLD = 0.5
"""A probe row passes when ``score >= PASS_THRESHOLD``."""

ANCHOR_PROBE_KINDS: tuple[str, ...] = tuple(ANCHOR_KINDS)
PROBE_KINDS: tuple[str, ...] = (
    "intent",
    *ANCHOR_PROBE_KINDS,
    "fact",
    "derived_fact",
    "key_terms",
    "next_action",
)
"""Every probe kind. ``next_action`` exists only for the llm scorer on recorded tasks."""

QUESTIONS: dict[str, str] = {
    "intent": "What is the user's current goal for this session, including any later refinements?",
    "key_terms": (
        "Which specific files, identifiers, error names, ids or numbers does the user's original task "
        "statement mention?"
    ),
    "execution_progress": "What has been completed so far? List the progress milestones.",
    "key_decision": "What key decisions have been made so far, and why?",
    "tried_solution": (
        "Which approaches have been tried so far, and what happened with each (errors, reasons they were dropped)?"
    ),
    "next_step": "What are the planned next steps?",
    "constraint": "Which constraints or rules must the work respect?",
    "artifact": "Which files or other artifacts have been created or modified so far?",
    "next_action": "What single tool call should the agent make next?",
}
"""Questions for probes whose ground truth is a list item rather than a question: the answer
to the kind's question must include the probe's item (so the llm answerer is asked once per
kind and checkpoint, and the answer is judged against each item)."""


@dataclass(frozen=True, kw_only=True)
class Probe:
    """One question about the task with a known answer.

    ``kind``: one of :data:`PROBE_KINDS`. ``scoring``: ``"terms"`` (score = fraction of
    ``expected`` key terms found) or ``"answer"`` (score 1 when ``expected[0]`` or any of
    ``variants`` is found, else 0). ``reference``: the ground-truth text (task statement, anchor
    item, fact answer) that the semantic scorer embeds and the llm judge reads.
    ``message_index``: where the ground truth was introduced. ``answerable`` and ``unseen``:
    see the module docstring. ``pinned``: key terms dropped from ``expected`` because the
    system message holds them; ``answer_pinned``: the answer is in the system message or the
    first task message; ``after``: for ordinal facts, the preceding item's candidates (see the
    module docstring).
    """

    probe_id: str
    kind: str
    question: str
    expected: tuple[str, ...]
    variants: tuple[str, ...] = ()
    message_index: int
    scoring: str = "terms"
    reference: str = ""
    answerable: bool = True
    unseen: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    answer_pinned: bool = False
    after: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in PROBE_KINDS:
            raise ConfigError(f"Probe.kind must be one of {', '.join(PROBE_KINDS)}, got {self.kind!r}")
        if self.scoring not in ("terms", "answer"):
            raise ConfigError(f"Probe.scoring must be 'terms' or 'answer', got {self.scoring!r}")

    @property
    def candidates(self) -> tuple[str, ...]:
        """What counts as the answer in ``answer`` scoring: the answer, then its variants."""
        return self.expected + self.variants


FINAL_KEY_TERMS = "key_terms_final"
"""Task metadata flag: the intent's key terms are final (the recorded loaders filter generic
ones); when a statement has none, the probe asks for the statement itself instead of
re-extracting terms from it."""


# -- the uncompacted history -------------------------------------------------------------------
def history_index(task: Task, message_index: int, **kw: Any) -> TextIndex:
    """A :class:`TextIndex` of the uncompacted ``task.messages[:message_index + 1]`` (a prefix
    of the task's :class:`TranscriptText`, so probing every checkpoint stays linear)."""
    return transcript_text(task).prefix(message_index, **kw)


# The last few tasks' transcript texts: a replay probes one task at many checkpoints.
_TRANSCRIPTS: OrderedDict[int, tuple[weakref.ref[Task], TranscriptText]] = OrderedDict()
_TRANSCRIPTS_KEPT = 4
_TRANSCRIPTS_LOCK = threading.Lock()


def transcript_text(task: Task) -> TranscriptText:
    """The task's :class:`TranscriptText` (cached while the task is alive)."""
    with _TRANSCRIPTS_LOCK:
        hit = _TRANSCRIPTS.get(id(task))
        if hit is not None and hit[0]() is task:
            _TRANSCRIPTS.move_to_end(id(task))
            return hit[1]
    tt = TranscriptText(task.messages)
    with _TRANSCRIPTS_LOCK:
        _TRANSCRIPTS[id(task)] = (weakref.ref(task), tt)
        while len(_TRANSCRIPTS) > _TRANSCRIPTS_KEPT:
            _TRANSCRIPTS.popitem(last=False)
    return tt


def pinned_indexes(task: Task, **kw: Any) -> tuple[TextIndex, TextIndex]:
    """``(system, pinned)`` indexes: the leading system message(s), and those plus the first
    non-system message (the task statement in most sessions)."""
    msgs = task.messages
    n_sys = 0
    while n_sys < len(msgs) and msgs[n_sys].role == "system":
        n_sys += 1
    system = TextIndex(normalize_messages(msgs[:n_sys]), **kw)
    return system, TextIndex(normalize_messages(msgs[: n_sys + 1]), **kw)


def answer_found(p: Probe, idx: TextIndex) -> bool:
    """Is an ``answer`` probe's answer (or a variant) in the text, after its ``after`` item?"""
    if not p.after:
        return idx.any_present(p.candidates)
    first_prev = min((x for x in (idx.first_position(t) for t in p.after) if x is not None), default=None)
    if first_prev is None:
        return False
    last = max((x for x in (idx.last_position(t) for t in p.candidates) if x is not None), default=None)
    return last is not None and last > first_prev


# -- building probes ---------------------------------------------------------------------------
def _terms_or_extract(terms: Sequence[str], text: str | Callable[[], str], *, final: bool = False) -> tuple[str, ...]:
    """``terms`` (those that normalise to something), else the terms extracted from ``text`` (or
    from what ``text()`` returns: built only when needed), unless they are ``final``."""
    terms = tuple(t for t in terms if normalize(t))
    if terms or final:
        return terms
    return extract_key_terms(text if isinstance(text, str) else text())


class _IntentTerms:
    """The intent probe's terms of one intent at any checkpoint: the statement's terms followed by
    those of every change at or before it (a change's own terms: its key terms, or those of the
    whole statement in force after it, resolved only for a change without key terms).

    Folding every change in again at every checkpoint made probing a chat log quadratic (1,500
    changes x 1,500 checkpoints). When the changes are in transcript order (every loader's), a
    checkpoint covers a prefix of them, and the terms of the latest checkpoint asked are extended,
    not rebuilt (checkpoints come in order); otherwise every change is looked at, as before."""

    def __init__(self, intent: Intent, final: bool) -> None:
        self.intent, self.final = intent, final
        self.base = _terms_or_extract(intent.key_terms, intent.statement, final=final)
        self.indices = [c.message_index for c in intent.changes]
        self.in_order = all(a <= b for a, b in zip(self.indices, self.indices[1:]))
        self._own: list[tuple[str, ...] | None] = [None] * len(intent.changes)
        self._n = 0  # changes[: _n] are in _terms
        self._terms: dict[str, None] = dict.fromkeys(self.base)
        self._lock = threading.Lock()

    def own(self, k: int) -> tuple[str, ...]:
        hit = self._own[k]
        if hit is None:
            ch = self.intent.changes[k]
            hit = self._own[k] = _terms_or_extract(
                ch.key_terms, functools.partial(self.intent.statement_of, k), final=self.final
            )
        return hit

    def at(self, message_index: int) -> tuple[str, ...]:
        with self._lock:
            if not self.in_order:
                terms = self.base
                for k, ch in enumerate(self.intent.changes):
                    if ch.message_index <= message_index:
                        terms = tuple(dict.fromkeys(terms + self.own(k)))
                return terms
            n = bisect_right(self.indices, message_index)
            if n == 0:
                return self.base
            if n < self._n:  # an earlier checkpoint than the last: start again
                self._n, self._terms = 0, dict.fromkeys(self.base)
            while self._n < n:
                self._terms.update(dict.fromkeys(self.own(self._n)))
                self._n += 1
            return tuple(self._terms)


# The last few intents' terms (by identity: hashing an intent costs its length at every checkpoint).
_INTENT_TERMS: OrderedDict[tuple[int, bool], tuple[weakref.ref[Intent], _IntentTerms]] = OrderedDict()
_INTENT_TERMS_KEPT = 16
_INTENT_TERMS_LOCK = threading.Lock()


def _intent_terms(intent: Intent, final: bool) -> _IntentTerms:
    key = (id(intent), final)
    with _INTENT_TERMS_LOCK:
        hit = _INTENT_TERMS.get(key)
        if hit is not None and hit[0]() is intent:
            _INTENT_TERMS.move_to_end(key)
            return hit[1]
        made = _IntentTerms(intent, final)
        _INTENT_TERMS[key] = (weakref.ref(intent), made)
        while len(_INTENT_TERMS) > _INTENT_TERMS_KEPT:
            _INTENT_TERMS.popitem(last=False)
        return made


def _term_probe(probe_id: str, kind: str, question: str, terms: tuple[str, ...], reference: str, at: int) -> Probe:
    if terms:
        return Probe(
            probe_id=probe_id, kind=kind, question=question, expected=terms, message_index=at, reference=reference
        )
    # No key terms at all (e.g. a prose-only anchor item): the whole text is the answer,
    # found verbatim or fuzzily.
    return Probe(
        probe_id=probe_id,
        kind=kind,
        question=question,
        expected=(reference,),
        message_index=at,
        scoring="answer",
        reference=reference,
    )


def probes_for(task: Task, message_index: int, *, check_answerable: bool = True) -> list[Probe]:
    """The probes of ``task`` at a checkpoint covering messages ``0..message_index``.

    Order: intent, anchor items (transcript order), facts and derived facts (task order), key
    terms. Contents:

    * ``intent``: the intent in force (``task.intent.at``; its id and reference), probed on the
      whole intent: the statement's key terms followed by those of every change so far (each
      extracted from its statement when it has none);
    * one probe per anchor truth item current at the index (``message_index <= idx`` and
      ``until_index`` is ``None`` or ``> idx``), kind = the anchor's kind, unless it repeats a
      live fact (see the module docstring);
    * one per fact live at the index (``Fact.live_at``): kind ``derived_fact`` for
      ``Fact.kind == "derived"`` (recorded tasks), else ``fact``; a fact with the same answer
      and variants as an earlier one is left out;
    * ``key_terms``: the original task statement's key terms, only when they differ from the
      intent probe's (i.e. after an intent change that added terms).

    ``check_answerable``: mark probes against the uncompacted history and the pinned messages
    (default ``True``); with ``False`` every probe is answerable, unpinned and keeps all its
    terms.
    """
    idx = message_index
    out: list[Probe] = []
    cur = task.intent.at(idx)
    # The whole intent in force: the statement's terms and those of every change so far (a
    # change's own terms may name only what it adds).
    final = bool(task.metadata.get(FINAL_KEY_TERMS))
    intent_terms = _intent_terms(task.intent, final).at(idx)
    out.append(
        _term_probe(
            f"intent@{cur.message_index}", "intent", QUESTIONS["intent"], intent_terms, cur.statement, cur.message_index
        )
    )
    live_facts = [f for f in task.facts if f.live_at(idx)]
    fact_answers = {(f.message_index, c) for f in live_facts for c in (f.answer, *f.variants)}
    for i, a in enumerate(task.anchors):
        if a.message_index <= idx and (a.until_index is None or a.until_index > idx):
            if a.kind not in ANCHOR_PROBE_KINDS:
                continue  # an anchor kind this version does not probe; never guess one
            if a.key_terms and all((a.message_index, t) in fact_answers for t in a.key_terms):
                continue  # the same item as a fact (synthetic constraints): probed once, as the fact
            out.append(
                _term_probe(
                    f"anchor:{a.kind}:{i}",
                    a.kind,
                    QUESTIONS[a.kind],
                    _terms_or_extract(a.key_terms, a.text),
                    a.text,
                    a.message_index,
                )
            )
    by_id = {f.fact_id: f for f in task.facts}
    seen_answers: set[tuple[str, ...]] = set()
    for f in live_facts:
        cands = (f.answer, *f.variants)
        if cands in seen_answers:
            continue
        seen_answers.add(cands)
        out.append(
            Probe(
                probe_id=f"fact:{f.fact_id}",
                kind="derived_fact" if f.kind == "derived" else "fact",
                question=f.question,
                expected=(f.answer,),
                variants=tuple(f.variants),
                message_index=f.message_index,
                scoring="answer",
                reference=f.answer,
                after=_ordinal_after(f, by_id),
            )
        )
    terms = _terms_or_extract(task.intent.key_terms, task.intent.statement, final=final)
    if terms and set(terms) != set(intent_terms):
        out.append(
            Probe(
                probe_id="key_terms",
                kind="key_terms",
                question=QUESTIONS["key_terms"],
                expected=terms,
                message_index=0,
                reference=task.intent.statement,
            )
        )
    if check_answerable:
        hist = history_index(task, idx)
        system, pinned = pinned_indexes(task)
        out = [mark_pinned(mark_answerable(p, hist), system, pinned) for p in out]
    return out


_ORDINAL_FACT = re.compile(r"^edited_file_(\d+)$")


def _ordinal_after(f: Fact, by_id: Mapping[str, Fact]) -> tuple[str, ...]:
    m = _ORDINAL_FACT.match(f.fact_id)
    if m is None or f.kind != "derived":
        return ()
    prev = by_id.get(f"edited_file_{int(m.group(1)) - 1:0{len(m.group(1))}d}")
    return () if prev is None else (prev.answer, *prev.variants)


def mark_pinned(p: Probe, system: TextIndex, pinned: TextIndex) -> Probe:
    """``p`` with ``pinned``/``answer_pinned`` set (see the module docstring); ``system`` and
    ``pinned`` are :func:`pinned_indexes`. Unanswerable probes are returned as they are."""
    if p.kind == "next_action" or not p.answerable:
        return p
    if p.scoring == "answer":
        return replace(p, answer_pinned=pinned.any_present(p.candidates))
    in_system = tuple(t for t in p.expected if system.present(t))
    if in_system and len(in_system) < len(p.expected):
        p = replace(p, expected=tuple(t for t in p.expected if t not in in_system), pinned=in_system)
    return replace(p, answer_pinned=all(pinned.present(t) for t in p.expected))


def mark_answerable(p: Probe, history: TextIndex) -> Probe:
    """``p`` with ``answerable``/``expected``/``unseen`` set against the history's text."""
    if p.kind == "next_action":
        return p  # a prediction: its answer is, by definition, not in the history
    if p.scoring == "answer":
        seen = answer_found(p, history)
        return p if seen else replace(p, answerable=False)
    kept = tuple(t for t in p.expected if history.present(t))
    unseen = tuple(t for t in p.expected if t not in kept)
    if not kept:
        return replace(p, answerable=False, unseen=unseen)
    return replace(p, expected=kept, unseen=unseen)


# -- next action (recorded tasks) --------------------------------------------------------------
def _canon(v: Any) -> Any:
    if isinstance(v, str):
        return " ".join(v.split())
    if isinstance(v, dict):
        return {str(k): _canon(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [_canon(x) for x in v]
    return v


def normalize_arguments(arguments: str | dict[str, Any]) -> str:
    """Canonical JSON text of tool-call arguments: keys sorted, whitespace runs inside strings
    collapsed to one space; non-JSON text is returned with whitespace collapsed."""
    if isinstance(arguments, str):
        try:
            parsed: Any = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return " ".join(arguments.split())
    else:
        parsed = arguments
    return json.dumps(_canon(parsed), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def next_action_probe(task: Task, message_index: int) -> Probe | None:
    """The recorded agent's next tool call after the checkpoint, as a ``next_action`` probe.

    The first assistant message after ``message_index`` must have a tool call (its first one is
    used); ``None`` when it has none (the agent answered in text) or there is no later call.
    ``expected`` is ``(tool name, normalised arguments JSON)``.
    """
    msgs: Sequence[Message] = task.messages
    for i in range(message_index + 1, len(msgs)):
        m = msgs[i]
        if m.role != "assistant":
            continue
        if not m.tool_calls:
            return None
        tc = m.tool_calls[0]
        return Probe(
            probe_id=f"next_action@{i}",
            kind="next_action",
            question=QUESTIONS["next_action"],
            expected=(tc.name, normalize_arguments(tc.arguments)),
            message_index=i,
            reference=f"{tc.name} {tc.arguments}",
        )
    return None
