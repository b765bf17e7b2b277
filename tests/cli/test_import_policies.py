"""``h9eval --import mine.py ...``: a policy in the user's own file, by name on the command line,
and on a sweep's workers (the file is not importable there: the class goes by value)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

POLICY_FILE = """
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from h9eval import Compaction, CompactionEnv, Message, Policy, PolicyRun, Tier, compaction_record, register_policy


def keep(history, n):  # a module-level helper the class calls: it must reach the workers too
    return list(history[:1]) + [m for m in history[-n:] if not m.tool_call_id]


@register_policy
@dataclass(frozen=True, kw_only=True)
class KeepEnds(Policy):
    kind: ClassVar[str] = "test_keep_ends_file"
    keep_last: int = 6

    def start(self, env: CompactionEnv | None = None) -> "Run":
        return Run(self, env or CompactionEnv())


class Run(PolicyRun):
    def __init__(self, policy, env):
        self.policy, self.env = policy, env

    def _auto(self, history: Sequence[Message], *, tokens: int | None = None) -> Compaction:
        view = keep(history, self.policy.keep_last) if len(history) > 20 else list(history)
        tier = Tier.SOFT if len(view) < len(history) else Tier.NONE
        return Compaction(tuple(view), compaction_record(self.env, history, view, tier))

    def _force(self, history: Sequence[Message]) -> Compaction:
        return self._auto(history)
"""


def _h9(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "h9eval", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )


def test_a_policy_file_runs_by_name_and_sweeps_on_two_workers(tmp_path: Path) -> None:
    sub = tmp_path / "mine"
    sub.mkdir()
    (sub / "policies.py").write_text(POLICY_FILE)
    r = _h9(
        [
            "--import",
            str(sub / "policies.py"),
            "run",
            "--task",
            "synthetic:small",
            "--policy",
            "test_keep_ends_file",
            "--window",
            "16000",
            "--out",
            str(tmp_path / "one"),
        ],
        tmp_path,
    )
    assert r.returncode == 0 and "policy: test_keep_ends_file" in r.stdout, r.stderr
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "f"\nwindow = 16000\nhistory_modes = ["view"]\n[tasks]\nsynthetic = [{ preset = "small", seeds = [0, '
        "1] }]\n"
        '[[policies]]\nkind = "test_keep_ends_file"\n[[policies]]\nkind = "keep_all"\n'
    )
    r = _h9(
        ["--import", str(sub / "policies.py"), "sweep", str(spec), "--workers", "2", "--out", str(tmp_path / "o")],
        tmp_path,
    )
    assert r.returncode == 0 and "4 cells: 4 ok, 0 failed" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize(
    ("source", "expect"),
    [("nope.py", "--import nope.py: no such Python file"), ("no_such_module_xyz", "ModuleNotFoundError")],
)
def test_a_bad_import_is_one_line(tmp_path: Path, source: str, expect: str) -> None:
    r = _h9(["--import", source, "policies"], tmp_path)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and expect in r.stderr, (
        r.stderr
    )
