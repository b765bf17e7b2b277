"""Policies written by a user: :func:`register_policy`, the record helper
:func:`compaction_record`, and how a user's policy reaches a sweep's worker processes.

A user policy is written like a built-in one (a frozen, keyword-only dataclass subclassing
:class:`~h9eval.compaction.base.Policy`, with a ``kind`` and a ``start(env)`` returning a
:class:`~h9eval.compaction.base.PolicyRun`), but it lives outside h9eval: in a notebook, a
script or the user's own module. Worker processes never ran that code, so the sweep sends each
such class to them by value (:func:`ship`, with cloudpickle), and the worker registers it
before running a cell (:func:`install`). A class that cannot be sent is refused before any
cell runs, in one line naming the fix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import pickle
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from h9eval.compaction._peer import peer_record
from h9eval.compaction.base import POLICIES, CompactionEnv, Policy
from h9eval.compaction.records import CompactionRecord, Tier
from h9eval.core.errors import ConfigError
from h9eval.core.messages import Message

__all__ = [
    "register_policy",
    "compaction_record",
    "import_policies",
    "is_user_policy",
    "policy_code_hash",
    "ship",
    "install",
]

P = TypeVar("P", bound=Policy)

_PACKAGE = __name__.split(".", 1)[0]
_BUILTIN_POLICIES = f"{_PACKAGE}.compaction.policies"
"""Where the built-in policies live: every process imports them with the registry."""


def register_policy(cls: type[P]) -> type[P]:
    """Class decorator: register a user-written policy under its ``kind``.

    The class must subclass :class:`~h9eval.compaction.base.Policy`, be a frozen dataclass
    (``@dataclass(frozen=True, kw_only=True)``, applied below this decorator) and set a
    non-empty ``kind`` no other policy has. Once registered, the kind works everywhere a
    built-in one does (``make_policy``, ``run_task``, a sweep spec's ``[[policies]] kind``,
    on worker processes too). Raises :class:`ConfigError` naming the rule broken.
    """
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise ConfigError(f"register_policy: {cls!r} must be a class subclassing h9eval.Policy")
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise ConfigError(
            f"register_policy: {cls.__name__} must be a frozen dataclass: put @dataclass(frozen=True, kw_only=True) "
            "below @register_policy"
        )
    if not cls.kind:
        raise ConfigError(f'register_policy: {cls.__name__} needs a kind, e.g. kind: ClassVar[str] = "my_policy"')
    if cls.kind in POLICIES:
        old = POLICIES.get(cls.kind)
        if _same_class(old, cls):
            # a notebook cell run twice redefines the class: the new definition replaces the old
            POLICIES.remove(cls.kind)
        else:
            raise ConfigError(
                f"register_policy: policy {cls.kind!r} is already registered ({old.__module__}.{old.__qualname__}); "
                "pick another kind"
            )
    POLICIES.add(cls.kind, cls)
    return cls


def import_policies(source: str) -> list[str]:
    """Import the module that registers your policies (``h9eval --import mine.py ...``): a
    ``.py`` file by path, else a module name importable from the current folder or
    ``sys.path``. Returns the policy kinds it registered. Any error is one
    :class:`ConfigError` naming the source."""
    import importlib
    import importlib.util
    import os

    before = set(POLICIES.names())
    try:
        if source.endswith(".py") or os.sep in source:
            if not os.path.isfile(source):
                raise ConfigError(f"--import {source}: no such Python file")
            name = "h9eval_user_" + "".join(
                c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(source))[0]
            )
            spec = importlib.util.spec_from_file_location(name, source)
            if spec is None or spec.loader is None:
                raise ConfigError(f"--import {source}: not an importable Python file")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # dataclasses and pickling look the module up by name
            spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            importlib.import_module(source)
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"--import {source}: {type(e).__name__}: {e}") from None
    return sorted(set(POLICIES.names()) - before)


def _same_class(old: type, new: type) -> bool:
    return (old.__module__, old.__qualname__) == (new.__module__, new.__qualname__) and is_user_policy(old)


def compaction_record(
    env: CompactionEnv,
    history: Sequence[Message],
    view: Sequence[Message],
    tier: Tier,
    *,
    start_ns: int | None = None,
    error: str = "",
    extra: dict[str, Any] | None = None,
    **fields: Any,
) -> CompactionRecord:
    """The record of one compaction of ``history`` into ``view``, in harness9's shape: ids and
    timestamps from ``env`` (reproducible with a seeded env), token estimates before and
    after, message counts and the compression ratio computed here.

    ``tier``: what the compaction did (``Tier.NONE`` nothing, ``WARN`` content edited with no
    message dropped, ``SOFT`` messages dropped, ``FULL`` replaced by a summary, ``EMERGENCY``
    truncated to almost nothing). ``start_ns``: ``env.clock.now_ns()`` taken when the call
    began (fills ``duration_ns``). Further keyword arguments set record fields
    (``summarized``, ``anchors``, ...); ``extra`` is a free-form dict kept with the record."""
    return peer_record(env, history, view, tier, start_ns=start_ns, error=error, extra=extra, **fields)


def is_user_policy(cls: type) -> bool:
    """True for a policy class defined outside h9eval (a notebook, a script, a user module)."""
    return cls.__module__.split(".", 1)[0] != _PACKAGE


def policy_code_hash(kind: str) -> str:
    """A short hash of a user policy's code ("" for a built-in one, whose code the package's
    source hash covers): a sweep reruns a user policy's cells when its code changed. It hashes
    what :func:`ship` sends (the class and the code it references, by value), so a change to a
    helper it calls counts too; a new notebook session (its cells have new file names) reruns
    them once."""
    cls = POLICIES.get(kind)
    if not is_user_policy(cls):
        return ""
    try:
        blob = _dumps(cls)
    except Exception:  # cannot be pickled (ship() refuses it for workers): its source stands in
        try:
            blob = inspect.getsource(cls).encode()
        except (OSError, TypeError):
            blob = repr([(f.name, f.default) for f in dataclasses.fields(cls)]).encode()  # type: ignore[arg-type]
    return hashlib.sha256(blob).hexdigest()[:12]


def _dumps(cls: type) -> bytes:
    """``cls`` pickled by value: a user's own module is sent whole, so the workers need not be
    able to import it (a class of ``__main__`` is pickled by value anyway)."""
    import cloudpickle  # type: ignore[import-untyped]

    module = sys.modules.get(cls.__module__)
    by_value = module is not None and cls.__module__ != "__main__"
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        return bytes(cloudpickle.dumps(cls))
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def ship(kinds: Iterable[str]) -> dict[str, bytes]:
    """The policies among ``kinds`` a worker process would not have: the user's, each pickled by
    value, and those an optional part of h9eval registers on import, by reference.

    Raises :class:`ConfigError` (before any cell runs) for a class that cannot be pickled."""
    out: dict[str, bytes] = {}
    for kind in sorted(set(kinds)):
        cls = POLICIES.get(kind)
        if not is_user_policy(cls):
            if not cls.__module__.startswith(_BUILTIN_POLICIES):
                # an optional part of h9eval (an integration) registers it when imported: sent by
                # reference, so the worker imports that module and has the kind too
                out[kind] = pickle.dumps(cls)
            continue
        try:
            out[kind] = _dumps(cls)
        except Exception as e:
            raise ConfigError(
                f"policy {kind!r} ({cls.__module__}.{cls.__qualname__}) cannot be sent to the sweep's worker processes "
                f"({type(e).__name__}: {e}); keep the class's fields and globals picklable, or run the sweep in this "
                "process with workers=0 (--workers 0)"
            ) from None
    return out


def install(payloads: Mapping[str, bytes]) -> None:
    """In a worker: register every shipped policy this process does not have yet."""
    if not payloads:
        return
    import cloudpickle

    for kind, blob in payloads.items():
        if kind in POLICIES:
            continue
        cls = cloudpickle.loads(blob)
        if kind not in POLICIES:  # unpickling by reference may have imported (and registered) it
            POLICIES.add(kind, cls)
