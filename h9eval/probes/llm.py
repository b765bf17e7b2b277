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

Cache: replies are stored by prompt key (model, system, user, max_tokens, temperature) in the
summarizer's persistent SQLite store (:class:`h9eval.summarizers.cache.ResponseCache`, under
the summarizer id ``llm_probe``), so one file can serve a sweep's summaries and probes, and a
second identical run makes no API call. The stored row keeps the first call's tokens, cost and
latency.

Audit: every answer, judge verdict and next-action reply the scorer obtains becomes a row of
``LLMScorer.audit`` (:data:`AUDIT_COLUMNS`, :meth:`LLMScorer.audit_frame`): question, the
answer, the ground truth shown to the judge, the judge's raw reply and verdict, the exact-match
grade, tokens, cost and whether the reply came from the cache, so a reader can check any score.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from h9eval.core.anthropic import DEFAULT_BREAKER_FAILURES, DEFAULT_MAX_RETRY_AFTER_S, AnthropicAPI
from h9eval.core.errors import ConfigError, H9Error
from h9eval.core.paths import check_db_file
from h9eval.probes.probe import Probe, normalize_arguments
from h9eval.probes.scorers import SCOPES, ProbeInput, register_scorer
from h9eval.tasks.text import TextIndex
from h9eval.summarizers.cache import ResponseCache
from h9eval.compaction.summary import SummaryReply
from h9eval.summarizers.anthropic import DEFAULT_PRICES_USD_PER_MTOK, price_for

