"""tune: model registry, grid/refinement, constraints, TOML output and the CLI on one tiny task."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from h9eval.cli import main
from h9eval.compaction.policies import policy_from_dict
from h9eval.core.errors import ConfigError
from h9eval.analysis.tune import MODELS, load_models, model_info, to_toml, tune

TASK = "synthetic:small:0"
GRID = {"warn_frac": [0.5, 0.6], "min_tail_messages": [4, 8]}


def test_model_registry_and_override(tmp_path: Path) -> None:
    assert MODELS["claude-sonnet-4-5"]["context_window_tokens"] == 200_000
    assert MODELS["gpt-4o-mini"]["context_window_tokens"] == 128_000
    assert MODELS["kimi-k3"]["context_window_tokens"] == 1_048_576
    with pytest.raises(ConfigError, match="did you mean 'gpt-4o-mini'"):
        model_info("gpt-4o-mni")
    f = tmp_path / "models.toml"
    f.write_text('[models."my-model"]\ncontext_window_tokens = 32000\ninput_usd_per_mtok = 1.0\n\n[models."gpt-4o"]\ncontext_window_tokens = 64000\n')
    reg = load_models(f)
    assert reg["my-model"]["context_window_tokens"] == 32000 and reg["gpt-4o"]["context_window_tokens"] == 64000
    assert reg["gpt-4o"]["input_usd_per_mtok"] == 2.5  # fields not overridden are kept
    j = tmp_path / "models.json"
    j.write_text(json.dumps({"tiny": 8000}))
    assert load_models(j)["tiny"]["context_window_tokens"] == 8000
    j.write_text(json.dumps({"bad": -1}))
    with pytest.raises(ConfigError, match="positive integer"):
        load_models(j)


def test_to_toml_round_trips_through_policy_from_dict() -> None:
    text = to_toml({"context_window_tokens": 1000, "warn_frac": 0.5, "extra_anchors": ["constraint"], "na_safe_merge": True, "tail_budget_tokens": None}, comment="x\ny")
    d = tomllib.loads(text)["policy"]
    p = policy_from_dict(d)
    assert p.warn_frac == 0.5 and p.extra_anchors == ("constraint",) and p.na_safe_merge and p.tail_budget_tokens is None


def test_tune_tiny(tmp_path: Path) -> None:
    r = tune([TASK], window=14_000, grid=GRID, refine_rounds=1, out_dir=tmp_path / "t")
    ev = r.evidence
    assert (ev["stage"] == "grid").sum() == 4 and (ev["stage"] == "refine1").sum() > 0  # it did refine
    assert ev["best"].sum() == 1 and r.feasible
    best = ev[ev["best"]].iloc[0]
    feas = ev[ev["feasible"]]
    assert best["retention"] == feas["retention"].max()
    assert best["overflows"] == 0 and best["emergencies"] == 0
    d = tomllib.loads(r.toml)["policy"]
    assert d["context_window_tokens"] == 14_000 and d["kind"] == "progressive"
    assert policy_from_dict(d).warn_frac == r.params["warn_frac"]
    for k in ("toml", "evidence", "figure"):
        assert r.paths[k].exists()
    assert r.figure().axes


def test_tune_constraints_make_configs_infeasible() -> None:
    # a bound no config meets: the result says so and keeps the least-violating config
    r = tune([TASK], window=14_000, grid={"warn_frac": [0.5, 0.6]}, refine_rounds=0, max_summarizer_calls=0)
    assert not r.feasible and not r.evidence["feasible"].any()
    assert "WARNING" in r.toml
    # the model's prices turn the offline summarizer's tokens into a cost bound
    r = tune([TASK], model="claude-sonnet-4-5", window=14_000, grid={"warn_frac": [0.5]}, refine_rounds=0, max_cost_usd=1e-9)
    assert r.evidence["cost_usd_per_run"].iloc[0] > 0 and not r.feasible


def test_tune_validates_inputs() -> None:
    with pytest.raises(ConfigError, match="window"):
        tune([TASK])
    with pytest.raises(ConfigError, match="did you mean 'warn_frac'"):
        tune([TASK], window=1000, grid={"warn_fracc": [0.5]})
    with pytest.raises(ConfigError, match="no valid config"):
        tune([TASK], window=1000, grid={"warn_frac": [0.9], "soft_frac": [0.8]})


def test_tune_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["tune", "--tasks", TASK, "--window", "14000", "--grid", json.dumps({"warn_frac": [0.5, 0.6]}), "--refine-rounds", "0", "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "[policy]" in out and (tmp_path / "recommended.toml").exists()
    assert main(["tune", "--tasks", TASK, "--model", "nope"]) == 2
