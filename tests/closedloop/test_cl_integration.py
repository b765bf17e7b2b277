"""The closed loop wired into the rest of h9eval: ``h9eval run --world``, ``[tasks] worlds`` and
``agents`` in sweeps, the ``episodes`` table, the report's closed-loop sections and the demo spec."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from h9eval.analysis import episodes as R
from h9eval.analysis import stats
from h9eval.analysis.report import write_report
from h9eval.analysis.report.closed_loop import failure_sections, success_sections, validation_sections
from h9eval.analysis.report.context import build_context
from h9eval.cli import main
from h9eval.cli.demo import CLOSEDLOOP_SPEC
from h9eval.closedloop.rows import episode_calls_frame, episode_row
from h9eval.runs.episode import world_task
from h9eval.runs.world import run_world
from h9eval.runs.spec import WorldRef, world_task_id
from h9eval.closedloop.worlds import world_registry
from h9eval.core.errors import ConfigError, FormatError
from h9eval.results.io import read_table, write_table
from h9eval.results.schema import CALL_COLUMNS, EPISODE_COLUMNS
from h9eval.results.store import drop_execution_columns, load_results
from h9eval.results.tables import episodes_table
from h9eval.sweeps.cells import expand_cells
from h9eval.sweeps.spec import load_spec
from h9eval.sweeps.sweep import sweep

GOLDEN = Path(__file__).resolve().parents[1] / "data"
SMALL = {"padding_bytes": 600}


# -- h9eval run --world ---------------------------------------------------------------------------
def test_cli_run_world_prints_the_episode_and_writes_its_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ep"
    rc = main(
        [
            "run",
            "--world",
            "fact_chain:1",
            "--policy",
            "progressive",
            "--set",
            "context_window_tokens=1500",
            "--world-set",
            "padding_bytes=600",
            "--out",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0
    assert text.startswith("episode world-fact_chain-")
    assert "success: True" in text and "excess_steps: 0" in text
    ep = read_table(out / "episodes.parquet", "episodes")
    calls = read_table(out / "calls.parquet", "calls")
    assert list(ep.columns) == list(EPISODE_COLUMNS) and len(ep) == 1
    row = ep.iloc[0]
    assert bool(row["success"]) and row["n_compactions"] > 0 and row["oracle_steps"] == row["steps"]
    assert list(calls.columns) == list(CALL_COLUMNS) and len(calls) == row["steps"]
    assert calls["compacted"].any() and (calls["call_index"].tolist() == list(range(len(calls))))
    assert (out / "episode.json").is_file()


def test_cli_run_world_drop_all_fails_and_counts_excess_steps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--world", "mini_repo:0", "--policy", "drop_all", "--world-set", "padding_bytes=600"]) == 0
    text = capsys.readouterr().out
    assert "success: False" in text and "hallucinated_completion: True" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--world", "fact_chan:1"], "unknown world 'fact_chan'; did you mean 'fact_chain'?"),
        (["run", "--world", "fact_chain"], "--world must be KIND:SEED"),
        (
            ["run", "--world", "fact_chain:1", "--world-set", "hopz=2"],
            "unknown parameter of world 'fact_chain' 'hopz'; did you mean 'hops'?",
        ),
        (
            ["run", "--world", "fact_chain:1", "--agent", "scripted:raw_onl"],
            "unknown reader profile 'raw_onl'; did you mean 'raw_only'?",
        ),
        (["run", "--world", "fact_chain:1", "--probes", "recall"], "--probes applies to --task replays only"),
        (["run", "--world", "fact_chain:1", "--task", "synthetic:small:0"], "give exactly one of --task"),
        (["run"], "give exactly one of --task"),
        (["run", "--task", "synthetic:small:0"], "--task: --out FOLDER is required"),
    ],
)
def test_cli_run_world_bad_input_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_run_world_is_deterministic() -> None:
    a = run_world("ticket_queue:2", policy="progressive", params={"context_window_tokens": 1500}, world_params=SMALL)
    b = run_world("ticket_queue:2", policy="progressive", params={"context_window_tokens": 1500}, world_params=SMALL)
    pd.testing.assert_frame_equal(a.episodes, b.episodes)
    pd.testing.assert_frame_equal(
        episode_calls_frame(a.episode, run_id="x", task_id="t"), episode_calls_frame(b.episode, run_id="x", task_id="t")
    )


def test_world_task_is_the_keep_all_transcript_with_its_facts() -> None:
    t = world_task(WorldRef(kind="fact_chain", params=SMALL, seed=3))
    assert (
        t.task_id == world_task_id("fact_chain", SMALL, 3)
        and t.task_id.startswith("world-fact_chain-")
        and t.task_id.endswith("-3")
    )
    assert world_task_id("fact_chain", {}, 3) == "world-fact_chain-3"
    assert t.facts and all(f.answer in t.messages[f.message_index].content for f in t.facts)


# -- spec ---------------------------------------------------------------------------------------
def _spec(tasks: dict, **extra: object) -> dict:
    return {"name": "cl", "tasks": tasks, "policies": [{"kind": "keep_all"}], **extra}


def test_spec_parses_worlds_and_agents() -> None:
    sp = load_spec(
        _spec(
            {
                "worlds": [
                    {"kind": "mini_repo", "seeds": [0, 2], "params": {"n_bugs": 2}, "max_steps": 30, "open_loop": False}
                ]
            },
            agents=["scripted", "scripted:raw_only"],
        )
    )
    (w,) = sp.worlds
    assert (w.kind, w.seeds, w.params, w.max_steps, w.open_loop) == ("mini_repo", (0, 2), {"n_bugs": 2}, 30, False)
    assert sp.agents == ("scripted", "scripted:raw_only")
    assert sp.to_dict()["tasks"]["worlds"][0]["seeds"] == [0, 2] and sp.to_dict()["agents"] == [
        "scripted",
        "scripted:raw_only",
    ]
    # one table instead of a list, a bare seed, the defaults
    sp = load_spec(_spec({"worlds": {"kind": "fact_chain", "seeds": 4}}))
    assert sp.worlds[0].seeds == (4,) and sp.worlds[0].open_loop and sp.agents == ("scripted",)


@pytest.mark.parametrize(
    ("tasks", "extra", "message"),
    [
        (
            {"worlds": [{"kind": "mini_rep"}]},
            {},
            "tasks.worlds[0].kind: unknown world 'mini_rep'; did you mean 'mini_repo'?",
        ),
        ({"worlds": [{"seeds": [0]}]}, {}, "tasks.worlds[0].kind: required"),
        (
            {"worlds": [{"kind": "mini_repo", "params": {"n_bug": 2}}]},
            {},
            "tasks.worlds[0].params: unknown parameter of world 'mini_repo' 'n_bug'; did you mean 'n_bugs'?",
        ),
        (
            {"worlds": [{"kind": "mini_repo", "params": {"n_bugs": "2"}}]},
            {},
            "tasks.worlds[0].params: world 'mini_repo': n_bugs must be an integer, got '2'",
        ),
        ({"worlds": [{"kind": "mini_repo", "seeds": [1, 1]}]}, {}, "tasks.worlds[0].seeds: must not repeat a seed"),
        (
            {"worlds": [{"kind": "mini_repo", "seeds": [-1]}]},
            {},
            "tasks.worlds[0].seeds: expected a non-empty list of non-negative integers",
        ),
        (
            {"worlds": [{"kind": "mini_repo", "seed": [1]}]},
            {},
            "tasks.worlds[0].seed: unknown key 'seed'; did you mean 'seeds'?",
        ),
        ({"worlds": [{"kind": "mini_repo", "max_steps": 0}]}, {}, "tasks.worlds[0].max_steps: must be an integer >= 1"),
        (
            {"worlds": [{"kind": "mini_repo", "open_loop": "yes"}]},
            {},
            "tasks.worlds[0].open_loop: must be true or false",
        ),
        ({"worlds": "mini_repo"}, {}, "tasks.worlds: expected a list of {kind, seeds, params} tables"),
        (
            {"worlds": [{"kind": "mini_repo"}]},
            {"agents": ["antropic"]},
            "agents[0]: unknown agent 'antropic'; did you mean 'anthropic'?",
        ),
        (
            {"worlds": [{"kind": "mini_repo"}]},
            {"agents": ["scripted:raw_onl"]},
            "agents[0]: unknown reader profile 'raw_onl'",
        ),
        ({"worlds": [{"kind": "mini_repo"}]}, {"agents": ["scripted", "scripted"]}, "agents: must not repeat an agent"),
        (
            {"worlds": [{"kind": "mini_repo"}]},
            {"agents": []},
            "agents: expected a list of agents (strings or {kind, profile, params} tables), got []",
        ),
    ],
)
def test_spec_bad_worlds_and_agents_are_refused_by_key_path(tasks: dict, extra: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_spec(_spec(tasks, **extra))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_spec_bad_world_in_a_toml_file_is_one_line_on_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        'name = "x"\n[tasks]\nworlds = [{ kind = "fact_chain", params = { hopz = 2 } }]\n[[policies]]\nkind = '
        '"keep_all"\n'
    )
    assert main(["sweep", str(p), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "tasks.worlds[0].params: unknown parameter of world 'fact_chain' 'hopz'" in err and err.count("\n") == 1


def test_cells_of_worlds(tmp_path: Path) -> None:
    sp = load_spec(
        {
            "name": "cl",
            "agents": ["scripted", "scripted:raw_only"],
            "history_modes": ["view", "write_back"],
            "tasks": {
                "worlds": [
                    {"kind": "fact_chain", "seeds": [0, 1], "params": SMALL},
                    {"kind": "mini_repo", "seeds": [0], "open_loop": False},
                ]
            },
            "policies": [{"kind": "keep_all"}, {"kind": "progressive", "grid": {"warn_frac": [0.5, 0.6]}}],
        }
    )
    cells, _ = expand_cells(sp, out_dir=tmp_path)
    episodes = [c for c in cells if c.cell_kind == "episode"]
    replays = [c for c in cells if c.cell_kind == "replay"]
    assert len(episodes) == 3 * 2 * 3 * 2  # world seeds x agents x grid points x history modes
    assert len(replays) == 2 * 3 * 2  # only fact_chain is exported (open_loop), no agent
    assert {c.spec.agent for c in episodes} == {"scripted", "scripted:raw_only"}
    assert {c.spec.agent for c in replays} == {""}
    assert all(c.spec.task.kind == "fact_chain" and c.task_spec.startswith("world:fact_chain:") for c in replays)
    assert len({c.run_id for c in cells}) == len(cells) and len({c.cell_hash for c in cells}) == len(cells)


# -- a sweep with worlds --------------------------------------------------------------------------
CL_SPEC = {
    "name": "cl",
    "tasks": {
        "worlds": [
            {"kind": k, "seeds": [0, 1, 2], "params": SMALL} for k in ("fact_chain", "mini_repo", "ticket_queue")
        ]
    },
    "policies": [
        {"kind": "progressive", "name": "harness9-default", "params": {"context_window_tokens": 1500}},
        {"kind": "keep_all"},
        {"kind": "drop_all"},
    ],
    "probes": {"scorers": ["recall"]},
}
#: a smaller sweep for resume and determinism: two reader profiles, one world
TINY_SPEC = {
    "name": "tiny",
    "agents": ["scripted", "scripted:raw_only"],
    "tasks": {"worlds": [{"kind": "ticket_queue", "seeds": [0, 1], "params": SMALL}]},
    "policies": [{"kind": "progressive", "params": {"context_window_tokens": 1500}}, {"kind": "keep_all"}],
    "probes": {"scorers": ["recall"]},
}


@pytest.fixture(scope="module")
def cl_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("clsweep") / "cl"
    res = sweep(CL_SPEC, out_dir=out, workers=0, progress=False)
    assert res.failed == 0, res.failures
    return out


def test_sweep_writes_episode_rows_and_calls(cl_sweep: Path) -> None:
    res = load_results(cl_sweep)
    ep = res.episodes
    assert len(ep) == 9 * 3 and list(ep.columns) == list(EPISODE_COLUMNS)
    assert str(ep["success"].dtype) == "boolean" and str(ep["steps"].dtype) == "Int64"
    keep = ep[ep["policy_name"] == "keep_all"]
    assert keep["success"].all() and (keep["excess_steps"] == 0).all()
    assert not ep[ep["policy_name"] == "drop_all"]["success"].any()
    assert ep["n_compactions"].max() > 0 and ep["oracle_steps"].notna().all()
    # every episode's calls rows are there, one per step, and its run row says so
    per_run = res.calls.groupby("run_id").size()
    assert (per_run.reindex(ep["run_id"]).to_numpy() == ep["steps"].to_numpy()).all()
    runs = res.runs.set_index("run_id")
    assert (runs.loc[ep["run_id"], "calls"].to_numpy() == ep["steps"].to_numpy()).all()
    # the exported worlds were replayed open loop with probes
    replays = res.runs[~res.runs["run_id"].isin(ep["run_id"])]
    assert len(replays) == 9 * 3 and set(replays["task_id"]) == set(ep["task_id"])
    assert set(res.probes["run_id"]) == set(replays["run_id"])
    # the episodes' loss ledger is in the ledger table beside the replays' (rounds counted in calls)
    led = res.ledger[res.ledger["run_id"].isin(ep["run_id"])]
    default = ep[ep["policy_name"] == "harness9-default"]["run_id"]
    assert 2 * len(set(led["run_id"]) & set(default)) >= len(default) and (led["basis"] == "compaction").any()
    dropped = led[led["run_id"].isin(ep[ep["policy_name"] == "drop_all"]["run_id"]) & (led["basis"] == "compaction")]
    assert len(dropped) and (dropped["state"] == "LOST").all()
    assert set(res.ledger["run_id"]) - set(ep["run_id"]) <= set(replays["run_id"])


def test_sweep_with_worlds_resumes_and_is_deterministic(tmp_path: Path) -> None:
    first = sweep(TINY_SPEC, out_dir=tmp_path / "a", workers=0, progress=False)
    assert first.failed == 0 and first.n_cells == 2 * 2 * 2 + 2 * 2  # episodes (seeds x agents x policies) + replays
    again = sweep(TINY_SPEC, out_dir=tmp_path / "a", workers=0, progress=False)
    assert again.ran == 0 and again.reused == again.n_cells
    other = sweep(TINY_SPEC, out_dir=tmp_path / "b", workers=2, progress=False)
    assert other.failed == 0
    a, b = load_results(first.out_dir), load_results(other.out_dir)
    assert set(a.episodes["agent_id"]) == {"scripted:full", "scripted:raw_only"}
    pd.testing.assert_frame_equal(a.episodes, b.episodes)
    pd.testing.assert_frame_equal(drop_execution_columns(a.calls, "calls"), drop_execution_columns(b.calls, "calls"))


# -- the episodes table ---------------------------------------------------------------------------
def test_episodes_table_round_trip_and_version_check(tmp_path: Path) -> None:
    run = run_world("fact_chain:0", policy="progressive", params={"context_window_tokens": 1500}, world_params=SMALL)
    row = episode_row(
        run.episode,
        oracle_steps=run.oracle_steps,
        run_id=run.run_id,
        task_id=run.task_id,
        policy_name="p",
        summarizer="offline",
        repeat=0,
    )
    df = episodes_table([row])
    write_table(df, tmp_path / "e.parquet", "episodes")
    back = read_table(tmp_path / "e.parquet", "episodes")
    pd.testing.assert_frame_equal(back.astype(EPISODE_COLUMNS), df)
    with pytest.raises(FormatError, match="holds the 'episodes' table; expected the 'calls' table"):
        read_table(tmp_path / "e.parquet", "calls")
    import pyarrow.parquet as pq

    t = pq.read_table(tmp_path / "e.parquet")
    pq.write_table(
        t.replace_schema_metadata({**t.schema.metadata, b"h9eval_schema_version": b"7"}), tmp_path / "v7.parquet"
    )
    with pytest.raises(FormatError, match="episodes table schema_version 7 is not supported"):
        read_table(tmp_path / "v7.parquet", "episodes")


def test_golden_results_without_episodes_load_with_an_empty_table() -> None:
    r = load_results(GOLDEN / "results-v1")
    assert len(r.runs) == 2 and len(r.episodes) == 0 and list(r.episodes.columns) == list(EPISODE_COLUMNS)


# -- analysis and the report ----------------------------------------------------------------------
def test_spearman_and_its_batched_form() -> None:
    import numpy as np

    assert stats.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert stats.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(stats.spearman([1, 2, 3], [1, 1, 1])) and math.isnan(stats.spearman([1, 2], [1, 2]))
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 4, size=(40, 8)).astype(float), rng.integers(0, 2, size=(40, 8)).astype(float)
    batched = stats.spearman_rows(x, y)
    single = np.array([stats.spearman(a, b) for a, b in zip(x, y)])
    # independently: Pearson's r of pandas' average ranks
    import pandas as pd

    for a, b in zip(x[:10], y[:10]):
        if len(set(a)) > 1 and len(set(b)) > 1:
            assert stats.spearman(a, b) == pytest.approx(
                float(np.corrcoef(pd.Series(a).rank(), pd.Series(b).rank())[0, 1])
            )
    assert np.array_equal(np.isnan(batched), np.isnan(single)) and np.allclose(
        batched[~np.isnan(single)], single[~np.isnan(single)]
    )
    with pytest.raises(ConfigError, match="same length"):
        stats.spearman([1, 2, 3], [1, 2])


def test_success_cost_and_failure_modes(cl_sweep: Path) -> None:
    res = load_results(cl_sweep)
    ep = R.episode_table(res)
    sc = R.success_cost(ep, n_boot=200).set_index(["agent", "config"])
    keep = sc.loc[("scripted:full", "keep_all")]
    assert keep["success"] == 1.0 and (keep["n_worlds"], keep["n_seeds"]) == (3, 9) and math.isnan(keep["success_diff"])
    drop = sc.loc[("scripted:full", "drop_all")]
    assert drop["success"] == 0.0 and drop["success_diff"] == -1.0 and drop["tokens_diff"] < 0
    # three worlds are three units, whatever the seeds: too few for a verdict
    assert drop["success_verdict"] == "insufficient units"
    assert drop["tokens_sent_lo"] <= drop["tokens_sent"] <= drop["tokens_sent_hi"]
    fm = R.failure_modes(ep).set_index(["agent", "config"])
    assert fm.loc[("scripted:full", "drop_all"), "failed"] == 9 and fm.loc[("scripted:full", "keep_all"), "failed"] == 0
    assert fm.loc[("scripted:full", "drop_all"), "hallucinated_completion"] == 9


def test_validation_study_pairs_open_and_closed_loop(cl_sweep: Path) -> None:
    v = R.validation_study(load_results(cl_sweep), n_boot=200)
    assert set(v.pairs["agent_id"]) == {"scripted:full"}
    assert len(v.pairs) == 3 * 9  # configurations x tasks
    keep = v.per_config.set_index(["agent", "config"]).loc[("scripted:full", "keep_all")]
    assert keep["mean_retention"] == 1.0 and math.isnan(keep["rho"])  # always succeeds: nothing to predict
    pooled = v.pooled.set_index("agent").loc["scripted:full"]
    assert pooled["n_pairs"] == 27 and pooled["rho"] > 0 and pooled["rho_lo"] <= pooled["rho"] <= pooled["rho_hi"]
    assert len(v.probes) and (v.probes["task_id"].nunique() if "task_id" in v.probes else 3) >= 3
    rho = v.probes["rho"].dropna()
    assert rho.is_monotonic_decreasing and (v.probes["n_pairs"] >= 3).all()


def test_report_has_the_closed_loop_sections(cl_sweep: Path, tmp_path: Path) -> None:
    paths = write_report(cl_sweep, out_dir=tmp_path / "rep", n_boot=100)
    html = Path(paths.html).read_text(encoding="utf-8")
    assert "h9eval closed-loop report: cl" in html
    for title in (
        "Closed loop: success and cost",
        "Closed loop: failure modes",
        "Validation: does open-loop retention predict closed-loop success?",
        "Closed loop: tier mix and failure modes",
        "Closed loop: what compaction lost, and what the agent did next",
    ):
        assert title in html
    names = {Path(f).name for f in paths.figures}
    assert {
        "closedloop_frontier.png",
        "closedloop_failures.png",
        "closedloop_validation.png",
        "closedloop_survival_view.png",
    } <= names
    # the tier mix per configuration and per family, and the episodes' diff pages, harness9's default first
    assert "calls none · warn · soft · full · emergency (%)" in html and "episodes reaching soft/full" in html
    pages = sorted((tmp_path / "rep" / "ledger").glob("world-*.html"))
    assert pages and "harness9-default" in html[html.index("Diff view of") :][:200]
    assert any("touched at call" in p.read_text(encoding="utf-8") for p in pages)
    # a closed-loop report of its own: no open-loop section that does not apply, no internal error
    for title in (
        "Token-estimate error",
        "Probe validity",
        "Policies compared",
        "Token curves",
        "Drift",
        "Strategy comparison",
    ):
        assert title not in html, title
    assert "Error:" not in html and "no such file" not in html
    # the answer box first: success and tokens sent per agent against harness9's default
    md = Path(paths.markdown).read_text(encoding="utf-8")
    answer = md[md.index("## 1. The answer") : md.index("## 2.")]
    # (this sweep runs harness9's default and the controls only: the answer says there is nothing to compare)
    assert (
        "harness9's default (harness9-default) has no configuration to compare with here. Left out: "
        "drop_all (a control), keep_all (a control)" in answer
    )
    assert "scripted stand-in" in answer
    # the open-loop sections see the replays only
    res = load_results(cl_sweep)
    ol = R.without_episode_runs(res)
    assert not set(ol.runs["run_id"]) & set(res.episodes["run_id"]) and not set(ol.calls["run_id"]) & set(
        res.episodes["run_id"]
    )
    assert len(ol.ledger) and not set(ol.ledger["run_id"]) & set(res.episodes["run_id"])


def test_report_without_episodes_has_no_closed_loop_section() -> None:
    ctx = build_context(load_results(GOLDEN / "results-v1"), n_boot=50)
    assert not ctx.closed_loop
    assert success_sections(ctx) == [] and failure_sections(ctx) == [] and validation_sections(ctx) == []


# -- the demo -------------------------------------------------------------------------------------
def test_demo_closed_loop_spec_covers_the_policies_and_worlds(tmp_path: Path) -> None:
    sp = load_spec(CLOSEDLOOP_SPEC)
    assert {w.kind for w in sp.worlds} == set(world_registry())  # every family, at its default scale
    assert all(w.scale == "default" and w.window is not None and w.window >= 32_000 for w in sp.worlds)
    assert {p.kind for p in sp.policies} == {
        "progressive",
        "observation_masking",
        "hybrid",
        "summary_single_threshold",
        "keep_all",
        "drop_all",
    }
    cells, _ = expand_cells(sp, out_dir=tmp_path)
    n_seeds = sum(len(w.seeds) for w in sp.worlds)
    assert (
        sum(c.cell_kind == "episode" for c in cells) == n_seeds * 2 * 6
        and sum(c.cell_kind == "replay" for c in cells) == n_seeds * 6
    )


def test_cli_run_world_replays_a_live_cassette(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live agent from the CLI, offline: an episode recorded through the fake model replays
    from its cassette; no oracle is run (a second paid episode, and not in the cassette)."""
    from cl_fake_model import CASSETTE_WORLD, KEY, MODEL, FakeModel

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    wparams = {k: v for k, v in CASSETTE_WORLD.items() if k != "kind"}
    cassette = tmp_path / "c.jsonl"
    common = {
        "policy": "progressive",
        "params": {"context_window_tokens": 1300},
        "world_params": wparams,
        "max_steps": 30,
    }
    rec = run_world(
        "fact_chain:3",
        agent="anthropic",
        **common,  # type: ignore[arg-type]
        agent_params={
            "model": MODEL,
            "max_tokens": 512,
            "cassette": str(cassette),
            "mode": "record",
            "api_key": KEY,
            "base_url": "http://fake.invalid",
            "http_client": FakeModel().client(),
        },
    )
    assert rec.episode.success and rec.oracle is None and rec.excess_steps is None
    wset = [x for k, v in wparams.items() for x in ("--world-set", f"{k}={v}")]
    argv = [
        "run",
        "--world",
        "fact_chain:3",
        "--agent",
        "anthropic",
        "--agent-set",
        f"cassette={cassette}",
        "--agent-set",
        f"model={MODEL}",
        "--agent-set",
        "max_tokens=512",
        "--policy",
        "progressive",
        "--set",
        "context_window_tokens=1300",
        "--max-steps",
        "30",
        *wset,
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "success: True" in text and "excess_steps: None" in text and f"steps: {rec.episode.n_steps}" in text
