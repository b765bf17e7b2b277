"""Summarizers by name: ``make_summarizer("offline", max_items=4)``.

Names: ``offline`` (the default), ``offline_recent``, ``offline_free_text``, ``anthropic``,
``anthropic_free_text``.
An unknown name or parameter raises :class:`~h9eval.errors.ConfigError` with a "did you
mean" suggestion. The Anthropic classes (and the SDK) are imported only when asked for.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable
from typing import Any

from h9eval.errors import ConfigError, did_you_mean
from h9eval.summarizers.base import Summarizer

__all__ = ["make_summarizer", "summarizer_names", "summarizer_params", "DEFAULT_SUMMARIZER"]

DEFAULT_SUMMARIZER = "offline"


def _offline() -> type:
    from h9eval.summarizers.offline import OfflineSummarizer

    return OfflineSummarizer


def _offline_free_text() -> type:
    from h9eval.summarizers.offline_free_text import OfflineFreeTextSummarizer

    return OfflineFreeTextSummarizer


def _offline_recent() -> type:
    from h9eval.summarizers.offline_recent import OfflineRecentSummarizer

    return OfflineRecentSummarizer


def _anthropic() -> type:
    from h9eval.summarizers.anthropic import AnthropicSummarizer

    return AnthropicSummarizer


def _anthropic_free_text() -> type:
    from h9eval.summarizers.anthropic import AnthropicFreeTextSummarizer

    return AnthropicFreeTextSummarizer


# Loaders, not classes: resolving a name must not import what it does not need.
_REGISTRY: dict[str, Callable[[], type]] = {
    "offline": _offline,
    "offline_free_text": _offline_free_text,
    "offline_recent": _offline_recent,
    "anthropic": _anthropic,
    "anthropic_free_text": _anthropic_free_text,
}


def summarizer_names() -> list[str]:
    """The registered names, sorted."""
    return sorted(_REGISTRY)


def _class_for(name: str) -> type:
    if name not in _REGISTRY:
        raise ConfigError(did_you_mean(name, _REGISTRY, what="summarizer"))
    return _REGISTRY[name]()


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
    for p in params:
        if p not in known:
            raise ConfigError(did_you_mean(p, known, what=f"parameter of summarizer {name!r}"))
    summarizer: Summarizer = cls(**params)
    if cache is not None:
        from h9eval.summarizers.cache import CachedSummarizer

        summarizer = CachedSummarizer(summarizer, cache)
    return summarizer
