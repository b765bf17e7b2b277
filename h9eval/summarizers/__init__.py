"""Summarizers: the deterministic offline ones (``offline``, the default; ``offline_recent``;
``offline_free_text``), Anthropic on request, and a response cache.

Importing this package never imports the ``anthropic`` SDK: an Anthropic summarizer imports it
when it is built.
"""

from h9eval.compaction.summary import ScriptedSummarizer, Summarizer, SummaryReply, SummaryRequest
from h9eval.summarizers.anthropic import AnthropicFreeTextSummarizer, AnthropicSummarizer
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
