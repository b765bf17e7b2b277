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

__all__ = [
    "__version__",
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