__all__ = [
    "TextClient",
    "TextReply",
    "AUDIT_COLUMNS",
    "PROBE_CACHE_ID",
    "JudgeAgreement",
    "judge_agreement_table",
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


@dataclass(frozen=True, kw_only=True)
class TextReply:
    """One completion and what it cost. ``cache_hit``: served from the cache (tokens, cost
    and latency are then the original call's); ``cost_usd`` is NaN when unknown (a client
    without prices, an injected fake)."""

    text: str
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = float("nan")
    latency_s: float = 0.0
    cache_hit: bool = False


def complete_reply(client: Any, system: str, user: str, *, max_tokens: int) -> TextReply:
    """``client.complete_reply(...)`` when the client has it, else its ``complete`` text with
    unknown cost (plain :class:`TextClient` objects, test fakes)."""
    fn = getattr(client, "complete_reply", None)
    if callable(fn):
        r = fn(system, user, max_tokens=max_tokens)
        if isinstance(r, TextReply):
            return r
    return TextReply(
        text=str(client.complete(system, user, max_tokens=max_tokens)), model=str(getattr(client, "model", ""))
    )


PROBE_CACHE_ID = "llm_probe"
"""``summarizer_id`` of the llm scorer's rows in a shared :class:`ResponseCache` file."""


# -- cache -------------------------------------------------------------------------------------
def prompt_key(model: str, system: str, user: str, max_tokens: int, temperature: float | None) -> str:
    """SHA-256 hex of everything that shapes a reply."""
    blob = json.dumps(
        {"model": model, "system": system, "user": user, "max_tokens": max_tokens, "temperature": temperature},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def _refuse_old_layout(path: Path) -> None:
    # Earlier versions wrote their own table (key, text, created_at) under the same name; the
    # shared store cannot read it, and a raw sqlite error would not say why.
    if not path.is_file() or path.stat().st_size == 0:
        return
    import sqlite3

    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(replies)")}
    except sqlite3.DatabaseError:
        return  # not SQLite at all: the store's own check names the problem
    if cols and "summarizer_id" not in cols:
        raise ConfigError(
            f"cache {str(path)!r} is an llm probe cache of an earlier layout (table replies without summarizer_id); "
            "delete it or give another path"
        )


class PromptCache:
    """Replies by prompt key: in memory (``path=None``, the default) or persistent in the
    summarizer's SQLite store (a path or a :class:`~h9eval.summarizers.cache.ResponseCache`).

    The persistent form shares one file with summaries (rows under ``summarizer_id``
    :data:`PROBE_CACHE_ID`): a sweep's ``summary_cache.sqlite`` serves its probes too. Same
    properties as that store: mode 0600, first writer of a key wins, WAL, never an API key.
    ``len()`` counts probe replies only.
    """

    def __init__(self, path: str | os.PathLike[str] | Any = None) -> None:
        self._mem: dict[str, TextReply] = {}
        self._lock = threading.Lock()
        if path is None:
            self.store: ResponseCache | None = None
        elif isinstance(path, ResponseCache):
            self.store = path
        else:
            check_db_file(path, what="probe reply cache")
            _refuse_old_layout(Path(path))
            self.store = ResponseCache(path)
        self.path = None if self.store is None else self.store.path

    @staticmethod
    def _key(key: str) -> str:
        # Namespaced, so a probe prompt can never collide with a summary request's key.
        return f"{PROBE_CACHE_ID}:{key}"

    def get_reply(self, key: str) -> TextReply | None:
        """The stored reply (``cache_hit=True``) or ``None``."""
        if self.store is None:
            with self._lock:
                hit = self._mem.get(key)
            return None if hit is None else replace(hit, cache_hit=True)
        r = self.store.get(self._key(key))
        if r is None or r.text is None:
            return None
        cost = float(r.cost_usd) if r.extra.get("cost_known", True) else float("nan")
        return TextReply(
            text=r.text, model=r.model, input_tokens=r.input_tokens, output_tokens=r.output_tokens,
            cost_usd=cost, latency_s=r.latency_s, cache_hit=True,
        )  # fmt: skip

    def put_reply(self, key: str, reply: TextReply) -> None:
        """Store ``reply`` under ``key`` unless present (first one wins)."""
        if self.store is None:
            with self._lock:
                self._mem.setdefault(key, replace(reply, cache_hit=False))
            return

        known = not math.isnan(reply.cost_usd)
        self.store.put(
            self._key(key),
            SummaryReply(
                text=reply.text, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                latency_s=reply.latency_s, cost_usd=reply.cost_usd if known else 0.0, model=reply.model,
                extra={"cost_known": known},
            ),
            summarizer_id=PROBE_CACHE_ID,
        )  # fmt: skip

    def get(self, key: str) -> str | None:
        r = self.get_reply(key)
        return None if r is None else r.text

    def put(self, key: str, text: str) -> None:
        self.put_reply(key, TextReply(text=text))

    def __len__(self) -> int:
        if self.store is None:
            with self._lock:
                return len(self._mem)
        return self.store.count(summarizer_id_prefix=PROBE_CACHE_ID)


# -- Anthropic adapter -------------------------------------------------------------------------
class AnthropicTextClient:
    """:class:`TextClient` on the Anthropic Messages API (the ``anthropic`` SDK, imported here,
    not when h9eval is imported).

    ``model``: default ``claude-haiku-4-5``. ``temperature``: default 0.0, sent in the request
    body (SDK 2.10 has no ``temperature`` argument); ``None`` omits it. ``api_key``: default the
    ``ANTHROPIC_API_KEY`` environment variable; missing → :class:`ConfigError` here.
    ``cache``: a :class:`PromptCache`, a path or :class:`ResponseCache` for the persistent
    SQLite store (shareable with the summarizer's), or ``None`` for a fresh in-memory cache
    (default); ``False`` disables caching. ``max_retries``: SDK retries (default 2).
    ``timeout_s``: seconds per HTTP attempt (default 60). ``http_client``: an
    ``httpx2.Client`` for the SDK (tests inject a mock transport). ``prices``: model ->
    (input, output) USD per million tokens (default the summarizer's list prices); an unknown
    model's cost is NaN. ``breaker_failures``: consecutive failed calls after which the client
    stops calling (:class:`~h9eval.core.anthropic.CircuitBreaker`; default 3, 0 = never).
    ``max_retry_after_s``: the longest ``retry-after`` a retry waits for (default 60; longer ends the call).
    Counters: ``calls`` (API calls made), ``cache_hits``, ``input_tokens``, ``output_tokens``,
    ``cost_usd`` (of the calls made, not of cache hits).
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
        prices: Mapping[str, tuple[float, float]] | None = None,
        breaker_failures: int = DEFAULT_BREAKER_FAILURES,
        max_retry_after_s: float = DEFAULT_MAX_RETRY_AFTER_S,
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
            breaker_failures=breaker_failures,
            max_retry_after_s=max_retry_after_s,
        )
        self.model = model
        self.temperature = temperature
        self.base_url = self._api.base_url
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        if cache is False:
            self.cache: PromptCache | None = None
        elif cache is None or cache is True:
            self.cache = PromptCache()
        elif isinstance(cache, PromptCache):
            self.cache = cache
        else:
            self.cache = PromptCache(cache)
        self.prices = dict(prices) if prices is not None else None
        self.calls = 0
        self.cache_hits = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0

    def __repr__(self) -> str:  # never shows the key
        return f"AnthropicTextClient(model={self.model!r}, temperature={self.temperature})"

    def complete(self, system: str, user: str, *, max_tokens: int) -> str:
        return self.complete_reply(system, user, max_tokens=max_tokens).text

    def complete_reply(self, system: str, user: str, *, max_tokens: int) -> TextReply:
        """The reply with its tokens and cost (from the cache when the prompt was seen)."""
        key = prompt_key(self.model, system, user, max_tokens, self.temperature)
        if self.cache is not None:
            hit = self.cache.get_reply(key)
            if hit is not None:
                self.cache_hits += 1
                return hit
        t0 = time.perf_counter()
        resp = self._api.create(
            model=self.model,
            max_tokens=max_tokens,
            system=system,
            messages=[{"role": "user", "content": user}],
            extra_body={"temperature": self.temperature} if self.temperature is not None else None,
            timeout=self.timeout_s,
        )
        latency = time.perf_counter() - t0
        self.calls += 1
        got = self._api.reply(resp)  # every field redacted: a reply echoing the key is never stored with it
        tin, tout = got.usage.input_tokens, got.usage.output_tokens
        self.input_tokens += tin
        self.output_tokens += tout
        text = got.text or ""

        price = price_for(self.model, self.prices if self.prices is not None else DEFAULT_PRICES_USD_PER_MTOK)
        cost = float("nan") if price is None else (tin * price[0] + tout * price[1]) / 1e6
        reply = TextReply(
            text=text, model=self.model, input_tokens=tin, output_tokens=tout, cost_usd=cost, latency_s=latency
        )
        if not math.isnan(cost):
            self.cost_usd += cost
        if self.cache is not None:
            self.cache.put_reply(key, reply)
        return reply


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


AUDIT_COLUMNS: tuple[str, ...] = (
    "task_id",
    "run_id",
    "checkpoint_call_index",
    "message_index",
    "context",
    "scope",
    "context_sha256",
    "role",
    "probe_id",
    "probe_kind",
    "question",
    "reference",
    "answer",
    "reply",
    "verdict",
    "exact",
    "model",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "cache_hit",
)
"""Columns of :meth:`LLMScorer.audit_frame`, one row per model reply the scorer used.

``context``: ``view`` (the checkpoint's view) or ``history`` (the uncompacted baseline);
``context_sha256``: hash of the text the answerer read (equal texts, equal hashes).
``role``: ``answer`` (one per question and context: ``probe_id`` is the first probe asking it,
``reply`` the answer), ``judge`` (one per probe: ``reference`` is what the judge was shown,
``answer`` the graded answer, ``reply`` the judge's raw text, ``verdict`` 1.0/0.0, ``exact``
the exact-match grade for facts, else NaN) or ``action`` (next-action probes: ``reply`` the
proposed call, ``verdict`` its score). Tokens, cost (NaN when unknown) and ``cache_hit`` are
that reply's; a cache hit reports the original call's tokens and cost, and costs nothing now.
"""


@register_scorer
@dataclass(frozen=True, kw_only=True)
class LLMScorer:
    """Answerer + judge (see the module docstring).

    ``answerer``: a :class:`TextClient`; default ``None`` = :class:`AnthropicTextClient` with
    its defaults (needs ``ANTHROPIC_API_KEY``) and ``cache``. ``judge``: default ``None`` = the
    answerer. ``cache``: for the default client only: a path or
    :class:`~h9eval.summarizers.cache.ResponseCache` (persistent, e.g. the sweep's summary
    cache file) or ``None`` (in memory). ``scopes``: default ``("view",)``.
    ``answer_max_tokens``: default 400. ``judge_max_tokens``: default 5.
    ``action_max_tokens``: default 600. ``max_view_chars``: characters of view text sent
    (default 600,000, ~150k tokens); longer texts are cut in the middle. ``exact_for_facts``:
    also report ``llm_exact`` rows (default True). ``next_action``: answer ``next_action``
    probes (default True; probe_view creates them for recorded tasks only).
    ``audit``: the rows of every reply used (:data:`AUDIT_COLUMNS`), appended as probes are
    scored.
    """

    name: ClassVar[str] = "llm"
    methods: ClassVar[tuple[str, ...]] = ("llm", "llm_exact")
    baseline_is_one: ClassVar[bool] = False

    answerer: Any = None
    judge: Any = None
    cache: Any = None
    scopes: tuple[str, ...] = ("view",)
    answer_max_tokens: int = 400
    judge_max_tokens: int = 5
    action_max_tokens: int = 600
    max_view_chars: int = 600_000
    exact_for_facts: bool = True
    next_action: bool = True
    audit: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False, compare=False)

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
        if self.cache is not None and self.answerer is not None:
            raise ConfigError(
                "LLMScorer.cache applies to the default Anthropic client only; give the cache to your answerer instead"
            )
        ans = self.answerer if self.answerer is not None else AnthropicTextClient(cache=self.cache)
        for role, c in (("answerer", ans), ("judge", self.judge)):
            if c is not None and not callable(getattr(c, "complete", None)):
                raise ConfigError(
                    f"LLMScorer.{role} must have a complete(system, user, *, max_tokens) method, got {type(c).__name__}"
                )
        object.__setattr__(self, "answerer", ans)
        if self.judge is None:
            object.__setattr__(self, "judge", ans)

    @property
    def handles_next_action(self) -> bool:
        return self.next_action

    def _answer_prompt(self, context: str, question: str) -> str:
        return f"<context>\n{_cut_middle(context, self.max_view_chars)}\n</context>\n\nQuestion: {question}"

    def ask(self, context: str, question: str) -> str:
        """The answerer's reply to ``question`` given ``context`` (raw text)."""
        return complete_reply(
            self.answerer, ANSWER_SYSTEM, self._answer_prompt(context, question), max_tokens=self.answer_max_tokens
        ).text

    @staticmethod
    def reference(p: Probe) -> str:
        """The ground truth the judge is shown for ``p``."""
        if p.scoring == "answer":
            ref = f"Reference answer: {p.expected[0]}"
            if p.variants:
                ref += "\nAlso acceptable: " + "; ".join(p.variants)
            return ref
        return f"Reference item: {p.reference or ', '.join(p.expected)}\nKey specifics: " + ", ".join(p.expected)

    def _judge(self, p: Probe, answer: str) -> TextReply:
        user = (
            f"Question: {p.question}\n\n{self.reference(p)}\n\nAnswer to grade:\n{answer}\n\nDoes the answer state the "
            "reference's information? yes or no"
        )
        return complete_reply(self.judge, JUDGE_SYSTEM, user, max_tokens=self.judge_max_tokens)

    def grade(self, p: Probe, answer: str) -> float:
        """The judge's verdict on ``answer`` for ``p``: 1.0 (yes) or 0.0."""
        return 1.0 if _yes(self._judge(p, answer).text) else 0.0

    def _act_prompt(self, context: str, tool_names: Sequence[str]) -> str:
        tools = f"\n\nAvailable tools: {', '.join(tool_names)}" if tool_names else ""
        return (
            f"<context>\n{_cut_middle(context, self.max_view_chars)}\n</context>{tools}\n\nWhat is your next tool call?"
        )

    def act(self, context: str, tool_names: Sequence[str]) -> str:
        """The answerer's choice of the next tool call (raw reply)."""
        return complete_reply(
            self.answerer, ACTION_SYSTEM, self._act_prompt(context, tool_names), max_tokens=self.action_max_tokens
        ).text

    def _record(self, inp: ProbeInput, scope: str, sha: str, role: str, p: Probe, reply: TextReply, **kw: Any) -> None:
        tags = inp.tags
        self.audit.append(
            {
                "task_id": tags.get("task_id", ""),
                "run_id": tags.get("run_id", ""),
                "checkpoint_call_index": tags.get("checkpoint_call_index", -1),
                "message_index": tags.get("message_index", -1),
                "context": tags.get("context", "view"),
                "scope": scope,
                "context_sha256": sha,
                "role": role,
                "probe_id": p.probe_id,
                "probe_kind": p.kind,
                "question": p.question,
                "reference": kw.get("reference", ""),
                "answer": kw.get("answer", ""),
                "reply": reply.text,
                "verdict": kw.get("verdict", math.nan),
                "exact": kw.get("exact", math.nan),
                "model": reply.model,
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
                "cost_usd": reply.cost_usd,
                "cache_hit": reply.cache_hit,
            }
        )

    def score(self, probes: Sequence[Probe], inp: ProbeInput, scope: str) -> dict[str, list[float | None]]:
        llm: list[float | None] = []
        exact: list[float | None] = []
        text = inp.scope_text(scope)
        sha = "" if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
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
                    r = complete_reply(
                        self.answerer,
                        ACTION_SYSTEM,
                        self._act_prompt(text, inp.tool_names),
                        max_tokens=self.action_max_tokens,
                    )
                    sc = action_score(p, r.text)
                    self._record(inp, scope, sha, "action", p, r, verdict=sc)
                    llm.append(sc)
                continue
            if text is None:  # anchors scope, no compaction message: nothing to answer from
                llm.append(0.0)
                exact.append(0.0 if is_fact and self.exact_for_facts else None)
                continue
            if p.question not in answers:
                r = complete_reply(
                    self.answerer,
                    ANSWER_SYSTEM,
                    self._answer_prompt(text, p.question),
                    max_tokens=self.answer_max_tokens,
                )
                answers[p.question] = r.text
                self._record(inp, scope, sha, "answer", p, r)
            a = answers[p.question]
            jr = self._judge(p, a)
            verdict = 1.0 if _yes(jr.text) else 0.0
            ex = (
                (1.0 if TextIndex.of(a).any_present(p.candidates) else 0.0)
                if is_fact and self.exact_for_facts
                else None
            )
            self._record(
                inp,
                scope,
                sha,
                "judge",
                p,
                jr,
                reference=self.reference(p),
                answer=a,
                verdict=verdict,
                exact=math.nan if ex is None else ex,
            )
            llm.append(verdict)
            exact.append(ex)
        return {"llm": llm, "llm_exact": exact}

    def audit_frame(self) -> Any:
        """:attr:`audit` as a DataFrame with :data:`AUDIT_COLUMNS` (a copy)."""
        import pandas as pd

        return pd.DataFrame(list(self.audit), columns=list(AUDIT_COLUMNS))


# -- calibration -------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class JudgeAgreement:
    """How often the judge agrees with exact matching on answerable fact probes.

    ``n``: probe observations compared (judge and exact row for the same run, task,
    checkpoint, probe and scope); ``agreement``: fraction with equal ``passed`` (NaN when
    ``n`` is 0); ``judge_yes_exact_no`` (a lenient judge or a paraphrased value) and
    ``judge_no_exact_yes`` (a strict judge): counts of each disagreement.
    """

    n: int
    agreement: float
    judge_yes_exact_no: int
    judge_no_exact_yes: int


_AGREE_KEYS = ["run_id", "task_id", "checkpoint_call_index", "probe_id", "scope"]


def _paired(df: Any) -> Any:
    judge = df[(df["method"] == "llm") & df["answerable"].astype(bool)]
    exact = df[(df["method"] == "llm_exact") & df["answerable"].astype(bool)]
    return judge[_AGREE_KEYS + ["passed"]].merge(
        exact[_AGREE_KEYS + ["passed"]], on=_AGREE_KEYS, suffixes=("_judge", "_exact")
    )


def _agreement(m: Any) -> JudgeAgreement:
    n = int(len(m))
    if n == 0:
        return JudgeAgreement(n=0, agreement=float("nan"), judge_yes_exact_no=0, judge_no_exact_yes=0)
    pj = m["passed_judge"].astype(bool)
    pe = m["passed_exact"].astype(bool)
    return JudgeAgreement(
        n=n,
        agreement=float((pj == pe).mean()),
        judge_yes_exact_no=int((pj & ~pe).sum()),
        judge_no_exact_yes=int((~pj & pe).sum()),
    )


def judge_agreement(df: Any) -> JudgeAgreement:
    """Judge (``method == "llm"``) vs exact matching (``llm_exact``) over a probes table (see
    :class:`JudgeAgreement`); ``n == 0`` when the llm scorer did not run."""
    return _agreement(_paired(df))


def judge_agreement_table(df: Any, by: Sequence[str] = ("run_id",)) -> Any:
    """:func:`judge_agreement` per group of ``by`` (columns of the probes table among
    ``run_id``, ``task_id``, ``checkpoint_call_index``, ``probe_id``, ``scope``), as a DataFrame
    with ``by`` then ``n``, ``agreement``, ``judge_yes_exact_no``, ``judge_no_exact_yes``;
    groups without paired rows are absent."""
    import pandas as pd

    by = list(by)
    bad = [c for c in by if c not in _AGREE_KEYS]
    if bad:
        raise ConfigError(f"judge_agreement_table by= must be among {', '.join(_AGREE_KEYS)}, got {bad[0]!r}")
    cols = [*by, "n", "agreement", "judge_yes_exact_no", "judge_no_exact_yes"]
    m = _paired(df)
    if not by:
        return pd.DataFrame([vars(_agreement(m))], columns=cols)
    rows = [
        {**dict(zip(by, k if isinstance(k, tuple) else (k,))), **vars(_agreement(g))}
        for k, g in m.groupby(by, sort=True)
    ]
    return pd.DataFrame(rows, columns=cols)
