"""The ``llm`` scorer (opt-in): can a model answer the probe from the view alone?

Two calls per probe, both through an injected *text client* (any object with
``complete(system, user, *, max_tokens) -> str``; tests inject a fake, production uses
:class:`AnthropicTextClient`):

1. the **answerer** gets only the rendered view (or the anchors scope's text) and the probe's
   question. Anchor-item probes share their kind's question ("What key decisions have been made
   so far?"), so the answerer is asked once per question and checkpoint;
2. the **judge** reads the question, the ground truth (reference text and key terms) and the
   answer and replies ``yes`` or ``no``: score 1.0 or 0.0 (method ``llm``).

Facts are also graded without the judge: 1.0 when the answer contains the fact's answer or a
variant (recall's matcher; method ``llm_exact``). On facts the two should agree; the rate at
which they do (:func:`judge_agreement`) calibrates the judge.

Next action (recorded tasks, ``next_action`` probes): the answerer is asked for the single next
tool call as JSON; score 0.5 when the tool name equals the recorded agent's and 1.0 when the
normalised arguments are equal too (:func:`h9eval.probes.probe.normalize_arguments`).

Views longer than ``max_view_chars`` are cut in the middle (head and tail kept, a marker in
between). A compacted view is normally within the model's window; the uncompacted baseline
history may not be.

What it can tell: whether the information is *usable* — stated clearly enough that a model
retrieves it when asked, including paraphrases recall misses. What it cannot: the judge is a
model too (hence the exact-match calibration on facts); answers depend on the answerer model
and prompt; a question that names its topic can prompt a plausible guess (``unknown`` is
requested when the context lacks the answer, and facts have arbitrary values, which makes
lucky guesses rare there); and it costs two API calls per probe and checkpoint (cached).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from h9eval.core.anthropic import AnthropicAPI, usage_of
from h9eval.core.errors import ConfigError, H9Error
from h9eval.core.paths import check_db_file
from h9eval.probes.probe import Probe, normalize_arguments
from h9eval.probes.scorers import SCOPES, ProbeInput, register_scorer
from h9eval.probes.text import TextIndex

__all__ = [
    "TextClient",
    "LLMClientError",
    "PromptCache",
    "AnthropicTextClient",
    "LLMScorer",
    "judge_agreement",
    "parse_tool_call",
    "action_score",
    "ANSWER_SYSTEM",
    "JUDGE_SYSTEM",
    "ACTION_SYSTEM",
    "DEFAULT_MODEL",
]

DEFAULT_MODEL = "claude-haiku-4-5"
"""Default answerer/judge model: a small, cheap one, since the llm scorer makes two calls per
probe and checkpoint; pass ``model=`` for another."""

ANSWER_SYSTEM = (
    "You are shown the context an AI coding agent had at one point of its work: its system "
    "prompt, the conversation and tool results, possibly compacted into a summary. Answer the "
    "question using only this context. Be brief and specific: give exact names, paths and "
    "values. If the context does not contain the answer, reply exactly: unknown"
)
JUDGE_SYSTEM = (
    "You grade answers against a reference. Reply with exactly one word: yes or no. Say yes "
    "when the answer states the reference's information, with the same specifics (names, paths, "
    "numbers, values); wording may differ and the answer may contain other items as well. Say no "
    "when the answer lacks it, contradicts it, gives a different value, or says unknown."
)
ACTION_SYSTEM = (
    "You are an AI coding agent. You are shown your context so far: the system prompt, the "
    "conversation and tool results, possibly compacted into a summary. Decide the single next "
    "tool call you would make. Reply with only a JSON object of the form "
    '{"name": "<tool name>", "arguments": {...}} and nothing else.'
)


@runtime_checkable
class TextClient(Protocol):
    """A text-completion client: one system prompt, one user message, one text reply."""

    def complete(self, system: str, user: str, *, max_tokens: int) -> str: ...


class LLMClientError(H9Error):
    """A text-client call failed (API error, timeout, malformed response)."""


# -- cache -------------------------------------------------------------------------------------
def prompt_key(model: str, system: str, user: str, max_tokens: int, temperature: float | None) -> str:
    """SHA-256 hex of everything that shapes a reply."""
    blob = json.dumps(
        {"model": model, "system": system, "user": user, "max_tokens": max_tokens, "temperature": temperature},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class PromptCache:
    """Replies by prompt key: in memory (``path=None``, the default) or in a SQLite file.

    The file is created with mode 0600 and holds only keys and reply texts (never a key or
    header). First writer of a key wins (``INSERT OR IGNORE``); WAL journal, 30 s busy timeout.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._mem: dict[str, str] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            check_db_file(self.path, what="probe reply cache")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, text TEXT NOT NULL, created_at REAL NOT NULL)")

    def get(self, key: str) -> str | None:
        with self._lock:
            if self._db is None:
                return self._mem.get(key)
            row = self._db.execute("SELECT text FROM replies WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

    def put(self, key: str, text: str) -> None:
        with self._lock:
            if self._db is None:
                self._mem.setdefault(key, text)
            else:
                self._db.execute("INSERT OR IGNORE INTO replies VALUES (?, ?, ?)", (key, text, time.time()))

    def __len__(self) -> int:
        with self._lock:
            if self._db is None:
                return len(self._mem)
            return int(self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])


