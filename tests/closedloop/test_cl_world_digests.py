"""Differential test: every world family's episodes are unchanged by a refactoring.

``tests/golden/world_episodes.json`` holds one digest per (family, policy, seed, parameters):
the episode as JSON (steps, ledger, outcome, ground truth, transcript), its ``episodes`` row and
its ``calls`` table, plus the world's system prompt, task and tool schemas. The policies are the
two bounds (``keep_all``, ``drop_all``) and harness9's default (``progressive``); the parameters
are each family's defaults and a variant with recorded result sizes, facts anywhere, the task
file and a todo list, so every shared path of the world base runs. The scripted agent with a
short step budget keeps the whole file at a few seconds.

The episodes of a scripted agent mostly take the right path; seeded walks along that path with
mistakes mixed in (random calls with values the world has shown, repeats, skips, a wrong argument)
add the wrong paths: errors, duplicates, rule breaks and the failure reasons of ``check()``, which
is digested after every call.

Regenerate (only after a deliberate change of a world's behaviour) with ``H9EVAL_REGEN_GOLDEN=1``.
"""

from __future__ import annotations

import hashlib
import dataclasses
import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from h9eval.closedloop.analysis import episode_to_dict
from h9eval.closedloop.rows import episode_calls_frame, episode_row
from h9eval.closedloop.worlds import make_world, world_registry
from h9eval.compaction.base import params_hash
from h9eval.runs.world import run_world

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "world_episodes.json"
POLICIES = ("keep_all", "drop_all", "progressive")
SEEDS = (0, 1)
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "stressed": {"result_sizes": "recorded", "fact_position": "anywhere", "task_file": True, "todo_items": 2},
}
MAX_STEPS = 40
#: values a world shows that a tool takes: nonces, artifact paths and digests, file paths, amounts
_VALUE = re.compile(r"[\w./-]+\.whl@sha256-[0-9a-f]+|[\w./-]+\.whl|[A-Z]{1,2}-[0-9a-f]{8}|[\w/]+\.py|\d+\.\d\d")


def _frame_digest(df: pd.DataFrame) -> str:
    head = json.dumps([list(df.columns), [str(t) for t in df.dtypes]])
    rows = pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes()
    return hashlib.sha256(head.encode() + rows).hexdigest()


def _named_as_before(run: Any) -> str:
    """The run id episodes carried before run specs gave every run one id format: the digest covers the
    episode, and a naming rule is not its behaviour."""
    ep = run.episode
    return f"{run.task_id}--{ep.policy_kind}-{params_hash(ep.policy_kind, dict(ep.policy_params))}-view--scripted"


def digest(kind: str, policy: str, seed: int, variant: str) -> str:
    params = VARIANTS[variant]
    run = run_world(f"{kind}:{seed}", policy=policy, world_params=params, oracle=False, max_steps=MAX_STEPS)
    world = make_world(kind, **params)
    world.reset(seed)
    rid = _named_as_before(run)
    parts = {
        "episode": episode_to_dict(run.episode),
        "row": episode_row(run.episode, oracle_steps=run.oracle_steps, run_id=rid, task_id=run.task_id),
        "calls": _frame_digest(episode_calls_frame(run.episode, run_id=rid, task_id=run.task_id)),
        "world": [world.system_prompt, world.task_prompt, list(world.tool_specs)],
    }
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


#: values no world shows but an agent may try
_UNSEEN = ("junk", "TASK.md", "POLICY.md", "RULES.md", "vendor/x.py")


def _random_args(spec: dict[str, Any], seen: list[str], rng: random.Random) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name, prop in spec["input_schema"]["properties"].items():
        pick = seen[-12:] if rng.random() < 0.7 else seen
        args[name] = rng.sample(pick, min(len(pick), rng.randrange(4))) if prop["type"] == "array" else rng.choice(pick)
    return args


