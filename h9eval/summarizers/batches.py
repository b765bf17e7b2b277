"""Summaries through Anthropic's Message Batches API: half the price, hours instead of seconds.

A cell's summaries are sequential (a summary feeds the next compaction), so a sweep batches
*across* cells, in rounds (:func:`h9eval.sweeps.batching.run_batched` drives them):

1. Every cell runs until it needs a reply that is not there yet. Its summarizer, a
   :class:`BatchingSummarizer`, writes the request's body to the sweep folder and raises
   :class:`SummaryDeferred`, which ends the cell without a result (it is not a failure).
2. The requests of all waiting cells go out as one batch (:class:`BatchClient`): the batch id and
   each request's ``custom_id`` are written to ``batches/`` *before* polling, then the batch is
   polled every ``poll_interval_s`` until it has ended and its results are stored per
   ``custom_id``, or until ``deadline_s`` after its submission (default 24 h, when Anthropic
   expires a batch itself): then it is canceled and each of its requests is stored as
   ``errored`` (``batch_deadline``), so its summaries fall back with the cause ``batch ... not
   ended after N s``.
3. The waiting cells run again from their start: replays are deterministic, so each reaches the
   same requests, now answered from the stored results, and goes on to its next request (or
   ends). Rounds repeat until no cell waits.

A cell with ``k`` summaries thus replays ``k + 1`` times: its own compute grows with ``k``, but it
is offline compute (milliseconds to seconds a cell) against a batch's minutes to hours, and it
needs no checkpoint of a running replay, so the sweep's pool, Dask and in-process executors
run the rounds unchanged.

Resume: a sweep killed while a batch is in flight finds the batch's record (state
``submitted``) on its next run, fetches that batch's results by its recorded id and submits
none of its requests again. A request is never paid twice within a sweep folder: its
``custom_id`` is the SHA-256 of its body (:func:`h9eval.core.cassette.request_hash`), a result
stored under it is reused by every cell that sends the same body, and the cell that asked first
(the smallest run id of the round) is the one that paid; the others get it as a cache hit, as
they would from the response cache in a serial sweep (repeats of a sweep share nothing, as
they share no response cache). The window left: a kill between the API
accepting a batch and its id being written (one HTTP response) loses that id, and the batch's
requests are sent again on resume.

Results: ``succeeded`` gives the reply (``batched=True``, cost at
:func:`h9eval.core.prices.batch_price_frac` of the list price, latency 0: a batch's requests
have no latency of their own; the wait is in the batch record); ``errored``, ``canceled`` and
``expired`` (and a request the results left out) raise :class:`SummarizerError`, so the policy
takes harness9's fallback and the calls table's ``fallback_cause`` says which. Replies are also
stored in the sweep's response cache, so a later sweep hits them.

Files (``<sweep>/batches/``; no key anywhere: bodies carry none, results are redacted with
:meth:`h9eval.core.anthropic.AnthropicAPI.redact_obj`): ``requests/<custom_id>.json`` (the
body), ``submitted/<batch id>.json`` (the batch: its ``custom_id``\\ s, who paid each, state,
times) and ``results/<custom_id>.json`` (the result as the API returned it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from h9eval.compaction.summary import SummaryReply, SummaryRequest
from h9eval.core.anthropic import DEFAULT_REQUEST_TIMEOUT_S, AnthropicAPI
from h9eval.core.budget import Budget, call_bound_usd
from h9eval.core.cassette import request_hash
from h9eval.core.errors import ConfigError, FormatError, H9Error, SummarizerError
from h9eval.core.prices import batch_price_frac
from h9eval.core.paths import prepare_out_dir, write_json_atomic
from h9eval.summarizers.anthropic import AnthropicSummarizer
from h9eval.summarizers.cache import CachedSummarizer, ResponseCache, cache_key
from h9eval.summarizers.registry import SUMMARIZERS

__all__ = [
    "BATCH_DIR_NAME",
    "DEFAULT_BATCH_DEADLINE_S",
    "DEFAULT_POLL_INTERVAL_S",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_REQUESTS",
    "BatchClient",
    "BatchSettings",
    "BatchStore",
    "BatchingSummarizer",
    "SummaryDeferred",
    "custom_id",
    "is_batchable",
]

BATCH_DIR_NAME = "batches"
"""The folder of a sweep that holds its batches' requests, records and results."""
DEFAULT_POLL_INTERVAL_S = 60.0
"""Seconds between two status checks of a batch in flight (most batches take minutes to an hour)."""
DEFAULT_BATCH_DEADLINE_S = 86_400.0
"""Seconds after its submission that a batch is polled for: 24 h, after which Anthropic expires
the requests of a batch that has not ended (a batch that never ends was polled for ever)."""
BATCH_DEADLINE_LIMIT_S = 7 * 86_400.0
"""The longest ``deadline_s`` :class:`BatchSettings` accepts (a week)."""
MAX_BATCH_REQUESTS = 100_000
"""The API's limit of requests in one batch."""
MAX_BATCH_BYTES = 200_000_000
"""Request bytes per batch: below the API's 256 MB, leaving room for the JSON around the bodies."""
RESULT_TYPES = ("succeeded", "errored", "canceled", "expired")
"""A batch result's ``type`` (the API's documented four)."""