# -- Anthropic adapter -------------------------------------------------------------------------
class AnthropicTextClient:
    """:class:`TextClient` on the Anthropic Messages API (the ``anthropic`` SDK, imported here,
    not when h9eval is imported).

    ``model``: default ``claude-haiku-4-5``. ``temperature``: default 0.0, sent in the request
    body (SDK 2.10 has no ``temperature`` argument); ``None`` omits it. ``api_key``: default the
    ``ANTHROPIC_API_KEY`` environment variable; missing → :class:`ConfigError` here.
    ``cache``: a :class:`PromptCache`, a path for a SQLite one, or ``None`` for a fresh
    in-memory cache (default); ``False`` disables caching. ``max_retries``: SDK retries
    (default 2). ``timeout_s``: seconds per HTTP attempt (default 60). ``http_client``: an
    ``httpx2.Client`` for the SDK (tests inject a mock transport).
    Counters: ``calls`` (API calls made), ``cache_hits``, ``input_tokens``, ``output_tokens``.
    """

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        temperature: float | None = 0.0,
        api_key: str | None = None,
        base_url: str | None = None,
        cache: PromptCache | str | os.PathLike[str] | None | bool = None,
        max_retries: int = 2,
        timeout_s: float = 60.0,
        http_client: Any = None,
    ) -> None:
        if not model:
            raise ConfigError("AnthropicTextClient.model must be a non-empty model id")
        if timeout_s <= 0:
            raise ConfigError(f"AnthropicTextClient.timeout_s must be > 0 seconds, got {timeout_s!r}")
        self._api = AnthropicAPI(
            api_key=api_key,
            who=f"anthropic text client ({model})",
            error=LLMClientError,
            max_retries=max_retries,
            base_url=base_url,
            http_client=http_client,
        )
        self.model = model
        self.temperature = temperature
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        if cache is False:
            self.cache: PromptCache | None = None
        elif cache is None or cache is True:
            self.cache = PromptCache()
        elif isinstance(cache, PromptCache):
            self.cache = cache
        else:
            self.cache = PromptCache(cache)  # type: ignore[arg-type]
        self.calls = 0
        self.cache_hits = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def __repr__(self) -> str:  # never shows the key
        return f"AnthropicTextClient(model={self.model!r}, temperature={self.temperature})"

    def complete(self, system: str, user: str, *, max_tokens: int) -> str:
        key = prompt_key(self.model, system, user, max_tokens, self.temperature)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                return hit
        resp = self._api.create(
            model=self.model,
            max_tokens=max_tokens,
            system=system,
            messages=[{"role": "user", "content": user}],
            extra_body={"temperature": self.temperature} if self.temperature is not None else None,
            timeout=self.timeout_s,
        )
        self.calls += 1
        usage = usage_of(resp)
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        content = getattr(resp, "content", None) or []
        text = "".join(b.text for b in content if getattr(b, "type", None) == "text" and isinstance(getattr(b, "text", None), str))
        if self.cache is not None:
            self.cache.put(key, text)
        return text

