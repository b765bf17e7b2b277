"""Every entry point builds the same :class:`~h9eval.runs.spec.RunSpec` from the same inputs, so the same run
has one run id wherever it is started: ``h9eval run --task``, :func:`run_task`, a sweep cell, the tuner and
the Inspect bridge's ``H9Compaction`` for a task; ``h9eval run --world``, :func:`run_world` and a sweep's world
cell for a world. A conflicting window (the parameters set one, the run another) is the same error in each."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from h9eval.cli import main
from h9eval.core.errors import ConfigError
from h9eval.runs.run import task_specs
from h9eval.runs.spec import RunSpec, TaskRef
from h9eval.runs.world import world_spec
from h9eval.studies.tune import candidate_base, candidate_spec
from h9eval.sweeps.cells import expand_cells
from h9eval.sweeps.spec import load_spec

TASK = "synthetic:small:0"
WORLD = "fact_chain:3"
PARAMS = {"warn_frac": 0.55, "soft_frac": 0.7}
WINDOW = 12_000
MODE = "write_back"


def _comparable(spec: RunSpec) -> dict[str, Any]:
    # ``ledger`` adds tables without changing any other (not part of the identity): the tuner turns it off
    d = spec.to_dict()
    d.pop("ledger")
    return d


def _cli_task(tmp: Path, params: dict[str, Any], window: int) -> RunSpec:
    out = tmp / "cli"
    sets = [a for k, v in params.items() for a in ("--set", f"{k}={v}")]
    argv = ["run", "--task", TASK, "--window", str(window), "--history-mode", MODE, "--probes", "recall", *sets]
    code = main([*argv, "--out", str(out)])
    if code == 2:
        raise ConfigError("refused")  # the CLI printed the one line; the message is checked elsewhere
    assert code == 0
    return RunSpec.from_dict(json.loads((out / "manifest.json").read_text())["spec"])


def _python_task(_: Path, params: dict[str, Any], window: int) -> RunSpec:
    [spec], _, _ = task_specs(TASK, "progressive", params=params, window=window, history_mode=MODE, probes=("recall",))
    return spec


def _sweep_cell(tmp: Path, params: dict[str, Any], window: int) -> RunSpec:
    spec = {
        "name": "same",
        "window": window,
        "tasks": {"specs": [TASK]},
        "policies": [{"kind": "progressive", "params": params}],
        "probes": {"scorers": ["recall"]},
        "history_modes": [MODE],
    }
    [cell], _ = expand_cells(load_spec(spec), out_dir=tmp / "sweep")
    return cell.spec


def _tuner(_: Path, params: dict[str, Any], window: int) -> RunSpec:
    # tune(window=W, base_params=P): every candidate is P at W, then one spec per task
    return candidate_spec(TASK, candidate_base(params, window), history_mode=MODE)


def _inspect(_: Path, params: dict[str, Any], window: int) -> RunSpec:
    inspect = pytest.importorskip("h9eval.integrations.inspect")
    strategy = inspect.H9Compaction("progressive", params=params, window_tokens=window, summarizer="offline")
    ref = TaskRef(source=TASK, task_id="synthetic-small-0")
    spec: RunSpec = strategy.run_spec(ref).replace(probes=_python_task(_, {}, WINDOW).probes)
    return spec


TASK_ENTRIES: dict[str, Callable[[Path, dict[str, Any], int], RunSpec]] = {
    "run --task": _cli_task,
    "run_task": _python_task,
    "sweep cell": _sweep_cell,
    "tuner": _tuner,
    "H9Compaction": _inspect,
}


@pytest.mark.parametrize("entry", sorted(TASK_ENTRIES))
def test_every_task_entry_point_builds_the_same_spec_and_run_id(entry: str, tmp_path: Path) -> None:
    reference = _python_task(tmp_path, PARAMS, WINDOW)
    spec = TASK_ENTRIES[entry](tmp_path, PARAMS, WINDOW)
    assert _comparable(spec) == _comparable(reference)
    assert spec.identity() == reference.identity()
    assert spec.run_id.startswith("synthetic-small-0--progressive-")
    assert spec.run_id.endswith("-write_back--offline--r0")


@pytest.mark.parametrize("entry", sorted(TASK_ENTRIES))
def test_a_conflicting_window_is_refused_by_every_task_entry_point(
    entry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bug: ``H9Compaction(params={"context_window_tokens": 50_000}, window_tokens=128_000)`` ran at 128,000
    where run_task refused the same input."""
    msg = "window 128000 conflicts with progressive's context_window_tokens 50000"
    with pytest.raises(ConfigError) as e:
        TASK_ENTRIES[entry](tmp_path, {"context_window_tokens": 50_000}, 128_000)
    said = capsys.readouterr().err if entry == "run --task" else str(e.value)
    assert msg in said, said


def _cli_world(tmp: Path) -> RunSpec:
    out = tmp / "w"
    assert main(["run", "--world", WORLD, "--window", str(WINDOW), "--max-steps", "5", "--out", str(out)]) == 0
    [manifest] = [json.loads(p.read_text()) for p in out.rglob("manifest.json")]
    return RunSpec.from_dict(manifest["spec"])


def _sweep_world(tmp: Path) -> RunSpec:
    spec = {
        "name": "same-world",
        "window": WINDOW,
        "tasks": {"worlds": [{"kind": "fact_chain", "seeds": [3], "max_steps": 5, "open_loop": False}]},
        "policies": [{"kind": "progressive"}],
    }
    cells, _ = expand_cells(load_spec(spec), out_dir=tmp / "sweep")
    [cell] = [c for c in cells if c.spec.loop == "episode"]
    return cell.spec


@pytest.mark.parametrize("entry", ["run --world", "sweep world cell"])
def test_every_world_entry_point_builds_the_same_spec_and_run_id(entry: str, tmp_path: Path) -> None:
    reference, _ = world_spec(WORLD, window=WINDOW, max_steps=5)
    spec = _cli_world(tmp_path) if entry == "run --world" else _sweep_world(tmp_path)
    mine, theirs = _comparable(spec), _comparable(reference)
    # a sweep names a repeat's response cache and the oracle choice itself; neither is part of the identity
    for d in (mine, theirs):
        d.pop("oracle")
    assert mine == theirs
    assert spec.identity() == reference.identity()
