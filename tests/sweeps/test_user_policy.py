"""A policy the user writes (in a notebook, a script, their own module) registers with
``register_policy`` and sweeps on worker processes; a sweep whose cells fail raises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from h9eval import (
    Compaction,
    CompactionEnv,
    ConfigError,
    Message,
    Policy,
    PolicyRun,
    Tier,
    compaction_record,
    make_policy,
    register_policy,
)
from h9eval.compaction.base import POLICIES
from h9eval.compaction.user import is_user_policy, policy_code_hash, ship
from h9eval.sweeps.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]

# The README's and notebook 07's example, run as a notebook runs it: ``python -c`` has no main
# file, so the workers' fork server cannot import the code that defined the policy.
NOTEBOOK_LIKE = """
import json, sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar
from h9eval import (Compaction, CompactionEnv, Message, Policy, PolicyRun, Tier, compaction_record, register_policy,
                    repair_tool_pairs, sweep)

@register_policy
@dataclass(frozen=True, kw_only=True)
class KeepHeadTail(Policy):
    kind: ClassVar[str] = "keep_head_tail"
    keep_head: int = 2
    keep_tail: int = 12
    max_messages: int = 40

    def start(self, env: CompactionEnv | None = None) -> "KeepHeadTailRun":
        return KeepHeadTailRun(self, env or CompactionEnv())

class KeepHeadTailRun(PolicyRun):
    def __init__(self, policy: KeepHeadTail, env: CompactionEnv) -> None:
        self.policy, self.env = policy, env

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        if len(history) <= self.policy.max_messages:
            return Compaction(tuple(history), compaction_record(self.env, history, history, Tier.NONE))
        return self._force(history)

    def _force(self, history: Sequence[Message]) -> Compaction:
        p = self.policy
        view = repair_tool_pairs([*history[: p.keep_head], *history[-p.keep_tail :]])
        return Compaction(tuple(view), compaction_record(self.env, history, view, Tier.SOFT))

r = sweep({"name": "mine", "window": 16000, "tasks": {"synthetic": [{"preset": "small", "seeds": [0, 1]}]},
           "policies": [{"kind": "keep_head_tail", "grid": {"keep_tail": [8, 12]}}, {"kind": "progressive"}]},
          out_dir=sys.argv[1], workers=2, progress=False)