@dataclass(frozen=True, kw_only=True)
class BatchSettings:
    """How a sweep batches its summaries (the spec's ``[summarizer] batch = true``,
    ``batch_poll_interval_s`` and ``batch_deadline_s``; ``h9eval sweep --batch
    --batch-poll-interval-s S --batch-deadline-s S``).

    ``poll_interval_s``: seconds between two status checks of a batch in flight, in
    (0, 3600]; default :data:`DEFAULT_POLL_INTERVAL_S`. ``deadline_s``: seconds after its
    submission that a batch is polled for, in (0, 604800]; default
    :data:`DEFAULT_BATCH_DEADLINE_S` (24 h). A batch not ended by then is canceled and its
    requests fall back (:meth:`BatchClient.collect`); no poll sleeps past the deadline."""

    poll_interval_s: float = DEFAULT_POLL_INTERVAL_S
    deadline_s: float = DEFAULT_BATCH_DEADLINE_S

    def __post_init__(self) -> None:
        v = self.poll_interval_s
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 3600:
            raise ConfigError(f"batch_poll_interval_s must be a number of seconds in (0, 3600], got {v!r}")
        d = self.deadline_s
        if isinstance(d, bool) or not isinstance(d, int | float) or not 0 < d <= BATCH_DEADLINE_LIMIT_S:
            raise ConfigError(
                f"batch_deadline_s must be a number of seconds in (0, {BATCH_DEADLINE_LIMIT_S:g}], got {d!r}"
            )


def is_batchable(name: str) -> bool:
    """Whether the summarizer called ``name`` can send its requests as batches (an Anthropic one)."""
    return issubclass(SUMMARIZERS.get(name), AnthropicSummarizer)


def custom_id(params: Mapping[str, Any], *, scope: str = "") -> str:
    """A batch request's ``custom_id``: the SHA-256 hex of its body (64 characters, the API's
    limit), so equal bodies share one id and one paid result. ``scope`` (a sweep repeat's, ``r1``)
    is hashed with the body: repeats do not share replies, as they do not share a response cache."""
    return request_hash({"params": dict(params), "scope": scope} if scope else params)


