"""Every built-in policy, one module each, listed here explicitly; and the policy registry's
look-ups (importing this package is what registers the built-ins, so the look-ups below always
see them)."""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from collections.abc import Mapping
from typing import Any

from h9eval.compaction.base import POLICIES, Policy
from h9eval.compaction.policies._server import ServerCompactionPolicy
from h9eval.compaction.policies.anthropic_server_compaction import AnthropicServerCompaction
from h9eval.compaction.policies.as_recorded import AsRecorded
from h9eval.compaction.policies.claude_code_compact import ClaudeCodeCompact
from h9eval.compaction.policies.clear_tool_uses import ClearToolUses
from h9eval.compaction.policies.codex_compact import CodexCompact
from h9eval.compaction.policies.controls import DropAll, KeepAll
from h9eval.compaction.policies.hybrid import Hybrid
from h9eval.compaction.policies.observation_masking import ObservationMasking
from h9eval.compaction.policies.openai_server_compaction import OpenAIServerCompaction
from h9eval.compaction.policies.openhands_condenser import OpenHandsCondenser
from h9eval.compaction.policies.progressive import ProgressiveCompactor
from h9eval.compaction.policies.sliding_window import SlidingWindowCompactor
from h9eval.compaction.policies.summary_single_threshold import SummarySingleThreshold
from h9eval.compaction.policies.token_budget import TokenBudgetCompactor
from h9eval.compaction.policies.window import Window
from h9eval.core.errors import ConfigError, FormatError

__all__ = [
    "AnthropicServerCompaction",
    "AsRecorded",
    "ClaudeCodeCompact",
    "ClearToolUses",
    "CodexCompact",
    "DropAll",
    "Hybrid",
    "KeepAll",
    "ObservationMasking",
    "OpenAIServerCompaction",
    "OpenHandsCondenser",
    "ProgressiveCompactor",
    "ServerCompactionPolicy",
    "SlidingWindowCompactor",
    "SummarySingleThreshold",
    "TokenBudgetCompactor",
    "Window",
    "make_policy",
    "policy_from_dict",
    "policy_param_names",
    "read_policy_file",
    "registry",
    "task_independent_registry",
]


def registry() -> dict[str, type[Policy]]:
    """All registered policies by kind."""
    return dict(POLICIES.items())


def task_independent_registry() -> dict[str, type[Policy]]:
    """The registered policies that run on any task: all but the provider-side ones, which replay
    recorded replies and so cover their cassette's tasks only."""
    return {k: cls for k, cls in POLICIES.items() if not issubclass(cls, ServerCompactionPolicy)}


def make_policy(kind: str, /, **params: Any) -> Policy:
    """Build a registered policy; unknown kinds and parameters get did-you-mean errors."""
    cls = POLICIES.get(kind)
    POLICIES.check_params(kind, params, policy_param_names(kind))
    POLICIES.check_param_types(kind, cls, params)
    try:
        return cls(**params)  # type: ignore[call-arg]
    except TypeError as e:
        raise ConfigError(f"policy {kind!r}: {e}") from None


def policy_param_names(kind: str) -> list[str]:
    """The parameters policy ``kind`` accepts (its init fields); an unknown kind gets a did-you-mean."""
    return [f.name for f in dataclasses.fields(POLICIES.get(kind)) if f.init]  # type: ignore[arg-type]


def policy_from_dict(d: Mapping[str, Any]) -> Policy:
    """``{"kind": "progressive", "warn_frac": 0.6, ...}`` → a policy."""
    if "kind" not in d:
        raise ConfigError("policy needs a 'kind' key")
    params = {k: v for k, v in d.items() if k != "kind"}
    return make_policy(str(d["kind"]), **params)


def read_policy_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A policy as a ``{"kind": ..., param: value}`` dict from a TOML file with a ``[policy]``
    table (what ``h9eval tune`` writes as ``recommended.toml``) or a JSON object (with or
    without a ``"policy"`` key). Checked with :func:`policy_from_dict` before it is returned;
    a file that is not one gets a :class:`FormatError` naming it."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except IsADirectoryError:
        raise FormatError(
            "expected a policy file (TOML with a [policy] table, or JSON), got a folder", path=p
        ) from None
    except OSError as e:
        raise FormatError(f"cannot read the policy file ({e.strerror or e})", path=p) from None
    try:
        text = raw.decode("utf-8")
        data = json.loads(text) if p.endswith(".json") else tomllib.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise FormatError(f"not a policy file (TOML with a [policy] table, or JSON): {e}", path=p) from None
    table = data.get("policy", data) if isinstance(data, dict) else None
    if not isinstance(table, dict) or "kind" not in table:
        raise FormatError(
            'expected a [policy] table with a kind (e.g. kind = "progressive") and its parameters', path=p
        )
    try:
        policy_from_dict(table)
    except ConfigError as e:
        raise ConfigError(f"{p}: [policy]: {e}") from None
    return dict(table)
