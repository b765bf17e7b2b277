"""h9eval: a research and evaluation harness for LLM-agent context compaction.

The public API is what this module exports; the CLI calls the same functions.
"""

from __future__ import annotations

from h9eval.core.provenance import h9eval_version

__version__ = h9eval_version()

from h9eval.compaction import (
    Anchor,
    Compaction,
    CompactionEnv,
    CompactionRecord,
    FileRecordStore,
    OffloadHook,
    Tier,
    repair_tool_pairs,
)
from h9eval.compaction.base import Policy, PolicyRun
from h9eval.compaction.policies import ProgressiveCompactor, TokenBudgetCompactor, make_policy, policy_from_dict, registry
from h9eval.compaction.user import compaction_record, register_policy
from h9eval.core.errors import ConfigError, FormatError, H9Error, H9InputError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.tokens import estimate_tokens, estimate_tool_tokens
from h9eval.tasks import Task, load_tasks_from_spec
from h9eval.runs.replay import ReplayConfig, ReplayResult, replay
from h9eval.runs.run import run_task

# Heavier parts load on first use, so ``import h9eval`` stays light. Every entry names a
# function or class (or, for ``plots``/``metrics``/``probes``, a module that is not also a
# function's name): no submodule can shadow the verb of the same name.
_LAZY = {
    "sweep": ("h9eval.sweeps.sweep", "sweep"),
    "load_results": ("h9eval.results.store", "load_results"),
    "write_report": ("h9eval.analysis.report", "write_report"),
    "compare": ("h9eval.analysis.compare", "compare"),
    "tune": ("h9eval.analysis.tune", "tune"),
    "plots": ("h9eval.analysis.plots", None),
    "metrics": ("h9eval.analysis.metrics", None),
    "probes": ("h9eval.probes", None),
    "make_summarizer": ("h9eval.summarizers.registry", "make_summarizer"),
    "SessionStore": ("h9eval.harness9.session_store", "SessionStore"),
    "load_db_tasks": ("h9eval.tasks.recorded.harness9_db", "load_db_tasks"),
    "read_records_dir": ("h9eval.harness9.records_dir", "read_records_dir"),
    "generate": ("h9eval.tasks.synthetic", "generate"),
    "load_task": ("h9eval.tasks.recorded", "load_task"),
    "run_conformance": ("h9eval.harness9.conformance", "run_conformance"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        m = importlib.import_module(mod)
        value = m if attr is None else getattr(m, attr)
        globals()[name] = value  # later look-ups (and ``from h9eval import x``) find it directly
        return value
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
    "Policy",
    "PolicyRun",
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
    "compaction_record",
    "make_policy",
    "policy_from_dict",
    "register_policy",
    "registry",
    "repair_tool_pairs",
]
