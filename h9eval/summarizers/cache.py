"""A persistent, content-addressed cache of summary replies (SQLite, stdlib ``sqlite3``).

Key: the SHA-256 of the sorted JSON of ``summarizer_id``, ``model``, the request parameters
that shape a reply (``template``, ``anchor_types``, ``max_output_tokens``) and the prompt
texts. A summarizer can replace the prompt part with its own ``cache_material(request)``
mapping (the free-text Anthropic summarizer sends a prompt of its own); a summarizer whose
reply depends on the structured head (``uses_structured_input = True``, the offline ones) also
keys on the head, previous anchors and previous summary.

Stored: the reply text (``NULL`` for a nil message), token counts, cost in USD, the original
latency in seconds, ``extra`` as JSON, the summarizer id and model. Never the API key: nothing
but these columns is written. Failures (:class:`SummarizerError`) are not cached.

A hit returns the stored reply with ``cache_hit=True`` and the *original* tokens, cost and
latency, so a rerun from cache reproduces the first run's results table; the lookup time is
in ``extra["cache_lookup_s"]``. Filter on ``cache_hit`` to count money actually spent.

Concurrency: WAL journal, a 30 s busy timeout (5 s when opening: a cache another process
keeps locked is a one-line error at start), autocommit ``INSERT OR IGNORE`` (the first
writer of a key wins; replies for one key are interchangeable), one connection per process
(re-opened after a fork). The database file is created with mode 0600; SQLite gives its
``-wal``/``-shm`` files the same mode.

A cache never changes a result: a write that fails (a full disk, a lock held past the busy
timeout) is skipped with one warning and the reply is returned uncached; a cache the process
may not write (a read-only file or folder) is opened read-only and serves its hits.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from h9eval.core.errors import ConfigError
from h9eval.core.messages import messages_to_json
from h9eval.core.paths import check_db_file
from h9eval.core import storage
from h9eval.compaction.summary import Summarizer, SummaryReply, SummaryRequest

__all__ = ["ResponseCache", "CachedSummarizer", "cache_key", "CACHE_SCHEMA_VERSION"]

CACHE_SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    summarizer_id TEXT NOT NULL,
    model TEXT NOT NULL,
    text TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    extra TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""


def cache_key(summarizer: Summarizer, request: SummaryRequest) -> str:
    """The SHA-256 hex key of ``request`` for ``summarizer`` (see the module docstring)."""
    material_fn = getattr(summarizer, "cache_material", None)
    if callable(material_fn):
        prompt: Any = material_fn(request)
    else:
        prompt = {"system": request.system_prompt, "user": request.user_prompt}
    material: dict[str, Any] = {
        "summarizer_id": summarizer.summarizer_id,
        "model": str(getattr(summarizer, "model", "")),
        "params": {
            "template": request.template,
            "anchor_types": list(request.anchor_types),
            "max_output_tokens": request.max_output_tokens,
        },
        "prompt": prompt,
    }
    if getattr(summarizer, "uses_structured_input", False):
        material["structured"] = {
            "head": messages_to_json(request.head),
            "is_error": [m.is_error for m in request.head],
            "previous_anchors": None
            if request.previous_anchors is None
            else [list(a) for a in request.previous_anchors],
            "previous_summary": request.previous_summary,
        }
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """The SQLite reply store at ``path`` (created with its parent directories, mode 0600)."""

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0, start_timeout_s: float = 5.0
    ) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self.start_timeout_s = start_timeout_s
        if self.path.exists() and self.path.is_dir():
            raise ConfigError(f"cache path {str(self.path)!r} is a directory; expected a database file")
        check_db_file(self.path, what="summary cache")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            # Created 0600 before SQLite opens it: replies may quote private code or data.
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self.write_failures = 0
        """Replies not stored because the write failed (each returned uncached)."""
        self._connect()

    @property
    def read_only(self) -> bool:
        """True when this process may not write the file (or its folder, where SQLite puts its journal)."""
        return not (os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK))

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self.read_only:
            # immutable: no journal, no lock, no -shm beside a file nobody here may change.
            conn = sqlite3.connect(
                f"file:{self.path}?mode=ro&immutable=1", uri=True, isolation_level=None, check_same_thread=False
            )
            try:
                row = conn.execute("SELECT v FROM meta WHERE k = 'schema_version'").fetchone()
            except sqlite3.DatabaseError as e:
                conn.close()
                raise ConfigError(
                    f"cache {str(self.path)!r} is not a usable SQLite response cache ({e}); expected a database file"
                ) from None
            if row is None or row[0] != str(CACHE_SCHEMA_VERSION):
                conn.close()
                raise ConfigError(
                    f"cache {str(self.path)!r} has schema version {row[0] if row else None}; this h9eval reads version "
                    f"{CACHE_SCHEMA_VERSION}"
                )
            self._conn, self._pid = conn, os.getpid()
            return conn
        # isolation_level=None: autocommit, so every statement is its own short transaction.
        conn = storage.connect(  # its errors name the file
            str(self.path), timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            # Set-up waits at most start_timeout_s: a cache another process keeps locked is
            # one clear error at once, not a 30 s stall and a traceback.
            conn.execute(f"PRAGMA busy_timeout = {int(min(self.start_timeout_s, self.busy_timeout_s) * 1000)}")
            try:
                conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError:
                pass  # another process holds the switch; it makes the file WAL for everyone
            conn.execute("BEGIN IMMEDIATE")  # the write lock every later store needs
            conn.executescript(_SCHEMA)  # commits the transaction above
            conn.execute("INSERT OR IGNORE INTO meta (k, v) VALUES ('schema_version', ?)", (str(CACHE_SCHEMA_VERSION),))
            row = conn.execute("SELECT v FROM meta WHERE k = 'schema_version'").fetchone()
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        except sqlite3.OperationalError as e:
            conn.close()
            if "locked" in str(e) or "busy" in str(e):
                raise ConfigError(
                    f"summary cache {str(self.path)!r} is locked by another process (still after "
                    f"{self.start_timeout_s:g} s); "
                    "wait for it to finish or give another cache file"
                ) from None
            raise  # disk full...: not the file's fault
        except sqlite3.DatabaseError as e:
            # Some other file given as the cache (a typo'd path, a corrupt copy): one clear
            # error, and the file is left as it is.
            conn.close()
            raise ConfigError(
                f"cache {str(self.path)!r} is not a usable SQLite response cache ({e}); expected a database file"
            ) from None
        if row is None or row[0] != str(CACHE_SCHEMA_VERSION):
            conn.close()
            raise ConfigError(
                f"cache {str(self.path)!r} has schema version {row[0] if row else None}; "
                f"this h9eval reads version {CACHE_SCHEMA_VERSION}"
            )
        self._conn, self._pid = conn, os.getpid()
        return conn

    def get(self, key: str) -> SummaryReply | None:
        """The stored reply for ``key`` (``cache_hit=True``), or ``None``."""
        with self._lock:
            row = (
                self._connect()
                .execute(
                    "SELECT text, input_tokens, output_tokens, cost_usd, latency_s, extra, model FROM replies WHERE "
                    "key = ?",
                    (key,),
                )
                .fetchone()
            )
        if row is None:
            return None
        text, tin, tout, cost, latency, extra_json, model = row
        extra = json.loads(extra_json)
        return SummaryReply(
            text=text,
            input_tokens=int(tin),
            output_tokens=int(tout),
            latency_s=float(latency),
            cache_hit=True,
            # an unpriced reply was stored with cost 0 (the column is NOT NULL): unknown again here
            cost_usd=float(cost) if extra.get("cost_known", True) else math.nan,
            model=model,
            batched=bool(extra.get("batched", False)),  # its stored cost is the batch price
            extra=extra,
        )

    def put(self, key: str, reply: SummaryReply, *, summarizer_id: str) -> None:
        """Store ``reply`` under ``key`` unless the key is already present (first one wins)."""
        extra = json.dumps(reply.extra, sort_keys=True, default=str)
        if self.read_only:
            self._write_failed("the cache is read-only")
            return
        try:
            self._insert(key, reply, summarizer_id, extra)
        except (sqlite3.OperationalError, OSError) as e:  # full disk, lock past the timeout
            self._write_failed(str(e))

    def _write_failed(self, why: str) -> None:
        self.write_failures += 1
        if self.write_failures == 1:
            warnings.warn(
                f"summary cache {str(self.path)!r}: cannot store replies ({why}); going on uncached",
                RuntimeWarning,
                stacklevel=3,
            )

    def _insert(self, key: str, reply: SummaryReply, summarizer_id: str, extra: str) -> None:
        with self._lock:
            self._connect().execute(
                "INSERT OR IGNORE INTO replies (key, summarizer_id, model, text, input_tokens, output_tokens,"
                " cost_usd, latency_s, extra, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    summarizer_id,
                    reply.model,
                    reply.text,
                    reply.input_tokens,
                    reply.output_tokens,
                    reply.cost_usd if math.isfinite(reply.cost_usd) else 0.0,  # SQLite would store NaN as NULL
                    reply.latency_s,
                    extra,
                    time.time(),
                ),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def count(self, *, summarizer_id_prefix: str = "") -> int:
        """Stored replies whose ``summarizer_id`` starts with the prefix (other users of one
        file, such as the llm probe scorer, store theirs under their own ids)."""
        pattern = summarizer_id_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._lock:
            row = (
                self._connect()
                .execute("SELECT COUNT(*) FROM replies WHERE summarizer_id LIKE ? ESCAPE '\\'", (pattern,))
                .fetchone()
            )
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __getstate__(self) -> dict[str, Any]:
        # Picklable for worker processes: each process opens its own connection.
        return {"path": self.path, "busy_timeout_s": self.busy_timeout_s, "start_timeout_s": self.start_timeout_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self.busy_timeout_s = state["busy_timeout_s"]
        self.start_timeout_s = state["start_timeout_s"]
        self._lock = threading.Lock()
        self._conn = None
        self._pid = -1

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"


class CachedSummarizer:
    """``inner`` behind a :class:`ResponseCache`: a hit skips ``inner`` and returns the stored
    reply with ``cache_hit=True``; ``hits`` and ``misses`` count this object's lookups.

    ``summarizer_id`` is the inner one (a cache does not change what is computed)."""

    def __init__(self, inner: Summarizer, cache: ResponseCache | str | os.PathLike[str]) -> None:
        self.inner = inner
        self.cache = cache if isinstance(cache, ResponseCache) else ResponseCache(cache)
        self.hits = 0
        self.misses = 0

    @property
    def summarizer_id(self) -> str:
        return self.inner.summarizer_id

    @property
    def model(self) -> str:
        return str(getattr(self.inner, "model", ""))

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        t0 = time.perf_counter()
        key = cache_key(self.inner, request)
        hit = self.cache.get(key)
        if hit is not None:
            self.hits += 1
            hit.extra["cache_lookup_s"] = time.perf_counter() - t0
            return hit
        self.misses += 1
        reply = self.inner.summarize(request)  # SummarizerError propagates and is not stored
        self.cache.put(key, reply, summarizer_id=self.inner.summarizer_id)
        return reply

    def __repr__(self) -> str:
        return f"CachedSummarizer({self.inner!r}, {self.cache!r})"