class SummaryDeferred(BaseException):  # noqa: N818 - not an error: the cell waits for a batch
    """Raised by :class:`BatchingSummarizer` when a cell needs a reply that a batch has not
    given yet. A :class:`BaseException`, so the policy does not take it for a failed call (which
    it would answer with its fallback): it ends the cell, which runs again after the batch."""

    def __init__(self, custom_id: str) -> None:
        super().__init__(custom_id)
        self.custom_id = custom_id


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class BatchStore:
    """A sweep's ``batches/`` folder (see the module docstring); safe for concurrent workers:
    every file is written whole, atomically."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _dir(self, name: str) -> Path:
        prepare_out_dir(self.root, what="batches folder")
        return prepare_out_dir(self.root / name, what=f"batches {name} folder")

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise FormatError(f"not JSON ({e.msg}); delete it to send the request again", path=str(path)) from None
        if not isinstance(data, dict):
            raise FormatError("expected a JSON object", path=str(path))
        return data

    # requests
    def put_request(self, cid: str, params: Mapping[str, Any]) -> None:
        path = self._dir("requests") / f"{cid}.json"
        if not path.exists():
            write_json_atomic(path, {"custom_id": cid, "params": dict(params)})

    def request(self, cid: str) -> dict[str, Any]:
        data = self._read(self.root / "requests" / f"{cid}.json")
        if data is None or not isinstance(data.get("params"), dict):
            raise FormatError(f"no request body for custom_id {cid}", path=str(self.root / "requests"))
        return dict(data["params"])

    # results
    def result(self, cid: str) -> dict[str, Any] | None:
        """The stored result of ``cid`` (``{"custom_id", "batch_id", "paid_by", "result"}``) or ``None``."""
        return self._read(self.root / "results" / f"{cid}.json")

    def has_result(self, cid: str) -> bool:
        return (self.root / "results" / f"{cid}.json").exists()

    def put_result(self, cid: str, *, batch_id: str, paid_by: str, result: Mapping[str, Any]) -> None:
        write_json_atomic(
            self._dir("results") / f"{cid}.json",
            {"custom_id": cid, "batch_id": batch_id, "paid_by": paid_by, "result": dict(result)},
        )

    # batch records
    def record(self, batch_id: str, data: Mapping[str, Any]) -> None:
        write_json_atomic(self._dir("submitted") / f"{_safe_id(batch_id)}.json", dict(data))

    def get_record(self, batch_id: str) -> dict[str, Any] | None:
        """The record of ``batch_id`` (``None``: none written)."""
        return self._read(self.root / "submitted" / f"{_safe_id(batch_id)}.json")

    def records(self) -> list[dict[str, Any]]:
        """Every batch record, oldest first."""
        d = self.root / "submitted"
        if not d.is_dir():
            return []
        out = [r for p in sorted(d.glob("*.json")) if (r := self._read(p)) is not None]
        return sorted(out, key=lambda r: (str(r.get("submitted_at", "")), str(r.get("batch_id", ""))))

    def in_flight(self) -> list[dict[str, Any]]:
        """Records of batches submitted whose results are not stored yet (a killed sweep's)."""
        return [r for r in self.records() if r.get("state") == "submitted"]


def _safe_id(batch_id: str) -> str:
    # callers pass a redacted id (BatchClient.submit redacts the API's), so the cut shows no key
    if not batch_id or not all(ch.isalnum() or ch in "_-" for ch in batch_id):
        raise SummarizerError(f"the API returned an unusable batch id {batch_id[:80]!r}")
    return batch_id


class BatchingSummarizer:
    """The summarizer of one cell in a batched sweep (see the module docstring): a stored batch
    result, else a response-cache hit, else the request is written and :class:`SummaryDeferred`
    raised. ``inner``: the Anthropic summarizer whose requests are batched; ``cache``: its
    response cache (``None``: none); ``run_id``: the cell (whether it paid for a shared result)."""

    def __init__(
        self,
        inner: AnthropicSummarizer,
        store: BatchStore,
        *,
        run_id: str,
        cache: ResponseCache | None = None,
        scope: str = "",
    ) -> None:
        self.inner = inner
        self.store = store
        self.run_id = run_id
        self.cache = cache
        self.scope = scope

    @classmethod
    def wrap(
        cls, summarizer: Any, batch_dir: str | os.PathLike[str], *, run_id: str, scope: str = ""
    ) -> BatchingSummarizer:
        """``summarizer`` (an Anthropic summarizer, optionally behind a response cache) batched
        into ``batch_dir``; any other summarizer is a :class:`ConfigError`. ``scope``: see
        :func:`custom_id`."""
        cache = None
        if isinstance(summarizer, CachedSummarizer):
            summarizer, cache = summarizer.inner, summarizer.cache
        if not isinstance(summarizer, AnthropicSummarizer):
            raise ConfigError(
                f"batching needs an Anthropic summarizer (it calls the Message Batches API), got {summarizer!r}"
            )
        return cls(summarizer, BatchStore(batch_dir), run_id=run_id, cache=cache, scope=scope)

    @property
    def summarizer_id(self) -> str:
        return self.inner.summarizer_id  # batching changes the price, not the reply

    @property
    def model(self) -> str:
        return self.inner.model

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        params = self.inner.request_params(request)
        cid = custom_id(params, scope=self.scope)
        stored = self.store.result(cid)
        if stored is not None:
            reply = self._reply(cid, stored)
            if self.cache is not None and not reply.cache_hit:
                self.cache.put(cache_key(self.inner, request), reply, summarizer_id=self.inner.summarizer_id)
            return reply
        if self.cache is not None:
            hit = self.cache.get(cache_key(self.inner, request))
            if hit is not None:
                return hit
        self.store.put_request(cid, params)
        raise SummaryDeferred(cid)

    def _reply(self, cid: str, stored: Mapping[str, Any]) -> SummaryReply:
        result = stored.get("result")
        kind = result.get("type") if isinstance(result, Mapping) else None
        if kind != "succeeded" or not isinstance(result, Mapping) or not isinstance(result.get("message"), Mapping):
            # through the API's error(): a result stored by an older h9eval may hold an encoding of
            # the key that today's redaction catches
            api = self.inner.api
            raise api.error(f"batch request {cid[:12]} {kind or 'malformed'}{_error_detail(result, api)}")
        try:
            message = self.inner.api.sdk.types.Message.model_validate(result["message"])
        except ValueError as e:  # pydantic's ValidationError: a stored message lacking a field
            first = (getattr(e, "errors", lambda: [])() or [{}])[0]
            where = ".".join(str(x) for x in first.get("loc", ())) or "message"
            detail = f"batch request {cid[:12]} malformed: its message's {where}: {first.get('msg')}"
            raise self.inner.api.error(detail) from None
        reply = self.inner.reply_from_message(message, latency_s=0.0, batched=True)
        reply.extra["batch_id"] = str(stored.get("batch_id", ""))
        if stored.get("paid_by") != self.run_id:
            # another cell of the sweep sent the same request first and paid for it
            reply = dataclasses.replace(reply, cache_hit=True)
        return reply

    def __repr__(self) -> str:
        return f"BatchingSummarizer({self.inner!r}, {str(self.store.root)!r})"


def _error_detail(result: Any, api: AnthropicAPI) -> str:
    """``": <type>: <message>"`` of an errored result, each part redacted before it is cut: a cut
    key is a prefix of the key, which redaction would no longer recognise."""
    err = result.get("error") if isinstance(result, Mapping) else None
    inner = err.get("error") if isinstance(err, Mapping) else None
    if isinstance(inner, Mapping):
        kind = api.redact(str(inner.get("type", "error")))[:80]
        return f": {kind}: {api.redact(str(inner.get('message', '')))[:200]}"
    return ""


def chunks(
    ids: Sequence[str],
    size_of: Callable[[str], int],
    *,
    max_requests: int = MAX_BATCH_REQUESTS,
    max_bytes: int = MAX_BATCH_BYTES,
) -> list[list[str]]:
    """``ids`` cut into batches of at most ``max_requests`` requests and ``max_bytes`` bytes."""
    out: list[list[str]] = []
    cur: list[str] = []
    size = 0
    for cid in ids:
        n = size_of(cid)
        if cur and (len(cur) >= max_requests or size + n > max_bytes):
            out.append(cur)
            cur, size = [], 0
        cur.append(cid)
        size += n
    if cur:
        out.append(cur)
    return out


class BatchClient:
    """Submits, polls and collects batches through one :class:`AnthropicAPI` (the summarizer's:
    its key, endpoint and retries), recording each in ``store`` before polling it.

    ``timeout_s``: seconds per HTTP attempt of every Batches API call (create, retrieve, results:
    the request timeout of the sweep, ``request_timeout_s``; default
    :data:`~h9eval.core.anthropic.DEFAULT_REQUEST_TIMEOUT_S`). Without it the SDK would wait
    without end: these calls have no summary request to take a timeout from.
    ``sleep``, ``clock`` (wall-clock seconds: a batch's deadline counts from its submission,
    which a resumed sweep reads from the record) and ``log`` are injectable (tests; ``log``
    ``None``: silent)."""

    def __init__(
        self,
        api: AnthropicAPI,
        store: BatchStore,
        settings: BatchSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        log: Callable[[str], None] | None = None,
        budget: Budget | None = None,
        timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.timeout_s = timeout_s
        self.clock = clock
        self.store = store
        self.settings = settings
        self.sleep = sleep
        self.log = log
        self.budget = budget
        self._reserved: dict[str, float] = {}  # batch id -> USD this invocation holds for it

    def _frac(self, body: Mapping[str, Any]) -> float:
        return batch_price_frac(str(body.get("model", "")))

    def _bound_usd(self, bodies: Mapping[str, Mapping[str, Any]], sizes: Mapping[str, int]) -> float:
        """The most a batch of ``bodies`` can cost (each request's bound, at the batch price)."""
        price = self.api.price
        assert price is not None
        return sum(
            call_bound_usd(sizes[c], int(b.get("max_tokens", 0)), price) * self._frac(b) for c, b in bodies.items()
        )

    def _actual_usd(self, result: Mapping[str, Any], body: Mapping[str, Any]) -> float:
        """What one stored result cost (a request that did not succeed costs nothing)."""
        price = self.api.price
        usage = result.get("message", {}).get("usage", {}) if result.get("type") == "succeeded" else {}
        if price is None or not usage:
            return 0.0
        try:
            tin = sum(
                int(usage.get(k) or 0)
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            )
            out = int(usage.get("output_tokens") or 0)
        except (TypeError, ValueError):
            return 0.0
        return (tin * price[0] + out * price[1]) / 1e6 * self._frac(body)

    def _say(self, text: str) -> None:
        if self.log is not None:
            self.log(text)

    def submit(self, owners: Mapping[str, str]) -> list[str]:
        """Send the requests ``owners`` names (``custom_id`` -> the run id that pays) as batches
        (sorted ids, cut at the API's limits); each batch's record is written as soon as the API
        returns its id. Returns the batch ids."""
        ids = sorted(owners)
        bodies = {cid: self.store.request(cid) for cid in ids}
        sizes = {cid: len(json.dumps(bodies[cid], ensure_ascii=False).encode("utf-8")) for cid in ids}
        out: list[str] = []
        for part in chunks(ids, sizes.__getitem__):
            # under a spending cap the whole batch's bound is held before it is sent (BudgetExceeded
            # leaves its cells waiting, their requests stored: a rerun sends them)
            bound = 0.0
            if self.budget is not None and self.api.price is not None:
                bound = self._bound_usd({c: bodies[c] for c in part}, sizes)
                self.budget.reserve(bound, who=f"a batch of {len(part)} request(s)")
            try:
                batch = self.api.call(
                    self.api.client.messages.batches.create,
                    timeout=self.timeout_s,
                    requests=[{"custom_id": cid, "params": bodies[cid]} for cid in part],
                )
            except BaseException:
                if self.budget is not None and bound:
                    self.budget.settle(bound, 0.0)
                raise
            batch_id = self.api.redact(str(getattr(batch, "id", "")))
            if bound:
                self._reserved[batch_id] = bound
            self.store.record(
                batch_id,
                {
                    "batch_id": batch_id,
                    "state": "submitted",
                    "submitted_at": _now(),
                    "submitted_unix": self.clock(),  # the deadline's origin, to the sub-second
                    "requests": {cid: owners[cid] for cid in part},
                },
            )
            self._say(
                f"batch {batch_id}: {len(part)} request(s) submitted; polling every {self.settings.poll_interval_s:g} s"
            )
            out.append(batch_id)
        return out

    def _deadline_at(self, batch_id: str) -> float:
        """When polling ``batch_id`` stops (:attr:`clock` seconds): ``deadline_s`` after its
        recorded submission, else (a record without its time) after now."""
        rec = self.store.get_record(batch_id) or {}
        start = rec.get("submitted_unix")
        if isinstance(start, bool) or not isinstance(start, int | float):
            try:  # a record written before submitted_unix: its ISO time, to the second
                start = datetime.fromisoformat(str(rec["submitted_at"])).timestamp()
            except (KeyError, ValueError):
                start = self.clock()
        return float(start) + self.settings.deadline_s

    def wait(self, batch_id: str) -> bool:
        """Poll ``batch_id`` every ``poll_interval_s`` until its processing has ended (``True``)
        or its deadline (:attr:`BatchSettings.deadline_s` after its submission) has passed
        (``False``). It is polled at least once (a resumed sweep's batch may have ended while
        nobody looked), and no sleep goes past the deadline."""
        t0 = time.monotonic()
        deadline_at = self._deadline_at(batch_id)
        while True:
            batch = self.api.call(
                self.api.client.messages.batches.retrieve, timeout=self.timeout_s, message_batch_id=batch_id
            )
            status = getattr(batch, "processing_status", None)
            if status == "ended":
                self._say(f"batch {batch_id}: ended after {time.monotonic() - t0:.0f} s of polling")
                return True
            if status not in ("in_progress", "canceling"):
                # redacted before the cut: a status echoing the key, cut, would keep a prefix of it
                shown = self.api.redact(str(status))[:40]
                raise self.api.error(f"batch {batch_id}: unexpected processing_status {shown!r}")
            left = deadline_at - self.clock()
            if left <= 0:
                return False
            self.sleep(min(self.settings.poll_interval_s, left))

    def _abandon(self, record: Mapping[str, Any]) -> None:
        """The batch of ``record`` passed its deadline: cancel it (best effort: what it has not
        processed is then not billed), store each of its requests as ``errored`` with the
        cause, so each summary falls back, and mark the record ``abandoned`` (a rerun does not
        poll it again)."""
        batch_id = str(record["batch_id"])
        owners: dict[str, str] = dict(record.get("requests", {}))
        d = self.settings.deadline_s
        try:
            self.api.call(self.api.client.messages.batches.cancel, timeout=self.timeout_s, message_batch_id=batch_id)
            canceled = "canceled"
        except H9Error as e:  # the requests fall back either way; the log says why it may still bill
            canceled = f"not canceled ({e})"
        failed = {
            "type": "errored",
            "error": {
                "error": {"type": "batch_deadline", "message": f"batch not ended after {d:g} s (batch_deadline_s)"}
            },
        }
        for cid in sorted(owners):
            if not self.store.has_result(cid):
                self.store.put_result(cid, batch_id=batch_id, paid_by=owners[cid], result=failed)
        if self.budget is not None:
            # what the API processed before the cancel is billed, and unknown here: count the bound
            held = self._reserved.pop(batch_id, 0.0)
            self.budget.settle(held, held)
        self.store.record(batch_id, {**record, "state": "abandoned", "abandoned_at": _now()})
        self._say(f"batch {batch_id}: not ended after {d:g} s (batch_deadline_s); {canceled}; {len(owners)} fall back")

    def collect(self, record: Mapping[str, Any]) -> int:
        """Wait for the batch of ``record`` to end, store each of its results under its
        ``custom_id`` (a request the results leave out is stored as ``errored``), then mark the
        record collected. Returns the number of results stored. A batch not ended by its
        deadline is abandoned instead (its requests stored as ``errored``: ``batch_deadline``),
        and 0 returned."""
        batch_id = str(record["batch_id"])
        owners: dict[str, str] = dict(record.get("requests", {}))
        if not self.wait(batch_id):
            self._abandon(record)
            return 0
        seen: set[str] = set()
        unreadable: list[str] = []  # "line N: why" of the lines that name no request of ours
        spent = 0.0  # what the stored results cost (counted only under a spending cap)
        n_lines = 0
        try:
            # the raw lines, not the SDK's decoder: it stops at the first line that is not JSON
            # (the rest of the batch lost) and builds a result whatever fields the line lacks
            response = self.api.client.messages.batches.results(batch_id, timeout=self.timeout_s).http_response
            for n_lines, (cid, result, why) in enumerate(_result_lines(response.iter_bytes()), 1):
                if cid is None:
                    unreadable.append(f"line {n_lines}: {why}")
                    continue
                if cid not in owners:
                    continue  # not one of ours: never stored
                if why:
                    result = _malformed(f"results line {n_lines}: {why}")
                result = self.api.redact_obj(result)
                self.store.put_result(cid, batch_id=batch_id, paid_by=owners[cid], result=result)
                seen.add(cid)
                if self.budget is not None:
                    spent += self._actual_usd(result, self.store.request(cid))
        except _CutOff as e:
            raise self.api.error(self._cut_off(batch_id, n_lines, str(e), len(seen))) from None
        except self.api.sdk.AnthropicError as e:
            raise self.api.error(f"batch {batch_id}: reading the results failed: {type(e).__name__}") from None
        except (httpx_error(), OSError) as e:  # the download cut off mid-stream (a dropped connection)
            raise self.api.error(self._cut_off(batch_id, n_lines, type(e).__name__, len(seen))) from None
        for cid in sorted(set(owners) - seen):
            message = "not in the batch's results"
            if unreadable:  # one of those lines may have been this request's: say so
                message += f" ({len(unreadable)} unreadable result line(s), first {unreadable[0]})"
            missing = {"type": "errored", "error": {"error": {"type": "missing_result", "message": message}}}
            self.store.put_result(cid, batch_id=batch_id, paid_by=owners[cid], result=missing)
        if self.budget is not None:
            # a batch sent by an earlier invocation is not held in this one's ledger: only its cost counts
            self.budget.settle(self._reserved.pop(batch_id, 0.0), spent)
        self.store.record(batch_id, {**record, "state": "collected", "collected_at": _now(), "n_results": len(seen)})
        self._say(f"batch {batch_id}: {len(seen)} of {len(owners)} result(s) stored")
        return len(seen)

    @staticmethod
    def _cut_off(batch_id: str, n_lines: int, why: str, n_stored: int) -> str:
        # the record stays "submitted": a rerun downloads the results again (free), nothing is sent again
        return (
            f"batch {batch_id}: the results download was cut off after line {n_lines} ({why}); "
            f"the {n_stored} result(s) read are stored and nothing is sent again: run it again to fetch the rest"
        )

    def run(self, owners: Mapping[str, str]) -> list[str]:
        """Submit ``owners``' requests and collect the batches; returns their ids."""
        ids = self.submit(owners)
        for r in self.store.in_flight():
            if r.get("batch_id") in ids:
                self.collect(r)
        return ids


class _CutOff(Exception):  # noqa: N818 - a condition of the download, raised and caught in this module
    """The results ended inside a line: the download was cut off, not a line the API wrote badly."""


def httpx_error() -> type[Exception]:
    """The HTTP library's base error class, which a body read mid-stream raises (the SDK maps only
    the errors of sending a request to its own)."""
    try:
        import httpx2

        return httpx2.HTTPError
    except ImportError:  # an SDK on plain httpx
        import httpx

        return httpx.HTTPError


def _malformed(message: str) -> dict[str, Any]:
    return {"type": "errored", "error": {"error": {"type": "malformed_result", "message": message}}}


def _drop_none(v: Any) -> Any:
    """``v`` without ``None`` values, as the SDK's ``model_dump(exclude_none=True)`` stored results before."""
    if isinstance(v, dict):
        return {k: _drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_none(x) for x in v]
    return v


_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*"([0-9a-f]{64})"')


def _result_line(line: bytes) -> tuple[str | None, dict[str, Any], str]:
    """``(custom_id, result, why)`` of one results line; ``why`` is empty for a usable line, else
    what is wrong with it (the request is then answered with a ``malformed_result`` fallback);
    ``custom_id`` is ``None`` for a line that names no request."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as e:
        found = _CUSTOM_ID.search(line)  # a line cut inside its result still names its request
        why = f"not JSON ({e.msg if isinstance(e, json.JSONDecodeError) else type(e).__name__})"
        return (found.group(1).decode() if found else None), {}, why
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str):
        return None, {}, "not an object with a custom_id"
    cid, result = obj["custom_id"], obj.get("result")
    if not isinstance(result, dict):
        return cid, {}, "no result object"
    if result.get("type") not in RESULT_TYPES:
        return cid, {}, "unknown result type"
    if result["type"] == "succeeded" and not isinstance(result.get("message"), dict):
        return cid, {}, "a succeeded result without its message"
    return cid, _drop_none(result), ""


def _result_lines(chunks: Iterable[bytes]) -> Iterable[tuple[str | None, dict[str, Any], str]]:
    """The results' JSON lines, each as :func:`_result_line` reads it. The last line without its
    newline that is not JSON is a download cut off, raised as :class:`_CutOff`."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.strip():
                yield _result_line(line)
    if buf.strip():
        cid, result, why = _result_line(buf)
        if why.startswith("not JSON"):
            raise _CutOff("the last line ends without its newline and is not JSON")
        yield cid, result, why


def pending_owners(waiting: Iterable[tuple[str, str]], store: BatchStore) -> dict[str, str]:
    """``custom_id`` -> the run id that pays for it, for the ``(run_id, custom_id)`` pairs of the
    waiting cells whose request has no stored result: the smallest run id asking for it."""
    owners: dict[str, str] = {}
    for run_id, cid in waiting:
        if not store.has_result(cid):
            owners[cid] = min(owners.get(cid, run_id), run_id)
    return owners


def stderr_log(text: str) -> None:
    """The default progress line of a batched sweep (stderr)."""
    print(f"h9eval: {text}", file=sys.stderr, flush=True)
