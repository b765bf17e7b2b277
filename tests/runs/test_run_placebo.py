"""A single run applies the placebo control as a sweep does: its probe rows carry their rate
against 8 unrelated histories (generated synthetic partners: one task has no other), in memory
and in the run folder, and retention leaves the excluded ones out."""

from __future__ import annotations

import json
from pathlib import Path

from h9eval.probes.placebo import DEFAULT_PLACEBO_PARTNERS, PLACEBO_FALSE_PASS_RATE
from h9eval.results.io import read_table
from h9eval.runs.run import run_task


def test_a_run_with_probes_fills_the_placebo_columns_in_memory_and_on_disk(tmp_path: Path) -> None:
    (r,) = run_task(
        "synthetic:small:0", "keep_all", probes=["recall"], probe_every_k=40, window=16_000, out_dir=tmp_path / "run"
    )
    p = r.probes[(r.probes["method"] == "recall") & r.probes["answerable"].astype(bool)]
    assert p["placebo_rate"].notna().all() and p["placebo_excluded"].astype(bool).any()
    assert (p.loc[p["placebo_excluded"].astype(bool), "placebo_rate"] > PLACEBO_FALSE_PASS_RATE).all()
    saved = json.loads((tmp_path / "run" / "placebo.json").read_text())
    assert saved["n_partners"] == [DEFAULT_PLACEBO_PARTNERS]
    on_disk = read_table(tmp_path / "run" / "probes.parquet", "probes")
    assert on_disk["placebo_excluded"].astype(bool).tolist() == r.probes["placebo_excluded"].astype(bool).tolist()
