"""The compaction core: harness9's pieces and the policies behind one interface."""

from h9eval.compaction.anchors import Anchor, format_anchors, merge_anchors, parse_anchors_and_summary
from h9eval.compaction.base import (
    Compaction,
    CompactionEnv,
    LogicalClock,
    Policy,
    make_policy,
    params_hash,
    policy_from_dict,
    policy_params,
    registry,
)
from h9eval.compaction.offload import CompactionOffloader, OffloadHook, ToolOutput, safe_name
from h9eval.compaction.progressive import ProgressiveCompactor
from h9eval.compaction.records import CompactionRecord, FileRecordStore, OffloadEntry, Tier, read_records
from h9eval.compaction.repair import repair_tool_pairs
from h9eval.compaction.token_budget import TokenBudgetCompactor

__all__ = [
    "Anchor",
    "Compaction",
    "CompactionEnv",
    "CompactionOffloader",
    "CompactionRecord",
    "FileRecordStore",
    "LogicalClock",
    "OffloadEntry",
    "OffloadHook",
    "Policy",
    "ProgressiveCompactor",
    "Tier",
    "TokenBudgetCompactor",
    "ToolOutput",
    "format_anchors",
    "make_policy",
    "merge_anchors",
    "params_hash",
    "parse_anchors_and_summary",
    "policy_from_dict",
    "policy_params",
    "read_records",
    "registry",
    "repair_tool_pairs",
    "safe_name",
]
