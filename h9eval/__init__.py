"""h9eval: a research and evaluation harness for LLM-agent context compaction.

The public API is what this module exports; the CLI calls the same functions.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from h9eval.core.provenance import h9eval_version

if TYPE_CHECKING:  # the same names, for type checkers and IDEs (at run time: _EXPORTS below)
    from h9eval import probes
    from h9eval.analysis import metrics, plots
    from h9eval.analysis.compare import compare
    from h9eval.analysis.report import write_report
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
    from h9eval.compaction.base import Policy, PolicyRun, WindowedPolicy
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
    from h9eval.harness9.conformance import run_conformance
    from h9eval.harness9.records_dir import read_records_dir
    from h9eval.harness9.session_store import SessionStore
    from h9eval.results.store import load_results
    from h9eval.runs.replay import ReplayConfig, ReplayResult, replay
    from h9eval.runs.execute import RunEnv, RunResult, execute
    from h9eval.runs.run import run_task
    from h9eval.runs.world import run_world
    from h9eval.runs.spec import RunSpec
    from h9eval.summarizers.registry import make_summarizer
    from h9eval.sweeps.estimate import estimate_sweep
    from h9eval.sweeps.sweep import sweep
    from h9eval.tasks import Task, load_tasks_from_spec
    from h9eval.tasks.recorded import load_task
    from h9eval.tasks.recorded.harness9_db import load_db_tasks
    from h9eval.tasks.synthetic import generate
    from h9eval.studies.tune import tune

# Lazy (PEP 562): this __init__ runs whenever any h9eval module is imported (each CLI command,
# each sweep worker), so importing the whole public API here made every one of them import
# some 160 modules. A name's owner is imported on first access; tests/crosscutting/test_layers.py
# reads these tables as this module's imports (layers, heavy third parties) and
# tests/crosscutting/test_startup.py checks that every name resolves to its owner's object.

#: public name -> the module it is an attribute of
_EXPORTS: dict[str, str] = {
    "Anchor": "h9eval.compaction",
    "Compaction": "h9eval.compaction",
    "CompactionEnv": "h9eval.compaction",
    "CompactionRecord": "h9eval.compaction",
    "FileRecordStore": "h9eval.compaction",
    "OffloadHook": "h9eval.compaction",
    "Tier": "h9eval.compaction",
    "repair_tool_pairs": "h9eval.compaction",
    "Policy": "h9eval.compaction.base",
    "PolicyRun": "h9eval.compaction.base",
    "WindowedPolicy": "h9eval.compaction.base",
    "ProgressiveCompactor": "h9eval.compaction.policies",
    "TokenBudgetCompactor": "h9eval.compaction.policies",
    "make_policy": "h9eval.compaction.policies",
    "policy_from_dict": "h9eval.compaction.policies",
    "registry": "h9eval.compaction.policies",
    "compaction_record": "h9eval.compaction.user",
    "register_policy": "h9eval.compaction.user",
    "ConfigError": "h9eval.core.errors",
    "FormatError": "h9eval.core.errors",
    "H9Error": "h9eval.core.errors",
    "H9InputError": "h9eval.core.errors",
    "Message": "h9eval.core.messages",
    "ToolCall": "h9eval.core.messages",
    "estimate_tokens": "h9eval.core.tokens",
    "estimate_tool_tokens": "h9eval.core.tokens",
    "Task": "h9eval.tasks",
    "load_tasks_from_spec": "h9eval.tasks",
    "ReplayConfig": "h9eval.runs.replay",
    "ReplayResult": "h9eval.runs.replay",
    "replay": "h9eval.runs.replay",
    "run_task": "h9eval.runs.run",
    "run_world": "h9eval.runs.world",
    "RunSpec": "h9eval.runs.spec",
    "RunEnv": "h9eval.runs.execute",
    "RunResult": "h9eval.runs.execute",
    "execute": "h9eval.runs.execute",
    "compare": "h9eval.analysis.compare",
    "write_report": "h9eval.analysis.report",
    "tune": "h9eval.studies.tune",
    "run_conformance": "h9eval.harness9.conformance",
    "read_records_dir": "h9eval.harness9.records_dir",
    "SessionStore": "h9eval.harness9.session_store",
    "load_results": "h9eval.results.store",
    "make_summarizer": "h9eval.summarizers.registry",
    "estimate_sweep": "h9eval.sweeps.estimate",
    "sweep": "h9eval.sweeps.sweep",
    "load_task": "h9eval.tasks.recorded",
    "load_db_tasks": "h9eval.tasks.recorded.harness9_db",
    "generate": "h9eval.tasks.synthetic",
}

#: public name -> the module that is itself the export
_MODULES: dict[str, str] = {
    "metrics": "h9eval.analysis.metrics",
    "plots": "h9eval.analysis.plots",
    "probes": "h9eval.probes",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # read from the installed metadata when asked for: importlib.metadata would cost a sixth
        # of ``import h9eval``
        return h9eval_version()
    if name in _MODULES:
        value: Any = importlib.import_module(_MODULES[name])
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'h9eval' has no attribute {name!r}")
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
    "WindowedPolicy",
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
    "run_world",
    "RunSpec",
    "RunEnv",
    "RunResult",
    "execute",
    "estimate_tool_tokens",
    "compaction_record",
    "make_policy",
    "policy_from_dict",
    "register_policy",
    "registry",
    "repair_tool_pairs",
]
