"""Summarizers: the deterministic offline default, Anthropic on request, and a response cache."""

from h9eval.summarizers.base import ScriptedSummarizer, Summarizer, SummaryReply, SummaryRequest

__all__ = ["Summarizer", "SummaryRequest", "SummaryReply", "ScriptedSummarizer"]
