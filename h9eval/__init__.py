"""h9eval: a research and evaluation harness for LLM-agent context compaction.

The public API is what this module exports; the CLI calls the same functions.
"""

from __future__ import annotations

__version__ = "0.1.0"

from h9eval.compaction import (
    Anchor,
    Compaction,
    CompactionEnv,
    CompactionRecord,
    FileRecordStore,
    OffloadHook,
    ProgressiveCompactor,
    Tier,
    TokenBudgetCompactor,
    make_policy,
    policy_from_dict,
    registry,
    repair_tool_pairs,
)
from h9eval.errors import ConfigError, FormatError, H9Error, H9InputError
from h9eval.messages import Message, ToolCall
from h9eval.tokens import estimate_tokens, estimate_tool_tokens
from h9eval.tasks import Task, load_tasks_from_spec
from h9eval.replay import ReplayConfig, ReplayResult, replay
from h9eval.api import run_task

# Heavier parts load on first use, so ``import h9eval`` stays light.
_LAZY = {
    "sweep": ("h9eval.sweep", "sweep"),
    "load_results": ("h9eval.results", "load_results"),
    "write_report": ("h9eval.report", "write_report"),
    "tune": ("h9eval.tune", "tune"),
    "plots": ("h9eval.plots", None),
    "metrics": ("h9eval.metrics", None),
    "probes": ("h9eval.probes", None),
    "make_summarizer": ("h9eval.summarizers.registry", "make_summarizer"),
    "SessionStore": ("h9eval.session_store", "SessionStore"),
    "load_db_tasks": ("h9eval.harness9_data", "load_db_tasks"),
    "read_records_dir": ("h9eval.harness9_data", "read_records_dir"),
    "generate": ("h9eval.tasks.synthetic", "generate"),
    "load_task": ("h9eval.tasks.recorded", "load_task"),
    "run_conformance": ("h9eval.conformance", "run_conformance"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        m = importlib.import_module(mod)
        return m if attr is None else getattr(m, attr)
    raise AttributeError(f"module 'h9eval' has no attribute {name!r}")


__all__ = [
    "__version__",
    *_LAZY,
    "Anchor",
    "Compaction",
    "CompactionEnv",
    "CompactionRecord",
    "ConfigError",
    "FileRecordStore",
    "FormatError",
    "H9Error",
    "H9InputError",
    "Message",
    "OffloadHook",
    "ProgressiveCompactor",
    "Tier",
    "TokenBudgetCompactor",
    "ToolCall",
    "ReplayConfig",
    "ReplayResult",
    "Task",
    "estimate_tokens",
    "load_tasks_from_spec",
    "replay",
    "run_task",
    "estimate_tool_tokens",
    "make_policy",
    "policy_from_dict",
    "registry",
    "repair_tool_pairs",
]
