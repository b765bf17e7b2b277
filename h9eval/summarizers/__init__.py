"""Summarizers: the deterministic offline ones (``offline``, the default; ``offline_recent``;
``offline_free_text``), Anthropic on request, and a response cache.

``AnthropicSummarizer`` and ``AnthropicFreeTextSummarizer`` are resolved lazily (module
``__getattr__``) so that importing h9eval never imports the ``anthropic`` SDK.
"""

from typing import Any

from h9eval.summarizers.base import ScriptedSummarizer, Summarizer, SummaryReply, SummaryRequest
from h9eval.summarizers.cache import CachedSummarizer, ResponseCache
from h9eval.summarizers.offline import OfflineSummarizer
from h9eval.summarizers.offline_free_text import OfflineFreeTextSummarizer
from h9eval.summarizers.offline_recent import OfflineRecentSummarizer
from h9eval.summarizers.registry import make_summarizer, summarizer_names

__all__ = [
    "Summarizer",
    "SummaryRequest",
    "SummaryReply",
    "ScriptedSummarizer",
    "OfflineSummarizer",
    "OfflineFreeTextSummarizer",
    "OfflineRecentSummarizer",
    "AnthropicSummarizer",
    "AnthropicFreeTextSummarizer",
    "CachedSummarizer",
    "ResponseCache",
    "make_summarizer",
    "summarizer_names",
]


def __getattr__(name: str) -> Any:
    if name in ("AnthropicSummarizer", "AnthropicFreeTextSummarizer"):
        from h9eval.summarizers import anthropic as _anthropic_module

        return getattr(_anthropic_module, name)
    raise AttributeError(f"module 'h9eval.summarizers' has no attribute {name!r}")