# -- next action -------------------------------------------------------------------------------
_JSON_OBJ = re.compile(r"\{.*\}", re.DOTALL)


def parse_tool_call(reply: str) -> tuple[str, str] | None:
    """``(name, normalised arguments)`` from a reply holding one JSON object, else ``None``.

    Accepts ``{"name": ..., "arguments": {...}}`` (``input`` or ``parameters`` for the
    arguments too), inside code fences or surrounded by prose.
    """
    m = _JSON_OBJ.search(reply)
    if m is None:
        return None
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("input", obj.get("parameters", {})))
    if isinstance(args, str):
        return obj["name"], normalize_arguments(args)
    return obj["name"], normalize_arguments(args if args is not None else {})


def action_score(p: Probe, reply: str) -> float:
    """0.5 for the recorded tool name, 1.0 for name and normalised arguments, else 0."""
    got = parse_tool_call(reply)
    if got is None or got[0] != p.expected[0]:
        return 0.0
    return 1.0 if got[1] == p.expected[1] else 0.5


# -- the scorer --------------------------------------------------------------------------------
def _cut_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n\n[... {omitted} characters omitted ...]\n\n{text[-half:]}"


def _yes(reply: str) -> bool:
    words = re.findall(r"[a-z]+", reply.casefold())
    return bool(words) and words[0] == "yes"


