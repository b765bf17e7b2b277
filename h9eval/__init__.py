"""h9eval: a research and evaluation harness for LLM-agent context compaction.

The public API is what this module exports; the CLI calls the same functions.
"""

from __future__ import annotations

from h9eval.core.provenance import h9eval_version
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
from h9eval.compaction.policies import (
    ProgressiveCompactor,
    TokenBudgetCompactor,
    make_policy,
    policy_from_dict,
    registry,
)
from h9eval.compaction.user import compaction_record, register_policy
from h9eval.core.errors import ConfigError, FormatError, H9Error, H9InputError
from h9eval.core.messages import Message, ToolCall
from h9eval.core.tokens import estimate_tokens, estimate_tool_tokens
from h9eval.tasks import Task, load_tasks_from_spec
from h9eval.runs.replay import ReplayConfig, ReplayResult, replay
from h9eval.runs.run import run_task
from h9eval.analysis import metrics, plots
from h9eval.analysis.compare import compare
from h9eval.analysis.report import write_report
from h9eval.tuning.tune import tune
from h9eval.harness9.conformance import run_conformance
from h9eval.harness9.records_dir import read_records_dir
from h9eval.harness9.session_store import SessionStore
from h9eval import probes
from h9eval.results.store import load_results
from h9eval.summarizers.registry import make_summarizer
from h9eval.sweeps.estimate import estimate_sweep
from h9eval.sweeps.sweep import sweep
from h9eval.tasks.recorded import load_task
from h9eval.tasks.recorded.harness9_db import load_db_tasks
from h9eval.tasks.synthetic import generate

# Every module above imports its heavy third parties (pandas, pyarrow, matplotlib, the
# Anthropic SDK, datasets, rapidfuzz) inside the functions that use them, so ``import h9eval``
# stays light; tests/crosscutting/test_layers.py checks both that and that nothing here is
# imported by string.


def __getattr__(name: str) -> str:
    # The version is read from the installed metadata when asked for: importlib.metadata would
    # cost a sixth of ``import h9eval``.
    if name == "__version__":
        return h9eval_version()
    raise AttributeError(f"module 'h9eval' has no attribute {name!r}")


__all__ = [
    "__version__",
    "SessionStore",
    "compare",
    "generate",
    "load_db_tasks",
    "load_results",
    "load_task",
    "make_summarizer",
    "metrics",
    "plots",
    "probes",
    "read_records_dir",
    "run_conformance",
    "sweep",
    "estimate_sweep",
    "tune",
    "write_report",
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
