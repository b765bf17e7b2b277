"""coverage: which configurations the data exercised, checked on small hand-built tables."""

from __future__ import annotations

import math

import pandas as pd

from h9eval.analysis import coverage as C
from h9eval.analysis import metrics as M

_TIER = {t: i for i, t in enumerate(M.TIER_NAMES)}


def _calls(
    run_id: str,
    task: str,
    tiers: list[str],
    *,
    kind: str = "progressive",
    raw: list[int] | None = None,
    mode: str = "view",
) -> pd.DataFrame:
    n = len(tiers)
    return pd.DataFrame(
        {
            "run_id": [run_id] * n,
            "task_id": [task] * n,
            "policy_kind": [kind] * n,
            "params_hash": ["h"] * n,
            "history_mode": [mode] * n,
            "call_index": list(range(n)),
            "context_window_tokens": [1000] * n,
            "history_tokens": [100] * n,
            "tokens_sent": [100] * n,
            "raw_tokens_sent": raw or [100 * (i + 1) for i in range(n)],
            "tier": [_TIER[t] for t in tiers],
            "tier_name": tiers,
            "compacted": [t != "none" for t in tiers],
            "overflow": [False] * n,
            "forced_truncation": [t == "emergency" for t in tiers],
            "fallback": [False] * n,
            "summarizer_calls": [0] * n,
            "summarizer_cost_usd": [0.0] * n,
        }
    )


def test_coverage_counts_tasks_per_tier_and_flags_never_compacted() -> None:
    calls = pd.concat(
        [
            _calls("a--p", "a", ["none", "warn", "soft", "none"]),  # raw peak 400/1000: below warn
            _calls("b--p", "b", ["none", "full", "none", "none", "none", "none", "none"]),  # raw peak 0.7
            _calls("c--p", "c", ["none", "none"]),  # never compacts
            _calls("a--k", "a", ["none"] * 4, kind="keep_all"),
            _calls("b--k", "b", ["none"] * 7, kind="keep_all"),
        ],
        ignore_index=True,
    )
    cov = C.coverage(calls).set_index("label")
    assert tuple(C.coverage(calls).columns) == C.COVERAGE_COLUMNS
    p = cov.loc["progressive"]
    assert (p["n_tasks"], p["reached_warn"], p["reached_soft"], p["reached_full"], p["reached_emergency"]) == (
        3,
        2,
        2,
        1,
        0,
    )
    assert p["n_compactions"] == 3 and p["never_compacted_tasks"] == 1 and p["never_compacted_task_ids"] == "c"
    assert p["uncompacted_over_warn"] == 1  # only b's raw transcript reaches 0.6 of the window
    k = cov.loc["keep_all"]
    assert (
        k["n_tasks"],
        k["reached_warn"],
        k["n_compactions"],
        k["never_compacted_tasks"],
        k["never_compacted_task_ids"],
    ) == (2, 0, 0, 2, "a, b")
    assert C.never_compacted(calls) == {"keep_all (view)": ["a", "b"], "progressive (view)": ["c"]}
    rc = C.run_coverage(calls).set_index("run_id")
    assert rc.loc["b--p", "max_tier"] == "full" and math.isclose(rc.loc["b--p", "uncompacted_peak_ratio"], 0.7)
    assert bool(rc.loc["c--p", "never_compacted"]) and not bool(rc.loc["a--p", "never_compacted"])


def test_conditional_retention_is_next_to_the_main_number_never_in_it() -> None:
    rm = pd.DataFrame(
        {
            "label": ["x", "x", "y"],
            "history_mode": ["view"] * 3,
            "summarizer": ["offline"] * 3,
            "retention": [1.0, 0.6, 0.9],
            "retention_after_compaction": [math.nan, 0.2, 0.5],
            "never_compacted": [True, False, False],
        }
    )
    t = C.conditional_retention(rm).set_index("label")
    assert math.isclose(t.loc["x", "retention"], 0.8) and math.isclose(t.loc["x", "retention_after_compaction"], 0.2)
    assert t.loc["x", "runs_with_compaction_before_a_checkpoint"] == 1 and t.loc["x", "never_compacted_runs"] == 1
    blocks = C.coverage_blocks(_calls("a--p", "a", ["none", "soft"]), None, rm)
    assert [b[0] for b in blocks] == ["table", "table"]


def test_the_demo_exercises_harness9s_default_on_every_task(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The demo's claim (examples/demo.toml), checked with the coverage table: at the demo's
    windows (0.6 of each task's own uncompacted peak) harness9's default never overflows, reaches
    the full tier on every task in view mode, and in write-back mode (where the offload written
    back shrinks the history) the soft tier on every recorded task; every task compacts."""
    import tomllib

    from h9eval.cli.demo import DEMO_SPEC
    from h9eval.core.paths import shared_dir
    from h9eval.results.store import load_results
    from h9eval.sweeps.sweep import sweep

    monkeypatch.setenv("H9EVAL_SHARED", str(shared_dir()))
    spec = tomllib.loads(DEMO_SPEC.read_text(encoding="utf-8"))
    assert spec["window"] == {"peak_frac": 0.6}
    spec["policies"] = [p for p in spec["policies"] if p.get("name") == "harness9-default"]
    spec |= {"name": "demo-coverage", "probes": {}, "summarizer": {"name": "offline"}}
    r = sweep(spec, out_dir=tmp_path / "o", workers=0, progress=False)
    assert r.failed == 0 and r.ok >= 28
    res = load_results(tmp_path / "o")
    assert int(res.calls["overflow"].sum()) == 0
    per_run = C.run_coverage(res.calls, res.runs)
    assert not per_run["never_compacted"].any()
    order = {t: i for i, t in enumerate(("none", "warn", "soft", "full", "emergency"))}
    rank = per_run["max_tier"].map(order)
    view, wb = per_run["history_mode"] == "view", per_run["history_mode"] == "write_back"
    assert (rank[view] >= order["full"]).all()
    recorded = ~per_run["task_id"].str.startswith("synthetic")
    assert (rank[wb & recorded] >= order["soft"]).all() and (wb & recorded).sum() >= 10


def test_coverage_uses_the_given_configuration_names() -> None:
    calls = pd.concat([_calls("a--p", "a", ["none", "soft"]), _calls("b--p", "b", ["none"])], ignore_index=True)
    cov = C.coverage(calls, names={"a--p": "h9-default", "b--p": "h9-default"})
    assert list(cov["label"]) == ["h9-default"] and cov["never_compacted_task_ids"].iloc[0] == "b"
