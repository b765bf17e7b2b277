"""The compaction core: harness9's pieces and the policies behind one interface."""

from h9eval.compaction.anchors import Anchor, format_anchors, merge_anchors, parse_anchors_and_summary
from h9eval.compaction.base import Compaction, CompactionEnv, LogicalClock, Policy, params_hash, policy_params
from h9eval.compaction.policies import make_policy, policy_from_dict, registry
from h9eval.compaction.offload import CompactionOffloader, OffloadHook, ToolOutput
from h9eval.core.paths import safe_name
from h9eval.compaction.policies.progressive import ProgressiveCompactor
from h9eval.compaction.records import CompactionRecord, FileRecordStore, OffloadEntry, Tier, read_records
from h9eval.compaction.repair import repair_tool_pairs
from h9eval.compaction.policies.token_budget import TokenBudgetCompactor

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
