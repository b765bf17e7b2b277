"""Summarizers by name: ``make_summarizer("offline", max_items=4)``.

Names: ``offline`` (the default), ``offline_recent``, ``offline_free_text``, ``anthropic``,
``anthropic_free_text``. An unknown name or parameter raises :class:`~h9eval.core.errors.ConfigError`
with a "did you mean" suggestion. The Anthropic SDK is imported only when an Anthropic
summarizer is built.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from typing import Any

from h9eval.compaction.summary import Summarizer
from h9eval.core.anthropic import CallLimits
from h9eval.core.budget import Budget
from h9eval.core.registry import Registry
from h9eval.summarizers.anthropic import AnthropicFreeTextSummarizer, AnthropicSummarizer
from h9eval.summarizers.cache import CachedSummarizer
from h9eval.summarizers.offline import OfflineSummarizer
from h9eval.summarizers.offline_free_text import OfflineFreeTextSummarizer
from h9eval.summarizers.offline_recent import OfflineRecentSummarizer

__all__ = [
    "SUMMARIZERS",
    "DEFAULT_SUMMARIZER",
    "NO_SUMMARIZER",
    "build_summarizer",
    "make_summarizer",
    "summarizer_names",
    "summarizer_params",
]

DEFAULT_SUMMARIZER = "offline"
NO_SUMMARIZER = "none"
"""The name that asks for no summarizer (every summary fails, so policies fall back)."""


SUMMARIZERS: Registry[type] = Registry("summarizer")
for _name, _cls in (
    ("offline", OfflineSummarizer),
    ("offline_free_text", OfflineFreeTextSummarizer),
    ("offline_recent", OfflineRecentSummarizer),
    ("anthropic", AnthropicSummarizer),
    ("anthropic_free_text", AnthropicFreeTextSummarizer),
):
    SUMMARIZERS.add(_name, _cls)


def summarizer_names() -> list[str]:
    """The registered names, sorted."""
    return SUMMARIZERS.names()


def _class_for(name: str) -> type:
    return SUMMARIZERS.get(name)


def summarizer_params(name: str) -> dict[str, Any]:
    """Parameter name -> default of the summarizer called ``name`` (``inspect.Parameter.empty``
    when required)."""
    cls = _class_for(name)
    if dataclasses.is_dataclass(cls):
        return {
            f.name: (f.default if f.default is not dataclasses.MISSING else inspect.Parameter.empty)
            for f in dataclasses.fields(cls)
        }
    sig = inspect.signature(cls.__init__)
    return {p.name: p.default for p in sig.parameters.values() if p.name != "self"}


def make_summarizer(
    name: str = DEFAULT_SUMMARIZER,
    *,
    cache: str | os.PathLike[str] | Any | None = None,
    **params: Any,
) -> Summarizer:
    """Build the summarizer called ``name`` with ``params``.

    ``cache``: a :class:`~h9eval.summarizers.cache.ResponseCache` or a database path; when
    given the summarizer is wrapped in a :class:`~h9eval.summarizers.cache.CachedSummarizer`.
    Default ``None`` = no cache. Raises :class:`ConfigError` for an unknown name or parameter.
    """
    cls = _class_for(name)
    known = summarizer_params(name)
    SUMMARIZERS.check_params(name, params, known)
    summarizer: Summarizer = cls(**params)
    if cache is not None:
        summarizer = CachedSummarizer(summarizer, cache)
    return summarizer


def build_summarizer(
    name: str | None,
    cache: str | os.PathLike[str] | None = None,
    *,
    call_limits: CallLimits | None = None,
    budget: Budget | None = None,
    **params: Any,
) -> Summarizer | None:
    """:func:`make_summarizer`, where ``None`` or ``"none"`` (:data:`NO_SUMMARIZER`) is no
    summarizer at all: the names a CLI option or a sweep spec can hold. ``call_limits``: the
    request timeout and retries of a summarizer that calls a model (the Anthropic ones);
    the offline ones make no request and ignore them. ``budget``: the spending cap of a
    summarizer that calls a model (:class:`~h9eval.core.budget.Budget`)."""
    if name is None or name == NO_SUMMARIZER:
        return None
    if call_limits is not None and issubclass(_class_for(name), AnthropicSummarizer):
        params = call_limits.apply(params, who=f"summarizer {name!r}", part="summarizer")
    if budget is not None and issubclass(_class_for(name), AnthropicSummarizer):
        params = {**params, "budget": budget}
    return make_summarizer(name, cache=cache, **params)