def walk_digest(kind: str, seed: int, variant: str) -> str:
    """Seeded walks along the scripted agent's ``keep_all`` path with mistakes mixed in (a random
    call, a repeated call, a skipped call, one argument replaced by another value the world showed):
    every call's result, the world's verdict after it, the interjections, the ground truth."""
    params = VARIANTS[variant]
    script = [
        (e.tool, json.loads(e.arguments))
        for e in run_world(f"{kind}:{seed}", policy="keep_all", world_params=params, max_steps=MAX_STEPS).episode.ledger
        if e.kind != "refetch"
    ]
    out: list[Any] = []
    for mistakes in (0.0, 0.1, 0.2, 0.3, 0.45, 0.6):
        world = make_world(kind, **params)
        world.reset(seed)
        specs = {s["name"]: s for s in world.tool_specs}
        rng = random.Random(f"walk:{kind}:{seed}:{variant}:{mistakes}")
        seen = sorted(set(_VALUE.findall(world.task_prompt))) + list(_UNSEEN)
        done: list[tuple[str, dict[str, Any]]] = []
        todo = list(script)
        while todo and len(done) < 3 * len(script) + 10:
            u = rng.random() / max(mistakes, 1e-9)
            tool, args = todo[0]
            if u < 0.25:  # a random call
                tool = rng.choice(sorted(specs))
                args = _random_args(specs[tool], seen, rng)
            elif u < 0.5 and done:  # a call made before, again
                tool, args = rng.choice(done)
            elif u < 0.6:  # the next call is skipped
                todo.pop(0)
                continue
            elif u < 0.85 and args:  # one argument replaced
                key = rng.choice(sorted(args))
                args = {**args, key: _random_args(specs[tool], seen, rng)[key]}
                todo.pop(0)
            else:
                todo.pop(0)
            result = world.step(tool, args)
            done.append((tool, args))
            seen.extend(v for v in _VALUE.findall(result) if v not in seen)
            out.append([tool, args, result, dataclasses.asdict(world.check()), world.interjection()])
        snap = world.snapshot()
        world.step(*script[0])
        world.restore(snap)
        out.append([dataclasses.asdict(world.check()), [dataclasses.asdict(g) for g in world.ground_truth()]])
        out.append([dataclasses.asdict(e) for e in world.ledger])
    blob = json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _cases() -> list[tuple[str, str, int, str]]:
    return [(k, p, s, v) for k in sorted(world_registry()) for p in POLICIES for s in SEEDS for v in VARIANTS]


def _key(kind: str, policy: str, seed: int, variant: str) -> str:
    return f"{kind}/{policy}/seed={seed}/{variant}"


def _load() -> dict[str, str]:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize(("kind", "policy", "seed", "variant"), _cases(), ids=[_key(*c) for c in _cases()])
def test_world_episodes_are_unchanged(kind: str, policy: str, seed: int, variant: str) -> None:
    got = digest(kind, policy, seed, variant)
    key = _key(kind, policy, seed, variant)
    if os.environ.get("H9EVAL_REGEN_GOLDEN"):
        golden = _load()
        golden[key] = got
        GOLDEN.write_text(json.dumps(dict(sorted(golden.items())), indent=1) + "\n")
        return
    golden = _load()
    assert key in golden, f"no golden digest for {key} (regenerate deliberately)"
    assert got == golden[key], f"the {kind} episode ({policy}, seed {seed}, {variant} parameters) changed"


def _walks() -> list[tuple[str, int, str]]:
    return [(k, s, v) for k in sorted(world_registry()) for s in SEEDS for v in VARIANTS]


def _walk_key(kind: str, seed: int, variant: str) -> str:
    return f"walk/{kind}/seed={seed}/{variant}"


@pytest.mark.parametrize(("kind", "seed", "variant"), _walks(), ids=[_walk_key(*c) for c in _walks()])
def test_world_walks_are_unchanged(kind: str, seed: int, variant: str) -> None:
    got = walk_digest(kind, seed, variant)
    key = _walk_key(kind, seed, variant)
    golden = _load()
    if os.environ.get("H9EVAL_REGEN_GOLDEN"):
        golden[key] = got
        GOLDEN.write_text(json.dumps(dict(sorted(golden.items())), indent=1) + "\n")
        return
    assert key in golden, f"no golden digest for {key} (regenerate deliberately)"
    assert got == golden[key], f"the {kind} world's answers on the walks (seed {seed}, {variant} parameters) changed"


def test_golden_covers_every_family() -> None:
    assert len(_load()) == len(_cases()) + len(_walks())
