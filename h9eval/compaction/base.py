"""What every compaction policy shares: the result type, the run environment, the registry.

A *policy* is a frozen, keyword-only dataclass: its fields are its configuration, validated in
``__post_init__``. ``policy.start(env)`` returns a *compactor* for one session (it may keep
state, e.g. harness9's incremental summary); ``compactor.compact(history)`` (or
``compact(history, force=True)`` / ``manual=True``) returns a :class:`Compaction` and never
mutates ``history``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import json
import hashlib
import os
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, Protocol, Self, TypeVar

from h9eval.compaction.records import CompactionRecord, FileRecordStore, Tier
from h9eval.core.errors import ConfigError
from h9eval.core.registry import Registry
from h9eval.core.messages import Message
from h9eval.compaction.summary import Summarizer
from h9eval.core.tokens import HARNESS9_ESTIMATE, TokenCounter

__all__ = [
    "Compaction",
    "CompactionEnv",
    "Compactor",
    "PolicyRun",
    "Policy",
    "WindowedPolicy",
    "WINDOW_FIELD",
    "has_window_field",
    "register",
    "field_docs",
    "POLICIES",
    "policy_params",
    "params_hash",
    "LogicalClock",
    "WallClock",
]


@dataclass(frozen=True)
class Compaction:
    """A compaction's outcome: the ``view`` to send and the ``record`` describing it.

    ``record`` is ``None`` when the policy does not keep records (harness9's plain ``Compact``)
    or for ``compact(force=True)`` calls whose API returns none.
    """

    view: tuple[Message, ...]
    record: CompactionRecord | None = None
    kept_prefix: int | None = None
    """How many leading messages of the input the view keeps as they were, when the policy
    knows it (``None``: unknown). A write-back then replaces only what follows without the
    replay comparing the two lists."""

    @property
    def tier(self) -> Tier:
        return self.record.tier if self.record is not None else Tier.NONE

    @property
    def changed_what_is_sent(self) -> bool:
        """THE definition of "a compaction" (the ``compacted`` column, the run summary's
        ``compactions``, a sweep's ``n_compactions``): a record above tier none whose view
        differs from its input (fewer messages, fewer tokens, or offloaded results). A record
        written at a tier where nothing changed (harness9 writes one at every warn-tier call)
        is only a *compaction record* (``compaction_records``)."""
        rec = self.record
        if rec is None or rec.tier == Tier.NONE:
            return False
        return len(self.view) != rec.msgs_before or rec.tokens_after != rec.tokens_before or bool(rec.offloaded)


class WallClock:
    """Real time: RFC 3339 timestamps and monotonic durations."""

    def now_ns(self) -> int:
        return time.perf_counter_ns()

    def timestamp(self) -> str:
        ns = time.time_ns()
        sec, us = divmod(ns // 1000, 1_000_000)
        if sec != self._sec:
            # the date, time and offset change once a second: format them once a second
            self._sec = sec
            s = datetime.fromtimestamp(sec, timezone.utc).astimezone().isoformat(timespec="seconds")
            self._head, self._off = s[:19], s[19:]
            if self._off == "+00:00":
                self._off = "Z"
        return f"{self._head}.{us:06d}000{self._off}"

    _sec: int = -1
    _head: str = ""
    _off: str = ""


class LogicalClock:
    """A deterministic clock for reproducible records: every reading advances 1 ms from a fixed
    epoch, so the same run writes the same timestamps and durations."""

    def __init__(self, start: datetime = datetime(2026, 1, 1, tzinfo=timezone.utc)) -> None:
        self._t = start
        self._ns = 0
        # readings since ``_t`` within its second, and their microseconds: one per record, so
        # the datetime is advanced (and the head formatted) only when a second is crossed
        self._ahead = 0
        self._us = -1

    def now_ns(self) -> int:
        self._ns += 1_000_000
        return self._ns

    def timestamp(self) -> str:
        us = self._us + 1000
        if 1000 <= us < 1_000_000:  # _us >= 0: the last reading was in this second, head formatted
            self._us, self._ahead = us, self._ahead + 1
            return f"{self._head}.{us:06d}000{self._off}"
        self._t += timedelta(milliseconds=1 + self._ahead)
        self._ahead = 0
        if self._t.tzinfo is None or self._t.microsecond == 0 or self._t.second != self._sec:
            self._sec = self._t.second if self._t.microsecond != 0 else -1
            self._head, self._off = _rfc3339(self._t.replace(microsecond=1)).split(".000001000")
        # the next reading takes the shortcut only while it stays in this (tz-aware) second
        self._us = self._t.microsecond if self._t.tzinfo is not None and self._t.microsecond != 0 else -1001
        return f"{self._head}.{self._t.microsecond:06d}000{self._off}"

    _sec: int = -1
    _head: str = ""
    _off: str = ""


def _rfc3339(t: datetime) -> str:
    s = t.isoformat(timespec="microseconds")
    # Go prints nanoseconds; pad microseconds with three zeros and keep the offset.
    head, _, tail = s.partition(".")
    frac, off = tail[:6], tail[6:]
    if off == "+00:00":
        off = "Z"
    return f"{head}.{frac}000{off}"


@dataclass
class CompactionEnv:
    """The per-session things a compactor is given (harness9's options).

    ``summarizer``: injected summary provider (``None`` → summaries fail → fallback).
    ``offload_root``: work directory for compaction-time offload files (``None`` → no
    offloader). ``session_id``: names offload folders and record files. ``record_store``: where
    records are appended (``None`` → not persisted). ``counter``: the token counter used for
    tier decisions (records always use harness9's estimate). ``clock``/``seed``: make ids and
    timestamps reproducible.
    """

    summarizer: Summarizer | None = None
    offload_root: str | os.PathLike[str] | None = None
    session_id: str = ""
    record_store: FileRecordStore | None = None
    counter: TokenCounter = HARNESS9_ESTIMATE
    clock: Any = field(default_factory=WallClock)
    seed: int | None = None
    harness9_paths: bool = False
    _rng: random.Random | None = field(default=None, init=False, repr=False)

    def new_id(self) -> str:
        """A UUIDv4 string; seeded (reproducible) when ``seed`` is set."""
        if self.seed is None:
            return str(uuid.uuid4())
        if self._rng is None:
            self._rng = random.Random(self.seed)
        return _uuid4_text(self._rng.getrandbits(128))


# ``str(uuid.UUID(int=n, version=4))`` without building a UUID: the same bits, a tenth of the time.
_UUID4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_UUID4_SET = (0x8000 << 48) | (4 << 76)


def _uuid4_text(n: int) -> str:
    h = "%032x" % ((n & _UUID4_CLEAR) | _UUID4_SET)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class Compactor(Protocol):
    """A running compactor for one session: one entry point, three ways in."""

    def compact(
        self,
        history: Sequence[Message],
        *,
        tokens: int | None = None,
        force: bool = False,
        manual: bool = False,
    ) -> Compaction:
        """Compact ``history`` (never mutated).

        By default the policy decides from the usage; ``tokens`` is an optional precomputed
        harness9 estimate of ``history`` for that decision. ``force=True`` is harness9's
        ``CompactForce`` (compact now, whatever the usage; see the engine's rules);
        ``manual=True`` is a user's ``/compact`` as the replay runs it (the session is then
        rewritten with the result, spec §2.4). ``force`` and ``manual`` exclude each other.
        """
        ...


class PolicyRun:
    """Base of every policy's run class: :meth:`compact` dispatches to ``_auto``, ``_force``
    or ``_manual``, which the subclass implements (``_manual`` defaults to ``_force``: harness9's
    ``/compact`` prefers ``CompactWithRecord``, which most policies lack, and then falls through
    to ``CompactForce``)."""

    def compact(
        self,
        history: Sequence[Message],
        *,
        tokens: int | None = None,
        force: bool = False,
        manual: bool = False,
    ) -> Compaction:
        """See :meth:`Compactor.compact`; ``tokens`` serves only the automatic path."""
        if force and manual:
            raise ConfigError("compact(force=True, manual=True): force and manual exclude each other, pass at most one")
        if force:
            return self._force(history)
        if manual:
            return self._manual(history)
        return self._auto(history, tokens=tokens)

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        raise NotImplementedError

    def _force(self, history: Sequence[Message]) -> Compaction:
        raise NotImplementedError

    def _manual(self, history: Sequence[Message]) -> Compaction:
        return self._force(history)


P = TypeVar("P", bound="Policy")
#: every policy class by kind; filled by the modules of :mod:`h9eval.compaction.policies`
POLICIES: Registry[type[Policy]] = Registry("policy")


class Policy:
    """Base of every policy dataclass. Subclasses set ``kind`` and are ``@register``-ed."""

    kind: ClassVar[str] = ""
    #: one line: which system this reproduces (shown by ``h9eval policies``)
    source: ClassVar[str] = ""
    #: True when the policy guarantees the view's tokens stay within ``budget_tokens()``
    claims_budget: ClassVar[bool] = False
    #: True when the policy calls the summarizer (a sweep runs a policy that does not once, not
    #: once per summarizer variant: its results cannot depend on the variant)
    uses_summarizer: ClassVar[bool] = False

    def start(self, env: CompactionEnv | None = None) -> Compactor:
        raise NotImplementedError

    def budget_tokens(self) -> int | None:
        """The token budget the view is guaranteed to respect, when ``claims_budget``."""
        return None

    # -- what a run needs to know (declared here, never discovered from the fields) ----------
    def window_tokens(self) -> int | None:
        """The context window (tokens) the policy's thresholds are fractions of: its
        ``context_window_tokens`` field when it declares one (the window protocol, see
        :func:`has_window_field`); ``None`` for a policy without one, which runs at the run's window
        as it is (:func:`~h9eval.compaction.step.run_window`)."""
        return int(getattr(self, WINDOW_FIELD)) if has_window_field(type(self)) else None

    @classmethod
    def default_window_tokens(cls) -> int | None:
        """:meth:`window_tokens` of the policy left at its defaults (``None``: it has no window)."""
        if not has_window_field(cls):
            return None
        f = next(f for f in dataclasses.fields(cls) if f.name == WINDOW_FIELD)  # type: ignore[arg-type]
        return None if f.default is dataclasses.MISSING else int(f.default)  # type: ignore[call-overload]

    def at_window(self, window_tokens: int) -> Self:
        """This policy at ``window_tokens`` (a validated copy, its ``__post_init__`` run again); a
        policy without a window is itself. So a sweep's or a run's ``window`` reaches every policy
        that declares the field, built in or a user's."""
        if not has_window_field(type(self)) or window_tokens == self.window_tokens():
            return self
        return dataclasses.replace(self, **{WINDOW_FIELD: window_tokens})  # type: ignore[type-var]

    def hook_threshold_bytes(self) -> int | None:
        """The tool-time offload hook's threshold (bytes) when the policy runs harness9's hook as
        tool results arrive (spec §7.1); ``None``: no hook unless a run asks for one."""
        return None

    # -- helpers for subclasses ------------------------------------------------------------
    def _check(self, ok: bool, field_name: str, rule: str, value: Any) -> None:
        if not ok:
            raise ConfigError(f"{type(self).__name__}.{field_name} {rule}, got {value!r}")


WINDOW_FIELD = "context_window_tokens"
"""The window protocol's one field: a policy dataclass declaring an ``int`` field of this name has
its thresholds relative to that window, and a run's or a sweep's ``window`` sets it."""


def has_window_field(cls: type) -> bool:
    """``cls`` is a policy dataclass declaring the :data:`WINDOW_FIELD` field (the window protocol)."""
    return dataclasses.is_dataclass(cls) and any(f.name == WINDOW_FIELD for f in dataclasses.fields(cls))


class WindowedPolicy(Policy):
    """A policy whose thresholds are fractions of its ``context_window_tokens`` field (each
    subclass declares the field, with its own default and docstring). Subclassing it is optional:
    any policy dataclass declaring the field gets the run's window (:func:`has_window_field`); this
    base only states the intent and types the field."""

    context_window_tokens: int

    def window_tokens(self) -> int:
        return self.context_window_tokens


def field_docs(cls: type) -> dict[str, str]:
    """Each dataclass field's docstring (the string literal right after the field, the one place
    a parameter is documented), by field name, for ``cls`` and its bases; ``h9eval policies``
    shows them as help."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or klass.__module__ == "builtins":
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, nxt in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def register(cls: type[P]) -> type[P]:
    """Class decorator: register a policy under its ``kind`` (a kind taken twice is an error)."""
    if not cls.kind:
        raise TypeError(f"{cls.__name__} has no kind")
    POLICIES.add(cls.kind, cls)
    return cls


def policy_params(p: Policy) -> dict[str, Any]:
    """The resolved parameters of a policy (from ``dataclasses.asdict``), JSON-ready."""
    d = dataclasses.asdict(p)  # type: ignore[call-overload]
    return json.loads(json.dumps(d, default=list))


def params_hash(kind: str, params: Mapping[str, Any]) -> str:
    """A stable 12-hex-digit hash of a policy kind and its resolved parameters."""
    blob = json.dumps({"kind": kind, **params}, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