@register_scorer
@dataclass(frozen=True, kw_only=True)
class LLMScorer:
    """Answerer + judge (see the module docstring).

    ``answerer``: a :class:`TextClient`; default ``None`` = :class:`AnthropicTextClient` with
    its defaults (needs ``ANTHROPIC_API_KEY``). ``judge``: default ``None`` = the answerer.
    ``scopes``: default ``("view",)``. ``answer_max_tokens``: default 400.
    ``judge_max_tokens``: default 5. ``action_max_tokens``: default 600.
    ``max_view_chars``: characters of view text sent (default 600,000, ~150k tokens); longer
    texts are cut in the middle. ``exact_for_facts``: also report ``llm_exact`` rows (default
    True). ``next_action``: answer ``next_action`` probes (default True; probe_view creates them
    for recorded tasks only).
    """

    name: ClassVar[str] = "llm"
    methods: ClassVar[tuple[str, ...]] = ("llm", "llm_exact")
    baseline_is_one: ClassVar[bool] = False

    answerer: Any = None
    judge: Any = None
    scopes: tuple[str, ...] = ("view",)
    answer_max_tokens: int = 400
    judge_max_tokens: int = 5
    action_max_tokens: int = 600
    max_view_chars: int = 600_000
    exact_for_facts: bool = True
    next_action: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", tuple(self.scopes))
        for s in self.scopes:
            if s not in SCOPES:
                raise ConfigError(f"LLMScorer.scopes entries must be among {', '.join(SCOPES)}, got {s!r}")
        for f in ("answer_max_tokens", "judge_max_tokens", "action_max_tokens"):
            if getattr(self, f) < 1:
                raise ConfigError(f"LLMScorer.{f} must be >= 1, got {getattr(self, f)!r}")
        if self.max_view_chars < 1000:
            raise ConfigError(f"LLMScorer.max_view_chars must be >= 1000 characters, got {self.max_view_chars!r}")
        ans = self.answerer if self.answerer is not None else AnthropicTextClient()
        for role, c in (("answerer", ans), ("judge", self.judge)):
            if c is not None and not callable(getattr(c, "complete", None)):
                raise ConfigError(f"LLMScorer.{role} must have a complete(system, user, *, max_tokens) method, got {type(c).__name__}")
        object.__setattr__(self, "answerer", ans)
        if self.judge is None:
            object.__setattr__(self, "judge", ans)

    @property
    def handles_next_action(self) -> bool:
        return self.next_action

    def ask(self, context: str, question: str) -> str:
        """The answerer's reply to ``question`` given ``context`` (raw text)."""
        user = f"<context>\n{_cut_middle(context, self.max_view_chars)}\n</context>\n\nQuestion: {question}"
        return str(self.answerer.complete(ANSWER_SYSTEM, user, max_tokens=self.answer_max_tokens))

    def grade(self, p: Probe, answer: str) -> float:
        """The judge's verdict on ``answer`` for ``p``: 1.0 (yes) or 0.0."""
        if p.scoring == "answer":
            ref = f"Reference answer: {p.expected[0]}"
            if p.variants:
                ref += "\nAlso acceptable: " + "; ".join(p.variants)
        else:
            ref = f"Reference item: {p.reference or ', '.join(p.expected)}\nKey specifics: " + ", ".join(p.expected)
        user = f"Question: {p.question}\n\n{ref}\n\nAnswer to grade:\n{answer}\n\nDoes the answer state the reference's information? yes or no"
        return 1.0 if _yes(str(self.judge.complete(JUDGE_SYSTEM, user, max_tokens=self.judge_max_tokens))) else 0.0

    def act(self, context: str, tool_names: Sequence[str]) -> str:
        """The answerer's choice of the next tool call (raw reply)."""
        tools = f"\n\nAvailable tools: {', '.join(tool_names)}" if tool_names else ""
        user = f"<context>\n{_cut_middle(context, self.max_view_chars)}\n</context>{tools}\n\nWhat is your next tool call?"
        return str(self.answerer.complete(ACTION_SYSTEM, user, max_tokens=self.action_max_tokens))

    def score(self, probes: Sequence[Probe], inp: ProbeInput, scope: str) -> dict[str, list[float | None]]:
        llm: list[float | None] = []
        exact: list[float | None] = []
        text = inp.scope_text(scope)
        answers: dict[str, str] = {}
        for p in probes:
            is_fact = p.kind in ("fact", "derived_fact")
            if p.kind == "next_action":
                exact.append(None)
                if not self.next_action:
                    llm.append(None)
                elif text is None:
                    llm.append(0.0)
                else:
                    llm.append(action_score(p, self.act(text, inp.tool_names)))
                continue
            if text is None:  # anchors scope, no compaction message: nothing to answer from
                llm.append(0.0)
                exact.append(0.0 if is_fact and self.exact_for_facts else None)
                continue
            if p.question not in answers:
                answers[p.question] = self.ask(text, p.question)
            a = answers[p.question]
            llm.append(self.grade(p, a))
            exact.append((1.0 if TextIndex.of(a).any_present(p.candidates) else 0.0) if is_fact and self.exact_for_facts else None)
        return {"llm": llm, "llm_exact": exact}


# -- calibration -------------------------------------------------------------------------------
def judge_agreement(df: Any) -> dict[str, float | int]:
    """How often the judge (``method == "llm"``) agrees with exact matching (``llm_exact``) on
    the same answerable fact probes.

    Returns ``n`` (probe observations compared), ``agreement`` (fraction with equal
    ``passed``; NaN when ``n`` is 0), ``judge_yes_exact_no`` and ``judge_no_exact_yes``
    (counts of each disagreement: the first suggests a lenient judge or a paraphrased value,
    the second a strict judge).
    """
    keys = ["run_id", "task_id", "checkpoint_call_index", "probe_id", "scope"]
    judge = df[(df["method"] == "llm") & df["answerable"].astype(bool)]
    exact = df[(df["method"] == "llm_exact") & df["answerable"].astype(bool)]
    m = judge[keys + ["passed"]].merge(exact[keys + ["passed"]], on=keys, suffixes=("_judge", "_exact"))
    n = int(len(m))
    if n == 0:
        return {"n": 0, "agreement": float("nan"), "judge_yes_exact_no": 0, "judge_no_exact_yes": 0}
    pj = m["passed_judge"].astype(bool)
    pe = m["passed_exact"].astype(bool)
    return {
        "n": n,
        "agreement": float((pj == pe).mean()),
        "judge_yes_exact_no": int((pj & ~pe).sum()),
        "judge_no_exact_yes": int((~pj & pe).sum()),
    }
