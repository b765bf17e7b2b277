"""``h9eval.__all__`` as a user meets it: every name imports from the package, every verb is the
function it names (never a submodule of the same name), and stays so after it was used."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
from pathlib import Path

import pytest

import h9eval

VERBS = (
    "sweep",
    "estimate_sweep",
    "tune",
    "replay",
    "run_task",
    "load_results",
    "write_report",
    "make_summarizer",
    "generate",
    "load_task",
    "load_db_tasks",
    "read_records_dir",
    "run_conformance",
    "load_tasks_from_spec",
    "make_policy",
    "policy_from_dict",
    "registry",
    "repair_tool_pairs",
    "estimate_tokens",
    "estimate_tool_tokens",
)
MODULES = ("plots", "metrics", "probes")


@pytest.mark.parametrize("name", sorted(h9eval.__all__))
def test_every_exported_name_imports_in_a_fresh_interpreter(name: str) -> None:
    code = f"from h9eval import {name}\nimport h9eval\nassert getattr(h9eval, {name!r}) is {name}\n"
    if name in VERBS:
        code += f"assert callable({name}) and not isinstance({name}, type(h9eval)), type({name})\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_every_verb_is_exported_and_a_function() -> None:
    for name in VERBS:
        assert name in h9eval.__all__, name
        obj = getattr(h9eval, name)
        assert inspect.isfunction(obj), f"h9eval.{name} is {type(obj).__name__}, not a function"
    for name in MODULES:
        assert isinstance(getattr(h9eval, name), types.ModuleType)


def test_sweep_stays_callable_after_use(tmp_path: Path) -> None:
    """Once ``h9eval.sweep(spec)`` had run, the lazy attribute used to be replaced by the
    submodule ``h9eval.sweep``, and the second call raised ``'module' object is not callable``."""
    spec = {
        "name": "api-twice",
        "window": 8000,
        "tasks": {"synthetic": [{"preset": "small", "seeds": [0]}]},
        "policies": [{"kind": "keep_all"}],
    }
    first = h9eval.sweep(spec, out_dir=tmp_path / "a", workers=0, progress=False)
    second = h9eval.sweep(spec, out_dir=tmp_path / "b", workers=0, progress=False)
    assert callable(h9eval.sweep) and callable(h9eval.tune)
    assert first.ok == second.ok == 1 and first.n_cells == second.n_cells == 1
