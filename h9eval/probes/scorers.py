"""The scorer interface, the input scorers read, and the scorer registry.

A scorer is a frozen, keyword-only dataclass (its fields are its configuration) registered under
its ``name`` with :func:`register_scorer`. ``scorer.score(probes, view_input, scope)`` returns
``{method: [score or None per probe]}``: a scorer may report more than one method (the llm
scorer also grades facts by exact match as ``llm_exact``); ``None`` means "not applicable to
this probe" and produces no row. Scores are floats in [0, 1].

Scopes: ``view`` (the whole view) and ``anchors`` (the retained anchors and summary of the
latest ``[Context Compaction]`` message in the view; score 0 when there is none).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from h9eval.core.errors import ConfigError, did_you_mean
from h9eval.core.registry import Registry
from h9eval.core.messages import Message
from h9eval.probes.probe import Probe
from h9eval.tasks.text import (
    TextIndex,
    ViewTexts,
    latest_compaction_text,
    normalize,
    normalize_messages,
    render_messages,
)

__all__ = [
    "SCOPES",
    "ProbeInput",
    "Scorer",
    "register_scorer",
    "scorer_registry",
    "make_scorer",
    "resolve_scorers",
]

SCOPES: tuple[str, ...] = ("view", "anchors")


@dataclass
class ProbeInput:
    """What a scorer reads at one checkpoint. Texts are computed on first use and cached.

    ``messages``: the view. ``tool_names``: tools the agent could call (the llm scorer's
    next-action prompt). ``normalized_text``: the view's normalised text
    (:func:`~h9eval.tasks.text.normalize_messages`); computed on first use when ``None``.
    ``tags``: where the input comes from (``task_id``, ``run_id``, ``checkpoint_call_index``,
    ``message_index``, ``context`` = ``view`` or ``history``), copied into scorer audit rows.
    ``views``: the cache shared by the views of one replay (:class:`~h9eval.tasks.text.ViewTexts`);
    when given, the ``view`` scope's index answers from it (same answers, work only for what is new).
    """

    messages: tuple[Message, ...]
    tool_names: tuple[str, ...] = ()
    normalized_text: str | None = None
    tags: dict[str, Any] = field(default_factory=dict)
    views: ViewTexts | None = None
    _indexes: dict[tuple[Any, ...], TextIndex] = field(default_factory=dict, repr=False)

    @cached_property
    def text(self) -> str:
        """The rendered view (see :func:`h9eval.tasks.text.render_messages`)."""
        return render_messages(self.messages)

    @cached_property
    def anchors_text(self) -> str | None:
        """Retained anchors + summary of the latest compaction message, ``None`` if there is none."""
        return latest_compaction_text(self.messages)

    def scope_text(self, scope: str) -> str | None:
        """Raw text of ``scope`` (``None``: the scope has nothing, e.g. no compaction yet)."""
        if scope == "view":
            return self.text
        if scope == "anchors":
            return self.anchors_text
        raise ConfigError(did_you_mean(scope, SCOPES, what="scope"))

    def index(self, scope: str, **params: Any) -> TextIndex | None:
        """A cached :class:`TextIndex` of ``scope`` with the given matcher parameters."""
        key = (scope, *sorted(params.items()))
        if key not in self._indexes:
            if scope == "view" and self.views is not None:
                self._indexes[key] = self.views.index(self.messages, **params)
                return self._indexes[key]
            if scope == "view":
                if self.normalized_text is None:
                    self.normalized_text = normalize_messages(self.messages)
                norm: str | None = self.normalized_text
            else:
                raw = self.scope_text(scope)
                norm = None if raw is None else normalize(raw)
            if norm is None:
                return None
            self._indexes[key] = (
                TextIndex(norm, **params) if self.views is None else self.views.text_index(norm, **params)
            )
        return self._indexes[key]


@runtime_checkable
class Scorer(Protocol):
    """What :func:`h9eval.probes.probe_view` needs from a scorer."""

    name: ClassVar[str]
    #: methods this scorer can report (row ``method`` values)
    methods: ClassVar[tuple[str, ...]]
    #: True when the uncompacted history scores 1.0 on every answerable probe by construction
    baseline_is_one: ClassVar[bool]

    @property
    def scopes(self) -> tuple[str, ...]: ...

    def score(self, probes: Sequence[Probe], inp: ProbeInput, scope: str) -> dict[str, list[float | None]]: ...


S = TypeVar("S")
#: every scorer class by name; the scorer modules register themselves and the package imports
#: each of them, so the registry is complete whenever anything of :mod:`h9eval.probes` is in use
SCORERS: Registry[type[Any]] = Registry("scorer")


def register_scorer(cls: type[S]) -> type[S]:
    """Class decorator: register a scorer class under its ``name``."""
    name = getattr(cls, "name", "")
    if not name:
        raise TypeError(f"{cls.__name__} has no name")
    SCORERS.add(name, cls)
    return cls


def scorer_registry() -> dict[str, type[Any]]:
    """All registered scorers by name (none of the built-ins imports torch,
    sentence-transformers or the Anthropic SDK at import time)."""
    return dict(SCORERS.items())


def make_scorer(name: str, /, **params: Any) -> Any:
    """Build a registered scorer; unknown names and parameters get did-you-mean errors.

    ``make_scorer("semantic")`` raises :class:`ConfigError` when the ``semantic`` extra is not
    installed; ``make_scorer("llm")`` without ``answerer`` builds an Anthropic client and so
    needs ``ANTHROPIC_API_KEY``.
    """
    cls = SCORERS.get(name)
    SCORERS.check_params(name, params, [f.name for f in dataclasses.fields(cls) if f.init])
    try:
        return cls(**params)
    except TypeError as e:
        raise ConfigError(f"scorer {name!r}: {e}") from None


def resolve_scorers(scorers: Sequence[str | Any] | str | Any) -> list[Any]:
    """Names become :func:`make_scorer` instances; scorer objects are used as given."""
    if isinstance(scorers, str) or not isinstance(scorers, Sequence):
        scorers = [scorers]
    out = [make_scorer(s) if isinstance(s, str) else s for s in scorers]
    seen: set[str] = set()
    for s in out:
        if s.name in seen:
            raise ConfigError(f"scorer {s.name!r} given twice; each scorer may appear once")
        seen.add(s.name)
    return out
