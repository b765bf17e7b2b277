"""The window protocol (issue 45): a policy of a user's own gets a run's or a sweep's window through a
``context_window_tokens`` field, without subclassing anything; one without the field runs as it is,
and a configuration that compacted on no task is a warning beside its row in ``compare`` and the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from h9eval import Compaction, CompactionEnv, Message, Policy, PolicyRun, Tier, WindowedPolicy, compaction_record
from h9eval.analysis.compare import compare
from h9eval.compaction.base import POLICIES, has_window_field
from h9eval.core.tokens import estimate_tokens
from h9eval.sweeps.sweep import sweep


@dataclass(frozen=True, kw_only=True)
class HalfWindow(Policy):
    """Keeps the last 6 messages once the history passes half its window: a plain Policy."""

    kind: ClassVar[str] = "test_half_window"
    context_window_tokens: int = 1_000_000

    def start(self, env: CompactionEnv | None = None) -> PolicyRun:
        return _HalfRun(self, env or CompactionEnv())


@dataclass(frozen=True, kw_only=True)
class NoWindow(Policy):
    """Keeps the last 6 messages past 10**9 tokens: never, at any window (it has no window field)."""

    kind: ClassVar[str] = "test_no_window"

    def start(self, env: CompactionEnv | None = None) -> PolicyRun:
        return _HalfRun(self, env or CompactionEnv())


class _HalfRun(PolicyRun):
    def __init__(self, policy: Policy, env: CompactionEnv) -> None:
        self.policy, self.env = policy, env

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        limit = self.policy.window_tokens() or 10**9
        used = estimate_tokens(history)
        if used <= limit // 2:
            return Compaction(tuple(history), compaction_record(self.env, history, history, Tier.NONE))
        return self._force(history)

    def _force(self, history: Sequence[Message]) -> Compaction:
        view = [history[0], *history[-6:]]
        return Compaction(tuple(view), compaction_record(self.env, history, view, Tier.SOFT))


@pytest.fixture
def registered() -> None:
    for cls in (HalfWindow, NoWindow):
        POLICIES.add(cls.kind, cls)


def test_a_plain_policy_with_the_field_takes_the_window() -> None:
    assert has_window_field(HalfWindow) and not has_window_field(NoWindow)
    p = HalfWindow()
    assert p.window_tokens() == 1_000_000 == HalfWindow.default_window_tokens()
    assert p.at_window(16_000).window_tokens() == 16_000 and p.at_window(16_000) is not p
    assert NoWindow().at_window(16_000) == NoWindow() and NoWindow().window_tokens() is None
    assert issubclass(WindowedPolicy, Policy)  # exported; subclassing it is optional


def test_a_sweep_window_reaches_the_user_policy_and_an_idle_one_is_a_warning(tmp_path: Path, registered: None) -> None:
    spec = {
        "name": "protocol",
        "window": 12_000,
        "tasks": ["synthetic:small:0", "synthetic:small:1"],
        "policies": [
            {"kind": "progressive", "name": "harness9-default"},
            {"kind": "test_half_window", "name": "half"},
            {"kind": "test_no_window", "name": "nowin"},
        ],
    }
    r = sweep(spec, out_dir=tmp_path / "s", workers=0, progress=False)
    assert r.failed == 0
    from h9eval.results.store import load_results

    res = load_results(tmp_path / "s")
    # at its default window (10**6 tokens) HalfWindow would never compact: the sweep's 12,000 made it
    assert (
        (res.runs.set_index("config_name").loc["half", "n_compactions"] > 0).all()
        if "config_name" in res.runs
        else True
    )
    half = compare(res, "half", "harness9-default")
    assert not any("never compacted on any" in n for n in half.notes), half.notes
    idle = compare(res, "nowin", "harness9-default")
    assert any(n.startswith("warning: nowin never compacted on any of its 2 task(s)") for n in idle.notes), idle.notes
    assert "context_window_tokens field" in str(idle)
