"""A sweep applies the placebo control to its own probe rows: every probe row carries its rate
against at least 8 unrelated histories, the excluded ones are flagged, and the retention of the
results leaves them out."""

from __future__ import annotations

import json
from pathlib import Path

from h9eval.analysis import metrics as M
from h9eval.probes.placebo import DEFAULT_PLACEBO_PARTNERS, PLACEBO_FALSE_PASS_RATE
from h9eval.results.store import PLACEBO_FILE, load_results
from h9eval.sweeps.sweep import sweep


def test_a_sweep_fills_the_placebo_columns_and_retention_leaves_the_excluded_out(tmp_path: Path) -> None:
    spec = {
        "name": "pl",
        "tasks": {"synthetic": [{"preset": "small", "seeds": [0, 1]}]},
        "policies": [{"kind": "keep_all"}],
        "probes": {"scorers": ["recall"], "every_k": 40},
    }
    out = tmp_path / "pl"
    r = sweep(spec, out_dir=out, workers=0, progress=False)
    assert r.ok == 2
    saved = json.loads((out / PLACEBO_FILE).read_text())
    assert saved["min_partners"] == DEFAULT_PLACEBO_PARTNERS and saved["false_pass_rate"] == PLACEBO_FALSE_PASS_RATE
    assert saved["partners_per_task"] == [DEFAULT_PLACEBO_PARTNERS]  # 1 unrelated task + 7 generated
    res = load_results(out)
    p = res.probes[(res.probes["method"] == "recall") & res.probes["answerable"].astype(bool)]
    assert p["placebo_rate"].notna().all()
    excluded = p["placebo_excluded"].astype(bool)
    assert excluded.any() and (~excluded).any()
    assert (p.loc[excluded, "placebo_rate"] > PLACEBO_FALSE_PASS_RATE).all()
    # the headline retention is the mean over the kept, unpinned rows: computed here by hand
    view = p[(p["scope"] == "view") & ~excluded & ~p["answer_pinned"].astype(bool)]
    by_hand = view.groupby("run_id")["score"].mean()
    got = M.retention(res.probes, by=("run_id",)).set_index("run_id")["retention"]
    assert got.to_dict() == by_hand.to_dict()
    assert json.loads((out / "manifest.json").read_text())["placebo"]["n_excluded"] == saved["n_excluded"] > 0
