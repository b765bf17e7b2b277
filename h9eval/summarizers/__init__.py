"""Summarizers: the deterministic offline default, Anthropic on request, and a response cache.

``AnthropicSummarizer`` and ``AnthropicFreeTextSummarizer`` are resolved lazily (module
``__getattr__``) so that importing h9eval never imports the ``anthropic`` SDK.
"""

from typing import Any

from h9eval.compaction.summary import ScriptedSummarizer, Summarizer, SummaryReply, SummaryRequest
from h9eval.summarizers.cache import CachedSummarizer, ResponseCache
from h9eval.summarizers.offline import OfflineFreeTextSummarizer, OfflineSummarizer
from h9eval.summarizers.registry import make_summarizer, summarizer_names

__all__ = [
    "Summarizer",
    "SummaryRequest",
    "SummaryReply",
    "ScriptedSummarizer",
    "OfflineSummarizer",
    "OfflineFreeTextSummarizer",
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
