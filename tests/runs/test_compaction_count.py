"""One definition of "a compaction" (issue 21): a call whose compaction changed what is sent
(``Compaction.changed_what_is_sent``, the calls table's ``compacted``). The records harness9
writes at every call above the warn threshold, also where nothing changed, are counted apart as
``compaction_records`` — in the run summary, the sweep's runs table and the report alike."""

from __future__ import annotations

from pathlib import Path

from h9eval.compaction.policies import make_policy
from h9eval.results.store import load_results
from h9eval.runs.replay import ReplayConfig, replay
from h9eval.sweeps.sweep import sweep
from h9eval.tasks.synthetic import generate


def _view_mode_run() -> dict:
    # write-back at a small window: after a write-back harness9 still writes a record at calls
    # above a threshold where there is nothing left to take away, so the two counts differ
    res = replay(
        generate("small", seed=0),
        make_policy("progressive", context_window_tokens=16_000),
        config=ReplayConfig(history_mode="write_back"),
    )
    return {"res": res, "s": res.summary()}


def test_the_summary_counts_compactions_and_records_apart() -> None:
    r = _view_mode_run()
    res, s = r["res"], r["s"]
    assert s["compactions"] == int(res.calls["compacted"].sum()) == sum(s["compactions_by_tier"].values())
    assert s["compaction_records"] == len(res.compactions) == len(res.records)
    assert s["compaction_records"] > s["compactions"] > 0, "the state where the two differ must be reached"
    # every compacted call changed the view; every other record changed nothing
    changed = [
        rec
        for rec in res.records
        if rec.msgs_after != rec.msgs_before or rec.tokens_after != rec.tokens_before or rec.offloaded
    ]
    assert len(changed) >= s["compactions"]


def test_the_sweep_row_uses_the_same_two_counts(tmp_path: Path) -> None:
    spec = {
        "name": "count",
        "history_modes": ["write_back"],
        "tasks": {"synthetic": [{"preset": "small", "seeds": [0]}]},
        "policies": [{"kind": "progressive", "params": {"context_window_tokens": 16_000}}],
    }
    res = load_results(sweep(spec, out_dir=tmp_path / "count", workers=0, progress=False).out_dir)
    row = res.runs.iloc[0]
    s = _view_mode_run()["s"]
    assert int(row["n_compactions"]) == s["compactions"]
    assert int(row["compaction_records"]) == s["compaction_records"] == len(res.compactions)
