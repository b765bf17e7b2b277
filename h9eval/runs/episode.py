"""The closed loop's side of :func:`~h9eval.runs.execute.execute`: an episode spec run (the episode, its
``keep_all`` oracle, its rows, ledger and diffs, its folder) and a world exported as an open-loop task.
:mod:`h9eval.runs.execute` imports this module only when such a run starts, so a task run does not load
the worlds and agents."""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

from h9eval.closedloop.agents import make_agent
from h9eval.closedloop.analysis import episode_to_dict, export_task
from h9eval.closedloop.episode import Episode, run_episode, run_oracle, stress_settings
from h9eval.closedloop.ledger import episode_ledger, first_touches
from h9eval.closedloop.rows import episode_calls_frame, episode_row
from h9eval.closedloop.worlds import make_world
from h9eval.core.billing import billing_config_from_dict
from h9eval.core.lock import folder_lock
from h9eval.core.paths import prepare_out_dir, write_json_atomic
from h9eval.core.provenance import provenance
from h9eval.probes.diffs import compaction_diffs
from h9eval.results.io import write_table
from h9eval.results.schema import MANIFEST, MANIFEST_SCHEMA_VERSION, PROBE_COLUMNS
from h9eval.results.tables import diffs_table, episodes_table, ledger_table, records_to_frame
from h9eval.runs.execute import Resolved, RunEnv, RunResult, RunSummary, write_run_row
from h9eval.runs.spec import RunSpec, WorldRef
from h9eval.tasks.model import Task

__all__ = ["run_episode_spec", "world_task"]

_ORACLE_STEPS: OrderedDict[str, int] = OrderedDict()
_ORACLE_CACHE_SIZE = 64  # per process: a world's keep_all episode serves every cell of that world


def world_task(ref: WorldRef, *, max_steps: int = 60, agent: str = "scripted") -> Task:
    """A world exported as an open-loop task: the transcript of its ``keep_all`` episode with the
    world's ground truth as planted facts, under the world's task id (what a sweep replays, with
    probes, on the same episodes its closed-loop cells run).

    Args:
        ref: the world.
        max_steps: the episode's step bound.
        agent: the agent whose ``keep_all`` episode is the reference transcript.

    Returns:
        The task.
    """
    oracle = run_oracle(make_world(ref.kind, **ref.params), make_agent(agent), seed=ref.seed, max_steps=max_steps)
    return dataclasses.replace(export_task(oracle), task_id=ref.task_id)


def _wants_oracle(spec: RunSpec) -> bool:
    if spec.policy.kind == "keep_all":
        return False
    if spec.oracle is not None:
        return spec.oracle
    return spec.agent.partition(":")[0] == "scripted"


def run_episode_spec(r: Resolved, env: RunEnv) -> RunResult:
    """Run an episode spec (its names already objects, :func:`~h9eval.runs.execute.resolve`): the episode,
    its ``keep_all`` oracle's step count, its rows, ledger and diffs; with ``env.out_dir`` its folder.

    Args:
        r: the resolved spec.
        env: the run's environment.

    Returns:
        The :class:`~h9eval.runs.execute.RunResult`.
    """
    spec = r.spec
    world = spec.task
    assert isinstance(world, WorldRef)
    agent = env.objects.agent if env.objects.agent is not None else make_agent(spec.agent, call_limits=env.call_limits)
    common: dict[str, Any] = {
        "seed": world.seed,
        "history_mode": spec.history_mode,
        "writeback_rules": spec.writeback_rules,
        "context_window_tokens": r.window_tokens,
        "max_steps": spec.max_steps,
        "stress": stress_settings(spec.stress),
    }
    ep = run_episode(make_world(world.kind, **world.params), agent, r.policy, summarizer=r.summarizer, **common)
    oracle: Episode | None = None
    oracle_steps: int | None = ep.n_steps if spec.policy.kind == "keep_all" else None
    if _wants_oracle(spec):
        # a scripted agent acts the same again: one keep_all episode per world, agent and settings gives
        # the step count of every policy's cell of it (a live agent's oracle would be a second paid
        # episode); the episode itself is not kept, its views would hold the whole world's output
        key = json.dumps([world.kind, world.params, spec.agent, {**common, "stress": spec.stress}], sort_keys=True)
        if key in _ORACLE_STEPS:
            _ORACLE_STEPS.move_to_end(key)
        else:
            oracle = run_oracle(make_world(world.kind, **world.params), agent, **common)
            _ORACLE_STEPS[key] = oracle.n_steps
            while len(_ORACLE_STEPS) > _ORACLE_CACHE_SIZE:
                _ORACLE_STEPS.popitem(last=False)
        oracle_steps = _ORACLE_STEPS[key]
    calls = episode_calls_frame(
        ep, run_id=r.run_id, task_id=world.task_id, billing=billing_config_from_dict(spec.billing)
    )
    ident = spec.identity()
    row = episode_row(
        ep,
        oracle_steps=oracle_steps,
        run_id=r.run_id,
        task_id=world.task_id,
        policy_name=spec.policy.label,
        params_json=json.dumps(ident.params, sort_keys=True),
        summarizer=spec.summarizer.name,
        repeat=spec.repeat,
        calls=calls,
    )
    ledger = diffs = None
    if spec.ledger:
        ledger = ledger_table(episode_ledger(ep, run_id=r.run_id, task_id=world.task_id))
        touches = first_touches(ep)
        described = {(item, t.call_index): f"{t.kind}: {t.detail}" for item, ts in touches.items() for t in ts}
        diffs = diffs_table(compaction_diffs(ep.views, ledger, described, run_id=r.run_id))
    import pandas as pd

    result = RunResult(
        spec=spec,
        run_id=r.run_id,
        task_id=world.task_id,
        summary=RunSummary.of_episode(ep, row),
        calls=calls,
        compactions=records_to_frame([], run_id="", session_id=""),
        probes=pd.DataFrame(columns=list(PROBE_COLUMNS)),
        ledger=ledger,
        diffs=diffs,
        episodes=episodes_table([row]),
        episode=ep,
        oracle=oracle,
        oracle_steps=oracle_steps,
    )
    if env.out_dir is not None:
        result.out_dir = _write_episode_folder(result, Path(env.out_dir))
    return result


def _write_episode_folder(result: RunResult, out_dir: Path) -> Path:
    """An episode's own folder (``h9eval run --world --out``): its tables, ``episode.json`` and a
    manifest holding its spec, under the folder's lock."""
    out = prepare_out_dir(out_dir)
    assert result.episode is not None
    with folder_lock(out):  # two episodes written into one folder at once would mix their files
        for name, table in result.parts().items():
            if name in ("compactions", "probes"):
                continue  # an episode has neither
            write_table(table, out / f"{name}.parquet", name)
        write_json_atomic(out / "episode.json", episode_to_dict(result.episode))
        write_run_row(result, out)
        write_json_atomic(
            out / MANIFEST,
            {
                "schema_version": MANIFEST_SCHEMA_VERSION,
                "kind": "episode",
                "run_id": result.run_id,
                "spec": result.spec.to_dict(),
                "provenance": provenance(),
                "summary": result.summary.shown(),
            },
        )
    return out
