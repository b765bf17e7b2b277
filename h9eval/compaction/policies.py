"""Imports every built-in policy module so that each registers itself."""

from h9eval.compaction import (  # noqa: F401
    claude_code_compact,
    clear_tool_uses,
    codex_compact,
    controls,
    hybrid,
    observation_masking,
    openhands_condenser,
    progressive,
    sliding_window,
    summary_single_threshold,
    token_budget,
    window,
)
