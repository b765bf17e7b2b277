"""``evidence_search``: answer questions from a generated corpus, citing the evidence.

A corpus of ``n_docs`` generated documents hides one attribute value per question (``The
port of Varnok is V-1a2b3c4d.``) in ``evidence_docs`` documents; other documents mention the
same subject without the value (partly relevant) or nothing of it. ``search(query)`` ranks the
corpus with BM25 (the ``bm25s`` library; ties by document id) and lists the top hits' ids and
titles; ``open_doc(doc_id)`` shows a document (the value sentence anywhere in it);
``answer(question_id, value, evidence)`` records an answer with the ids of the documents that
support it.

The relevance judgements grade each document per question (2: states the value, 1: mentions
the subject, 0: neither). The state check is on the evidence: a question counts when its first
answer has the right value and cites at least one grade-2 document and no document below grade
2; success needs every question answered so, once. Targets: which document said what (the
evidence trail), and answers already given.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from h9eval.closedloop.worlds.base import (
    READ,
    SIDE_EFFECT,
    Assessment,
    GroundFact,
    Subgoal,
    World,
    WorldParams,
    WorldScale,
    default_scale,
    register_world,
    tool_spec,
)

__all__ = ["EvidenceSearch", "EvidenceSearchParams"]

_ATTRS = ("port", "owner", "region", "codename", "quota", "release", "mirror", "checksum")
_SYLL = ("var", "nok", "tel", "bri", "mos", "kan", "dur", "fel", "zo", "lin", "quar", "pet", "ros", "vel", "gun", "hal")
_TOPICS = ("deployment", "incident", "migration", "benchmark", "changelog", "runbook", "design", "review")


@dataclass(frozen=True, kw_only=True)
class EvidenceSearchParams(WorldParams):
    #: questions in the task (one subject and attribute each)
    n_questions: int = 4
    #: documents in the corpus
    n_docs: int = 60
    #: documents that state each answer (grade 2)
    evidence_docs: int = 2
    #: documents that mention each subject without the answer (grade 1)
    distractor_docs: int = 3
    #: hits a search lists
    top_k: int = 6

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_between("n_questions", 1, 60)
        self._check_between("evidence_docs", 1, 5)
        self._check_between("distractor_docs", 0, 8)
        need = self.n_questions * (self.evidence_docs + self.distractor_docs)
        self._check(
            need <= self.n_docs <= 2000,
            "n_docs",
            f"must be between n_questions*(evidence_docs+distractor_docs) ({need}) and 2000",
            self.n_docs,
        )
        self._check(
            self.evidence_docs + self.distractor_docs <= self.top_k <= 20,
            "top_k",
            "must be between evidence_docs+distractor_docs and 20",
            self.top_k,
        )


@register_world
class EvidenceSearch(World):
    kind: ClassVar[str] = "evidence_search"
    params_type: ClassVar[type[WorldParams]] = EvidenceSearchParams
    tool_kinds: ClassVar[dict[str, str]] = {"search": READ, "open_doc": READ, "answer": SIDE_EFFECT}
    stresses: ClassVar[str] = "which document said what (evidence cited), answers already given"
    scale: ClassVar[WorldScale] = default_scale(n_questions=30, n_docs=400, size_scale=2.5)
    params: EvidenceSearchParams

    def __init__(self, params: WorldParams | None = None) -> None:
        super().__init__(params)
        self._index: tuple[int | None, Any] = (None, None)

    def _new_state(self, rng: random.Random) -> dict[str, Any]:
        p = self.params
        names: list[str] = []
        while len(names) < p.n_questions:
            n = (rng.choice(_SYLL) + rng.choice(_SYLL) + rng.choice(_SYLL)).capitalize()
            if n not in names:
                names.append(n)
        ids = sorted({self._nonce(rng, "D") for _ in range(p.n_docs)})
        while len(ids) < p.n_docs:
            ids = sorted(set(ids) | {self._nonce(rng, "D")})
        order = list(ids)
        rng.shuffle(order)
        questions, docs, qrels = [], {}, {}
        k = 0
        for name in names:
            attr = rng.choice(_ATTRS)
            value = self._nonce(rng, "V")
            qid = self._nonce(rng, "Q")
            grades = {}
            for j in range(p.evidence_docs + p.distractor_docs):
                did = order[k]
                k += 1
                grades[did] = 2 if j < p.evidence_docs else 1
                topic = rng.choice(_TOPICS)
                lines = [f"{name} {topic} notes: the {attr} of {name} and its {rng.choice(_TOPICS)}."]
                if j < p.evidence_docs:
                    lines.append(f"The {attr} of {name} is {value}.")
                else:
                    lines.append(f"The {attr} of {name} is tracked in another {topic} document.")
                docs[did] = {"title": f"{name} {topic}", "lines": lines, "seed": rng.getrandbits(32)}
            questions.append({"id": qid, "subject": name, "attr": attr, "value": value})
            qrels[qid] = grades
        for did in order[k:]:
            docs[did] = {
                "title": f"{rng.choice(_TOPICS)} {rng.choice(_TOPICS)}",
                "lines": [f"General {rng.choice(_TOPICS)} notes for the {rng.choice(_ATTRS)} team."],
                "seed": rng.getrandbits(32),
            }
        return {"questions": questions, "docs": docs, "qrels": qrels, "answers": []}

    def _task_text(self) -> str:
        qs = self._state["questions"]
        lines = "\n".join(f"{q['id']}: What is the {q['attr']} of {q['subject']}?" for q in qs)
        return (
            f"TASK evidence_search: answer the {len(qs)} questions listed below from the document corpus, citing the "
            "documents that state each answer.\n"
            "Details: search(query) lists matching documents; open_doc(doc_id) shows one. Answer each question exactly "
            "once with "
            "answer(question_id, value, evidence=[ids of the documents that state the value]).\nQuestions:\n" + lines
        )

    def _tool_specs(self) -> tuple[dict[str, Any], ...]:
        return (
            tool_spec("search", "Search the corpus (BM25); lists the best matching documents.", {"query": "string"}),
            tool_spec("open_doc", "Show one document.", {"doc_id": "string"}),
            tool_spec(
                "answer",
                "Answer a question, citing evidence documents (once per question).",
                {"question_id": "string", "value": "string", "evidence": "array"},
            ),
        )

    def _retriever(self) -> Any:
        """The BM25 index of this episode's corpus (built once per reset seed)."""
        if self._index[0] != self.seed:
            import bm25s  # heavy (scipy): only for this world

            ids = sorted(self._state["docs"])
            texts = [self._doc_text(d, with_filler=False) for d in ids]
            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
            self._index = (self.seed, (retriever, ids, bm25s))
        return self._index[1]

    def _doc_text(self, did: str, *, with_filler: bool = True) -> str:
        d = self._state["docs"][did]
        body = "\n".join(d["lines"])
        if not with_filler:
            return d["title"] + "\n" + body
        return f"doc {did}: {d['title']}\n" + self._observe(body, tag=f"doc:{did}", kind="source")

    def _tool_search(self, args: dict[str, Any]) -> str:
        query = str(args["query"]).strip()
        if not query:
            return "Error: empty query"
        retriever, ids, bm25s = self._retriever()
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        if not tokens:
            return f"no documents match {query!r}"
        scores = retriever.get_scores(tokens)
        ranked = sorted(range(len(ids)), key=lambda i: (-float(scores[i]), ids[i]))[: self.params.top_k]
        hits = [
            f"{ids[i]} ({float(scores[i]):.2f}) {self._state['docs'][ids[i]]['title']}" for i in ranked if scores[i] > 0
        ]
        if not hits:
            return f"no documents match {query!r}"
        return self._observe(f"search results for {query!r}:\n" + "\n".join(hits), tag="search", kind="search")

    def _tool_open_doc(self, args: dict[str, Any]) -> str:
        did = str(args["doc_id"])
        if did not in self._state["docs"]:
            return f"Error: no such document: {did}"
        return self._doc_text(did)

    def _tool_answer(self, args: dict[str, Any]) -> str:
        qid = str(args["question_id"])
        ev = args["evidence"]
        if not isinstance(ev, list) or not all(isinstance(e, str) for e in ev):
            return "Error: evidence must be a list of document ids"
        if not any(q["id"] == qid for q in self._state["questions"]):
            return f"Error: no such question: {qid}"
        self._state["answers"].append((qid, str(args["value"]), tuple(ev), self._step))
        if sum(1 for a in self._state["answers"] if a[0] == qid) > 1:
            return f"Error: question {qid} was already answered"
        return f"Answer to {qid} recorded."

    def evidence_scores(self) -> dict[str, tuple[float, float]]:
        """Per question: (precision, recall) of the first answer's evidence against the grade-2 documents."""
        out = {}
        for q in self._state["questions"]:
            first = next((a for a in self._state["answers"] if a[0] == q["id"]), None)
            rel = {d for d, g in self._state["qrels"][q["id"]].items() if g == 2}
            cited = set(first[2]) if first else set()
            out[q["id"]] = (len(cited & rel) / len(cited) if cited else 0.0, len(cited & rel) / len(rel))
        return out

    def _assess(self) -> Assessment:
        s = self._state
        goals = []
        wrong = 0
        scores = self.evidence_scores()
        for q in s["questions"]:
            first = next((a for a in s["answers"] if a[0] == q["id"]), None)
            ok = first is not None and first[1] == q["value"] and scores[q["id"]][0] == 1.0
            wrong += int(first is not None and not ok)
            goals.append(Subgoal(f"answered:{q['id']}", ok))
        answered = [a[0] for a in s["answers"]]
        return Assessment(
            goals=goals,
            reasons=((wrong > 0, "wrong value or evidence"),),
            exactly_once=True,
            side_effects=len(set(answered)),
            duplicates=len(answered) - len(set(answered)),
            wrong=wrong,
            finished=len(set(answered)) == len(s["questions"]),
        )

    def ground_truth(self) -> tuple[GroundFact, ...]:
        out = []
        for q in self._state["questions"]:
            out.append(
                GroundFact(
                    f"value_{q['id']}",
                    f"What is the {q['attr']} of {q['subject']}?",
                    q["value"],
                    ("answer",),
                    cue=q["id"],
                )
            )
            docs = sorted(d for d, g in self._state["qrels"][q["id"]].items() if g == 2)
            out.append(
                GroundFact(
                    f"evidence_{q['id']}",
                    f"Which document states the {q['attr']} of {q['subject']}?",
                    docs[0],
                    ("answer",),
                    cue=q["id"],
                    item_type="artifact",
                )
            )
        return tuple(out)