res = r.load()
mine = res.runs[res.runs["policy_kind"] == "keep_head_tail"]
print(json.dumps({"ok": r.ok, "failed": r.failed, "mine": len(mine), "compactions": int(mine["n_compactions"].sum())}))
"""


def test_a_notebook_defined_policy_sweeps_on_two_workers(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-c", NOTEBOOK_LIKE, str(tmp_path / "out")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    # 2 tasks x (2 grid points + harness9's default), all ok, and the user's policy compacted
    assert got == {"ok": 6, "failed": 0, "mine": 4, "compactions": got["compactions"]} and got["compactions"] > 0, got


@dataclass(frozen=True, kw_only=True)
class _Last(Policy):
    kind: ClassVar[str] = "test_keep_last_user"
    keep: int = 4

    def start(self, env: CompactionEnv | None = None) -> _LastRun:
        return _LastRun(self, env or CompactionEnv())


class _LastRun(PolicyRun):
    def __init__(self, policy: _Last, env: CompactionEnv) -> None:
        self.policy, self.env = policy, env

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        view = [m for m in history[-self.policy.keep :] if not m.tool_call_id]
        return Compaction(tuple(view), compaction_record(self.env, history, view, Tier.SOFT, extra={"note": "x"}))

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._auto(history)


@pytest.fixture
def last() -> Any:
    cls = register_policy(_Last)
    yield cls
    POLICIES.remove(cls.kind)


def test_register_policy_makes_the_kind_usable_and_the_record_helper_fills_harness9_fields(last: Any) -> None:
    p = make_policy("test_keep_last_user", keep=2)
    hist = [Message("system", "s"), Message("user", "a" * 400), Message("assistant", "b" * 40), Message("user", "c")]
    env = CompactionEnv(seed=1, session_id="s1")
    out = p.start(env).compact(hist)
    rec = out.record
    assert rec is not None and [m.content for m in out.view] == ["b" * 40, "c"]
    assert (rec.msgs_before, rec.msgs_after, rec.session_id, rec.tier) == (4, 2, "s1", Tier.SOFT)
    assert rec.tokens_before > rec.tokens_after > 0 and rec.compression_ratio == rec.tokens_after / rec.tokens_before
    assert (
        rec.extra == {"note": "x"}
        and is_user_policy(last)
        and policy_code_hash(last.kind) == policy_code_hash(last.kind) != ""
    )
    assert not is_user_policy(POLICIES.get("progressive")) and policy_code_hash("progressive") == ""


def test_register_policy_refuses_what_would_break_later(last: Any) -> None:
    @dataclass(kw_only=True)
    class NotFrozen(Policy):
        kind: ClassVar[str] = "test_not_frozen"

    with pytest.raises(ConfigError, match="must be a frozen dataclass"):
        register_policy(NotFrozen)

    @dataclass(frozen=True, kw_only=True)
    class Taken(Policy):
        kind: ClassVar[str] = "progressive"

    with pytest.raises(ConfigError, match="'progressive' is already registered"):
        register_policy(Taken)
    with pytest.raises(ConfigError, match="subclassing h9eval.Policy"):
        register_policy(dict)  # type: ignore[type-var]
    # the same class registered again (a notebook cell run twice) replaces itself
    assert register_policy(_Last) is _Last and POLICIES.get(_Last.kind) is _Last


def test_a_policy_that_cannot_reach_the_workers_is_refused_before_any_cell_runs(tmp_path: Path) -> None:
    @register_policy
    @dataclass(frozen=True, kw_only=True)
    class Locked(_Last):
        kind: ClassVar[str] = "test_locked_user"
        lock: ClassVar[Any] = threading.Lock()  # cannot be pickled

    try:
        with pytest.raises(
            ConfigError,
            match=r"policy 'test_locked_user' .* cannot be sent to the sweep's worker processes .*workers=0",
        ):
            ship(["test_locked_user", "progressive"])
        spec = {
            "name": "l",
            "window": 16000,
            "tasks": {"synthetic": [{"preset": "small", "seeds": [0]}]},
            "policies": [{"kind": "test_locked_user"}],
        }
        with pytest.raises(ConfigError, match="cannot be sent"):
            sweep(spec, out_dir=tmp_path / "o", workers=2, progress=False)
        assert not (tmp_path / "o" / "cells").exists() or not any((tmp_path / "o" / "cells").iterdir())
        assert sweep(spec, out_dir=tmp_path / "o", workers=0, progress=False).ok == 1  # in process it runs
    finally:
        POLICIES.remove("test_locked_user")


def test_a_user_policys_cells_rerun_when_its_code_changes(last: Any, tmp_path: Path) -> None:
    """h9eval's source hash cannot see the user's class: the cell hash carries its own."""
    from h9eval.sweeps.cells import expand_cells
    from h9eval.sweeps.spec import load_spec

    spec = load_spec(
        {
            "name": "c",
            "window": 16000,
            "tasks": {"synthetic": [{"preset": "small", "seeds": [0]}]},
            "policies": [{"kind": last.kind}, {"kind": "keep_all"}],
        }
    )
    mine, builtin = expand_cells(spec, out_dir=tmp_path)[0]
    assert mine.source_hash.endswith(f"+{last.kind}:{policy_code_hash(last.kind)}") and "+" not in builtin.source_hash
    POLICIES.remove(last.kind)

    class Changed(_Last):
        def start(self, env: CompactionEnv | None = None) -> _LastRun:  # other code, the same kind and parameters
            return _LastRun(self, env or CompactionEnv(seed=0))

    register_policy(Changed)
    again = expand_cells(spec, out_dir=tmp_path)[0][0]
    assert (again.run_id, again.params_hash) == (mine.run_id, mine.params_hash) and again.cell_hash != mine.cell_hash


def test_a_policy_an_optional_h9eval_module_registers_reaches_the_workers_by_reference() -> None:
    """Such a kind (the Inspect integration's) exists in a worker only once its module is imported."""
    import pickle
    import types

    mod = types.ModuleType("h9eval.integrations.test_fake")
    sys.modules[mod.__name__] = mod
    try:
        cls = type("FakeIntegration", (_Last,), {"kind": "test_fake_integration", "__module__": mod.__name__})
        mod.FakeIntegration = cls  # type: ignore[attr-defined]
        POLICIES.add("test_fake_integration", dataclass(frozen=True, kw_only=True)(cls))
        got = ship(["test_fake_integration", "progressive", "keep_all"])
        assert list(got) == ["test_fake_integration"] and pickle.loads(got["test_fake_integration"]) is POLICIES.get(
            "test_fake_integration"
        )
        assert b"h9eval.integrations.test_fake" in got["test_fake_integration"]  # a reference, not the code
    finally:
        POLICIES.remove("test_fake_integration")
        del sys.modules[mod.__name__]
