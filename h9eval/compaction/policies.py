"""Imports every built-in policy module so that each registers itself."""

from h9eval.compaction import observation_masking, progressive, token_budget  # noqa: F401
