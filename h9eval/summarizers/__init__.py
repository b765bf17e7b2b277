"""Summarizers: the deterministic offline default, Anthropic on request, and a response cache.

Importing this package never imports the ``anthropic`` SDK: an Anthropic summarizer imports it
when it is built.
"""

from h9eval.compaction.summary import ScriptedSummarizer, Summarizer, SummaryReply, SummaryRequest
from h9eval.summarizers.anthropic import AnthropicFreeTextSummarizer, AnthropicSummarizer
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
